# SPDX-License-Identifier: MIT
"""Read-only SQLite access that never holds up a writer.

Every read opens its own connection by URI with `mode=ro` (SQLite refuses any write through it)
and runs its queries in one short transaction (`BEGIN` ... `COMMIT`, a consistent snapshot).
The databases are put in WAL mode once, at start (`enable_wal`): in WAL, readers and the one
writer do not block each other (https://www.sqlite.org/wal.html, "Readers do not block writers
and a writer does not block readers"); in the default rollback journal a reader's SHARED lock
would make a committing writer wait (https://www.sqlite.org/lockingv3.html). WAL is a property
of the database file, so the writers (thrifty's Store) keep it without a change.
"""

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

from thrifty.errors import ThriftyError

BUSY_TIMEOUT_S = 2.0  # only a checkpoint of the WAL or a change of journal mode makes a reader wait


def _uri(path: Path) -> str:
    return f"file:{quote(str(Path(path).resolve()))}?mode=ro"


@contextmanager
def read_transaction(path: Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection inside one transaction, closed at the end of the block."""
    conn = sqlite3.connect(_uri(path), uri=True, timeout=BUSY_TIMEOUT_S, check_same_thread=False,
                           isolation_level=None)
    try:
        conn.execute("BEGIN")
        yield conn
        conn.execute("COMMIT")
    finally:
        conn.close()


def readable(path: Path) -> bool:
    """Whether the database at `path` opens and reads (it may have been moved, deleted or replaced
    since the server started)."""
    try:
        table_names(path)
    except sqlite3.Error:
        return False
    return True


def table_names(path: Path) -> set[str]:
    with read_transaction(path) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    """Whether the open database holds table `name` (a store older than that table does not, and a
    read-only reader does not create it)."""
    return conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)).fetchone() is not None


def check_database(path: Path, tables: tuple[str, ...], what: str,
                   other: tuple[str, tuple[str, ...]] | None = None) -> None:
    """Refuse, in one line, a path that is not an SQLite database holding one of `tables`; `other`
    (option, its tables): the option a database of the other kind is given with."""
    path = Path(path)
    if path.is_dir():
        raise ThriftyError(f"{what} {path} is a folder, not a database file")
    if not path.is_file():
        raise ThriftyError(f"{what} {path} does not exist (thrifty serve reads databases, it does not create them)")
    try:
        found = table_names(path)
    except sqlite3.DatabaseError as exc:
        raise ThriftyError(f"{what} {path} is not an SQLite database ({exc})") from None
    if found & set(tables):
        return
    if other is not None and found & set(other[1]):
        raise ThriftyError(f"{what} {path} is the other kind of thrifty database: give it with {other[0]}")
    shown = ", ".join(sorted(found)[:3]) or "none"
    raise ThriftyError(f"{what} {path} is not a thrifty database (its tables: {shown})")


def enable_wal(path: Path) -> bool:
    """Switch the database to WAL (persistent); False when it cannot be (a read-only file), in
    which case reads stay short but a writer may wait for one to end."""
    try:
        conn = sqlite3.connect(Path(path), timeout=BUSY_TIMEOUT_S)
        try:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.DatabaseError:
        return False
    return str(mode).lower() == "wal"
