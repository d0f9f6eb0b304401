"""How a rank's compute scales with the threads of a bigger CPU VM: Amdahl's law with a serial
fraction measured on the profiling machine at 1 and 2 threads.

  T(p) = T(1) * (s + (1 - s) / p)            (Amdahl 1967)
  s    = 2 T(2) / T(1) - 1                   (the same law solved for two measurements)
The serial fraction depends on the batch: small batches leave threads idle. It is measured per
profiled batch and interpolated in log batch (held constant outside the measured range). Threads
are the VM's vCPUs, as on the machine that measured it (1 and 2 vCPUs).
"""

from dataclasses import dataclass

import numpy as np

from thrifty.errors import ModelError


@dataclass(frozen=True)
class ThreadScaling:
    local_batch: np.ndarray  # increasing
    serial_fraction: np.ndarray  # s in [0, 1] at each batch

    @classmethod
    def from_measurements(cls, local_batch, one_thread_s, two_threads_s) -> "ThreadScaling":
        b, t1, t2 = (np.asarray(x, float) for x in (local_batch, one_thread_s, two_threads_s))
        if b.size == 0 or np.any(~np.isfinite(t1 * t2)) or np.any(t1 <= 0) or np.any(t2 <= 0):
            raise ModelError("thread scaling needs positive 1- and 2-thread compute times")
        order = np.argsort(b)
        serial = np.clip(2.0 * t2 / t1 - 1.0, 0.0, 1.0)  # Amdahl solved for s with p = 2
        return cls(b[order], serial[order])

    def serial_at(self, local_batch) -> np.ndarray:
        return np.interp(np.log(np.asarray(local_batch, float)), np.log(self.local_batch),
                         self.serial_fraction)

    def slowdown(self, local_batch, threads) -> np.ndarray:
        """T(p) / T(1) = s + (1 - s) / p."""
        s = self.serial_at(local_batch)
        return s + (1.0 - s) / np.asarray(threads, float)

    def to_dict(self) -> dict:
        return {"local_batch": self.local_batch.tolist(), "serial_fraction": self.serial_fraction.tolist()}

    @classmethod
    def from_dict(cls, data: dict) -> "ThreadScaling":
        return cls(np.asarray(data["local_batch"], float), np.asarray(data["serial_fraction"], float))
