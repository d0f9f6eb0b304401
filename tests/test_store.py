"""The store: torch-free, and databases from before the one per-step record still open."""

import sqlite3
import subprocess
import sys

from thrifty.store import Store

OLD_TRAIN_TABLES = """
CREATE TABLE train_runs (id INTEGER PRIMARY KEY, created_at REAL NOT NULL, workload TEXT NOT NULL,
  mode TEXT NOT NULL, policy TEXT NOT NULL, workers INTEGER NOT NULL, global_batch INTEGER NOT NULL,
  run_dir TEXT NOT NULL, summary_json TEXT NOT NULL);
CREATE TABLE train_steps (run_id INTEGER NOT NULL REFERENCES train_runs(id) ON DELETE CASCADE,
  step INTEGER, rank INTEGER, epoch INTEGER, local_batch INTEGER, slowdown REAL, compute_s REAL,
  wait_s REAL, allreduce_s REAL, update_s REAL, controller_s REAL, step_s REAL, samples_per_s REAL);
INSERT INTO train_runs VALUES (1, 0, 'digits', 'bsp', 'dynamic', 2, 64, 'r', '{}');
INSERT INTO train_steps VALUES (1, 0, 1, 0, 20, 4.0, 0.5, 0.1, 0.02, 0.01, 0.001, 0.63, 100.0);
"""


def test_importing_the_store_does_not_import_torch():
    code = "import sys, thrifty.store, thrifty.records, thrifty.io, thrifty.progress; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_an_older_database_is_migrated_and_its_rows_keep_their_values(tmp_path):
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.executescript(OLD_TRAIN_TABLES)
    with Store(path) as store:
        [row] = store.training_steps(1)
    assert (row.rank, row.local_batch, row.slowdown, row.compute_time_s, row.wait_time_s) == (1, 20, 4.0, 0.5, 0.1)
    assert row.sync_time_s == 0.1 + 0.02  # wait + the all-reduce
    assert (row.update_time_s, row.controller_time_s, row.step_time_s) == (0.01, 0.001, 0.63)
    assert (row.num_workers, row.global_batch) == (2, 64)  # integers from the run, not NaN
    with Store(path) as store:  # opening again changes nothing
        assert store.count("train_steps") == 1
