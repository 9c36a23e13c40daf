"""The table of samples waiting for their label, against the dictionary it replaces, and old checkpoints."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from connectors.kafka.checkpoint import Checkpoint, restore_postprocessor
from streamfair.checks import assert_same_state
from streamfair.dro.group_losses import Receipts
from streamfair.dro.pending import PendingLabels, rows_to_columns

#: Checkpoints written when the pending samples were saved as JSON rows, and what the code of that
#: time made of them after the continuation below (``_continue``), for both updaters.
ROWS_CHECKPOINTS = Path(__file__).parents[2] / "data" / "robust_checkpoint_rows.json"


def _receipts(rng, n, k, scaled):
    return Receipts(rng.integers(0, 10**6, n), rng.dirichlet(np.ones(k), n), rng.random(n),
                    rng.random((n, k)) if scaled else np.zeros((n, k)))


@pytest.mark.parametrize("capacity", [0, 3, 50])
def test_the_table_keeps_what_a_dictionary_trimmed_from_its_front_keeps(capacity):
    """Random adds (keys seen before among them), pops and restores, against the dictionary it replaces."""
    rng = np.random.default_rng(capacity)
    table, reference, dropped = PendingLabels(3, capacity), {}, 0
    for step in range(300):
        if rng.random() < 0.3:
            key = f"k{rng.integers(0, 400)}"
            got, want = table.pop(key), reference.pop(key, None)
            assert (got is None) == (want is None)
            if got is not None:
                receipt, first, second = got
                assert (receipt.index, receipt.loss, first, second) == want[:4]
                assert receipt.tau.tolist() == want[4] and receipt.scale.tolist() == want[5]
            continue
        n = int(rng.integers(0, 12))
        keys = list(dict.fromkeys(f"k{i}" for i in rng.integers(0, 400, n)))
        receipts = _receipts(rng, len(keys), 3, scaled=step % 2 == 0)
        first, second = rng.random(len(keys)), rng.random(len(keys))
        dropped_now = table.add(keys, receipts, first, second)
        for i, key in enumerate(keys):
            reference[key] = (int(receipts.index[i]), float(receipts.loss[i]), float(first[i]), float(second[i]),
                              receipts.tau[i].tolist(), receipts.scale[i].tolist())
        expected = max(0, len(reference) - capacity)
        for key in list(reference)[:expected]:
            del reference[key]
        assert dropped_now == expected
        dropped += dropped_now
        if step % 50 == 0:  # a restored copy continues alike
            restored = PendingLabels(3, capacity)
            restored.load_state_dict(table.state_dict())
            assert_same_state(restored.state_dict(), table.state_dict())
            table = restored
        assert len(table) == len(reference) and list(table.state_dict()["keys"]) == list(reference)
    assert dropped > 0 or capacity == 50
    state = table.state_dict()
    for position, column in enumerate(("index", "loss", "first", "second", "tau")):
        assert state[column].tolist() == [reference[key][position] for key in reference]


def test_memory_stays_bounded_by_the_capacity():
    rng, table = np.random.default_rng(0), PendingLabels(2, 100)
    for start in range(0, 100_000, 100):
        keys = [f"k{i}" for i in range(start, start + 100)]
        table.add(keys, _receipts(rng, 100, 2, False), rng.random(100), rng.random(100))
    assert len(table) == 100 and table._columns["index"].shape[0] <= 2 * (100 + 100)


def test_scales_are_stored_only_when_used():
    rng = np.random.default_rng(1)
    table = PendingLabels(2, 10)
    table.add(["a"], _receipts(rng, 1, 2, False), np.zeros(1), np.zeros(1))
    assert "scale" not in table.state_dict()
    table.add(["b"], _receipts(rng, 1, 2, True), np.zeros(1), np.zeros(1))
    scale = table.state_dict()["scale"]
    assert scale[0].tolist() == [0.0, 0.0] and scale[1].all()


def test_rows_of_an_older_state_load_as_columns():
    rows = [["a", [3, [0.25, 0.75], 0.5, [0.0, 0.1]], 0.2, 0.3], [7, [4, [1.0, 0.0], 0.25, [0.0, 0.0]], -0.1, 0.9]]
    table = PendingLabels(2, 10)
    table.load_state_dict(rows_to_columns(rows))
    receipt, first, second = table.pop(7)
    assert (receipt.index, receipt.tau.tolist(), receipt.loss, receipt.scale.tolist(), first, second) == (
        4, [1.0, 0.0], 0.25, [0.0, 0.0], -0.1, 0.9)
    assert table.state_dict()["keys"] == ["a"] and table.state_dict()["scale"].tolist() == [[0.0, 0.1]]


def _continue(model) -> dict:
    """What the fixture recorded: 20 more keyed samples, seven labels (some expired or unknown), five served laws."""
    def stream(seed, n):
        rng = np.random.default_rng(seed)
        return rng.uniform(-1, 1, n), rng.dirichlet(np.ones(3), n)

    eta, tau = stream(2, 20)
    model.learn_many(eta, tau, keys=[f"k{i}" for i in range(100, 120)])
    known = [model.learn_label(key, 0.25) for key in ("k95", "k85", "k110", "k90", "k119", "k3", "nope")]
    eta, tau = stream(3, 5)
    d = model.dro_diagnostics()
    return {"known": known, "weights": d.weights.tolist(), "group_risks": np.asarray(d.group_risks).tolist(),
            "n_pending": d.n_pending, "n_expired": d.n_expired, "n_labels": d.n_labels,
            "proba": model.proba_many(eta, tau).tolist()}


@pytest.mark.parametrize("updater", ["softmax", "exponentiated"])
def test_a_checkpoint_with_pending_rows_restores_and_continues_exactly(updater):
    recorded = json.loads(ROWS_CHECKPOINTS.read_text())[updater]
    old = Checkpoint.from_bytes(recorded["checkpoint"].encode())
    assert isinstance(old.state["dro"]["pending"], list)  # the format this test is about
    model = restore_postprocessor(old.state)
    assert model.updater == updater
    rewritten = Checkpoint("in", 0, 100, None, model.state_dict()).to_bytes()
    again = restore_postprocessor(Checkpoint.from_bytes(rewritten).state)
    assert_same_state(again.state_dict(), model.state_dict())  # rewritten as columns, nothing lost
    assert _continue(model) == recorded["after"]
    assert _continue(again) == recorded["after"]
