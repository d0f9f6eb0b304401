# SPDX-License-Identifier: MIT
"""Choose a cloud configuration: candidates, objectives and constraints, Pareto front, launch."""

from thrifty.plan.candidates import Candidates, VMArrays, evaluate
from thrifty.plan.optimizer import PlanResult, plan
from thrifty.plan.request import PlanRequest

__all__ = ["Candidates", "PlanRequest", "PlanResult", "VMArrays", "evaluate", "plan"]
