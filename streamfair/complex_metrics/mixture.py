"""A randomized mixture of plug-in classifiers, served one sample at a time.

The algorithms of Narasimhan et al. output ``h = sum_t alpha_t h_t``: to predict, draw a component
``t ~ alpha`` and apply the deterministic plug-in ``h_t``.  Here each draw is determined by the
classifier's ``seed`` and a per-message ``key`` (:mod:`streamfair.keyed_random`), so replaying a
message reproduces its prediction; serving costs ``O(m n^2)`` per sample.

>>> import numpy as np
>>> always = [np.array([[1.0, 0.0], [1.0, 0.0]]), np.array([[0.0, 1.0], [0.0, 1.0]])]
>>> h = RandomizedClassifier([0.25, 0.75], always, seed=3)   # "always 1" w.p. 0.25, "always 0" w.p. 0.75
>>> h.predict_one([0.9, 0.1], key="order-7") == h.predict_one([0.2, 0.8], key="order-7")
True
>>> share = np.mean(h.predict_many(np.full((4000, 2), 0.5), keys=range(4000)))   # about 0.25
>>> bool(abs(share - 0.25) < 0.03)
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..keyed_random import Key, counter_key, keyed_uniform, sample_indices
from ..validation import (
    check_array,
    check_choice,
    check_distributions,
    check_index,
    check_instance,
    check_integer,
    check_seed,
    check_weights,
    first_entry,
    restores_state,
)
from .confusion import Sample, check_labels, cost_features, plug_in

__all__ = ["RandomizedClassifier"]

STATE_VERSION = 1
GROUPINGS = ("none", "aware", "unaware")


class RandomizedClassifier:
    """``sum_t weights[t] * plug-in(scores[t])``.

    Parameters
    ----------
    weights
        Mixture weights (non-negative, summing to one); zero-weight components are dropped.
    scores
        One finite ``(m n, n)`` score matrix per component (at least one; ``n >= 2``): component
        ``t`` predicts ``argmin*_j sum_{a,i} P[a, i] scores[t][a n + i, j]`` (see :mod:`.confusion`).
    grouping
        ``"none"`` (``m = 1``), ``"aware"`` (predictions need the group) or ``"unaware"`` (they need
        the group posterior ``tau``).
    seed
        Seed of the component draws.

    Examples
    --------
    "Always 1" with probability 0.25, "always 0" with probability 0.75: on any sample the expected
    confusion is the same mixture of the two components' confusions.

    >>> import numpy as np
    >>> from streamfair.complex_metrics import Sample
    >>> always_1 = np.array([[1.0, 0.0], [1.0, 0.0]])     # predicting 0 costs 1, predicting 1 costs 0
    >>> always_0 = np.array([[0.0, 1.0], [0.0, 1.0]])
    >>> h = RandomizedClassifier([0.25, 0.75], [always_1, always_0], seed=3)
    >>> sample = Sample(np.array([[0.9, 0.1], [0.2, 0.8]]), y=[0, 1])
    >>> h.component_predictions(sample).tolist()
    [[1, 1], [0, 0]]
    >>> h.confusion(sample)[0].tolist()                   # 0.25 [[0, .5], [0, .5]] + 0.75 [[.5, 0], [.5, 0]]
    [[0.375, 0.125], [0.375, 0.125]]
    >>> h.predict_one([0.9, 0.1], key="order-7") == [1, 0][h.draw("order-7")]   # the key's component
    True
    >>> copy = RandomizedClassifier.from_state_dict(h.state_dict())
    >>> rows = np.full((50, 2), 0.5)
    >>> bool(np.array_equal(copy.predict_many(rows, keys=range(50)), h.predict_many(rows, keys=range(50))))
    True
    """

    def __init__(self, weights: Sequence[float] | np.ndarray, scores: Any, grouping: str = "none", seed: int = 0):
        scores = check_array("scores", scores, finite=False)
        if scores.ndim != 3 or scores.shape[0] < 1 or scores.shape[2] < 2 or scores.shape[1] % scores.shape[2]:
            raise ValueError(f"scores must have shape (k, m n, n) with k >= 1 and n >= 2, got shape {scores.shape}")
        finite = np.isfinite(scores)
        if not finite.all():
            raise ValueError(f"scores must be finite; {first_entry(scores, ~finite)}")
        weight_vector = check_weights("weights", weights, scores.shape[0])
        check_choice("grouping", grouping, GROUPINGS)
        keep = weight_vector > 0
        self.weights = weight_vector[keep] / weight_vector[keep].sum()
        self.scores = scores[keep]
        self.n_classes = scores.shape[2]
        self.n_groups = scores.shape[1] // self.n_classes
        if grouping == "none" and self.n_groups != 1:
            raise ValueError(f"grouping 'none' needs (k, n, n) scores, got shape {scores.shape}")
        self.grouping = grouping
        self.seed = check_seed(seed)
        self._draws = 0

    @property
    def n_components(self) -> int:
        """Number of deterministic classifiers with positive weight."""
        return self.weights.size

    # ------------------------------------------------------------------ serving
    def _features(self, proba: Any, groups: Any, tau: Any, n_rows: int | None) -> np.ndarray:
        """The plug-in weights of the samples; ``groups`` and ``tau``, if given, are checked even where unused."""
        proba = check_distributions("proba", proba, n_rows, self.n_classes)
        n = proba.shape[0]
        groups = None if groups is None else check_labels("groups", groups, n, self.n_groups)
        tau = None if tau is None else check_distributions("tau", tau, n, self.n_groups)
        if self.grouping == "aware":
            if groups is None:
                raise ValueError("this classifier is group-aware: give the group of each sample (group, groups)")
            return cost_features(proba, groups, None, self.n_groups)
        if self.grouping == "unaware":
            if tau is None:
                raise ValueError("this classifier is group-unaware: give the group posterior tau of each sample")
            return cost_features(proba, None, tau, self.n_groups)
        return proba

    def draw(self, key: Key) -> int:
        """The component used for the message ``key``.

        Parameters
        ----------
        key
            The message's key (e.g. its id).

        Returns
        -------
        int
            Index ``t`` of the component in ``weights`` and ``scores``, drawn with probability
            ``weights[t]``; always the same for the same ``seed`` and ``key``.
        """
        return int(sample_indices(self.weights[None, :], np.array([keyed_uniform(self.seed, key)]))[0])

    def _keys(self, n: int, keys: Sequence[Key] | None) -> Sequence[Key]:
        if keys is None:
            keys = [counter_key(self._draws + i) for i in range(n)]
            self._draws += n
        elif isinstance(keys, (str, bytes)) or not hasattr(keys, "__len__"):
            raise ValueError(f"keys must be a sequence of one key per sample ({n}), got {keys!r}")
        elif len(keys) != n:
            raise ValueError(f"keys must have one key per sample ({n}), got {len(keys)}")
        return keys

    def predict_many(
        self, proba: Any, groups: Any = None, tau: Any = None, keys: Sequence[Key] | None = None
    ) -> np.ndarray:
        """Class predictions (indices) for ``n`` samples, one component draw per key.

        Parameters
        ----------
        proba
            ``(n, n_classes)`` class probabilities ``eta_hat(x)``.
        groups
            ``(n,)`` integer groups in ``0..m-1``; required when the grouping is ``"aware"``, not
            used otherwise (but checked if given).
        tau
            ``(n, m)`` group posteriors (rows summing to one); required when the grouping is
            ``"unaware"``, not used otherwise (but checked if given).
        keys
            One key per sample (the message ids); ``None``: the keys ``"draw:<i>"`` of an internal
            counter, which continues across calls.

        Returns
        -------
        ndarray of shape (n,)
            The predicted classes.
        """
        features = self._features(proba, groups, tau, None)
        components = np.array([self.draw(key) for key in self._keys(features.shape[0], keys)], dtype=np.intp)
        predictions = np.empty(features.shape[0], dtype=np.intp)
        for t in np.unique(components):
            rows = components == t
            predictions[rows] = plug_in(features[rows], self.scores[t])
        return predictions

    def predict_one(self, proba: Any, group: int | None = None, tau: Any = None, key: Key | None = None) -> int:
        """The class prediction (index) for one sample; pass the message id as ``key``.

        Parameters
        ----------
        proba
            ``(n_classes,)`` class probabilities ``eta_hat(x)``.
        group
            The sample's group, an integer in ``0..m-1``; required when the grouping is ``"aware"``,
            not used otherwise (but checked if given).
        tau
            ``(m,)`` group posterior; required when the grouping is ``"unaware"``, not used
            otherwise (but checked if given).
        key
            The message's key: the same key draws the same component.  ``None``: the next key of
            the internal counter (as in :meth:`predict_many`).

        Returns
        -------
        int
            The predicted class.
        """
        groups = None if group is None else [check_index("group", group, self.n_groups)]
        features = self._features([proba], groups, None if tau is None else [tau], 1)
        (key,) = self._keys(1, None if key is None else [key])
        return int(plug_in(features, self.scores[self.draw(key)])[0])

    # ------------------------------------------------------------------ evaluation
    def component_predictions(self, sample: Sample) -> np.ndarray:
        """``(k, N)``: every component's predictions on ``sample``.

        Parameters
        ----------
        sample
            A sample with this classifier's classes, groups and grouping.

        Returns
        -------
        ndarray of shape (k, N)
            Row ``t``: the predictions of the deterministic component ``t``.
        """
        self._check_sample(sample)
        return np.stack([sample._predict(scores) for scores in self.scores])

    def confusion(self, sample: Sample) -> np.ndarray:
        """The mixture's expected confusion tensor on ``sample``: ``sum_t alpha_t C[h_t]`` (Prop. 7).

        Parameters
        ----------
        sample
            A sample with this classifier's classes, groups and grouping.

        Returns
        -------
        ndarray of shape (m, n, n)
            The confusion tensor, an expectation over the component draws.
        """
        self._check_sample(sample)
        return sum(w * sample._confusion(sample._predict(s)) for w, s in zip(self.weights, self.scores, strict=True))

    def _check_sample(self, sample: Sample) -> None:
        check_instance("sample", sample, Sample)
        if sample.n_classes != self.n_classes or sample.grouping != self.grouping or sample.n_groups != self.n_groups:
            raise ValueError(
                f"sample ({sample.n_classes} classes, {sample.n_groups} groups, grouping {sample.grouping!r}) "
                f"does not fit the classifier ({self.n_classes} classes, {self.n_groups} groups, "
                f"grouping {self.grouping!r})"
            )

    # ------------------------------------------------------------------ state
    def state_dict(self) -> dict:
        """Configuration, components and the draw counter.

        Returns
        -------
        dict
            ``version``, ``class``, ``weights``, ``scores`` (copies), ``grouping``, ``seed`` and
            ``draws`` (the counter of the keys that :meth:`predict_many` makes up).
        """
        return {
            "version": STATE_VERSION,
            "class": type(self).__name__,
            "weights": self.weights.copy(),
            "scores": self.scores.copy(),
            "grouping": self.grouping,
            "seed": self.seed,
            "draws": self._draws,
        }

    @classmethod
    @restores_state
    def from_state_dict(cls, state: dict) -> RandomizedClassifier:
        """The classifier whose :meth:`state_dict` was taken.

        Parameters
        ----------
        state
            A :meth:`state_dict` of this class.

        Returns
        -------
        RandomizedClassifier
            A classifier that predicts as the original did (same components, seed and counter).
        """
        if state.get("version") != STATE_VERSION or state.get("class") != cls.__name__:
            raise ValueError(
                f"state is for {state.get('class')!r} version {state.get('version')!r}, expected {cls.__name__!r}"
            )
        obj = cls(state["weights"], state["scores"], state["grouping"], state["seed"])
        obj._draws = check_integer("draws", state["draws"], 0)
        return obj

    def __getstate__(self) -> dict:
        return self.state_dict()

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(type(self).from_state_dict(state).__dict__)

    def __repr__(self) -> str:
        return (
            f"RandomizedClassifier({self.n_components} components, {self.n_classes} classes, "
            f"grouping={self.grouping!r})"
        )
