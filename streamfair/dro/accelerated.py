"""The ball-oracle accelerated method of Carmon & Hausler (NeurIPS 2022) for group and f-divergence DRO.

Structure:

* **Algorithm 1** (stochastic accelerated proximal point, Monteiro-Svaiter type): each outer step
  picks ``lambda`` by bisection, forms ``y = (A x + a v) / (A + a)``, asks a ball regularized
  optimization oracle (BROO) for the prox point of ``F`` at ``y`` inside ``B_r(y)``, and moves ``v``
  along an unbiased estimate of the Moreau-envelope gradient ``lambda (y - prox(y))``.
  ``a = (1 + sqrt(1 + 4 lambda A)) / (2 lambda)``, the root of ``lambda a^2 = A + a`` (corrected from the
  paper's statement).
* **Algorithm 2** (MorGradEst): de-biases one accurate BROO call by multilevel Monte Carlo over
  BROO accuracies ``delta_J = G / (lambda sqrt(2^J T0))``, ``J ~ Geom(1/2)``.
* **BROO for group DRO** (Section 3.2): Epoch-SGD on the exponentiated group-softmax ``Gamma``
  (eq. (7)) over ``B_r(x_bar)``, with the MLMC estimator of ``gamma_i(x)`` (level pmf corrected to
  ``p_j = (1 - 8^-1/2) 8^-(j-1)/2``, ``j >= 1``, so that it sums to one) and gradient estimator (8).
  ``F`` is the group softmax with ``eps' = eps / (2 log M)``.
* **BROO for f-divergences** (Algorithm 3, "dual EpochSGD"): SGD on ``(x, y)`` for
  ``Upsilon_eps(x, y) + lambda/2 ||x - x_bar||^2`` with importance sampling from the weights
  ``p_bar`` at the centre (estimator (13)), ``y`` kept within ``eps' / G`` of the exact ``y_bar``
  (Lemma 5) and re-solved exactly once epochs are long.  ``F`` is the entropy-regularized penalized
  risk ``L_{psi, eps}`` with ``eps' = eps / (2 log N)``; ``psi_eps`` comes from the uncertainty set
  (:mod:`~streamfair.dro.entropic`: CVaR, chi-square penalty, KL penalty).
* **Constrained chi-square and KL balls** (Section 2.9, Prop. 3): a search over the multiplier
  ``nu`` of the divergence constraint, each step an accelerated solve of the penalized problem.

The paper's radius ``r = eps' / G`` and every other constant are listed in
:class:`AcceleratedParameters` with their source: ``"paper"`` for the paper's values and
``"practical"`` for this project's choices where the paper's are impractically conservative or
unspecified (its Epoch-SGD constant ``c``, the lambda-bisection of its reference [11], which the
paper does not restate).  All loss and gradient evaluations go through the counting oracle; the
``N`` losses at a ball centre are evaluated once per centre and reused by the BROO calls there.

Through :func:`streamfair.dro.solvers.solve` (solver names ``"accelerated"`` and
``"accelerated_continuation"``), which counts every loss and gradient evaluation:

>>> import numpy as np
>>> from streamfair.dro.problem import CVaRSet, make_synthetic
>>> from streamfair.dro.solvers import solve
>>> problem = make_synthetic(n=300, dim=5, robust=CVaRSet(0.1), seed=0, flip=0.0)
>>> result = solve(problem, "accelerated_continuation", budget=50_000)
>>> result.calls >= 50_000, bool(problem.objective(result.x) < problem.objective(np.zeros(5)))
(True, True)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..validation import check_positive
from .baselines import loss_bound
from .entropic import EntropicPenalty, solve_threshold
from .oracle import CountingOracle
from .problem import GroupSet
from .simplex import softmax

__all__ = ["AcceleratedParameters", "accelerated", "accelerated_continuation", "mlmc_level_pmf", "project_ball_box"]

PROFILES = ("practical", "faithful")


@dataclass(frozen=True)
class AcceleratedParameters:
    """Every constant of the accelerated method, with where it comes from.

    ``provenance`` maps each field to ``"paper"`` or ``"practical"``.
    """

    epsilon: float  # target accuracy (paper)
    eps_prime: float  # eps / (2 log M) or eps / (2 log N) (paper)
    radius: float  # r = eps' / G (paper)
    lambda_min: float  # eps / (r^(4/3) R^(2/3)) log^2(G R^2 / (r eps)) (paper, Lemma 8; practical: no log^2)
    lambda_max: float  # 2 G / r: the prox step moves <= r / 2, the ball is inactive (practical bracket)
    a_max: float  # A_max = 9 R^2 / eps (paper)
    k_max: int  # outer iterations cap: (R / r)^(2/3) m_eps with constant 1 (paper: O(.))
    bisection_steps: int  # lambda-bisection probes (paper: m_eps = log(G R^2 / (eps r)))
    bisection_accuracy: float  # BROO accuracy inside the bisection (paper: r / 30)
    bias: float  # beta of MorGradEst (paper: eps / (120 R))
    variance_factor: float  # sigma^2 = lambda^2 r^2 / variance_factor (paper: 900 log^3(G R^2 / (r eps)))
    max_level: int  # cap on MorGradEst's J and on the MLMC level of the group estimator (practical; paper: none)
    epoch_constant: float  # c in the BROO budget T = c G^2 / (lambda^2 delta^2) (paper: unspecified)
    max_broo_steps: int  # cap on T (practical; paper: none)
    nu_evaluations: int  # penalized solves of the nu-search (paper: O(log H log log H) with boosting; practical)
    nu_accuracy: float  # accuracy of each penalized solve, as a fraction of eps (paper: 1/5)
    nu_floor: float  # smallest multiplier searched, as a fraction of the loss bound (paper: 0; practical)
    provenance: dict = field(default_factory=dict, compare=False)

    @classmethod
    def build(cls, problem, epsilon: float, profile: str = "practical") -> AcceleratedParameters:
        """The parameters for ``problem`` at accuracy ``epsilon`` under a profile."""
        epsilon = check_positive("epsilon", epsilon)
        if profile not in PROFILES:
            raise ValueError(f"profile must be one of {PROFILES}, got {profile!r}")
        g, big_r = problem.lipschitz, problem.diameter
        count = problem.robust.n_groups if isinstance(problem.robust, GroupSet) else problem.n
        eps_prime = epsilon / (2.0 * math.log(count))
        r = eps_prime / g
        log_term = math.log(g * big_r**2 / (r * epsilon))
        lambda_floor = epsilon / (r ** (4 / 3) * big_r ** (2 / 3))
        paper = {
            "epsilon": "paper",
            "eps_prime": "paper",
            "radius": "paper",
            "lambda_min": "paper" if profile == "faithful" else "practical",
            "lambda_max": "practical",
            "a_max": "paper",
        }
        if profile == "faithful":
            values = dict(
                k_max=int(math.ceil((big_r / r) ** (2 / 3) * log_term)),
                bisection_steps=int(math.ceil(log_term)),
                bisection_accuracy=r / 30.0,
                bias=epsilon / (120.0 * big_r),
                variance_factor=900.0 * log_term**3,
                max_level=30,
                epoch_constant=1.0,
                max_broo_steps=2**40,
                nu_evaluations=int(math.ceil(log_term * math.log(max(log_term, 2.0)))),
                nu_accuracy=0.2,
                nu_floor=1e-3,
            )
            provenance = {**paper, **{name: "paper" for name in values}}
            provenance.update(
                k_max="paper",
                max_level="practical",
                epoch_constant="practical",
                max_broo_steps="practical",
                nu_floor="practical",
            )
        else:
            values = dict(
                k_max=int(math.ceil((big_r / r) ** (2 / 3) * log_term)),
                bisection_steps=3,
                bisection_accuracy=r / 4.0,
                bias=epsilon / big_r,
                variance_factor=4.0,
                max_level=3,
                epoch_constant=1.0,
                max_broo_steps=512,
                nu_evaluations=8,
                nu_accuracy=0.5,
                nu_floor=1e-3,
            )
            provenance = {**paper, **{name: "practical" for name in values}}
            provenance["k_max"] = "paper"
        # the paper's floor carries log^2(G R^2 / (r eps)), which at these sizes exceeds 2 G / r (the
        # largest useful lambda); the practical profile drops it
        lambda_min = lambda_floor * (log_term**2 if profile == "faithful" else 1.0)
        return cls(
            epsilon=epsilon,
            eps_prime=eps_prime,
            radius=r,
            lambda_min=min(lambda_min, 2.0 * g / r),
            lambda_max=2.0 * g / r,
            a_max=9.0 * big_r**2 / epsilon,
            provenance=provenance,
            **values,
        )


class _Exhausted(Exception):
    """The oracle budget ran out inside a BROO call."""


def mlmc_level_pmf(level: int | np.ndarray) -> np.ndarray:
    """``p_j = (1 - 8^-1/2) 8^-(j-1)/2`` for ``j >= 1``: the corrected MLMC level law (sums to one).

    >>> round(float(mlmc_level_pmf(np.arange(1, 200)).sum()), 12)
    1.0
    """
    return (1.0 - 8**-0.5) * 8.0 ** (-(np.asarray(level, dtype=float) - 1.0) / 2.0)


def project_ball_box(z: np.ndarray, centre: np.ndarray, r: float, half_width: float) -> np.ndarray:
    """Euclidean projection onto ``B_r(centre) ∩ {||x||_inf <= half_width}`` (``centre`` in the box).

    The minimizer of ``||x - z||^2 + mu ||x - centre||^2`` over the box is the coordinate-wise clip
    of ``(z + mu centre) / (1 + mu)``; the multiplier ``mu >= 0`` is the smallest that puts it in the
    ball (bisection; the distance to the centre decreases in ``mu``).

    >>> project_ball_box(np.array([3.0, 0.0]), np.zeros(2), 2.0, 1.0)
    array([1., 0.])
    """
    x = np.clip(z, -half_width, half_width)
    if np.sum((x - centre) ** 2) <= r * r:
        return x
    offset = z - centre
    x = centre + offset * (r / math.sqrt(float(offset @ offset)))  # the ball's projection, if in the box
    if np.all(np.abs(x) <= half_width):
        return x
    lo, hi = 0.0, 1.0
    while np.sum((np.clip((z + hi * centre) / (1 + hi), -half_width, half_width) - centre) ** 2) > r * r:
        hi *= 2.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        inside = np.sum((np.clip((z + mid * centre) / (1 + mid), -half_width, half_width) - centre) ** 2) <= r * r
        lo, hi = (lo, mid) if inside else (mid, hi)
    return np.clip((z + hi * centre) / (1 + hi), -half_width, half_width)


class _BallOracle:
    """Shared machinery of the two BROOs: counted access, the centre cache, Epoch-SGD bookkeeping."""

    def __init__(self, oracle: CountingOracle, params: AcceleratedParameters, rng: np.random.Generator):
        self.oracle = oracle
        self.problem = oracle.problem
        self.params = params
        self.rng = rng
        self._centre_key: bytes | None = None

    def _check_budget(self) -> None:
        if self.oracle.exhausted:
            raise _Exhausted

    def _prepare(self, centre: np.ndarray) -> None:
        """Evaluate the ``N`` losses at a new centre (counted once per centre)."""
        key = centre.tobytes()
        if key != self._centre_key:
            self._check_budget()
            self.centre_losses = self.oracle.all_values(centre)
            self._centre_key = key
            self._setup_centre(centre)

    def _setup_centre(self, centre: np.ndarray) -> None:
        raise NotImplementedError

    def __call__(self, centre: np.ndarray, lam: float, delta: float) -> np.ndarray:
        """An approximate minimizer over the ball around ``centre`` (the subclass's algorithm)."""
        raise NotImplementedError

    def steps(self, lam: float, delta: float) -> int:
        """The BROO budget ``T = c G^2 / (lambda^2 delta^2)`` (capped)."""
        budget = self.params.epoch_constant * self.problem.lipschitz**2 / (lam * lam * delta * delta)
        return int(min(self.params.max_broo_steps, max(128.0, budget)))


class _GroupBallOracle(_BallOracle):
    """Epoch-SGD on ``Gamma_{eps, lambda}`` over the ball with the MLMC gradient estimator (8)."""

    def _setup_centre(self, centre):
        robust = self.problem.robust
        self.group_centre = robust.group_losses(self.centre_losses)
        self.p_bar = softmax(self.group_centre / self.params.eps_prime)
        self.cdf = np.cumsum(self.p_bar)
        self.cdf /= self.cdf[-1]

    def _member(self, group: int, size: int) -> np.ndarray:
        members = self.problem.robust.members[group]
        return members[self.rng.integers(members.size, size=size)]

    def mlmc(self, x, centre, group: int, shift: float) -> float:
        """The unbiased (up to the level cap) MLMC estimate of ``gamma_group(x)`` (Lemma 2)."""
        level = min(self.params.max_level, int(self.rng.geometric(1.0 - 8**-0.5)))  # P(J = j) = p_j, j >= 1
        n = 2**level
        sample = self._member(group, n)
        differences = self.oracle.values(sample, x) - self.centre_losses[sample]
        scaled = differences / self.params.eps_prime
        half = n // 2

        def gamma(part: np.ndarray) -> float:
            return self.params.eps_prime * math.exp(min(700.0, part.mean() + shift))

        correction = gamma(scaled) - 0.5 * (gamma(scaled[:half]) + gamma(scaled[half:]))
        return gamma(scaled[:1]) + correction / float(mlmc_level_pmf(level))

    def __call__(self, centre: np.ndarray, lam: float, delta: float) -> np.ndarray:
        self._prepare(centre)
        eps_prime = self.params.eps_prime
        strong = lam / math.e  # Lemma 1(a): Gamma is lambda/e-strongly convex in the ball
        step = 1.0 / (16.0 * strong)
        epoch_steps, total = 128, self.steps(lam, delta)
        x, done = centre.copy(), 0
        while done < total:
            average = np.zeros_like(x)
            for t in range(epoch_steps):
                self._check_budget()
                group = int(np.searchsorted(self.cdf, self.rng.random(), side="right"))
                group = min(group, self.cdf.size - 1)
                shift = 0.5 * lam * float(np.sum((x - centre) ** 2)) / eps_prime
                estimate = self.mlmc(x, centre, group, shift)
                j = self._member(group, 1)
                gradient = self.oracle.gradient(j, x, np.ones(1)) + lam * (x - centre)
                x = project_ball_box(
                    x - step * estimate / eps_prime * gradient, centre, self.params.radius, self.problem.radius
                )
                average += (x - average) / (t + 1)
            x, done = average, done + epoch_steps
            epoch_steps, step = 2 * epoch_steps, step / 2.0
        return x


class _DivergenceBallOracle(_BallOracle):
    """Algorithm 3 (dual EpochSGD) for an entropy-regularized f-divergence penalty ``psi_eps``."""

    def __init__(
        self, oracle: CountingOracle, params: AcceleratedParameters, rng: np.random.Generator, penalty: EntropicPenalty
    ):
        super().__init__(oracle, params, rng)
        self.penalty = penalty

    def _setup_centre(self, centre):
        self.eta_bar, self.p_bar = solve_threshold(self.penalty, self.centre_losses)
        self.log_p_bar = self.penalty.log_weight(self.centre_losses - self.eta_bar)
        self.cdf = np.cumsum(self.p_bar)
        self.cdf /= self.cdf[-1]

    def estimator(self, i: int, x: np.ndarray, eta: float) -> tuple[np.ndarray, float]:
        """Estimator (13) for the sample ``i ~ p_bar``: ``(rho_i grad l_i(x), G (1 - rho_i))``.

        ``rho_i = psi_eps*'(l_i(x) - eta) / p_bar_i``, computed in log space (at most ``e^2`` in the
        ball, Lemmas 4-5).  One value and one gradient evaluation.
        """
        index = np.array([i])
        loss = self.oracle.values(index, x)[0]
        ratio = math.exp(min(700.0, float(self.penalty.log_weight(loss - eta)) - self.log_p_bar[i]))
        return ratio * self.oracle.gradient(index, x, np.ones(1)), self.problem.lipschitz * (1.0 - ratio)

    def __call__(self, centre: np.ndarray, lam: float, delta: float) -> np.ndarray:
        self._prepare(centre)
        g = self.problem.lipschitz
        eps_prime = self.params.eps_prime
        threshold = g**4 / (lam * lam * eps_prime * eps_prime)
        step = 1.0 / (16.0 * lam)
        epoch_steps, total = 128, self.steps(lam, delta)
        x, eta, done = centre.copy(), self.eta_bar, 0  # eta = G y
        while done < total:
            average, eta_average = np.zeros_like(x), 0.0
            for t in range(epoch_steps):
                self._check_budget()
                i = min(int(np.searchsorted(self.cdf, self.rng.random(), side="right")), self.cdf.size - 1)
                g_x, g_y = self.estimator(i, x, eta)
                x = project_ball_box(
                    (x - step * g_x + step * lam * centre) / (1.0 + step * lam),
                    centre,
                    self.params.radius,
                    self.problem.radius,
                )
                eta = min(self.eta_bar + eps_prime, max(self.eta_bar - eps_prime, eta - g * step * g_y))
                average += (x - average) / (t + 1)
                eta_average += (eta - eta_average) / (t + 1)
            x, eta, done = average, eta_average, done + epoch_steps
            if epoch_steps >= threshold:  # line 16: re-solve y exactly (N counted evaluations)
                self._check_budget()
                eta = solve_threshold(self.penalty, self.oracle.all_values(x), warm_start=(eta, self.centre_losses))[0]
                eta = min(self.eta_bar + eps_prime, max(self.eta_bar - eps_prime, eta))
            epoch_steps, step = 2 * epoch_steps, step / 2.0
        return x


def _morgradest(
    broo: _BallOracle, y: np.ndarray, lam: float, params: AcceleratedParameters, rng
) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm 2: an (almost) unbiased Moreau-envelope gradient at ``y``; also returns ``x_0``."""
    g = broo.problem.lipschitz
    sigma2 = lam * lam * params.radius**2 / params.variance_factor
    t_max = 2.0 * g * g / (lam * lam * min(params.bias**2, 0.5 * sigma2))
    # log(T_max) >= 1: on small domains T_max < e and the paper's log would make T_0 <= 0 (practical guard)
    t_0 = 14.0 * g * g * max(1.0, math.log(t_max)) / sigma2
    x_0 = broo(y, lam, g / (lam * math.sqrt(t_0)))
    level = int(rng.geometric(0.5))
    x_hat = x_0
    if 2**level <= t_max and level <= params.max_level:
        x_j = broo(y, lam, g / (lam * math.sqrt(2**level * t_0)))
        x_previous = broo(y, lam, g / (lam * math.sqrt(2 ** (level - 1) * t_0)))
        x_hat = x_0 + 2**level * (x_j - x_previous)
    return lam * (y - x_hat), x_0


def _coefficients(lam: float, big_a: float, x: np.ndarray, v: np.ndarray) -> tuple[float, np.ndarray]:
    a = (1.0 + math.sqrt(1.0 + 4.0 * lam * big_a)) / (2.0 * lam)  # erratum E.1: A' = lambda a^2
    return a, (big_a * x + a * v) / (big_a + a)


def _bisection(broo, x, v, big_a, lam_start, params):
    """Pick ``lambda`` so that the in-ball prox step has length in ``[3r/4, r)`` (or ``lambda`` is minimal).

    A practical rendering of the lambda-Bisection of the paper's reference [11] (not restated in the
    paper): bisect ``log lambda`` in ``[lambda_min, lambda_max]``, starting from the previous ``lambda``.
    """
    r = params.radius
    lo, hi = math.log(params.lambda_min), math.log(params.lambda_max)
    log_lam = min(hi, max(lo, math.log(lam_start)))
    for _ in range(params.bisection_steps):
        lam = math.exp(log_lam)
        _, y = _coefficients(lam, big_a, x, v)
        distance = float(np.linalg.norm(broo(y, lam, params.bisection_accuracy) - y))
        if distance >= r - params.bisection_accuracy:  # the ball binds: lambda too small
            lo = log_lam
        elif distance < 0.75 * r - params.bisection_accuracy and log_lam > math.log(params.lambda_min):
            hi = log_lam  # the step is short: a smaller lambda moves further
        else:
            break
        log_lam = 0.5 * (lo + hi)
    return math.exp(log_lam)


def _ball_oracle(oracle: CountingOracle, robust, params: AcceleratedParameters, rng) -> _BallOracle:
    if isinstance(robust, GroupSet):
        return _GroupBallOracle(oracle, params, rng)
    if hasattr(robust, "entropic_penalty"):
        return _DivergenceBallOracle(oracle, params, rng, robust.entropic_penalty(oracle.problem.n, params.eps_prime))
    raise ValueError(f"accelerated supports group DRO, CVaR, chi-square and KL, got {type(robust).__name__}")


def _proximal_point(
    oracle: CountingOracle, broo: _BallOracle, params: AcceleratedParameters, rng, start: np.ndarray
) -> np.ndarray:
    """Algorithm 1 from ``start`` until ``A >= A_max``, ``K_max`` or the budget; returns the last ``x_k``."""
    problem = oracle.problem
    x = v = start
    big_a = problem.diameter / problem.lipschitz  # A_0 = R / G (Lemma 8)
    lam = params.lambda_max
    try:
        for _ in range(params.k_max):
            lam = _bisection(broo, x, v, big_a, lam, params)
            a, y = _coefficients(lam, big_a, x, v)
            gradient, x_next = _morgradest(broo, y, lam, params, rng)
            v = problem.project(v - 0.5 * a * gradient)
            x, big_a = x_next, big_a + a
            oracle.record(x)
            if big_a >= params.a_max:
                break
    except _Exhausted:
        pass
    return x


#: first accuracy of the eps-continuation, as a fraction of G R (practical; the paper has no continuation)
CONTINUATION_START = 1.0 / 8.0


def _minimize(
    oracle: CountingOracle, robust, epsilon: float, profile: str, rng, start: np.ndarray, continuation: bool
) -> np.ndarray:
    """Algorithm 1 on a group-DRO or penalized problem from ``start``.

    Without continuation: one run at ``epsilon`` (the paper).  With it (a practical choice, not in the
    paper): stages at ``eps_k = max(epsilon, G R / 8 / 2^k)``, each a run of Algorithm 1 warm-started
    at the previous output, then restarts at ``epsilon`` until the budget is spent.  Large early ``eps``
    means large balls ``r = eps' / G``, so the first stages cross the domain in few outer steps.
    """
    problem = oracle.problem
    stage = max(epsilon, CONTINUATION_START * problem.lipschitz * problem.diameter) if continuation else epsilon
    x = start
    while True:
        params = AcceleratedParameters.build(problem, stage, profile)
        x = _proximal_point(oracle, _ball_oracle(oracle, robust, params, rng), params, rng, x)
        if not continuation or oracle.exhausted:
            return x
        oracle.record(x)
        stage = max(epsilon, stage / 2.0)


def _nu_search(oracle: CountingOracle, robust, epsilon: float, profile: str, rng, continuation: bool) -> np.ndarray:
    """Constrained chi-square / KL DRO through penalized solves (paper Section 2.9, Prop. 3).

    ``h(nu) = nu + min_x L_{nu f}(x)`` is convex on ``[0, B]`` (``B`` the loss bound) and its minimum
    is the constrained optimum.  By Danskin, ``h'(nu) = 1 - D(q_nu) / rho`` with ``q_nu`` the
    penalized worst-case weights at the penalized solution ``x_nu``.  Practical stand-in for the
    paper's noisy OneDimMinimizer: bisection on ``log nu`` over ``[nu_floor B, B]`` by the sign of
    that derivative, ``nu_evaluations`` times.  Each ``x_nu`` is an accelerated solve of the
    penalized problem at accuracy ``nu_accuracy * eps``, warm-started at the best point so far
    (practical), with an equal share of the remaining budget.  Returns the point with the smallest
    *constrained* objective; its ``N`` losses give the derivative too.
    """
    problem = oracle.problem
    params = AcceleratedParameters.build(problem, epsilon, profile)
    bound = loss_bound(problem)
    best_x, best_value = problem.project(np.zeros(problem.dim)), math.inf
    lo, hi = math.log(params.nu_floor * bound), math.log(bound)
    for left in range(params.nu_evaluations, 0, -1):
        if oracle.exhausted:
            break
        log_nu = 0.5 * (lo + hi)
        penalty = robust.penalized(math.exp(log_nu))
        share = (oracle.budget - oracle.calls) // left - problem.n  # keep N for the evaluation below
        with oracle.capped(share):
            x = _minimize(oracle, penalty, params.nu_accuracy * epsilon, profile, rng, best_x, continuation)
        losses = oracle.all_values(x)
        value = robust.worst_case(losses)[1]
        if value < best_value:
            best_x, best_value = x, value
        oracle.record(best_x)
        if robust.divergence(penalty.worst_case(losses)[0]) < robust.rho:  # h' > 0: nu* is smaller
            hi = log_nu
        else:
            lo = log_nu
    return best_x


def accelerated(
    oracle: CountingOracle, seed: int = 0, epsilon: float = 0.01, profile: str = "practical", continuation: bool = False
) -> np.ndarray:
    """The ball-oracle accelerated method for group DRO, CVaR, chi-square and KL (penalized or constrained).

    Group DRO, CVaR and the penalized sets run Algorithm 1 once (returning its last ``x_k``, or the
    last completed one if the budget runs out inside an outer step); the constrained chi-square and
    KL balls run the ``nu``-search over penalized problems (:func:`_nu_search`).  ``continuation``
    adds the practical eps-continuation of :func:`_minimize` (solver name
    ``"accelerated_continuation"``).
    """
    problem = oracle.problem
    rng = np.random.default_rng(seed)
    if hasattr(problem.robust, "penalized"):
        return _nu_search(oracle, problem.robust, epsilon, profile, rng, continuation)
    return _minimize(
        oracle, problem.robust, epsilon, profile, rng, problem.project(np.zeros(problem.dim)), continuation
    )


def accelerated_continuation(
    oracle: CountingOracle, seed: int = 0, epsilon: float = 0.01, profile: str = "practical"
) -> np.ndarray:
    """:func:`accelerated` with eps-continuation (practical; see :func:`_minimize`)."""
    return accelerated(oracle, seed, epsilon, profile, continuation=True)
