"""Daemon configuration: precedence of the sources and errors that name the key."""

from __future__ import annotations

import argparse
import inspect
import socket

import pytest

from connectors.kafka import clients
from connectors.kafka.config import SCHEMA, ConfigError, config_table, load_config
from connectors.kafka.daemon import add_arguments, config_from_args
from connectors.kafka.postprocessor_config import (
    DAEMON_MAX_PENDING,
    PARAMETERS,
    VARIANT_PARAMETERS,
    VARIANTS,
    PostProcessorConfig,
)
from connectors.kafka.schema import (
    CONSTRUCTOR_DEFAULT,
    INTEGER,
    JSON,
    LABELS,
    NUMBER,
    NUMBER_OR_NUMBERS,
    NUMBERS,
    STRING,
)
from tests.support import REPO


def test_defaults_validate_and_build_a_postprocessor():
    config = load_config(env={})
    assert config.kafka.bootstrap_servers == ["127.0.0.1:9092"]
    assert config.processing.guarantee == "at_least_once"
    assert config.n_groups == 2
    assert config.postprocessor.build().n_groups == 2


def test_precedence_file_then_environment_then_overrides(tmp_path):
    path = tmp_path / "streamfair.toml"
    path.write_text(
        '[kafka]\ngroup_id = "from-file"\nclient_id = "file-client"\n'
        '[postprocessor]\neps = [0.01, 0.02, 0.03]\n'
        '[topics]\ninput = "file-input"\n'
    )
    env = {"STREAMFAIR_KAFKA_GROUP_ID": "from-env", "STREAMFAIR_TOPICS_INPUT": "env-input"}
    config = load_config(path, env=env, overrides=["topics.input=cli-input"])
    assert config.kafka.client_id == "file-client"  # only in the file
    assert config.kafka.group_id == "from-env"  # env beats file
    assert config.topics.input == "cli-input"  # overrides beat env
    assert config.postprocessor.eps == [0.01, 0.02, 0.03]
    assert config.n_groups == 3  # a per-group eps decides K; the default n_groups=2 is dropped


@pytest.mark.parametrize("variable, value, read", [
    ("MODELS_GROUPS", '["f", "m"]', ("models", "groups", ["f", "m"])),  # were the names '["f"' and '"m"]'
    ("MODELS_GROUPS", "f, m", ("models", "groups", ["f", "m"])),
    ("MODELS_FEATURES", '["x1","x2"]', ("models", "features", ["x1", "x2"])),
    ("POSTPROCESSOR_P", "[0.4, 0.6]", ("postprocessor", "p", [0.4, 0.6])),  # was "expected a number, got '[0.4'"
    ("POSTPROCESSOR_P", "0.4,0.6", ("postprocessor", "p", [0.4, 0.6])),
    ("POSTPROCESSOR_CLASSES", '["no", "yes"]', ("postprocessor", "classes", ["no", "yes"])),
])
def test_lists_in_the_environment_are_json_or_comma_separated_for_every_setting(variable, value, read):
    section, key, expected = read
    extra = {"STREAMFAIR_POSTPROCESSOR_KIND": "classification"} if key == "classes" else {}
    config = load_config(env={f"STREAMFAIR_{variable}": value, **extra})
    assert getattr(getattr(config, section), key) == expected


def test_config_file_from_environment_variable(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[processing]\nbatch_size = 16\n')
    assert load_config(env={"STREAMFAIR_CONFIG": str(path)}).processing.batch_size == 16


def test_string_values_are_converted_by_type():
    config = load_config(env={
        "STREAMFAIR_KAFKA_BOOTSTRAP_SERVERS": "a:1, b:2",
        "STREAMFAIR_PROCESSING_DISTRIBUTION": "yes",
        "STREAMFAIR_PROCESSING_CHECKPOINT_EVERY_SECONDS": "0.5",
        "STREAMFAIR_POSTPROCESSOR_P": "0.25,0.75",
        "STREAMFAIR_POSTPROCESSOR_L": "none",
        "STREAMFAIR_POSTPROCESSOR_B": "0, 250",
    })
    assert config.kafka.bootstrap_servers == ["a:1", "b:2"]
    assert config.processing.distribution is True
    assert config.processing.checkpoint_every_seconds == 0.5
    assert config.postprocessor.p == [0.25, 0.75]
    assert config.postprocessor.L is None
    assert config.postprocessor.build().atoms[[0, 50, -1]].tolist() == [0.0, 125.0, 250.0]  # a range in its units


@pytest.mark.parametrize(
    "overrides, key",
    [
        (["kafka.session_timeout_ms=abc"], "kafka.session_timeout_ms"),
        (["kafka.heartbeat_interval_ms=20000"], "kafka.heartbeat_interval_ms"),
        (["kafka.bootstrap_servers=nohost"], "kafka.bootstrap_servers"),
        (["kafka.delivery_timeout_ms=1000"], "kafka.delivery_timeout_ms"),
        (["kafka.compression_type=brotli"], "kafka.compression_type"),
        (["topics.output=bad name!"], "topics.output"),
        (["topics.dead_letter=streamfair.input"], "topics.dead_letter"),
        (["processing.guarantee=maybe"], "processing.guarantee"),
        (["processing.mode=median"], "processing.mode"),
        (["processing.batch_size=0"], "processing.batch_size"),
        (["processing.checkpoint_every_seconds=nan"], "processing.checkpoint_every_seconds"),
        (["processing.distribution=perhaps"], "processing.distribution"),
        (["postprocessor.eps=-1"], "postprocessor.eps"),
        (["postprocessor.B=0"], "postprocessor.B"),
        (["postprocessor.B=1,0"], "postprocessor.B"),
        (["postprocessor.optimizer=adam"], "postprocessor.optimizer"),
        (["models.eta=/does/not/exist.pkl", "models.tau=/does/not/exist.pkl"], "models.eta"),
        (["models.tau=/x.pkl"], "models.eta"),
        (["models.groups=a,b,c"], "models.groups"),
        (["models.learn=true"], "models.learn"),
        (["metrics.port=70000"], "metrics.port"),
        (["log.level=chatty"], "log.level"),
        (["kafka.no_such_key=1"], "kafka.no_such_key"),
        (["nosection.key=1"], "nosection.key"),
        (["kafka.auto_offset_reset=none"], "kafka.auto_offset_reset"),
        (["processing.out_of_range=skip"], "processing.out_of_range"),
        (["processing.output_key=value"], "processing.output_key"),
        (["kafka.bootstrap_timeout_ms=0"], "kafka.bootstrap_timeout_ms"),
        (["kafka.partition_assignment_strategy=sticky"], "kafka.partition_assignment_strategy"),
        (["kafka.partition_assignment_strategy=cooperative-sticky", "topics.feedback=labels"],
         "kafka.partition_assignment_strategy"),
        (["kafka.security_protocol=TLS"], "kafka.security_protocol"),
        (["kafka.security_protocol=SASL_SSL"], "kafka.sasl_mechanism"),
        (["kafka.security_protocol=SASL_SSL", "kafka.sasl_mechanism=GSSAPI"], "kafka.sasl_mechanism"),
        (["kafka.security_protocol=SASL_PLAINTEXT", "kafka.sasl_mechanism=PLAIN"], "kafka.sasl_username"),
        (["kafka.security_protocol=SASL_PLAINTEXT", "kafka.sasl_mechanism=SCRAM-SHA-256", "kafka.sasl_username=u"],
         "kafka.sasl_password"),
        (["kafka.sasl_username=u"], "kafka.sasl_username"),
        (["kafka.ssl_cafile=/does/not/exist.pem"], "kafka.ssl_cafile"),
        (["kafka.security_protocol=SSL", "kafka.ssl_cafile=/does/not/exist.pem"], "kafka.ssl_cafile"),
        (["kafka.security_protocol=SSL", "kafka.ssl_certfile=/etc/hostname"], "kafka.ssl_keyfile"),
        (["consumer.enable_auto_commit=true"], "consumer.enable_auto_commit"),
        (["producer.acks=1"], "producer.acks"),
        (["producer.no_such_setting=1"], "producer.no_such_setting"),
        (["consumer.fetch_min_bytes=many"], "consumer.fetch_min_bytes"),
        (["models.groups=a,a"], "models.groups"),  # passed, then the metrics' collectors refused them
        (["metrics.history=/does/not/exist/history.jsonl"], "metrics.history"),
        (["metrics.history=history.jsonl"], "metrics.history"),  # no metrics.port: accepted, and never written
        # read by their text on the wire, class 1 was never learned and model answers failed
        (["postprocessor.kind=classification", 'postprocessor.classes=[1, "1"]'], "postprocessor.classes"),
        (["postprocessor.L=10000000000"], "postprocessor"),  # a grid that does not fit in memory
        (["kafka.bootstrap_servers=127.0.0.1:99999"], "kafka.bootstrap_servers"),  # was retried for ever
        (["kafka.bootstrap_servers=127.0.0.1:0"], "kafka.bootstrap_servers"),
    ],
)
def test_invalid_setting_names_its_key(overrides, key):
    with pytest.raises(ConfigError) as error:
        load_config(env={}, overrides=overrides)
    assert str(error.value).startswith(f"{key}:"), str(error.value)


def test_unknown_environment_variables_are_reported_and_typos_and_unknown_toml_keys_are_errors(tmp_path):
    kubernetes = {"STREAMFAIR_METRICS_SERVICE_HOST": "10.0.0.7", "STREAMFAIR_METRICS_SERVICE_PORT": "9100",
                  "STREAMFAIR_METRICS_PORT_9100_TCP": "tcp://10.0.0.7:9100", "STREAMFAIR_KAFKA_SERVICE_PORT": "9092",
                  "STREAMFAIR_KAFKA_GROUP_ID": "scoring"}
    config = load_config(env=kubernetes)
    assert config.kafka.group_id == "scoring"
    assert config.ignored_variables == tuple(sorted(set(kubernetes) - {"STREAMFAIR_KAFKA_GROUP_ID"}))
    with pytest.raises(ConfigError, match="STREAMFAIR_KAFKA_GROUPID: .*did you mean STREAMFAIR_KAFKA_GROUP_ID"):
        load_config(env={"STREAMFAIR_KAFKA_GROUPID": "x"})
    path = tmp_path / "c.toml"
    path.write_text('[topics]\nimput = "x"\n')
    with pytest.raises(ConfigError, match=r"^topics\.imput: unknown"):
        load_config(path, env={})
    path.write_text('[topics\n')
    with pytest.raises(ConfigError, match="invalid TOML"):
        load_config(path, env={})


def test_cli_shortcut_flags_override_set():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args(["--set", "kafka.group_id=a", "--group-id", "b", "--bootstrap-servers", "h:1,h:2",
                              "--guarantee", "exactly_once", "--once"])
    config = config_from_args(args)
    assert config.kafka.group_id == "b"
    assert config.kafka.bootstrap_servers == ["h:1", "h:2"]
    assert config.processing.guarantee == "exactly_once"
    assert args.once


def test_serve_reports_a_configuration_error_and_exits_2(capsys):
    from connectors.cli.commands import main

    assert main(["serve", "--set", "processing.guarantee=sometimes"]) == 2
    assert "processing.guarantee" in capsys.readouterr().err


def test_serve_reports_a_history_file_it_cannot_append_to_and_exits_2(capsys, tmp_path):
    """It was a traceback (exit 1): the history writer's ValueError escaped the configuration errors' handler."""
    from connectors.cli.commands import main

    history = tmp_path / "notes.txt"
    history.write_text("not a history\n")
    with socket.socket() as probe:  # a free port: the history is opened before the endpoint listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert main(["serve", "--metrics-port", str(port), "--set", f"metrics.history={history}"]) == 2
    assert "not a streamfair history" in capsys.readouterr().err


def test_postprocessor_kind_and_robust_choose_the_class_with_its_own_parameters():
    from streamfair import FairClassificationPostProcessor
    from streamfair.dro import GroupRobustFairRegressionPostProcessor

    robust = load_config(env={"STREAMFAIR_POSTPROCESSOR_ROBUST": "true"},
                         overrides=["postprocessor.updater=exponentiated", "postprocessor.step=0.05"])
    fair = robust.postprocessor.build()
    assert type(fair) is GroupRobustFairRegressionPostProcessor and (fair.updater, fair.step) == ("exponentiated", 0.05)
    assert robust.classes() is None
    classify = load_config(env={}, overrides=["postprocessor.kind=classification", "postprocessor.classes=lo,mid,hi",
                                              "processing.mode=mode"])
    fair = classify.postprocessor.build()
    assert type(fair) is FairClassificationPostProcessor and classify.classes() == ["lo", "mid", "hi"]
    regression = load_config(env={}).postprocessor.build()
    assert fair.eps.tolist() == [0.02, 0.02] and regression.eps is None  # each class's own default target:
    assert fair.ks is None and regression.ks.tolist() == [0.05, 0.05]  # a rate gap, and a KS distance


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["postprocessor.temperature=0.1"],
         "postprocessor.temperature: is not a parameter of FairRegressionPostProcessor"),
        (["postprocessor.kind=classification", "postprocessor.classes=a,b", "postprocessor.L=5"],
         "postprocessor.L: is not a parameter of FairClassificationPostProcessor"),
        (["postprocessor.kind=classification", "postprocessor.classes=a,b", "postprocessor.robust=true"],
         "postprocessor.robust: the robust post-processor is for regression only"),
        (["postprocessor.kind=ranking"], "postprocessor.kind: must be one of"),
        (["postprocessor.kind=classification"], "postprocessor: the number of classes is unknown"),
        (["postprocessor.kind=classification", "postprocessor.classes=a,b", "processing.mode=mean"],
         "processing.mode: must be one of ('sample', 'mode')"),
        (["postprocessor.robust=true", "postprocessor.temperature=0"],
         "postprocessor.temperature: temperature must be"),
    ],
)
def test_postprocessor_choice_errors_name_the_key(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config(env={}, overrides=overrides)
    assert str(error.value).startswith(message), str(error.value)


def test_security_and_client_settings_reach_every_client():
    from connectors.kafka import confluent_clients
    from connectors.kafka.clients import _common

    env = {"STREAMFAIR_KAFKA_SASL_PASSWORD": "s3cret", "STREAMFAIR_PRODUCER_MAX_REQUEST_SIZE": "2000000"}
    config = load_config(env=env, overrides=["kafka.security_protocol=SASL_SSL", "kafka.sasl_mechanism=SCRAM-SHA-512",
                                             "kafka.sasl_username=svc", "consumer.client_rack=eu-1",
                                             "consumer.fetch_min_bytes=10", "kafka.metadata_max_age_ms=1000"])
    common = _common(config)
    assert (common["security_protocol"], common["sasl_mechanism"], common["sasl_plain_username"],
            common["sasl_plain_password"], common["ssl_check_hostname"], common["metadata_max_age_ms"]) == (
        "SASL_SSL", "SCRAM-SHA-512", "svc", "s3cret", True, 1000)
    assert confluent_clients._common(config)["topic.metadata.refresh.interval.ms"] == 1000  # librdkafka's name
    assert config.consumer.values == {"client_rack": "eu-1", "fetch_min_bytes": 10}
    with pytest.raises(ConfigError, match="consumer.metadata_max_age_ms"):  # a kafka.* key sets it
        load_config(env={}, overrides=["consumer.metadata_max_age_ms=1000"])
    assert config.producer.values == {"max_request_size": 2000000}
    assert load_config(env={}).processing.propagate_headers[:2] == ["traceparent", "tracestate"]


def _keyword_parameters(cls) -> dict:
    return {name: parameter for name, parameter in inspect.signature(cls).parameters.items()
            if parameter.kind not in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD)}


#: The declared type of each constructor annotation (the schema is checked against the signatures here,
#: so the daemon never reads annotations at run time).
ANNOTATION_TYPES = {"float": NUMBER, "int": INTEGER, "str": STRING,
                    "float | Sequence[float] | np.ndarray": NUMBER_OR_NUMBERS, "Sequence[float] | np.ndarray": NUMBERS,
                    "Sequence[Any]": LABELS, "Any": JSON}


#: The daemon's own defaults, where the class's do not suit a daemon.
DAEMON_DEFAULTS = {"n_groups": 2, "max_pending": DAEMON_MAX_PENDING}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_postprocessor_schema_declares_exactly_each_constructors_keyword_parameters(variant):
    from streamfair import FairRegressionPostProcessor

    cls = VARIANTS[variant]
    parameters = _keyword_parameters(cls)
    if variant == "robust":  # the regression parameters reach it through **kwargs
        parameters = {**_keyword_parameters(FairRegressionPostProcessor), **parameters}
    assert set(VARIANT_PARAMETERS[variant]) == set(parameters)
    for name, parameter in parameters.items():
        declared = PARAMETERS[name]
        annotation = str(parameter.annotation)
        assert declared.optional == annotation.endswith(" | None") or name == "cost_matrix", name
        assert declared.type == ANNOTATION_TYPES[annotation.removesuffix(" | None")], name
        default = PostProcessorConfig(**({"kind": "classification"} if variant == "classification" else {}),
                                      robust=variant == "robust")
        assert getattr(default, name) == DAEMON_DEFAULTS.get(name, parameter.default), name
    given = {"n_classes": 3} if variant == "classification" else {}
    built = PostProcessorConfig(**given, kind=default.kind, robust=default.robust).build()
    for name in DAEMON_DEFAULTS.keys() & parameters.keys():  # and the post-processor is built with them
        assert getattr(built, name) == DAEMON_DEFAULTS[name], name


def test_every_declared_setting_has_its_default_allowed_and_its_own_names():
    for key, declared in SCHEMA.items():
        assert declared.key == key and declared.doc and "|" not in declared.doc
        if declared.default != CONSTRUCTOR_DEFAULT:
            declared.check(declared.default)
    assert len({declared.env for declared in SCHEMA.values()}) == len(SCHEMA)
    flags = [declared.flag for declared in SCHEMA.values() if declared.flag]
    assert flags == ["--bootstrap-servers", "--group-id", "--input-topic", "--output-topic", "--guarantee",
                     "--metrics-port", "--log-level"]


def test_the_configuration_table_of_the_docs_is_the_schemas():
    text = (REPO / "docs" / "daemon.md").read_text(encoding="utf-8")
    start = text.index("config_table() -->\n") + len("config_table() -->\n")
    table = text[start:text.index("<!-- end of the table -->", start)]
    assert table == config_table(), "docs/daemon.md: replace the table with connectors.kafka.config.config_table()"


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["postprocessor.kind=classification", "postprocessor.classes=a,b", "postprocessor.n_classes=3"],
         "postprocessor.n_classes: n_classes=3 does not match"),
        (["postprocessor.eps=0.01", "postprocessor.ks=0.05"], "postprocessor: give ks"),
        (["postprocessor.profile=fast"], "postprocessor.profile: profile must be one of"),
        (["postprocessor.robust=true", "postprocessor.n_groups=none"], "postprocessor: the number of groups is"),
    ],
)
def test_a_constructor_error_names_the_parameter_it_starts_with(overrides, message):
    with pytest.raises(ConfigError) as error:
        load_config(env={}, overrides=overrides)
    assert str(error.value).startswith(message), str(error.value)


def test_flags_and_environment_variables_come_from_the_schema():
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    with pytest.raises(SystemExit):
        parser.parse_args(["--guarantee", "sometimes"])  # the declared choices
    args = parser.parse_args(["--metrics-port", "9100", "--log-level", "debug", "--output-topic", "out"])
    config = config_from_args(args)
    assert (config.metrics.port, config.log.level, config.topics.output) == (9100, "debug", "out")
    assert SCHEMA["metrics.port"].env == "STREAMFAIR_METRICS_PORT"
    with pytest.raises(ConfigError, match=r"^metrics\.port: expected an integer, got 'x'"):
        config_from_args(parser.parse_args(["--metrics-port", "x"]))


@pytest.mark.parametrize("overrides", [
    [],
    ["processing.batch_size=100", "processing.distribution=true"],
    ["postprocessor.robust=true"],
    ["postprocessor.kind=classification", "postprocessor.classes=lo,mid,hi", "processing.mode=mode"],
    ["postprocessor.profile=paper"],
])
def test_the_warm_up_runs_every_synthetic_message_and_leaves_the_daemon_as_it_was(overrides):
    from connectors.kafka.loop import Daemon

    config = load_config(env={}, overrides=overrides)
    daemon = Daemon(config)
    result = daemon.partitions.warm_up()
    assert result.dead_letters == [] and len(result.outputs) == max(16, config.processing.batch_size)
    assert any(b'"distribution"' in output.value for output in result.outputs)
    assert daemon.tasks == {} and daemon.stats.consumed == daemon.stats.produced == 0


def test_the_producer_batches_64_kib_unless_the_producer_section_says_otherwise(monkeypatch):
    made: list[dict] = []
    monkeypatch.setattr(clients, "KafkaProducer", lambda **settings: made.append(settings))
    clients.make_producer(load_config(env={}))
    clients.make_producer(load_config(env={}, overrides=["producer.batch_size=4096"]))
    assert [settings["batch_size"] for settings in made] == [clients.PRODUCER_BATCH_BYTES, 4096]
    assert clients.PRODUCER_BATCH_BYTES == 65_536
