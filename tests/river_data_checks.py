"""River's data-driven estimator checks that both River adapters re-run on a stream carrying S."""

from __future__ import annotations

from river.checks import common

#: the checks of ``river.checks`` that take a ``dataset`` and apply to every estimator
COMMON_DATA_CHECKS = [
    common.check_learn_one,
    common.check_pickling,
    common.check_shuffle_features_no_impact,
    common.check_emerging_features,
    common.check_disappearing_features,
    common.check_radically_disappearing_features,
    common.check_predict_one_pure,
    common.check_no_state_aliasing_with_input,
    common.check_clone_is_independent,
    common.check_seeding_is_idempotent,
]
