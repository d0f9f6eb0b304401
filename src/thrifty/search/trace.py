# SPDX-License-Identifier: MIT
"""A measured (or synthetic) trace of step times per configuration: the ground truth of `sim`.

CSV columns `instance_type,num_nodes,num_workers,local_batch,step_time_s` (num_workers in all,
not a node's; at least one a node, not necessarily as many on each: 3 workers on 2 nodes is an
uneven placement), optionally `sync_time_s` (the part of the step spent synchronising: at most the
step; blank or 0 where one worker has none) and `price_per_hour` (of one node, on demand). A type
without a price column value takes its on-demand price from the catalog; a type the catalog does
not know then cannot be priced, which is an error naming it.

Several rows of one configuration are its launches: on a real cluster each launch lands on its own
nodes and links (a 2+2 or a 1+3 placement of 4 workers on 2 nodes, a congested switch), so one
configuration's step and sync times differ from launch to launch, often in modes. `sim` draws one
of them, with equal chance, each time the job is launched on the configuration; the oracle and
every mean use their mean, what a launch costs in expectation."""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from thrifty.catalog import VMType
from thrifty.errors import ThriftyError
from thrifty.io import read_csv, write_csv
from thrifty.perf.steptime import MAX_LOCAL_BATCH, MAX_WORKERS, STEP_TIME_RANGE_S
from thrifty.search.config import Config

REQUIRED = ("instance_type", "num_nodes", "num_workers", "local_batch", "step_time_s")


@dataclass(frozen=True)
class Launch:
    """One launch of a configuration: its mean step time and the part of it spent synchronising."""

    step_time_s: float
    sync_time_s: float | None


@dataclass(frozen=True)
class TraceRow:
    """The true mean step time of one configuration and the price of the whole cluster; with
    `launches`, the measured launches that mean is taken over (none: one launch, the row's own)."""

    config: Config
    step_time_s: float
    sync_time_s: float | None
    price_per_hour: float  # all nodes together
    launches: tuple[Launch, ...] = ()

    @classmethod
    def of_launches(cls, config: Config, launches: tuple[Launch, ...], price_per_hour: float) -> "TraceRow":
        """The row of a configuration measured on `launches` (one or more): their mean step and sync
        (a one-worker launch's blank sync counts as none)."""
        if len(launches) == 1:
            return cls(config, launches[0].step_time_s, launches[0].sync_time_s, price_per_hour)
        step = sum(x.step_time_s for x in launches) / len(launches)
        syncs = [x.sync_time_s for x in launches if x.sync_time_s is not None]
        return cls(config, step, sum(syncs) / len(syncs) if syncs else None, price_per_hour, launches)

    @property
    def mean(self) -> Launch:
        """The configuration's mean launch (the expectation the oracle trains at)."""
        return Launch(self.step_time_s, self.sync_time_s)

    @property
    def draws(self) -> tuple[Launch, ...]:
        """What a launch of this configuration can land on, each as likely."""
        return self.launches or (self.mean,)


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


@dataclass(frozen=True)
class _Measured:
    line: int
    launch: Launch
    node_price: float


def parse_trace(records: Iterable[Mapping[str, str]], catalog: Iterable[VMType], where: str) -> list[TraceRow]:
    """Validated rows, one per configuration in the order first seen (module docstring: repeated
    configurations are launches); `catalog` prices the types whose rows carry no price_per_hour."""
    prices: dict[str, float] = {}
    for vm in catalog:  # the cheapest region of a type, as `thrifty plan` would choose, by its bare name
        for name in vm.type_names:  # and as the plan prints it
            prices[name] = min(prices.get(name, float("inf")), vm.price_per_hour)
    measured: dict[Config, list[_Measured]] = {}
    for line, record in enumerate(records, start=2):
        at = f"{where}:{line}"
        name = (record.get("instance_type") or "").strip()
        if not name:
            raise ThriftyError(f"{at}: column 'instance_type' is empty")
        nodes = int(_number(record, "num_nodes", at, integer=True))
        workers = int(_number(record, "num_workers", at, integer=True))
        local = int(_number(record, "local_batch", at, integer=True))
        for column, value, most in (("num_workers", workers, MAX_WORKERS), ("local_batch", local, MAX_LOCAL_BATCH)):
            if value > most:  # a new user's pass: 1e19 ended in SQLite's OverflowError, a window stored
                raise ThriftyError(f"{at}: {column} {value} is beyond {most:g}, what the step-time model stands on")
        if workers < nodes:
            raise ThriftyError(f"{at}: num_workers ({workers}) is fewer than num_nodes ({nodes}): every node "
                               "runs at least one worker")
        step = _number(record, "step_time_s", at)
        low, high = STEP_TIME_RANGE_S
        if not low <= step <= high:  # 1e300 overflowed the fit into a misleading refusal
            raise ThriftyError(f"{at}: step_time_s {step:g} is outside {low:g}-{high:g} s, what the step-time "
                               "model stands on: is it in seconds?")
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
        measured.setdefault(Config(name, nodes, workers, local * workers), []).append(
            _Measured(line, Launch(step, sync), node_price))
    return [_row(config, launches, where) for config, launches in measured.items()]


def _row(config: Config, measured: list[_Measured], where: str) -> TraceRow:
    """One configuration's row from its launches (one or more)."""
    first = measured[0]
    for m in measured[1:]:
        if m.node_price != first.node_price:
            raise ThriftyError(f"{where}:{m.line}: configuration {config.label()} costs {m.node_price:g} a node "
                               f"here and {first.node_price:g} on line {first.line}: one configuration, one price")
        if config.num_workers > 1 and (m.launch.sync_time_s is None) != (first.launch.sync_time_s is None):
            raise ThriftyError(f"{where}:{m.line}: configuration {config.label()} has a sync_time_s on some "
                               "of its rows and not on others: give it on all or none")
    return TraceRow.of_launches(config, tuple(m.launch for m in measured), first.node_price * config.num_nodes)


def load_trace(path: Path, catalog: Iterable[VMType]) -> list[TraceRow]:
    return parse_trace(read_csv(path, ThriftyError, "trace", required=REQUIRED), catalog, str(path))


def write_trace(path: Path, rows: Iterable[TraceRow]) -> None:
    """The CSV `load_trace` reads, a row per launch, with prices per node (synthetic traces, tests)."""
    write_csv(path, (*REQUIRED, "sync_time_s", "price_per_hour"), [
        {"instance_type": r.config.instance_type, "num_nodes": r.config.num_nodes,
         "num_workers": r.config.num_workers, "local_batch": int(r.config.local_batch),
         "step_time_s": launch.step_time_s, "sync_time_s": "" if launch.sync_time_s is None else launch.sync_time_s,
         "price_per_hour": r.price_per_hour / r.config.num_nodes} for r in rows for launch in r.draws])
