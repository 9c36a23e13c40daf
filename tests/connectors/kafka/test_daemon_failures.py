"""Failure paths of the daemon on the real broker: checkpoints never pair a state with the wrong offset."""

from __future__ import annotations

import io
import json

import pytest
from kafka.admin import KafkaAdminClient

from connectors.kafka.checkpoint import checkpoint_key
from connectors.kafka.config import load_config
from connectors.kafka.logs import setup_logging
from connectors.kafka.loop import Daemon
from connectors.kafka.observer import DaemonObserver
from connectors.kafka.partitions import EXIT_CHECKPOINT_UNREADABLE, SyntheticRecord
from connectors.kafka.positions import EXIT_OUT_OF_RANGE
from connectors.kafka.transport import RecordRefused, TopicPartition
from tests.support.daemon_process import wait_for
from tests.support.kafka_daemon import (
    EventLog,
    OneProducer,
    checkpoints,
    ensure_topics_for,
    messages,
    produce,
    produce_messages,
    read_topic,
    settings,
)


class RefusingEvery:
    """A transport whose producers refuse every ``n``-th record for ``topic`` (``RuntimeError``), mid-poll."""

    def __init__(self, n: int, topic: str, transport):
        self.n, self.topic, self.transport, self.count = n, topic, transport, 0

    def producer(self, config, transactional_id=None):
        producer = self.transport.producer(config, transactional_id)
        send = producer.send

        def refusing(topic, **record):
            if topic == self.topic:
                self.count += 1
                if self.count % self.n == 0:  # after the poll's state has been computed
                    raise RuntimeError("refused by the producer")
            send(topic, **record)

        producer.send = refusing
        return producer


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
    config = ensure_topics_for(kafka_broker, values)
    items = _items(messages(600, seed=21))
    produce(kafka_broker, config.topics.input, items)
    daemon = Daemon(config)
    daemon.sender.transport = RefusingEvery(97, config.topics.output, daemon.sender.transport)
    assert daemon.run(once=True) == 0
    outputs = read_topic(kafka_broker, config.topics.output)
    dead = read_topic(kafka_broker, config.topics.dead_letter)
    assert len(dead) == 600 // 97 and len(outputs) + len(dead) == 600
    assert {dict(r.headers)["streamfair.error_type"] for r in dead} == {b"RuntimeError"}
    for history in checkpoints(kafka_broker, config.topics.changelog).values():
        assert all(n_samples == offset for offset, n_samples in history), history  # every sample learned once


def test_a_failure_of_the_daemon_itself_mid_poll_goes_back_to_the_last_checkpoint(kafka_broker):
    values = settings(kafka_broker, "midpoll", **{"kafka.max_poll_records": 40,
                                                   "processing.checkpoint_every_messages": 60})
    config = ensure_topics_for(kafka_broker, values)
    items = _items(messages(450, seed=22), bad_every=23)
    produce(kafka_broker, config.topics.input, items)
    daemon = Daemon(config)
    dead_letter = daemon.sender.send_dead_letter
    failures = []

    def failing_once(dead):
        if not failures and dead.source.offset > 30:  # after a checkpoint, with outputs of earlier polls queued
            failures.append(dead.source.offset)
            raise RuntimeError("dead-letter path broken once")
        dead_letter(dead)

    daemon.sender.send_dead_letter = failing_once
    assert daemon.run(once=True) == 0
    assert failures and daemon.stats.rewinds >= 1 and daemon.stats.errors["process_failed"] == 1
    outputs = read_topic(kafka_broker, config.topics.output)
    answered = {json.loads(r.value)["id"] for r in outputs}
    assert len(answered) == 450 - 450 // 23  # every valid message answered (replays are duplicates)
    for partition, history in checkpoints(kafka_broker, config.topics.changelog).items():
        for offset, n_samples in history:  # the state has learned exactly the valid messages before offset
            assert n_samples == _valid_before(items, partition, offset), (partition, offset, n_samples)


INPUT = "streamfair.input"


class LogConsumer:
    """A group consumer over in-memory logs of topic partitions: a poll hands out all that is left
    after each position of the partitions not paused, a seek moves it."""

    def __init__(self, logs: dict[TopicPartition, list]):
        self.logs, self.positions, self.paused = logs, dict.fromkeys(logs, 0), set()

    def poll(self, timeout_ms):
        batch = {tp: log[self.positions[tp]:] for tp, log in self.logs.items()
                 if tp not in self.paused and self.positions[tp] < len(log)}
        for tp, records in batch.items():
            self.positions[tp] += len(records)
        return batch

    def pause(self, partitions):
        self.paused.update(partitions)

    def resume(self, partitions):
        self.paused.difference_update(partitions)

    def seek(self, tp, offset):
        self.positions[tp] = offset

    def position(self, tp):
        return self.positions[tp]

    def beginning_offsets(self, partitions):
        return dict.fromkeys(partitions, 0)

    def topic_id(self, topic):
        return None

    def highwater(self, tp):
        return len(self.logs[tp])

    def commit(self, offsets, asynchronous=False):
        pass


class Outputs:
    """A producer keeping the ids of the outputs it is given."""

    def __init__(self):
        self.ids = []

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        if topic == "streamfair.output":
            self.ids.append(json.loads(value)["id"])

    def flush(self, timeout=None):
        pass


def test_a_failure_mid_poll_before_any_checkpoint_goes_back_to_where_each_partition_was_read():
    """The poll's first failing partition came first: the partitions after it in the same poll, never
    processed, had no position to go back to, and their records were skipped."""
    daemon = Daemon(load_config(env={}, overrides=["processing.checkpoint_every_seconds=3600"]))
    producer = Outputs()
    daemon.sender.transport = OneProducer(producer)
    daemon.sender.renew()
    good = [json.dumps({"id": f"p1-{i}", "eta": 0.1, "tau": [0.5, 0.5]}).encode() for i in range(5)]
    daemon._consumer = LogConsumer({
        TopicPartition(INPUT, 0): [SyntheticRecord(INPUT, 0, 0, 0, None, b"not json", [])],
        TopicPartition(INPUT, 1): [SyntheticRecord(INPUT, 1, i, 0, None, v, []) for i, v in enumerate(good)]})
    for p in (0, 1):
        daemon.partitions.tasks[p] = daemon.partitions.new_task(p, None)  # fresh: no checkpoint yet
    send_dead_letter, failures = daemon.sender.send_dead_letter, []

    def failing_once(dead):
        if not failures:
            failures.append(dead)
            raise RuntimeError("dead-letter path broken once")
        send_dead_letter(dead)

    daemon.sender.send_dead_letter = failing_once
    for _ in range(3):
        daemon._iterate()
    assert daemon.stats.rewinds == 1 and daemon.stats.dead_letters == {"invalid_json": 1}
    assert producer.ids == [f"p1-{i}" for i in range(5)]


FEEDBACK = "streamfair.feedback"


def _daemon_reading_labels() -> tuple[Daemon, Outputs]:
    """A daemon of the group-robust post-processor reading labels from ``FEEDBACK``, its outputs kept."""
    daemon = Daemon(load_config(env={}, overrides=[f"topics.feedback={FEEDBACK}", "postprocessor.robust=true",
                                                   "processing.checkpoint_every_seconds=3600"]))
    producer = Outputs()
    daemon.sender.transport = OneProducer(producer)
    daemon.sender.renew()
    return daemon, producer


def test_a_failure_after_a_checkpoint_of_feedback_alone_goes_back_to_where_the_input_was_read():
    """A fresh task that had read only feedback was checkpointed without an input offset.  A failure
    after it had read input went back to that checkpoint, a state that learned none of that input,
    without seeking the input: the records since were skipped, and the next checkpoint claimed them."""
    daemon, producer = _daemon_reading_labels()
    label = json.dumps({"id": "earlier", "y": 0.3}).encode()
    inputs = [json.dumps({"id": f"m{i}", "eta": 0.1 * i, "tau": [0.5, 0.5]}).encode() for i in range(8)]
    read, labels = TopicPartition(INPUT, 0), TopicPartition(FEEDBACK, 0)
    logs = {read: [], labels: [SyntheticRecord(FEEDBACK, 0, 0, 0, None, label, [])]}
    daemon._consumer = LogConsumer(logs)
    daemon.partitions.tasks[0] = daemon.partitions.new_task(0, None)  # fresh: no checkpoint yet
    daemon._iterate()  # the label alone
    assert daemon.checkpoints.checkpoint() and daemon.partitions.tasks[0].offset is None
    logs[read] = [SyntheticRecord(INPUT, 0, i, 0, None, v, []) for i, v in enumerate(inputs[:5])]
    send_dead_letter, failures = daemon.sender.send_dead_letter, []

    def failing_once(dead):
        failures.append(dead)
        raise RuntimeError("dead-letter path broken once")

    daemon.sender.send_dead_letter = failing_once
    logs[read].append(SyntheticRecord(INPUT, 0, 5, 0, None, b"not json", []))
    daemon._iterate()  # m0..m4 processed, then the failure: back to the checkpoint of the label alone
    daemon.sender.send_dead_letter = send_dead_letter
    logs[read] += [SyntheticRecord(INPUT, 0, i, 0, None, v, []) for i, v in enumerate(inputs[6:], 6)]
    for _ in range(3):
        daemon._iterate()
    assert len(failures) == 1 and daemon.stats.rewinds == 1
    assert daemon.checkpoints.checkpoint()
    task = daemon.partitions.tasks[0]
    assert (task.offset, task.fair.n_samples) == (8, 7)  # every valid record before offset 8, learned once
    assert producer.ids == [f"m{i}" for i in range(5)] + ["m6", "m7"]  # the failed poll sent nothing


def test_after_a_rewind_feedback_waits_until_the_input_is_read_again_as_far_as_before():
    """The replay of a rewind answers what was answered before with the state it had then: the label
    read before the failure is read again only once the input is back where it was."""
    daemon, producer = _daemon_reading_labels()
    read, labels = TopicPartition(INPUT, 0), TopicPartition(FEEDBACK, 0)
    consumer = daemon._consumer = LogConsumer({
        read: [SyntheticRecord(INPUT, 0, i, 0, None, json.dumps({"id": f"m{i}", "eta": 0.1 * i, "tau": [0.5, 0.5]})
                               .encode(), []) for i in range(5)],
        labels: [SyntheticRecord(FEEDBACK, 0, 0, 0, None, b'{"id": "m1", "y": 0.3}', [])]})
    daemon.partitions.tasks[0] = daemon.partitions.new_task(0, None)  # fresh: no checkpoint yet
    daemon._iterate()  # the inputs and the label
    assert daemon.stats.feedback == 1 and daemon.feedback_hold.until == {}
    daemon.sender.fail(RuntimeError("a send failed"))
    daemon._iterate()  # back to the start; the input is read again, not the label
    assert daemon.stats.rewinds == 1 and daemon.stats.feedback == 1
    assert daemon.feedback_hold.until == {0: 5} and consumer.paused == {labels}
    daemon._iterate()  # the input is where it was: the label is read again
    assert daemon.stats.feedback == 2 and daemon.feedback_hold.until == {} and not consumer.paused
    assert producer.ids == [f"m{i}" for i in range(5)] * 2
    assert daemon.checkpoints.checkpoint() and daemon.partitions.tasks[0].labels_applied == 1


def test_feedback_held_for_a_log_the_broker_lost_is_released_when_the_input_moves_to_the_new_log():
    """The replay end of a rewind lies in the lost log: waiting for the new log to reach it would stall
    the feedback for as long as that takes."""
    daemon, _ = _daemon_reading_labels()
    read, labels = TopicPartition(INPUT, 0), TopicPartition(FEEDBACK, 0)
    inputs = [json.dumps({"id": f"m{i}", "eta": 0.1 * i, "tau": [0.5, 0.5]}).encode() for i in range(5)]
    consumer = daemon._consumer = daemon._restorer = LogConsumer({
        read: [SyntheticRecord(INPUT, 0, i, 0, None, v, []) for i, v in enumerate(inputs)],
        labels: [SyntheticRecord(FEEDBACK, 0, 0, 0, None, b'{"id": "m1", "y": 0.3}', [])]})
    task = daemon.partitions.tasks[0] = daemon.partitions.new_task(0, None)
    task.offset = 100  # the last checkpoint, in the log the broker has lost (the new one has 5 records)
    consumer.seek(read, 200)  # read up to there before a failure
    daemon.feedback_hold.rewound([0])
    consumer.seek(read, task.offset)
    assert daemon.feedback_hold.until == {0: 200} and consumer.paused == {labels}
    daemon._iterate()  # processing.out_of_range moves the input to the new log's start
    assert task.offset == 0 and daemon.feedback_hold.until == {} and not consumer.paused
    daemon._iterate()
    assert (daemon.stats.consumed, daemon.stats.feedback) == (5, 1)


class RefusingBroker:
    """A producer whose broker refuses the records ``refuses(topic, value, headers)`` names: each is
    reported to its ``on_error`` when the producer flushes, after the poll that sent it."""

    def __init__(self, refuses):
        self.refuses, self.pending, self.delivered = refuses, [], []

    def send(self, topic, *, key, value, partition=None, timestamp_ms=None, headers=None, on_error=None):
        self.pending.append((topic, value, dict(headers or []), on_error))

    def flush(self, timeout=None):
        pending, self.pending = self.pending, []
        for topic, value, headers, on_error in pending:
            if self.refuses(topic, value, headers):
                on_error(RecordRefused("INVALID_TIMESTAMP: Broker: Invalid timestamp"))
            else:
                self.delivered.append((topic, value, headers))

    def close(self, timeout=None):
        pass


def test_records_the_broker_refuses_are_dead_lettered_after_a_replay_that_identifies_them():
    """The broker refuses an output, a dead letter with its bytes, and a dead letter in any form.
    Each refusal failed the interval and its replay was refused again: the daemon rewound for ever."""
    daemon = Daemon(load_config(env={}, overrides=["processing.checkpoint_every_seconds=3600"]))
    output, dead_letter = daemon.config.topics.output, daemon.config.topics.dead_letter

    def refuses(topic, value, headers):
        if topic == output:
            return json.loads(value)["id"] == "m3"
        source = headers.get("streamfair.source.offset")
        return topic == dead_letter and (source == b"8" or (source == b"9" and value is not None))

    broker = RefusingBroker(refuses)
    daemon.sender.transport = OneProducer(broker)
    daemon.sender.renew()
    inputs = [json.dumps({"id": f"m{i}", "eta": 0.1 * i, "tau": [0.5, 0.5]}).encode() for i in range(8)]
    log = [SyntheticRecord(INPUT, 0, i, 0, None, v, []) for i, v in enumerate(inputs + [b"not json", b"{"])]
    daemon._consumer = LogConsumer({TopicPartition(INPUT, 0): log})
    daemon.partitions.tasks[0] = daemon.partitions.new_task(0, None)
    checkpointed = []
    for _ in range(6):
        daemon._iterate()
        broker.delivered.clear()  # what the last replay delivered, before the checkpoint that succeeds
        if daemon.checkpoints.checkpoint():
            checkpointed.append(daemon.stats.rewinds)
            break
    # refused first (which record?), identified by the first replay, dead-lettered by the second;
    # offset 8's dead letter was refused without its bytes, then without the source's key and headers
    # too, and the fourth replay drops it
    assert checkpointed == [4]
    task = daemon.partitions.tasks[0]
    assert (task.offset, task.fair.n_samples) == (10, 8)  # m3's prediction was made: it stays learned
    answered = [json.loads(value)["id"] for topic, value, _ in broker.delivered if topic == output]
    assert answered == [f"m{i}" for i in range(8) if i != 3]
    dead = {headers["streamfair.source.offset"]: (value, headers) for topic, value, headers in broker.delivered
            if topic == dead_letter}
    assert sorted(dead) == [b"3", b"9"]
    value, headers = dead[b"3"]
    assert value == inputs[3] and headers["streamfair.reason"] == b"processing_error"
    assert headers["streamfair.error_type"] == b"RecordRefused"
    value, headers = dead[b"9"]
    assert value is None and headers["streamfair.reason"] == b"invalid_json"
    assert headers["streamfair.value_dropped"].startswith(b"refused by the broker (INVALID_TIMESTAMP")
    assert daemon.stats.errors["dead_letter_refused"] == 1 and daemon.sender.refused == {}


class LosesItsPartitionsOnce(DaemonObserver):
    """After ``after`` records, the group takes every partition away (its membership lost: no
    checkpoint) and gives them back, as kafka-python reports it: the consumer itself reads on."""

    def __init__(self, after: int):
        self.after, self.done = after, False

    def on_loop(self, daemon) -> None:
        if not self.done and daemon.stats.consumed >= self.after:
            self.done = True
            owned = sorted(daemon.consumer.assignment())
            daemon.partitions.revoked(owned, lost=True)
            daemon.partitions.assigned(owned)


def test_a_partition_given_back_without_a_checkpoint_is_read_again_from_the_committed_offset(kafka_broker):
    """kafka-python keeps the position of a partition the group assigns to it again.  The task of
    such a partition, lost before its first checkpoint, starts empty: it must read from the group's
    committed offset (none here: the log's start), or what its predecessor read is never learned."""
    values = settings(kafka_broker, "given-back", **{"kafka.max_poll_records": 50,
                                                     "processing.checkpoint_every_messages": 10**6,
                                                     "processing.checkpoint_every_seconds": 3600.0})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(600, seed=22)
    produce_messages(kafka_broker, config.topics.input, stream)
    observer = LosesItsPartitionsOnce(after=300)
    daemon = Daemon(config, observers=[observer])
    assert daemon.run(once=True) == 0 and observer.done
    assert daemon.stats.consumed > 600  # read again from the start
    final = {p: history[-1] for p, history in checkpoints(kafka_broker, config.topics.changelog).items()}
    assert final == {p: (200, 200) for p in range(3)}  # every record learned, once
    answered = {json.loads(r.value)["id"] for r in read_topic(kafka_broker, config.topics.output)}
    assert answered == {ident for _, ident, _ in stream}


def _recreate(broker, topic: str) -> None:
    """Delete ``topic`` and create it again, empty (as a broker that lost its data would)."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.delete_topics([topic])
        wait_for(lambda: topic not in admin.list_topics(), 10, f"{topic} to go")
        admin.create_topics({topic: {"num_partitions": 3, "replication_factor": 1}})
    finally:
        admin.close()


def _recreate_input(broker, config, n_new: int, seed: int) -> list:
    """The input topic created again, with ``n_new`` new messages."""
    _recreate(broker, config.topics.input)
    stream = messages(n_new, seed=seed, prefix=f"new{seed}-")
    produce_messages(broker, config.topics.input, stream)
    return stream


@pytest.mark.parametrize("policy, n_new", [("earliest", 60), ("earliest", 900), ("latest", 60), ("fail", 60)])
def test_a_checkpoint_of_a_lost_input_log_is_detected_and_handled_by_the_policy(kafka_broker, policy, n_new):
    values = settings(kafka_broker, f"lostlog-{policy}-{n_new}", **{"processing.out_of_range": policy})
    config = ensure_topics_for(kafka_broker, values)
    produce_messages(kafka_broker, config.topics.input, messages(300, seed=31))
    assert Daemon(config).run(once=True) == 0  # checkpoints at offset 100 of every partition
    stream = _recreate_input(kafka_broker, config, n_new, seed=32)
    stream_ids = {ident for _, ident, _ in stream if isinstance(ident, str)}  # (integer ids repeat across runs)

    lines = io.StringIO()
    daemon = Daemon(config, logger=setup_logging("INFO", stream=lines, name=f"lostlog-{policy}-{n_new}"))
    code = daemon.run(once=True)
    events = [json.loads(line) for line in lines.getvalue().splitlines()]
    errors = [e for e in events if e["event"] == "position_out_of_range"]
    assert errors and all(e["level"] == "error" and e["position"] == 100 for e in errors)
    answered = {json.loads(r.value)["id"] for r in read_topic(kafka_broker, config.topics.output)} & stream_ids
    assert len(errors) == 3 and {e["partition"] for e in errors} == {0, 1, 2}
    if policy == "fail":
        assert code == EXIT_OUT_OF_RANGE and not answered
        return
    assert code == 0
    if n_new < 300:  # the old position is beyond the new log's end (librdkafka may not have fetched it yet)
        unknown = (None,) if kafka_broker.kafka_client == "confluent" else ()
        assert all(e["high_watermark"] in (n_new // 3, *unknown) for e in errors)
    if policy == "earliest":
        assert answered == stream_ids  # the whole new log, from its start
    else:
        assert not answered  # from the end: nothing yet
        produce_messages(kafka_broker, config.topics.input, later := messages(30, seed=33, prefix="later"))
        assert Daemon(config).run(once=True) == 0
        answered = {json.loads(r.value)["id"] for r in read_topic(kafka_broker, config.topics.output)}
        assert answered >= {ident for _, ident, _ in later if isinstance(ident, str)}


def test_a_feedback_position_beyond_the_feedback_log_is_detected_and_reset(kafka_broker):
    values = settings(kafka_broker, "lostfeedback", **{"topics.feedback": "daemon-lostfeedback.feedback",
                                                        "postprocessor.robust": True})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(300, seed=34)
    produce_messages(kafka_broker, config.topics.input, stream)
    labels = [(p, b"f", json.dumps({"id": ident, "y": 0.1}).encode(), None) for p, ident, _ in stream]
    produce(kafka_broker, config.topics.feedback, labels)
    assert Daemon(config).run(once=True) == 0
    assert {p: points[-1][0] for p, points in checkpoints(kafka_broker, config.topics.changelog).items()} == {
        0: 100, 1: 100, 2: 100}
    _recreate(kafka_broker, config.topics.feedback)
    produce(kafka_broker, config.topics.feedback, labels[:30])  # 10 per partition in the new log

    lines = io.StringIO()
    daemon = Daemon(config, logger=setup_logging("INFO", stream=lines, name="lostfeedback"))
    assert daemon.run(once=True) == 0
    errors = [json.loads(line) for line in lines.getvalue().splitlines()]
    errors = [e for e in errors if e["event"] == "position_out_of_range"]
    assert sorted((e["topic"], e["partition"], e["position"], e["high_watermark"]) for e in errors) == [
        (config.topics.feedback, p, 100, 10) for p in range(3)]
    latest = {}
    for record in read_topic(kafka_broker, config.topics.changelog):
        point = json.loads(record.value)
        latest[point["partition"]] = point["feedback_offset"]
    assert latest == {0: 10, 1: 10, 2: 10}  # the new feedback log was read from its start


def test_an_unreadable_checkpoint_stops_the_daemon_naming_it_and_a_tombstone_starts_it_afresh(kafka_broker):
    values = settings(kafka_broker, "unreadable")
    config = ensure_topics_for(kafka_broker, values)
    produce_messages(kafka_broker, config.topics.input, messages(300, seed=41))
    assert Daemon(config).run(once=True) == 0  # checkpoints and committed offsets at 100 in every partition
    key = checkpoint_key(config.topics.input, 1)
    # a manifest whose parts are gone (as retention on a changelog that is not compacted leaves one)
    manifest = b'{"format":"streamfair.checkpoint-parts/1","digest":"00","parts":2,"bytes":10}'
    produce(kafka_broker, config.topics.changelog, [(1, key, manifest, None)])
    later = messages(90, seed=42, prefix="later")
    produce_messages(kafka_broker, config.topics.input, later)

    log = EventLog("unreadable")
    assert Daemon(config, logger=log.logger).run(once=True) == EXIT_CHECKPOINT_UNREADABLE
    [error] = log.fields("checkpoint_unreadable")
    assert (error["partition"], error["key"], error["changelog"]) == (1, key.decode(), config.topics.changelog)
    assert f"delete key {key.decode()!r} (a tombstone)" in error["fix"]
    later_ids = {ident for _, ident, _ in later if isinstance(ident, str)}  # (integer ids repeat across streams)
    assert not {json.loads(r.value)["id"] for r in read_topic(kafka_broker, config.topics.output)} & later_ids

    produce(kafka_broker, config.topics.changelog, [(1, key, None, None)])  # the fix the error names
    assert Daemon(config).run(once=True) == 0
    served = {out["id"]: out for out in (json.loads(r.value) for r in read_topic(kafka_broker, config.topics.output))}
    assert later_ids <= set(served)
    first = {p: served[ident] for p, ident, _ in reversed(later) if ident in later_ids}  # each partition's first
    assert first[1]["state_version"] == first[1]["offset"] - 100  # afresh, from the committed offset 100
    assert all(first[p]["state_version"] == first[p]["offset"] for p in (0, 2))  # the others continue
