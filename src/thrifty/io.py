# SPDX-License-Identifier: MIT
"""Files: atomic writes (a temporary name in the same folder, fsync, rename), JSON and CSV reads
that fail with the caller's own one-line error, CSV and PNG writes. No torch, and matplotlib
only inside `write_png`, so importing this costs nothing."""

import contextlib
import csv
import functools
import io
import json
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from thrifty.errors import ThriftyError


@functools.cache
def _umask() -> int:
    """The process's umask, read once (reading it means setting it, which is not thread-safe)."""
    current = os.umask(0)
    os.umask(current)
    return current


def write_bytes_atomic(path: Path, data: bytes) -> None:
    """Write atomically; a folder that cannot be made or written raises a one-line ThriftyError."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as exc:
        raise ThriftyError(f"cannot write {path}: {exc.strerror or exc}") from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())  # mkstemp makes 0600; the file gets the usual mode
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ThriftyError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text_atomic(path: Path, text: str) -> None:
    write_bytes_atomic(Path(path), text.encode("utf-8"))


def write_json_atomic(path: Path, data: Any) -> None:
    """`data` as strict JSON (NaN and infinities as null: json_safe; numpy scalars as floats),
    indented, written atomically: what strict parsers and other languages read."""
    write_text_atomic(path, json.dumps(json_safe(data), indent=2, default=float, allow_nan=False))

@contextlib.contextmanager
def removed_on_failure(path: Path, keep: tuple[type[BaseException], ...] = (),
                       worth_keeping: Callable[[Path], bool] = lambda folder: False,
                       own_names: tuple[str, ...] = ()) -> Iterator[None]:
    """The folder `path` and the parents the block creates for it are removed again if the block
    raises an Exception or is interrupted (Ctrl-C, or a SIGTERM raised as cli.common.Terminated),
    not by one of `keep`, and left nothing `worth_keeping` (a checkpoint to
    resume from) in it: a failed command leaves no half-made run behind. The parents go only while
    empty: another process may have made its own folder in them meanwhile (two plan lines under
    .thrifty/runs/; a review found one's failure removing the other's run). A folder that existed
    empty is emptied again (what the block wrote in it goes). In one that held anything before,
    only the `own_names` the block added go (a run's lock file): anything else there may be the
    user's or another process's, written while the block ran."""
    top, folder = None, Path(path).absolute()
    while not folder.exists():
        top, folder = folder, folder.parent
    before = set(folder.iterdir()) if top is None and folder.is_dir() else None
    try:
        yield
    except (Exception, KeyboardInterrupt) as exc:
        if not isinstance(exc, keep) and not (Path(path).is_dir() and worth_keeping(Path(path))):
            if top is not None:
                made = Path(path).absolute()
                shutil.rmtree(made, ignore_errors=True)
                for parent in made.parents:  # up to `top`, the highest it made, while each is empty
                    if parent == top.parent:
                        break
                    try:
                        parent.rmdir()
                    except OSError:
                        break
            elif before is not None:
                added = set(folder.iterdir()) - before
                for entry in added if not before else {e for e in added if e.name in own_names}:
                    if entry.is_dir() and not entry.is_symlink():
                        shutil.rmtree(entry, ignore_errors=True)
                    else:
                        entry.unlink(missing_ok=True)
        raise


def check_writable_dir(path: Path, what: str) -> None:
    """Raise a one-line error naming `what` unless `path` is, or can be made, a folder we can write in.

    Checked before long work starts, so a bad path costs one line, not a run. Writing a probe file
    is the only test that holds everywhere (permission bits say nothing for root, read-only mounts
    or /proc). The probe goes into the deepest folder of the path that exists, so nothing is created
    and a refusal leaves no empty folders behind."""
    path = Path(path)
    existing = path
    try:
        while not existing.exists():  # ends at "/" or "."
            existing = existing.parent
        if not existing.is_dir():
            raise ThriftyError(f"cannot write to {what} {path}: {existing} is a file, not a folder")
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".thrifty-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:  # the folder exists: say that files cannot be made in it (/proc said "No such file")
        raise ThriftyError(f"cannot write to {what} {path}: no file can be created in {existing} "
                           f"({exc.strerror or exc})") from None


def check_png_path(path: Path, what: str) -> None:
    """A plot's path: named .png, since PNG is what is written (a p.svg held PNG bytes), and
    writable (check_writable_file)."""
    check_writable_file(path, what)
    if Path(path).suffix.lower() != ".png":
        raise ThriftyError(f"{what} {path} is written as PNG: give it a .png name")


def check_writable_file(path: Path, what: str) -> None:
    """Like check_writable_dir, for a file to be written (atomically, beside it) at `path`."""
    path = Path(path)
    if path.is_dir():
        raise ThriftyError(f"cannot write {what} {path}: it is a folder")
    check_writable_dir(path.parent, what)


def json_safe(value: Any) -> Any:
    """NaN and infinities as None, in nested dicts, lists and tuples: JSON has no such numbers."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def read_json(path: Path, error: type[Exception], what: str):
    """Parsed JSON of `path`; a missing or unreadable file raises `error` naming `what`."""
    try:
        return json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise error(f"{what} {path} is not valid JSON: {exc}") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None


def read_csv(path: Path, error: type[Exception], what: str, *, required: Sequence[str] = (),
             allow_empty: bool = False, appended: bool = False) -> list[dict[str, str]]:
    """The rows of a CSV file with a header, as dicts of strings.

    A missing file, a binary file, missing `required` columns or (unless `allow_empty`) no rows
    raise `error` with a one-line message naming `what` and the path. `appended`: a file another
    process appends rows to (a training log that `thrifty serve` reads live), whose last line,
    without its newline yet, is being written: it is left out."""
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:  # Excel saves a byte-order mark
            text = handle.read()
        if appended and not text.endswith("\n"):
            text = text[:text.rfind("\n") + 1]
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = reader.fieldnames or []
        rows = list(reader)
    except FileNotFoundError:
        raise error(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise error(f"{what} {path} is a folder, not a CSV file") from None
    except (UnicodeDecodeError, csv.Error) as exc:
        raise error(f"{what} {path} is not a text CSV file: {exc}") from None
    except OSError as exc:
        raise error(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    missing = [c for c in required if c not in header]
    if missing:
        raise error(f"{what} {path}: missing columns {', '.join(missing)}")
    for line, row in enumerate(rows, start=2):  # csv files a long row's extra fields under None
        if None in row or None in row.values():  # and fills a short row's missing ones with None
            fields = len(header) + len(row.get(None) or []) - sum(v is None for v in row.values())
            raise error(f"{what} {path}:{line}: {fields} fields, the header has {len(header)}")
    if not rows and not allow_empty:
        raise error(f"{what} {path} has no rows")
    return rows


def write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping]) -> None:
    """Write `rows` (mappings holding at least `columns`) as CSV, atomically."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(columns)
    writer.writerows([row[c] for c in columns] for row in rows)
    write_text_atomic(Path(path), out.getvalue())


def write_png(path: Path, draw: Callable, *, nrows: int = 1, ncols: int = 1,
              figsize: tuple[float, float] = (6.4, 4.8), dpi: int = 110, title: str | None = None) -> Path:
    """Draw a figure off-screen and write it as PNG, atomically; returns the path.

    `draw(fig, axes)` fills the figure (`axes` as matplotlib's `subplots` returns them)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    # a Figure with its own Agg canvas: no pyplot state, the caller's backend is left alone
    fig = Figure(figsize=figsize)
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows, ncols)
    draw(fig, axes)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    write_bytes_atomic(Path(path), buffer.getvalue())
    return Path(path)
