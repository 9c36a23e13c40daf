"""SSO trained from a labelled Kafka topic on the real (Tansu) broker, in batches of 125."""

from __future__ import annotations

import json

import numpy as np
import pytest
from kafka import KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient

from connectors.kafka.sso_stream import SSOStream, decode_labelled
from connectors.prometheus import SurrogateMetrics
from streamfair.surrogates import SGD, SSO

N, D, B = 4000, 20, 125
WINDOW = 4  # batches averaged into the prequential loss


def near_interpolating_stream(seed: int = 0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((N, D)) * np.logspace(0, -1, D)
    y = X @ rng.standard_normal(D) + 0.01 * rng.standard_normal(N)
    return X, y


def fill_topic(bootstrap: str, topic: str, values, **producer_settings) -> None:
    """Create the one-partition ``topic`` and write ``values`` (bytes) to it in order, acknowledged by all."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics({topic: {"num_partitions": 1, "replication_factor": 1}})
        admin.wait_for_topics([topic])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", **producer_settings)
    for value in values:
        producer.send(topic, value)
    producer.flush()
    producer.close()


@pytest.fixture(scope="module")
def labelled_topic(kafka_broker):
    """A one-partition topic holding the stream as ``{"x": [...], "y": ...}`` records."""
    topic = "sso-stream-labelled"
    X, y = near_interpolating_stream()
    records = (json.dumps({"x": row.tolist(), "y": label}).encode() for row, label in zip(X, y, strict=True))
    fill_topic(kafka_broker.bootstrap, topic, records, linger_ms=5)
    return kafka_broker.bootstrap, topic, X, y


def prequential(stream: SSOStream) -> np.ndarray:
    """Trailing mean over WINDOW batches of the loss each batch had before it was learned."""
    losses = np.array([s.step.loss_at_z for s in stream.steps])
    return np.convolve(losses, np.ones(WINDOW) / WINDOW, mode="valid")


def test_m1_is_bit_identical_to_sgd_and_m10_needs_half_the_batches(labelled_topic):
    bootstrap, topic, X, y = labelled_topic
    alpha = 1.0 / np.linalg.eigvalsh(X.T @ X / N)[-1]  # the population 1/L_theta: a well-tuned SGD step
    metrics = SurrogateMetrics(models=["m1", "m10"])
    with SSOStream(bootstrap, topic, "sso-m1", SSO(D, m=1, eta=0.5, alpha=alpha), metrics=metrics,
                   model="m1") as one:
        one.run()
    with SSOStream(bootstrap, topic, "sso-m10", SSO(D, m=10, eta=0.5), metrics=metrics, model="m10") as ten:
        ten.run()
    n_batches = N // B
    assert len(one.steps) == len(ten.steps) == n_batches
    # the batches are the topic's records in order, 125 at a time
    for k, step in enumerate(one.steps):
        assert (step.first_offset, step.last_offset) == (k * B, k * B + B - 1)
        assert np.array_equal(step.X, X[k * B:(k + 1) * B]) and np.array_equal(step.y, y[k * B:(k + 1) * B])

    sgd = SGD(D, alpha=alpha)
    for k in range(n_batches):
        sgd.step(X[k * B:(k + 1) * B], y[k * B:(k + 1) * B])
    assert np.array_equal(one.sso.theta, sgd.theta)  # bit for bit, not approximately

    final_m1 = prequential(one)[-1]
    curve_m10 = prequential(ten)
    reached = int(np.argmax(curve_m10 <= final_m1)) + WINDOW  # batches used when the m = 10 curve gets there
    assert curve_m10.min() <= final_m1, (curve_m10, final_m1)
    assert reached <= n_batches // 2, (reached, curve_m10, final_m1)
    # and m = 10 is not merely lucky: m = 1 had not got there at the same point
    assert prequential(one)[reached - WINDOW] > final_m1

    # the wrapper exported both runs
    get = metrics.registry.get_sample_value
    assert get("streamfair_sso_oracle_calls_total", {"model": "m1"}) == n_batches
    assert get("streamfair_sso_inner_steps_total", {"model": "m10"}) == 10 * n_batches
    last = ten.steps[-1].step
    assert get("streamfair_sso_projection_gap", {"model": "m10"}) == last.projection_gap
    assert get("streamfair_sso_batch_loss", {"model": "m1"}) == one.steps[-1].step.loss_at_z


def test_resume_from_committed_offsets_is_deterministic(labelled_topic):
    """Stopping after 10 batches and resuming the group gives the uninterrupted run's state bit for bit."""
    bootstrap, topic, X, y = labelled_topic
    whole = SSO(D, m=10, eta=0.5)
    with SSOStream(bootstrap, topic, "sso-whole", whole) as stream:
        stream.run()
    resumed = SSO(D, m=10, eta=0.5)
    with SSOStream(bootstrap, topic, "sso-resumed", resumed) as first:
        assert len(first.run(max_batches=10)) == 10
    with SSOStream(bootstrap, topic, "sso-resumed", resumed) as second:
        rest = second.run()
    assert rest[0].first_offset == 10 * B  # the committed offset, not the start of the topic
    assert resumed.n_oracle_calls == whole.n_oracle_calls == N // B
    assert np.array_equal(resumed.theta, whole.theta)
    # stopping mid-poll in one process: the full batches already fetched are learned by the next run()
    again = SSO(D, m=10, eta=0.5)
    with SSOStream(bootstrap, topic, "sso-again", again) as stream:
        assert len(stream.run(max_batches=3)) == 3
        stream.run()
    assert np.array_equal(again.theta, whole.theta)


def test_invalid_records_are_counted_skipped_and_committed(kafka_broker):
    topic = "sso-stream-invalid"
    values = [json.dumps({"x": {"a": i, "b": 1}, "y": 2.0 * i}).encode() for i in range(8)]
    values[2:2] = [b"{broken", b'{"x": {"a": "?"}, "y": 1}']  # offsets 2 and 3
    fill_topic(kafka_broker.bootstrap, topic, values)
    sso = SSO(2, m=1, eta=0.5, alpha=0.01)
    with SSOStream(kafka_broker.bootstrap, topic, "sso-invalid", sso, batch_size=4, features=["a", "b"]) as stream:
        steps = stream.run()
        committed = stream.consumer.committed(TopicPartition(topic, 0))
    assert stream.invalid == 2
    assert [(s.first_offset, s.last_offset) for s in steps] == [(0, 5), (6, 9)]
    assert steps[0].X.tolist() == [[0, 1], [1, 1], [2, 1], [3, 1]] and steps[1].y.tolist() == [8, 10, 12, 14]
    assert committed == 10


def test_decode_rejects_bad_records():
    with pytest.raises(ValueError, match="JSON"):
        decode_labelled(b"not json", 2)
    with pytest.raises(ValueError, match="'x' and 'y'"):
        decode_labelled(b'{"x": [1, 2]}', 2)
    with pytest.raises(ValueError, match="2 finite numbers"):
        decode_labelled(b'{"x": [1, 2, 3], "y": 1}', 2)
    with pytest.raises(ValueError, match="must be numbers"):
        decode_labelled(b'{"x": ["a", 2], "y": 1}', 2)
    x, y = decode_labelled(b'{"x": [1, 2], "y": 1}', 2)
    assert x.tolist() == [1.0, 2.0] and y == 1.0


def test_invalid_arguments_name_the_argument(kafka_broker):
    with pytest.raises(ValueError, match="sso"):
        SSOStream(kafka_broker.bootstrap, "t", "g", SGD(2))
    with pytest.raises(ValueError, match="batch_size"):
        SSOStream(kafka_broker.bootstrap, "t", "g", SSO(2), batch_size=0)
    with pytest.raises(ValueError, match="model"):
        SSOStream(kafka_broker.bootstrap, "t", "g", SSO(2), metrics=SurrogateMetrics(["a"]), model="b")
