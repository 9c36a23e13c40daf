"""Secure clusters and the settings Kafka users expect, on the real broker.

Tansu serves plaintext only here, so TLS is tested through a TLS-terminating proxy on 127.0.0.1
in front of it: the broker advertises the proxy's address, so every client connection (bootstrap,
metadata, group coordinator, fetch, produce) goes through TLS, with a certificate made by the test.
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass

import pytest
from kafka import KafkaConsumer, TopicPartition

from connectors.kafka.broker import die_with_parent, free_port, tansu_binary
from connectors.kafka.clients import ensure_topics
from connectors.kafka.config import KAFKA_CLIENTS, ConfigError
from connectors.kafka.loop import Daemon
from connectors.kafka.observer import DaemonObserver
from tests.support.daemon_process import wait_for
from tests.support.kafka_daemon import (
    check_outputs,
    ensure_topics_for,
    messages,
    produce,
    produce_messages,
    read_topic,
    reference,
    settings,
    to_config,
)

HOST = "127.0.0.1"


def make_certificate(directory, name: str):
    """A self-signed certificate for 127.0.0.1 (openssl), its key; the certificate is its own CA."""
    cert, key = directory / f"{name}.pem", directory / f"{name}-key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
                    "-days", "1", "-subj", "/CN=localhost", "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
                   check=True, capture_output=True)
    return cert, key


class TlsProxy(threading.Thread):
    """Accepts TLS on ``port`` and forwards the plaintext to ``127.0.0.1:target`` (asyncio, own thread)."""

    def __init__(self, port: int, target: int, cert, key):
        super().__init__(daemon=True)
        self.port, self.target = port, target
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(cert, key)
        self.handshakes = 0
        self.writers: set[asyncio.StreamWriter] = set()  # both ends of every connection
        self.ready = threading.Event()
        self.loop = asyncio.new_event_loop()

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._connection, HOST, self.port,
                                                                   ssl=self.context))
        self.ready.set()
        self.loop.run_forever()
        server.close()
        for writer in self.writers:  # end every connection here, not when the loop's leftovers are collected
            writer.transport.abort()
        connections = asyncio.all_tasks(self.loop)
        if connections:
            self.loop.run_until_complete(asyncio.wait(connections, timeout=5))
        self.loop.close()

    async def _connection(self, reader, writer) -> None:
        self.handshakes += 1
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection(HOST, self.target)
        except OSError:
            writer.close()
            return
        self.writers |= {writer, upstream_writer}

        async def pipe(source, sink):
            try:
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            except (OSError, ssl.SSLError):
                pass
            finally:
                sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.join(5)


@dataclass
class TlsBroker:
    bootstrap: str
    cafile: str
    proxy: TlsProxy

    def client(self) -> dict:
        return {"security_protocol": "SSL", "ssl_cafile": self.cafile}


@pytest.fixture(scope="module")
def tls_broker(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tls")
    cert, key = make_certificate(directory, "broker")
    plain, port = free_port(), free_port()
    process = subprocess.Popen([str(tansu_binary()), "broker", "--listener-url", f"tcp://{HOST}:{plain}",
                                "--advertised-listener-url", f"tcp://{HOST}:{port}", "--storage-engine",
                                "memory://tansu/"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               preexec_fn=die_with_parent)
    deadline = time.monotonic() + 15
    while True:
        try:
            socket.create_connection((HOST, plain), timeout=1).close()
            break
        except OSError:
            assert process.poll() is None and time.monotonic() < deadline, "the broker did not start"
            time.sleep(0.05)
    proxy = TlsProxy(port, plain, cert, key)
    proxy.start()
    assert proxy.ready.wait(5)
    yield TlsBroker(f"{HOST}:{port}", str(cert), proxy)
    proxy.stop()
    process.terminate()
    process.wait(10)


@pytest.mark.parametrize("kafka_client", KAFKA_CLIENTS)
def test_the_daemon_works_over_tls_with_a_certificate_it_verifies(tls_broker, kafka_client):
    values = settings(tls_broker, f"tls-{kafka_client}", **{"kafka.security_protocol": "SSL",
                                                            "kafka.ssl_cafile": tls_broker.cafile,
                                                            "kafka.client": kafka_client})
    config = to_config(values)
    ensure_topics(config)
    stream = messages(300, seed=50)
    produce_messages(tls_broker, config.topics.input, stream, **tls_broker.client())
    before = tls_broker.proxy.handshakes
    assert Daemon(config).run(once=True) == 0
    assert tls_broker.proxy.handshakes - before >= 3  # admin, consumers and producer all went through TLS
    outputs = read_topic(tls_broker, config.topics.output, **tls_broker.client())
    copies = check_outputs(outputs, reference(stream))
    assert len(copies) == 300 and max(copies.values()) == 1


@pytest.mark.parametrize("kafka_client", KAFKA_CLIENTS)
def test_a_broker_certificate_the_daemon_does_not_trust_is_reported_not_used(tls_broker, tmp_path, kafka_client):
    other, _ = make_certificate(tmp_path, "other")  # a CA that did not sign the broker's certificate
    values = settings(tls_broker, f"tls-untrusted-{kafka_client}", **{
        "kafka.security_protocol": "SSL", "kafka.ssl_cafile": str(other), "kafka.bootstrap_timeout_ms": 1000,
        "kafka.client": kafka_client})
    daemon = Daemon(to_config(values))
    result = []
    runner = threading.Thread(target=lambda: result.append(daemon.run(once=True)), daemon=True)
    runner.start()
    try:
        wait_for(lambda: daemon.stats.errors["broker_unavailable"] >= 2, 10, "the failed connections to be reported")
        assert not daemon.ready and daemon.stats.consumed == 0
    finally:
        daemon.stop()
        runner.join(15)
    assert result == [0]


def test_input_key_and_trace_headers_are_propagated_to_the_output(kafka_broker):
    values = settings(kafka_broker, "propagate", **{"processing.output_key": "input"})
    config = ensure_topics_for(kafka_broker, values)
    trace = [("traceparent", b"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"), ("tracestate", b"vendor=1"),
             ("b3", b"80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1"), ("tenant", b"acme")]
    items = [(i % 3, f"order-{i}".encode(), json.dumps({"id": i, "eta": 0.1, "tau": [0.5, 0.5]}).encode(),
              trace if i % 2 else None) for i in range(60)]
    produce(kafka_broker, config.topics.input, items)
    assert Daemon(config).run(once=True) == 0
    outputs = read_topic(kafka_broker, config.topics.output)
    assert len(outputs) == 60
    for record in outputs:
        i = json.loads(record.value)["id"]
        assert record.key == f"order-{i}".encode()  # the input's key, not the id
        assert (record.headers or []) == (trace[:3] if i % 2 else [])  # trace context only, in order


def test_a_header_without_a_value_is_carried_with_the_empty_value_and_stops_nothing(kafka_broker):
    """Kafka allows a header without a value.  kafka-python sends only ``bytes``, so it refused such a
    header, copied to the output or the dead letter, and the daemon rewound to that message forever."""
    from confluent_kafka import Producer  # kafka-python cannot produce such a header

    config = ensure_topics_for(kafka_broker, settings(kafka_broker, "null-header"))
    producer = Producer({"bootstrap.servers": kafka_broker.bootstrap})
    for body in (b'{"id": 0, "eta": 0.1, "tau": [0.5, 0.5]}', b"not json", b'{"id": 2, "eta": 0.3, "tau": [0.5, 0.5]}'):
        producer.produce(config.topics.input, value=body, partition=0,
                         headers=[("traceparent", None), ("tenant", b"acme")])
    assert producer.flush(10) == 0
    daemon, result = Daemon(config), []
    runner = threading.Thread(target=lambda: result.append(daemon.run(once=True)))
    runner.start()
    runner.join(60)
    drained = not runner.is_alive()
    daemon.stop()
    runner.join(15)
    assert drained and result == [0] and not daemon.stats.errors
    outputs = read_topic(kafka_broker, config.topics.output)
    assert sorted(json.loads(record.value)["id"] for record in outputs) == [0, 2]
    assert all(record.headers == [("traceparent", b"")] for record in outputs)
    (dead,) = read_topic(kafka_broker, config.topics.dead_letter)
    assert dead.value == b"not json" and dead.headers[:2] == [("traceparent", b""), ("tenant", b"acme")]
    assert dict(dead.headers)["streamfair.reason"] == b"invalid_json"


class ClientSettings(DaemonObserver):
    """Keeps the settings the daemon's clients were made with."""

    def on_start(self, daemon):
        self.consumer, self.producer = dict(daemon.consumer.settings), dict(daemon.sender.producer.settings)


def test_client_pass_through_static_membership_and_cooperative_sticky_assignor(kafka_broker):
    pass_through = {"consumer.fetch_min_bytes": 2, "consumer.client_rack": "rack-a",
                    "producer.max_request_size": 500_000, "producer.batch_size": 4096}
    values = settings(kafka_broker, "clients", **{
        "kafka.group_instance_id": "streamfair-0", "kafka.partition_assignment_strategy": "cooperative-sticky",
        **pass_through})
    confluent = kafka_broker.kafka_client == "confluent"
    if confluent:  # kafka-python's settings are refused, naming the key, rather than ignored
        with pytest.raises(ConfigError, match="^consumer.fetch_min_bytes: is a kafka-python setting"):
            to_config(values)
        values = {key: value for key, value in values.items() if key not in pass_through}
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(150, seed=51)
    produce_messages(kafka_broker, config.topics.input, stream)
    clients = ClientSettings()
    assert Daemon(config, observers=[clients]).run(once=True) == 0
    copies = check_outputs(read_topic(kafka_broker, config.topics.output), reference(stream))
    assert len(copies) == 150 and max(copies.values()) == 1
    if confluent:
        assert clients.consumer["group.instance.id"] == "streamfair-0"
        assert clients.consumer["partition.assignment.strategy"] == "cooperative-sticky"
        assert clients.producer["enable.idempotence"] and not clients.consumer["enable.auto.commit"]
        assert clients.producer["delivery.report.only.error"]  # failures still call back, successes do not
    else:
        assert (clients.consumer["fetch_min_bytes"], clients.consumer["client_rack"]) == (2, "rack-a")
        assert (clients.producer["max_request_size"], clients.producer["batch_size"]) == (500_000, 4096)
        assert clients.consumer["group_instance_id"] == "streamfair-0"
        assert [a.name for a in clients.consumer["partition_assignment_strategy"]] == ["cooperative-sticky"]
        assert clients.producer["enable_idempotence"] and not clients.consumer["enable_auto_commit"]  # the daemon's
    consumer = KafkaConsumer(bootstrap_servers=kafka_broker.bootstrap, group_id=config.kafka.group_id,
                             enable_auto_commit=False)
    committed = {p: consumer.committed(TopicPartition(config.topics.input, p)) for p in range(3)}
    consumer.close()
    assert committed == {0: 50, 1: 50, 2: 50}
