"""SQLite persistence of profiles (with their step samples and calibration runs) and plan decisions.

Every write is one transaction: a profile and all its rows land together or not at all.
"""

import json
import sqlite3
import time
from pathlib import Path

from thrifty.errors import ThriftyError
from thrifty.train.loop import TrainResult
from thrifty.train.metrics import EvalRow, RunLog, StepRow
from thrifty.train.profiler import Profile, StepSample

DEFAULT_DB = Path.home() / ".thrifty" / "thrifty.db"

SCHEMA = """
CREATE TABLE IF NOT EXISTS profiles (
  id INTEGER PRIMARY KEY, workload_key TEXT NOT NULL, workload TEXT NOT NULL,
  created_at REAL NOT NULL, instance_type TEXT NOT NULL, threads_per_rank INTEGER NOT NULL,
  param_count INTEGER NOT NULL, train_size INTEGER NOT NULL, meta_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS step_samples (
  profile_id INTEGER NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  num_nodes INTEGER, num_workers INTEGER, rank INTEGER, local_batch INTEGER, global_batch INTEGER,
  step INTEGER, compute_time_s REAL, sync_time_s REAL, step_time_s REAL, samples_per_s REAL,
  peak_memory_bytes INTEGER, small_batch INTEGER, small_grad_sq REAL, big_batch INTEGER,
  big_grad_sq REAL);
CREATE TABLE IF NOT EXISTS calibrations (
  profile_id INTEGER NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  global_batch INTEGER, steps INTEGER, reached_target INTEGER, target_metric REAL,
  final_metric REAL, wall_time_s REAL, noise_json TEXT);
CREATE TABLE IF NOT EXISTS decisions (
  id INTEGER PRIMARY KEY, created_at REAL NOT NULL, workload_key TEXT NOT NULL,
  request_json TEXT NOT NULL, recommended_json TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS samples_by_profile ON step_samples(profile_id);
CREATE TABLE IF NOT EXISTS train_runs (
  id INTEGER PRIMARY KEY, created_at REAL NOT NULL, workload TEXT NOT NULL, mode TEXT NOT NULL,
  policy TEXT NOT NULL, workers INTEGER NOT NULL, global_batch INTEGER NOT NULL,
  run_dir TEXT NOT NULL, summary_json TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS train_steps (
  run_id INTEGER NOT NULL REFERENCES train_runs(id) ON DELETE CASCADE,
  step INTEGER, rank INTEGER, epoch INTEGER, local_batch INTEGER, slowdown REAL, compute_s REAL,
  wait_s REAL, allreduce_s REAL, update_s REAL, controller_s REAL, step_s REAL, samples_per_s REAL);
CREATE TABLE IF NOT EXISTS train_evals (
  run_id INTEGER NOT NULL REFERENCES train_runs(id) ON DELETE CASCADE,
  step INTEGER, train_time_s REAL, metric REAL);
"""
SAMPLE_FIELDS = tuple(StepSample.__dataclass_fields__)
STEP_ROW_FIELDS = tuple(StepRow.__dataclass_fields__)
EVAL_ROW_FIELDS = tuple(EvalRow.__dataclass_fields__)
TABLES = ("profiles", "step_samples", "calibrations", "decisions", "train_runs", "train_steps", "train_evals")


class Store:
    """A thrifty database; open with Store(path) and use as a context manager or call close()."""

    def __init__(self, path: Path | str = DEFAULT_DB) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path)
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.conn.executescript(SCHEMA)
        except (sqlite3.DatabaseError, OSError) as exc:
            raise ThriftyError(f"cannot open the database {self.path}: {exc}") from None

    def __enter__(self) -> "Store":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

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
            profile_id = int(cur.lastrowid)
            self.conn.executemany(
                f"INSERT INTO step_samples (profile_id, {', '.join(SAMPLE_FIELDS)}) "
                f"VALUES ({', '.join('?' * (len(SAMPLE_FIELDS) + 1))})",
                [(profile_id, *(getattr(s, f) for f in SAMPLE_FIELDS)) for s in profile.samples])
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
        samples = [StepSample(*(float("nan") if v is None else v for v in r)) for r in self.conn.execute(
            f"SELECT {', '.join(SAMPLE_FIELDS)} FROM step_samples WHERE profile_id = ?",
            (profile_id,))]
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

    def count(self, table: str) -> int:
        if table not in TABLES:
            raise ValueError(table)
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])

    def save_decision(self, workload_key: str, request: dict, recommended: dict) -> None:
        with self.conn:
            self.conn.execute(
                "INSERT INTO decisions (created_at, workload_key, request_json, recommended_json) "
                "VALUES (?,?,?,?)", (time.time(), workload_key, json.dumps(request),
                                     json.dumps(recommended)))


    def save_training_run(self, summary: dict, log: RunLog, mode: str = "bsp") -> int:
        """Insert a training run, its per-step rows and its evaluations in one transaction."""
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO train_runs (created_at, workload, mode, policy, workers, global_batch, "
                "run_dir, summary_json) VALUES (?,?,?,?,?,?,?,?)",
                (time.time(), summary["workload"], mode, summary["policy"], summary["workers"],
                 summary["global_batch"], summary.get("run_dir", ""), json.dumps(summary)))
            run_id = int(cur.lastrowid)
            self.conn.executemany(
                f"INSERT INTO train_steps (run_id, {', '.join(STEP_ROW_FIELDS)}) "
                f"VALUES ({', '.join('?' * (len(STEP_ROW_FIELDS) + 1))})",
                [(run_id, *(getattr(r, f) for f in STEP_ROW_FIELDS)) for r in log.steps])
            self.conn.executemany(
                f"INSERT INTO train_evals (run_id, {', '.join(EVAL_ROW_FIELDS)}) VALUES (?,?,?,?)",
                [(run_id, *(getattr(r, f) for f in EVAL_ROW_FIELDS)) for r in log.evals])
        return run_id
