# SPDX-License-Identifier: MIT
"""Every window is stored (probe row + checkpoint, one transaction); a search killed after any
window resumes from its store, ends exactly where an uninterrupted run ends, and measures no
configuration it had measured before the kill. Each test names the mutation it caught."""

import sqlite3

import pytest
from search_support import scenario

from thrifty.search.harness import default_start
from thrifty.search.session import run_search
from thrifty.store import Store


class Killed(Exception):
    """Stands for the process dying: raised by a listener after the recorder stored the window."""


def killer(after: int):
    def listen(event):
        if event.index + 1 == after:
            raise Killed
    return listen


@pytest.mark.parametrize("kill_after", [2, 5])  # inside the initial profile, and while exploring
def test_a_killed_search_resumes_to_the_uninterrupted_result_without_remeasuring(rows, tmp_path, kill_after):
    # mutations caught: the resume re-runs the profile (no skip of measured profile windows);
    # the sim's generator state left out of the checkpoint; the checkpoint not stored per window
    sc, start = scenario(rows, "cost"), default_start(rows)
    whole, _ = run_search(sc, 3, start)
    with Store(tmp_path / "t.db") as store:
        with pytest.raises(Killed):
            run_search(sc, 3, start, store, listeners=[killer(kill_after)])
        [before] = store.conn.execute("SELECT id FROM searches").fetchall()
        measured_before = {(p["instance_type"], p["num_nodes"], p["num_workers"], p["global_batch"])
                           for p in store.search_probes(before[0])}
        assert len(measured_before) == kill_after
        measured_after = []
        resumed, search = run_search(sc, 3, start, store, resume=True,
                                     listeners=[lambda e: measured_after.append(e.probe.config)])
        assert store.count("searches") == 1 and len(store.search_probes(before[0])) == len(whole.probes)
    assert resumed.to_dict() == whole.to_dict()
    assert not {(c.instance_type, c.num_nodes, c.num_workers, c.global_batch) for c in measured_after} & measured_before
    assert len(measured_after) == len(whole.probes) - kill_after


def test_every_window_is_a_row_and_a_finished_search_resumes_without_measuring(rows, tmp_path):
    # mutations caught: sync time or standard error not stored; a finished search run again;
    # another seed's search resumed (the seed left out of the request key)
    sc, start = scenario(rows, "time"), default_start(rows)
    with Store(tmp_path / "t.db") as store:
        outcome, _ = run_search(sc, 0, start, store)
        [stored] = store.conn.execute("SELECT id FROM searches").fetchall()
        probes = store.search_probes(stored[0])
        assert [p["step_time_s"] for p in probes] == [p.step_time_s for p in outcome.probes]
        synced = {(r.config.instance_type, r.config.num_nodes, r.config.num_workers, r.config.global_batch)
                  for r in rows if r.sync_time_s is not None}
        assert all(p["step_time_se_s"] > 0 and p["billed_s"] >= p["wall_time_s"] * (1 - 1e-9) > 0 for p in probes)
        assert [p["sync_time_s"] is not None for p in probes] == \
            [(p["instance_type"], p["num_nodes"], p["num_workers"], p["global_batch"]) in synced for p in probes]
        assert any(p["sync_time_s"] is not None for p in probes)
        again, search = run_search(sc, 0, start, store, resume=True, listeners=[killer(1)])
        assert search is None and again.to_dict() == outcome.to_dict()
        fresh, _ = run_search(sc, 1, start, store, resume=True)  # a seed never started runs from the start
        assert fresh.to_dict() == run_search(sc, 1, start)[0].to_dict() and store.count("searches") == 2


def test_a_database_from_before_searches_gets_the_tables_when_opened(tmp_path):
    # mutation caught: the search tables left out of the schema an old database is opened with
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE decisions (id INTEGER PRIMARY KEY, created_at REAL NOT NULL, "
                     "workload_key TEXT NOT NULL, request_json TEXT NOT NULL, recommended_json TEXT NOT NULL)")
    with Store(path) as store:
        search_id = store.start_search("trace:x", "k", 0, {})
        assert store.latest_search("k") == (search_id, None, None)
