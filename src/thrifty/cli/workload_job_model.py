# SPDX-License-Identifier: MIT
"""The workload's job model for a command, as `thrifty plan` and `thrifty search --backend local`
both get it: the newest stored profile of this machine, else a new profile (and calibration run)
stored for next time, with a spinner on stderr while it runs (thrifty.pipeline.job_model)."""

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the pipeline imports numpy and scipy: only inside the command
    from thrifty.perf.jobmodel import JobModel
    from thrifty.store import Store


def workload_job_model(store: "Store", workload: str, *, reprofile: bool = False,
                       epochs_to_target: float | None = None,
                       allow_busy: bool = False) -> tuple["JobModel", bool]:
    """(job model, reused): reused tells whether a stored profile was used as it was."""
    from thrifty.pipeline import ProfileSettings, job_model
    from thrifty.progress import spinner
    with spinner() as bar:
        task = bar.add_task(f"{workload}: the stored profile, or a new one (stored for next time)", total=None)
        return job_model(store, workload, settings=ProfileSettings(allow_busy=allow_busy),
                         reprofile=reprofile, epochs_to_target=epochs_to_target,
                         on_progress=lambda message: bar.update(task, description=message))
