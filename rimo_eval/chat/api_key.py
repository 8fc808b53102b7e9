"""Where a transport's API key comes from: the environment variable its section names
(``api_key_env``), never params. A local server may go without one."""

from __future__ import annotations

import ipaddress
import os
from urllib.parse import urlsplit

from rimo_eval.chat.redact import DUMMY_API_KEY
from rimo_eval.errors import StageError


def is_local_url(url: str) -> bool:
    host = urlsplit(url).hostname or ""
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or ip.is_private


def resolve_api_key(env_name: str | None, base_url: str, section: str) -> str:
    key = os.environ.get(env_name) if env_name else None
    if key:
        return key
    if env_name and not is_local_url(base_url):
        raise StageError(f"environment variable {env_name} ({section}.api_key_env) is not "
                         f"set, and {base_url} is not a local server")
    return DUMMY_API_KEY


def key_source(env_name: str | None, section: str) -> str:
    """Where a section's key comes from, for messages about it (never the key itself)."""
    return f"{env_name} ({section}.api_key_env)" if env_name else f"{section}.api_key_env"
