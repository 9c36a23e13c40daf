"""The ``[postprocessor]`` section of the daemon's configuration: which post-processor, and its parameters.

Every constructor keyword parameter of the three post-processors is declared once in
:data:`PARAMETERS` (type, default, allowed values, documentation); ``kind`` and ``robust`` choose
the class (:data:`VARIANTS`).  :class:`PostProcessorConfig` validates a section and builds the
post-processor; a ``ValueError`` of the constructor is reported under the key of the argument it
names.

>>> section = PostProcessorConfig(eps=0.01, L=5)
>>> type(section.build()).__name__, section.build().eps.tolist()
('FairRegressionPostProcessor', [0.01, 0.01])
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from typing import Any

from connectors.kafka.schema import (
    BOOLEAN,
    CONSTRUCTOR_DEFAULT,
    INTEGER,
    JSON,
    LABELS,
    NUMBER,
    NUMBER_OR_NUMBERS,
    NUMBERS,
    STRING,
    ConfigError,
    OneOf,
    Setting,
)
from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.dro import GroupRobustFairRegressionPostProcessor

# ---------------------------------------------------------------------------- the post-processor
#: The post-processor each variant builds: ``postprocessor.kind`` chooses, ``robust`` switches regression to DRO.
VARIANTS: dict[str, type] = {
    "regression": FairRegressionPostProcessor,
    "robust": GroupRobustFairRegressionPostProcessor,
    "classification": FairClassificationPostProcessor,
}
KINDS = ("regression", "classification")
#: The most ids the daemon keeps waiting for their label by default (the class keeps 100,000).
DAEMON_MAX_PENDING = 4_000


#: Keys of the section that choose the class rather than being constructor arguments.
SWITCHES: dict[str, Setting] = {
    "kind": Setting(STRING, "regression", "the post-processor: regression of a score eta, or classification "
                    "from class probabilities", OneOf(KINDS)).named("postprocessor.kind"),
    "robust": Setting(BOOLEAN, False, "regression only: serve the group-robust (DRO) post-processor"
                      ).named("postprocessor.robust"),
}


def _parameters(**declared: Setting) -> dict[str, Setting]:
    return {name: value.named(f"postprocessor.{name}") for name, value in declared.items()}


#: The constructors' keyword parameters, each declared once (tests/test_daemon_config.py checks them against
#: the constructors); their defaults are the chosen constructor's, except ``n_groups = 2``.
PARAMETERS: dict[str, Setting] = _parameters(
    B=Setting(NUMBER_OR_NUMBERS, CONSTRUCTOR_DEFAULT, "the target range in its own units: [low, high], or a "
              "half-width B for [-B, B]; predictions live in it, eta outside is clipped"),
    L=Setting(INTEGER, CONSTRUCTOR_DEFAULT, "the grid has 2L + 1 atoms (none: 50 in the anytime profile, sqrt(T) "
              "in the paper's)", optional=True),
    n_classes=Setting(INTEGER, CONSTRUCTOR_DEFAULT, "number of classes (none: the number of `classes`)",
                      optional=True),
    classes=Setting(LABELS, CONSTRUCTOR_DEFAULT, "class labels in the column order of `proba` (none: 0 .. n-1)",
                    optional=True),
    cost_matrix=Setting(JSON, CONSTRUCTOR_DEFAULT, "cost of predicting class j when the truth is i, a matrix "
                        "(none: the 0-1 loss)", optional=True),
    ks=Setting(NUMBER_OR_NUMBERS, CONSTRUCTOR_DEFAULT, "the fairness target: the KS distance between a group's "
               "predictions and all predictions that the predictor is steered to (it fluctuates around it), one "
               "number or one per group, each at most 1", optional=True),
    eps=Setting(NUMBER_OR_NUMBERS, CONSTRUCTOR_DEFAULT, "regression: the paper's per-atom slack instead of `ks`; "
                "classification: the largest gap of a class's rate between a group and all (the target, at most "
                "1), one number or one per group", optional=True),
    beta=Setting(NUMBER, CONSTRUCTOR_DEFAULT, "entropic parameter (none: from the grid and B)", optional=True),
    p=Setting(NUMBERS, CONSTRUCTOR_DEFAULT, "group shares P(S = s) in tau's column order (none: estimated online)",
              optional=True),
    n_groups=Setting(INTEGER, 2, "number of groups K, unless `p` or a per-group `ks`/`eps` gives it",
                     optional=True),
    profile=Setting(STRING, CONSTRUCTOR_DEFAULT, "`anytime` (corrected from the first samples, follows drift) or "
                    "`paper` (the paper's optimizers, for reproduction)"),
    memory=Setting(INTEGER, CONSTRUCTOR_DEFAULT, "anytime profile: samples over which a shift of the stream is "
                   "followed", optional=True),
    horizon=Setting(INTEGER, CONSTRUCTOR_DEFAULT, "paper profile: horizon T of epoch 0 (later epochs double)",
                    optional=True),
    optimizer=Setting(STRING, CONSTRUCTOR_DEFAULT, "`tracking` (anytime) or the paper's `sgd3`, `acsa`, `acsa2`, "
                      "`sgd`", optional=True),
    inner=Setting(STRING, CONSTRUCTOR_DEFAULT, "paper profile: the inner solver of `sgd3`", optional=True),
    mu=Setting(NUMBER, CONSTRUCTOR_DEFAULT, "paper profile: the strong-convexity parameter", optional=True),
    seed=Setting(INTEGER, CONSTRUCTOR_DEFAULT, "seed of the randomized predictions"),
    window=Setting(INTEGER, CONSTRUCTOR_DEFAULT, "recent samples kept for the live diagnostics"),
    serve=Setting(STRING, CONSTRUCTOR_DEFAULT, "paper profile: predictions use the last completed epoch "
                  "(`epoch`) or the running output (`live`)", optional=True),
    updater=Setting(STRING, CONSTRUCTOR_DEFAULT, "the DRO weights: `softmax` of the running group risks, or "
                    "`exponentiated` (mirror ascent)"),
    temperature=Setting(NUMBER, CONSTRUCTOR_DEFAULT, "smoothing T of the worst-group risk, a share of the cost "
                        "scale (the squared half-width of the target range): within T scale log K of the max"),
    step=Setting(NUMBER, CONSTRUCTOR_DEFAULT, "mirror-ascent step of `updater = \"exponentiated\"`, per unit of the "
                 "cost scale"),
    forgetting=Setting(NUMBER, CONSTRUCTOR_DEFAULT, "per-sample forgetting of the group risks (0: running means)"),
    refresh=Setting(INTEGER, CONSTRUCTOR_DEFAULT, "samples between refreshes of the DRO weights"),
    max_pending=Setting(INTEGER, DAEMON_MAX_PENDING, "keyed samples kept waiting for their label (oldest dropped "
                        "first), each adding its id and some 65 to 130 bytes to a checkpoint (K = 2 to 8; up to 215 "
                        "with `updater = \"exponentiated\"`)"),
)
_SHARED = ("eps", "beta", "p", "n_groups", "profile", "memory", "horizon", "optimizer", "inner", "mu", "seed",
           "window", "serve")
#: The keyword parameters of each variant's constructor.
VARIANT_PARAMETERS: dict[str, tuple[str, ...]] = {
    "regression": ("B", "L", "ks", *_SHARED),
    "robust": ("B", "L", "ks", *_SHARED, "updater", "temperature", "step", "forgetting", "refresh", "max_pending"),
    "classification": ("n_classes", "classes", "cost_matrix", *_SHARED),
}


def _constructor_default(cls: type, name: str) -> Any:
    """The default of ``cls``'s keyword ``name`` (the robust class takes the regression ones through ``**kwargs``)."""
    for constructor in (cls, FairRegressionPostProcessor):
        parameter = inspect.signature(constructor).parameters.get(name)
        if parameter is not None and parameter.default is not parameter.empty:
            return parameter.default
    raise AttributeError(name)


def _named_argument(message: str, names: Sequence[str]) -> str | None:
    """The parameter a library error is about: its messages name it first (``"eps must be ..."``)."""
    found = re.match(r"(?:" + "|".join(sorted(names, key=len, reverse=True)) + r")\b", message)
    return found.group(0) if found else None


class PostProcessorConfig:
    """Which post-processor each partition gets, and its constructor arguments.

    ``kind`` (``"regression"`` or ``"classification"``) and ``robust`` (regression only) choose
    :class:`streamfair.FairRegressionPostProcessor`,
    :class:`streamfair.dro.GroupRobustFairRegressionPostProcessor` or
    :class:`streamfair.FairClassificationPostProcessor`; the other keys are that constructor's
    parameters (:data:`PARAMETERS`) with its defaults, except ``n_groups = 2``.  Setting a
    parameter the chosen class does not have is an error.

    >>> PostProcessorConfig(robust=True, temperature=0.05).build().temperature
    0.05
    >>> PostProcessorConfig(kind="classification", classes=["a", "b", "c"], profile="paper").build().eps.tolist()
    [0.005, 0.005]
    """

    def __init__(self, **values: Any):
        unknown = values.keys() - SWITCHES.keys() - PARAMETERS.keys()
        if unknown:
            raise ConfigError(f"postprocessor.{sorted(unknown)[0]}: unknown configuration key")
        self.values = dict(values)

    @property
    def variant(self) -> str:
        """``"regression"``, ``"robust"`` or ``"classification"`` (a key of :data:`VARIANTS`)."""
        if self.kind == "classification":
            return "classification"
        return "robust" if self.robust else "regression"

    @property
    def postprocessor_class(self) -> type:
        """The class :meth:`build` instantiates."""
        return VARIANTS[self.variant]

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("values", {})  # absent while copy or pickle rebuild the object
        if name in values:
            return values[name]
        declared = SWITCHES.get(name) or PARAMETERS.get(name)
        if declared is None:
            raise AttributeError(name)
        if declared.default != CONSTRUCTOR_DEFAULT:
            return declared.default
        return _constructor_default(self.postprocessor_class, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PostProcessorConfig) and self.values == other.values

    def __repr__(self) -> str:
        return f"PostProcessorConfig({', '.join(f'{k}={v!r}' for k, v in self.values.items())})"

    def kwargs(self) -> dict[str, Any]:
        """Constructor arguments; ``n_groups`` is dropped when ``p`` or a per-group ``eps``/``ks`` gives it."""
        SWITCHES["kind"].check(self.kind)
        if self.robust and self.kind == "classification":
            raise ConfigError(f"postprocessor.robust: the robust post-processor is for regression only, "
                              f"got {self.robust!r}")
        accepted = VARIANT_PARAMETERS[self.variant]
        for name, value in self.values.items():
            if name not in accepted and name not in SWITCHES:
                raise ConfigError(f"postprocessor.{name}: is not a parameter of {self.postprocessor_class.__name__}, "
                                  f"got {value!r}")
        arguments = {name: value for name, value in self.values.items() if name not in SWITCHES}
        for name in accepted:  # the daemon's own defaults (n_groups, max_pending)
            if PARAMETERS[name].default != CONSTRUCTOR_DEFAULT:
                arguments.setdefault(name, PARAMETERS[name].default)
        if arguments.get("p") is not None or any(isinstance(arguments.get(name), list) for name in ("eps", "ks")):
            arguments["n_groups"] = None
        return arguments

    def build(self) -> FairRegressionPostProcessor | FairClassificationPostProcessor:
        """A fresh post-processor; a :class:`ValueError` of the constructor names its key.

        >>> PostProcessorConfig(B=0).build()
        Traceback (most recent call last):
        ...
        connectors.kafka.schema.ConfigError: postprocessor.B: B must be a finite number > 0, got 0
        """
        arguments = self.kwargs()
        try:
            return self.postprocessor_class(**arguments)
        except ValueError as error:
            name = _named_argument(str(error), VARIANT_PARAMETERS[self.variant])
            raise ConfigError(f"postprocessor{'.' + name if name else ''}: {error}") from None
        except MemoryError:  # e.g. a grid or a number of groups in the billions
            raise ConfigError(f"postprocessor: its arrays do not fit in memory with {arguments}") from None


