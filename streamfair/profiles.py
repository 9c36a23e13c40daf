"""The two profiles of default settings of the post-processors, and the defaults they derive.

* ``"anytime"`` (the default): the tracking optimizer over the last ``DEFAULT_MEMORY`` samples, and
  ``beta`` such that the entropic randomization costs at most ``RISK_BUDGET`` of the cost scale
  (:func:`anytime_beta`); no horizon.
* ``"paper"``: the settings of Chzhen, Hebiri & Taturyan (NeurIPS 2024): SGD3 with AC-SA^2, ``L``
  and ``beta`` from a horizon ``T`` (:func:`default_grid_size`, :func:`default_beta`), by default
  ``REFERENCE_HORIZON``.

>>> PROFILE_OPTIMIZER["anytime"], default_grid_size(reference_horizon(None))
('tracking', 50)
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

#: ``paper`` profile: samples in epoch 0 when no horizon is given (the ``T`` behind ``L`` and ``beta``).
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
    """The paper's ``L = sqrt(T)`` (rounded down), at least 1."""
    return max(1, math.isqrt(horizon))


def default_beta(horizon: int) -> float:
    """The experiments' ``beta = sqrt(T) log2(sqrt(T))`` (App. G, C&C / Law), at least 1."""
    root = math.sqrt(horizon)
    return max(1.0, root * math.log2(root))
