"""Every invalid argument raises ``ValueError`` naming the argument and the offending value.

A rejected call must also leave the post-processor untouched (no half-learned sample).
"""

from __future__ import annotations

import functools
import math
import pickle

import numpy as np
import pytest

from streamfair import FairRegressionPostProcessor, evaluate, evaluate_deterministic, validation
from streamfair.evaluation import to_grid
from tests.support.errors import check_error

NAN, INF = math.nan, math.inf


def fitted(**kwargs):
    config = dict(L=3, beta=5.0, eps=0.01, p=[0.4, 0.6], horizon=20)
    config.update(kwargs)
    f = FairRegressionPostProcessor(**{"profile": "paper", **config})
    rng = np.random.default_rng(0)
    f.learn_many(rng.uniform(-1, 1, 7), rng.dirichlet([1, 1], 7))
    return f


# ---------------------------------------------------------------- constructor
@pytest.mark.parametrize(
    "kwargs,fragments",
    [
        (dict(eps=-0.1), ("eps", "-0.1")),
        (dict(eps=[0.1, -0.01]), ("eps", "-0.01")),
        (dict(eps=[0.1, 0.1, 0.1]), ("eps", "p")),  # 3 slacks for 2 groups
        (dict(eps=NAN), ("eps", "nan")),
        (dict(eps=INF), ("eps", "inf")),
        (dict(eps=None, ks=5), ("ks", "<= 1", "5")),  # a KS distance is at most 1: 5 points is 0.05
        (dict(eps=None, ks=[0.05, 1.01]), ("ks", "<= 1", "1.01")),
        (dict(eps=None, ks=-0.01), ("ks", "-0.01")),
        (dict(p=[0.5, 0.6]), ("p", "[0.5, 0.6]", "sum")),
        (dict(p=[1.2, -0.2]), ("p", "[1.2, -0.2]")),
        (dict(p=[1.0, 0.0]), ("p", "[1.0, 0.0]")),  # a group with p_s = 0 makes t = 1 - tau/p undefined
        (dict(p=[NAN, 0.5]), ("p", "nan")),
        (dict(p=[[0.5, 0.5]]), ("p", "one share per group", "[[0.5, 0.5]]")),
        (dict(p=0.5), ("p", "one share per group", "0.5")),
        (dict(eps=None, ks=[[0.05], [0.05, 0.05]]), ("ks", "[[0.05], [0.05, 0.05]]")),  # ragged: numpy's error
        (dict(p=[1.0]), ("p", "1")),  # one group
        (dict(p=None, n_groups=1), ("n_groups", "1")),
        (dict(p=None, n_groups=None), ("p", "n_groups")),  # K unknown
        (dict(p=[0.5, 0.5], n_groups=3), ("n_groups", "3", "p")),
        (dict(L=0), ("L", "0")),
        (dict(L=-3), ("L", "-3")),
        (dict(L=2.5), ("L", "2.5")),
        (dict(B=0.0), ("B", "0.0")),
        (dict(B=-1.0), ("B", "-1.0")),
        (dict(B=INF), ("B", "inf")),
        (dict(B=(1.0, 0.0)), ("B", "(1.0, 0.0)")),  # a range needs low < high
        (dict(B=[0.0, NAN]), ("B", "nan")),
        (dict(B=[0.0, 1.0, 2.0]), ("B", "[0.0, 1.0, 2.0]")),
        (dict(B=True), ("B", "True")),
        (dict(eps=None, ks=[True, 0.05]), ("ks", "[True, 0.05]")),  # read as [1.0, 0.05]: no constraint on group 0
        (dict(B="1"), ("B", "'1'")),
        (dict(eps="0.05"), ("eps", "'0.05'")),  # numbers as text, refused as B's is
        (dict(eps=None, ks=["0.05", "0.05"]), ("ks", "['0.05', '0.05']")),
        (dict(p=["0.4", "0.6"]), ("p", "['0.4', '0.6']")),
        (dict(beta=0.0), ("beta", "0.0")),
        (dict(beta=NAN), ("beta", "nan")),
        (dict(beta=1e308), ("beta", "1e+308", "overflows")),  # the SGD step 1 / (2 beta sigma^2) would be 0
        (dict(mu=-1.0), ("mu", "-1.0")),
        (dict(optimizer="adam"), ("optimizer", "'adam'")),
        (dict(optimizer="SGD3"), ("optimizer", "'SGD3'")),
        (dict(inner="sgd"), ("inner", "'sgd'")),
        (dict(optimizer="acsa2", inner="acsa"), ("inner", "'acsa'", "sgd3")),  # only SGD3 has an inner solver
        (dict(horizon=0), ("horizon", "0")),
        (dict(horizon=10.0), ("horizon", "10.0")),
        (dict(seed=-1), ("seed", "-1")),
        (dict(seed=1.5), ("seed", "1.5")),
        (dict(window=0), ("window", "0")),
    ],
)
def test_constructor_rejects(kwargs, fragments):
    config = dict(L=3, beta=5.0, eps=0.01, p=[0.4, 0.6], horizon=20)
    config.update(kwargs)
    check_error(lambda: FairRegressionPostProcessor(**{"profile": "paper", **config}), *fragments)


@pytest.mark.parametrize(
    "optimizer,inner,smallest", [("sgd3", "acsa2", 2 * 4), ("sgd3", "acsa", 4), ("acsa2", None, 2)]
)
def test_horizon_too_small_for_the_schedule(optimizer, inner, smallest):
    # beta = 4: M / mu = beta^2 = 16, so SGD3 has J = 4 stages (of two AC-SA halves for acsa2)
    config = dict(L=3, beta=4.0, eps=0.01, p=[0.5, 0.5], optimizer=optimizer, inner=inner)
    FairRegressionPostProcessor(profile="paper", horizon=smallest, **config)
    check_error(
        lambda: FairRegressionPostProcessor(profile="paper", horizon=smallest - 1, **config),
        "horizon",
        str(smallest - 1),
    )


def test_ks_bounds_a_distance_and_eps_keeps_the_papers_range():
    """ks = 1 (no constraint) is the largest KS target; the paper's per-atom eps may exceed 1."""
    assert FairRegressionPostProcessor(ks=1.0, n_groups=2).ks.tolist() == [1.0, 1.0]
    assert FairRegressionPostProcessor(eps=1.5, n_groups=2).eps.tolist() == [1.5, 1.5]


def test_per_group_eps_gives_the_number_of_groups():
    f = FairRegressionPostProcessor(profile="paper", L=2, beta=3.0, eps=[0.01, 0.02, 0.03], horizon=10)
    assert f.n_groups == 3 and np.array_equal(f.eps, [0.01, 0.02, 0.03])


# ---------------------------------------------------------------- learning and prediction inputs
BAD_ONE = [
    (lambda f: f.learn_one(NAN, [0.5, 0.5]), ("eta", "nan")),
    (lambda f: f.learn_one(INF, [0.5, 0.5]), ("eta", "inf")),
    (lambda f: f.learn_one(-INF, [0.5, 0.5]), ("eta", "-inf")),
    (lambda f: f.learn_one([0.1, 0.2], [0.5, 0.5]), ("eta", "(1, 2)")),
    (lambda f: f.learn_one("abc", [0.5, 0.5]), ("eta", "abc")),
    (lambda f: f.learn_one(0.1, [0.5, 0.3, 0.2]), ("tau", "[0.5, 0.3, 0.2]")),
    (lambda f: f.learn_one(0.1, [1.0]), ("tau", "[1.0]")),
    (lambda f: f.learn_one(0.1, [1.2, -0.2]), ("tau", "[1.2, -0.2]")),
    (lambda f: f.learn_one(0.1, [0.5, 0.6]), ("tau", "[0.5, 0.6]")),
    (lambda f: f.learn_one(0.1, [0.5, 0.49]), ("tau", "[0.5, 0.49]")),
    (lambda f: f.learn_one(0.1, [NAN, 0.5]), ("tau", "nan")),
    (lambda f: f.learn_one(0.1, [INF, 0.5]), ("tau", "inf")),
    (lambda f: f.proba_one(NAN, [0.5, 0.5]), ("eta", "nan")),
    (lambda f: f.proba_one(0.1, [0.5, 0.6]), ("tau", "[0.5, 0.6]")),
    (lambda f: f.predict_one(0.1, [0.5, 0.5], mode="median"), ("mode", "'median'")),
    (lambda f: f.predict_one(INF, [0.5, 0.5]), ("eta", "inf")),
    (lambda f: f.learn_one("0.1", [0.5, 0.5]), ("eta", "'0.1'")),  # numbers as text: float() would read them
    (lambda f: f.learn_one(b"0.1", [0.5, 0.5]), ("eta", "b'0.1'")),
    (lambda f: f.learn_one(0.1, ["0.5", "0.5"]), ("tau", "['0.5', '0.5']")),
    (lambda f: f.learn_one(0.1, [0.5, b"0.5"]), ("tau", "[0.5, b'0.5']")),
    (lambda f: f.learn_one(0.1, np.array(["0.5", "0.5"])), ("tau", "'0.5'")),
    (lambda f: f.proba_one(0.1, ("0.5", 0.5)), ("tau", "('0.5', 0.5)")),
    (lambda f: f.predict_one("0.1", [0.5, 0.5], key="m"), ("eta", "'0.1'")),
    (lambda f: f.predict_learn_one(0.1, ["0.5", "0.5"], key="m"), ("tau", "['0.5', '0.5']")),
]

BAD_MANY = [
    (lambda f: f.learn_many(np.zeros((3, 1)), np.full((3, 2), 0.5)), ("eta", "(3, 1)")),
    (lambda f: f.learn_many(np.zeros(3), np.full((4, 2), 0.5)), ("tau", "(4, 2)")),
    (lambda f: f.learn_many(np.zeros(3), np.full((3, 3), 1 / 3)), ("tau", "(3, 3)")),
    (lambda f: f.learn_many(np.zeros(3), np.full(6, 0.5)), ("tau", "(6,)")),
    (lambda f: f.learn_many([0.0, NAN, 0.0], np.full((3, 2), 0.5)), ("eta", "entry 1", "nan")),
    (lambda f: f.learn_many([0.0, 0.0, 0.0], [[0.5, 0.5], [0.7, 0.7], [0.5, 0.5]]), ("tau", "row 1", "[0.7, 0.7]")),
    (lambda f: f.learn_many([0.0, 0.0], [[0.5, 0.5], [1.5, -0.5]]), ("tau", "row 1", "[1.5, -0.5]")),
    (lambda f: f.learn_many([0.0, 0.0], [[NAN, 0.5], [0.5, 0.5]]), ("tau", "row 0", "nan")),
    (lambda f: f.learn_many([0.0, 0.0], np.full((2, 2), 0.5), batch_size=0), ("batch_size", "0")),
    (lambda f: f.learn_many([0.0, 0.0], np.full((2, 2), 0.5), batch_size=2.0), ("batch_size", "2.0")),
    (lambda f: f.proba_many([0.0, 0.0], np.full((3, 2), 0.5)), ("tau", "(3, 2)")),
    (lambda f: f.predict_many([0.0, 0.0], np.full((2, 2), 0.5), mode="avg"), ("mode", "'avg'")),
    (lambda f: f.predict_many([0.0, 0.0], np.full((2, 2), 0.5), keys=["a"]), ("keys", "1")),
    (lambda f: f.learn_many(["0.1", "0.2"], np.full((2, 2), 0.5)), ("eta", "['0.1', '0.2']")),  # numpy reads text
    (lambda f: f.learn_many(np.array([b"0.1"]), [[0.5, 0.5]]), ("eta", "b'0.1'")),
    (lambda f: f.learn_many([0.0, 0.0], [[0.5, 0.5], ["0.5", "0.5"]]), ("tau", "'0.5'")),
    (lambda f: f.learn_many([0.0], np.array([[0.5, "0.5"]], dtype=object)), ("tau", "'0.5'")),
    (lambda f: f.predict_learn_many([0.0], [[b"0.5", b"0.5"]]), ("tau", "b'0.5'")),
]


@pytest.mark.parametrize("call,fragments", BAD_ONE + BAD_MANY)
def test_rejected_call_names_the_argument_and_leaves_the_state_untouched(call, fragments):
    f = fitted()
    before = pickle.dumps(f.state_dict())
    check_error(lambda: call(f), *fragments)
    assert pickle.dumps(f.state_dict()) == before


#: One sample's eta and tau as a caller may hold them, and what refuses them (``None``: numbers, taken): text,
#: whatever number it spells.
SAMPLE_FORMS = [
    (0.25, [0.5, 0.5], None),
    (np.float64(0.25), (np.float32(0.5), np.float32(0.5)), None),
    (np.int64(1), np.array([1, 0]), None),
    (np.float32(0.25), [0.5, 0.5], None),
    (np.float32("inf"), [0.5, 0.5], ("eta", "inf")),  # compared as float32, it passed as finite
    (10**400, [0.5, 0.5], ("eta", "1000")),
    (None, [0.5, 0.5], ("eta", "None")),  # named as the NaN it became
    (1, [np.float64(0.25), 0.75], None),
    (0.25, np.array([0.5, 0.5]), None),
    ("0.25", [0.5, 0.5], ("eta", "'0.25'")),
    (b"0.25", [0.5, 0.5], ("eta", "b'0.25'")),
    (np.str_("0.25"), [0.5, 0.5], ("eta", "'0.25'")),
    (0.25, ["0.5", "0.5"], ("tau", "'0.5'")),
    (0.25, (b"0.5", 0.5), ("tau", "b'0.5'")),
    (0.25, np.array(["0.5", "0.5"]), ("tau", "'0.5'")),
    (0.25, np.array([0.5, "0.5"], dtype=object), ("tau", "'0.5'")),
]

#: Each method of one sample, and its form for arrays called with that one sample.
ONE_AND_MANY = {
    "learn": (lambda f, e, t: f.learn_one(e, t), lambda f, e, t: f.learn_many([e], [t])),
    "proba": (lambda f, e, t: f.proba_one(e, t), lambda f, e, t: f.proba_many([e], [t])[0]),
    "predict": (lambda f, e, t: f.predict_one(e, t, key="m"), lambda f, e, t: f.predict_many([e], [t], keys=["m"])[0]),
    "predict_learn": (lambda f, e, t: f.predict_learn_one(e, t, key="m"),
                      lambda f, e, t: f.predict_learn_many([e], [t], keys=["m"])[0]),
}


@pytest.mark.filterwarnings("error")
@pytest.mark.parametrize("profile", ["anytime", "paper"])
@pytest.mark.parametrize("method", sorted(ONE_AND_MANY))
@pytest.mark.parametrize("eta,tau,refused", SAMPLE_FORMS)
def test_one_sample_and_arrays_take_and_refuse_the_same_inputs(profile, method, eta, tau, refused):
    """A method of one sample takes what its form for arrays takes, with the result the floats give, and refuses
    what it refuses, naming the argument and the value (``anytime``: one sample is one compiled call), with
    no warning (a float32 compared with the largest float overflowed)."""
    one, many = ONE_AND_MANY[method]

    def make():
        return fitted(**({"profile": "anytime", "horizon": None, "memory": 16} if profile == "anytime" else {}))

    if refused is None:
        results = []
        for call, inputs in ((one, (eta, tau)), (many, (eta, tau)), (one, (float(eta), [float(t) for t in tau]))):
            fair = make()
            results.append((call(fair, *inputs), pickle.dumps(fair.state_dict())))
        assert all(np.array_equal(result, results[0][0]) and state == results[0][1] for result, state in results)
        return
    for call in (one, many):
        fair = make()
        before = pickle.dumps(fair.state_dict())
        check_error(functools.partial(call, fair, eta, tau), *refused)
        assert pickle.dumps(fair.state_dict()) == before


@pytest.mark.parametrize("bad,fragments", [("eta", ("eta", "entry 7", "nan")), ("tau", ("tau", "row 7", "[0.9, 0.9]"))])
def test_long_arrays_are_checked_piece_by_piece_and_a_bad_row_is_named_by_its_index_in_the_whole(
        monkeypatch, bad, fragments):
    """The array checks look at ``CHECK_ROWS`` rows at a time (bounded temporaries); a bad row in a later
    piece still fails the call before anything is learned, named by its index in the whole array."""
    monkeypatch.setattr(validation, "CHECK_ROWS", 3)
    eta, tau = np.zeros(9), np.full((9, 2), 0.5)
    if bad == "eta":
        eta[7] = NAN
    else:
        tau[7] = [0.9, 0.9]
    f = fitted()
    before = pickle.dumps(f.state_dict())
    check_error(lambda: f.learn_many(eta, tau), *fragments)
    assert pickle.dumps(f.state_dict()) == before
    eta[7], tau[7] = 0.0, [0.5, 0.5]
    f.learn_many(eta, tau)  # the same arrays, repaired: accepted
    assert f.n_samples == 7 + 9


def test_tau_sum_tolerance_is_documented_and_applied():
    f = fitted()
    f.learn_one(0.0, [0.5, 0.5 + 5e-7])  # within 1e-6: accepted
    check_error(lambda: f.learn_one(0.0, [0.5, 0.5 + 5e-6]), "tau")


def test_out_of_range_eta_is_not_an_error_but_clipped():
    f = fitted()
    f.learn_one(7.5, [0.5, 0.5])
    assert f.n_clipped == 1


def test_bad_state_dict_is_rejected():
    state = fitted().state_dict()
    check_error(lambda: FairRegressionPostProcessor.from_state_dict({**state, "version": 99}), "version", "99")
    check_error(lambda: FairRegressionPostProcessor.from_state_dict({**state, "class": "Other"}), "Other")
    # arrays the compiled calls read without bounds checks: their shapes are checked
    check_error(lambda: FairRegressionPostProcessor.from_state_dict({**state, "tau_sum": [0.5] * 3}), "tau_sum", "(3,)")
    anytime = FairRegressionPostProcessor(L=3, p=[0.4, 0.6])
    anytime.learn_many([0.1, 0.2], [[0.5, 0.5], [0.3, 0.7]])
    state = anytime.state_dict()
    only_one_mean = {k: v for k, v in state.items() if k != "tau_reference"}
    check_error(lambda: FairRegressionPostProcessor.from_state_dict(only_one_mean), "tau_mean and tau_reference")
    three_groups = {**state, "tau_mean": [0.3] * 3, "tau_reference": [0.3] * 3}
    check_error(lambda: FairRegressionPostProcessor.from_state_dict(three_groups), "tau_reference", "(2, 3)")
    rows = anytime.window + 1
    longer = {**state, "recent_predictions": np.zeros(rows)}
    check_error(lambda: FairRegressionPostProcessor.from_state_dict(longer), "recent_predictions", f"({rows},)")
    one_row = {**state, "recent_tau": np.zeros(2)}
    check_error(lambda: FairRegressionPostProcessor.from_state_dict(one_row), "recent_tau", "(2,)")


def test_bad_group_robust_state_is_rejected():
    """The group-robust parts' arrays, whose wrong length was accepted (a shorter ``q`` or group sums) or failed
    later inside numpy, are refused on restoring, naming the entry."""
    from streamfair.dro import GroupRobustFairRegressionPostProcessor as Robust
    from streamfair.dro.online_group import ExponentiatedGroupWeights

    robust = Robust(L=3, n_groups=2, refresh=4)
    robust.learn_many([0.1, 0.2, 0.3, 0.4, 0.5], [[0.5, 0.5], [0.3, 0.7], [0.6, 0.4], [0.5, 0.5], [0.2, 0.8]],
                      keys=list("abcde"))  # a block of four folded in, one sample in the next block
    state = robust.state_dict()
    dro = state["dro"]
    assert len(dro["block"][0]) == 1 and len(dro["pending"]["keys"]) == 4

    def refused(*fragments, **changes):
        check_error(lambda: Robust.from_state_dict({**state, "dro": {**dro, **changes}}), *fragments)

    refused("dro q", "(1,)", q=[1.0])
    eta, tau, keys = dro["block"]
    refused("fewer than refresh=4", "4", block=[np.zeros(4), np.full((4, 2), 0.5), []])
    refused("dro block tau", "(1, 3)", block=[eta, np.full((1, 3), 0.5), keys])
    refused("dro block rows", "1", block=[eta, tau, [("e", 1)]])  # the block holds one row: row 0
    refused("dro block", "3 entries", block=[eta, tau])
    refused("dro block key", "2 entries", block=[eta, tau, [("e", 0, 1)]])
    refused("dro counters", "2 or 3 entries", counters=[0, 0, 0, 0])
    refused("dro counters", "integer >= 0", counters=[0, "x"])
    pending = dro["pending"]
    refused("pending loss", "(4,)", "(3,)", pending={**pending, "loss": pending["loss"][:3]})
    stats = dro["updater"]["stats"]
    refused("sums", "(2,)", "(1,)", updater={**dro["updater"], "stats": {**stats, "sums": [0.0]}})
    weights = ExponentiatedGroupWeights(2, step=0.1).state_dict()
    check_error(lambda: ExponentiatedGroupWeights.from_state_dict({**weights, "theta": [0.0] * 3}), "theta", "(3,)")


def shared_arrays(value, seen: set[int]):
    """The numpy arrays in ``value``: nested in dicts, lists and tuples, and in the attributes of streamfair objects."""
    if id(value) in seen:
        return
    seen.add(id(value))
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from shared_arrays(item, seen)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from shared_arrays(item, seen)
    elif type(value).__module__.startswith("streamfair"):
        yield from shared_arrays(getattr(value, "__dict__", {}), seen)


def as_arrays(state):
    """``state`` with each list of numbers as a numpy array, as a checkpoint's decoder may give it."""
    if isinstance(state, dict):
        return {key: as_arrays(value) for key, value in state.items()}
    if isinstance(state, list) and state and all(isinstance(item, (int, float)) for item in state):
        return np.array(state)
    return [as_arrays(item) for item in state] if isinstance(state, list) else state


# ---------------------------------------------------------------- evaluation inputs
def test_evaluation_rejects_bad_inputs():
    proba, atoms, y, groups = np.full((4, 3), 1 / 3), [0.0, 0.5, 1.0], [0.0, 1.0, 0.5, 0.5], [0, 1, 0, 1]
    check_error(lambda: evaluate(np.full((4, 2), 0.5), atoms, y, groups), "proba", "(4, 2)")
    check_error(lambda: evaluate(np.full((4, 3), 2 / 3), atoms, y, groups), "proba", "row 0", "sum")
    check_error(lambda: evaluate(np.r_[proba[:3], [[NAN, 0.5, 0.5]]], atoms, y, groups), "proba", "row 3", "nan")
    check_error(lambda: evaluate(proba, atoms, [0.0, 1.0], groups), "y", "(2,)")
    check_error(lambda: evaluate(proba, atoms, [0.0, NAN, 0.5, 0.5], groups), "y", "nan")
    check_error(lambda: evaluate(proba, [0.0, INF, 1.0], y, groups), "atoms", "inf")
    check_error(lambda: evaluate(proba, atoms, y, [0, 1, 0]), "groups", "4")
    check_error(lambda: evaluate(proba, atoms, y, [0, 1, 0, -1]), "groups")
    check_error(lambda: evaluate(proba, atoms, y, [0, 2, 0, 2]), "group", "0.0, 2.0]")  # group 1 is empty
    check_error(lambda: evaluate(proba, atoms, y, np.full((4, 2), -0.5)), "groups")
    check_error(lambda: evaluate(proba, atoms, y, np.full((3, 2), 0.5)), "groups", "(4, K)", "(3, 2)")
    check_error(lambda: evaluate(proba, atoms, y, [0, 3, 0, 1], n_groups=3), "n_groups=3", "3")
    check_error(lambda: evaluate_deterministic([0.0, 1.0], [0.0], [0, 1]), "y", "(1,)")
    check_error(lambda: evaluate_deterministic([0.0, NAN], [0.0, 1.0], [0, 1]), "predictions", "nan")
    # two atoms at 0: every prediction is 0, and the report read a KS distance of 1/2
    check_error(lambda: evaluate(proba, [0.0, 0.0, 1.0], y, groups), "atoms", "distinct", "0.0 twice")
    check_error(lambda: evaluate(proba, atoms, y, groups, n_groups=2.5), "n_groups", "2.5")
    check_error(lambda: evaluate(proba, atoms, y, groups, n_groups=True), "n_groups", "True")
    check_error(lambda: evaluate(proba, atoms, y, [[0], [1], [0], [1, 0]]), "groups", "[[0], [1], [0], [1, 0]]")
    check_error(lambda: evaluate(proba, atoms, y, [0.0, 1.0, 0.0, 1.0]), "groups", "[0.0, 1.0, 0.0, 1.0]")
    check_error(lambda: to_grid([0.5], []), "atoms", "none")


def restorable_objects() -> list:
    """One object of every class with a ``from_state_dict``, each having learned something."""
    from streamfair import FairClassificationPostProcessor
    from streamfair.complex_metrics import RandomizedClassifier
    from streamfair.dro import GroupRobustFairRegressionPostProcessor
    from streamfair.dro.group_losses import GroupLosses
    from streamfair.dro.online_divergence import CVaRTracker
    from streamfair.dro.online_group import ExponentiatedGroupWeights, SoftmaxGroupWeights

    regression, robust = fitted(), GroupRobustFairRegressionPostProcessor(L=5, n_groups=2, refresh=1)
    robust.learn_one(0.3, [0.4, 0.6], key="a")
    classification = FairClassificationPostProcessor(n_classes=2, n_groups=2)
    classification.learn_one([0.3, 0.7], [0.4, 0.6])
    softmax, exponentiated = SoftmaxGroupWeights(2, temperature=0.5), ExponentiatedGroupWeights(2, step=0.1)
    softmax.update(1.0, [0.3, 0.7])
    exponentiated.update(1.0, [0.3, 0.7])
    losses, cvar = GroupLosses(2), CVaRTracker(alpha=0.2)
    losses.update(1.0, [0.3, 0.7])
    cvar.update(0.5)
    mixture = RandomizedClassifier([0.25, 0.75], [np.eye(2), 1 - np.eye(2)], seed=3)
    return [regression, robust, classification, softmax, exponentiated, losses, cvar, mixture]


RESTORABLE = restorable_objects()


@pytest.mark.parametrize("obj", RESTORABLE, ids=lambda obj: type(obj).__name__)
def test_an_incomplete_or_garbled_state_is_a_value_error_naming_the_class(obj):
    """Each entry of a state removed, or replaced by a number, either still restores or is a ``ValueError`` that names
    the class, the class of the part whose state the entry was, or the entry (refused by the constructor's checks):
    never a bare ``KeyError`` or ``TypeError`` from inside."""
    names = {type(part).__name__ for part in RESTORABLE}
    cls, state = type(obj), obj.state_dict()
    assert type(cls.from_state_dict(state)) is cls
    refused = 0
    for key in state:
        for changed in ({k: v for k, v in state.items() if k != key}, {**state, key: 7}):
            try:
                cls.from_state_dict(changed)
            except ValueError as error:
                assert any(name in str(error) for name in (cls.__name__, key, *names)), (key, str(error))
                refused += 1
    assert refused >= len(state)  # at least one of the two changes of each entry
    check_error(lambda: cls.from_state_dict([state]), f"dict made by {cls.__name__}.state_dict()", "list")


@pytest.mark.parametrize("obj", RESTORABLE, ids=lambda obj: type(obj).__name__)
def test_a_restored_object_shares_no_array_with_its_state(obj):
    """Restoring copies: an object learning after ``from_state_dict(state)`` must not write into ``state`` (the
    window of predictions was shared, so two objects restored from one state counted each other's samples)."""
    for state in (obj.state_dict(), as_arrays(obj.state_dict())):
        restored = type(obj).from_state_dict(state)
        assert pickle.dumps(restored.state_dict()) == pickle.dumps(obj.state_dict())
        ours = list(shared_arrays(restored, set()))
        assert ours or not list(shared_arrays(state, set()))  # the walk finds the object's arrays
        assert not [a.shape for a in ours for b in shared_arrays(state, set()) if np.shares_memory(a, b)]
