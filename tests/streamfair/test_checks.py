"""The post-processor contract (:mod:`streamfair.checks`) on every variant, and each check failing on a broken one."""

from __future__ import annotations

import numpy as np
import pytest

from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor, checks
from streamfair.dro import GroupRobustFairRegressionPostProcessor

VARIANTS = {
    "regression-anytime-cdf": lambda: FairRegressionPostProcessor(L=6, n_groups=2, memory=64, seed=1),
    "regression-anytime-atom": lambda: FairRegressionPostProcessor(L=6, eps=0.02, n_groups=3, memory=48, seed=2),
    "regression-anytime-known-p": lambda: FairRegressionPostProcessor(L=6, p=[0.3, 0.7], memory=32, seed=9),
    "regression-paper-atom": lambda: FairRegressionPostProcessor(L=6, profile="paper", horizon=40, n_groups=2, seed=3),
    "regression-paper-cdf": lambda: FairRegressionPostProcessor(L=6, ks=0.05, profile="paper", horizon=30,
                                                                p=[0.4, 0.6], serve="live", seed=4),
    "classification": lambda: FairClassificationPostProcessor(classes=["a", "b", "c"], n_groups=2, memory=64, seed=5),
    "classification-paper": lambda: FairClassificationPostProcessor(n_classes=2, profile="paper", horizon=50,
                                                                    n_groups=3, seed=6),
    "robust": lambda: GroupRobustFairRegressionPostProcessor(L=6, n_groups=2, memory=64, refresh=16, seed=7),
    "robust-exponentiated": lambda: GroupRobustFairRegressionPostProcessor(
        L=6, n_groups=2, p=[0.3, 0.7], updater="exponentiated", refresh=7, max_pending=20, seed=8),
}


@pytest.mark.parametrize("check", [c.func for c in checks.yield_checks(None)], ids=lambda c: c.__name__)
@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_keeps_the_contract(variant, check):
    check(VARIANTS[variant])


# ---------------------------------------------------------------- each check can fail
class LearnManyReversed(FairRegressionPostProcessor):
    def learn_many(self, predictions, tau, batch_size=None, keys=None):
        super().learn_many(np.asarray(predictions)[::-1], np.asarray(tau)[::-1], batch_size)


class ProbaAfterLearning(FairRegressionPostProcessor):
    def proba_learn_one(self, prediction, tau, key=None):
        self.learn_one(prediction, tau, key)
        return self.proba_one(prediction, tau)


class ProbaOfTheFirstState(FairRegressionPostProcessor):
    def proba_learn_many(self, predictions, tau, keys=None):
        proba = self.proba_many(predictions, tau)
        self.learn_many(predictions, tau, keys=keys)
        return proba


class DrawAfterLearning(FairRegressionPostProcessor):
    def predict_learn_one(self, prediction, tau, mode="sample", key=None):
        self.learn_one(prediction, tau, key)
        return self.predict_one(prediction, tau, mode, key)


class DrawsOfTheFirstState(FairRegressionPostProcessor):
    def predict_learn_many(self, predictions, tau, mode="sample", keys=None, return_proba=False):
        fair, proba = self.predict_many(predictions, tau, mode, keys), self.proba_many(predictions, tau)
        self.learn_many(predictions, tau, keys=keys)
        return (fair, proba) if return_proba else fair


class ForgetsTheClippedCount(FairRegressionPostProcessor):
    @classmethod
    def from_state_dict(cls, state):
        obj = super().from_state_dict(state)
        obj.n_clipped = 0
        return obj


class ForgetsTheDrawCounterWhenPickled(FairRegressionPostProcessor):
    def __setstate__(self, state):
        super().__setstate__(state)
        self._draws = 0


class AcceptsAnyTau(FairRegressionPostProcessor):
    def _check_tau(self, tau, n_rows):
        return np.asarray(tau, dtype=float)


class DrawsIgnoreTheKey(FairRegressionPostProcessor):
    def _uniform(self, key):
        return super()._uniform(None)

    def _uniforms(self, n, keys):
        return super()._uniforms(n, None)


BROKEN = [
    (LearnManyReversed, checks.check_learn_many_is_a_loop_of_learn_one),
    (ProbaAfterLearning, checks.check_proba_learn_one_is_fused),
    (ProbaOfTheFirstState, checks.check_proba_learn_many_is_fused),
    (DrawAfterLearning, checks.check_predict_learn_one_is_fused),
    (DrawsOfTheFirstState, checks.check_predict_learn_many_is_fused),
    (ForgetsTheClippedCount, checks.check_state_round_trip),
    (ForgetsTheDrawCounterWhenPickled, checks.check_pickle_round_trip),
    (AcceptsAnyTau, checks.check_invalid_inputs_raise),
    (DrawsIgnoreTheKey, checks.check_keyed_draws_replay),
]


def test_every_check_has_a_broken_variant():
    assert [check for _, check in BROKEN] == [c.func for c in checks.yield_checks(None)]


@pytest.mark.parametrize("broken,check", BROKEN, ids=[cls.__name__ for cls, _ in BROKEN])
def test_each_check_fails_on_a_broken_variant(broken, check):
    def make():
        return broken(L=6, n_groups=2, memory=64, seed=1)

    with pytest.raises(AssertionError):
        check(make)
    with pytest.raises(AssertionError):
        checks.check_postprocessor(make)
