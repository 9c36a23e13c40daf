"""A partition task's memory does not grow with the stream: nothing is kept per message.

The daemon runs for as long as its stream does, so a task may keep what its post-processor keeps
(fixed-size state, at most ``max_pending`` ids waiting for a label), and nothing per message it
has handled.  Measured with ``tracemalloc`` after a warm-up, over two lengths of stream.
"""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

from connectors.kafka.codec import InputParser
from connectors.kafka.task import PartitionTask
from streamfair import FairClassificationPostProcessor, FairRegressionPostProcessor
from streamfair.dro import GroupRobustFairRegressionPostProcessor
from tests.support.consumer_records import Record

POLL = 500
WARM_UP, SHORT, LONG = 3_000, 3_000, 9_000
#: Growth allowed between the short and the long run (6,000 messages apart): 10 bytes per message.
#: Measured without a leak: up to 17 kB either way, not growing with the stream; keeping one float
#: per message in a list would add 190 kB.
ALLOWED_BYTES = 60_000


def _records(start: int, n: int, classification: bool) -> list[Record]:
    rng = np.random.default_rng(start)
    out = []
    for i in range(start, start + n):
        tau1 = float(rng.uniform(0.05, 0.95))
        body: dict = {"id": f"m{i}", "tau": [1 - tau1, tau1], "distribution": i % 50 == 0}
        score = float(np.tanh(rng.standard_normal()))
        if classification:
            body["proba"] = [(1 - score) / 2, (1 + score) / 2]
        else:
            body["eta"] = score
        value = json.dumps(body).encode() if i % 37 else b"not json"  # a dead letter now and then
        out.append(Record("in", 0, i, i, None, value, []))
    return out


TASKS = {
    "regression": lambda: (FairRegressionPostProcessor(n_groups=2), 1, None),
    "regression, batch_size=64": lambda: (FairRegressionPostProcessor(n_groups=2), 64, None),
    "classification": lambda: (FairClassificationPostProcessor(n_classes=2, n_groups=2), 1, 2),
    "group-robust, max_pending=1000": lambda: (GroupRobustFairRegressionPostProcessor(n_groups=2, max_pending=1000),
                                               1, None),
}


def _grown(case: str, n: int) -> int:
    """Bytes traced after the warm-up and ``n`` more messages, minus those traced after the warm-up."""
    fair, batch_size, n_classes = TASKS[case]()
    task = PartitionTask("in", 0, fair, parser=InputParser(2, 10_000, n_classes=n_classes), batch_size=batch_size)
    classification = n_classes is not None
    stream = _records(0, WARM_UP + n, classification)
    tracemalloc.start()
    try:
        for start in range(0, WARM_UP, POLL):
            task.process(stream[start : start + POLL])
        task.checkpoint()
        before = tracemalloc.get_traced_memory()[0]
        for start in range(WARM_UP, WARM_UP + n, POLL):
            task.process(stream[start : start + POLL])
        task.checkpoint()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("case", sorted(TASKS))
def test_a_task_keeps_nothing_per_message(case):
    short, long = _grown(case, SHORT), _grown(case, LONG)
    assert long - short < ALLOWED_BYTES, (short, long)
