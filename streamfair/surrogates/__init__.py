"""Surrogate-based optimisation of the learned components upstream of the post-processor.

* Black-box metrics via adaptive surrogates (Jiang et al., ICML 2020): :mod:`.cells` (per-cell
  convex surrogates of a linear scorer), :mod:`.problem`, :mod:`.gradient_estimates` (Algorithms 2,
  3 and 4), :mod:`.projection` (the over-constrained projection), :mod:`.blackbox` (Algorithm 1),
  :mod:`.tuner` (the streaming outer loop that publishes versioned per-cell loss weights).
* :mod:`.sso`: target-based surrogates (Lavington et al., ICML 2023) -- ``m`` cheap parameter
  updates per expensive target gradient.
"""

from .blackbox import StepConfig, StepReport, SurrogatePGD, pgd_step
from .cells import CellSurrogates
from .gradient_estimates import (
    ExactGradient,
    FiniteDifference,
    GradientEstimate,
    LinearInterpolation,
    TwoStepFiniteDifference,
)
from .problem import BlackBoxProblem
from .projection import Projection, project
from .sso import SGD, SSO, SSOStep, TargetLoss, TargetSurrogate, target_loss
from .tuner import FeedbackWindow, MetricWeightTuner, PublishedWeights, check_surrogate_kinds

__all__ = [
    "BlackBoxProblem",
    "CellSurrogates",
    "ExactGradient",
    "FeedbackWindow",
    "FiniteDifference",
    "GradientEstimate",
    "LinearInterpolation",
    "MetricWeightTuner",
    "Projection",
    "PublishedWeights",
    "SGD",
    "SSO",
    "SSOStep",
    "StepConfig",
    "StepReport",
    "SurrogatePGD",
    "TargetLoss",
    "TargetSurrogate",
    "TwoStepFiniteDifference",
    "check_surrogate_kinds",
    "pgd_step",
    "project",
    "target_loss",
]
