"""Failure paths of the daemon on the real broker: checkpoints never pair a state with the wrong offset."""

from __future__ import annotations

import json

from connectors.daemon import Daemon
from test_daemon_kafka import _ensure, checkpoints, messages, produce, read_topic, settings


def _items(stream, bad_every: int = 0):
    items = []
    for i, (partition, ident, body) in enumerate(stream):
        value = json.dumps(body).encode()
        if bad_every and i % bad_every == bad_every - 1:
            value = b"{not json"
        items.append((partition, str(ident).encode(), value, None))
    return items


def _valid_before(items, partition: int, offset: int) -> int:
    """Valid messages of ``partition`` before ``offset`` (what a state covering that offset has learned)."""
    values = [value for p, _, value, _ in items if p == partition][:offset]
    return sum(value != b"{not json" for value in values)


def test_an_output_the_producer_refuses_is_dead_lettered_and_checkpoints_stay_exact(kafka_broker):
    values = settings(kafka_broker, "refused", **{"kafka.max_poll_records": 50})
    config = _ensure(kafka_broker, values)
    items = _items(messages(600, seed=21))
    produce(kafka_broker, config.topics.input, items)
    daemon = Daemon(config)
    send = daemon._emit
    calls = []

    def refusing(key, value, timestamp, partition):
        calls.append(key)
        if len(calls) % 97 == 0:  # mid-poll, after the poll's state has been computed
            raise RuntimeError("refused by the producer")
        send(key, value, timestamp, partition)

    daemon._emit = refusing
    assert daemon.run(once=True) == 0
    outputs = read_topic(kafka_broker, config.topics.output)
    dead = read_topic(kafka_broker, config.topics.dead_letter)
    assert len(dead) == 600 // 97 and len(outputs) + len(dead) == 600
    assert {dict(r.headers)["streamfair.error_type"] for r in dead} == {b"RuntimeError"}
    for partition, history in checkpoints(kafka_broker, config.topics.changelog).items():
        assert all(n_samples == offset for offset, n_samples in history), history  # every sample learned once


def test_a_failure_of_the_daemon_itself_mid_poll_goes_back_to_the_last_checkpoint(kafka_broker):
    values = settings(kafka_broker, "midpoll", **{"kafka.max_poll_records": 40,
                                                   "processing.checkpoint_every_messages": 60})
    config = _ensure(kafka_broker, values)
    items = _items(messages(450, seed=22), bad_every=23)
    produce(kafka_broker, config.topics.input, items)
    daemon = Daemon(config)
    dead_letter = daemon._dead
    failures = []

    def failing_once(record, *args):
        if not failures and record.offset > 30:  # after a checkpoint, with outputs of the poll already queued
            failures.append(record.offset)
            raise RuntimeError("dead-letter path broken once")
        dead_letter(record, *args)

    daemon._dead = failing_once
    assert daemon.run(once=True) == 0
    assert failures and daemon.stats.rewinds >= 1 and daemon.stats.errors["process_failed"] == 1
    outputs = read_topic(kafka_broker, config.topics.output)
    answered = {json.loads(r.value)["id"] for r in outputs}
    assert len(answered) == 450 - 450 // 23  # every valid message answered (replays are duplicates)
    for partition, history in checkpoints(kafka_broker, config.topics.changelog).items():
        for offset, n_samples in history:  # the state has learned exactly the valid messages before offset
            assert n_samples == _valid_before(items, partition, offset), (partition, offset, n_samples)
