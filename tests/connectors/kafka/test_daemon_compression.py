"""Compressed topics on the real broker: every codec read and written, a missing codec a clear failure."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from kafka import KafkaProducer

from connectors.kafka.broker import die_with_parent
from connectors.kafka.config import available_codecs
from connectors.kafka.loop import EXIT_UNSUPPORTED_CODEC, Daemon
from connectors.kafka.observer import DaemonObserver
from tests.support import REPO
from tests.support.kafka_daemon import (
    check_outputs,
    ensure_topics_for,
    messages,
    read_topic,
    reference,
    settings,
    to_config,
    write_toml,
)

CODECS = ["gzip", "snappy", "lz4", "zstd"]


def produce_compressed(broker, topic: str, stream, codec: str) -> None:
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=20)
    for partition, ident, body in stream:
        producer.send(topic, key=str(ident).encode(), value=json.dumps(body).encode(), partition=partition)
    producer.flush()
    producer.close()


class ProducerCodec(DaemonObserver):
    def on_start(self, daemon):
        settings = daemon.sender.producer.settings
        self.used = settings.get("compression_type", settings.get("compression.type"))  # kafka-python's, librdkafka's


def test_every_codec_is_available_with_the_connectors_extra():
    assert set(available_codecs()) == {"none", *CODECS}


@pytest.mark.parametrize("codec", CODECS)
def test_compressed_input_is_read_and_outputs_are_written_compressed(kafka_broker, codec):
    values = settings(kafka_broker, f"codec-{codec}", **{"kafka.compression_type": codec})
    config = ensure_topics_for(kafka_broker, values)
    stream = messages(300, seed=40)
    produce_compressed(kafka_broker, config.topics.input, stream, codec)
    codecs = ProducerCodec()
    daemon = Daemon(config, observers=[codecs])
    assert daemon.run(once=True) == 0
    assert codecs.used == codec  # the daemon's producer compresses with it
    outputs = read_topic(kafka_broker, config.topics.output)  # written with the codec, read back here
    copies = check_outputs(outputs, reference(stream))
    assert len(copies) == 300 and max(copies.values()) == 1
    assert len(read_topic(kafka_broker, config.topics.changelog)) >= 3  # checkpoints compressed too


def _serve_without_lz4(tmp_path, config_path, *args: str) -> subprocess.CompletedProcess:
    """``streamfair serve`` in an installation where the lz4 package cannot be imported."""
    hidden = tmp_path / "hidden"
    (hidden / "lz4").mkdir(parents=True, exist_ok=True)
    (hidden / "lz4" / "__init__.py").write_text('raise ImportError("lz4 is not installed here")\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("STREAMFAIR_")}
    env["PYTHONPATH"] = os.pathsep.join([str(hidden), str(REPO)])
    return subprocess.run([sys.executable, "-m", "connectors.cli", "serve", "--config", str(config_path), *args],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60, preexec_fn=die_with_parent)


def test_a_codec_the_client_cannot_read_stops_the_daemon_with_a_clear_error(kafka_broker, tmp_path):
    values = settings(kafka_broker, "codec-missing", **{"log.level": "INFO"})
    config = ensure_topics_for(kafka_broker, values)
    produce_compressed(kafka_broker, config.topics.input, messages(30, seed=41), "lz4")
    result = _serve_without_lz4(tmp_path, write_toml(tmp_path / "missing.toml", values), "--once")
    if kafka_broker.kafka_client == "confluent":  # librdkafka decodes lz4 itself: no package to miss
        assert result.returncode == 0, result.stderr[-2000:]
        assert len(read_topic(kafka_broker, config.topics.output)) == 30
        return
    assert result.returncode == EXIT_UNSUPPORTED_CODEC, result.stderr[-2000:]
    events = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    errors = [e for e in events if e["event"] == "unsupported_codec"]
    assert len(errors) == 1 and errors[0]["level"] == "error" and "lz4" in errors[0]["error"]
    assert "lz4" in errors[0]["fix"] and config.topics.input in errors[0]["topic"]
    assert not [e for e in events if e["event"] == "poll_failed"]


def test_a_compression_type_without_its_codec_is_a_configuration_error(tmp_path, kafka_broker):
    values = settings(kafka_broker, "codec-config", **{"kafka.compression_type": "lz4"})
    if kafka_broker.kafka_client == "confluent":  # librdkafka compresses with lz4 itself
        assert to_config(values).kafka.compression_type == "lz4"
        return
    result = _serve_without_lz4(tmp_path, write_toml(tmp_path / "config.toml", values))
    assert result.returncode == 2
    assert "kafka.compression_type: lz4 needs its package (lz4" in result.stderr
