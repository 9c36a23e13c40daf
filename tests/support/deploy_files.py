"""Readers of deploy/: its YAML files, the dashboard's queries and the alerts' expressions."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.support import REPO

DEPLOY = REPO / "deploy"
PROMETHEUS_DIR = DEPLOY / "prometheus"
DASHBOARD = DEPLOY / "grafana" / "dashboards" / "streamfair.json"


def load_yaml(path: Path, many: bool = False):
    with open(path) as handle:
        return list(yaml.safe_load_all(handle)) if many else yaml.safe_load(handle)


def dashboard_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] if panel["type"] != "row"
            for target in panel["targets"]]


def alert_expressions() -> list[tuple[str, str]]:
    return [(rule["alert"], rule["expr"]) for group in load_yaml(PROMETHEUS_DIR / "alerts.yml")["groups"]
            for rule in group["rules"]]
