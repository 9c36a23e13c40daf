"""Distributionally robust optimization (DRO) for streamfair (Carmon & Hausler, NeurIPS 2022).

Worst-case weights (exact oracles)
    :mod:`~streamfair.dro.weights` (group max / softmax, CVaR, capped softmax, chi-square constrained
    and penalized, KL penalized and constrained), :mod:`~streamfair.dro.simplex` (log-sum-exp,
    simplex and capped-simplex projections), :mod:`~streamfair.dro.entropic` (entropy-regularized
    penalties and their dual threshold).
Online updaters, O(groups) per sample
    :mod:`~streamfair.dro.online_group` (softmax and arrival-corrected exponentiated-gradient group
    weights), :mod:`~streamfair.dro.online_divergence` (CVaR, chi-square and KL dual trackers),
    :mod:`~streamfair.dro.group_losses` (running group losses with exact delayed-label corrections).
Wiring
    :mod:`~streamfair.dro.robust_regression` (the group-robust DP regression post-processor),
    :mod:`~streamfair.dro.pending` (its samples waiting for a label, in columns).
Batch solvers for linear models
    :mod:`~streamfair.dro.problem`, :mod:`~streamfair.dro.oracle` (counted first-order oracle),
    :mod:`~streamfair.dro.baselines`, :mod:`~streamfair.dro.accelerated`, :mod:`~streamfair.dro.solvers`.
"""

from .online_divergence import ChiSquareTracker, CVaRTracker, KLTracker
from .online_group import ExponentiatedGroupWeights, SoftmaxGroupWeights
from .robust_regression import GroupRobustFairRegressionPostProcessor
from .simplex import log_sum_exp, project_capped_simplex, project_simplex, softmax
from .solvers import SOLVERS, SolverResult, solve
from .weights import (
    WorstCase,
    capped_softmax,
    chi_square,
    chi_square_divergence,
    chi_square_penalized,
    cvar,
    group_max,
    group_means,
    group_softmax,
    kl_constrained,
    kl_divergence,
    kl_penalized,
)

__all__ = [
    "SOLVERS",
    "ChiSquareTracker",
    "CVaRTracker",
    "ExponentiatedGroupWeights",
    "GroupRobustFairRegressionPostProcessor",
    "KLTracker",
    "SoftmaxGroupWeights",
    "SolverResult",
    "WorstCase",
    "capped_softmax",
    "chi_square",
    "chi_square_divergence",
    "chi_square_penalized",
    "cvar",
    "group_max",
    "group_means",
    "group_softmax",
    "kl_constrained",
    "kl_divergence",
    "kl_penalized",
    "log_sum_exp",
    "project_capped_simplex",
    "project_simplex",
    "softmax",
    "solve",
]
