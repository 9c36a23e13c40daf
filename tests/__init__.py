"""The test suite: a package, so that its folders named like the code (``tests/streamfair``,
``tests/connectors``) never shadow the real packages, and shared code imports as ``tests.support.*``."""
