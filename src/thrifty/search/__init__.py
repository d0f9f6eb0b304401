# SPDX-License-Identifier: MIT
"""Online search (after Scavenger, Tyagi & Sharma, CCGrid 2023): train while measuring, move to
better configurations, stop exploring when no probe is worth its price. Pure numpy/scipy."""

from thrifty.search.backend import Backend, Window
from thrifty.search.config import Config
from thrifty.search.loop import Outcome, Probe, Search, SearchSettings
from thrifty.search.rule import Objective
from thrifty.search.sim import SimBackend

__all__ = ["Backend", "Config", "Objective", "Outcome", "Probe", "Search", "SearchSettings", "SimBackend",
           "Window"]
