"""The daemon's own work per message, without Kafka: a partition task on recorded messages.

``PartitionTask.process`` (parse and validate, predict, learn, encode the output) on 30,000
recorded score messages in polls of 500, as the daemon hands them over, for ``batch_size`` 1 and
64, and with the group-robust post-processor, which keeps each id until its label comes (no labels
come here: its table is full, 4,000 ids, from the 4,100th message on).  Baseline, measured in the
same run: decoding every message with ``json.loads`` and encoding an output of the same fields
with ``json.dumps`` (the task decodes score messages with orjson, and encodes with a template of
its own).  Rates are per second of the process's CPU time (best of three runs, fresh tasks).  The
goal is at most 10 µs of own work per message at ``batch_size=1``.

Run: ``python benchmarks/bench_task.py`` or ``streamfair bench task``.
"""

from __future__ import annotations

import json
import time
from collections import namedtuple

import numpy as np
from command_line import parser  # benchmarks/command_line.py
from timing import best_seconds  # benchmarks/timing.py

from connectors.kafka.codec import InputParser
from connectors.kafka.postprocessor_config import PostProcessorConfig
from connectors.kafka.task import PartitionTask

N_MESSAGES = 30_000
POLL = 500
GOAL_US = 10.0
#: The group-robust contender: the daemon's default post-processor with ``postprocessor.robust = true``,
#: whose table of ids waiting for labels is full (4,000) from the 4,100th message on.
ROBUST = ", group-robust (4,000 ids waiting)"
Record = namedtuple("Record", "topic partition offset timestamp key value headers")


def recorded(n: int, seed: int = 0) -> list[Record]:
    """``n`` score messages (``id``, ``eta``, ``tau``) of one partition, as a consumer returns them."""
    rng = np.random.default_rng(seed)
    eta, s = np.tanh(rng.standard_normal(n)), rng.random(n) < 0.3
    tau = np.clip(np.where(s, 0.8, 0.2) + 0.1 * rng.standard_normal(n), 0.01, 0.99)
    records = []
    for i in range(n):
        value = json.dumps({"id": f"m{i}", "eta": float(eta[i]), "tau": [float(1 - tau[i]), float(tau[i])]})
        records.append(Record("in", 0, i, 1_000 + i, f"m{i}".encode(), value.encode(), []))
    return records


def per_message_us(run, n: int) -> float:
    return 1e6 * best_seconds(run, clock=time.process_time) / n


def main() -> str:
    records = recorded(N_MESSAGES)
    polls = [records[start : start + POLL] for start in range(0, N_MESSAGES, POLL)]

    def baseline():
        for record in records:
            body = json.loads(record.value)
            json.dumps({"id": body["id"], "prediction": body["eta"], "eta": body["eta"], "state_version": 0,
                        "partition": 0, "offset": record.offset}).encode()

    def task(batch_size: int, robust: bool = False):
        def run():
            fair = PostProcessorConfig(B=1, p=[0.7, 0.3], robust=robust).build()
            task = PartitionTask("in", 0, fair, parser=InputParser(2, 10_000), batch_size=batch_size)
            for poll in polls:
                task.process(poll)
        return run

    task(1)()  # compiled functions loaded before any timing
    task(1, robust=True)()
    base = per_message_us(baseline, N_MESSAGES)
    lines = ["| contender | CPU µs per message | vs JSON decode + encode | goal |", "|---|---:|---:|---|",
             f"| JSON decode + encode (baseline) | {base:.2f} | 1.0x | |"]
    for batch_size, robust in ((1, False), (64, False), (1, True)):
        us = per_message_us(task(batch_size, robust), N_MESSAGES)
        goal = f"≤ {GOAL_US:.0f} µs" if batch_size == 1 else ""
        name = f"partition task, `batch_size={batch_size}`" + (ROBUST if robust else "")
        lines.append(f"| {name} | {us:.2f} | {us / base:.1f}x | {goal} |")
    return "\n".join(lines)


if __name__ == "__main__":
    parser(__doc__).parse_args()
    print(main())
