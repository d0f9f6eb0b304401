# SPDX-License-Identifier: MIT
"""The workload's job model for a command, as `thrifty plan` and `thrifty search --backend local`
both get it: the newest stored profile of this machine, else a new profile (and calibration run)
stored for next time, with a spinner on stderr while it runs (thrifty.pipeline.job_model)."""

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the pipeline imports numpy and scipy: only inside the command
    from thrifty.perf.jobmodel import JobModel
    from thrifty.store import Store


log = logging.getLogger(__name__)
PROGRESS_LOG_EVERY_S = 10.0


def workload_job_model(store: "Store", workload: str, *, reprofile: bool = False,
                       epochs_to_target: float | None = None,
                       allow_busy: bool = False) -> tuple["JobModel", bool]:
    """(job model, reused): reused tells whether a stored profile was used as it was. Progress goes
    to the spinner, and to the log (-v) at most every PROGRESS_LOG_EVERY_S: the spinner shows on a
    terminal only, and a calibration run that cannot reach its target runs up to 20,000 steps."""
    from thrifty.pipeline import ProfileSettings, job_model
    from thrifty.progress import spinner
    said = [float("-inf")]
    with spinner() as bar:
        task = bar.add_task(f"{workload}: the stored profile, or a new one (stored for next time)", total=None)

        def progress(message: str) -> None:
            bar.update(task, description=message)
            if time.monotonic() - said[0] >= PROGRESS_LOG_EVERY_S:
                said[0] = time.monotonic()
                log.info("%s", message)
        return job_model(store, workload, settings=ProfileSettings(allow_busy=allow_busy),
                         reprofile=reprofile, epochs_to_target=epochs_to_target, on_progress=progress)
