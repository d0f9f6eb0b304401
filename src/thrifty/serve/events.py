# SPDX-License-Identifier: MIT
"""Server-sent events (https://html.spec.whatwg.org/multipage/server-sent-events.html): one
`change` event whenever a store the server reads changes, naming the kind (plans, profiles,
searches, runs, campaigns, jobs) and the ids whose data changed, so a page refetches only those.

A database is looked at again only when its file or its WAL changed size or time (os.stat: no
lock taken); then one short read transaction counts its rows per kind. Run folders are watched by
the size of steps.csv, jobs by that of events.jsonl."""

import asyncio
import json
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from thrifty.serve.readonly import read_transaction

POLL_S = 0.25
HEARTBEAT_S = 15.0  # a comment line, so proxies and browsers keep the stream open


def _stat(path: Path) -> tuple:
    out: list[tuple[int, int] | None] = []
    for p in (path, Path(f"{path}-wal")):
        try:
            s = os.stat(p)
            out.append((s.st_size, s.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out)


def thrifty_versions(db) -> dict[str, dict]:
    """Per kind, per id: a number that changes when that id's data does."""
    with read_transaction(db.path) as conn:
        plans = {db.key(r[0]): 1 for r in conn.execute("SELECT id FROM decisions")}
        profiles = {db.key(r[0]): 1 for r in conn.execute("SELECT id FROM profiles")}
        searches = {db.key(r[0]): (r[1], r[2]) for r in conn.execute(
            "SELECT s.id, (SELECT COUNT(*) FROM search_probes WHERE search_id = s.id), s.result_json IS NOT NULL "
            "FROM searches AS s")}
        runs = {f"db{db.key(r[0])}": 1 for r in conn.execute("SELECT id FROM train_runs")}
    return {"plans": plans, "profiles": profiles, "searches": searches, "runs": runs}


def campaign_versions(cdb) -> dict[str, dict[str, object]]:
    with read_transaction(cdb.path) as conn:
        rows = conn.execute("SELECT c.name, (SELECT COUNT(*) FROM md_campaign_runs WHERE campaign = c.name) "
                            "FROM md_campaigns AS c").fetchall()
    return {"campaigns": {f"{cdb.index}-{name}": n for name, n in rows}}


class Watcher:
    """Versions of everything served; `changes()` returns what differs since the last call."""

    def __init__(self, dbs, campaign_dbs, scan: Callable[[], tuple[dict, dict]]) -> None:
        self.dbs, self.campaign_dbs, self.scan = dbs, campaign_dbs, scan
        self._stats: dict[Path, tuple] = {}
        self._versions: dict[str, dict[str, dict]] = {}
        self._seen: dict[str, dict[str, object]] = {}

    def _current(self) -> dict[str, dict[str, object]]:
        merged: dict[str, dict[str, object]] = {}
        for source, read in [*((d, thrifty_versions) for d in self.dbs),
                             *((c, campaign_versions) for c in self.campaign_dbs)]:
            stat = _stat(source.path)
            key = f"{type(source).__name__}{source.index}"
            if self._stats.get(source.path) != stat or key not in self._versions:
                self._stats[source.path] = stat
                self._versions[key] = read(source)
            for kind, ids in self._versions[key].items():
                merged.setdefault(kind, {}).update(ids)
        runs, jobs = self.scan()
        merged.setdefault("runs", {}).update({i: _size(r.folder / "steps.csv") for i, r in runs.items()})
        merged["jobs"] = {i: _size(j.folder / "events.jsonl") for i, j in jobs.items()}
        return merged

    def changes(self) -> list[dict]:
        now = self._current()
        out = []
        for kind in sorted(set(now) | set(self._seen)):
            before, after = self._seen.get(kind, {}), now.get(kind, {})
            changed = sorted(i for i in set(before) | set(after) if before.get(i) != after.get(i))
            if changed:
                out.append({"kind": kind, "ids": changed})
        self._seen = now
        return out


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def format_event(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


async def stream(watcher: Watcher, disconnected: Callable, limit: int | None = None) -> AsyncIterator[str]:
    """The event stream: a `hello` first (the state is the baseline), then `change` events;
    `limit` change events at most (tests), else until the client goes."""
    await asyncio.to_thread(watcher.changes)
    yield format_event("hello", {"poll_s": POLL_S})
    sent, quiet = 0, 0.0
    while limit is None or sent < limit:
        if await disconnected():
            return
        await asyncio.sleep(POLL_S)
        for change in await asyncio.to_thread(watcher.changes):
            yield format_event("change", change)
            sent += 1
            quiet = 0.0
        quiet += POLL_S
        if quiet >= HEARTBEAT_S:
            yield ": keep-alive\n\n"
            quiet = 0.0
