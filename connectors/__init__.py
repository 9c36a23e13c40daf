"""Adapters around the pure algorithms of :mod:`streamfair`: Kafka, River, Prometheus, CLI."""
