"""A single-node Slurm cluster on 127.0.0.1 for tests: munged, slurmctld and slurmd from
Debian's packages (``make slurm`` installs them), started with files in one temporary folder
and stopped by their pids.

Nothing outside that folder is read or written: munged gets its own key, socket, pid and seed
files (Slurm's ``AuthInfo=socket=`` points at that socket), and the ports are free ones, so two
test runs on one machine get two clusters. No cgroups: ``proctrack/linuxproc`` follows a job's
processes by their parents and ``task/none`` binds nothing. Slurm 22.05 runs its daemons as
root here; ``unavailable()`` says why a cluster cannot start (not installed, not root) so that
the test can skip with that reason.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.chat_server import free_ports

BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scancel", "sinfo")


def _which(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/bin:/sbin:/bin")


def unavailable() -> str | None:
    """Why no cluster can start here (None: it can)."""
    missing = [b for b in BINARIES if _which(b) is None]
    if missing:
        return (f"Slurm/munge not installed (missing {', '.join(missing)}): `make slurm` "
                f"installs Debian's slurm-wlm and munge as root")
    if os.geteuid() != 0:
        return "the test's Slurm daemons run as root (SlurmUser=root); this is not root"
    return None


@dataclass
class Cluster:
    workdir: Path
    # More than the machine's cores (config_overrides lets slurmd accept it): the three tasks
    # of a sweep mostly wait on their servers and git, so they all start at once.
    cpus: int = 4
    started_s: float = 0.0

    @property
    def conf(self) -> Path:
        return self.workdir / "slurm.conf"

    def env(self) -> dict[str, str]:
        """What the Slurm client commands (sbatch, squeue, scancel) need to find this cluster."""
        return {"SLURM_CONF": str(self.conf)}

    def _write(self) -> None:
        host = socket.gethostname().split(".")[0]
        ctld_port, d_port = free_ports(2)
        mem = max(512, _mem_mib() // 2)
        w = self.workdir
        for sub in ("state", "spool"):
            (w / sub).mkdir(parents=True, exist_ok=True)
        self.conf.write_text("\n".join([
            "ClusterName=rimotest", f"SlurmctldHost={host}(127.0.0.1)",
            f"SlurmctldPort={ctld_port}", f"SlurmdPort={d_port}",
            "AuthType=auth/munge", f"AuthInfo=socket={w / 'munge.socket'}",
            "CredType=cred/munge",
            "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none",
            "SchedulerType=sched/backfill", "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core", f"StateSaveLocation={w / 'state'}",
            f"SlurmdSpoolDir={w / 'spool'}", f"SlurmctldPidFile={w / 'slurmctld.pid'}",
            f"SlurmdPidFile={w / 'slurmd.pid'}", f"SlurmctldLogFile={w / 'slurmctld.log'}",
            f"SlurmdLogFile={w / 'slurmd.log'}", "SlurmUser=root", "ReturnToService=2",
            "MpiDefault=none", "JobAcctGatherType=jobacct_gather/none",
            # scancel: SIGTERM, then SIGKILL 5 s later (time to write a record).
            "KillWait=5", "SchedulerParameters=sched_interval=1",
            "SlurmdParameters=config_overrides",
            f"NodeName={host} NodeAddr=127.0.0.1 CPUs={self.cpus} RealMemory={mem} "
            f"State=UNKNOWN",
            f"PartitionName=main Nodes={host} Default=YES MaxTime=INFINITE State=UP", ""]))

    def start(self, timeout_s: float = 60) -> Cluster:
        started = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.workdir, 0o700)  # munged refuses a key or socket in an open folder
        key = self.workdir / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o400)
        w = self.workdir
        self._run([_need("munged"), "--force", f"--key-file={key}",
                   f"--socket={w / 'munge.socket'}", f"--pid-file={w / 'munged.pid'}",
                   f"--log-file={w / 'munged.log'}", f"--seed-file={w / 'munged.seed'}"])
        self._write()
        self._run([_need("slurmctld"), "-f", str(self.conf)])
        self._run([_need("slurmd"), "-f", str(self.conf)])
        deadline = time.monotonic() + timeout_s
        state = ""
        while time.monotonic() < deadline:
            state = self.client("sinfo", "-h", "-o", "%T", check=False).stdout.strip()
            if state == "idle":
                self.started_s = time.monotonic() - started
                return self
            time.sleep(0.5)
        logs = self.logs()
        self.stop()
        raise RuntimeError(f"the Slurm node is not idle after {timeout_s} s ({state!r}):\n{logs}")

    def _run(self, argv: list[str]) -> None:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, check=False,
                              env={**os.environ, **self.env()})
        if proc.returncode != 0:
            logs = self.logs()
            self.stop()
            raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}): "
                               f"{proc.stderr.strip()}\n{logs}")

    def client(self, *argv: str, check: bool = True, env: dict[str, str] | None = None,
               cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([_need(argv[0]), *argv[1:]], capture_output=True, text=True,
                              timeout=60, check=False, cwd=cwd,
                              env={**os.environ, **(env or {}), **self.env()})
        if check and proc.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({proc.returncode}): "
                                 f"{proc.stderr.strip()}\n{self.logs()}")
        return proc

    def queued(self, job: str) -> list[str]:
        """``ID STATE`` of each task of ``job`` still pending or running."""
        out = self.client("squeue", "-h", "-r", "-j", job, "-o", "%i %T", check=False).stdout
        return [line for line in out.splitlines() if line.strip()]

    def wait_done(self, job: str, timeout_s: float = 300) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.queued(job):
                return
            time.sleep(0.5)
        raise AssertionError(f"job {job} not done after {timeout_s} s: {self.queued(job)}")

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-2000:]}"
                         for p in sorted(self.workdir.glob("*.log")))

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self.client("scancel", "--user=root", check=False)
        for name in ("slurmd", "slurmctld", "munged"):
            _kill_by_pidfile(self.workdir / f"{name}.pid")


def _need(name: str) -> str:
    found = _which(name)
    if found is None:
        raise RuntimeError(f"{name} not found (`make slurm` installs slurm-wlm and munge)")
    return found


def _mem_mib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) // 1024
    return 2048


def _kill_by_pidfile(path: Path, timeout_s: float = 15) -> None:
    try:
        pid = int(path.read_text().strip())
    except (OSError, ValueError):
        return
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def running(workdir: Path) -> Iterator[Cluster]:
    cluster = Cluster(workdir).start()
    try:
        yield cluster
    finally:
        cluster.stop()
