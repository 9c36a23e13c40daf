"""The test suite: a package, so that its folders named like the code (``tests/streamfair``,
``tests/connectors``) never shadow the real packages, and helpers import as ``tests.support.*``."""
