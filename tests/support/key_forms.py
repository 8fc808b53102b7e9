"""The forms in which a leaked API key can hide in a file: raw, in parts, URL-, hex- and
base64-encoded."""

from __future__ import annotations

import base64
from urllib.parse import quote, quote_plus


def key_forms(key: str) -> dict[str, bytes]:
    """Byte strings whose presence anywhere means the key leaked."""
    raw = key.encode()
    forms = {
        "raw": raw,
        "random part": key.rsplit("-", 1)[1].encode(),
        "random part, first 16": key.rsplit("-", 1)[1][:16].encode(),
        "urlencoded": quote(key, safe="").encode(),
        "urlencoded header": quote(f"Bearer {key}", safe="").encode(),
        "form-encoded header": quote_plus(f"Bearer {key}").encode(),
        "hex": raw.hex().encode(),
    }
    for name, encode in (("base64", base64.b64encode), ("urlsafe base64",
                                                         base64.urlsafe_b64encode)):
        for shift in range(3):
            # The key at byte offset `shift` of some larger encoded blob: keep only the
            # characters that depend on key bytes alone.
            text = encode(b"\0" * shift + raw)
            forms[f"{name} @{shift}"] = text[4 if shift else 0:-4]
    return forms
