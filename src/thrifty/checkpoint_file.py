# SPDX-License-Identifier: MIT
"""Checkpoint files that are never half-written and whose damage is detected.

Layout: 8-byte magic, 32-byte SHA-256 of the payload, payload. Written to a temporary name in the
same folder, fsynced and renamed (thrifty.io), so a reader sees the old file or the new one whole;
a file damaged afterwards (truncated, bit flips) fails the checksum.
"""

import hashlib
import io
from pathlib import Path
from typing import Any

from thrifty.errors import ThriftyError

MAGIC = b"THRIFTY1"
HEADER = len(MAGIC) + 32


class CheckpointError(ThriftyError):
    """A checkpoint that is missing, truncated or corrupt."""


def encode(payload: bytes) -> bytes:
    return MAGIC + hashlib.sha256(payload).digest() + payload


def decode(data: bytes, name: str = "checkpoint") -> bytes:
    if len(data) < HEADER or not data.startswith(MAGIC):
        raise CheckpointError(f"{name} is not a thrifty checkpoint or is truncated")
    payload = data[HEADER:]
    if hashlib.sha256(payload).digest() != data[len(MAGIC):HEADER]:
        raise CheckpointError(f"{name} is corrupt (checksum mismatch)")
    return payload


def dumps(state: dict[str, Any]) -> bytes:
    """torch.save `state` into bytes (the payload; `encode` adds the header)."""
    import torch  # only the training side needs it; the runner and MD jobs do not
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def loads(payload: bytes, name: str = "checkpoint") -> dict[str, Any]:
    """The state in a payload whose checksum held."""
    import torch
    try:
        return torch.load(io.BytesIO(payload), map_location="cpu", weights_only=False)
    except Exception as exc:  # a payload with a valid checksum that torch cannot read
        raise CheckpointError(f"{name} cannot be read: {exc}") from None


def load_state(path: Path) -> dict[str, Any]:
    """The state in a checkpoint file (e.g. to inspect a training checkpoint)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint not found: {path}") from None
    except IsADirectoryError:
        raise CheckpointError(f"checkpoint path is a folder: {path}") from None
    return loads(decode(data, str(path)), str(path))
