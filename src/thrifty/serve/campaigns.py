# SPDX-License-Identifier: MIT
"""Everything `thrifty serve` reads of the MD side, in this one module: campaigns through
md.campaign.store's public methods, and the nanoconfinement surrogate through md.surrogate's
load/predict API (md.surrogate.metrics for its accuracy).

CampaignStore's methods run on a read-only connection (readonly.read_transaction) put in place of
the read-write one its constructor would open (which also creates its tables), so `completed` and
`batches` read as the campaign itself reads them, and nothing is written.

Per campaign: its request (space, sampler, simulation), progress (runs completed and converged
over time), the preemptions (a run's attempts beyond the first) and the work redone after them,
and the bill: each `md sweep` session of the campaign stores its pool's bill at its end
(md.campaign.store.end_session, md.campaign.pool.bill), and the sessions' bills are summed; a
session without an end is running, or its driver was killed (its nodes' time is then unknown), and
is counted apart.
"""

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from thrifty.errors import ThriftyError
from thrifty.md.campaign.store import CampaignStore
from thrifty.md.campaign.work_dir import default_work_dir
from thrifty.serve.readonly import has_table, read_transaction

CAMPAIGN_TABLES = ("md_campaigns", "md_campaign_runs")


def _store(conn, path: Path, name: str) -> CampaignStore:
    store = CampaignStore.__new__(CampaignStore)
    store.path, store.name, store.conn = Path(path), name, conn
    return store


@dataclass(frozen=True)
class CampaignDb:
    """One `--campaign-db`; a campaign's id is `{index}-{name}`."""

    index: int
    path: Path

    def names(self) -> list[tuple[str, float, dict]]:
        with read_transaction(self.path) as conn:
            rows = conn.execute("SELECT name, created_at, request_json FROM md_campaigns "
                                "ORDER BY created_at").fetchall()
        return [(r[0], r[1], json.loads(r[2])) for r in rows]

    def campaigns(self) -> list[dict]:
        out = []
        for name, created, request in self.names():
            with read_transaction(self.path) as conn:
                runs = _store(conn, self.path, name).completed()
            out.append({"id": f"{self.index}-{name}", "name": name, "created_at": created,
                        "sampler": request.get("sampler"), "simulation": request.get("simulation"),
                        "runs": len(runs), "converged": sum(bool(r["result"].get("converged")) for r in runs)})
        return out

    def campaign(self, name: str, surrogate: "Surrogate | None") -> dict | None:
        known = {n: (created, request) for n, created, request in self.names()}
        if name not in known:
            return None
        created, request = known[name]
        with read_transaction(self.path) as conn:
            store = _store(conn, self.path, name)
            runs, batches = store.completed(), store.batches()
            sessions = store.sessions() if has_table(conn, "md_campaign_sessions") else []
            finished = dict(conn.execute("SELECT run_id, finished_at FROM md_campaign_runs WHERE campaign = ?",
                                         (name,)).fetchall())
        progress, converged, preemptions, redone = [], 0, 0, 0.0
        for i, run in enumerate(runs, start=1):
            converged += bool(run["result"].get("converged"))
            preemptions += max(int(run["attempts"]) - 1, 0)
            redone += float(run["lost_work_s"])
            progress.append({"run_id": run["run_id"], "completed": i, "converged": converged,
                             "elapsed_s": finished[run["run_id"]] - created, "preemptions": preemptions,
                             "lost_work_s": redone, "steps": run["result"].get("steps"), "params": run["params"]})
        bill = _bill(sessions)
        # the run folders: the newest session's --work-dir (stored since it was), else md sweep's default
        # (a stored one that is gone: the database and its runs were moved together)
        stored = [Path(s["work_dir"]) for s in sessions if s["work_dir"]]
        default = default_work_dir(self.path, name)  # a campaign from before per-campaign folders: DB.runs
        work = stored[-1] if stored and stored[-1].is_dir() else default if default.is_dir() else \
            self.path.with_suffix(".runs")
        return {"id": f"{self.index}-{name}", "name": name, "created_at": created, "request": request,
                "runs": len(runs), "converged": converged, "preemptions": preemptions, "lost_work_s": redone,
                "batches": len(batches), "progress": progress, "bill": bill,
                "surrogate_accuracy": None if surrogate is None else surrogate.accuracy_on(
                    [work / r["run_id"] for r in runs])}


def _bill(sessions: list[dict]) -> dict:
    """The finished sessions' bills summed, in the pool's terms (spot or on-demand, as each session ran)."""
    ended = [s for s in sessions if s["bill"] is not None]
    out: dict = {"sessions": len(sessions), "open_sessions": len(sessions) - len(ended)}
    if not ended:
        out |= {"cost_usd": None, "reason": "no md sweep session of this campaign has ended yet" if sessions else
                "this store predates stored bills: thrifty md sweep printed the pool's bill at its end"}
        return out
    at_spot = [s["pool"].startswith("spot") for s in ended]
    out |= {"cost_usd": float(sum(s["bill"]["cost_at_spot_usd" if spot else "cost_at_on_demand_usd"]
                                  for s, spot in zip(ended, at_spot, strict=True))),
            "cost_at_on_demand_usd": float(sum(s["bill"]["cost_at_on_demand_usd"] for s in ended)),
            "node_hours_model": float(sum(s["bill"]["node_hours_model"] for s in ended)),
            "instance_types": sorted({s["instance_type"] for s in ended})}
    return out


class Surrogate:
    """The `--surrogate` model folder (md.surrogate.Ensemble), loaded once; needs torch."""

    def __init__(self, folder: Path) -> None:
        from thrifty.md.surrogate import Ensemble
        self.folder = Path(folder)
        self.ensemble = Ensemble.load(self.folder)

    def describe(self) -> dict:
        from thrifty.md.params import PARAMETERS
        domain = self.ensemble.domain
        return {"members": len(self.ensemble.networks), "bins": self.ensemble.config.bins,
                "range": {name: [float(lo), float(hi)]
                          for name, lo, hi in zip(PARAMETERS, domain.low, domain.high, strict=True)},
                "domain_limit": domain.limit}

    def profile(self, values: dict) -> dict:
        """Both density profiles at one point with the calibrated 90% band, as `thrifty md predict`
        gives them (z from the mid-plane in nm); one-line errors for a point md.params refuses or one
        outside the training domain (md.surrogate.domain: the joint check)."""
        from thrifty.md.params import PARAMETERS, check_point
        from thrifty.md.profile_grid import to_z_nm
        point = check_point(values)
        distance = self.ensemble.domain.check(point)
        prediction = self.ensemble.predict(point)
        mean, (low, high) = prediction.mean[0], (b[0] for b in prediction.band())
        h = float(point[PARAMETERS.index("h_nm")])
        out = {"point": dict(zip(PARAMETERS, point.tolist(), strict=True)),
               "z_nm": to_z_nm(h, self.ensemble.config.bins).tolist(), "nearest_training_distance": distance,
               "band": "90% (calibrated)"}
        for i, ion in enumerate(("cation", "anion")):
            out[ion] = {"mean_molar": mean[i].tolist(), "low_molar": low[i].tolist(), "high_molar": high[i].tolist()}
        return out

    def accuracy_on(self, folders: list[Path]) -> dict:
        """md.surrogate.metrics.accuracy of the model on those run folders md.runs can read
        (params.json and profiles.csv, as the nanoconfinement runs write them)."""
        from thrifty.md.runs import grid_arrays, read_run
        from thrifty.md.surrogate.metrics import accuracy
        runs = []
        for folder in folders:
            try:
                runs.append(read_run(folder))
            except (ThriftyError, OSError):
                continue  # not a nanoconfinement run (the stand-in writes other columns), or not there
        if not runs:
            return {"runs": 0, "within_error": None,
                    "reason": "no run folder of this campaign holds params.json and nanoconfinement profiles"}
        points, density, error = grid_arrays(runs, self.ensemble.config.bins)
        predicted = self.ensemble.predict(points).mean
        result = accuracy(points, predicted, density, error).to_dict()
        per_run = [float(np.mean(np.abs(p - d) <= e)) for p, d, e in zip(predicted, density, error, strict=True)]
        return {"runs": len(runs), **result, "per_run_within_error": per_run, "run_names": [r.name for r in runs]}
