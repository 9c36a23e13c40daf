"""deploy/: promtool on the Prometheus configuration and alert rules (with unit tests of every alert),
the Grafana dashboard and provisioning, and the compose, Dockerfile and Kubernetes files cross-checked
against what the daemon reads (ports, image, config path, STREAMFAIR_* variables, probe paths)."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath

import pytest

from connectors.cli import commands as cli
from connectors.kafka.config import ENV_PREFIX, ConfigError, load_config
from connectors.prometheus import HEALTH_PATH, METRICS_PATH, READY_PATH
from tests.support import REPO
from tests.support.deploy_files import (
    DASHBOARD,
    DEPLOY,
    PROMETHEUS_DIR,
    alert_expressions,
    dashboard_queries,
    load_yaml,
)
from tests.support.metrics_fakes import FakeDaemon, drive, make_config
from tests.support.prometheus_tools import ensure_prometheus


def promtool(prometheus_tools, *args, cwd=PROMETHEUS_DIR):
    return subprocess.run([prometheus_tools["promtool"], *args], cwd=cwd, capture_output=True, text=True)


def test_missing_tools_are_a_clear_error_not_an_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(pytest.fail.Exception, match=r"^prometheus, promtool not found\. .*make test") as error:
        ensure_prometheus()
    assert "apt-get install prometheus" in str(error.value)


def test_setup_script_stops_with_one_line_when_it_cannot_install(tmp_path):
    """Without apt-get (or as non-root) ``make test``'s setup step fails at once with one line, installing nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("id",):  # all the script needs besides the shell's built-ins
        (bin_dir / tool).symlink_to(shutil.which(tool))
    result = subprocess.run(["/bin/sh", str(REPO / "scripts" / "test-tools.sh")], env={"PATH": str(bin_dir)},
                            capture_output=True, text=True, timeout=10)
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.count("\n") == 1 and "prometheus and promtool are not on PATH" in result.stderr
    assert "apt-get install prometheus" in result.stderr


def test_setup_script_accepts_tools_on_path(tmp_path):
    for tool in ("prometheus", "promtool"):
        (tmp_path / tool).write_text("#!/bin/sh\n")
        (tmp_path / tool).chmod(0o755)
    result = subprocess.run(["/bin/sh", str(REPO / "scripts" / "test-tools.sh")], env={"PATH": str(tmp_path)},
                            capture_output=True, text=True, timeout=10)
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")


# ---------------------------------------------------------------------------- Prometheus
@pytest.mark.parametrize("config", ["prometheus.yml", "prometheus-kubernetes.yml"])
def test_promtool_check_config(prometheus_tools, config):
    result = promtool(prometheus_tools, "check", "config", config)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout


def test_promtool_check_rules(prometheus_tools):
    result = promtool(prometheus_tools, "check", "rules", "alerts.yml")
    assert result.returncode == 0 and "SUCCESS: 8 rules found" in result.stdout, result.stdout + result.stderr


def test_promtool_unit_tests_fire_and_hold_every_alert(prometheus_tools):
    result = promtool(prometheus_tools, "test", "rules", "alerts.test.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    alerts = {rule["alert"] for group in load_yaml(PROMETHEUS_DIR / "alerts.yml")["groups"] for rule in group["rules"]}
    cases = [
        case for test in load_yaml(PROMETHEUS_DIR / "alerts.test.yml")["tests"] for case in test["alert_rule_test"]
    ]
    firing = {c["alertname"] for c in cases if c.get("exp_alerts")}
    quiet = {c["alertname"] for c in cases if not c.get("exp_alerts")}
    assert firing == alerts and quiet == alerts  # each alert is shown to fire, and not to fire too early


def test_promtool_unit_tests_can_fail(prometheus_tools, tmp_path):
    for target in ("streamfair_fairness_eps", "streamfair_fairness_ks_target"):  # each half of the union is tested
        rules = (PROMETHEUS_DIR / "alerts.yml").read_text().replace(f"{target} + 0.02", f"{target} + 0.05")
        (tmp_path / "alerts.yml").write_text(rules)
        shutil.copy(PROMETHEUS_DIR / "alerts.test.yml", tmp_path)
        result = promtool(prometheus_tools, "test", "rules", "alerts.test.yml", cwd=tmp_path)
        assert result.returncode != 0 and "StreamfairFairnessAboveTarget" in result.stdout + result.stderr


def test_alerts_cover_the_issue():
    rules = {
        rule["alert"]: rule for group in load_yaml(PROMETHEUS_DIR / "alerts.yml")["groups"] for rule in group["rules"]
    }
    for name in ("StreamfairFairnessAboveTarget", "StreamfairAuditedFairnessAboveTarget"):
        assert (
            "streamfair_fairness_ks_target" in rules[name]["expr"] and "streamfair_fairness_eps" in rules[name]["expr"]
        )
    assert "streamfair_consumer_lag_records" in rules["StreamfairConsumerLagGrowing"]["expr"]
    assert "streamfair_dead_letters_total" in rules["StreamfairDeadLetterRateHigh"]["expr"]
    assert "streamfair_checkpoint_age_seconds" in rules["StreamfairCheckpointStale"]["expr"]
    assert "streamfair_broker_last_contact_seconds" in rules["StreamfairBrokerUnreachable"]["expr"]
    assert rules["StreamfairGroupAbsent"]["expr"] == "streamfair_group_present == 0"
    assert rules["StreamfairGroupAbsent"]["labels"]["severity"] == "info"  # the service works; the group is missing
    assert rules["StreamfairDown"]["expr"].startswith('up{job="streamfair"}')
    for rule in rules.values():
        assert rule["for"].endswith("m") and rule["labels"]["severity"] in ("info", "warning", "critical")
        assert rule["annotations"]["summary"] and rule["annotations"]["description"]


# ---------------------------------------------------------------------------- metric names used vs exported
def exported_names() -> set[str]:
    """Every series name the daemon's metrics can expose (fully populated registries, with either kind of target)."""
    from connectors.prometheus import DaemonMetrics

    names = set()
    for config in (make_config(), load_config(env={}, overrides=["topics.feedback=fb"])):  # eps, and the KS default
        observer = DaemonMetrics(config)
        drive(observer, FakeDaemon())
        observer.fairness.set_dro_weights(0, [0.5, 0.5], robust_value=0.1)
        names |= {sample.name for family in observer.registry.collect() for sample in family.samples}
    return names


PROMQL_WORDS = {
    "sum",
    "max",
    "min",
    "avg",
    "by",
    "on",
    "group_left",
    "rate",
    "deriv",
    "histogram_quantile",
    "and",
    "up",
    "bool",
    "label_values",
    "ignoring",
    "without",
    "or",
    "unless",
    "le",
}


def metric_names(expr: str) -> set[str]:
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # range selectors
    return {word for word in re.findall(r"[a-zA-Z_:][a-zA-Z0-9_:]*", expr) if word.startswith("streamfair_")}


def test_dashboards_and_alerts_only_use_exported_metrics():
    exported = exported_names()
    used = {name for _, expr in dashboard_queries() + alert_expressions() for name in metric_names(expr)}
    missing = used - exported
    assert not missing, f"queries use metrics the daemon does not export: {sorted(missing)}"
    assert len(used) >= 25


# ---------------------------------------------------------------------------- Grafana
def test_dashboard_panels_and_provisioning():
    dashboard = json.loads(DASHBOARD.read_text())
    datasource = load_yaml(DEPLOY / "grafana/provisioning/datasources/prometheus.yml")["datasources"][0]
    provider = load_yaml(DEPLOY / "grafana/provisioning/dashboards/streamfair.yml")["providers"][0]
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    for panel in panels:
        assert panel["datasource"]["uid"] == datasource["uid"] and datasource["type"] == "prometheus"
        assert panel["targets"] and all(t["expr"].strip() for t in panel["targets"]), panel["title"]
        position = panel["gridPos"]
        assert position["x"] + position["w"] <= 24
    titles = " | ".join(p["title"].lower() for p in panels)
    for topic in (
        "throughput",
        "latency",
        "lag",
        "live vs audited",
        "gradient-mapping norm",
        "dual norms",
        "horizon progress",
        "dro weights",
        "checkpoint",
    ):
        assert topic in titles, topic
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert set(variables) == {"instance"} and variables["instance"]["datasource"]["uid"] == datasource["uid"]
    compose = load_yaml(DEPLOY / "docker-compose.yml")["services"]
    mounts = dict(volume.split(":")[:2] for volume in compose["grafana"]["volumes"])
    assert (DEPLOY / mounts_source(mounts, provider["options"]["path"]) / DASHBOARD.name).samefile(DASHBOARD)
    assert (DEPLOY / mounts_source(mounts, "/etc/grafana/provisioning")).samefile(DEPLOY / "grafana/provisioning")
    url = re.fullmatch(r"http://([\w-]+):(\d+)", datasource["url"])
    assert url and url.group(1) in compose and f"{url.group(2)}:{url.group(2)}" in compose[url.group(1)]["ports"]
    home = compose["grafana"]["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD.name}"


def mounts_source(mounts: dict[str, str], target: str) -> str:
    sources = [source for source, mounted in mounts.items() if mounted == target]
    assert len(sources) == 1, f"nothing mounted at {target}: {mounts}"
    return sources[0]


# ---------------------------------------------------------------------------- Dockerfile, compose, Kubernetes
def dockerfile_text() -> str:
    """The Dockerfile with continuation lines joined."""
    return re.sub(r"\\\n", " ", (DEPLOY / "Dockerfile").read_text())


def dockerfile() -> dict[str, list[str]]:
    """``{instruction: [argument, ...]}`` with continuation lines joined."""
    instructions: dict[str, list[str]] = {}
    for line in dockerfile_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            word, _, rest = line.strip().partition(" ")
            instructions.setdefault(word.upper(), []).append(rest.strip())
    return instructions


def dockerfile_env() -> dict[str, str]:
    env = {}
    for argument in dockerfile()["ENV"]:
        for item in shlex.split(argument):
            name, _, value = item.partition("=")
            env[name] = value
    return env


def pyproject_version() -> str:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_dockerfile_runs_the_daemon_with_its_metrics_port():
    instructions = dockerfile()
    assert json.loads(instructions["ENTRYPOINT"][0]) == ["streamfair", "serve"]
    assert (
        "serve" in cli.COMMANDS
        and "streamfair" in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    )
    for copy in instructions["COPY"]:
        for source in copy.split()[:-1]:
            assert (REPO / source).exists(), source
    env = dockerfile_env()
    port = int(env["STREAMFAIR_METRICS_PORT"])
    assert instructions["EXPOSE"] == [str(port)]
    assert f"http://127.0.0.1:{port}{HEALTH_PATH}" in instructions["HEALTHCHECK"][0]
    assert re.search(r"pip install \"\.\[connectors\]\"", instructions["RUN"][0])
    assert load_config(env={k: v for k, v in env.items() if k.startswith(ENV_PREFIX)}).metrics.port == port


@pytest.mark.slow
def test_the_image_builds_its_kernels_into_a_cache_its_user_can_write(tmp_path):
    """Numba uses no cache it cannot write: without one, the daemon compiled at every start."""
    text = dockerfile_text()
    build = next(run for run in dockerfile()["RUN"] if "--warm-up" in run)
    assert text.index("NUMBA_CACHE_DIR=") < text.index("--warm-up")  # the build compiles into it
    assert f'chown -R {dockerfile()["USER"][0]} "$NUMBA_CACHE_DIR"' in build
    assert dockerfile_env()["NUMBA_CACHE_DIR"]
    command = shlex.split(re.search(r"streamfair (serve --warm-up[^&]*)", build).group(1))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}

    def warm_up() -> dict[Path, int]:
        subprocess.run([sys.executable, "-m", "connectors.cli", *command], env=env, check=True, timeout=600,
                       capture_output=True)
        return {path: path.stat().st_mtime_ns for path in tmp_path.rglob("*") if path.is_file()}

    built = warm_up()
    assert any(path.suffix == ".nbi" for path in built)
    assert warm_up() == built  # the next process loads every kernel: nothing compiled or written again


def compose_config(service: dict, tmp_path: Path):
    """The configuration the compose service's daemon loads (image ENV, then compose env, mounted file)."""
    env = {**dockerfile_env(), **{k: str(v) for k, v in service["environment"].items()}}
    mounts = dict(volume.split(":")[:2] for volume in service["volumes"])
    config_path = DEPLOY / mounts_source(mounts, env["STREAMFAIR_CONFIG"])
    return load_config(config_path, env={k: v for k, v in env.items() if k.startswith(ENV_PREFIX)})


def test_compose_services_agree_with_the_daemon(tmp_path):
    compose = load_yaml(DEPLOY / "docker-compose.yml")["services"]
    assert set(compose) == {"kafka", "streamfair", "prometheus", "grafana"}
    daemon = compose["streamfair"]
    assert daemon["image"] == f"streamfair:{pyproject_version()}"
    assert (DEPLOY / daemon["build"]["context"] / daemon["build"]["dockerfile"]).samefile(DEPLOY / "Dockerfile")
    config = compose_config(daemon, tmp_path)
    port = config.metrics.port
    assert f"{port}:{port}" in daemon["ports"]
    # the daemon reaches Kafka's internal listener by service name
    host, kafka_port = config.kafka.bootstrap_servers[0].split(":")
    assert host in compose and f"PLAINTEXT://{host}:{kafka_port}" in compose[host]["environment"][
        "KAFKA_ADVERTISED_LISTENERS"
    ].split(",")
    assert daemon["depends_on"]["kafka"]["condition"] == "service_healthy"
    # Prometheus scrapes that port on the streamfair service and loads the alert rules it mounts
    prometheus = load_yaml(PROMETHEUS_DIR / "prometheus.yml")
    job = prometheus["scrape_configs"][0]
    assert job["job_name"] == "streamfair" and job["metrics_path"] == METRICS_PATH
    assert job["static_configs"][0]["targets"] == [f"streamfair:{port}"]
    mounts = dict(volume.split(":")[:2] for volume in compose["prometheus"]["volumes"])
    config_file = next(a.split("=", 1)[1] for a in compose["prometheus"]["command"] if a.startswith("--config.file="))
    assert (DEPLOY / mounts_source(mounts, config_file)).samefile(PROMETHEUS_DIR / "prometheus.yml")
    for rule_file in prometheus["rule_files"]:
        target = str(PurePosixPath(config_file).parent / rule_file)
        assert (DEPLOY / mounts_source(mounts, target)).samefile(PROMETHEUS_DIR / rule_file)


def kubernetes() -> dict[str, dict]:
    directory = DEPLOY / "kubernetes"
    kustomization = load_yaml(directory / "kustomization.yaml")
    documents = [doc for name in kustomization["resources"] for doc in load_yaml(directory / name, many=True)]
    assert sorted(kustomization["resources"]) == sorted(
        p.name for p in directory.glob("*.yaml") if p.name != "kustomization.yaml"
    )
    return {doc["kind"]: doc for doc in documents}


def test_kubernetes_manifests_agree_with_the_daemon(tmp_path):
    objects = kubernetes()
    assert set(objects) == {"Namespace", "ConfigMap", "Deployment", "Service"}
    namespace = objects["Namespace"]["metadata"]["name"]
    assert all(o["metadata"].get("namespace") == namespace for k, o in objects.items() if k != "Namespace")
    deployment, service, config_map = objects["Deployment"], objects["Service"], objects["ConfigMap"]
    pod = deployment["spec"]["template"]
    container = pod["spec"]["containers"][0]
    compose = load_yaml(DEPLOY / "docker-compose.yml")["services"]
    assert container["image"] == compose["streamfair"]["image"]
    # the configuration: ConfigMap file + env (a value from the downward API stands in as "pod-0")
    env = {**dockerfile_env(), **{e["name"]: e.get("value", "pod-0") for e in container["env"]}}
    mount = next(m for m in container["volumeMounts"] if m["name"] == "config")
    volume = next(v for v in pod["spec"]["volumes"] if v["name"] == "config")
    assert volume["configMap"]["name"] == config_map["metadata"]["name"]
    config_path = PurePosixPath(env["STREAMFAIR_CONFIG"])
    assert str(config_path.parent) == mount["mountPath"] and config_path.name in config_map["data"]
    assert config_map["data"][config_path.name] == (DEPLOY / "streamfair.toml").read_text()
    local = tmp_path / config_path.name
    local.write_text(config_map["data"][config_path.name])
    config = load_config(local, env={k: v for k, v in env.items() if k.startswith(ENV_PREFIX)})
    assert config.kafka.client_id == "pod-0" and config.topics.replication_factor == 3
    assert deployment["spec"]["replicas"] <= config.topics.partitions  # more pods than partitions idle forever
    # probes and ports
    port = config.metrics.port
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports == {"metrics": port}
    assert container["livenessProbe"]["httpGet"] == {"path": HEALTH_PATH, "port": "metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": READY_PATH, "port": "metrics"}
    liveness = container["livenessProbe"]
    assert liveness["periodSeconds"] * liveness["failureThreshold"] >= 10  # tolerate a slow checkpoint
    assert pod["spec"]["terminationGracePeriodSeconds"] > 7  # the daemon's shutdown budget
    assert pod["spec"]["securityContext"]["runAsUser"] == 10001 and "--uid 10001" in dockerfile()["RUN"][0]
    # the headless Service selects the pods and exposes the metrics port to Prometheus
    labels = pod["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    assert service["spec"]["clusterIP"] == "None" and service["spec"]["publishNotReadyAddresses"] is True
    assert service["spec"]["ports"] == [{"name": "metrics", "port": port, "targetPort": "metrics"}]
    scrape = load_yaml(PROMETHEUS_DIR / "prometheus-kubernetes.yml")["scrape_configs"][0]
    dns = scrape["dns_sd_configs"][0]
    assert dns["names"] == [f"{service['metadata']['name']}.{namespace}.svc.cluster.local"] and dns["port"] == port
    assert scrape["job_name"] == "streamfair" and scrape["metrics_path"] == METRICS_PATH


def test_environment_variables_are_daemon_settings():
    """Every STREAMFAIR_* variable in the deploy files is a key the daemon's configuration knows."""
    compose = load_yaml(DEPLOY / "docker-compose.yml")["services"]["streamfair"]["environment"]
    container = kubernetes()["Deployment"]["spec"]["template"]["spec"]["containers"][0]
    names = set(compose) | {e["name"] for e in container["env"]} | set(dockerfile_env())
    names = {n for n in names if n.startswith(ENV_PREFIX)}
    assert {"STREAMFAIR_CONFIG", "STREAMFAIR_KAFKA_BOOTSTRAP_SERVERS", "STREAMFAIR_METRICS_PORT"} <= names
    for name in names - {"STREAMFAIR_CONFIG"}:
        try:
            load_config(env={name: "x"})  # "x" may be a bad value, but the variable must be known
        except ConfigError as error:
            assert "unknown configuration variable" not in str(error), name
    with pytest.raises(ConfigError, match="unknown configuration variable"):
        load_config(env={"STREAMFAIR_METRICS_PORTS": "9100"})
