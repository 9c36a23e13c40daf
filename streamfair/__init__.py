"""streamfair: fair, robust, online post-processing of model predictions on streams.

The algorithms here are pure numpy (no I/O).  Adapters for Kafka, River and Prometheus live in
the ``connectors`` package.
"""

from .classification import FairClassificationPostProcessor
from .evaluation import FairnessReport, evaluate, evaluate_deterministic
from .postprocessor import Diagnostics, DualPostProcessor
from .regression import FairRegressionPostProcessor

__all__ = [
    "Diagnostics",
    "DualPostProcessor",
    "FairClassificationPostProcessor",
    "FairRegressionPostProcessor",
    "FairnessReport",
    "evaluate",
    "evaluate_deterministic",
]

__version__ = "0.1.0"
