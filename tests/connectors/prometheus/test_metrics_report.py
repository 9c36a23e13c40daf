"""``streamfair report``: the history format, the picture, scraping a metrics endpoint, the command."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import matplotlib.image
import numpy as np
import prometheus_client
import pytest

from connectors.cli import commands as cli
from connectors.prometheus import StreamfairMetrics, serve
from connectors.prometheus.report import (
    History,
    HistoryRecord,
    HistoryWriter,
    read_history,
    records_from_exposition,
    render,
    scrape_history,
)
from streamfair import FairRegressionPostProcessor, evaluate

GROUPS = ["a", "b"]
EPS = 0.03


def library_loop(path, n=1200, every=100, seed=0):
    """A library user's loop: learn, audit with labels, record a history line every ``every`` samples."""
    rng = np.random.default_rng(seed)
    fair = FairRegressionPostProcessor(profile="paper", L=8, n_groups=2, horizon=300, eps=EPS, seed=seed)
    metrics = StreamfairMetrics(GROUPS, fair.eps, audit_window=400)
    with HistoryWriter(path, GROUPS, fair.eps) as history:
        for i in range(n):
            s = int(rng.integers(0, 2))
            tau = [0.8, 0.2] if s == 0 else [0.2, 0.8]
            eta = float(np.clip(0.6 * s - 0.3 + 0.1 * rng.standard_normal(), -1, 1))
            metrics.add_feedback(0, fair.atoms, fair.proba_many([eta], [tau]), [eta], [s])
            fair.learn_one(eta, tau)
            if (i + 1) % every == 0:
                diagnostics, report = metrics.observe(fair, 0)
                history.write(HistoryRecord.from_diagnostics(0, diagnostics, report, metrics.audited_samples(0),
                                                             time=1000.0 + i / 100))
    return fair, metrics


@pytest.mark.slow
def test_history_round_trip_and_rules(tmp_path):
    path = tmp_path / "h.jsonl"
    fair, metrics = library_loop(path)
    history = read_history(path)
    assert history.groups == GROUPS and history.target == [EPS, EPS] and history.measure == "gap"
    assert [r.n_samples for r in history.records] == list(range(100, 1201, 100))
    last = history.records[-1]
    diagnostics, report = metrics.observe(fair, 0)
    assert last.live_gap == diagnostics.group_unfairness.tolist()
    assert last.audited_gap == report.atom_unfairness.tolist() and last.risk == report.risk
    assert last.audited_samples == 400
    # appending continues the same file; another header is refused
    with HistoryWriter(path, GROUPS, EPS) as writer:
        writer.write(last)
        with pytest.raises(ValueError, match="record.live_gap"):
            writer.write(HistoryRecord(0.0, "0", 1, [0.1], [0.1], [0.1]))
    assert len(read_history(path).records) == 13
    with pytest.raises(ValueError, match="holds a history for groups"):
        HistoryWriter(path, ["x", "y"], EPS)
    # a truncated last line (killed writer) is dropped; a broken line elsewhere is an error
    lines = path.read_text().splitlines()
    path.write_text("\n".join(lines) + "\n" + lines[-1][:20])
    assert len(read_history(path).records) == 13
    path.write_text("\n".join(lines[:3] + ["{oops"] + lines[3:]) + "\n")
    with pytest.raises(ValueError, match="line 4"):
        read_history(path)
    (tmp_path / "other.json").write_text('{"something": 1}\n')
    with pytest.raises(ValueError, match="not a streamfair history"):
        read_history(tmp_path / "other.json")
    with pytest.raises(ValueError, match="target"):
        HistoryWriter(tmp_path / "new.jsonl", GROUPS, [0.1])
    with pytest.raises(ValueError, match="measure"):
        HistoryWriter(tmp_path / "new.jsonl", GROUPS, 0.1, measure="kl")


@pytest.mark.slow
def test_render_draws_gaps_eps_and_risk(tmp_path):
    path = tmp_path / "h.jsonl"
    library_loop(path)
    history = read_history(path)
    figure = render(history, tmp_path / "report.png", x="samples")
    image = matplotlib.image.imread(tmp_path / "report.png")
    assert image.shape[0] > 500 and image.shape[1] > 800
    gap_axes, risk_axes = figure.axes
    lines = {line.get_label(): line for line in gap_axes.get_lines()}
    assert set(lines) == {"group a live", "group b live", "group a audited", "group b audited", "eps"}
    np.testing.assert_allclose(lines["eps"].get_ydata(), [EPS, EPS])
    np.testing.assert_allclose(lines["group b live"].get_xdata(), [r.n_samples for r in history.records])
    np.testing.assert_allclose(lines["group b live"].get_ydata(), [r.live_gap[1] for r in history.records])
    np.testing.assert_allclose(risk_axes.get_lines()[0].get_ydata(), [r.risk for r in history.records])
    # per-group eps: one line each; no audited data: the risk panel says why
    records = [HistoryRecord(t, "1", 10 * t, [0.1, 0.2], [0.3, 0.4], [0.0, 0.1]) for t in range(3)]
    history = History(GROUPS, [0.01, 0.05], records=records)
    figure = render(history, tmp_path / "plain.png")
    labels = [line.get_label() for line in figure.axes[0].get_lines()]
    assert labels == ["group a live", "group b live", "eps group a", "eps group b"]
    # a KS target: the KS distances are drawn against it
    ks_figure = render(History(GROUPS, [0.05, 0.05], "ks", records), tmp_path / "ks.png")
    ks_lines = {line.get_label(): line for line in ks_figure.axes[0].get_lines()}
    assert set(ks_lines) == {"group a live", "group b live", "KS target"}
    np.testing.assert_allclose(ks_lines["group b live"].get_ydata(), [0.4, 0.4, 0.4])
    assert not figure.axes[1].get_lines() and "needs a feedback stream" in figure.axes[1].texts[0].get_text()
    with pytest.raises(ValueError, match="x must be"):
        render(history, tmp_path / "x.png", x="epochs")
    with pytest.raises(ValueError, match="no records"):
        render(history, tmp_path / "x.png", partitions=["7"])


@pytest.mark.slow
def test_scraping_a_metrics_endpoint(tmp_path):
    fair, metrics = library_loop(tmp_path / "h.jsonl", n=400)
    metrics.observe(fair, 0)
    server = serve(metrics.registry, port=0, host="127.0.0.1")
    try:
        url = f"http://127.0.0.1:{server.port}/metrics"
        history = scrape_history(url, duration=0.25, every=0.1)
        assert (
            history.groups == GROUPS
            and history.target == [EPS, EPS]
            and history.measure == "gap"
            and len(history.records) == 3  # scrapes due at 0, 0.1 and 0.2 s, however long each takes
        )
        record = history.records[-1]
        diagnostics, report = metrics.observe(fair, 0)
        assert record.partition == "0" and record.n_samples == 400
        np.testing.assert_allclose(record.live_gap, diagnostics.group_unfairness)
        np.testing.assert_allclose(record.audited_ks, report.ks_unfairness)
        assert record.risk == pytest.approx(report.risk) and record.audited_samples == 400
        png, saved = tmp_path / "scraped.png", tmp_path / "scraped.jsonl"
        code = cli.main(
            [
                "report",
                "--scrape",
                url,
                "--duration",
                "0.2",
                "--every",
                "0.1",
                "-o",
                str(png),
                "--save-history",
                str(saved),
            ]
        )
        assert code == 0 and png.stat().st_size > 10000 and len(read_history(saved).records) == 3
    finally:
        server.close()
    with pytest.raises(
        ValueError, match="not a streamfair|no streamfair_fairness_ks_target or streamfair_fairness_eps"
    ):
        records_from_exposition("# HELP up x\n# TYPE up gauge\nup 1\n")
    with pytest.raises(ValueError, match="every"):
        scrape_history("http://127.0.0.1:1/metrics", duration=1, every=0)
    with pytest.raises(OSError, match=r"url 'http://127.0.0.1:1/metrics': .*refused"):  # nothing listens on port 1
        scrape_history("http://127.0.0.1:1/metrics", duration=0, every=1)


def test_a_slow_endpoint_delays_the_scrapes_without_skipping_any(tmp_path):
    """The scrapes are due at 0, 0.1 and 0.2 s; each takes 0.15 s here, so they run late, all three."""
    fair, metrics = library_loop(tmp_path / "h.jsonl", n=100)
    metrics.observe(fair, 0)
    page = prometheus_client.generate_latest(metrics.registry)

    def slow_answer() -> bytes:
        time.sleep(0.15)
        return page

    started = time.monotonic()
    history = scrape_endpoint(slow_answer, duration=0.2, every=0.1)
    elapsed = time.monotonic() - started
    assert len(history.records) == 3 and [r.n_samples for r in history.records] == [100] * 3
    assert elapsed >= 0.45  # three scrapes of 0.15 s, back to back once late


@pytest.mark.slow
def test_report_command(tmp_path, capsys):
    path = tmp_path / "h.jsonl"
    library_loop(path, n=300)
    png = tmp_path / "out.png"
    assert cli.main(["report", str(path), "-o", str(png), "--x", "samples"]) == 0
    assert png.stat().st_size > 10000 and "3 records" in capsys.readouterr().out
    assert cli.main(["report", "-o", str(png)]) == 2
    (tmp_path / "bad.jsonl").write_text(json.dumps({"streamfair_history": 99}) + "\n")
    assert cli.main(["report", str(tmp_path / "bad.jsonl"), "-o", str(png)]) == 1
    assert "not a streamfair history" in capsys.readouterr().err


HEADER = {"streamfair_history": 1, "groups": ["0", "1"], "measure": "ks", "target": [0.05, 0.05]}
RECORD = {"time": 0.0, "partition": "0", "n_samples": 1, "live_gap": [0.1, 0.1], "live_ks": [0.1, 0.1],
          "live_mean": [0.0, 0.0]}


@pytest.mark.parametrize("lines, named", [
    ([{"streamfair_history": 1}], "line 1 is not a history header"),
    ([{k: v for k, v in HEADER.items() if k != "measure"}], "line 1 is not a history header"),
    ([{**HEADER, "target": "x"}], "line 1 is not a history header"),
    ([{**HEADER, "groups": ["0"], "target": [0.05]}], "line 1 is not a history header"),
    ([HEADER, {**RECORD, "live_ks": [0.1]}, RECORD], "line 2 is not a history record"),
    ([HEADER, {**RECORD, "time": "x"}, RECORD], "line 2 is not a history record"),
    ([HEADER, {**RECORD, "live_ks": [None, "a"]}, RECORD], "line 2 is not a history record"),
], ids=["no-groups", "no-measure", "target-not-numbers", "one-group", "too-few-entries", "time-not-a-number",
        "not-numbers"])
def test_a_malformed_history_is_an_error_naming_the_line_not_a_traceback(tmp_path, capsys, lines, named):
    path = tmp_path / "h.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    assert cli.main(["report", str(path), "-o", str(tmp_path / "out.png")]) == 1
    assert named in capsys.readouterr().err


def test_a_target_of_zero_is_a_history_like_any_other(tmp_path):
    """A post-processor asked for exact parity (a target of 0) has its history written and read back."""
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, GROUPS, 0.0, measure="ks") as writer:
        writer.write(HistoryRecord(**RECORD))
    history = read_history(path)
    assert history.target == [0.0, 0.0] and len(history.records) == 1


def test_a_history_of_another_measure_is_not_appended_to(tmp_path):
    path = tmp_path / "h.jsonl"
    HistoryWriter(path, GROUPS, 0.05, measure="ks").close()
    with pytest.raises(ValueError, match="holds a history for groups .* and ks target"):
        HistoryWriter(path, GROUPS, 0.05, measure="gap")


def test_a_header_written_before_the_ks_targets_reads_as_per_value_gaps(tmp_path):
    path = tmp_path / "h.jsonl"
    path.write_text(json.dumps({"streamfair_history": 1, "groups": ["0", "1"], "eps": [0.01, 0.02]}) + "\n"
                    + json.dumps(RECORD) + "\n")
    history = read_history(path)
    assert (history.measure, history.target, len(history.records)) == ("gap", [0.01, 0.02], 1)


def test_a_record_from_diagnostics_carries_their_values_the_report_s_and_the_given_time():
    fair = FairRegressionPostProcessor(L=5, n_groups=2, ks=0.05, seed=0)
    for i in range(100):
        fair.learn_one(0.5 if i % 2 else -0.5, [0.8, 0.2] if i % 2 else [0.2, 0.8])
    diagnostics = fair.diagnostics()
    report = evaluate([[1.0, 0.0], [0.5, 0.5], [0.0, 1.0]], [0.0, 1.0], [0.0, 0.0, 1.0], [0, 1, 1])
    record = HistoryRecord.from_diagnostics(4, diagnostics, report, audited_samples=3, time=12.5)
    assert record == HistoryRecord(
        time=12.5, partition="4", n_samples=100, live_gap=diagnostics.group_unfairness.tolist(),
        live_ks=diagnostics.group_ks.tolist(), live_mean=diagnostics.group_mean.tolist(),
        audited_gap=report.atom_unfairness.tolist(), audited_ks=report.ks_unfairness.tolist(), risk=report.risk,
        audited_samples=3)


def test_render_counts_time_from_the_first_record_and_draws_a_risk_of_zero(tmp_path):
    records = [HistoryRecord(1000.0 + t, "0", 100, [0.1, 0.2], [0.3, 0.4], [0.0, 0.1], audited_gap=[0.1, 0.2],
                             audited_ks=[0.3, 0.4], risk=risk) for t, risk in ((0.0, 0.0), (1.5, 0.2), (3.0, 0.1))]
    figure = render(History(GROUPS, [0.05, 0.05], "ks", records), tmp_path / "report.png")
    live = {line.get_label(): line for line in figure.axes[0].get_lines()}["group a live"]
    assert live.get_xdata().tolist() == [0.0, 1.5, 3.0]
    (risk,) = figure.axes[1].get_lines()
    assert risk.get_xdata().tolist() == [0.0, 1.5, 3.0] and risk.get_ydata().tolist() == [0.0, 0.2, 0.1]


class Clock:
    """The report's clock: time passes when it sleeps, and while an endpoint answers."""

    def __init__(self):
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds >= 0
        self.now += seconds


def exposition(groups) -> bytes:
    """A streamfair metrics page of one partition that has learned a few samples."""
    fair = FairRegressionPostProcessor(L=5, n_groups=2, ks=0.05, seed=0)
    for i in range(10):
        fair.learn_one(0.5 if i % 2 else -0.5, [0.8, 0.2] if i % 2 else [0.2, 0.8])
    metrics = StreamfairMetrics(groups, ks=fair.ks)
    metrics.observe(fair)
    return prometheus_client.generate_latest(metrics.registry)


def scrape_endpoint(answer, duration, every):
    """``scrape_history`` of a local HTTP endpoint whose every answer is the page ``answer()`` returns."""

    class Endpoint(BaseHTTPRequestHandler):
        def do_GET(self):
            body = answer()
            self.send_response(200)
            self.send_header("Content-Type", prometheus_client.CONTENT_TYPE_LATEST)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
    try:
        return scrape_history(f"http://127.0.0.1:{server.server_port}/metrics", duration=duration, every=every)
    finally:
        server.shutdown()
        server.server_close()


def scrape_with_clock(monkeypatch, pages, answer_seconds, duration, every):
    """``scrape_history`` of an endpoint serving ``pages`` in turn, each answer taking ``answer_seconds``."""
    clock = Clock()
    monkeypatch.setattr("connectors.prometheus.report._time", clock)
    served = iter(pages)

    def answer() -> bytes:
        clock.now += answer_seconds
        return next(served)

    return scrape_endpoint(answer, duration, every)


def test_scrapes_are_due_every_interval_from_the_start_up_to_the_duration_included(monkeypatch):
    """0.3 s every 0.1 s: four scrapes at 0, 0.1, 0.2 and 0.3 s (0.3 / 0.1 is 2.9999999999999996 in floats)."""
    page = exposition(GROUPS)
    history = scrape_with_clock(monkeypatch, [page] * 4, 0.0, duration=0.3, every=0.1)
    assert [record.time for record in history.records] == pytest.approx([0.0, 0.1, 0.2, 0.3], abs=1e-12)


def test_late_scrapes_follow_each_other_at_once(monkeypatch):
    """Answers of 0.15 s: the scrapes due at 0.1 and 0.2 s start when the one before has its answer."""
    page = exposition(GROUPS)
    history = scrape_with_clock(monkeypatch, [page] * 3, 0.15, duration=0.2, every=0.1)
    assert [record.time for record in history.records] == pytest.approx([0.15, 0.3, 0.45], abs=1e-12)


def test_groups_that_change_while_scraping_are_an_error(monkeypatch):
    pages = [exposition(GROUPS), exposition(["a", "c"])]
    with pytest.raises(ValueError, match=r"the groups changed from \['a', 'b'\] to \['a', 'c'\] while scraping"):
        scrape_with_clock(monkeypatch, pages, 0.0, duration=0.1, every=0.1)


def test_a_page_scraped_between_two_gauges_of_a_partition_gives_whole_records_only():
    """The gauges of a partition are set (and removed) one after the other while the endpoint may be read:
    a partition is recorded once all its live gauges are on the page, and its audited fields are all there or
    all left out."""
    fair = FairRegressionPostProcessor(L=5, n_groups=2, ks=0.05, seed=0)
    fair.learn_one(0.5, [0.2, 0.8])
    metrics = StreamfairMetrics(GROUPS, ks=fair.ks)
    metrics.add_feedback(0, fair.atoms, fair.proba_many([0.5, -0.5], [[0.2, 0.8], [0.8, 0.2]]), [0.5, -0.5], [1, 0])
    metrics.observe(fair)
    page = prometheus_client.generate_latest(metrics.registry).decode()

    def without(name):
        return "".join(line for line in page.splitlines(keepends=True) if not line.startswith(name + "{"))

    whole = records_from_exposition(page, now=0.0)[3]
    assert len(whole) == 1 and whole[0].audited_ks is not None and whole[0].risk is not None
    for live in ("streamfair_live_fairness_ks", "streamfair_live_prediction_mean"):
        assert records_from_exposition(without(live), now=0.0)[3] == []
    (record,) = records_from_exposition(without("streamfair_audited_fairness_gap"), now=0.0)[3]
    assert (record.audited_gap, record.audited_ks, record.risk) == (None, None, None)
    assert record.live_ks == whole[0].live_ks


def test_groups_and_partitions_numbered_past_nine_come_in_numeric_order():
    """The page carries labels as text: ``"10"`` sorts after ``"9"``, and each group's values stay its own."""
    labels = [str(g) for g in range(11)]
    tau = np.eye(11)[[g % 11 for g in range(220)]]
    eta = np.linspace(-0.9, 0.9, 11)[[g % 11 for g in range(220)]]
    fair = FairRegressionPostProcessor(L=5, n_groups=11, ks=0.05, seed=0)
    fair.learn_many(eta, tau)
    metrics = StreamfairMetrics(labels, ks=fair.ks)
    for partition in (10, 2):
        metrics.observe(fair, partition)
    groups, _, _, records = records_from_exposition(prometheus_client.generate_latest(metrics.registry).decode(),
                                                    now=0.0)
    assert groups == labels
    assert [record.partition for record in records] == ["2", "10"]
    assert records[0].live_mean == fair.diagnostics().group_mean.tolist()


def test_a_writer_restarted_after_a_kill_mid_line_appends_after_the_cut_line(tmp_path):
    """The next record was glued to the cut one; the line in the middle then made the file unreadable for good."""
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, GROUPS, 0.05, measure="ks") as writer:
        writer.write(HistoryRecord(**RECORD))
    with open(path, "a") as handle:
        handle.write('{"time": 5.0, "partition": "0", "n_sam')  # killed while writing
    with HistoryWriter(path, GROUPS, 0.05, measure="ks") as writer:
        writer.write(HistoryRecord(**{**RECORD, "time": 9.0}))
    assert [record.time for record in read_history(path).records] == [RECORD["time"], 9.0]


@pytest.mark.parametrize("change, message", [
    ({"partition": 0}, "record.partition must be a string, got 0"),
    ({"n_samples": None}, "record.n_samples must be an integer >= 0, got None"),
    ({"risk": "abc"}, "record.risk must be a number or null, got 'abc'"),
    ({"time": None}, "record.time must be a number, got None"),
])
def test_a_complete_bad_record_is_an_error_even_as_the_last_line(tmp_path, change, message):
    """Only a last line without its newline is a cut line; a complete one that is not a record was dropped as one,
    and a number for the partition or no sample count failed later, inside the plot."""
    path = tmp_path / "h.jsonl"
    HistoryWriter(path, GROUPS, 0.05, measure="ks").close()
    with open(path, "a") as handle:
        handle.write(json.dumps({**RECORD, **change}) + "\n")
    with pytest.raises(ValueError, match="line 2 is not a history record"):
        read_history(path)
    with pytest.raises(ValueError, match=re.escape(message)):
        HistoryWriter(tmp_path / "w.jsonl", GROUPS, 0.05, measure="ks").write(HistoryRecord(**{**RECORD, **change}))


@pytest.mark.parametrize("argv, message", [
    (["--save-history", "saved.jsonl"], "apply to --scrape, not to a history file"),  # was ignored, exit 0
    (["--duration", "30"], "apply to --scrape, not to a history file"),
])
def test_scraping_options_with_a_history_file_are_refused(tmp_path, capsys, argv, message):
    path = tmp_path / "h.jsonl"
    with HistoryWriter(path, GROUPS, 0.05, measure="ks") as writer:
        writer.write(HistoryRecord(**RECORD))
    assert cli.main(["report", str(path), "-o", str(tmp_path / "r.png"), *argv]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("option, value", [("--duration", "-5"), ("--every", "0"), ("--every", "nan")])
def test_scraping_seconds_must_be_positive(option, value, capsys):
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["report", "--scrape", "http://127.0.0.1:1/metrics", option, value])
    assert exit_info.value.code == 2 and "must be a number of seconds > 0" in capsys.readouterr().err
