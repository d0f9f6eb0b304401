# SPDX-License-Identifier: MIT
"""Progress on stderr for long work: a bar with a count out of a total and a few named text
fields (training, the ASP server), or a spinner with elapsed time when the length is unknown
(profiling). rich is imported when one starts, not before."""

from typing import Any


class ProgressBar:
    """`ProgressBar("train", total, fields=("rate", "split"))`, then `update(done, rate=...)`."""

    def __init__(self, label: str, total: float, *, completed: float = 0,
                 fields: tuple[str, ...] = (), show_count: bool = True) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        columns = [TextColumn(f"[bold]{label}[/]"), BarColumn()]
        if show_count:
            columns.append(TextColumn("{task.completed}/{task.total}"))
        columns += [TextColumn(f"{{task.fields[{name}]}}") for name in fields]
        self.total = total
        console = Console(stderr=True, emoji=False)
        # off a terminal nothing is drawn while it runs; close() prints the finished bar once
        self.bar = Progress(*columns, TimeElapsedColumn(), console=console, disable=not console.is_terminal)
        # rich takes a task's fields as **Any (a str-valued dict would be matched against its typed keywords)
        initial: dict[str, Any] = {"completed": completed, **{n: "" for n in fields}}
        self.task = self.bar.add_task(label, total=total, **initial)
        self.bar.start()
        self.open = True

    def update(self, completed: float, **fields: str) -> None:
        values: dict[str, Any] = dict(fields)  # as in __init__: rich's **fields are Any
        self.bar.update(self.task, completed=completed, **values)
        if completed >= self.total:
            self.close()

    def retotal(self, total: float) -> None:
        """The work grew or shrank: `total` from now on."""
        self.total = total
        self.bar.update(self.task, total=total)

    def close(self, failed: bool = False) -> None:
        """Stop the bar. Off a terminal (a log file, a pipe) the bar is printed once, here, and not
        after a failure: the error's one line is then all a failed command says on stderr."""
        if self.open:
            self.bar.stop()
            if not self.bar.console.is_terminal and not failed:
                self.bar.console.print(self.bar.get_renderable())
            self.open = False


def spinner():
    """A transient spinner with a description and elapsed time (a rich Progress; use `with`), shown
    only on a terminal: elsewhere it would leave an empty line on stderr, before an error's line too."""
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
    console = Console(stderr=True, emoji=False)
    return Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                    console=console, transient=True, disable=not console.is_terminal)
