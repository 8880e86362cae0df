"""The llama.cpp side of toolweave: the only package that imports `llama_cpp`."""

from toolweave.native.calibration import CostTable, measure_costs
from toolweave.native.caller import ToolCaller
from toolweave.native.constraints import TokenMatcher, Vocabulary, vocabulary_for
from toolweave.native.engine import BatchToken, Engine, EngineCounters
from toolweave.results import CallEvent

__all__ = [
    "BatchToken",
    "CallEvent",
    "CostTable",
    "Engine",
    "EngineCounters",
    "TokenMatcher",
    "ToolCaller",
    "Vocabulary",
    "measure_costs",
    "vocabulary_for",
]
