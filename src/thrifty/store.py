# SPDX-License-Identifier: MIT
"""SQLite persistence of profiles (with their step samples and calibration runs) and plan decisions.

Every write is one transaction: a profile and all its rows land together or not at all.
Profiles (`step_samples`) and training runs (`train_steps`) store the same per-step record
(thrifty.records.StepRow) under the same column names; databases written before that are
migrated in one transaction when opened. Tables added later (`searches`, `search_probes`) are
created in an older database by the same CREATE TABLE IF NOT EXISTS that makes a new one.
"""

import json
import logging
import os
import sqlite3
import time
from pathlib import Path
from typing import Any

from thrifty.errors import ThriftyError
from thrifty.records import STEP_FIELDS, EvalRow, Profile, RunLog, StepRow, TrainResult

log = logging.getLogger(__name__)

DEFAULT_DB = Path.home() / ".thrifty" / "thrifty.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS profiles (
  id INTEGER PRIMARY KEY, workload_key TEXT NOT NULL, workload TEXT NOT NULL,
  created_at REAL NOT NULL, instance_type TEXT NOT NULL, threads_per_rank INTEGER NOT NULL,
  param_count INTEGER NOT NULL, train_size INTEGER NOT NULL, meta_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS step_samples (
  profile_id INTEGER NOT NULL REFERENCES profiles(id) ON DELETE CASCADE, {step_columns});
CREATE TABLE IF NOT EXISTS calibrations (
  profile_id INTEGER NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  global_batch INTEGER, steps INTEGER, reached_target INTEGER, target_metric REAL,
  final_metric REAL, wall_time_s REAL, noise_json TEXT);
CREATE TABLE IF NOT EXISTS decisions (
  id INTEGER PRIMARY KEY, created_at REAL NOT NULL, workload_key TEXT NOT NULL,
  request_json TEXT NOT NULL, recommended_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS decision_planes (
  decision_id INTEGER PRIMARY KEY REFERENCES decisions(id) ON DELETE CASCADE, plane_json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS samples_by_profile ON step_samples(profile_id);
CREATE TABLE IF NOT EXISTS train_runs (
  id INTEGER PRIMARY KEY, created_at REAL NOT NULL, workload TEXT NOT NULL, mode TEXT NOT NULL,
  policy TEXT NOT NULL, workers INTEGER NOT NULL, global_batch INTEGER NOT NULL,
  run_dir TEXT NOT NULL, summary_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS train_steps (
  run_id INTEGER NOT NULL REFERENCES train_runs(id) ON DELETE CASCADE, {step_columns});
CREATE TABLE IF NOT EXISTS train_evals (
  run_id INTEGER NOT NULL REFERENCES train_runs(id) ON DELETE CASCADE,
  step INTEGER, train_time_s REAL, metric REAL);
CREATE TABLE IF NOT EXISTS searches (
  id INTEGER PRIMARY KEY, created_at REAL NOT NULL, workload_key TEXT NOT NULL, search_key TEXT NOT NULL,
  seed INTEGER NOT NULL, request_json TEXT NOT NULL, state_json TEXT, result_json TEXT);
CREATE INDEX IF NOT EXISTS searches_by_key ON searches(search_key);
CREATE TABLE IF NOT EXISTS search_probes (
  search_id INTEGER NOT NULL REFERENCES searches(id) ON DELETE CASCADE, window INTEGER NOT NULL,
  {probe_columns}, PRIMARY KEY (search_id, window));
"""
_SQL_TYPES = {int: "INTEGER", "int": "INTEGER", float: "REAL", "float": "REAL"}
_STEP_TYPES = {name: _SQL_TYPES[f.type] for name, f in StepRow.__dataclass_fields__.items()}
_STEP_DEFAULTS = {name: f.default for name, f in StepRow.__dataclass_fields__.items()}
# one row per search window: what `thrifty plan` (a later round) and a resumed search read back
PROBE_COLUMNS = {"instance_type": "TEXT", "num_nodes": "INTEGER", "num_workers": "INTEGER",
                 "global_batch": "INTEGER", "spot": "INTEGER", "steps": "INTEGER", "step_time_s": "REAL",
                 "step_time_se_s": "REAL", "sync_time_s": "REAL", "cost_usd": "REAL", "wall_time_s": "REAL",
                 "billed_s": "REAL", "cut_short": "INTEGER"}
PROBE_FLAGS = ("spot", "cut_short")  # stored 0/1, read back as the booleans `thrifty search --json` prints


def probe_dict(names: tuple[str, ...], row) -> dict:
    """A search_probes row (the columns `names`) as a dict, its flags as booleans (a new user's
    pass: the API had `"spot": 0` where the CLI's JSON has `false`)."""
    probe = dict(zip(names, row, strict=True))
    for flag in PROBE_FLAGS:
        if flag in probe and probe[flag] is not None:
            probe[flag] = bool(probe[flag])
    return probe


SCHEMA = SCHEMA.format(step_columns=", ".join(f"{n} {_STEP_TYPES[n]}" for n in STEP_FIELDS),
                       probe_columns=", ".join(f"{n} {t}" for n, t in PROBE_COLUMNS.items()))
EVAL_ROW_FIELDS = tuple(EvalRow.__dataclass_fields__)
# train_steps columns before the one per-step record: old name -> StepRow field
_OLD_TRAIN_STEP_COLUMNS = {"compute_s": "compute_time_s", "wait_s": "wait_time_s",
                           "update_s": "update_time_s", "controller_s": "controller_time_s",
                           "step_s": "step_time_s"}
TABLES = ("profiles", "step_samples", "calibrations", "decisions", "decision_planes", "train_runs", "train_steps", "train_evals",
          "searches", "search_probes")


def _inserted_id(cursor: sqlite3.Cursor) -> int:
    """The id of the row an INSERT just wrote (sqlite3 sets lastrowid after every INSERT)."""
    if cursor.lastrowid is None:
        raise RuntimeError("no row was inserted")
    return cursor.lastrowid


def refuse_empty_file(path: Path) -> None:
    """An empty file where a database should be is a mistake (SQLite would take it for a new one)."""
    if path.is_file() and path.stat().st_size == 0:
        raise ThriftyError(f"cannot open the database {path}: it is an empty file, not a thrifty database "
                           f"(name a new file, or remove this one)")


def refuse_foreign(conn: sqlite3.Connection, path: Path, also: tuple[str, ...] = ()) -> None:
    """A SQLite database with tables but none of thrifty's (TABLES, or `also`: another part's own)
    belongs to something else: thrifty's tables are not added to it."""
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if tables and not tables & {*TABLES, *also}:
        raise ThriftyError(f"cannot open the database {path}: it is another program's SQLite "
                           f"database (tables {', '.join(sorted(tables)[:3])}), not a thrifty one")


class Store:
    """A thrifty database; open with Store(path) and use as a context manager or call close()."""

    def __init__(self, path: Path | str = DEFAULT_DB) -> None:
        self.path = Path(path)
        # what this Store creates, removed again if the command fails before anything is stored
        self._created = [p for p in (self.path, *self.path.parents) if not p.exists()]
        try:
            if self.path.is_dir():
                raise ThriftyError(f"cannot open the database {self.path}: it is a folder")
            refuse_empty_file(self.path)
            blocking = next((p for p in reversed(self.path.parents) if p.exists() and not p.is_dir()), None)
            if blocking is not None:
                raise ThriftyError(f"cannot open the database {self.path}: {blocking} is a file, not a folder")
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path)
            refuse_foreign(self.conn, self.path)
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.executescript(SCHEMA)
            self._migrate()
            # a write that is undone: a database (or its folder) that cannot be written fails now,
            # before the command's work, not at its first INSERT
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("CREATE TABLE thrifty_write_probe (x)")
            self.conn.rollback()
        except ThriftyError:
            self._close_quietly()
            self._remove_created()
            raise
        except (sqlite3.DatabaseError, OSError) as exc:
            self._close_quietly()
            self._remove_created()
            raise ThriftyError(f"cannot open the database {self.path}: {self._reason(exc)}") from None

    def _reason(self, exc: Exception) -> str:
        """SQLite's words for a failed open, with what they mean here where SQLite is vague."""
        said = str(exc)
        journal = self.path.with_name(self.path.name + "-journal")
        if "disk I/O error" in said and journal.exists() and not journal.is_file():
            return f"SQLite cannot write its journal {journal}: that name is taken by a folder ({said})"
        if "disk I/O error" in said or "readonly database" in said:
            return f"SQLite cannot write it or its journal beside it in {self.path.parent} ({said})"
        if "unable to open database file" in said and not os.access(self.path.parent, os.W_OK):
            return f"{self.path.parent} is not writable ({said})"
        if "unable to open database file" in said:
            return f"SQLite cannot create or open a file in {self.path.parent} ({said})"
        return said

    def _close_quietly(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()

    def _migrate(self) -> None:
        """Add the StepRow columns an older database lacks, in one transaction. Old train_steps
        rows get their values from the old columns (sync = wait + all-reduce), which stay."""
        have = {table: {row[1] for row in self.conn.execute(f"PRAGMA table_info({table})")}
                for table in ("step_samples", "train_steps")}
        if all(set(STEP_FIELDS) <= columns for columns in have.values()):
            return
        log.info("migrating %s: adding the step columns it lacks", self.path)
        with self.conn:
            self.conn.execute("BEGIN")  # sqlite3 would not open one for ALTER TABLE
            for table, columns in have.items():
                for name in (n for n in STEP_FIELDS if n not in columns):
                    default = _STEP_DEFAULTS[name]
                    known = isinstance(default, (int, float)) and default == default  # not NaN
                    clause = f" DEFAULT {default!r}" if known else ""  # else NULL
                    self.conn.execute(f"ALTER TABLE {table} ADD COLUMN {name} {_STEP_TYPES[name]}{clause}")
            if "allreduce_s" in have["train_steps"]:
                moves = ", ".join(f"{new} = {old}" for old, new in _OLD_TRAIN_STEP_COLUMNS.items())
                self.conn.execute(f"UPDATE train_steps SET {moves}, sync_time_s = wait_s + allreduce_s")
            if "num_workers" not in have["train_steps"]:  # integer fields come from the run itself
                self.conn.execute(
                    "UPDATE train_steps SET num_workers = (SELECT workers FROM train_runs WHERE id = run_id), "
                    "global_batch = (SELECT global_batch FROM train_runs WHERE id = run_id)")

    def _insert_steps(self, table: str, key: str, key_value: int, rows: list[StepRow]) -> None:
        self.conn.executemany(
            f"INSERT INTO {table} ({key}, {', '.join(STEP_FIELDS)}) "
            f"VALUES ({', '.join('?' * (len(STEP_FIELDS) + 1))})",
            [(key_value, *(getattr(r, f) for f in STEP_FIELDS)) for r in rows])

    def _select_steps(self, table: str, key: str, key_value: int) -> list[StepRow]:
        """SQLite stores NaN (an unmeasured time or noise norm) as NULL; this turns it back."""
        rows = self.conn.execute(f"SELECT {', '.join(STEP_FIELDS)} FROM {table} WHERE {key} = ?",
                                 (key_value,))
        values: list[dict[str, Any]] = [{f: float("nan") if v is None else v for f, v in zip(STEP_FIELDS, r, strict=True)}
                                        for r in rows]
        return [StepRow(**row) for row in values]

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *_) -> None:
        self.close()
        if self._is_empty_new_file():  # nothing stored (a failed or read-only command): leave no file
            self._remove_created()

    def _is_empty_new_file(self) -> bool:
        if self.path not in self._created:
            return False
        conn = sqlite3.connect(self.path)
        try:
            return not any(conn.execute(f"SELECT 1 FROM {table} LIMIT 1").fetchone() for table in TABLES)
        finally:
            conn.close()

    def _remove_created(self) -> None:
        """A command that stores nothing leaves no empty database (nor the folders made for it)."""
        try:
            if self.path in self._created:
                self.path.unlink(missing_ok=True)
            for folder in self._created[1:]:
                folder.rmdir()
        except OSError:  # never made (a path under a file) or no longer empty: nothing to undo
            pass

    def close(self) -> None:
        self.conn.close()

    def save_profile(self, workload_key: str, profile: Profile,
                     calibration: TrainResult | None, target_metric: float) -> int:
        """Insert a profile, its samples and its calibration in one transaction; return its id.

        SQLite stores NaN (an unmeasured noise norm) as NULL; latest_profile turns it back."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO profiles (workload_key, workload, created_at, instance_type, "
                "threads_per_rank, param_count, train_size, meta_json) VALUES (?,?,?,?,?,?,?,?)",
                (workload_key, profile.workload, time.time(), profile.instance_type,
                 profile.threads_per_rank, profile.param_count, profile.train_size,
                 json.dumps(profile.meta)))
            profile_id = _inserted_id(cur)
            self._insert_steps("step_samples", "profile_id", profile_id, profile.samples)
            if calibration is not None:
                self.conn.execute(
                    "INSERT INTO calibrations VALUES (?,?,?,?,?,?,?,?)",
                    (profile_id, calibration.global_batch, calibration.steps,
                     int(calibration.reached_target), target_metric, calibration.final_metric,
                     calibration.wall_time_s, json.dumps(calibration.noise)))
        return profile_id

    def latest_profile(self, workload_key: str) -> tuple[Profile, dict | None] | None:
        """The newest profile of a workload with its calibration, or None if never profiled."""
        row = self.conn.execute(
            "SELECT id, workload, instance_type, threads_per_rank, param_count, train_size, meta_json "
            "FROM profiles WHERE workload_key = ? ORDER BY id DESC LIMIT 1", (workload_key,)).fetchone()
        if row is None:
            return None
        profile_id = row[0]
        samples = self._select_steps("step_samples", "profile_id", profile_id)
        profile = Profile(workload=row[1], samples=samples, param_count=row[4], train_size=row[5],
                          threads_per_rank=row[3], instance_type=row[2],
                          meta={**json.loads(row[6]), "profile_id": profile_id})
        cal = self.conn.execute(
            "SELECT global_batch, steps, reached_target, target_metric, final_metric, wall_time_s, "
            "noise_json FROM calibrations WHERE profile_id = ?", (profile_id,)).fetchone()
        calibration = None if cal is None else {
            "global_batch": cal[0], "steps": cal[1], "reached_target": bool(cal[2]),
            "target_metric": cal[3], "final_metric": cal[4], "wall_time_s": cal[5],
            "noise": json.loads(cal[6])}
        return profile, calibration

    def update_profile_meta(self, profile_id: int, meta: dict) -> None:
        """Replace a stored profile's meta (e.g. completed by a newer thrifty), in one transaction."""
        with self.conn:
            self.conn.execute("UPDATE profiles SET meta_json = ? WHERE id = ?",
                              (json.dumps({k: v for k, v in meta.items() if k != "profile_id"}), profile_id))

    def count(self, table: str) -> int:
        if table not in TABLES:
            raise ValueError(table)
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def save_decision(self, workload_key: str, request: dict, recommended: dict, plane: dict | None = None) -> int:
        """A plan's decision and, given, the cost-time plane it chose from (thrifty.plan.plane), in one
        transaction; the decision's id."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO decisions (created_at, workload_key, request_json, recommended_json) "
                "VALUES (?,?,?,?)", (time.time(), workload_key, json.dumps(request),
                                     json.dumps(recommended)))
            decision = _inserted_id(cur)
            if plane is not None:
                self.conn.execute("INSERT INTO decision_planes VALUES (?,?)", (decision, json.dumps(plane)))
        log.debug("decision %d stored in %s", decision, self.path)
        return decision

    def training_steps(self, run_id: int) -> list[StepRow]:
        return self._select_steps("train_steps", "run_id", run_id)

    def save_training_run(self, summary: dict, log: RunLog, mode: str = "bsp") -> int:
        """Insert a training run, its per-step rows and its evaluations in one transaction."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO train_runs (created_at, workload, mode, policy, workers, global_batch, "
                "run_dir, summary_json) VALUES (?,?,?,?,?,?,?,?)",
                (time.time(), summary["workload"], mode, summary["policy"], summary["workers"],
                 summary["global_batch"], summary.get("run_dir", ""), json.dumps(summary)))
            run_id = _inserted_id(cur)
            self._insert_steps("train_steps", "run_id", run_id, log.steps)
            self.conn.executemany(
                f"INSERT INTO train_evals (run_id, {', '.join(EVAL_ROW_FIELDS)}) VALUES (?,?,?,?)",
                [(run_id, *(getattr(r, f) for f in EVAL_ROW_FIELDS)) for r in log.evals])
        return run_id

    def start_search(self, workload_key: str, search_key: str, seed: int, request: dict) -> int:
        """A new search row (no state yet); its id. `search_key` names the exact request (trace,
        job, objective, knobs, start, seed): a resume continues only the same request."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO searches (created_at, workload_key, search_key, seed, request_json) VALUES (?,?,?,?,?)",
                (time.time(), workload_key, search_key, seed, json.dumps(request)))
        return _inserted_id(cur)

    def save_search_window(self, search_id: int, window: int, probe: dict, state: dict) -> None:
        """One window's probe and the search's checkpoint after it, in one transaction: a search
        killed between the two writes would otherwise resume with a probe its state lacks."""
        with self.conn:
            self.conn.execute(
                f"INSERT INTO search_probes (search_id, window, {', '.join(PROBE_COLUMNS)}) "
                f"VALUES ({', '.join('?' * (len(PROBE_COLUMNS) + 2))})",
                (search_id, window, *(probe[c] for c in PROBE_COLUMNS)))
            self.conn.execute("UPDATE searches SET state_json = ? WHERE id = ?", (json.dumps(state), search_id))

    def finish_search(self, search_id: int, result: dict) -> None:
        with self.conn:
            self.conn.execute("UPDATE searches SET result_json = ? WHERE id = ?", (json.dumps(result), search_id))

    def latest_search(self, search_key: str) -> tuple[int, dict | None, dict | None] | None:
        """(id, checkpoint or None, result or None) of the newest search of this request, or None."""
        row = self.conn.execute("SELECT id, state_json, result_json FROM searches WHERE search_key = ? "
                                "ORDER BY id DESC LIMIT 1", (search_key,)).fetchone()
        if row is None:
            return None
        checkpoint, result = (None if text is None else json.loads(text) for text in row[1:])
        return int(row[0]), checkpoint, result

    def search_probes(self, search_id: int) -> list[dict]:
        """The stored windows of a search, in order, as dicts of PROBE_COLUMNS."""
        rows = self.conn.execute(f"SELECT {', '.join(PROBE_COLUMNS)} FROM search_probes WHERE search_id = ? "
                                 "ORDER BY window", (search_id,))
        return [probe_dict(tuple(PROBE_COLUMNS), r) for r in rows]

    def workload_probes(self, workload_key: str) -> list[dict]:
        """Every stored window that measured steps, of every search under `workload_key` (newest
        search first, its windows in order), as dicts of PROBE_COLUMNS with `search_id` and
        `window`: what `thrifty plan` reads to report those configurations as measured."""
        columns = ", ".join(f"p.{c}" for c in PROBE_COLUMNS)
        rows = self.conn.execute(
            f"SELECT p.search_id, p.window, {columns} FROM search_probes AS p JOIN searches AS s "
            "ON s.id = p.search_id WHERE s.workload_key = ? AND p.steps > 0 ORDER BY s.id DESC, p.window",
            (workload_key,))
        return [probe_dict(("search_id", "window", *PROBE_COLUMNS), r) for r in rows]
