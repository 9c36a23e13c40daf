"""``streamfair report``: a PNG of each group's fairness and of the risk over time, the target drawn in.

The picture comes from a **history**: a JSON-lines file that the daemon writes (``metrics.history``)
or a library loop writes with :class:`HistoryWriter`, or one recorded on the spot by scraping a
running daemon's ``/metrics`` endpoint (``--scrape URL``).  No Grafana needed.

History format (version 1), UTF-8, one JSON object per line::

    {"streamfair_history": 1, "groups": ["0", "1"], "measure": "ks", "target": [0.05, 0.05]}   # header
    {"time": 1732170000.5, "partition": "0", "n_samples": 1200,
     "live_gap": [0.031, 0.029], "live_ks": [0.05, 0.048], "live_mean": [0.11, 0.13],
     "audited_gap": [0.035, 0.03], "audited_ks": [0.06, 0.05], "risk": 0.082, "audited_samples": 400}

``measure`` says what the target bounds: ``"ks"`` (the KS distance, ``postprocessor.ks``) or
``"gap"`` (the per-value gap, the paper's ``eps``; a header with ``"eps": [...]`` instead of
``measure`` and ``target`` is read as such).  ``time`` is Unix seconds; the per-group lists
follow the header's ``groups``; the ``audited_*`` and
``risk`` fields are ``null`` until labelled feedback (y and S) has been seen for every group.  A
writer appends to an existing file with the same header; a reader ignores a truncated last line
(a process killed while writing).

Examples
--------
>>> import os, tempfile
>>> from streamfair import FairRegressionPostProcessor
>>> fair = FairRegressionPostProcessor(L=5, n_groups=2, horizon=50, eps=0.01, profile="paper")
>>> path = os.path.join(tempfile.mkdtemp(), "history.jsonl")
>>> with HistoryWriter(path, groups=["a", "b"], target=fair.eps, measure="gap") as history:
...     for i in range(100):
...         fair.learn_one(0.5 if i % 2 else -0.5, [0.8, 0.2] if i % 2 else [0.2, 0.8])
...         if i % 50 == 49:
...             history.write(HistoryRecord.from_diagnostics("0", fair.diagnostics(), time=float(i)))
>>> loaded = read_history(path)
>>> loaded.groups, [record.n_samples for record in loaded.records]
(['a', 'b'], [50, 100])
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time as _time
import urllib.request
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from streamfair.validation import is_real

HISTORY_VERSION = 1


@dataclass(frozen=True)
class HistoryRecord:
    """One post-processor's state at one moment (per-group lists in the history's group order).

    The ``audited_*`` fields and ``risk`` are ``None`` until labelled feedback has been seen.

    >>> from streamfair import FairRegressionPostProcessor
    >>> fair = FairRegressionPostProcessor(L=5, n_groups=2, seed=0)
    >>> for i in range(200):
    ...     fair.learn_one(0.5 if i % 2 else -0.5, [0.8, 0.2] if i % 2 else [0.2, 0.8])
    >>> record = HistoryRecord.from_diagnostics("0", fair.diagnostics(), time=1732170000.0)
    >>> record.partition, record.n_samples, len(record.live_ks), record.audited_ks, record.risk
    ('0', 200, 2, None, None)
    """

    time: float
    partition: str
    n_samples: int
    live_gap: list[float]
    live_ks: list[float]
    live_mean: list[float]
    audited_gap: list[float] | None = None
    audited_ks: list[float] | None = None
    risk: float | None = None
    audited_samples: int = 0

    @classmethod
    def from_diagnostics(cls, partition: Any, diagnostics: Any, report: Any = None, audited_samples: int = 0,
                         time: float | None = None) -> HistoryRecord:
        """From :meth:`streamfair.DualPostProcessor.diagnostics` and an optional audited
        :class:`streamfair.evaluation.FairnessReport`; ``time`` defaults to now."""
        return cls(
            time=_time.time() if time is None else float(time),
            partition=str(partition),
            n_samples=int(diagnostics.n_samples),
            live_gap=[float(v) for v in diagnostics.group_unfairness],
            live_ks=[float(v) for v in diagnostics.group_ks],
            live_mean=[float(v) for v in diagnostics.group_mean],
            audited_gap=None if report is None else [float(v) for v in report.atom_unfairness],
            audited_ks=None if report is None else [float(v) for v in report.ks_unfairness],
            risk=None if report is None else float(report.risk),
            audited_samples=int(audited_samples),
        )


#: What a history's target bounds: the KS distance, or the per-value gap (the paper's eps).
MEASURES = ("ks", "gap")


@dataclass
class History:
    """A loaded history: the header's groups, target and its measure, and the records in file order.

    :func:`read_history` loads one from a file, :func:`scrape_history` records one from a running
    daemon, and :func:`render` draws it.

    >>> history = History(groups=["a", "b"], target=[0.05, 0.05], measure="ks")
    >>> history.records.append(HistoryRecord(time=0.0, partition="0", n_samples=100, live_gap=[0.1, 0.1],
    ...                                      live_ks=[0.04, 0.06], live_mean=[0.2, -0.1]))
    >>> [record.live_ks for record in history.records]
    [[0.04, 0.06]]
    """

    groups: list[str]
    target: list[float]
    measure: str = "gap"
    records: list[HistoryRecord] = field(default_factory=list)


def _header(groups: Sequence[Any], target: Sequence[float] | float, measure: str) -> dict:
    groups = [str(g) for g in groups]
    if len(groups) < 2 or len(set(groups)) != len(groups):
        raise ValueError(f"groups must be at least 2 distinct labels, got {groups!r}")
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got {measure!r}")
    target = [float(target)] * len(groups) if isinstance(target, (int, float)) else [float(e) for e in target]
    if len(target) != len(groups) or not all(math.isfinite(e) and e >= 0 for e in target):
        raise ValueError(f"target must be one finite number >= 0 or one per group ({len(groups)}), got {target!r}")
    return {"streamfair_history": HISTORY_VERSION, "groups": groups, "measure": measure, "target": target}


def _mismatch(path: Path, header: dict) -> str | None:
    """Why the history file ``path`` cannot take the records of ``header`` (``None``: it can, or it is new or empty)."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    existing = read_history(path)
    wanted = (header["groups"], header["measure"], header["target"])
    if (existing.groups, existing.measure, existing.target) == wanted:
        return None
    return (f"path {str(path)!r} holds a history for groups {existing.groups} and {existing.measure} target "
            f"{existing.target}, not {wanted[0]} and {wanted[1]} target {wanted[2]}")


class HistoryWriter:
    """Append :class:`HistoryRecord` lines to a history file (created with its header if new or empty).

    Parameters
    ----------
    path
        The file; an existing one must have the same groups and target (a last line cut short by a killed
        writer is dropped before appending).
    groups
        Group labels, in the column order of tau.
    target
        The post-processor's fairness target: one number, or one per group.
    measure
        What it bounds: ``"ks"`` (``postprocessor.ks``) or ``"gap"`` (the per-value ``eps``).
    set_aside
        An existing file of other groups or another target is moved out of the way, to
        ``<stem>.<n><suffix>`` with ``n`` the first of 1, 2, ... not taken, and a new one starts
        (:attr:`set_aside_as` says where), instead of being refused.

    Attributes
    ----------
    set_aside_as : Path or None
        Where a history of another header went (``set_aside``); ``None``: nowhere.

    Examples
    --------
    A second writer on the same file appends after the first one's records; one with another
    header is refused, or with ``set_aside`` starts a new file:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "history.jsonl")
    >>> record = HistoryRecord(time=0.0, partition="0", n_samples=100, live_gap=[0.1, 0.1],
    ...                        live_ks=[0.04, 0.06], live_mean=[0.2, -0.1])
    >>> for _ in range(2):
    ...     with HistoryWriter(path, groups=["a", "b"], target=0.05, measure="ks") as writer:
    ...         writer.write(record)
    >>> len(read_history(path).records)
    2
    >>> HistoryWriter(path, groups=["a", "b"], target=0.1, measure="ks")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: path '...history.jsonl' holds a history for groups ['a', 'b'] and ks target [0.05, 0.05], not ...
    >>> with HistoryWriter(path, groups=["a", "b"], target=0.1, measure="ks", set_aside=True) as writer:
    ...     writer.set_aside_as.name, read_history(path).target
    ('history.1.jsonl', [0.1, 0.1])
    """

    def __init__(self, path: str | os.PathLike, groups: Sequence[Any], target: Sequence[float] | float,
                 measure: str = "gap", set_aside: bool = False):
        self.path = Path(path)
        header = _header(groups, target, measure)
        self._groups = header["groups"]
        self.set_aside_as: Path | None = None
        mismatch = _mismatch(self.path, header)
        if mismatch is not None and not set_aside:
            raise ValueError(mismatch)
        if mismatch is not None:
            n = 1
            while (kept := self.path.with_name(f"{self.path.stem}.{n}{self.path.suffix}")).exists():
                n += 1
            self.set_aside_as = self.path.rename(kept)
        if self.path.exists() and self.path.stat().st_size > 0:
            _drop_truncated_line(self.path)
            self._handle = open(self.path, "a", encoding="utf-8")
        else:
            self._handle = open(self.path, "w", encoding="utf-8")
            self._line(header)

    def _line(self, obj: dict) -> None:
        self._handle.write(json.dumps(obj, separators=(",", ":"), allow_nan=False) + "\n")
        self._handle.flush()

    def write(self, record: HistoryRecord) -> None:
        """Append one record (its per-group lists must have one number per group)."""
        self._line(asdict(_checked(record, len(self._groups))))

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _drop_truncated_line(path: Path) -> None:
    """Cut a last line that a writer killed mid-write left without its newline, so that appending starts a line."""
    data = path.read_bytes()
    if not data.endswith(b"\n"):
        with open(path, "rb+") as handle:
            handle.truncate(data.rfind(b"\n") + 1)


def _checked(record: HistoryRecord, k: int) -> HistoryRecord:
    """``record``, if its fields have their types and each per-group list has ``k`` numbers (``audited_*`` and
    ``risk`` may be ``None``).

    >>> _checked(HistoryRecord(time=0.0, partition="0", n_samples=1, live_gap=[0.1], live_ks=[0.1],
    ...                        live_mean=[0.0]), 2)
    Traceback (most recent call last):
    ...
    ValueError: record.live_gap must have 2 numbers, got [0.1]
    """
    if not is_real(record.time):
        raise ValueError(f"record.time must be a number, got {record.time!r}")
    if not isinstance(record.partition, str):
        raise ValueError(f"record.partition must be a string, got {record.partition!r}")
    for name in ("n_samples", "audited_samples"):
        count = getattr(record, name)
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"record.{name} must be an integer >= 0, got {count!r}")
    if record.risk is not None and not is_real(record.risk):
        raise ValueError(f"record.risk must be a number or null, got {record.risk!r}")
    for name in ("live_gap", "live_ks", "live_mean", "audited_gap", "audited_ks"):
        values = getattr(record, name)
        if values is None and name.startswith("audited"):
            continue
        if not isinstance(values, list) or len(values) != k or not all(map(is_real, values)):
            raise ValueError(f"record.{name} must have {k} numbers, got {values!r}")
    return record


def read_history(path: str | os.PathLike) -> History:
    """Load a history file (see the module docstring for the format).

    A truncated last line (the writer was killed while writing it: no newline ends it) is left out:

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "history.jsonl")
    >>> with HistoryWriter(path, groups=["0", "1"], target=0.05, measure="ks") as writer:
    ...     writer.write(HistoryRecord(time=0.0, partition="0", n_samples=100, live_gap=[0.1, 0.1],
    ...                                live_ks=[0.04, 0.06], live_mean=[0.2, -0.1]))
    >>> with open(path, "a") as handle:
    ...     _ = handle.write('{"time": 5.0, "partition": "0", "n_sam')
    >>> history = read_history(path)
    >>> history.groups, history.measure, history.target, [record.n_samples for record in history.records]
    (['0', '1'], 'ks', [0.05, 0.05], [100])
    """
    text = Path(path).read_text(encoding="utf-8")
    lines, truncated = text.splitlines(), not text.endswith("\n")
    if not lines:
        raise ValueError(f"path {str(path)!r} is empty, expected a streamfair history")
    try:
        header = json.loads(lines[0])
    except ValueError:
        header = None
    if not isinstance(header, dict) or header.get("streamfair_history") != HISTORY_VERSION:
        raise ValueError(f"path {str(path)!r} is not a streamfair history (version {HISTORY_VERSION})")
    try:  # written before the KS targets: the per-value eps
        measure = header["measure"] if "target" in header else "gap"
        checked = _header(header["groups"], header["target"] if "target" in header else header["eps"], measure)
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"path {str(path)!r}: line 1 is not a history header ({error!r})") from None
    history = History(groups=checked["groups"], target=checked["target"], measure=measure)
    k = len(history.groups)
    for number, line in enumerate(lines[1:], start=2):
        try:
            history.records.append(_checked(HistoryRecord(**json.loads(line)), k))
        except (ValueError, TypeError):
            if truncated and number == len(lines):  # the writer was killed mid-write
                break
            raise ValueError(f"path {str(path)!r}: line {number} is not a history record") from None
    return history


# ---------------------------------------------------------------------------- scraping
def _parse_exposition(text: str) -> dict[str, dict[tuple, float]]:
    """``{metric name: {sorted label items: value}}`` from the Prometheus text format."""
    from prometheus_client.parser import text_string_to_metric_families

    samples: dict[str, dict[tuple, float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples[sample.name][tuple(sorted(sample.labels.items()))] = sample.value
    return samples


def records_from_exposition(text: str, now: float | None = None
                            ) -> tuple[list[str], list[float], str, list[HistoryRecord]]:
    """Groups, target, its measure and one record per partition from one scrape of a streamfair ``/metrics`` page.

    A partition is recorded once its post-processor has learned a sample (its live gauges are set).

    >>> from prometheus_client import generate_latest
    >>> from streamfair import FairRegressionPostProcessor
    >>> from connectors.prometheus import StreamfairMetrics
    >>> fair = FairRegressionPostProcessor(L=5, n_groups=2, ks=0.05, seed=0)
    >>> for i in range(200):
    ...     fair.learn_one(0.5 if i % 2 else -0.5, [0.8, 0.2] if i % 2 else [0.2, 0.8])
    >>> metrics = StreamfairMetrics(groups=["a", "b"], ks=fair.ks)
    >>> _ = metrics.observe(fair, partition=2)
    >>> page = generate_latest(metrics.registry).decode()
    >>> groups, target, measure, records = records_from_exposition(page, now=1732170000.0)
    >>> groups, target, measure
    (['a', 'b'], [0.05, 0.05], 'ks')
    >>> [(record.partition, record.n_samples, record.audited_ks) for record in records]
    [('2', 200, None)]
    """
    samples = _parse_exposition(text)
    measure, name = ("ks", "streamfair_fairness_ks_target")
    if name not in samples:
        measure, name = ("gap", "streamfair_fairness_eps")
    target_by_group = {dict(labels)["group"]: value for labels, value in samples.get(name, {}).items()}
    groups = sorted(target_by_group, key=label_order)
    if not groups:
        raise ValueError("the metrics page has no streamfair_fairness_ks_target or streamfair_fairness_eps samples: "
                         "is it a streamfair endpoint?")
    now = _time.time() if now is None else now

    def by_group(name: str, partition: str) -> list[float] | None:
        values = {dict(labels)["group"]: value for labels, value in samples.get(name, {}).items()
                  if dict(labels).get("partition") == partition}
        return [values[g] for g in groups] if set(values) == set(groups) else None

    records = []
    samples_by_partition = {dict(labels)["partition"]: n for labels, n in
                            samples.get("streamfair_postprocessor_samples", {}).items()}
    for partition in sorted(samples_by_partition, key=label_order):
        n_samples = samples_by_partition[partition]
        live_gap, live_ks, live_mean = (by_group(name, partition) for name in (
            "streamfair_live_fairness_gap", "streamfair_live_fairness_ks", "streamfair_live_prediction_mean"))
        if live_gap is None or live_ks is None or live_mean is None:
            continue
        audited_gap = by_group("streamfair_audited_fairness_gap", partition)
        risk = samples.get("streamfair_audited_squared_error", {}).get((("partition", partition),))
        counts = by_group("streamfair_audited_window_samples", partition) or [0.0]
        records.append(HistoryRecord(
            time=now, partition=partition, n_samples=int(n_samples), live_gap=live_gap, live_ks=live_ks,
            live_mean=live_mean, audited_gap=audited_gap,
            audited_ks=by_group("streamfair_audited_fairness_ks", partition) if audited_gap else None,
            risk=risk if audited_gap else None, audited_samples=int(sum(counts))))
    return groups, [target_by_group[g] for g in groups], measure, records


def label_order(label: str) -> tuple[int, int, str]:
    """Sort key of a partition or group label: decimal integers first, by value (then text), then the others by text.

    >>> sorted(["10", "b", "9", "-1", "a", "09"], key=label_order)
    ['-1', '09', '9', '10', 'a', 'b']
    """
    digits = label[1:] if label[:1] == "-" else label
    return (0, int(label), label) if digits.isascii() and digits.isdigit() else (1, 0, label)


def scrape_history(url: str, duration: float, every: float, timeout: float = 5.0) -> History:
    """Scrape ``url`` (a streamfair ``/metrics`` endpoint) every ``every`` seconds for ``duration`` seconds.

    The scrapes are due at ``0, every, 2 every, ...`` seconds up to ``duration``: there are
    ``floor(duration / every) + 1`` of them however long each takes (a late one is made at once,
    not skipped), so a slow endpoint delays the history rather than thinning it.
    """
    if not (math.isfinite(duration) and duration >= 0):
        raise ValueError(f"duration must be a finite number >= 0, got {duration!r}")
    if not (math.isfinite(every) and every > 0):
        raise ValueError(f"every must be a finite number > 0, got {every!r}")
    history: History | None = None
    start = _time.monotonic()
    for scrape in range(math.floor(duration / every + 1e-9) + 1):  # 0.3 / 0.1 is 2.9999999999999996
        _time.sleep(max(0.0, start + scrape * every - _time.monotonic()))
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                text = response.read().decode("utf-8")
        except OSError as error:  # URLError, HTTPError, a timeout
            raise OSError(f"url {url!r}: {getattr(error, 'reason', error)}") from error
        groups, target, measure, records = records_from_exposition(text)
        if history is None:
            history = History(groups, target, measure)
        elif groups != history.groups:
            raise ValueError(f"url {url!r}: the groups changed from {history.groups} to {groups} while scraping")
        history.records.extend(records)
    assert history is not None  # at least one scrape
    return history


# ---------------------------------------------------------------------------- the picture
def render(history: History, output: str | os.PathLike, x: str = "time", partitions: Sequence[str] | None = None,
           title: str | None = None):
    """Write the PNG and return the matplotlib figure.

    Top: each group's fairness in the history's measure (the KS distance, or the worst per-value
    gap), live (solid, no S needed) and audited (dashed, from labelled feedback), with the target as
    a dotted line.  Bottom: the audited risk (mean squared error).
    ``x`` is ``"time"`` (seconds since the first record) or ``"samples"`` (samples learned).
    """
    import matplotlib
    from matplotlib.figure import Figure  # no pyplot: no global backend or figure registry is touched

    if x not in ("time", "samples"):
        raise ValueError(f"x must be 'time' or 'samples', got {x!r}")
    records = [r for r in history.records if partitions is None or r.partition in set(partitions)]
    if not records:
        raise ValueError(f"partitions {partitions!r}: no records to plot" if partitions else "history has no records")
    start = min(r.time for r in records)
    by_partition: dict[str, list[HistoryRecord]] = defaultdict(list)
    for record in records:
        by_partition[record.partition].append(record)
    colors = matplotlib.colormaps["tab10"]
    markers = "os^vDP*X" if len(by_partition) > 1 else ""  # partitions apart by marker, groups by color
    live_name, audited_name = ("live_ks", "audited_ks") if history.measure == "ks" else ("live_gap", "audited_gap")
    fig = Figure(figsize=(11, 6.5))
    gap_ax, risk_ax = fig.subplots(2, 1, sharex=True, height_ratios=(3, 2))
    for index, partition in enumerate(sorted(by_partition, key=label_order)):
        rows = by_partition[partition]
        style = {"marker": markers[index % len(markers)], "markersize": 4} if markers else {}
        rows.sort(key=lambda r: (r.time, r.n_samples) if x == "time" else (r.n_samples, r.time))
        xs = [r.time - start if x == "time" else r.n_samples for r in rows]
        suffix = f", partition {partition}" if len(by_partition) > 1 else ""
        for g, group in enumerate(history.groups):
            color = colors(g % 10)
            gap_ax.plot(xs, [getattr(r, live_name)[g] for r in rows], color=color, lw=1.6,
                        label=f"group {group} live{suffix}", **style)
            audited = [
                (xv, getattr(r, audited_name)[g]) for xv, r in zip(xs, rows, strict=True) if getattr(r, audited_name)
            ]
            if audited:
                gap_ax.plot(
                    *zip(*audited, strict=True),
                    color=color,
                    lw=1.2,
                    ls="--",
                    label=f"group {group} audited{suffix}",
                    **style,
                )
        risks = [(xv, r.risk) for xv, r in zip(xs, rows, strict=True) if r.risk is not None]
        if risks:
            risk_ax.plot(*zip(*risks, strict=True), color="black", lw=1.4, label=f"partition {partition}", **style)
    name = "KS target" if history.measure == "ks" else "eps"
    for g, value in enumerate(history.target):
        same = all(e == value for e in history.target)
        if same and g > 0:
            break
        gap_ax.axhline(
            value,
            color="black" if same else colors(g % 10),
            ls=":",
            lw=1.4,
            label=name if same else f"{name} group {history.groups[g]}",
        )
    gap_ax.set_ylabel(
        "KS distance to all predictions" if history.measure == "ks" else "fairness gap max_l |P(l|s) - P(l)|"
    )
    gap_ax.set_ylim(bottom=0)
    gap_ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    gap_ax.grid(alpha=0.3)
    risk_ax.set_ylabel("audited risk (MSE)")
    if risk_ax.lines:
        risk_ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    else:
        risk_ax.text(
            0.5,
            0.5,
            "no audited risk: needs a feedback stream with y and s",
            ha="center",
            va="center",
            transform=risk_ax.transAxes,
            color="gray",
        )
    risk_ax.grid(alpha=0.3)
    risk_ax.set_xlabel("seconds since the first record" if x == "time" else "samples learned")
    measured = "KS distance" if history.measure == "ks" else "fairness gap"
    fig.suptitle(title or f"streamfair: {measured} per group (live vs audited, target dotted) and risk")
    fig.tight_layout()
    fig.savefig(output, dpi=110)
    return fig


# ---------------------------------------------------------------------------- command line
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``streamfair report`` (:func:`run` takes the parsed arguments).

    >>> parser = argparse.ArgumentParser()
    >>> add_arguments(parser)
    >>> args = parser.parse_args(["history.jsonl", "--x", "samples", "--partition", "0"])
    >>> args.history, args.scrape, args.output, args.x, args.partitions
    ('history.jsonl', None, 'streamfair-report.png', 'samples', ['0'])
    """
    parser.add_argument("history", nargs="?", help="history file (JSON lines) written by the daemon or a library loop")
    parser.add_argument("--scrape", metavar="URL", help="record a history by scraping this /metrics URL instead")
    parser.add_argument("--duration", type=_seconds, help=f"seconds to scrape (default {SCRAPE_SECONDS:g})")
    parser.add_argument("--every", type=_seconds, help=f"seconds between scrapes (default {SCRAPE_EVERY:g})")
    parser.add_argument("--save-history", metavar="FILE",
                        help="also write the scraped history to FILE (with --scrape only)")
    parser.add_argument("-o", "--output", default="streamfair-report.png",
                        help="PNG to write (default streamfair-report.png)")
    parser.add_argument("--x", choices=("time", "samples"), default="time", help="horizontal axis")
    parser.add_argument("--partition", action="append", dest="partitions", help="only this partition (repeatable)")


#: How long ``--scrape`` records, and how often, unless told.
SCRAPE_SECONDS, SCRAPE_EVERY = 60.0, 2.0


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (an ``argparse`` type)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    if (args.history is None) == (args.scrape is None):
        print("streamfair report: give a history file or --scrape URL (one of them)", file=sys.stderr)
        return 2
    scraping_only = (args.save_history, args.duration, args.every)
    if args.history is not None and any(option is not None for option in scraping_only):
        print("streamfair report: --save-history, --duration and --every apply to --scrape, not to a history file",
              file=sys.stderr)
        return 2
    try:
        if args.scrape:
            history = scrape_history(args.scrape, args.duration or SCRAPE_SECONDS, args.every or SCRAPE_EVERY)
            if args.save_history:
                with HistoryWriter(args.save_history, history.groups, history.target, history.measure) as writer:
                    for record in history.records:
                        writer.write(record)
        else:
            history = read_history(args.history)
        render(history, args.output, x=args.x, partitions=args.partitions)
    except (OSError, ValueError) as error:
        print(f"streamfair report: {error}", file=sys.stderr)
        return 1
    print(f"wrote {args.output} ({len(history.records)} records, groups {', '.join(history.groups)})")
    return 0
