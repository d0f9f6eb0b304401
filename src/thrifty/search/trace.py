# SPDX-License-Identifier: MIT
"""A measured (or synthetic) trace of step times per configuration: the ground truth of `sim`.

CSV columns `instance_type,num_nodes,num_workers,local_batch,step_time_s` (num_workers in all,
not a node's), optionally `sync_time_s` (the part of the step spent synchronising: at most the
step; blank or 0 where one worker has none) and `price_per_hour` (of one node, on demand). A type
without a price column value takes its on-demand price from the catalog; a type the catalog does
not know then cannot be priced, which is an error naming it."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from thrifty.catalog import VMType
from thrifty.errors import ThriftyError
from thrifty.io import read_csv, write_csv
from thrifty.search.config import Config

REQUIRED = ("instance_type", "num_nodes", "num_workers", "local_batch", "step_time_s")


@dataclass(frozen=True)
class TraceRow:
    """The true mean step time of one configuration and the price of the whole cluster."""

    config: Config
    step_time_s: float
    sync_time_s: float | None
    price_per_hour: float  # all nodes together


def _number(record: Mapping[str, str], column: str, where: str, *, integer: bool = False,
            zero: bool = False) -> float:
    text = (record.get(column) or "").strip()
    try:
        value = int(text) if integer else float(text)
    except ValueError:
        raise ThriftyError(f"{where}: column '{column}' is not {'an integer' if integer else 'a number'}: "
                           f"{text!r}") from None
    if not ((value > 0 or (zero and value == 0)) and value < float("inf")):
        raise ThriftyError(f"{where}: column '{column}' must be {'0 or more' if zero else 'positive'}, got {text}")
    return value


def parse_trace(records: Iterable[Mapping[str, str]], catalog: Iterable[VMType], where: str) -> list[TraceRow]:
    """Validated rows; `catalog` prices the types whose rows carry no price_per_hour."""
    prices: dict[str, float] = {}
    for vm in catalog:  # the cheapest region of a type, as `thrifty plan` would choose, by its bare name
        for name in vm.type_names:  # and as the plan prints it
            prices[name] = min(prices.get(name, float("inf")), vm.price_per_hour)
    rows, seen = [], set()
    for line, record in enumerate(records, start=2):
        at = f"{where}:{line}"
        name = (record.get("instance_type") or "").strip()
        if not name:
            raise ThriftyError(f"{at}: column 'instance_type' is empty")
        nodes = int(_number(record, "num_nodes", at, integer=True))
        workers = int(_number(record, "num_workers", at, integer=True))
        local = int(_number(record, "local_batch", at, integer=True))
        if workers < nodes or workers % nodes:
            raise ThriftyError(f"{at}: num_workers ({workers}) must be a multiple of num_nodes ({nodes})")
        step = _number(record, "step_time_s", at)
        sync = _number(record, "sync_time_s", at, zero=True) if (record.get("sync_time_s") or "").strip() else None
        if sync is not None and sync > step:
            raise ThriftyError(f"{at}: sync_time_s ({sync:g}) exceeds step_time_s ({step:g}): the sync is part "
                               "of the step")
        if (record.get("price_per_hour") or "").strip():
            node_price = _number(record, "price_per_hour", at)
        elif name in prices:
            node_price = prices[name]
        else:
            raise ThriftyError(f"{at}: instance type {name!r} is not in the catalog and the row has no "
                               "price_per_hour: add the column or a --catalog CSV that prices it")
        config = Config(name, nodes, workers, local * workers)
        if config in seen:
            raise ThriftyError(f"{at}: configuration {config.label()} appears twice")
        seen.add(config)
        rows.append(TraceRow(config, step, sync, node_price * nodes))
    return rows


def load_trace(path: Path, catalog: Iterable[VMType]) -> list[TraceRow]:
    return parse_trace(read_csv(path, ThriftyError, "trace", required=REQUIRED), catalog, str(path))


def write_trace(path: Path, rows: Iterable[TraceRow]) -> None:
    """The CSV `load_trace` reads, with prices per node (synthetic traces, tests)."""
    write_csv(path, (*REQUIRED, "sync_time_s", "price_per_hour"), [
        {"instance_type": r.config.instance_type, "num_nodes": r.config.num_nodes,
         "num_workers": r.config.num_workers, "local_batch": int(r.config.local_batch),
         "step_time_s": r.step_time_s, "sync_time_s": "" if r.sync_time_s is None else r.sync_time_s,
         "price_per_hour": r.price_per_hour / r.config.num_nodes} for r in rows])
