"""Expected running time of a checkpointed job on VMs that fail at exponential (memoryless) times.

Daly (2006), "A higher order estimate of the optimum checkpoint interval for restart dumps",
eq. 20: with checkpoint interval tau, checkpoint cost delta, restart cost R and mean time to
interruption M, a job needing T_s seconds of work takes on average
  E[T] = M e^{R/M} (e^{(tau + delta)/M} - 1) T_s / tau.
Young (1974): tau = sqrt(2 delta M). A cluster of k VMs is interrupted when any one is: M_k = M / k.
"""

import numpy as np

# Mean lifetime of a Google preemptible VM: maximum-likelihood exponential fit with right-censoring
# (total observed hours / number of preemptions) on the 1,442 VMs of Kadupitiya, Jadhao & Sharma
# (HPDC 2020), shared/data/preemption/gcp-preemptible-2019.csv: 12,121 VM-hours / 717 preemptions.
DEFAULT_SPOT_MTTF_S = 16.905 * 3600.0
DEFAULT_CHECKPOINT_COST_S = 60.0
DEFAULT_RESTART_COST_S = 120.0


def young_interval_s(checkpoint_cost_s, mttf_s) -> np.ndarray:
    """tau = sqrt(2 delta M)  (Young 1974)."""
    return np.sqrt(2.0 * np.asarray(checkpoint_cost_s, float) * np.asarray(mttf_s, float))


def daly_expected_runtime_s(work_s, mttf_s, checkpoint_cost_s=DEFAULT_CHECKPOINT_COST_S,
                            restart_cost_s=DEFAULT_RESTART_COST_S) -> np.ndarray:
    """E[T] under exponential interruptions with Young's interval (Daly 2006, eq. 20)."""
    work, mttf = np.asarray(work_s, float), np.asarray(mttf_s, float)
    tau = young_interval_s(checkpoint_cost_s, mttf)
    return mttf * np.exp(restart_cost_s / mttf) * np.expm1((tau + checkpoint_cost_s) / mttf) * work / tau
