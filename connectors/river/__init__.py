"""River pipeline components: fair regressors and classifiers, and surrogate-trained models."""
