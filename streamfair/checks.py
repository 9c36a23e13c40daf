"""The contract every post-processor keeps, as checks to run on any variant (as ``river.checks`` does for River).

Each check takes ``make``, a function returning a fresh post-processor (two calls must give two
equal, independent objects), feeds it a seeded stream suited to its ``prediction_input`` and
raises ``AssertionError`` (or the ``ValueError`` it did not expect) when the contract is broken:

* :func:`check_learn_many_is_a_loop_of_learn_one` -- ``learn_many`` (with keys) leaves bit for bit
  the state ``n`` calls to ``learn_one`` leave;
* :func:`check_proba_learn_one_is_fused`, :func:`check_proba_learn_many_is_fused`,
  :func:`check_predict_learn_one_is_fused`, :func:`check_predict_learn_many_is_fused` -- each fused
  method returns and leaves what its two calls (``proba_one`` / ``predict_one``, then
  ``learn_one``, with the keys) do;
* :func:`check_state_round_trip` -- ``from_state_dict(state_dict())`` continues identically;
* :func:`check_pickle_round_trip` -- so does an unpickled copy;
* :func:`check_invalid_inputs_raise` -- a bad ``tau``, a bad prediction or keys of the wrong length
  raise ``ValueError`` naming the argument, before anything changes; numbers written as text
  (``"0.1"``) are refused by the methods of one sample and of many alike;
* :func:`check_keyed_draws_replay` -- a sampled prediction is a function of the state and its key,
  in ``predict_one``, ``predict_many`` and ``predict_learn_one``, and reported in ``labels``.

:func:`yield_checks` gives them all, :func:`check_postprocessor` runs them all.

>>> from streamfair import FairRegressionPostProcessor
>>> check_postprocessor(lambda: FairRegressionPostProcessor(L=5, n_groups=2, memory=64))
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Iterator
from numbers import Number
from typing import Any

import numpy as np

from .postprocessor import DualPostProcessor

__all__ = [
    "check_postprocessor",
    "yield_checks",
    "check_learn_many_is_a_loop_of_learn_one",
    "check_proba_learn_one_is_fused",
    "check_proba_learn_many_is_fused",
    "check_predict_learn_one_is_fused",
    "check_predict_learn_many_is_fused",
    "check_state_round_trip",
    "check_pickle_round_trip",
    "check_invalid_inputs_raise",
    "check_keyed_draws_replay",
]

Make = Callable[[], DualPostProcessor]

#: Samples of the checks' streams: enough to cross the small refresh and snapshot periods tests use.
N_SAMPLES = 240


def stream(fair: DualPostProcessor, n: int = N_SAMPLES, seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """``(predictions, tau, keys)``: ``n`` seeded samples of the kind ``fair`` reads.

    Estimates ``eta`` spread over 1.2 times the atoms' range (so some are clipped), or class
    probabilities; ``tau`` rows drawn from a Dirichlet law; keys ``"k<seed>-<i>"``.

    >>> from streamfair import FairClassificationPostProcessor
    >>> proba, tau, keys = stream(FairClassificationPostProcessor(n_classes=3, n_groups=2), 4)
    >>> proba.shape, tau.shape, keys[:2]
    ((4, 3), (4, 2), ['k0-0', 'k0-1'])
    """
    rng = np.random.default_rng(seed)
    tau = rng.dirichlet(np.ones(fair.n_groups), n)
    if fair.prediction_input == "proba":
        predictions = rng.dirichlet(np.full(fair.atoms.size, 0.7), n)
    else:
        scale = 1.2 * float(np.max(np.abs(fair.atoms)))
        predictions = rng.uniform(-scale, scale, n)
    return predictions, tau, [f"k{seed}-{i}" for i in range(n)]


def assert_same_state(a: Any, b: Any, path: str = "state") -> None:
    """``a == b`` entry by entry: arrays bit for bit (dtype, shape and values), numbers by value."""
    if isinstance(a, dict) and isinstance(b, dict):
        assert a.keys() == b.keys(), f"{path}: keys {sorted(map(str, a))} != {sorted(map(str, b))}"
        for key in a:
            assert_same_state(a[key], b[key], f"{path}[{key!r}]")
    elif isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        assert len(a) == len(b), f"{path}: lengths {len(a)} != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same_state(x, y, f"{path}[{i}]")
    elif isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        x, y = np.asarray(a), np.asarray(b)
        assert x.shape == y.shape and x.dtype == y.dtype, f"{path}: {x.dtype}{x.shape} != {y.dtype}{y.shape}"
        assert x.tobytes() == y.tobytes(), f"{path}: arrays differ"
    elif isinstance(a, Number) and isinstance(b, Number):  # a float and a numpy float of the same value agree
        assert isinstance(a, bool) == isinstance(b, bool) and a == b, f"{path}: {a!r} != {b!r}"
    else:
        assert type(a) is type(b) and a == b, f"{path}: {a!r} != {b!r}"


def _assert_same_outputs(a: Any, b: Any, what: str) -> None:
    x, y = np.asarray(a), np.asarray(b)
    assert x.shape == y.shape and x.dtype == y.dtype and x.tobytes() == y.tobytes(), f"{what} differ"


def _learn_with_labels(fair: DualPostProcessor, predictions: np.ndarray, tau: np.ndarray, keys: list) -> None:
    """Learn the samples one by one under their keys; every third key gets a label a few samples later.

    Some unkeyed draws first, so that the draw counter is part of what is checked.
    """
    fair.predict_many(predictions[:3], tau[:3])
    for i in range(tau.shape[0]):
        fair.learn_one(predictions[i], tau[i], key=keys[i])
        if i >= 5 and i % 3 == 0:
            fair.learn_label(keys[i - 5], float(np.ravel(predictions[i])[0]))


def _continuation(fair: DualPostProcessor, seed: int) -> list[np.ndarray]:
    """What ``fair`` does next: probabilities, keyed and unkeyed draws, then the state after learning."""
    predictions, tau, keys = stream(fair, 60, seed)
    outputs = [fair.proba_many(predictions, tau), fair.predict_many(predictions[:5], tau[:5], keys=keys[:5]),
               np.asarray(fair.predict_one(predictions[0], tau[0]))]
    _learn_with_labels(fair, predictions, tau, keys)
    outputs.append(fair.proba_learn_many(predictions[:20], tau[:20], keys=keys[:20]))
    return outputs


def check_learn_many_is_a_loop_of_learn_one(make: Make) -> None:
    """``learn_many(predictions, tau, keys=keys)`` == ``learn_one`` of each sample with its key, bit for bit."""
    a, b = make(), make()
    predictions, tau, keys = stream(a)
    a.learn_many(predictions, tau, keys=keys)
    for i in range(tau.shape[0]):
        b.learn_one(predictions[i], tau[i], key=keys[i])
    assert_same_state(a.state_dict(), b.state_dict())
    _assert_same_outputs(a.proba_many(predictions, tau), b.proba_many(predictions, tau), "probabilities after learning")


def check_proba_learn_one_is_fused(make: Make) -> None:
    """``proba_learn_one(x, tau, key)`` == ``proba_one(x, tau)`` then ``learn_one(x, tau, key)``."""
    a, b = make(), make()
    predictions, tau, keys = stream(a)
    for i in range(tau.shape[0]):
        fused = a.proba_learn_one(predictions[i], tau[i], key=keys[i])
        proba = b.proba_one(predictions[i], tau[i])
        b.learn_one(predictions[i], tau[i], key=keys[i])
        _assert_same_outputs(fused, proba, f"probabilities of sample {i}")
    assert_same_state(a.state_dict(), b.state_dict())


def check_proba_learn_many_is_fused(make: Make) -> None:
    """``proba_learn_many(predictions, tau, keys)`` == ``proba_one`` then ``learn_one`` per sample, in order."""
    a, b = make(), make()
    predictions, tau, keys = stream(a)
    half = tau.shape[0] // 2  # two calls: the second starts from a learned state
    fused = np.vstack([a.proba_learn_many(predictions[:half], tau[:half], keys=keys[:half]),
                       a.proba_learn_many(predictions[half:], tau[half:], keys=keys[half:])])
    rows = []
    for i in range(tau.shape[0]):
        rows.append(b.proba_one(predictions[i], tau[i]))
        b.learn_one(predictions[i], tau[i], key=keys[i])
    _assert_same_outputs(fused, np.array(rows), "probabilities")
    assert_same_state(a.state_dict(), b.state_dict())


def check_predict_learn_one_is_fused(make: Make) -> None:
    """``predict_learn_one(x, tau, mode, key)`` == ``predict_one`` then ``learn_one`` with the key, in every mode."""
    a, b = make(), make()
    predictions, tau, keys = stream(a)
    modes = a.prediction_modes
    for i in range(tau.shape[0]):
        mode, key = modes[i % len(modes)], keys[i] if i % 4 else None  # unkeyed draws use the counter
        fused = a.predict_learn_one(predictions[i], tau[i], mode=mode, key=key)
        output = b.predict_one(predictions[i], tau[i], mode=mode, key=key)
        b.learn_one(predictions[i], tau[i], key=key)
        _assert_same_outputs(fused, output, f"predictions of sample {i} (mode={mode!r})")
    assert_same_state(a.state_dict(), b.state_dict())


def check_predict_learn_many_is_fused(make: Make) -> None:
    """``predict_learn_many(x, tau, mode, keys)`` == ``predict_one`` then ``learn_one`` per sample, in every mode.

    Some keys are ``None`` (those draws use the counter); the served probabilities come along.
    """
    a, b = make(), make()
    predictions, tau, named = stream(a)
    keys: list[str | None] = [key if i % 4 else None for i, key in enumerate(named)]
    n, modes = tau.shape[0], a.prediction_modes
    bounds = np.linspace(0, n, 2 * len(modes) + 1).astype(int)  # each mode twice, from a learned state
    for j, (start, stop) in enumerate(zip(bounds[:-1], bounds[1:], strict=True)):
        rows, mode = slice(start, stop), modes[j % len(modes)]
        fused, proba = a.predict_learn_many(predictions[rows], tau[rows], mode=mode, keys=keys[rows],
                                            return_proba=True)
        outputs, probas = [], []
        for i in range(start, stop):
            probas.append(b.proba_one(predictions[i], tau[i]))
            outputs.append(b.predict_one(predictions[i], tau[i], mode=mode, key=keys[i]))
            b.learn_one(predictions[i], tau[i], key=keys[i])
        _assert_same_outputs(fused, np.array(outputs, dtype=fused.dtype), f"predictions (mode={mode!r})")
        _assert_same_outputs(proba, np.array(probas), f"probabilities (mode={mode!r})")
    assert_same_state(a.state_dict(), b.state_dict())


def check_state_round_trip(make: Make) -> None:
    """``type(fair).from_state_dict(fair.state_dict())`` continues exactly as ``fair`` (labels included)."""
    fair = make()
    predictions, tau, keys = stream(fair)
    _learn_with_labels(fair, predictions, tau, keys)
    state = fair.state_dict()
    copy = type(fair).from_state_dict(state)
    assert_same_state(copy.state_dict(), state)
    for i, (x, y) in enumerate(zip(_continuation(fair, 1), _continuation(copy, 1), strict=True)):
        _assert_same_outputs(x, y, f"continuation output {i} after from_state_dict")
    assert_same_state(copy.state_dict(), fair.state_dict())


def check_pickle_round_trip(make: Make) -> None:
    """An unpickled copy continues exactly as the original (an epoch or window end included)."""
    fair = make()
    predictions, tau, keys = stream(fair)
    _learn_with_labels(fair, predictions, tau, keys)
    copy = pickle.loads(pickle.dumps(fair))
    assert type(copy) is type(fair), f"unpickled a {type(copy).__name__}"
    for i, (x, y) in enumerate(zip(_continuation(fair, 2), _continuation(copy, 2), strict=True)):
        _assert_same_outputs(x, y, f"continuation output {i} after pickling")
    more, more_tau, more_keys = stream(fair, 4 * N_SAMPLES, 3)  # past epoch / window ends: the re-bound hooks
    fair.learn_many(more, more_tau, keys=more_keys)
    copy.learn_many(more, more_tau, keys=more_keys)
    assert_same_state(copy.state_dict(), fair.state_dict())


def _assert_raises_naming(name: str, call: Callable[[], Any]) -> None:
    try:
        call()
    except ValueError as error:
        assert name in str(error), f"the ValueError does not name {name!r}: {error}"
    else:
        raise AssertionError(f"no ValueError for a bad {name}")


def check_invalid_inputs_raise(make: Make) -> None:
    """A bad ``tau``, prediction or ``keys`` raises ``ValueError`` naming it, and changes nothing.

    Text is bad: ``"0.1"`` is refused as a prediction or a ``tau`` entry, by one sample's methods as
    by the arrays', although ``float`` and numpy would read it as a number.
    """
    fair = make()
    predictions, tau, keys = stream(fair, 8)
    fair.learn_many(predictions[:4], tau[:4], keys=keys[:4])
    before = fair.state_dict()
    name = "proba" if fair.prediction_input == "proba" else "eta"
    bad_prediction = np.full_like(predictions[0], np.nan)
    bad_tau = np.full(fair.n_groups, 0.9)
    text_prediction, text_tau = predictions[4].astype(str).tolist(), tau[4].astype(str).tolist()
    for label, call in [
        ("tau", lambda: fair.learn_one(predictions[4], bad_tau)),
        ("tau", lambda: fair.learn_many(predictions, np.vstack([tau[:7], bad_tau]))),
        ("tau", lambda: fair.proba_learn_one(predictions[4], tau[4][:-1])),
        ("tau", lambda: fair.proba_learn_many(predictions, np.vstack([tau[:7], bad_tau]))),
        ("tau", lambda: fair.predict_learn_one(predictions[4], bad_tau, key="x")),
        ("tau", lambda: fair.predict_many(predictions, tau[:7])),
        ("tau", lambda: fair.predict_learn_many(predictions, np.vstack([tau[:7], bad_tau]))),
        (name, lambda: fair.learn_one(bad_prediction, tau[4])),
        (name, lambda: fair.learn_many(np.concatenate([predictions[:7], [bad_prediction]]), tau)),
        (name, lambda: fair.proba_learn_one(bad_prediction, tau[4])),
        (name, lambda: fair.proba_learn_many(np.concatenate([predictions[:7], [bad_prediction]]), tau)),
        (name, lambda: fair.predict_learn_one(bad_prediction, tau[4], key="x")),
        (name, lambda: fair.proba_one(bad_prediction, tau[4])),
        (name, lambda: fair.predict_learn_many(np.concatenate([predictions[:7], [bad_prediction]]), tau, keys=keys)),
        ("keys", lambda: fair.learn_many(predictions, tau, keys=keys[:7])),
        ("keys", lambda: fair.proba_learn_many(predictions, tau, keys=keys[:7])),
        ("keys", lambda: fair.predict_many(predictions, tau, keys=keys[:7])),
        ("keys", lambda: fair.predict_learn_many(predictions, tau, keys=keys[:7])),
        ("mode", lambda: fair.predict_one(predictions[4], tau[4], mode="median")),
        ("tau", lambda: fair.learn_one(predictions[4], text_tau)),
        ("tau", lambda: fair.proba_one(predictions[4], text_tau)),
        ("tau", lambda: fair.predict_one(predictions[4], text_tau, key="x")),
        ("tau", lambda: fair.predict_learn_one(predictions[4], text_tau, key="x")),
        ("tau", lambda: fair.learn_many(predictions, tau.astype(str))),
        ("tau", lambda: fair.predict_learn_many(predictions, tau.astype(str).tolist(), keys=keys)),
        (name, lambda: fair.learn_one(text_prediction, tau[4])),
        (name, lambda: fair.proba_learn_one(text_prediction, tau[4])),
        (name, lambda: fair.predict_one(text_prediction, tau[4], key="x")),
        (name, lambda: fair.learn_many(predictions.astype(str).tolist(), tau)),
        (name, lambda: fair.proba_many(predictions.astype(str), tau)),
    ]:
        _assert_raises_naming(label, call)
        assert_same_state(fair.state_dict(), before, f"state after a bad {label}")


def check_keyed_draws_replay(make: Make) -> None:
    """A keyed draw depends on the state and the key only: the same in every method, replayed, and in ``labels``."""
    fair = make()
    predictions, tau, keys = stream(fair)
    fair.learn_many(predictions, tau, keys=keys)
    first = [fair.predict_one(predictions[i], tau[i], key=keys[i]) for i in range(20)]
    draws = fair.state_dict()["draws"]
    again = [fair.predict_one(predictions[i], tau[i], key=keys[i]) for i in range(20)]
    many = fair.predict_many(predictions[:20], tau[:20], keys=keys[:20])
    _assert_same_outputs(np.array(first), np.array(again), "replayed keyed draws")
    _assert_same_outputs(np.array(first), many, "keyed draws of predict_one and predict_many")
    assert fair.state_dict()["draws"] == draws, "keyed draws moved the draw counter"
    assert all(np.any(fair.labels == value) for value in first), "a draw is not one of labels"
    fused = type(fair).from_state_dict(fair.state_dict()).predict_learn_one(predictions[0], tau[0], key=keys[0])
    _assert_same_outputs(fused, first[0], "keyed draws of predict_one and predict_learn_one")


def yield_checks(make: Make) -> Iterator[Callable[[], None]]:
    """Every check, bound to ``make`` (``functools.partial`` objects named by their ``func``)."""
    for check in (
        check_learn_many_is_a_loop_of_learn_one,
        check_proba_learn_one_is_fused,
        check_proba_learn_many_is_fused,
        check_predict_learn_one_is_fused,
        check_predict_learn_many_is_fused,
        check_state_round_trip,
        check_pickle_round_trip,
        check_invalid_inputs_raise,
        check_keyed_draws_replay,
    ):
        yield functools.partial(check, make)


def check_postprocessor(make: Make) -> None:
    """Run every check on the post-processors ``make`` returns (the first failure raises)."""
    for check in yield_checks(make):
        check()
