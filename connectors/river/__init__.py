"""River pipeline components: fair regressors and classifiers, and surrogate-trained models.

>>> from connectors.river import FairRegressor, friedman_with_group
>>> FairRegressor.__module__
'connectors.river.regressor'
"""

from connectors.river.classifier import FairClassifier
from connectors.river.regressor import FairRegressor
from connectors.river.streams import friedman_with_group, logistic_with_group

__all__ = ["FairClassifier", "FairRegressor", "friedman_with_group", "logistic_with_group"]
