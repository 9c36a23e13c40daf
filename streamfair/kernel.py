"""The compiled hot paths: the learning steps of both optimizers, the served policy and its keyed draws.

A step on one sample is about ``7 m K`` flops and ``m`` exponentials; written with numpy it is
dominated by the fixed cost of some thirty array calls.  These functions do the same arithmetic in
loops compiled by numba, on the arrays the optimizers and the post-processor own (updated in
place).  Every post-processor (regression, classification, group-robust) and both optimizers (the
``anytime`` profile's :class:`~streamfair.tracking.TrackingOptimizer`, the ``paper`` profile's
:class:`~streamfair.optimizer.DualOptimizer`) learn and serve through them, in every path:
``learn_one``, ``learn_many`` (exact or mini-batch), the fused ``*_learn_*`` methods, ``proba_*``,
``predict_*`` and the diagnostics.  The pure-numpy functions of :mod:`streamfair.dual` and
:mod:`streamfair.constraints` are the reference they are tested against.

The softmax is :func:`streamfair.softmax.softmax`'s (the maximum subtracted, the exponentials
normalized by their sum in numpy's pairwise order) with the exponential computed inline (to within
2.3e-16 relative of libm's); every other sum runs in index order, so the result of a row never
depends on the rows computed with it: ``learn_many`` is bit for bit a loop of ``learn_one``.

A draw from the served mixture of ``k`` policies uses its uniform ``u`` twice: ``j = floor(u k)``
picks a served point, and the draw is the inverse CDF of that point's policy at ``u k - j``.  It
has the mixture's law, costs one policy instead of ``k``, and couples draws across updates: when
one point of the mixture is replaced, only the draws whose ``u`` falls in its ``1 / k`` of
``[0, 1)`` can change.  With one served point (the ``paper`` profile) it is the inverse CDF of the
served probabilities at ``u``.

Compiled code is cached next to the module (``NUMBA_CACHE_DIR`` moves it); where no cache can be
kept, the functions are compiled in memory at first use, with a warning.  The compiled calls
release the GIL while they run, so that other threads of the process (a Kafka client's I/O
threads, say) go on meanwhile; a post-processor is no more thread-safe for it than before: one
thread at a time.

Notation: ``m`` atoms, ``R`` constraint rows (``m`` for the per-atom family, ``m - 1`` for the CDF
one: ``cdf=True``), ``K`` groups, ``k`` served points.  A dual is ``w = (Lambda, V)``, shape
``(2, R, K)``.

>>> import numpy as np
>>> coefficients = np.zeros((1, 2, 3))                 # the dual at zero: pi = softmax(-beta r)
>>> out = np.empty((1, 3))
>>> served_proba(coefficients, np.zeros((1, 2)), np.array([[0.0, 1.0, 1.0]]), out)
>>> out.round(3).tolist()
[[0.576, 0.212, 0.212]]
>>> draws = np.empty(2, dtype=np.int64)
>>> served_draws(coefficients, np.zeros((2, 2)), np.array([[0.0, 1.0, 1.0]] * 2), np.array([0.5, 0.7]), draws)
>>> draws.tolist()                                     # one point: the inverse CDF, 0.5 < 0.576 <= 0.7
[0, 1]
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numba
import numpy as np

__all__ = [
    "compiled",
    "tracking_learn",
    "tracking_sample",
    "tracking_proba",
    "prior_shift_features",
    "tracking_learn_rows",
    "tracking_learn_batch",
    "dual_learn",
    "dual_learn_batch",
    "served_coefficients",
    "served_proba",
    "served_draws",
    "served_draw",
    "scaled_squared_costs",
    "scaled_expected_costs",
    "exp_non_positive",
]


def compiled(function: Callable) -> Callable:
    """``numba.njit(cache=True, nogil=True)`` of ``function``, or without the cache where none can be kept.

    Numba raises ``RuntimeError`` when it finds no directory to cache in (a read-only install and
    home, an unusable ``NUMBA_CACHE_DIR``, or a function without a source file); the function is
    then compiled in memory at its first call.  ``nogil``: a call releases the GIL while it runs.
    """
    try:
        return numba.njit(cache=True, nogil=True)(function)
    except RuntimeError as error:
        warnings.warn(f"numba cannot cache {function.__name__} ({error}); compiling it in memory", stacklevel=2)
        return numba.njit(cache=False, nogil=True)(function)


# ---------------------------------------------------------------------- costs
@compiled
def scaled_squared_costs(eta, atoms, low, high, beta, out):
    """``out[i, l] = beta (clip(eta_i) - y_l)^2``, ``clip`` to ``[low, high]``; returns how many were clipped.

    The floats of numpy's ``beta * (np.clip(eta, low, high)[:, None] - atoms) ** 2``.
    """
    clipped = 0
    for i in range(eta.size):
        clipped += _scaled_squared_row(eta[i], atoms, low, high, beta, out[i])
    return clipped


@compiled
def _scaled_squared_row(eta, atoms, low, high, beta, out):
    """One row of :func:`scaled_squared_costs` into ``out``; 1 if ``eta`` was clipped, else 0."""
    value = min(max(eta, low), high)
    for atom in range(atoms.size):
        gap = value - atoms[atom]
        out[atom] = beta * (gap * gap)
    return int(value != eta)


@compiled
def scaled_expected_costs(proba, cost_matrix, beta, out):
    """``out[i, j] = beta sum_c proba[i, c] L[c, j]``, the sum in index order: a row never depends on the others.

    (numpy's ``proba @ L`` may sum in another order depending on the number of rows.)
    """
    n_classes = cost_matrix.shape[0]
    for i in range(proba.shape[0]):
        for j in range(cost_matrix.shape[1]):
            total = 0.0
            for c in range(n_classes):
                total += proba[i, c] * cost_matrix[c, j]
            out[i, j] = beta * total


# ---------------------------------------------------------------------- the policy of one sample
@compiled
def _block_sum(values, start, n):
    """``values[start:start + n].sum()`` for ``n <= 128`` in numpy's order (eight partial sums)."""
    if n < 8:
        total = 0.0
        for i in range(start, start + n):
            total += values[i]
        return total
    r0, r1, r2, r3 = values[start], values[start + 1], values[start + 2], values[start + 3]
    r4, r5, r6, r7 = values[start + 4], values[start + 5], values[start + 6], values[start + 7]
    whole = n - n % 8
    for i in range(start + 8, start + whole, 8):
        r0 += values[i]
        r1 += values[i + 1]
        r2 += values[i + 2]
        r3 += values[i + 3]
        r4 += values[i + 4]
        r5 += values[i + 5]
        r6 += values[i + 6]
        r7 += values[i + 7]
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for i in range(start + whole, start + n):
        total += values[i]
    return total


@compiled
def _pairwise_sum(values):
    """``values.sum()`` in numpy's pairwise order: blocks of at most 128, halves (multiples of 8) above.

    The halving is walked with explicit stacks (numba's cache mishandles recursive functions).
    """
    n = values.size
    if n <= 128:
        return _block_sum(values, 0, n)
    nodes = np.empty((128, 3), dtype=np.int64)  # (start, size, visited), deepest last
    sums = np.empty(128)
    nodes[0, 0], nodes[0, 1], nodes[0, 2] = 0, n, 0
    depth, held = 1, 0
    while depth:
        start, size, visited = nodes[depth - 1, 0], nodes[depth - 1, 1], nodes[depth - 1, 2]
        if size <= 128:
            depth -= 1
            sums[held] = _block_sum(values, start, size)
            held += 1
        elif visited:
            depth -= 1
            held -= 1
            sums[held - 1] += sums[held]
        else:
            half = size // 2
            half -= half % 8
            nodes[depth - 1, 2] = 1
            nodes[depth, 0], nodes[depth, 1], nodes[depth, 2] = start + half, size - half, 0
            nodes[depth + 1, 0], nodes[depth + 1, 1], nodes[depth + 1, 2] = start, half, 0
            depth += 2
    return sums[0]


#: ``exp(x) = 2^n exp(r)`` with ``n = round(x / log 2)`` and ``|r| <= log(2) / 2``: ``log 2`` split in two so that
#: ``n log 2`` is exact (fdlibm's constants), ``exp(r)`` by its Taylor polynomial of degree 13 (error below 1e-17).
LOG2E, LN2_HI, LN2_LO = 1.4426950408889634, 6.93147180369123816490e-01, 1.90821492927058770002e-10
T2, T3, T4, T5, T6, T7 = 1 / 2, 1 / 6, 1 / 24, 1 / 120, 1 / 720, 1 / 5040
T8, T9, T10, T11, T12, T13 = 1 / 40320, 1 / 362880, 1 / 3628800, 1 / 39916800, 1 / 479001600, 1 / 6227020800
#: ``2^-k`` for ``k = 0 .. 1076`` (0 from ``k = 1075``): the ``2^n`` of the exponentials of ``x`` in ``[-745, 0]``.
POWERS_OF_HALF = 0.5 ** np.arange(1077.0)


@compiled
def _exp_parts(x):
    """``(exp(r), -n)`` with ``exp(x) = 2^n exp(r)`` for ``x <= 0`` (clamped at ``-745``): arithmetic only.

    A loop of it vectorizes; the table lookup of ``2^n`` does not (see :func:`_exp_shifted`).
    """
    x = max(x, -745.0)
    n = np.floor(x * LOG2E + 0.5)
    r = (x - n * LN2_HI) - n * LN2_LO
    poly = ((((((((((((T13 * r + T12) * r + T11) * r + T10) * r + T9) * r + T8) * r + T7) * r + T6) * r + T5) * r
                + T4) * r + T3) * r + T2) * r + 1.0) * r + 1.0
    return poly, -n


@compiled
def _exp_shifted(values, shift, halvings):
    """``values = exp(values - shift)`` in place, each ``values - shift <= 0``, to within 2.3e-16 relative of libm.

    Underflows to 0 at ``-745``.  Two loops: the arithmetic of every entry (:func:`_exp_parts`),
    which vectorizes, then the powers of 2 from their table; ``halvings`` (as long as ``values``)
    holds the exponents in between.  The softmax takes ``m`` exponentials per policy.
    """
    for i in range(values.size):
        values[i], halvings[i] = _exp_parts(values[i] - shift)
    for i in range(values.size):
        values[i] *= POWERS_OF_HALF[int(halvings[i])]


@compiled
def exp_non_positive(values):
    """``values = exp(values)`` in place, for a 1-d array of entries ``<= 0`` (``-inf`` gives 0).

    The kernel's exponential (:func:`_exp_shifted`): arithmetic only, so the same floats on every
    CPU, where numpy's ``exp`` takes a different code path on CPUs with AVX-512 and differs in the
    last bit.  Returns ``False``, with nothing changed, if an entry is positive or ``NaN``.
    """
    for i in range(values.size):
        if not values[i] <= 0.0:
            return False
    _exp_shifted(values, 0.0, np.empty(values.size))
    return True


@compiled
def _maximum(values):
    """``values.max()`` of a non-empty array without ``NaN``, from four running maxima.

    A maximum is exact, so it does not depend on the order; four of them cut the chain of dependent
    comparisons to a quarter.
    """
    n = values.size
    top0 = top1 = top2 = top3 = values[0]
    whole = n - n % 4
    for i in range(0, whole, 4):
        top0 = max(top0, values[i])
        top1 = max(top1, values[i + 1])
        top2 = max(top2, values[i + 2])
        top3 = max(top3, values[i + 3])
    for i in range(whole, n):
        top0 = max(top0, values[i])
    return max(max(top0, top1), max(top2, top3))


@compiled
def _softmax_minus(scores, costs, halvings):
    """``scores = softmax(scores - costs)`` in place: the maximum subtracted, normalized by the pairwise sum.

    ``halvings``: scratch as long as ``scores`` (see :func:`_exp_shifted`).
    """
    m = scores.size
    for atom in range(m):
        scores[atom] -= costs[atom]
    _exp_shifted(scores, _maximum(scores), halvings)
    total = _pairwise_sum(scores)
    for atom in range(m):
        scores[atom] /= total


@compiled
def _policy_rows(dual_scores, cdf, features, costs, pi, rows, halvings):
    """The policy ``pi = softmax((C^T dual_scores) t - r)`` of one sample and its constraint rows ``C pi``.

    ``dual_scores = beta (Lambda - V)`` at the step's query point, shape ``(R, K)``.  The floats of
    :func:`_atoms_of` then :func:`_policy`, with ``C^T`` summed into the scores as it goes: a
    learning step's point is used once, and writing its coefficients out first costs 0.4 µs.
    """
    n_rows, groups = dual_scores.shape
    pi[:] = 0.0
    if cdf:  # atom l gets sum_{k >= l} d_k, the last atom 0; two groups' running sums at a time
        for s in range(0, groups - 1, 2):
            first, second = features[s], features[s + 1]
            total_first = total_second = 0.0
            for row in range(n_rows - 1, -1, -1):
                total_first += dual_scores[row, s]
                total_second += dual_scores[row, s + 1]
                pi[row] = (pi[row] + total_first * first) + total_second * second
        if groups % 2:
            feature, total = features[groups - 1], 0.0
            for row in range(n_rows - 1, -1, -1):
                total += dual_scores[row, groups - 1]
                pi[row] += total * feature
    else:
        for s in range(groups):
            feature = features[s]
            for row in range(n_rows):
                pi[row] += dual_scores[row, s] * feature
    _softmax_minus(pi, costs, halvings)
    _constraint_rows(pi, cdf, rows)


@compiled
def _constraint_rows(pi, cdf, rows):
    """The constraint rows ``C pi`` of a policy into ``rows``: its CDF at each threshold, or ``pi`` itself."""
    total = 0.0
    for row in range(rows.size):
        total = total + pi[row] if cdf else pi[row]
        rows[row] = total


@compiled
def _atoms_of(scores, cdf, out):
    """``out = (C^T scores)^T``: the policy's coefficients, one row of ``m`` per group, from dual scores ``(R, K)``.

    The floats of the constraints' ``atoms_of``: for the CDF family, atom ``l`` gets the sum over
    rows ``k >= l`` taken from the last row down (numpy's ``cumsum`` of the reversed rows), the
    last atom 0; the per-atom family's are the scores.  Stored ``(K, m)``, so that a policy's
    scores are a contiguous sum of ``K`` rows (:func:`_policy`).
    """
    n_rows, groups = scores.shape
    for s in range(groups):
        if cdf:
            out[s, n_rows] = 0.0
        total = scores[n_rows - 1, s]
        out[s, n_rows - 1] = total
        for row in range(n_rows - 2, -1, -1):
            total = total + scores[row, s] if cdf else scores[row, s]
            out[s, row] = total


@compiled
def _policy(coefficients, features, costs, out, halvings):
    """The policy ``softmax(t^T coefficients - r)`` of one sample into ``out`` (``coefficients`` ``(K, m)``).

    The floats of :func:`_policy_rows` at the scores whose :func:`_atoms_of` are ``coefficients``.
    """
    out[:] = 0.0
    for s in range(features.size):
        feature = features[s]
        for atom in range(out.size):
            out[atom] += coefficients[s, atom] * feature
    _softmax_minus(out, costs, halvings)


@compiled
def _center(rows, baseline, count):
    """``rows -= b``, then ``b += rows / count``: the tracking optimizer's control variate (``count > 0``)."""
    for row in range(rows.size):
        rows[row] -= baseline[row]
        baseline[row] += rows[row] / count


@compiled
def _buffers(n_rows, groups, m):
    """Scratch of one sample's step or draw, views of one allocation (numba's allocations cost ~0.1 µs each).

    ``(scores (R, K), pi (m,), rows (R,), halvings (m,), costs (m,), features (K,))``: a dual's
    scores, a policy, its constraint rows, the softmax's exponents, a sample's costs and features.
    """
    memory = np.empty(n_rows * groups + 3 * m + n_rows + groups)
    scores = memory[:n_rows * groups].reshape((n_rows, groups))
    start = n_rows * groups
    pi, halvings, costs = memory[start:start + m], memory[start + m:start + 2 * m], memory[start + 2 * m:start + 3 * m]
    start += 3 * m
    return scores, pi, memory[start:start + n_rows], halvings, costs, memory[start + n_rows:]


# ---------------------------------------------------------------------- the tracking optimizer
@compiled
def _descend(w, row, s, step, gap, margin):
    """The projected step of entries ``(row, s)`` of ``(Lambda, V)``, gradient ``(gap + margin, margin - gap)``."""
    w[0, row, s] = max(w[0, row, s] - step * (gap + margin), 0.0)
    w[1, row, s] = max(w[1, row, s] - step * (margin - gap), 0.0)


@compiled
def _tracking_update(w, slack, step, rows, features):
    """Projected SGD ``w = (w - step (+-outer(rows, t) + slack))_+`` for ``w = (Lambda, V)``, in place.

    Group by group: the inner loop then runs over the rows and vectorizes (over ``K = 2`` groups it did not).
    """
    n_rows, groups = w.shape[1], w.shape[2]
    for s in range(groups):
        feature, margin = features[s], slack[s]
        for row in range(n_rows):
            _descend(w, row, s, step, rows[row] * feature, margin)


@compiled
def _dual_scores(w, beta, out):
    """``out = beta (Lambda - V)`` of a dual ``w = (Lambda, V)``, in one loop over the contiguous entries."""
    n = out.size
    flat, scores = w.reshape(2, n), out.reshape(n)
    for j in range(n):
        scores[j] = (flat[0, j] - flat[1, j]) * beta


@compiled
def _tracking_step(w, baseline, slack, step, beta, cdf, features, costs, count, scores, pi, rows, halvings):
    _dual_scores(w, beta, scores)
    _policy_rows(scores, cdf, features, costs, pi, rows, halvings)
    _center(rows, baseline, count)
    _tracking_update(w, slack, step, rows, features)


@compiled
def tracking_learn(w, baseline, slack, step, beta, cdf, features, costs, count):
    """One step of the tracking optimizer on one sample, ``count = min(steps, memory)`` (this step included)."""
    scores, pi, rows, halvings, _, _ = _buffers(w.shape[1], w.shape[2], costs.size)
    _tracking_step(w, baseline, slack, step, beta, cdf, features, costs, count, scores, pi, rows, halvings)


#: ``|sum(tau) - 1|`` below which :func:`tracking_sample` takes ``tau`` as a distribution: inside the
#: tolerance of :func:`streamfair.validation.check_distribution` by more than the rounding of a sum.
SAMPLE_SUM_TOLERANCE = 1e-6 - 1e-12


@compiled
def _is_distribution(tau, groups):
    """``tau`` has ``groups`` entries in ``[0, 1]`` (``NaN`` is not) that sum to one (see ``SAMPLE_SUM_TOLERANCE``)."""
    if tau.size != groups:
        return False
    total = 0.0
    for s in range(groups):
        if not 0.0 <= tau[s] <= 1.0:
            return False
        total += tau[s]
    return abs(total - 1.0) <= SAMPLE_SUM_TOLERANCE


#: The least a group's windowed mean of ``tau`` may fall to (:func:`prior_shift_features`): the prior
#: shift's ratios ``p / q`` stay below ``1e200``, so that their sums stay finite.
TAU_MEAN_FLOOR = 1e-200


@compiled
def prior_shift_features(taus, p_given, tau_means, absent_below, n_before, interval, memory, move, out):
    """The group features ``1 - tau_s / (q_s Z)``, ``Z = sum_k tau_k p_k / q_k``, of the rows of ``taus`` into ``out``.

    They are ``1 - tau'_s / p_s`` for ``tau'`` the posterior ``tau`` corrected from the prior ``q``
    (the mean in use, ``tau_means[1]``) to the given shares ``p``: ``tau'_s = tau_s (p_s / q_s) / Z``,
    Saerens, Latinne & Decaestecker's (Neural Computation, 2002) adjustment of a classifier's
    outputs to new priors.  A group whose ``q_s`` is below ``absent_below`` is absent: its feature
    is 0 and its term is left out of ``Z``.  The features of the groups present are those of the
    same formula: on a row without its mass they do not move when it is found absent (their mean
    is then ``1 - 1 / P``, ``P`` the sum of their shares, which the tracking optimizer's baseline
    absorbs).  A row whose ``tau`` lies on absent groups only has features 1.

    ``taus`` and ``out`` hold their rows of ``K`` entries one after the other (flat: a single sample
    is its own row, and no row is a view, which costs more here than the arithmetic).  Row ``i``
    is the ``n_before + i``-th sample (from 0).  With ``move``, each row, once corrected,
    moves the mean ``tau_means[0]`` of ``tau`` by ``1 / min(n + 2, memory)``, no lower than
    ``TAU_MEAN_FLOOR``, and the mean in use takes its value after each of the first ``interval``
    samples, then every ``interval`` samples (when the tracking optimizer's served points change);
    without, nothing moves (the rows are served at the current state) and the counts are not read.
    """
    groups = p_given.size
    for i in range(taus.size // groups):
        row = i * groups
        z = 0.0
        for k in range(groups):
            if tau_means[1, k] >= absent_below:
                z += taus[row + k] * (p_given[k] / tau_means[1, k])
        for s in range(groups):
            if tau_means[1, s] < absent_below:
                out[row + s] = 0.0
            elif z > 0.0:
                out[row + s] = 1.0 - taus[row + s] / (tau_means[1, s] * z)
            else:
                out[row + s] = 1.0
        if move:
            n = n_before + i
            for s in range(groups):
                mean = tau_means[0, s]
                tau_means[0, s] = max(mean + (taus[row + s] - mean) / min(n + 2, memory), TAU_MEAN_FLOOR)
            if n + 1 < interval or (n + 1) % interval == 0:
                for s in range(groups):
                    tau_means[1, s] = tau_means[0, s]


@compiled
def _plain_features(tau, p_given, tau_sum, tau_count, absent_below, out):
    """The group features ``1 - tau_s / p_s`` of ``tau`` into ``out``, uncorrected.

    ``p`` is ``p_given`` (a state written before ``tau`` was corrected to it: every group
    present), or if it is empty the running shares ``tau_sum / tau_count`` before the sample, with
    0 for an absent group (see :func:`_estimated_feature`).
    """
    for s in range(out.size):
        if p_given.size:
            out[s] = 1.0 - tau[s] / p_given[s]
        else:
            out[s] = _estimated_feature(tau[s], tau_sum[s], tau_count, out.size, absent_below)


@compiled
def _estimated_feature(tau_s, sum_s, count, groups, absent_below):
    """``1 - tau_s / (sum_s / count)`` for the running share of a group, or 0 while the group is absent.

    ``sum_s`` includes one uniform pseudo-sample (``1 / groups``); the group is absent while the
    mean of its ``tau`` beyond it, ``(sum_s - 1 / groups) / (count - 1)``, is below ``absent_below``.
    """
    if sum_s - 1.0 / groups < (count - 1) * absent_below:
        return 0.0
    return 1.0 - tau_s / (sum_s / count)


@compiled
def tracking_sample(w, baseline, slack, step, beta, cdf, n_steps, atoms, low, high, eta, tau, p_given, tau_means, n,
                    interval, memory, absent_below, tau_sum, tau_count, recent_eta, recent_tau, coefficients, u, learn):
    """One regression sample of the tracking optimizer, whole: served, then learned (``learn_one``'s floats).

    ``eta`` (a finite number) and ``tau`` (a ``float64`` vector, checked here) are the sample;
    ``p_given`` the given shares, or empty for the running estimate ``tau_sum / tau_count`` (which
    the sample then moves, in place); ``tau_means``, if not empty, the means of ``tau`` that correct
    it to ``p_given``, which the sample, the ``n``-th, then moves (in place, see
    :func:`prior_shift_features`); a group whose share in use (``q`` with the given shares, else
    the running estimate's, see :func:`_estimated_feature`) is below ``absent_below`` has feature
    0; ``recent_*[n % window]`` receive the sample; ``n_steps`` the steps taken before it, of
    which the last ``memory`` make the baseline.  With ``u >= 0``, the atom drawn at ``u`` from the
    served points' policies (``coefficients``, the draw of :func:`served_draw`) before learning;
    ``learn=False`` stops after the draw, with nothing changed.
    Returns ``(clipped, index)``: whether ``eta`` was clipped to ``[low, high]`` and the drawn
    index (-1 without a draw); ``(-1, -1)``, with nothing changed, if ``tau`` is not a distribution
    of ``w.shape[2]`` groups.
    """
    groups = w.shape[2]
    if not _is_distribution(tau, groups):
        return -1, -1
    scores, pi, rows, halvings, costs, features = _buffers(w.shape[1], groups, atoms.size)
    clipped = _scaled_squared_row(eta, atoms, low, high, beta, costs)
    if tau_means.size:  # corrected to the given shares (the learning features too); learned, it moves the means
        prior_shift_features(tau, p_given, tau_means, absent_below, n, interval, memory, learn, features)
    elif u >= 0.0 or p_given.size:  # given shares: the learning features too
        _plain_features(tau, p_given, tau_sum, tau_count, absent_below, features)
    index = -1
    if u >= 0.0:  # the drawn policy is written to pi, which the step then overwrites
        index = _component_draw(coefficients, features, costs, u, pi, halvings)
    if not learn:
        return clipped, index
    if not p_given.size:  # learned with the shares after it
        for s in range(groups):
            tau_sum[s] += tau[s]
            features[s] = _estimated_feature(tau[s], tau_sum[s], tau_count + 1, groups, absent_below)
    slot = n % recent_eta.size
    recent_eta[slot] = eta
    for s in range(groups):
        recent_tau[slot, s] = tau[s]
    _tracking_step(w, baseline, slack, step, beta, cdf, features, costs, min(n_steps + 1, memory), scores, pi, rows,
                   halvings)
    return clipped, index


@compiled
def tracking_proba(atoms, low, high, beta, eta, tau, p_given, tau_means, absent_below, tau_sum, tau_count, coefficients,
                   out):
    """The served law of one regression sample of the tracking optimizer into ``out`` (``proba_one``'s floats).

    The inputs are those of :func:`tracking_sample`, ``coefficients`` those of :func:`served_proba`.
    Returns ``False``, with nothing written, if ``tau`` is not a distribution of
    ``coefficients.shape[1]`` groups.
    """
    groups = coefficients.shape[1]
    if not _is_distribution(tau, groups):
        return False
    _, policy, _, halvings, costs, features = _buffers(0, groups, atoms.size)
    _scaled_squared_row(eta, atoms, low, high, beta, costs)
    if tau_means.size:
        prior_shift_features(tau, p_given, tau_means, absent_below, 0, 1, 1, False, features)
    else:
        _plain_features(tau, p_given, tau_sum, tau_count, absent_below, features)
    _served_row(coefficients, features, costs, policy, halvings, out)
    return True


@compiled
def tracking_learn_rows(w, baseline, slack, step, beta, cdf, features, costs, n_steps, memory):
    """:func:`tracking_learn` on each row of ``features`` and ``costs`` in turn (``n_steps`` taken before)."""
    scores, pi, rows, halvings, _, _ = _buffers(w.shape[1], w.shape[2], costs.shape[1])
    for i in range(features.shape[0]):
        count = min(n_steps + i + 1, memory)
        _tracking_step(w, baseline, slack, step, beta, cdf, features[i], costs[i], count, scores, pi, rows, halvings)


@compiled
def _batch_rows(dual_scores, cdf, features, costs, baseline, count, gap):
    """The mini-batch gradient's ``gap = mean_i outer(C pi_i - b, t_i)``; ``count > 0`` moves ``b`` by the mean.

    Every sample's policy is at the same point: its coefficients ``C^T dual_scores`` are computed
    once.  ``count = 0``: no control variate (``b`` is neither read nor moved).  The sums are kept
    group by group (``(K, R)``), where the loops over the rows vectorize.
    """
    n, (n_rows, groups) = features.shape[0], gap.shape
    _, pi, rows, halvings, _, _ = _buffers(n_rows, 0, costs.shape[1])
    coefficients = np.empty((groups, costs.shape[1]))
    _atoms_of(dual_scores, cdf, coefficients)
    mean, sums = np.zeros(n_rows), np.zeros((groups, n_rows))
    for i in range(n):
        _policy(coefficients, features[i], costs[i], pi, halvings)
        _constraint_rows(pi, cdf, rows)
        if count:
            for row in range(n_rows):
                rows[row] -= baseline[row]
                mean[row] += rows[row]
        for s in range(groups):
            feature = features[i, s]
            for row in range(n_rows):
                sums[s, row] += rows[row] * feature
    for row in range(n_rows):
        for s in range(groups):
            gap[row, s] = sums[s, row] / n
        if count:
            baseline[row] += mean[row] / n / count


@compiled
def tracking_learn_batch(w, baseline, slack, step, beta, cdf, features, costs, count):
    """One step of the tracking optimizer on the mean gradient of a mini-batch (the rows of ``features``)."""
    n_rows, groups = w.shape[1], w.shape[2]
    scores, gap = np.empty((n_rows, groups)), np.empty((n_rows, groups))
    _dual_scores(w, beta, scores)
    _batch_rows(scores, cdf, features, costs, baseline, count, gap)
    for s in range(groups):  # rows inside: see _tracking_update
        margin = slack[s]
        for row in range(n_rows):
            _descend(w, row, s, step, gap[row, s], margin)


# ---------------------------------------------------------------------- the paper's optimizers
@compiled
def _dual_query(stack, qa, qw, out):
    """``out = qw (Lambda - V) + qa (Lambda_ag - V_ag)`` from ``stack = [w, w_ag, c - eps]`` (beta folded in)."""
    n_rows, groups = out.shape
    for s in range(groups):  # rows inside: see _tracking_update
        for row in range(n_rows):
            iterate = stack[0, 0, row, s] - stack[0, 1, row, s]
            aggregate = stack[1, 0, row, s] - stack[1, 1, row, s]
            out[row, s] = qw * iterate + qa * aggregate


@compiled
def _dual_update(stack, k1, k2, b3, avg, gap):
    """The schedule's generic step (see :mod:`streamfair.schedule`) on ``stack = [w, w_ag, c - eps]``, in place."""
    n_rows, groups = gap.shape
    for side in range(2):
        sign = 1.0 if side == 0 else -1.0
        for s in range(groups):  # rows inside: see _tracking_update
            for row in range(n_rows):
                moved = k1 * stack[0, side, row, s] + k2 * stack[1, side, row, s] + b3 * stack[2, side, row, s]
                w = max(moved - sign * b3 * gap[row, s], 0.0)
                stack[0, side, row, s] = w
                stack[1, side, row, s] = avg * w + (1.0 - avg) * stack[1, side, row, s]


@compiled
def dual_learn(stack, coefficients, beta, cdf, features, costs):
    """One step of the paper's optimizers on one sample; ``coefficients = (qa, qw, k1, k2, b3, avg)``."""
    qa, qw, k1, k2, b3, avg = coefficients
    n_rows, groups = stack.shape[2], stack.shape[3]
    scores, pi, rows, halvings, _, _ = _buffers(n_rows, groups, costs.size)
    _dual_query(stack, qa * beta, qw * beta, scores)
    _policy_rows(scores, cdf, features, costs, pi, rows, halvings)
    gap = scores  # the query's scores are spent once its policy is computed: the gradient takes their place
    for s in range(groups):  # rows inside: see _tracking_update
        for row in range(n_rows):
            gap[row, s] = rows[row] * features[s]
    _dual_update(stack, k1, k2, b3, avg, gap)


@compiled
def dual_learn_batch(stack, coefficients, beta, cdf, features, costs):
    """One step of the paper's optimizers on the mean gradient of a mini-batch (the rows of ``features``)."""
    qa, qw, k1, k2, b3, avg = coefficients
    n_rows, groups = stack.shape[2], stack.shape[3]
    scores, gap = np.empty((n_rows, groups)), np.empty((n_rows, groups))
    _dual_query(stack, qa * beta, qw * beta, scores)
    _batch_rows(scores, cdf, features, costs, np.empty(0), 0, gap)
    _dual_update(stack, k1, k2, b3, avg, gap)


# ---------------------------------------------------------------------- serving
@compiled
def served_coefficients(points, beta, cdf, out):
    """``out[j] = (C^T (beta (Lambda_j - V_j)))^T`` of each served point ``points[j]`` (:func:`_atoms_of`).

    ``points`` ``(k, 2, R, K)`` (C-contiguous), ``out`` ``(k, K, m)``.
    """
    scores = np.empty((points.shape[2], points.shape[3]))
    for point in range(points.shape[0]):
        _dual_scores(points[point], beta, scores)
        _atoms_of(scores, cdf, out[point])


@compiled
def _served_row(coefficients, features, costs, policy, halvings, out):
    """The uniform mixture of the ``k`` served points' policies ``softmax(t^T coefficients[j] - r)`` into ``out``.

    ``policy`` and ``halvings``: scratch as long as a policy.
    """
    k, m = coefficients.shape[0], coefficients.shape[2]
    target = out if k == 1 else policy
    if k > 1:
        out[:] = 0.0
    for point in range(k):
        _policy(coefficients[point], features, costs, target, halvings)
        if k > 1:
            for atom in range(m):
                out[atom] += policy[atom]
    if k > 1:
        for atom in range(m):
            out[atom] /= k


@compiled
def served_proba(coefficients, features, costs, out):
    """Each row's served probabilities: the mixture of the points' policies, ``coefficients`` ``(k, K, m)``.

    ``coefficients[j] = (beta C^T (Lambda_j - V_j))^T`` of served point ``j``; ``out`` has shape ``(n, m)``.
    """
    _, policy, _, halvings, _, _ = _buffers(0, 0, coefficients.shape[2])
    for i in range(features.shape[0]):
        _served_row(coefficients, features[i], costs[i], policy, halvings, out[i])


@compiled
def _inverse_cdf(proba, u):
    """The number of atoms whose cumulative probability is at most ``u cdf(m - 1)``, at most ``m - 1``."""
    m = proba.size
    for atom in range(1, m):
        proba[atom] += proba[atom - 1]
    threshold = u * proba[m - 1]
    index = 0
    for atom in range(m):
        if proba[atom] <= threshold:
            index += 1
    return min(index, m - 1)


@compiled
def _component_draw(coefficients, features, costs, u, policy, halvings):
    """The atom drawn at ``u`` from the served mixture: point ``j = floor(u k)``'s inverse CDF at ``u k - j``.

    A draw from the uniform mixture of ``k`` policies (``j`` is uniform on ``0..k-1`` and ``u k - j``
    uniform on ``[0, 1)`` given ``j``) that computes one policy, not ``k``.  For ``k = 1`` it is the
    inverse CDF of the served probabilities at ``u`` itself.
    """
    k = coefficients.shape[0]
    scaled = u * k
    point = min(int(scaled), k - 1)
    _policy(coefficients[point], features, costs, policy, halvings)
    return _inverse_cdf(policy, scaled - point)


@compiled
def served_draws(coefficients, features, costs, u, out):
    """One atom index per row from the served mixture at the uniform ``u[i]`` (see :func:`_component_draw`).

    With one served point, bit for bit :func:`streamfair.keyed_random.sample_indices` of :func:`served_proba`.
    """
    _, policy, _, halvings, _, _ = _buffers(0, 0, coefficients.shape[2])
    for i in range(features.shape[0]):
        out[i] = _component_draw(coefficients, features[i], costs[i], u[i], policy, halvings)


@compiled
def served_draw(coefficients, features, costs, u):
    """:func:`served_draws` of one row (``features`` ``(K,)``, ``costs`` ``(m,)``, a uniform ``u``): the same index."""
    _, policy, _, halvings, _, _ = _buffers(0, 0, coefficients.shape[2])
    return _component_draw(coefficients, features, costs, u, policy, halvings)
