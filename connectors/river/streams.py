"""Synthetic River streams with a sensitive attribute in ``x``, for examples, tests and benchmarks."""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterator

from river import datasets


def friedman_with_group(n: int, seed: int, sensitive: Hashable = "group") -> Iterator[tuple[dict, float]]:
    """River's ``datasets.synth.Friedman`` stream with a binary group S added to ``x``.

    ``S = 1`` with probability ``1 / (1 + exp(10 (0.5 - x[3])))``: likelier when feature 3, which
    raises the target by ``10 x[3]``, is high, so predictions from the features alone differ by
    group.  The target is River's, in its own units: ``10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3
    + 5 x4`` plus standard normal noise, in ``[0, 30]`` but for the noise (mean about 14, variance
    about 25); give a fair model ``B=(0, 30)``.

    >>> [(x["group"], round(y, 2)) for x, y in friedman_with_group(3, seed=1)]
    [(0, 10.47), (1, 7.56), (0, 15.21)]
    """
    rng = random.Random(seed)
    for x, y in datasets.synth.Friedman(seed=seed).take(n):
        x[sensitive] = int(rng.random() < 1 / (1 + math.exp(10 * (0.5 - x[3]))))
        yield x, y


def logistic_with_group(
    n: int, seed: int, n_classes: int = 2, sensitive: Hashable = "group"
) -> Iterator[tuple[dict, int]]:
    """A synthetic classification stream whose labels depend on a binary group S through the features.

    Five features ``x[0..4]`` are independent standard normals; ``y`` takes the value
    ``j = 0..n_classes - 1`` with probability proportional to ``exp(j u)``,
    ``u = 2 x[0] + x[1] - x[2] / 2`` (for 2 classes, ``P(y = 1 | x) = 1 / (1 + exp(-u))``), so
    higher ``x[0]`` means higher labels.  ``S = 1`` with probability ``1 / (1 + exp(-3 x[0]))``:
    likelier when ``x[0]`` is high, so a classifier of ``y`` from the features alone predicts
    higher labels in group 1.

    >>> [(x["group"], y) for x, y in logistic_with_group(4, seed=1)]
    [(1, 1), (1, 1), (0, 0), (1, 0)]
    """
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    rng = random.Random(seed)
    for _ in range(n):
        x: dict[Hashable, float] = {i: rng.gauss(0.0, 1.0) for i in range(5)}
        u = 2 * x[0] + x[1] - x[2] / 2
        top = max(0.0, (n_classes - 1) * u)
        weights = [math.exp(j * u - top) for j in range(n_classes)]
        draw, y = rng.random() * math.fsum(weights), 0
        while y < n_classes - 1 and draw >= weights[y]:
            draw -= weights[y]
            y += 1
        x[sensitive] = int(rng.random() < 1 / (1 + math.exp(-3 * x[0])))
        yield x, y
