# SPDX-License-Identifier: MIT
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


def test_a_database_that_cannot_be_written_is_refused_when_opened(tmp_path, monkeypatch):
    """A database in a read-only folder (or a read-only file) opens for reading and fails at the
    first write: the Store finds out at once, before the command's work. Root ignores permission
    bits, so the read-only open is SQLite's own (mode=ro). Mutation caught: the write probe
    removed (the Store opens and the command fails after its work)."""
    import pytest

    from thrifty.errors import ThriftyError
    path = tmp_path / "t.db"
    with Store(path) as store:
        store.conn.execute("INSERT INTO decisions (created_at, workload_key, request_json, recommended_json) "
                           "VALUES (0, 'w', '{}', '{}')")
        store.conn.commit()
    before = path.read_bytes()
    connect = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda p, *a, **k: connect(f"file:{p}?mode=ro", uri=True))
    with pytest.raises(ThriftyError, match="cannot open the database .*readonly"):
        Store(path)
    assert path.read_bytes() == before


def test_an_empty_file_or_another_programs_database_is_not_taken_over(tmp_path):
    """Mutations caught: an empty file turned into a database; thrifty's tables added to a foreign
    SQLite file."""
    import pytest

    from thrifty.errors import ThriftyError
    empty = tmp_path / "notes.txt"
    empty.write_text("")
    with pytest.raises(ThriftyError, match="empty file"):
        Store(empty)
    assert empty.read_bytes() == b""
    foreign = tmp_path / "other.db"
    with sqlite3.connect(foreign) as conn:
        conn.execute("CREATE TABLE notes (x)")
    with pytest.raises(ThriftyError, match="another program"):
        Store(foreign)
    names = {r[0] for r in sqlite3.connect(foreign).execute("SELECT name FROM sqlite_master")}
    assert names == {"notes"}


def test_a_decision_and_its_plane_are_stored_together_or_not_at_all(tmp_path):
    """Mutations caught: the plane written outside the decision's transaction (a failed plane
    leaves a decision without it); the returned id not the decision's."""
    import json

    import pytest
    with Store(tmp_path / "t.db") as store:
        first = store.save_decision("w#1", {"objective": "cost"}, {"instance_type": "a"}, {"plane": {"shown": 1}})
        second = store.save_decision("w#1", {"objective": "time"}, {"instance_type": "b"})
        assert store.conn.execute("SELECT plane_json FROM decision_planes WHERE decision_id = ?",
                                  (first,)).fetchone() == (json.dumps({"plane": {"shown": 1}}),)
        assert second == first + 1 and store.count("decision_planes") == 1
        with pytest.raises(TypeError):  # not JSON: neither the decision nor its plane lands
            store.save_decision("w#1", {"objective": "knee"}, {"instance_type": "c"}, {"plane": object()})
        assert store.count("decisions") == 2 and store.count("decision_planes") == 1
