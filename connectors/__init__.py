"""Adapters around the pure algorithms of :mod:`streamfair`, one subpackage per integration.

* :mod:`connectors.kafka`: the consumer daemon (``streamfair serve``), its wire format, checkpoints
  and the bundled broker.
* :mod:`connectors.river`: River pipeline components.
* :mod:`connectors.prometheus`: metrics, alerts' inputs and the fairness report.
* :mod:`connectors.cli`: the ``streamfair`` command line (demo, benchmarks).
* :mod:`connectors.experiments`: the papers' experiments, their datasets, drifting streams and the
  offline LP optimum (not used by the adapters).

Dependencies point one way: ``cli`` and ``experiments`` use the adapters, the adapters use
:mod:`streamfair`, and :mod:`streamfair` uses none of them.
"""
