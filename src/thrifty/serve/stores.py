# SPDX-License-Identifier: MIT
"""What thrifty's databases hold (thrifty.store's tables), as plain JSON-ready dicts, read
through `readonly.read_transaction`. A database is addressed by its index among `--db` options
and a row by its integer id: ids come from the request only as numbers bound into SQL."""

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

from thrifty.io import json_safe
from thrifty.records import STEP_FIELDS
from thrifty.serve.readonly import has_table, read_transaction
from thrifty.store import PROBE_COLUMNS, TABLES, probe_dict

STEP_COLUMNS = ", ".join(STEP_FIELDS)


@dataclass(frozen=True)
class ThriftyDb:
    """One `--db`: profiles, decisions (plans), searches and training runs."""

    index: int
    path: Path

    TABLES = TABLES

    def key(self, row_id: int) -> str:
        return f"{self.index}-{row_id}"

    def plans(self) -> list[dict]:
        with read_transaction(self.path) as conn:
            rows = conn.execute("SELECT id, created_at, workload_key, request_json, recommended_json "
                                "FROM decisions ORDER BY id DESC").fetchall()
        return [{"id": self.key(r[0]), "created_at": r[1], "workload_key": r[2], "request": json.loads(r[3]),
                 "recommended": json.loads(r[4])} for r in rows]

    def plan(self, row_id: int) -> dict | None:
        with read_transaction(self.path) as conn:
            r = conn.execute("SELECT id, created_at, workload_key, request_json, recommended_json FROM decisions "
                             "WHERE id = ?", (row_id,)).fetchone()
        if r is None:
            return None
        return {"id": self.key(r[0]), "created_at": r[1], "workload_key": r[2], "request": json.loads(r[3]),
                "recommended": json.loads(r[4])}

    def profiles(self) -> list[dict]:
        with read_transaction(self.path) as conn:
            rows = conn.execute(
                "SELECT p.id, p.workload_key, p.workload, p.created_at, p.instance_type, p.threads_per_rank, "
                "p.param_count, p.train_size, (SELECT COUNT(*) FROM step_samples WHERE profile_id = p.id) "
                "FROM profiles AS p ORDER BY p.id DESC").fetchall()
        names = ("workload_key", "workload", "created_at", "instance_type", "threads_per_rank", "param_count",
                 "train_size", "samples")
        return [{"id": self.key(r[0]), **dict(zip(names, r[1:], strict=True))} for r in rows]

    def profile_record(self, row_id: int) -> dict | None:
        """A profile with its samples and calibration, as thrifty.store.Store.latest_profile reads
        it (the plan view rebuilds the job model from it)."""
        with read_transaction(self.path) as conn:
            row = conn.execute("SELECT id, workload, instance_type, threads_per_rank, param_count, train_size, "
                               "meta_json, workload_key, created_at FROM profiles WHERE id = ?", (row_id,)).fetchone()
            if row is None:
                return None
            samples = [dict(zip(STEP_FIELDS, (float("nan") if v is None else v for v in s), strict=True)) for s in conn.execute(
                f"SELECT {STEP_COLUMNS} FROM step_samples WHERE profile_id = ?", (row_id,))]
            cal = conn.execute("SELECT global_batch, steps, reached_target, target_metric, final_metric, "
                               "wall_time_s, noise_json FROM calibrations WHERE profile_id = ?", (row_id,)).fetchone()
        calibration = None if cal is None else {
            "global_batch": cal[0], "steps": cal[1], "reached_target": bool(cal[2]), "target_metric": cal[3],
            "final_metric": cal[4], "wall_time_s": cal[5], "noise": json.loads(cal[6])}
        return {"id": row[0], "workload": row[1], "instance_type": row[2], "threads_per_rank": row[3],
                "param_count": row[4], "train_size": row[5], "meta": {**json.loads(row[6]), "profile_id": row[0]},
                "workload_key": row[7], "created_at": row[8], "samples": samples, "calibration": calibration}

    def stored_plane(self, decision_id: int) -> dict | None:
        """The plane `thrifty plan` stored with decision `decision_id` ({"plane", "pareto"}), or None
        (a decision stored before planes were kept)."""
        with read_transaction(self.path) as conn:
            if not has_table(conn, "decision_planes"):
                return None
            row = conn.execute("SELECT plane_json FROM decision_planes WHERE decision_id = ?", (decision_id,)).fetchone()
        return None if row is None else json.loads(row[0])

    def profile_for(self, workload_key: str, before: float) -> int | None:
        """The newest profile of a workload stored before `before`: the one a plan then used."""
        with read_transaction(self.path) as conn:
            row = conn.execute("SELECT id FROM profiles WHERE workload_key = ? AND created_at <= ? "
                               "ORDER BY id DESC LIMIT 1", (workload_key, before)).fetchone()
        return None if row is None else int(row[0])

    def workload_probes(self, workload_key: str) -> list[dict]:
        """As thrifty.store.Store.workload_probes: the search windows `thrifty plan` reads."""
        columns = ", ".join(f"p.{c}" for c in PROBE_COLUMNS)
        with read_transaction(self.path) as conn:
            rows = conn.execute(
                f"SELECT p.search_id, p.window, {columns} FROM search_probes AS p JOIN searches AS s "
                "ON s.id = p.search_id WHERE s.workload_key = ? AND p.steps > 0 ORDER BY s.id DESC, p.window",
                (workload_key,)).fetchall()
        return [probe_dict(("search_id", "window", *PROBE_COLUMNS), r) for r in rows]

    def searches(self) -> list[dict]:
        with read_transaction(self.path) as conn:
            rows = conn.execute(
                "SELECT s.id, s.created_at, s.workload_key, s.seed, s.result_json IS NOT NULL, "
                "(SELECT COUNT(*) FROM search_probes WHERE search_id = s.id), "
                "(SELECT SUM(cost_usd) FROM search_probes WHERE search_id = s.id) FROM searches AS s "
                "ORDER BY s.id DESC").fetchall()
        return [{"id": self.key(r[0]), "created_at": r[1], "workload_key": r[2], "seed": r[3],
                 "finished": bool(r[4]), "windows": r[5], "spend_usd": r[6] or 0.0} for r in rows]

    def search(self, row_id: int) -> dict | None:
        """A search's request, every window (probe rows, in order), the moves between windows (a
        window on another configuration than the one before) and the windows' spend, cumulative
        per window; and, once it finished, the whole search's time, cost and moves from its result
        (the settled segments' training and moves included, which no window row holds)."""
        with read_transaction(self.path) as conn:
            row = conn.execute("SELECT id, created_at, workload_key, seed, request_json, result_json FROM searches "
                               "WHERE id = ?", (row_id,)).fetchone()
            if row is None:
                return None
            windows = [probe_dict(("window", *PROBE_COLUMNS), r) for r in conn.execute(
                f"SELECT window, {', '.join(PROBE_COLUMNS)} FROM search_probes WHERE search_id = ? ORDER BY window",
                (row_id,))]
        config = ("instance_type", "num_nodes", "num_workers", "global_batch")
        moves, spend, elapsed = [], 0.0, 0.0
        for before, after in itertools.pairwise(windows):
            if any(before[k] != after[k] for k in config):
                moves.append({"window": after["window"], "from": {k: before[k] for k in config},
                              "to": {k: after[k] for k in config}})
        for w in windows:
            spend += w["cost_usd"] or 0.0
            elapsed += w["wall_time_s"] or 0.0
            w.update(spend_usd=spend, elapsed_s=elapsed)
        result = None if row[5] is None else json.loads(row[5])
        whole = {f"search_{key}": None if result is None else result.get(key) for key in ("time_s", "cost_usd", "moves")}
        return json_safe({"id": self.key(row[0]), "created_at": row[1], "workload_key": row[2], "seed": row[3],
                          "request": json.loads(row[4]), "finished": result is not None, "result": result,
                          "windows": windows, "moves": moves, "spend_usd": spend, **whole})

    def runs(self) -> list[dict]:
        with read_transaction(self.path) as conn:
            rows = conn.execute("SELECT id, created_at, workload, mode, policy, workers, global_batch, run_dir "
                                "FROM train_runs ORDER BY id DESC").fetchall()
        names = ("created_at", "workload", "mode", "policy", "workers", "global_batch", "run_dir")
        return [{"id": f"db{self.key(r[0])}", "source": "database", **dict(zip(names, r[1:], strict=True))} for r in rows]

    def run(self, row_id: int) -> dict | None:
        with read_transaction(self.path) as conn:
            row = conn.execute("SELECT id, summary_json FROM train_runs WHERE id = ?", (row_id,)).fetchone()
            if row is None:
                return None
            steps = [dict(zip(STEP_FIELDS, s, strict=True)) for s in conn.execute(
                f"SELECT {STEP_COLUMNS} FROM train_steps WHERE run_id = ? ORDER BY step, rank", (row_id,))]
        return json_safe({"id": f"db{self.key(row[0])}", "source": "database", "summary": json.loads(row[1]),
                          "steps": steps})
