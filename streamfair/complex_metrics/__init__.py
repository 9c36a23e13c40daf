"""Consistent multiclass algorithms for complex metrics and constraints (Narasimhan et al.).

Plug-in post-processing of a class-probability model ``eta_hat``: an outer optimizer over
confusion matrices -- Frank-Wolfe, gradient descent-ascent, ellipsoid or bisection, and their
constrained versions SplitFW, ConGDA, ConEllipsoid and ConBisection -- calls the plug-in linear
minimization oracle and returns a randomized mixture of plug-in classifiers, served one sample at a
time with draws reproducible per message key.

>>> import numpy as np
>>> from streamfair.complex_metrics import Coverage, Problem, QMean, Sample, constrained_gda
>>> rng = np.random.default_rng(0)
>>> y = rng.choice(3, 3000, p=[0.7, 0.2, 0.1])
>>> proba = np.eye(3)[y] * 0.3 + rng.dirichlet([3, 1, 1], 3000) * 0.7
>>> problem = Problem(QMean(), Sample(proba, y), [Coverage(eps=0.02)])
>>> fit = constrained_gda(problem, iterations=300, step_xi=0.05, step_lambda=0.05)
>>> bool(fit.violation <= 1e-9)                           # coverage within 0.02 of the priors
True
>>> int(fit.classifier.predict_one(proba[0], key="message-0")) in (0, 1, 2)
True
"""

from .bisection import bisection, constrained_bisection
from .confusion import Sample
from .constraints import Coverage, DemographicParity, EqualizedOdds, EqualOpportunity, Precision
from .ellipsoid import constrained_ellipsoid, ellipsoid
from .estimator import SoftmaxRegression
from .fit import Fit, select
from .frank_wolfe import frank_wolfe, split_frank_wolfe
from .gda import constrained_gda, gradient_descent_ascent
from .mixture import RandomizedClassifier
from .performance import BalancedError, CostSensitive, GMean, HMean, MacroF1, MicroF1, MinMax, QMean, ZeroOneError
from .problem import Problem
from .pruning import best_mixture, prune, sparsify
from .streaming import OnlinePrimalDual, StreamingFrankWolfe, WindowedRefit

__all__ = [
    "BalancedError",
    "CostSensitive",
    "Coverage",
    "DemographicParity",
    "EqualOpportunity",
    "EqualizedOdds",
    "Fit",
    "GMean",
    "HMean",
    "MacroF1",
    "MicroF1",
    "MinMax",
    "OnlinePrimalDual",
    "Precision",
    "Problem",
    "QMean",
    "RandomizedClassifier",
    "Sample",
    "SoftmaxRegression",
    "StreamingFrankWolfe",
    "WindowedRefit",
    "ZeroOneError",
    "best_mixture",
    "bisection",
    "constrained_bisection",
    "constrained_ellipsoid",
    "constrained_gda",
    "ellipsoid",
    "frank_wolfe",
    "gradient_descent_ascent",
    "prune",
    "select",
    "sparsify",
    "split_frank_wolfe",
]
