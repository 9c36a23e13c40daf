"""Baseline batch DRO solvers, driven by a :class:`CountingOracle`.

* :func:`subgradient` -- the full-batch subgradient method (paper's intro; Table 1 row "Subgradient
  method"): every step evaluates all ``N`` losses, the exact worst-case weights ``q`` and
  ``sum_i q_i grad l_i`` (``|supp q|`` gradients).  Returns the best iterate, whose exact
  objective is known from the counted evaluations.
* :func:`primal_dual` -- stochastic mirror descent on ``min_x max_{q in U} sum_i q_i L_i(x)`` with
  clipped dual steps (paper App. A.1, eqs. (16)-(17), signs fixed): one gradient and one value per
  step, for group DRO (``m = M`` groups, ``U`` the simplex) and CVaR (``m = N``, ``U`` the capped
  simplex, whose KL projection is a capped renormalization).  Returns the average iterate.
* :func:`dual_sgd` -- SGD on the dual ``Upsilon(x, eta) = eta + E[(l(x) - eta)_+] / alpha`` with
  uniform sampling (paper Section 4.2's estimator, CVaR only: for CVaR the weights are bounded by
  ``1 / alpha``).  Returns the average iterate.

Constants: every step size below is labelled either as the paper's or as a *practical choice* of
this project (the paper states rates, not tuned constants).

Each is run through :func:`streamfair.dro.solvers.solve`, which counts the oracle calls:

>>> import numpy as np
>>> from streamfair.dro.problem import CVaRSet, make_synthetic
>>> from streamfair.dro.solvers import solve
>>> problem = make_synthetic(n=300, dim=5, robust=CVaRSet(0.1), seed=0, flip=0.0)
>>> start = problem.objective(np.zeros(5))  # the CVaR of the hinge losses at x = 0
>>> [bool(problem.objective(solve(problem, method, budget=20_000).x) < start)
...  for method in ("subgradient", "primal_dual", "dual_sgd")]
[True, True, True]
>>> round(loss_bound(problem), 4)  # 1 + G sqrt(d) radius for the hinge loss
3.2361
"""

from __future__ import annotations

import math

import numpy as np

from .oracle import CountingOracle
from .problem import CVaRSet, GroupSet
from .simplex import softmax
from .weights import capped_softmax

__all__ = ["subgradient", "primal_dual", "dual_sgd", "loss_bound"]


def loss_bound(problem) -> float:
    """A uniform bound ``B`` on the losses over the box (App. A.1 needs one): ``|b a.x| <= G sqrt(d) radius``."""
    reach = problem.lipschitz * problem.radius * math.sqrt(problem.dim)
    return 1.0 + reach if problem.loss == "hinge" else math.log1p(math.exp(reach))


def subgradient(oracle: CountingOracle, seed: int = 0, step_scale: float = 1.0) -> np.ndarray:
    """Projected subgradient method with steps ``step_scale * R / (G sqrt(t + 1))``.

    ``R / (G sqrt(t + 1))`` is the standard anytime step for a ``G``-Lipschitz objective on a
    domain of diameter ``R`` (Nesterov 2018, the paper's reference [38]); ``step_scale`` is a
    practical knob (1 by default).  ``seed`` is unused (the method is deterministic).
    """
    problem = oracle.problem
    x = np.zeros(problem.dim)
    best, best_value = x.copy(), math.inf
    base = step_scale * problem.diameter / problem.lipschitz
    t = 0
    while not oracle.exhausted:
        q, value = problem.robust.worst_case(oracle.all_values(x))
        if value < best_value:
            best, best_value = x.copy(), value
        oracle.record(best)
        if oracle.exhausted:
            break
        support = np.flatnonzero(q)
        x = problem.project(x - base / math.sqrt(t + 1) * oracle.gradient(support, x, q[support]))
        t += 1
    return best


def primal_dual(oracle: CountingOracle, seed: int = 0, step: float | None = None) -> np.ndarray:
    """Stochastic primal-dual mirror descent with clipping (App. A.1).

    Per step: ``i ~ q``, ``j ~ w_i`` gives ``g_x = grad l_j(x)``; an independent ``i' ~ Unif[m]``,
    ``j' ~ w_i'`` gives ``g_q = m l_j'(x) e_i'``.  Updates ``x <- Proj(x - step R^2 / (2 log m) g_x)``
    and ``q_i' <- q_i' exp(clip(step g_q, -1, 1))`` followed by the KL projection onto ``U``.

    The step defaults to ``sqrt(2 Theta / (T V))`` with ``Theta = 2 log m``,
    ``V = R^2 G^2 / (2 log m) + m B^2`` (the local-norm second-moment bound behind Prop. 2) and
    ``T`` = budget / 2 steps: the regret-balancing choice for a known horizon (Prop. 2 states
    ``step = O(eps log m / (G^2 R^2 + m B^2))``, i.e. the same up to its unspecified constant).
    """
    problem = oracle.problem
    robust = problem.robust
    rng = np.random.default_rng(seed)
    if isinstance(robust, GroupSet):
        m = robust.n_groups
        members = robust.members

        def draw(group: int) -> int:
            return int(members[group][rng.integers(members[group].size)])

        def project(log_q: np.ndarray) -> np.ndarray:
            return softmax(log_q)

    elif isinstance(robust, CVaRSet):
        m = problem.n

        def draw(group: int) -> int:  # each sample is its own group
            return group

        def project(log_q: np.ndarray) -> np.ndarray:  # KL projection onto the capped simplex
            return capped_softmax(log_q, robust.alpha, 1.0).weights

    else:
        raise ValueError(f"primal_dual supports group DRO and CVaR, got {type(robust).__name__}")
    log_m = math.log(m)
    radius2 = problem.diameter**2
    if step is None:
        horizon = max(1, oracle.budget // 2)
        variance = radius2 * problem.lipschitz**2 / (2 * log_m) + m * loss_bound(problem) ** 2
        step = math.sqrt(2 * 2 * log_m / (horizon * variance))
    x = np.zeros(problem.dim)
    log_q: np.ndarray = np.zeros(m)  # np.ndarray: numpy 2.5's stubs refuse .max() on np.zeros(n)
    q = project(log_q)
    average, t = x.copy(), 0
    one = np.ones(1)
    while not oracle.exhausted:
        j = draw(int(rng.choice(m, p=q)))
        g_x = oracle.gradient(np.array([j]), x, one)
        i_dual = int(rng.integers(m))
        loss = oracle.values(np.array([draw(i_dual)]), x)[0]
        x = problem.project(x - step * radius2 / (2 * log_m) * g_x)
        log_q[i_dual] += min(1.0, max(-1.0, step * m * loss))
        log_q -= log_q.max()
        q = project(log_q)
        log_q = np.log(np.maximum(q, np.finfo(float).tiny))  # keep the projected point (KL prox)
        t += 1
        average += (x - average) / t
        oracle.record(average)
    return average


def dual_sgd(oracle: CountingOracle, seed: int = 0, step_scale: float = 1.0) -> np.ndarray:
    """SGD on ``Upsilon(x, eta) = eta + E_i[(l_i(x) - eta)_+] / alpha`` over ``x in X``, ``eta in [0, B]``.

    Sample ``i ~ Unif[N]``: one value ``l_i(x)``; ``w = 1{l_i > eta} / alpha`` (``N psi*'``);
    if ``w > 0`` one gradient.  ``x <- Proj(x - gamma w grad l_i)``, ``eta <- eta - G^2 gamma (1 - w)``
    (the paper's ``eta = G y`` scaling, same step in ``y`` as in ``x``).  Step
    ``gamma = step_scale * R / (G sqrt(2 / alpha) sqrt(T))`` for ``T`` = budget / (1 + alpha) steps:
    the constant step for a known horizon with second moment ``E ||g||^2 <= 2 G^2 / alpha``
    (practical choice).  Returns the running average of ``x``.
    """
    problem = oracle.problem
    if not isinstance(problem.robust, CVaRSet):
        raise ValueError(f"dual_sgd is implemented for CVaR, got {type(problem.robust).__name__}")
    alpha = problem.robust.alpha
    rng = np.random.default_rng(seed)
    g2 = problem.lipschitz**2
    horizon = max(1.0, oracle.budget / (1.0 + alpha))
    gamma = step_scale * problem.diameter / (math.sqrt(2.0 * g2 / alpha) * math.sqrt(horizon))
    bound = loss_bound(problem)
    x = np.zeros(problem.dim)
    eta = 0.0
    average, t = x.copy(), 0
    while not oracle.exhausted:
        i = np.array([rng.integers(problem.n)])
        w = (1.0 / alpha) if oracle.values(i, x)[0] > eta else 0.0
        if w > 0:
            x = problem.project(x - gamma * w * oracle.gradient(i, x, np.ones(1)))
        eta = min(bound, max(0.0, eta - g2 * gamma * (1.0 - w)))
        t += 1
        average += (x - average) / t
        oracle.record(average)
    return average
