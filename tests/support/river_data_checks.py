"""What both River adapters' tests share: River's data-driven estimator checks (re-run on a stream
carrying S) and the documented way to scale in front of an adapter while S is in ``x``."""

from __future__ import annotations

import pytest
from river import compose, preprocessing
from river.checks import common


def only_group(x: dict) -> dict:
    """``{"group": S}`` when S is in ``x``, else ``{}`` (docs/river.md, "Scalers must leave S alone")."""
    return {"group": x["group"]} if "group" in x else {}


def scaler_that_skips_the_group():
    """The docs' recipe: scale every feature but S, pass S through when it is there."""
    return (compose.Discard("group") | preprocessing.StandardScaler()) + compose.FuncTransformer(only_group)


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

#: River's check datasets hold no S (tau stays the prior) and targets outside the default B: the wrappers say
#: that nothing is corrected, rightly, and these checks are about River's contract, not about correction.
NOTHING_TO_CORRECT = pytest.mark.filterwarnings("ignore:tau\\(x\\) = .* corrects nothing", "ignore:.* clipped to it")
