"""``streamfair demo`` (the README's first command), end to end on a short stream."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from connectors.cli.demo import CONFIG_NAME, PICTURE_NAME, WINDOWS
from connectors.kafka.config import load_config
from tests.support import REPO


@pytest.mark.kafka
def test_demo_reports_fairness_over_time_against_the_target_and_keeps_its_config(tmp_path):
    started = time.monotonic()
    result = subprocess.run([sys.executable, "-m", "connectors.cli", "demo", "--messages", "6000", "--out",
                             str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert time.monotonic() - started < 120
    out = result.stdout
    assert "[daemon] stopped with exit code 0; 6000 predictions" in out
    assert "predicted      0" not in out or "joining the consumer group" in out  # the wait is explained

    def row(name):
        line = next(line for line in out.splitlines() if line.startswith(name))
        return [float(x) for x in re.findall(r"-?\d+\.\d+", line[len(name):])]

    # second half: MSE, x model, x constant, KS S=0, KS S=1, ...
    base, fair, constant = row("your model (eta)"), row("fair predictions (their law)"), row("constant (mean of y)")
    assert base[1] == 1.0 and constant[2] == 1.0 and constant[3:5] == [0.0, 0.0]
    assert max(fair[3:5]) < 0.9 * max(base[3:5])  # the served distribution is fairer than the base model...
    assert base[0] < fair[0] < constant[0]  # ...at a price in risk, far below the constant predictor's
    assert fair[1] == pytest.approx(fair[0] / base[0], rel=0.01)  # up to the rounding of the printed MSEs
    # the target of the configuration, and fairness window by window
    config = load_config(tmp_path / CONFIG_NAME, env={})
    assert "Target (postprocessor." in out
    windows = [line for line in out.splitlines() if re.match(r"\s*\d+ - \d+\s", line)]
    assert len(windows) == WINDOWS and windows[0].split()[0] == "0" and windows[-1].split()[2] == "5999"
    assert (tmp_path / PICTURE_NAME).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the kept configuration is the demo's, for a broker on 127.0.0.1:9092, with its models next to it
    assert config.kafka.bootstrap_servers == ["127.0.0.1:9092"] and config.topics.input == "demo.features"
    assert Path(config.models.eta).is_file() and Path(config.models.tau).is_file()
    assert Path(config.models.eta).parent == tmp_path
    reasons = re.search(r"dead letters \(malformed messages mixed in on purpose\): (.*)", out).group(1)
    assert set(re.findall(r"([a-z_0-9]+) \d+", reasons)) == {
        "invalid_json", "missing_id", "non_finite", "not_utf8", "tau_not_distribution", "unknown_feature"}
    assert not re.search(r"n=\d+|exact pi", out)  # no internal labels
