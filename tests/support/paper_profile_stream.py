"""A fixed stream and the outputs the ``paper`` profile must reproduce bit for bit.

``outputs(factory)`` runs one post-processor built by ``factory`` over the stream (learning with
fused serving, then batch serving on probe points) and returns every float it produced, so that
the recorded file ``tests/data/paper_profile.npz`` pins the numerics of the version before the
profiles existed, whose defaults ``profile="paper"`` reproduces.  Re-recording is a deliberate
act: ``python -m tests.support.paper_profile_stream`` (from the repository's root) writes it from
the current code's ``paper`` profile.  ``tests/data/paper_checkpoint_v1.pkl`` is the
``state_dict`` of that version's default regression post-processor after the first 3,000 samples
of :func:`stream` (a version-1 state): an artifact of the old code, never re-recorded.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.dro import GroupRobustFairRegressionPostProcessor
from tests.support import DATA

GOLDEN = DATA / "paper_profile.npz"
N_STREAM = 8000  # crosses the epoch ends at 2,496 and 7,488 of the reference horizon


def stream(seed: int = 11) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(eta, tau, class_proba)`` of a two-group stream whose base model favours group 1."""
    rng = np.random.default_rng(seed)
    s = (rng.random(N_STREAM) < 0.3).astype(int)
    tau1 = np.where(s == 1, rng.uniform(0.55, 0.95, N_STREAM), rng.uniform(0.05, 0.45, N_STREAM))
    tau = np.column_stack([1 - tau1, tau1])
    eta = np.clip(0.4 * s - 0.2 + 0.3 * rng.standard_normal(N_STREAM), -1.2, 1.2)
    score = 1 / (1 + np.array([math.exp(-3 * e) for e in eta]))  # libm's exp: numpy's rounds differently on AVX-512
    return eta, tau, np.column_stack([1 - score, score])


def outputs(name: str, model) -> dict[str, np.ndarray]:
    """Fused predictions while learning, then probabilities and draws on probe points, and the dual."""
    eta, tau, proba = stream()
    base = proba if name == "classification" else eta
    keys = [f"m{i}" for i in range(N_STREAM)]
    served = [model.predict_learn_one(base[i], tau[i], key=keys[i]) for i in range(N_STREAM)]
    probe = slice(0, 40)
    return {
        f"{name}/served": np.asarray(served, dtype=float),
        f"{name}/proba": model.proba_many(base[probe], tau[probe]),
        f"{name}/dual": np.asarray(model.dual),
    }


#: The three post-processors with today's default settings (what ``profile="paper"`` must equal).
FACTORIES: dict[str, Callable[..., object]] = {
    "regression": lambda **kw: FairRegressionPostProcessor(p=[0.7, 0.3], **kw),
    "regression_p_online": lambda **kw: FairRegressionPostProcessor(n_groups=2, **kw),
    "classification": lambda **kw: FairClassificationPostProcessor(n_classes=2, p=[0.7, 0.3], **kw),
    "robust": lambda **kw: GroupRobustFairRegressionPostProcessor(p=[0.7, 0.3], **kw),
}


def record_all(**kwargs) -> dict[str, np.ndarray]:
    """Every factory's :func:`outputs` (``kwargs`` go to each constructor)."""
    arrays: dict[str, np.ndarray] = {}
    for name, factory in FACTORIES.items():
        arrays.update(outputs(name, factory(**kwargs)))
    return arrays


if __name__ == "__main__":
    np.savez_compressed(GOLDEN, **record_all(profile="paper"))
    print(f"wrote {GOLDEN}")
