"""Synthetic River streams with a sensitive attribute in ``x``, for examples, tests and benchmarks."""

from __future__ import annotations

import math
import random
from collections.abc import Hashable, Iterator
from numbers import Integral

from river import datasets

from streamfair.validation import check_integer

#: Features of River's Friedman stream (keys ``0 .. 9``) and of :func:`logistic_with_group` (``0 .. 4``).
FRIEDMAN_FEATURES, LOGISTIC_FEATURES = 10, 5


def friedman_with_group(n: int, seed: int, sensitive: Hashable = "group") -> Iterator[tuple[dict, float]]:
    """River's ``datasets.synth.Friedman`` stream with a binary group S added to ``x``.

    ``S = 1`` with probability ``1 / (1 + exp(10 (0.5 - x[3])))``: likelier when feature 3, which
    raises the target by ``10 x[3]``, is high, so predictions from the features alone differ by
    group.  The target is River's, in its own units: ``10 sin(pi x0 x1) + 20 (x2 - 1/2)^2 + 10 x3
    + 5 x4`` plus standard normal noise, in ``[0, 30]`` but for the noise (mean about 14, variance
    about 25); give a fair model ``B=(0, 30)``.

    Parameters
    ----------
    n
        Samples in the stream, an integer >= 0.
    seed
        Seed of River's stream and of the draws of S, an integer.
    sensitive
        The key of S in ``x``: hashable, and not a feature's key ``0 .. 9``.

    Yields
    ------
    tuple of (dict, float)
        ``(x, y)``: River's ten features ``x[0] .. x[9]`` plus S (0 or 1) under ``sensitive``, and
        the target.

    Examples
    --------
    River's samples, plus S; given ``x[3] > 1/2``, S = 1 with probability
    ``2 * integral over (1/2, 1) of 1 / (1 + exp(10 (1/2 - u))) du = (log(1 + e^5) - log 2) / 5 = 0.863``:

    >>> from river import datasets
    >>> stream = list(friedman_with_group(2000, seed=1))
    >>> (x, y), (river_x, river_y) = stream[0], next(iter(datasets.synth.Friedman(seed=1)))
    >>> {k: v for k, v in x.items() if k != "group"} == river_x and y == river_y and x["group"] in (0, 1)
    True
    >>> high = [x["group"] for x, _ in stream if x[3] > 0.5]
    >>> abs(sum(high) / len(high) - 0.863) < 0.03
    True
    """
    check_stream(n, seed, sensitive, FRIEDMAN_FEATURES)
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

    Parameters
    ----------
    n
        Samples in the stream, an integer >= 0.
    seed
        Seed of the features, the labels and S, an integer.
    n_classes
        The labels are ``0 .. n_classes - 1``; at least 2.
    sensitive
        The key of S in ``x``: hashable, and not a feature's key ``0 .. 4``.

    Yields
    ------
    tuple of (dict, int)
        ``(x, y)``: the features ``x[0] .. x[4]`` plus S (0 or 1) under ``sensitive``, and the label.

    Examples
    --------
    Two classes: the labels follow ``P(y = 1 | x) = 1 / (1 + exp(-u))``, computed here from the
    features, and group 1 has more of them (0.707 against 0.293 in theory, by a numerical
    integral over the normal features):

    >>> import math
    >>> stream = list(logistic_with_group(4000, seed=1))
    >>> sorted(stream[0][0], key=str)
    [0, 1, 2, 3, 4, 'group']
    >>> p = [1 / (1 + math.exp(-(2 * x[0] + x[1] - x[2] / 2))) for x, _ in stream]
    >>> abs(sum(y for _, y in stream) - sum(p)) / len(stream) < 0.02
    True
    >>> def rate(g):
    ...     return sum(y for x, y in stream if x["group"] == g) / sum(x["group"] == g for x, _ in stream)
    >>> abs(rate(1) - 0.707) < 0.03, abs(rate(0) - 0.293) < 0.03
    (True, True)
    >>> sorted({y for _, y in logistic_with_group(500, seed=0, n_classes=3)})
    [0, 1, 2]
    """
    check_stream(n, seed, sensitive, LOGISTIC_FEATURES)
    if isinstance(n_classes, bool) or not isinstance(n_classes, int) or n_classes < 2:
        raise ValueError(f"n_classes must be an integer >= 2, got {n_classes!r}")
    rng = random.Random(seed)
    for _ in range(n):
        x: dict[Hashable, float] = {i: rng.gauss(0.0, 1.0) for i in range(LOGISTIC_FEATURES)}
        u = 2 * x[0] + x[1] - x[2] / 2
        top = max(0.0, (n_classes - 1) * u)
        weights = [math.exp(j * u - top) for j in range(n_classes)]
        draw, y = rng.random() * math.fsum(weights), 0
        while y < n_classes - 1 and draw >= weights[y]:
            draw -= weights[y]
            y += 1
        x[sensitive] = int(rng.random() < 1 / (1 + math.exp(-3 * x[0])))
        yield x, y


def check_stream(n: int, seed: int, sensitive: Hashable, n_features: int) -> None:
    """The arguments of a stream whose features are keyed ``0 .. n_features - 1``; ``ValueError`` if one is bad.

    >>> check_stream(10, seed=1, sensitive=0, n_features=5)
    Traceback (most recent call last):
    ...
    ValueError: sensitive must not be a feature's key 0 .. 4 (S would replace the feature), got 0
    """
    check_integer("n", n, 0)
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise ValueError(f"seed must be an integer, got {seed!r}")
    try:
        hash(sensitive)
    except TypeError:
        raise ValueError(f"sensitive must be a hashable key of x, got {sensitive!r}") from None
    if sensitive in range(n_features):
        raise ValueError(f"sensitive must not be a feature's key 0 .. {n_features - 1} (S would replace the "
                         f"feature), got {sensitive!r}")
