# SPDX-License-Identifier: MIT
"""What `thrifty serve` was started with: the stores it reads and who may write."""

from dataclasses import dataclass, field
from pathlib import Path

from thrifty.serve.security import Access


@dataclass(frozen=True)
class ServeSettings:
    dbs: tuple[Path, ...] = ()  # thrifty databases (--db)
    campaign_dbs: tuple[Path, ...] = ()  # campaign databases (--campaign-db)
    watch: tuple[Path, ...] = ()  # folders of run folders and `thrifty run` checkpoint folders (--watch)
    surrogate: Path | None = None  # a model folder of `thrifty md train-surrogate` (--surrogate)
    access: Access = field(default_factory=lambda: Access(False, None, False, "read-only"))
    host: str = "127.0.0.1"
    port: int = 8477
