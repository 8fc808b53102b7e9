"""The rules a sweep file's strings obey before any of them reaches sweep.sbatch, a shell, Slurm
or git (issue 42): data, never code.

- No control character (C0, DEL, C1, U+2028/U+2029) and no lone surrogate anywhere in the file:
  a newline in ``models[].path`` was a command line of the script. The one exception is a
  ``params`` value, which may hold TAB and LF (a system prompt): it only reaches ``dvc exp run``
  as one argv word and the script's comments, where ``comment`` escapes it.
- A word of a command line that is not an option never starts with ``-`` (``--upload-pack=``).
- ``git_remote``: a URL, an absolute path or a remote's name, checked before any git command.
- The values substituted into a ``server.command`` the sweep file writes are plain words (what
  ``shlex.quote`` leaves as it is): the command may hand a word to a shell (``sh -c '...'``) or
  another interpreter, where quoting cannot be known; other values reach the server through its
  environment (``$RIMO_MODEL_PATH``).
- A value on a ``#SBATCH`` line has no blank, quote, backslash or ``%``: Slurm splits the line
  there and expands ``%`` patterns in file names.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from rimo_eval.errors import ConfigError
from rimo_eval.io.surrogates import escaped, first_lone_surrogate

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_CONTROL_PROSE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")  # TAB and LF pass
_SLURM_UNSAFE = re.compile(r"[\s\"'\\%]")
_REMOTE_NAME = re.compile(r"[A-Za-z0-9._][A-Za-z0-9._-]*")
# user@host:path, as git reads it (no slash before the colon); host never an option.
_SCP = re.compile(r"(?:[A-Za-z0-9._~-]+@)?[A-Za-z0-9_][A-Za-z0-9._-]*:[^:]\S*")
_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
GIT_SCHEMES = ("https", "http", "ssh", "git", "file")


def check_strings(path: Path, where: str, value: Any, *, prose: bool = False) -> None:
    """Every string in ``value`` (keys too, all the way down) is free of control characters
    (``prose``: but TAB and LF) and of lone surrogates; else an error naming the key path."""
    if isinstance(value, dict):
        for key, item in value.items():
            check_strings(path, f"{where}.{escaped(key)}", key, prose=prose)
            check_strings(path, f"{where}.{escaped(key)}", item, prose=prose)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            check_strings(path, f"{where}.{index}", item, prose=prose)
    elif isinstance(value, str):
        lone = first_lone_surrogate(value)
        if lone is not None:
            raise ConfigError(f"{path}: {where}: holds a lone UTF-16 surrogate "
                              f"{escaped(lone[0])} at character {lone[1]}, which no file, "
                              f"command line or git can carry")
        bad = (_CONTROL_PROSE if prose else _CONTROL).search(value)
        if bad is not None:
            allowed = " (a params value may hold TAB and LF only)" if prose else ""
            raise ConfigError(f"{path}: {where}: holds the control character "
                              f"U+{ord(bad.group()):04X} at character {bad.start()}{allowed}: "
                              f"sweep values reach sweep.sbatch, a shell and git as data, and "
                              f"a control character there could end a line and start a command")


def not_option(path: Path, where: str, value: str) -> str:
    if value.startswith("-"):
        raise ConfigError(f"{path}: {where}: {value!r} starts with '-', which the command it "
                          f"is passed to would read as an option")
    return value


def plain_word(path: Path, where: str, value: str, placeholder: str, env: str) -> str:
    if shlex.quote(value) != value or value.startswith("-"):
        raise ConfigError(f"{path}: {where}: {value!r} is substituted into server.command as "
                          f"{{{placeholder}}}, which a shell or interpreter may read as code: "
                          f"there it must be a plain word (letters, digits and @%+=:,./_-, not "
                          f"starting with '-'); for any other value write \"${env}\" in the "
                          f"command (the server's environment holds it), e.g. "
                          f"sh -c 'exec vllm serve \"${env}\"'")
    return value


def slurm_word(path: Path, where: str, value: str) -> str:
    bad = _SLURM_UNSAFE.search(value)
    if bad is not None:
        raise ConfigError(f"{path}: {where}: {value!r} goes on an #SBATCH line, where Slurm "
                          f"splits at blanks and quotes and expands '%': {bad.group()!r} at "
                          f"character {bad.start()} is not allowed")
    return value


def check_git_remote(where: str, value: str) -> str:
    """``value`` when it is a git URL (https, http, ssh, git, file; user@host:path), an
    absolute path or a remote's name; else ConfigError. Nothing here runs git."""
    bad = _CONTROL.search(value)
    if bad is not None:
        raise ConfigError(f"{where}: holds the control character U+{ord(bad.group()):04X} at "
                          f"character {bad.start()}: git would not read it as one address")
    if first_lone_surrogate(value) is not None:
        raise ConfigError(f"{where}: holds a lone UTF-16 surrogate")
    if value.startswith("-"):
        raise ConfigError(f"{where}: {value!r} starts with '-': git would read it as an "
                          f"option, not a remote; give a URL or a remote's name")
    scheme = _SCHEME.match(value)
    if scheme:
        if scheme.group(1).lower() not in GIT_SCHEMES:
            raise ConfigError(f"{where}: {value!r}: the URL scheme {scheme.group(1)!r} is not "
                              f"one of {', '.join(GIT_SCHEMES)}")
        host = urlsplit(value).hostname or ""
        if scheme.group(1).lower() != "file" and (not host or host.startswith("-")):
            raise ConfigError(f"{where}: {value!r}: a git URL needs a host name, which may not "
                              f"start with '-'")
        return value
    if "::" in value:  # <transport>::<address> runs a git remote helper (ext:: runs commands)
        raise ConfigError(f"{where}: {value!r}: remote helper addresses (transport::address) "
                          f"are refused; give a URL or a remote's name")
    if value.startswith("/") or _SCP.fullmatch(value) or _REMOTE_NAME.fullmatch(value):
        return value
    raise ConfigError(f"{where}: {value!r} is neither a git URL ({', '.join(GIT_SCHEMES)}, "
                      f"user@host:path), an absolute path, nor a remote's name (letters, "
                      f"digits, . _ -)")


def comment(text: str) -> str:
    """``text`` made safe in a ``#`` comment line: every control character escaped."""
    return _CONTROL.sub(lambda m: f"\\u{ord(m.group()):04x}", escaped(text))
