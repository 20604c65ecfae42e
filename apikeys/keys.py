"""The API key format: ``mp_<8-hex prefix>_<43-char secret>``. Only a SHA-256 digest is stored.

The secret carries 256 bits of randomness, so a fast hash is safe here (no password stretching needed),
and a lookup costs one indexed query on the prefix plus a constant-time digest comparison.
"""

import hashlib
import hmac
import secrets
from typing import NamedTuple

KEY_SCHEME = "mp"
PREFIX_HEX_BYTES = 4


class ParsedKey(NamedTuple):
    prefix: str
    digest: str


def key_generate() -> tuple[str, str]:
    """A fresh raw key and its prefix."""
    prefix = secrets.token_hex(PREFIX_HEX_BYTES)
    return f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}", prefix


def key_digest(raw_key: str) -> str:
    return hashlib.sha256(raw_key.encode("utf-8")).hexdigest()


def key_parse(raw_key: str) -> ParsedKey | None:
    """Split a presented key into its lookup prefix and digest; ``None`` if it is not our format."""
    scheme, sep, rest = raw_key.partition("_")
    prefix, sep2, secret = rest.partition("_")
    if scheme != KEY_SCHEME or not sep or not sep2 or len(prefix) != PREFIX_HEX_BYTES * 2 or not secret:
        return None
    return ParsedKey(prefix=prefix, digest=key_digest(raw_key))


def digest_matches(presented: str, stored: str) -> bool:
    return hmac.compare_digest(presented.encode(), stored.encode())
