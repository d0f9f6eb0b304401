# SPDX-License-Identifier: MIT
"""The live view of `thrifty search`: a rich panel redrawn after every window from the loop's
WindowDone events (search.events). A presenter only: it formats what the event carries and
decides nothing, so the search runs the same with or without it."""

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from thrifty.cli.common import fmt_duration, fmt_usd
from thrifty.search.events import WindowDone


class LiveView:
    """Use as a context manager around the search; pass the instance as a listener."""

    def __init__(self, console: Console) -> None:
        self.rows: list[WindowDone] = []
        self.live = Live(Text("search: starting"), console=console, auto_refresh=False, transient=False)

    def __enter__(self) -> "LiveView":
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)

    @staticmethod
    def _amount(value: float, objective: str) -> str:
        return fmt_duration(value) if objective == "time" else fmt_usd(value)

    def __call__(self, event: WindowDone) -> None:
        self.rows.append(event)
        table = Table(title="windows", title_justify="left", expand=False)
        for name in ("#", "configuration", "steps", "step time", "+-SE", "cost", ""):
            table.add_column(name, justify="left" if name == "configuration" else "right")
        for e in self.rows:
            p = e.probe
            se = "-" if p.step_time_se_s is None else fmt_duration(p.step_time_se_s)
            table.add_row(str(e.index + 1), p.config.label(), str(p.steps), fmt_duration(p.step_time_s), se,
                          fmt_usd(p.cost_usd), "cut short" if p.cut_short else "")
        guess = event.prediction
        best = "predicted best: - (profiling)" if guess is None else (
            f"predicted best: {guess.config.label()}, {guess.objective} left "
            f"{self._amount(guess.remaining, guess.objective)} (90%: {self._amount(guess.low, guess.objective)} "
            f"to {self._amount(guess.high, guess.objective)})")
        head = Text(f"current {event.probe.config.label()}  progress {event.progress / event.target:.1%}  "
                    f"elapsed {fmt_duration(event.elapsed_s)}  spent {fmt_usd(event.cost_usd)}  "
                    f"exploration {fmt_usd(event.exploration_usd)}\n{best}")
        self.live.update(Group(head, table), refresh=True)
