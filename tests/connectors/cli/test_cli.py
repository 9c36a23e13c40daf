"""The ``streamfair`` command's help: written for users, every option explained, no internal jargon."""

from __future__ import annotations

import argparse
import importlib
import subprocess
import sys
import tomllib

import pytest

from connectors.cli import commands as cli
from tests.support import REPO
from tests.support.jargon import JARGON


def help_text(*argv: str, capsys) -> str:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


def test_top_level_help_explains_every_command(capsys):
    text = help_text(capsys=capsys)
    assert "demographic parity" in text and "Chzhen, Hebiri & Taturyan" in text
    for name, command in cli.COMMANDS.items():
        assert name in text and command.summary.split()[0] in text
    assert "streamfair demo" in text and "Bring your own model" in text
    assert not JARGON.search(text), JARGON.search(text)


def test_version_is_the_package_version():
    result = subprocess.run([sys.executable, "-m", "connectors.cli", "--version"], cwd=REPO, capture_output=True,
                            text=True, timeout=30)
    expected = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert result.returncode == 0 and result.stdout.strip() == f"streamfair {expected}"


@pytest.mark.parametrize("name", sorted(cli.COMMANDS))
def test_every_option_has_help_and_no_jargon(name, capsys):
    parser = argparse.ArgumentParser()
    importlib.import_module(cli.COMMANDS[name].module).add_arguments(parser)
    undocumented = [action.dest for action in parser._actions
                    if not isinstance(action, argparse._HelpAction) and not (action.help or "").strip()]
    assert not undocumented, f"streamfair {name}: options without help: {undocumented}"
    text = help_text(name, capsys=capsys)
    assert not JARGON.search(text), JARGON.search(text)


def test_serve_help_points_to_the_daemon_docs_and_lists_the_exit_codes(capsys):
    from connectors.kafka.checkpointing import EXIT_CHECKPOINT_TOO_LARGE
    from connectors.kafka.loop import EXIT_UNSUPPORTED_CODEC
    from connectors.kafka.partitions import EXIT_CHECKPOINT_UNREADABLE
    from connectors.kafka.positions import EXIT_OUT_OF_RANGE

    text = " ".join(help_text("serve", capsys=capsys).split())
    assert "docs/daemon.md" in text and "Bring your own model" in text
    for code, what in ((EXIT_OUT_OF_RANGE, "a restored position outside the input log"),
                       (EXIT_UNSUPPORTED_CODEC, "a compressed topic"),
                       (EXIT_CHECKPOINT_TOO_LARGE, "a checkpoint record"),
                       (EXIT_CHECKPOINT_UNREADABLE, "a checkpoint no restore can read")):
        assert f"; {code} {what}" in text


def test_report_help_says_how_to_produce_its_input(capsys):
    text = " ".join(help_text("report", capsys=capsys).split())
    assert "[metrics] history =" in text and "--scrape http://HOST:PORT/metrics" in text and "--metrics-port" in text


def test_bench_finds_every_benchmark_of_the_repository(capsys):
    from connectors.cli import bench

    scripts = sorted(path.stem.removeprefix("bench_") for path in (REPO / "benchmarks").glob("bench_*.py"))
    assert sorted(bench.available()) == scripts and "anytime" in scripts
    assert f"default: all of {scripts}" in " ".join(help_text("bench", capsys=capsys).split())
    with pytest.raises(SystemExit, match=r"unknown benchmark\(s\) \['nonesuch'\]; available: \[.*'core'"):
        cli.main(["bench", "nonesuch"])


@pytest.mark.parametrize("argv, message", [
    (["demo", "--seed", "-1"], "argument --seed: must be an integer >= 0, got '-1'"),
    (["demo", "--messages", "10"], "argument --messages: must be an integer >= 1000, got '10'"),
    (["demo", "--out", "pyproject.toml"], "argument --out: must be a directory, got the file 'pyproject.toml'"),
    (["broker", "--pid-file", "no-such-directory/broker.pid"], "argument --pid-file: its directory does not exist"),
    (["experiment", "--repetitions", "0"], "argument --repetitions: must be an integer >= 1, got '0'"),
    (["classification-experiment", "--datasets", "nosuch"], "argument --datasets: invalid choice: 'nosuch'"),
    (["classification-experiment", "--splits", "0"], "argument --splits: must be an integer >= 1, got '0'"),
    (["serve", "--max-messages", "-5"], "argument --max-messages: must be an integer >= 1, got '-5'"),
])
def test_a_bad_option_is_a_one_line_error_and_exit_2(argv, message, capsys, monkeypatch):
    """Each was a traceback (exit 1), some after work had started (a broker, the synthetic study)."""
    monkeypatch.chdir(REPO)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_quick_keeps_the_classification_experiment_options_given():
    from connectors.experiments import classification

    parser = argparse.ArgumentParser()
    classification.add_arguments(parser)
    assert classification.settings(parser.parse_args(["--quick", "--splits", "3"])) == (3, 2, 500, (1_000, 10_000))
    assert classification.settings(parser.parse_args([]))[:3] == (10, 5, 2000)
