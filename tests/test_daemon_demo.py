"""``streamfair demo`` (the README's main-job command), end to end on a short stream."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_demo_reports_less_unfairness_after_post_processing():
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "connectors.cli", "demo", "--messages", "6000"], cwd=REPO,
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert time.monotonic() - started < 120
    out = result.stdout
    assert "[daemon] stopped with exit code 0; 6000 predictions" in out

    def row(name):
        line = next(line for line in out.splitlines() if line.startswith(name))
        return [float(x) for x in re.findall(r"-?\d+\.\d+", line[len(name):])]

    base, fair = row("base model (eta)"), row("fair, exact pi")
    risk_base, ks_base = base[0], max(base[1:3])
    risk_fair, ks_fair = fair[0], max(fair[1:3])
    assert ks_fair < 0.9 * ks_base  # the served distribution is fairer than the base model...
    assert risk_fair > risk_base  # ...at a price in risk
    reasons = re.search(r"dead letters: (.*)", out).group(1)
    assert set(re.findall(r"([a-z_0-9]+) \d+", reasons)) == {
        "invalid_json", "missing_id", "non_finite", "not_utf8", "tau_not_distribution", "unknown_feature"}
