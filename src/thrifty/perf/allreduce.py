# SPDX-License-Identifier: MIT
"""All-reduce time from bandwidth and latency, for hardware that was not profiled.

Ring all-reduce of M bytes over n ranks (Thakur, Rabenseifner & Gropp 2005; Patarasuk & Yuan 2009):
  T = 2 (n - 1) / n * M / BW + 2 (n - 1) * alpha
"""

import numpy as np

INTRA_NODE_LATENCY_S = 5e-6  # one hop over PCIe/NVLink, order of magnitude (NCCL tests)
INTER_NODE_LATENCY_S = 30e-6  # one TCP hop inside a cloud region, order of magnitude


def ring_allreduce_time_s(workers, message_bytes: float, bandwidth_gbps, latency_s) -> np.ndarray:
    n = np.asarray(workers, float)
    seconds_per_byte = 8.0 / (np.asarray(bandwidth_gbps, float) * 1e9)
    time = 2.0 * (n - 1.0) / n * message_bytes * seconds_per_byte + 2.0 * (n - 1.0) * latency_s
    return np.where(n > 1, time, 0.0)
