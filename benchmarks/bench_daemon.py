"""The daemon's throughput and latency, with each Kafka client, against a bare kafka-python loop.

Same broker (the bundled Tansu), same input topic, same client settings, same run; the daemon runs
with ``kafka.client = "kafka-python"`` and with ``"confluent"`` (librdkafka):

* **throughput**: 24,000 score messages are produced to a 3-partition topic first; each contender (a
  fresh consumer group) then drains them.  Rate = messages / (last output acknowledged - first
  record polled); the daemon's end is its final checkpoint.  The bare loop forwards each record's
  key, value, partition and timestamp unchanged; the daemon parses, validates, predicts, learns,
  encodes and checkpoints (at its default interval, every 10,000 records).  Both run under the
  garbage-collection settings of ``streamfair serve`` (``serving_garbage_collection``), which made
  the bare loop 1.2 times and the daemons 1.3 to 1.5 times as fast as Python's defaults in this
  process.  Contenders run in rounds, and every daemon run comes right after a bare run, its
  baseline: the broker slows down as a run goes on (in one run the bare loop made 22,700, 15,200 and
  11,900 messages/s at the starts of its three rounds), so a baseline taken once per round flattered
  the daemons measured late in it.  The confluent daemon is compared with the kafka-python daemon
  through their ratios to their own baselines; the table shows the medians over rounds, since the
  load of a shared machine drifts too.  **CPU**: the CPU time of this process (every thread: the
  loop and the client's I/O threads; the broker is another process) over each whole drain, startup
  included, per message (after one untimed drain with each client, which loads the compiled
  kernels).  On a shared machine it moves much less than a rate, so the CPU ratio (baseline CPU /
  contender CPU) says what the contender costs where the rates' rounds scatter; a rate ratio
  below it is time the contender spent waiting (acknowledgements, the GIL, the CPU the broker and
  the machine's other load left it).
* **latency**: 1,000 messages/s offered for 5 s, the contender in its own process; latency = the
  time a reader sees the output minus the input record's create timestamp (the daemon and the
  bare loop both keep it), in milliseconds.
"""

from __future__ import annotations

import json
import logging
import multiprocessing
import threading
import time
from collections.abc import Callable
from functools import partial

import numpy as np
from command_line import parser  # benchmarks/command_line.py

N_MESSAGES = 24_000
ROUNDS = 3
RATE = 1000
LATENCY_SECONDS = 5.0
BATCH_SIZES = (1, 64)
CLIENTS = ("kafka-python", "confluent")


def _values(bootstrap: str, name: str, batch_size: int = 1, client: str = "kafka-python") -> dict:
    return {
        "kafka.client": client, "kafka.bootstrap_servers": bootstrap, "kafka.group_id": f"{name}-group",
        "kafka.session_timeout_ms": "3000", "kafka.heartbeat_interval_ms": "1000",
        "topics.input": "bench.in", "topics.output": f"{name}.out", "topics.dead_letter": f"{name}.dlq",
        "topics.changelog": f"{name}.changelog",
        "processing.batch_size": str(batch_size),
        "log.level": "WARNING",
    }


def _config(values: dict):
    from connectors.kafka.config import load_config

    return load_config(env={}, overrides=[f"{k}={v}" for k, v in values.items()])


def _messages(n: int, seed: int, start: int = 0) -> list[tuple[int, bytes, bytes]]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(start, start + n):
        s = int(rng.integers(0, 2))
        eta = float(np.clip(0.6 * s - 0.3 + 0.2 * rng.standard_normal(), -1, 1))
        body = {"id": f"m{i}", "eta": eta, "tau": [0.8, 0.2] if s == 0 else [0.2, 0.8]}
        out.append((i % 3, f"m{i}".encode(), json.dumps(body).encode()))
    return out


def _bare_loop(values: dict, n: int | None, stop: threading.Event | None = None,
               on_poll: Callable[[int], None] | None = None) -> float:
    """Forward records from the input to ``topics.output`` with the daemon's client settings.

    Returns messages/s from the first record polled to the final flush (``n`` records), or runs
    until ``stop`` is set (latency mode).  ``on_poll(count)`` after each poll: the records so far.
    """
    from connectors.kafka.clients import make_consumer, make_producer
    from connectors.kafka.daemon import serving_garbage_collection

    config = _config(values)
    consumer = make_consumer(config)
    consumer.subscribe([config.topics.input])
    producer = make_producer(config)
    count, first = 0, None
    with serving_garbage_collection():
        while (n is None or count < n) and not (stop is not None and stop.is_set()):
            for records in consumer.poll(timeout_ms=100).values():
                if first is None:
                    first = time.monotonic()
                for record in records:
                    producer.send(config.topics.output, key=record.key, value=record.value,
                                  partition=record.partition, timestamp_ms=record.timestamp)
                count += len(records)
            if on_poll is not None:
                on_poll(count)
        producer.flush()
    rate = count / (time.monotonic() - first) if first is not None else 0.0
    consumer.close(autocommit=False)
    producer.close()
    return rate


def _run_daemon(values: dict, stop=None, observers=()):
    """Run the daemon as ``streamfair serve`` does, until drained (or until ``stop`` is set); the daemon."""
    from connectors.kafka.daemon import serving_garbage_collection
    from connectors.kafka.loop import Daemon

    daemon = Daemon(_config(values), observers, logger=logging.getLogger("bench"))
    if stop is not None:
        def stop_when_asked() -> None:
            stop.wait()
            daemon.stop()

        threading.Thread(target=stop_when_asked, daemon=True).start()
    with serving_garbage_collection():
        daemon.run(once=stop is None)
    return daemon


def _daemon(values: dict) -> float:
    stats = _run_daemon(values).stats
    return stats.produced / (stats.last_checkpoint - stats.first_record)


def _with_cpu(drain: Callable[[], float]) -> tuple[float, float]:
    """``drain()``'s rate, and the CPU time of this process (every thread) it took, in µs per message."""
    started = time.process_time()
    rate = drain()
    return rate, (time.process_time() - started) / N_MESSAGES * 1e6


def _serve_until(kind: str, values: dict, stop) -> None:  # a child process of the latency phase
    if kind == "bare":
        _bare_loop(values, None, stop)
    else:
        _run_daemon(values, stop)


def _latencies(broker, kind: str, values: dict, seed: int) -> np.ndarray:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    from connectors.kafka.clients import ensure_topics

    ensure_topics(_config(values))
    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    child = context.Process(target=_serve_until, args=(kind, values, stop))
    child.start()
    reader = KafkaConsumer(bootstrap_servers=broker.bootstrap, enable_auto_commit=False, fetch_max_wait_ms=5)
    reader.assign([TopicPartition(values["topics.output"], p) for p in range(3)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=0)
    messages = iter(_messages(int(RATE * LATENCY_SECONDS), seed, start=10**6 * (seed + 1)))
    seen: list[float] = []
    # wait until the contender has joined its group: one probe message must come through
    probe_topic = values["topics.input"]
    deadline = time.monotonic() + 30
    producer.send(probe_topic, key=b"probe", value=json.dumps({"id": "probe", "eta": 0.0, "tau": [0.5, 0.5]}).encode(),
                  partition=0)
    while not any(reader.poll(timeout_ms=100).values()):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{kind} did not start")
    started, sent = time.monotonic(), 0
    while sent < RATE * LATENCY_SECONDS:
        due = min(int((time.monotonic() - started) * RATE), int(RATE * LATENCY_SECONDS))
        for _ in range(due - sent):
            partition, key, value = next(messages)
            producer.send(probe_topic, key=key, value=value, partition=partition)
        sent = max(sent, due)
        for records in reader.poll(timeout_ms=1).values():
            now = time.time() * 1000.0
            seen += [now - r.timestamp for r in records]
    producer.flush()
    deadline = time.monotonic() + 10
    while len(seen) < sent and time.monotonic() < deadline:
        for records in reader.poll(timeout_ms=20).values():
            now = time.time() * 1000.0
            seen += [now - r.timestamp for r in records]
    stop.set()
    child.join(15)
    reader.close()
    producer.close()
    return np.array(seen)


def main() -> str:
    from kafka import KafkaProducer

    from connectors.kafka.broker import Broker
    from connectors.kafka.clients import ensure_topics

    with Broker() as broker:
        base = _values(broker.bootstrap, "setup")
        ensure_topics(_config(base))
        producer = KafkaProducer(bootstrap_servers=broker.bootstrap, linger_ms=5)
        for partition, key, value in _messages(N_MESSAGES, seed=0):
            producer.send("bench.in", key=key, value=value, partition=partition)
        producer.flush()
        producer.close()

        for client in CLIENTS:  # untimed: load the compiled kernels and the client once, as a long-running daemon has
            _daemon(_values(broker.bootstrap, f"warm-up-{client}", client=client))
        rates: dict[str, list[float]] = {}  # each contender's runs, and the bare run just before each
        cpu: dict[str, list[float]] = {}  # the same runs' CPU µs per message
        for round_ in range(ROUNDS):
            for client in CLIENTS:
                for b in BATCH_SIZES:
                    contender = f"{client} b{b}"
                    bare = partial(_bare_loop, _values(broker.bootstrap, f"bare-{client}{b}-{round_}"), N_MESSAGES)
                    daemon = partial(_daemon, _values(broker.bootstrap, f"daemon-{client}{b}-{round_}", b, client))
                    for name, drain in ((f"bare before {contender}", bare), (contender, daemon)):
                        rate, cpu_us = _with_cpu(drain)
                        rates.setdefault(name, []).append(rate)
                        cpu.setdefault(name, []).append(cpu_us)

        latency: dict[tuple[str, str], np.ndarray] = {}
        for seed, (kind, client) in enumerate((("bare", "kafka-python"), ("daemon", "kafka-python"),
                                               ("daemon", "confluent"))):
            name = f"lat-{kind}-{client}"
            values = {**_values(broker.bootstrap, name, client=client), "topics.input": f"{name}.in"}
            latency[(kind, client)] = _latencies(broker, kind, values, seed)

    def bare_runs(series: dict[str, list[float]]) -> list[float]:
        return [value for name, runs in series.items() if name.startswith("bare") for value in runs]

    def per_round(series: dict[str, list[float]], contender: str) -> list[float]:  # over the bare run just before
        return [run / bare for run, bare in zip(series[contender], series[f"bare before {contender}"], strict=True)]

    def cpu_ratios(contender: str) -> list[float]:  # the bare run's CPU per message over the contender's
        return [1 / ratio for ratio in per_round(cpu, contender)]

    lines = [
        f"Throughput, {N_MESSAGES} messages, 3 partitions, Tansu ({ROUNDS} rounds; each daemon run right after a "
        "bare run, its baseline; medians; CPU of this process per message over the whole drain)",
        "",
        "| contender | messages/s | ratio to bare loop | ratio to kafka-python daemon | ratios to bare per round "
        "| CPU µs per message | CPU ratio to bare loop |",
        "|---|---:|---:|---:|---|---:|---:|",
        f"| bare kafka-python consume-and-produce loop | {np.median(bare_runs(rates)):,.0f} | 1.00 | | "
        f"{min(bare_runs(rates)):,.0f}/s to {max(bare_runs(rates)):,.0f}/s | {np.median(bare_runs(cpu)):.1f} | 1.00 |",
    ]
    for client in CLIENTS:
        for b in BATCH_SIZES:
            contender = f"{client} b{b}"
            runs, own = rates[contender], per_round(rates, contender)
            baseline = per_round(rates, f"kafka-python b{b}")
            to_kafka_python = np.median([r / base for r, base in zip(own, baseline, strict=True)])
            what = "per-sample learning (paper's algorithm)" if b == 1 else f"mini-batches of {b}"
            lines.append(f"| daemon ({client}), batch_size={b} ({what}) | {np.median(runs):,.0f} | "
                         f"{np.median(own):.2f} | {to_kafka_python:.2f} | {', '.join(f'{r:.2f}' for r in own)} | "
                         f"{np.median(cpu[contender]):.1f} | {np.median(cpu_ratios(contender)):.2f} |")
    lines += [
        "",
        f"Latency at {RATE} messages/s offered for {LATENCY_SECONDS:.0f} s (ms, input create time to output read)",
        "",
        "| contender | p50 | p90 | p99 | max | received |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for (kind, client), latencies in latency.items():
        name = "bare kafka-python loop" if kind == "bare" else f"daemon ({client}), batch_size=1"
        p50, p90, p99 = np.percentile(latencies, [50, 90, 99]) if latencies.size else (float("nan"),) * 3
        lines.append(f"| {name} | {p50:.1f} | {p90:.1f} | {p99:.1f} | {latencies.max(initial=0):.1f} | "
                     f"{latencies.size} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser(__doc__).parse_args()
    print(main())
