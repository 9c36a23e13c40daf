"""The ``prometheus`` and ``promtool`` binaries the metrics tests run (the ``prometheus_tools`` fixture)."""

from __future__ import annotations

import shutil

import pytest

TOOLS_MISSING = ("prometheus and promtool must be on PATH for the scraping tests; `make test` installs them "
                 "(Debian/Ubuntu: apt-get install prometheus; elsewhere: https://prometheus.io/download/)")


def ensure_prometheus() -> dict[str, str]:
    """Paths of ``prometheus`` and ``promtool``; a test error naming what is missing if they are not on PATH.

    Tests never install anything: ``make test`` (``scripts/test-tools.sh``) sets the tools up.
    """
    tools = {name: shutil.which(name) for name in ("prometheus", "promtool")}
    if not all(tools.values()):
        missing = ", ".join(name for name, path in tools.items() if path is None)
        pytest.fail(f"{missing} not found. {TOOLS_MISSING}", pytrace=False)
    return tools
