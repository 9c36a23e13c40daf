"""The papers' experiments, their datasets, drifting synthetic streams and the offline LP optimum."""
