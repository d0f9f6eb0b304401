# SPDX-License-Identifier: MIT
"""A campaign's SQLite tables: what it is (space, sampler, simulation), every completed run, and
the batches a non-deterministic sampler (active learning) picked.

A run's key is (campaign, run_id), run_id = sampler.point_key(params): the insert is
`INSERT ... ON CONFLICT DO NOTHING` in one transaction, so a run that completes twice (a driver
restarted while the first finished, a Ray retry of a task that had returned) is stored once;
`record_run` says whether this insert was the one that stored it. The tables live in the
campaign's own database file (`--db`), beside thrifty's others if it is the same file.

A batch is stored (`add_batch`, one transaction) before its points are submitted, so a restarted
driver finds the picked-but-unfinished points (those of the last batch not among the completed
runs) and resubmits them instead of picking others.
"""

import json
import sqlite3
import time
from pathlib import Path

from thrifty.errors import ThriftyError
from thrifty.store import refuse_empty_file, refuse_foreign

SCHEMA = """
CREATE TABLE IF NOT EXISTS md_campaigns (
  name TEXT PRIMARY KEY, created_at REAL NOT NULL, request_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS md_campaign_runs (
  campaign TEXT NOT NULL REFERENCES md_campaigns(name), run_id TEXT NOT NULL,
  finished_at REAL NOT NULL, params_json TEXT NOT NULL, steps INTEGER NOT NULL, converged INTEGER NOT NULL,
  attempts INTEGER NOT NULL, lost_work_s REAL NOT NULL, result_json TEXT NOT NULL,
  PRIMARY KEY (campaign, run_id));
CREATE TABLE IF NOT EXISTS md_campaign_batches (
  campaign TEXT NOT NULL REFERENCES md_campaigns(name), batch INTEGER NOT NULL, run_id TEXT NOT NULL,
  params_json TEXT NOT NULL, PRIMARY KEY (campaign, run_id));
CREATE TABLE IF NOT EXISTS md_campaign_sessions (
  campaign TEXT NOT NULL REFERENCES md_campaigns(name), started_at REAL NOT NULL, ended_at REAL,
  pool TEXT NOT NULL, instance_type TEXT NOT NULL, bill_json TEXT, work_dir TEXT);
"""
# a session's work_dir came after the first stores: opened by md sweep, an older store gains it

CAMPAIGN_TABLES = ("md_campaigns", "md_campaign_runs", "md_campaign_batches", "md_campaign_sessions")


class CampaignStore:
    def __init__(self, path: Path, name: str = "default") -> None:
        self.path, self.name = Path(path), name
        try:
            if self.path.is_dir():
                raise ThriftyError(f"cannot open the database {self.path}: it is a folder")
            refuse_empty_file(self.path)
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, timeout=30)
            try:
                refuse_foreign(self.conn, self.path, also=CAMPAIGN_TABLES)
                self.conn.executescript(SCHEMA)
                if not _has_work_dir(self.conn):
                    try:
                        with self.conn:
                            self.conn.execute("ALTER TABLE md_campaign_sessions ADD COLUMN work_dir TEXT")
                    except sqlite3.OperationalError:  # another md sweep added it meanwhile
                        if not _has_work_dir(self.conn):
                            raise
            except BaseException:
                self.conn.close()
                raise
        except (sqlite3.DatabaseError, OSError) as exc:
            raise ThriftyError(f"cannot open the database {self.path}: {exc}") from None

    def __enter__(self) -> "CampaignStore":
        return self

    def __exit__(self, *_) -> None:
        self.conn.close()

    def begin(self, request: dict) -> bool:
        """Record the campaign (space, sampler, seed, simulation); True if it already existed.
        A stored campaign of the same name with another request is refused: continuing it with a
        different space would mix two sweeps."""
        with self.conn:
            row = self.conn.execute("SELECT request_json FROM md_campaigns WHERE name = ?", (self.name,)).fetchone()
            if row is None:
                self.conn.execute("INSERT INTO md_campaigns VALUES (?,?,?)",
                                  (self.name, time.time(), json.dumps(request, sort_keys=True)))
                return False
        if json.loads(row[0]) != json.loads(json.dumps(request, sort_keys=True)):
            raise ThriftyError(f"{self.path} holds campaign {self.name!r} with another space, sampler or "
                               f"simulation: use another --db or --campaign to start a new one")
        return True

    def record_run(self, run_id: str, params: dict, result: dict, attempts: int, lost_work_s: float) -> bool:
        """Store a completed run unless it is stored already; True if this call stored it."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO md_campaign_runs VALUES (?,?,?,?,?,?,?,?,?) ON CONFLICT (campaign, run_id) DO NOTHING",
                (self.name, run_id, time.time(), json.dumps(params), int(result["steps"]),
                 int(bool(result["converged"])), attempts, lost_work_s, json.dumps(result)))
        return cur.rowcount == 1

    def begin_session(self, pool: str, instance_type: str, work_dir: Path | None = None) -> int:
        """A driver's session of the campaign starts (each `md sweep` of it, a resume too), with the
        folder its runs go to; its id. It stays open (no end, no bill) if the driver dies before end_session."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO md_campaign_sessions (campaign, started_at, pool, instance_type, work_dir) "
                "VALUES (?,?,?,?,?)", (self.name, time.time(), pool, instance_type,
                                       None if work_dir is None else str(Path(work_dir).resolve())))
        assert cur.lastrowid is not None
        return cur.lastrowid

    def end_session(self, session: int, bill: dict) -> None:
        """The session's end and its pool's bill (md.campaign.pool.bill), in one transaction."""
        with self.conn:
            self.conn.execute("UPDATE md_campaign_sessions SET ended_at = ?, bill_json = ? WHERE rowid = ?",
                              (time.time(), json.dumps(bill), session))

    def sessions(self) -> list[dict]:
        """The campaign's driver sessions in order: start, end and bill (None while open)."""
        work_dir = "work_dir" if _has_work_dir(self.conn) else "NULL"  # thrifty serve reads older stores as they are
        rows = self.conn.execute(f"SELECT started_at, ended_at, pool, instance_type, bill_json, {work_dir} "
                                 "FROM md_campaign_sessions WHERE campaign = ? ORDER BY rowid", (self.name,))
        return [{"started_at": r[0], "ended_at": r[1], "pool": r[2], "instance_type": r[3],
                 "bill": None if r[4] is None else json.loads(r[4]), "work_dir": r[5]} for r in rows]

    def completed(self) -> list[dict]:
        rows = self.conn.execute(
            "SELECT run_id, params_json, result_json, attempts, lost_work_s FROM md_campaign_runs "
            "WHERE campaign = ? ORDER BY finished_at", (self.name,))
        return [{"run_id": r[0], "params": json.loads(r[1]), "result": json.loads(r[2]), "attempts": r[3],
                 "lost_work_s": r[4]} for r in rows]

    def add_batch(self, points: list[tuple[str, dict]]) -> int:
        """Store (run id, params) pairs as the next batch, in one transaction; its number (0, 1, ...).
        A point already in an earlier batch keeps its first batch."""
        with self.conn:
            row = self.conn.execute("SELECT MAX(batch) FROM md_campaign_batches WHERE campaign = ?",
                                    (self.name,)).fetchone()
            batch = 0 if row[0] is None else row[0] + 1
            self.conn.executemany(
                "INSERT INTO md_campaign_batches VALUES (?,?,?,?) ON CONFLICT (campaign, run_id) DO NOTHING",
                [(self.name, batch, run_id, json.dumps(params)) for run_id, params in points])
        return batch

    def batches(self) -> list[list[tuple[str, dict]]]:
        """Every stored batch in order, each a list of (run id, params) in the order it was picked."""
        rows = self.conn.execute("SELECT batch, run_id, params_json FROM md_campaign_batches WHERE campaign = ? "
                                 "ORDER BY batch, rowid", (self.name,))
        out: dict[int, list[tuple[str, dict]]] = {}
        for batch, run_id, params in rows:
            out.setdefault(batch, []).append((run_id, json.loads(params)))
        return [out[b] for b in sorted(out)]


def _has_work_dir(conn: sqlite3.Connection) -> bool:
    return any(row[1] == "work_dir" for row in conn.execute("PRAGMA table_info(md_campaign_sessions)"))
