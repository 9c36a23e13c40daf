"""The two profiles of default settings of the post-processors, and the defaults they derive.

* ``"anytime"`` (the default): the tracking optimizer over the last ``DEFAULT_MEMORY`` samples, and
  ``beta`` such that the entropic randomization costs at most ``RISK_BUDGET`` of the cost scale
  (:func:`anytime_beta`); no horizon.
* ``"paper"``: the settings of Chzhen, Hebiri & Taturyan (NeurIPS 2024): SGD3 with AC-SA^2, ``L``
  and ``beta`` from a horizon ``T`` (:func:`default_grid_size`, :func:`default_beta`), by default
  ``REFERENCE_HORIZON``.  SGD3 runs ``J = floor(log2(M / mu))`` stages of ``floor(T / J)``
  samples (:mod:`streamfair.schedule`), so epoch 0 ends after ``J floor(T / J)`` samples, not
  ``T``: with the defaults ``M / mu = beta^2``, ``J = 16`` and the epochs (horizons ``T, 2T,
  4T, ...``) end after 2,496, 7,488, 17,488, 37,488, ... samples.

>>> PROFILE_OPTIMIZER["anytime"], default_grid_size(reference_horizon(None))
('tracking', 50)
>>> from streamfair import FairRegressionPostProcessor
>>> schedule = FairRegressionPostProcessor(B=1.0, profile="paper", p=[0.3, 0.7]).schedule
>>> schedule.stages, [sum(run.length for run in schedule.runs(2500 << e)) for e in range(4)]
(16, [2496, 4992, 10000, 20000])
"""

from __future__ import annotations

import math

from .schedule import OPTIMIZERS as SCHEDULED
from .validation import check_integer, check_positive

#: The profiles of default settings (see the module docstring).
PROFILES = ("anytime", "paper")
#: The optimizers: the tracking one, and the paper's (:mod:`streamfair.schedule`).
OPTIMIZERS = ("tracking",) + SCHEDULED
#: Each profile's optimizer.
PROFILE_OPTIMIZER = {"anytime": "tracking", "paper": "sgd3"}

#: ``paper`` profile: the horizon ``T`` of epoch 0 when none is given (the ``T`` behind ``L`` and ``beta``);
#: SGD3's epoch 0 uses ``J floor(T / J)`` of these samples (2,496 with the default ``J = 16``).
REFERENCE_HORIZON = 2500
#: ``anytime`` profile: the window of the served average, in samples.
DEFAULT_MEMORY = 2000
#: ``anytime`` profile: the most risk the entropic randomization may cost, as a share of the cost scale.
RISK_BUDGET = 0.02


def reference_horizon(horizon: int | None) -> int:
    """The given horizon (checked), or ``REFERENCE_HORIZON``."""
    return REFERENCE_HORIZON if horizon is None else check_integer("horizon", horizon, 1)


def anytime_beta(n_atoms: int, risk_scale: float) -> float:
    """The ``anytime`` profile's ``beta = log(m) / (RISK_BUDGET * risk_scale)``.

    By Lemma 3.3 of the paper the entropic regularization then costs at most ``RISK_BUDGET`` of
    ``risk_scale`` in risk (``2%`` of ``B^2`` for regression on ``[-B, B]``).

    >>> round(anytime_beta(101, 1.0), 1)
    230.8
    """
    return math.log(n_atoms) / (RISK_BUDGET * check_positive("risk_scale", risk_scale))


def default_grid_size(horizon: int) -> int:
    """The paper's ``L = sqrt(T)`` rounded down (as the authors' code does), at least 1."""
    return max(1, math.isqrt(horizon))


def default_beta(horizon: int) -> float:
    """``beta = sqrt(T) log2(sqrt(T))``, at least 1: the default of the authors' code.

    App. G of the paper writes ``beta = sqrt(N) log sqrt(N)`` for Communities & Crime and Law
    School (``N`` the unlabeled pool) and ``sqrt(T) / log sqrt(T)`` for Adult, with ``log``, not
    ``log2``: the paper writes ``log2`` for base 2 (Theorem 5.1's ``beta = T / (8 log2(T))``) and
    ``log`` for the natural logarithm of its entropy bounds (``log(2L + 1) / beta``, Lemma 3.3),
    though its Alg. 4 also writes ``log`` for the stage count ``J`` that Theorems C.2 and C.3
    write with ``log2``.
    The base 2 is that of the automatic default of the authors' public code, which their
    experiments use (github.com/taturyan/unaware-fair-reg) and the ``paper`` profile reproduces; with the
    natural logarithm ``beta`` would be ``ln 2 ~ 0.69`` times as large (94.5 instead of 136.4 for
    ``N = 800``).

    >>> round(default_beta(800), 1), round(default_beta(2500), 1)
    (136.4, 282.2)
    """
    root = math.sqrt(horizon)
    return max(1.0, root * math.log2(root))
