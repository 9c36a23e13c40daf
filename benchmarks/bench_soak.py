"""The daemon's resident memory over a long stream, with each Kafka client, against a bare kafka-python loop.

``N_MESSAGES`` score messages are produced to a 3-partition topic of the bundled broker; each
contender (a fresh consumer group) then drains them in a process of its own, which reads its
resident set size (``/proc/self/statm``, Linux) every ``EVERY`` messages.  The table shows the
resident memory once a tenth of the messages is through (the compiled code, the clients' buffers
and the post-processor's state are all in place by then), at the end, and the change in between
per million messages.  A daemon whose memory grew with the stream would show it here; the bare
loop (the one of ``bench_daemon``), which keeps nothing, is the baseline of the same run.
Contenders: the bare loop, the daemon with kafka-python and with librdkafka at the default
settings, and the daemon with the group-robust post-processor, which keeps each sample's id until
its label comes (no labels come here), up to ``postprocessor.max_pending`` of them (4,000 by
default in the daemon: ``docs/daemon.md``, "Checkpoint size").

Run: ``python benchmarks/bench_soak.py`` or ``streamfair bench soak`` (about five minutes).
"""

from __future__ import annotations

import multiprocessing
import os
import queue

import numpy as np
from bench_daemon import _bare_loop, _config, _messages, _run_daemon, _values  # benchmarks/bench_daemon.py
from command_line import parser  # benchmarks/command_line.py

from connectors.kafka.observer import DaemonObserver

N_MESSAGES = 1_000_000
EVERY = 10_000  # messages between two readings
CONTENDERS = {
    "bare kafka-python consume-and-produce loop": ("bare", {}),
    "daemon (kafka-python)": ("daemon", {}),
    "daemon (librdkafka)": ("daemon", {"kafka.client": "confluent"}),
    "daemon (kafka-python), group-robust post-processor": ("daemon", {"postprocessor.robust": "true"}),
}


def resident_mb() -> float:
    """This process's resident set size in MB (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


class Readings(DaemonObserver):
    """``(messages consumed, resident MB)`` every ``EVERY`` messages: a daemon observer, or ``Readings.at``."""

    def __init__(self) -> None:
        self.samples: list[tuple[int, float]] = []

    def at(self, consumed: int) -> None:
        if not self.samples or consumed - self.samples[-1][0] >= EVERY:
            self.samples.append((consumed, resident_mb()))

    def on_loop(self, daemon) -> None:
        self.at(daemon.stats.consumed)


def _drain(kind: str, values: dict, n: int, results) -> None:  # a child process
    readings = Readings()
    if kind == "bare":
        _bare_loop(values, n, on_poll=readings.at)
    else:
        daemon = _run_daemon(values, observers=[readings])
        if daemon.stats.consumed < n:
            raise RuntimeError(f"the daemon stopped after {daemon.stats.consumed} of {n} messages (see its log)")
    results.put(readings.samples + [(n, resident_mb())])


def soak(broker, name: str, kind: str, settings: dict, n: int) -> np.ndarray:
    """``(messages consumed, resident MB)`` samples of one contender's drain."""
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    values = {**_values(broker.bootstrap, name), **settings}
    child = context.Process(target=_drain, args=(kind, values, n, results))
    child.start()
    while True:
        try:
            samples = results.get(timeout=1.0)
            break
        except queue.Empty:
            if not child.is_alive():
                raise RuntimeError(f"{name}: the contender's process ended without its readings "
                                   f"(exit code {child.exitcode})") from None
    child.join(60)
    return np.array(samples)


def main(n: int = N_MESSAGES) -> str:
    from kafka import KafkaProducer

    from connectors.kafka.broker import Broker
    from connectors.kafka.clients import ensure_topics

    rows = []
    with Broker() as broker:
        ensure_topics(_config(_values(broker.bootstrap, "setup")))
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=20, batch_size=256 * 1024)
        for start in range(0, n, 100_000):
            for partition, key, value in _messages(min(100_000, n - start), seed=start, start=start):
                producer.send("bench.in", key=key, value=value, partition=partition)
            producer.flush()
        producer.close()
        for j, (contender, (kind, settings)) in enumerate(CONTENDERS.items()):
            samples = soak(broker, f"soak{j}", kind, settings, n)
            through = samples[samples[:, 0] >= n // 10]
            first, last = through[0], through[-1]
            per_million = (last[1] - first[1]) / (last[0] - first[0]) * 1e6
            rows.append(f"| {contender} | {first[1]:.0f} | {last[1]:.0f} | {np.max(through[:, 1]):.0f} | "
                        f"{per_million:+.1f} |")
    return "\n".join([
        f"Resident memory draining {n:,} messages (MB; 3 partitions, Tansu, default settings, batch_size=1)",
        "",
        "| contender | after a tenth | at the end | highest after a tenth | change per million messages |",
        "|---|---:|---:|---:|---:|",
        *rows,
    ])


if __name__ == "__main__":
    parser(__doc__).parse_args()
    print(main())
