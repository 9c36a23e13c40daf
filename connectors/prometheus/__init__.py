"""Prometheus metrics of the daemon and of library loops, and the fairness report drawn from them."""
