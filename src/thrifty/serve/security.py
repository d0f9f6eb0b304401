# SPDX-License-Identifier: MIT
"""Who may do what: reads for anyone who reaches the address, writes only with `--allow-writes`
and the token.

The token is `THRIFTY_SERVE_TOKEN` from the environment, else 32 random bytes
(`secrets.token_urlsafe`) printed once at start. A write carries it as `Authorization: Bearer
TOKEN` and is compared in constant time (`secrets.compare_digest`, no early exit on the first
differing byte). Off loopback (`--host`), writes stay off unless the token came from the
environment: a printed one may have reached a terminal log that others read. The Host header must
name the address served (a page of another site that a DNS name rebinds to 127.0.0.1 is refused).
"""

import ipaddress
import os
import secrets
from dataclasses import dataclass

TOKEN_ENV = "THRIFTY_SERVE_TOKEN"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True)
class Access:
    writes: bool  # POSTs are served at all
    token: str | None
    token_printed: bool  # generated here: print it once
    reason: str  # why writes are on or off, for the start-up lines

    @classmethod
    def decide(cls, host: str, allow_writes: bool, environ=os.environ) -> "Access":
        given = environ.get(TOKEN_ENV) or None
        if not allow_writes:
            return cls(False, None, False, "read-only: start with --allow-writes to steer")
        if given is None and not is_loopback(host):
            return cls(False, None, False, f"writes stay off on {host}: set {TOKEN_ENV} to allow them off loopback")
        token = given or secrets.token_urlsafe(32)
        return cls(True, token, given is None, "writes need the token (Authorization: Bearer TOKEN)")

    def allows(self, authorization: str | None) -> bool:
        if not self.writes or self.token is None or not authorization:
            return False
        scheme, _, offered = authorization.partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(offered.strip().encode(), self.token.encode())


def allowed_hosts(host: str, port: int) -> list[str]:
    """Host header values to accept: the address served (any, when bound to all interfaces)."""
    if host in ("0.0.0.0", "::"):
        return ["*"]
    names = LOOPBACK_NAMES if is_loopback(host) else (host,)
    return [*names, *(f"{n}:{port}" for n in names), *(f"[{n}]:{port}" for n in names if ":" in n)]
