# SPDX-License-Identifier: MIT
"""A change of the global batch while `thrifty train` runs, taken in place: no checkpoint, no
relaunch, no new process group (what Pollux and AdaptDL do between their restarts' worth of work).

A supervisor (`thrifty search --backend local`) writes a request, `.batch-request.json` in the
run's checkpoint folder (`{"id": n, "global_batch": B, "steps": S}`: S the run's new last step, or
null to keep the samples it still has to train), then sends SIGUSR2 to the launcher, once the
launcher's ready file is there (transient.protocol). The launcher counts the signal into the memory
it shares with the ranks (train.preemption); rank 0 reads the request when the count moves and
puts it into the gradient all-reduce that runs anyway, so after that step every rank holds the
same request, and every rank changes after the same step (train.batch_change):

- the batch policy starts afresh at B with the same b_min, b_max and settings (as after a resume
  at another batch: the split's statistics belong to the old local batches);
- the sampler cuts the same epoch's permutation at B from the first unused sample
  (train.sampler: nothing skipped or repeated);
- the learning rate and the other hyperparameters become the workload's for B (its optimizer's
  param groups at B), the optimizer's state kept, as a resume at another batch does
  (checkpoint.adopt_hyperparameters);
- the learning-rate schedule's horizon becomes the samples seen plus (S - step) x B.

A request the run cannot take (B below the workers or above their b_max or the data set, S not
beyond the current step, or the run at its last step) is refused and the run goes on at its batch.
Rank 0 answers either way in `.batch-reply.json` (`{"id", "applied", "step", "global_batch",
"steps", "change_s", "reason"}`: change_s the time the change took), written atomically; a request
whose numbers the all-reduce cannot carry exactly (it runs in the gradients' dtype: a batch above
2^24 in float32, most numbers in bfloat16; the last step rides in two parts, so any fits float32)
is refused by rank 0 before it rides. Heard by the local
launcher under a runner (THRIFTY_CHECKPOINT_DIR set, as the search's local backend and `thrifty
run` start it); not under torchrun. The checkpoint keeps the new batch but not the moved last step:
a restart goes on with its command line's `--steps` (and its `--global-batch`, if it gives one),
so under `thrifty run` a change lasts until the next preemption (the search's local backend
relaunches with both set from the job's progress).
"""

import json
import logging
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from thrifty.io import write_text_atomic

if TYPE_CHECKING:
    import torch

REQUEST_NAME, REPLY_NAME = ".batch-request.json", ".batch-reply.json"
STEPS_SPLIT = 2**24  # the last step rides as two floats, each exact in float32 (a job's steps can exceed 2^24)
log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchRequest:
    """Train on at global batch `global_batch` up to step `steps` (None: the samples the run still
    has to train, at the new batch). `id` numbers a supervisor's requests from 1."""

    id: int
    global_batch: int
    steps: int | None = None

    def as_extras(self) -> list[float]:
        """Four floats for the all-reduce (rank 0's; the other ranks add zeros): id, batch, and
        the last step in two parts (-1, 0 for None)."""
        high, low = (-1, 0) if self.steps is None else divmod(self.steps, STEPS_SPLIT)
        return [float(self.id), float(self.global_batch), float(high), float(low)]

    def exact_in(self, dtype: "torch.dtype") -> bool:
        """Whether the all-reduce, which runs in the gradients' dtype (train.aggregation), carries
        the numbers exactly: float32 a batch up to 2^24, bfloat16 not even batch 257."""
        import torch
        return all(torch.tensor(v, dtype=dtype).item() == v for v in self.as_extras())

    @classmethod
    def from_extras(cls, values: list[float]) -> "BatchRequest | None":
        request_id, batch, high, low = (round(v) for v in values)
        return None if request_id <= 0 else cls(request_id, batch, None if high < 0 else high * STEPS_SPLIT + low)


def write_request(directory: Path, request: BatchRequest) -> None:
    """The supervisor's side: the request, atomically (the launcher may read it at any moment)."""
    write_text_atomic(Path(directory) / REQUEST_NAME, json.dumps(asdict(request)))


def read_request(directory: Path) -> BatchRequest | None:
    """Rank 0's side: the request in `directory`; None (and a warning) when there is none or it is
    not one."""
    path = Path(directory) / REQUEST_NAME
    try:
        data = json.loads(path.read_text())
        steps = data.get("steps")
        request = BatchRequest(int(data["id"]), int(data["global_batch"]), None if steps is None else int(steps))
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        log.warning("a batch request was signalled but %s is not one (%s): ignored", path, exc)
        return None
    return request


def reply_to(request: BatchRequest, reason: str | None, *, step: int | None = None, global_batch: int | None = None,
             steps: int | None = None, change_s: float = 0.0) -> dict:
    """Rank 0's answer: taken (`reason` None) or refused, and where the run then stands."""
    return {"id": request.id, "applied": reason is None, "step": step, "global_batch": global_batch, "steps": steps,
            "change_s": change_s, "reason": reason}


def write_reply(directory: Path, reply: dict) -> None:
    write_text_atomic(Path(directory) / REPLY_NAME, json.dumps(reply))


def read_reply(directory: Path) -> dict | None:
    """The supervisor's side: rank 0's latest answer, or None before the first."""
    try:
        return json.loads((Path(directory) / REPLY_NAME).read_text())
    except (OSError, ValueError):
        return None
