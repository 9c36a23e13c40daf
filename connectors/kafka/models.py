"""Base models that turn raw features into ``eta`` and ``tau``: pickled River models.

``eta`` comes from a regressor's ``predict_one(x)``; ``tau`` from a classifier's
``predict_proba_one(x)`` read in the order of the configured group labels (labels are compared by
:func:`group_label`, so ``1``, ``"1"`` and ``True`` -- the label River's binary classifiers use --
are the same group).  Groups missing from the classifier's answer get
probability 0 and the rest is renormalized; a classifier that gives no mass to any group (River
classifiers answer ``{}`` before they have learned anything) gives the uniform ``tau``.

For classification (``classes`` given) the first model is a classifier of ``Y`` too: its
``predict_proba_one(x)`` is read the same way in the order of the classes, and ``score`` returns
the class probabilities in place of ``eta``.

Pickle runs code when it loads: only load model files (and changelog topics, which carry the
pickled models when they learn online) from a trusted source.

Examples
--------
>>> from river import linear_model
>>> models = BaseModels(linear_model.LinearRegression(), linear_model.LogisticRegression(), ["0", "1"])
>>> models.score({"x": 1.0})
(0.0, [0.5, 0.5])
>>> models.learn({"x": 1.0}, y=0.5, s=1)
>>> eta, tau = models.score({"x": 1.0})
>>> eta > 0.0 and tau[1] > 0.5
True
"""

from __future__ import annotations

import hashlib
import math
import pickle
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from connectors.kafka.codec import Invalid, group_label


class BaseModels:
    """A regressor for ``eta`` and a classifier for ``tau``.

    Parameters
    ----------
    regressor
        Has ``predict_one(x) -> float`` (and ``learn_one(x, y)`` to learn online).
    classifier
        Has ``predict_proba_one(x) -> dict`` (and ``learn_one(x, s)``).
    groups
        Group labels in ``tau``'s column order.
    classes
        Classification: the class labels in the post-processor's column order; ``regressor`` is then
        a classifier with ``predict_proba_one(x)`` (and ``learn_one(x, y)``).
    origin
        A digest of the model files the models were loaded from (:meth:`load`), kept by copies and
        checkpoints, so that models learned online are known to descend from them; ``None``: unknown.

    >>> from river import linear_model
    >>> models = BaseModels(linear_model.LogisticRegression(), linear_model.LogisticRegression(), ["0", "1"],
    ...                     classes=[False, True])
    >>> models.learn({"x": 1.0}, y=True, s=1)
    >>> proba, tau = models.score({"x": 1.0})
    >>> proba[1] > 0.5 and tau[1] > 0.5
    True
    """

    def __init__(self, regressor: Any, classifier: Any, groups: Sequence[Any], classes: Sequence[Any] | None = None,
                 origin: str | None = None):
        first = "predict_one" if classes is None else "predict_proba_one"
        for name, model, method in (("regressor", regressor, first),
                                    ("classifier", classifier, "predict_proba_one")):
            if not callable(getattr(model, method, None)):
                raise ValueError(f"{name} must have a {method}() method, got {type(model).__name__}")
        self.regressor = regressor
        self.classifier = classifier
        self.groups = [group_label(g) for g in groups]
        if len(set(self.groups)) != len(self.groups) or len(self.groups) < 2:
            raise ValueError(f"groups must be at least 2 distinct labels, got {list(groups)!r}")
        self._column = {g: i for i, g in enumerate(self.groups)}
        self.classes = None if classes is None else list(classes)
        self.origin = origin
        self._class_column = None if classes is None else {group_label(c): i for i, c in enumerate(classes)}

    @classmethod
    def load(cls, regressor_path: str | Path, classifier_path: str | Path, groups: Sequence[Any],
             classes: Sequence[Any] | None = None) -> BaseModels:
        """Unpickle both models; ``ValueError`` names ``models.eta`` or ``models.tau`` on failure.

        Their ``origin`` is a BLAKE2b digest of the two files' bytes.
        """
        models, origin = [], hashlib.blake2b(digest_size=16)
        for key, path in (("models.eta", regressor_path), ("models.tau", classifier_path)):
            try:
                data = Path(path).read_bytes()
                models.append(pickle.loads(data))
            except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError) as error:
                raise ValueError(f"{key}: cannot load {str(path)!r}: {error}") from None
            origin.update(len(data).to_bytes(8, "little") + data)
        try:
            return cls(models[0], models[1], groups, classes, origin=origin.hexdigest())
        except ValueError as error:
            key = "models.eta" if "regressor" in str(error) else "models.tau"
            raise ValueError(f"{key}: {error}") from None

    def score(self, x: dict) -> tuple[Any, list[float]]:
        """``(eta, tau)`` for features ``x`` (classification: ``(proba, tau)``).

        :class:`Invalid` ``"model_error"`` if the models raise or answer something unusable.
        """
        try:
            eta: float | list[float]
            if self._class_column is None:
                eta = float(self.regressor.predict_one(x))
                if not math.isfinite(eta):
                    raise ValueError(f"eta is {eta!r}")
            else:
                eta = _distribution(self.regressor.predict_proba_one(x), self._class_column, "postprocessor.classes")
            return eta, _distribution(self.classifier.predict_proba_one(x), self._column, "models.groups")
        except Exception as error:  # a third-party model may raise anything on odd input
            raise Invalid("model_error", f"{type(error).__name__}: {error}") from None

    def learn(self, x: dict, y: float, s: Any) -> None:
        """One labelled sample: the regressor learns ``y``, the classifier learns ``s``."""
        self.regressor.learn_one(x, y)
        self.classifier.learn_one(x, s)

    def to_bytes(self) -> bytes:
        """Both models, pickled (for checkpoints and per-partition copies)."""
        return pickle.dumps((self.regressor, self.classifier), protocol=5)

    def copy(self) -> BaseModels:
        """An independent copy (of the same ``origin``)."""
        return type(self).from_bytes(self.to_bytes(), self.groups, self.classes, self.origin)

    @classmethod
    def from_bytes(cls, data: bytes, groups: Sequence[Any], classes: Sequence[Any] | None = None,
                   origin: str | None = None) -> BaseModels:
        """Inverse of :meth:`to_bytes` (``origin`` is not part of the bytes)."""
        regressor, classifier = pickle.loads(data)
        return cls(regressor, classifier, groups, classes, origin)


def _distribution(answer: dict, column: dict[str, int], setting: str) -> list[float]:
    """A ``predict_proba_one`` answer in column order: unknown labels dropped, renormalized, uniform if empty.

    An answer none of whose labels is a column (the labels of ``setting``) is an error: for the
    groups it would give every message the uniform posterior, that is no correction, and say nothing.

    >>> _distribution({"f": 0.9, "m": 0.1}, {"0": 0, "1": 1}, "models.groups")
    Traceback (most recent call last):
    ...
    ValueError: the model's labels ['f', 'm'] are none of ['0', '1'] (models.groups)
    """
    mass = [0.0] * len(column)
    known = False
    for label, value in answer.items():
        index = column.get(group_label(label))
        if index is not None:
            mass[index] += float(value)
            known = True
    if answer and not known:
        raise ValueError(f"the model's labels {sorted(map(group_label, answer))} are none of {list(column)} "
                         f"({setting})")
    total = math.fsum(mass)
    if not math.isfinite(total) or min(mass) < 0.0:
        raise ValueError(f"predict_proba_one returned {answer!r}")
    if total <= 0.0:
        return [1.0 / len(mass)] * len(mass)
    return [m / total for m in mass]
