"""`thrifty model project`: the step time thrifty predicts for a workload on one VM type, the same
prediction `thrifty plan` uses for every candidate (plan.candidates.predict_step_times)."""

import math
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.table import Table

from thrifty.cli_support import fmt_duration, int_list, print_json, stdout
from thrifty.errors import ThriftyError


def register_project(model_app: typer.Typer) -> None:
    @model_app.command("project")
    def project(
        workload: Annotated[str, typer.Option("--workload", "-w", help="builtin:NAME or a .py file")] = "builtin:digits",
        instance_type: Annotated[str, typer.Option(help="Catalog instance type, e.g. g2-standard-8")] = ...,
        local_batch: Annotated[str, typer.Option(help="Local batch sizes, e.g. 32,64,128")] = "32,64,128",
        workers: Annotated[Optional[int], typer.Option(help="Data-parallel ranks (default: one VM's)")] = None,
        precision: Annotated[str, typer.Option(help="fp32, tf32 or amp")] = "fp32",
        cloud: Annotated[Optional[str], typer.Option(help="Cloud, when the type name exists in several")] = None,
        catalog: Annotated[Optional[list[Path]], typer.Option("--catalog", help="Extra catalog CSV")] = None,
        db: Annotated[Path, typer.Option(help="SQLite database")] = Path.home() / ".thrifty" / "thrifty.db",
        json_out: Annotated[bool, typer.Option("--json", help="Print JSON for machines")] = False,
    ) -> None:
        """Predicted step time and its 90% interval of a workload on a VM type."""
        import numpy as np

        from thrifty.catalog import CatalogFilter, Hardware, load_catalog
        from thrifty.pipeline import job_model
        from thrifty.plan import PlanRequest, VMArrays
        from thrifty.plan.candidates import max_local_batch, predict_step_times
        from thrifty.store import Store

        batches = int_list(local_batch, "--local-batch")
        if min(batches) < 1:
            raise ThriftyError(f"--local-batch needs positive sizes, got {local_batch}")
        vms = CatalogFilter(clouds=[cloud] if cloud else None,
                            instance_types=[instance_type]).apply(load_catalog(catalog or []))
        if not vms:
            raise ThriftyError(f"unknown instance type {instance_type!r}: see `thrifty catalog list`")
        vm = vms[0]
        ranks = workers if workers is not None else vm.ranks_per_node
        if ranks < 1:
            raise ThriftyError(f"--workers must be at least 1, got {ranks}")
        nodes = math.ceil(ranks / vm.ranks_per_node)
        request = PlanRequest(precision=precision)
        vmx = VMArrays.build([vm], Hardware.load())
        with Store(db) as store:
            job, _ = job_model(store, workload)
        fits = int(max_local_batch(vmx, job, precision)[0])
        if max(batches) > fits:
            raise ThriftyError(f"local batch {max(batches)} does not fit in the memory of one "
                               f"{'GPU' if vm.is_gpu else 'VM'} of {vm.label} (at most {fits} at {precision})")
        count = len(batches)
        step, low, high, measured, _ = predict_step_times(
            vmx, job, np.zeros(count, int), np.full(count, float(nodes)), np.full(count, float(ranks)),
            np.array(batches, float), request)
        rows = [{"instance_type": vm.instance_type, "workers": ranks, "local_batch": b,
                 "step_time_s": float(t), "interval_s": [float(lo), float(hi)],
                 "prediction": "measured" if m else "projected"}
                for b, t, lo, hi, m in zip(batches, step, low, high, measured)]
        if json_out:
            print_json(rows)
            return
        table = Table(title=f"{workload} on {vm.label}, {ranks} worker(s), {precision}")
        for col in ("local batch", "step time", "90% interval", "samples/s", "how"):
            table.add_column(col, justify="right")
        for row in rows:
            low_s, high_s = row["interval_s"]
            table.add_row(str(row["local_batch"]), fmt_duration(row["step_time_s"]),
                          f"{fmt_duration(low_s)} - {fmt_duration(high_s)}",
                          f"{ranks * row['local_batch'] / row['step_time_s']:,.0f}", row["prediction"][:4])
        stdout.print(table)
