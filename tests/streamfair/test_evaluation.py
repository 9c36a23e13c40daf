"""Risk and unfairness (per-atom gap, KS) against brute-force computations written with loops."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from streamfair import evaluate, evaluate_deterministic
from streamfair.evaluation import to_grid


def brute_force(values_and_weights, y, membership):
    """Risk, group risk, per-value gap and KS from a list, per sample, of ``(value, probability)`` pairs.

    ``membership[i][s]`` is the weight of sample ``i`` in group ``s`` (one-hot for labels).
    """
    n, k = len(y), len(membership[0])
    support = sorted({v for pairs in values_and_weights for v, _ in pairs})

    def law(weights):
        total = sum(weights)
        return {
            v: sum(w * q for w, pairs in zip(weights, values_and_weights, strict=True) for u, q in pairs if u == v)
            / total
            for v in support
        }

    overall = law([1.0] * n)
    losses = [sum(q * (v - y[i]) ** 2 for v, q in values_and_weights[i]) for i in range(n)]
    risk = sum(losses) / n
    group_risk, atom, ks = [], [], []
    for s in range(k):
        weights = [membership[i][s] for i in range(n)]
        group = law(weights)
        group_risk.append(sum(w * loss for w, loss in zip(weights, losses, strict=True)) / sum(weights))
        atom.append(max(abs(group[v] - overall[v]) for v in support))
        # sup over every threshold t of |P(Y_hat <= t | S = s) - P(Y_hat <= t)|: the CDFs only change at
        # support points, so thresholds below, at, and between the support points cover the sup
        thresholds = [support[0] - 1.0] + support + [(a + b) / 2 for a, b in itertools.pairwise(support)]

        def cdf(law_, t):
            return sum(law_[v] for v in support if v <= t)

        ks.append(max(abs(cdf(group, t) - cdf(overall, t)) for t in thresholds))
    return risk, np.array(group_risk), np.array(atom), np.array(ks)


def assert_report(report, expected, tol=1e-12):
    risk, group_risk, atom, ks = expected
    assert report.risk == pytest.approx(risk, rel=tol, abs=tol)
    np.testing.assert_allclose(report.group_risk, group_risk, rtol=tol, atol=tol)
    np.testing.assert_allclose(report.atom_unfairness, atom, rtol=tol, atol=tol)
    np.testing.assert_allclose(report.ks_unfairness, ks, rtol=tol, atol=tol)
    assert report.max_ks == pytest.approx(ks.max(), abs=tol)


@pytest.mark.parametrize("seed", range(3))
def test_randomized_predictor_with_group_labels(seed):
    rng = np.random.default_rng(seed)
    n, m, k = 40, 7, 3
    atoms = np.linspace(-1, 1, m)
    proba = rng.dirichlet(np.full(m, 0.5), n)
    y = rng.normal(0, 0.7, n)
    groups = rng.integers(0, k, n)
    groups[:k] = np.arange(k)
    report = evaluate(proba, atoms, y, groups)
    pairs = [[(atoms[a], proba[i, a]) for a in range(m)] for i in range(n)]
    assert_report(report, brute_force(pairs, y, np.eye(k)[groups]))
    assert report.ks_unfairness.max() > 0.01


def test_randomized_predictor_with_a_membership_matrix():
    """Groups given as P(S = . | x_i) (the tau of the population) weight every sample in every group."""
    rng = np.random.default_rng(4)
    n, m, k = 30, 5, 4
    atoms = np.linspace(0, 2, m)
    proba = rng.dirichlet(np.ones(m), n)
    y = rng.uniform(0, 2, n)
    membership = rng.dirichlet(np.ones(k), n)
    pairs = [[(atoms[a], proba[i, a]) for a in range(m)] for i in range(n)]
    assert_report(evaluate(proba, atoms, y, membership), brute_force(pairs, y, membership))


def test_unsorted_atoms_give_the_same_report_as_sorted_ones():
    """The KS distance is about the order of the values, not of the columns."""
    rng = np.random.default_rng(5)
    n, m = 25, 6
    atoms = np.linspace(-1, 1, m)
    proba = rng.dirichlet(np.ones(m), n)
    y, groups = rng.normal(0, 1, n), np.arange(n) % 2
    order = rng.permutation(m)
    shuffled = evaluate(proba[:, order], atoms[order], y, groups)
    pairs = [[(atoms[a], proba[i, a]) for a in range(m)] for i in range(n)]
    assert_report(shuffled, brute_force(pairs, y, np.eye(2)[groups]))


@pytest.mark.parametrize("seed", range(3))
def test_deterministic_predictions(seed):
    rng = np.random.default_rng(10 + seed)
    n, k = 50, 3
    predictions = rng.choice([-0.5, 0.1, 0.25, 0.9, 1.3], n) + (rng.random(n) < 0.2) * rng.normal(0, 1, n)
    y = rng.normal(0, 1, n)
    groups = rng.integers(0, k, n)
    groups[:k] = np.arange(k)
    report = evaluate_deterministic(predictions, y, groups)
    pairs = [[(predictions[i], 1.0)] for i in range(n)]
    assert_report(report, brute_force(pairs, y, np.eye(k)[groups]))
    # the same predictions as one-hot distributions on their distinct values give the same report
    values = np.unique(predictions)
    assert_report(evaluate(to_grid(predictions, values), values, y, groups), brute_force(pairs, y, np.eye(k)[groups]))
    # ... and so do the labels in any integer type (unsigned ones: the cast of boolean groups)
    for dtype in (np.uint8, np.uint64, np.int8):
        assert_report(evaluate_deterministic(predictions, y, groups.astype(dtype)),
                      brute_force(pairs, y, np.eye(k)[groups]))


def test_deterministic_predictions_with_a_membership_matrix():
    rng = np.random.default_rng(20)
    n = 30
    predictions = rng.choice([0.0, 1.0, 2.0], n)
    y = rng.normal(1, 1, n)
    membership = rng.dirichlet([1, 1], n)
    pairs = [[(predictions[i], 1.0)] for i in range(n)]
    assert_report(evaluate_deterministic(predictions, y, membership), brute_force(pairs, y, membership))


def test_known_answers():
    # two samples, perfect predictions, each group always gets "its" value
    report = evaluate([[1.0, 0.0], [0.0, 1.0]], atoms=[0.0, 1.0], y=[0.0, 1.0], groups=[0, 1])
    assert report.risk == 0.0 and report.ks_unfairness.tolist() == [0.5, 0.5]
    assert report.atom_unfairness.tolist() == [0.5, 0.5]
    # a constant prediction is fair, whatever the groups; its risk is the mean squared deviation
    report = evaluate_deterministic([0.3, 0.3, 0.3, 0.3], [0.3, 0.5, 0.1, 0.3], [0, 0, 1, 1])
    assert report.ks_unfairness.tolist() == [0.0, 0.0] and report.atom_unfairness.tolist() == [0.0, 0.0]
    assert report.risk == pytest.approx(0.02, abs=1e-15)
    assert report.group_risk.tolist() == pytest.approx([0.02, 0.02], abs=1e-15)
    # the same law in both groups (0 and 1 once each) is fair, though the predictions differ by sample
    report = evaluate_deterministic([0.0, 1.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0], [0, 0, 1, 1])
    assert report.ks_unfairness.tolist() == [0.0, 0.0] and report.risk == 0.5


def test_randomized_report_is_the_expectation_over_draws():
    """Drawing Y_hat ~ pi(. | x_i) many times and evaluating the draws approaches the exact report."""
    rng = np.random.default_rng(30)
    n, m, draws = 20, 4, 4000
    atoms = np.array([-1.0, -0.2, 0.3, 1.0])
    proba = rng.dirichlet(np.ones(m), n)
    y, groups = rng.normal(0, 1, n), np.arange(n) % 2
    exact = evaluate(proba, atoms, y, groups)
    cdf = np.cumsum(proba, axis=1)
    u = rng.random((draws, n, 1))
    sampled = atoms[np.minimum((u > cdf).sum(axis=2), m - 1)].ravel()
    report = evaluate_deterministic(sampled, np.tile(y, draws), np.tile(groups, draws))
    # 80,000 draws: the standard error of each probability is below 0.25 / sqrt(40,000) = 0.00125
    assert report.risk == pytest.approx(exact.risk, abs=0.02)
    np.testing.assert_allclose(report.ks_unfairness, exact.ks_unfairness, atol=0.006)
    np.testing.assert_allclose(report.atom_unfairness, exact.atom_unfairness, atol=0.006)


def test_a_report_of_no_samples_is_refused():
    """A mean over no samples was NaN with a warning (``evaluate``), or a numpy error naming nothing."""
    with pytest.raises(ValueError, match="a report needs at least one sample, got none"):
        evaluate(np.zeros((0, 3)), [0.0, 0.5, 1.0], np.zeros(0), np.zeros(0, dtype=int))
    with pytest.raises(ValueError, match="a report needs at least one sample, got none"):
        evaluate_deterministic(np.zeros(0), np.zeros(0), np.zeros(0, dtype=int))
