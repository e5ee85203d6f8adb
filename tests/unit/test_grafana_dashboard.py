"""deploy/grafana/mlfc.json and docs/metrics.md name only metrics the daemons register, and the docs all of them:
every metric name in every panel's PromQL (and in the template variables' queries) is one that the controller's,
the coordinator's or an agent's metrics expose, collected from the real metrics objects, each in a fresh
registry."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from prometheus_client import CollectorRegistry

from mlfc import contract
from mlfc.controller.config import parse_config
from mlfc.controller.daemon import Daemon
from mlfc.controller.metrics import ControllerCollector
from mlfc.coordinator.engine import Engine
from mlfc.coordinator.metrics import CoordinatorMetrics
from mlfc.coordinator.store import Store
from mlfc.hosts.agent import Agent
from mlfc.hosts.agent_metrics import AgentMetrics

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "deploy" / "grafana" / "mlfc.json"
METRICS_DOC = ROOT / "docs" / "metrics.md"
SCRAPE_CONFIG = ROOT / "deploy" / "prometheus" / "prometheus.yml"

# What the exposition format adds to a family's name, by type (prometheus-client): a counter "x" is queried as
# x_total, a histogram as x_bucket, x_sum, x_count.
SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "summary": ("", "_sum", "_count", "_created"),
    "info": ("_info",),
}
# PromQL words that are neither metrics nor followed by "(": operators and literals.
KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
NAME = re.compile(r"(?<![\w.:])[A-Za-z_:][A-Za-z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects."""
    s = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # label values may hold anything
    s = re.sub(r"\$\{?\w+\}?", " ", s)  # dashboard variables ($__rate_interval, ${job})
    s = re.sub(r"\{[^}]*\}", " ", s)  # label matchers
    s = re.sub(r"\[[^\]]*\]", " ", s)  # ranges and subqueries
    s = LABEL_LISTS.sub(" ", s)  # grouping labels
    names = set()
    for m in NAME.finditer(s):
        if s[m.end() :].lstrip().startswith("(") or m.group() in KEYWORDS:
            continue  # a function or aggregation, or an operator
        names.add(m.group())
    return names


def dashboard_queries(dashboard: dict) -> list[tuple[str, str]]:
    """(where, PromQL) of every panel target (rows included) and every template variable's label_values."""
    out = []
    panels = list(dashboard["panels"])
    while panels:
        p = panels.pop()
        panels.extend(p.get("panels", []))
        out += [(f"panel {p['title']!r}", t["expr"]) for t in p.get("targets", [])]
    for var in dashboard.get("templating", {}).get("list", []):
        query = var.get("query")
        text = query.get("query", "") if isinstance(query, dict) else ""
        for selector in re.findall(r"label_values\(\s*([^,)]+)", text):
            out.append((f"variable {var['name']!r}", selector))
    return out


def exposed_names(registry: CollectorRegistry) -> set[str]:
    """Every series name the registry exposes: its samples' names, and for families without samples yet (no
    label values seen) the names their type gives them."""
    names: set[str] = set()
    for family in registry.collect():
        if family.samples:
            names |= {s.name for s in family.samples}
        else:
            names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


def family_names(registry: CollectorRegistry) -> set[str]:
    """Each family as docs/metrics.md names it: a counter by its _total series, any other by its own name."""
    return {f.name + "_total" if f.type == "counter" else f.name for f in registry.collect()}


def controller_registry() -> CollectorRegistry:
    config = parse_config(
        {
            "switches": [{"name": "s1", "grpc_addr": "127.0.0.1:1", "device_id": 1, "ports": [1]}],
            "pipeline": {"p4info": str(contract.P4INFO), "device_config": str(contract.BMV2_JSON)},
        }
    )
    registry = CollectorRegistry()
    registry.register(ControllerCollector(Daemon(config)))  # built, not started: the switch is never dialled
    return registry


def coordinator_registry(tmp_path: Path) -> CollectorRegistry:
    store = Store(tmp_path / "coord.sqlite")  # the collector reads the engine at each collect: keep it open
    registry = CollectorRegistry()
    CoordinatorMetrics(Engine(store), registry)
    return registry


def agent_registry() -> CollectorRegistry:
    registry = CollectorRegistry()
    AgentMetrics(Agent(1, coordinator="127.0.0.1:1", token="t"), registry)  # never started: nothing dialled
    return registry


needs_artifacts = pytest.mark.skipif(
    not (contract.P4INFO.is_file() and contract.BMV2_JSON.is_file()),
    reason="p4src/build/mlfc.{p4info.txtpb,json} not built (run `make p4`): the controller's daemon needs them",
)


@needs_artifacts
def test_every_dashboard_query_names_registered_metrics(tmp_path: Path) -> None:
    by_daemon = {
        "controller": exposed_names(controller_registry()),
        "coordinator": exposed_names(coordinator_registry(tmp_path)),
        "agent": exposed_names(agent_registry()),
    }
    registered = set().union(*by_daemon.values())
    queries = dashboard_queries(json.loads(DASHBOARD.read_text()))
    assert len(queries) > 30
    unknown = {(where, name) for where, expr in queries for name in metric_names(expr) if name not in registered}
    assert not unknown, f"the dashboard queries metrics no daemon registers: {sorted(unknown)}"
    used = {name for _, expr in queries for name in metric_names(expr)}
    for daemon, names in by_daemon.items():  # panels over all three daemons
        assert used & names, f"no panel shows the {daemon}'s metrics"
    # what the dashboard is for (issue 48): the controller's writes, errors and reconciles; the coordinator's jobs,
    # classes, decisions and reports; the agents' bytes, F, bytes_ratio and withheld share
    for name in (
        "mlfc_entry_writes_total",
        "mlfc_switch_write_error",
        "mlfc_reconcile_seconds",
        "mlfc_coordinator_jobs",
        "mlfc_coordinator_class_jobs",
        "mlfc_coordinator_decisions_total",
        "mlfc_coordinator_evaluation_seconds_bucket",
        "mlfc_coordinator_reports_total",
        "mlfc_agent_job_bytes_total",
        "mlfc_agent_mltcp_f",
        "mlfc_agent_bytes_ratio",
        "mlfc_agent_withheld_bytes_total",
    ):
        assert name in used, f"no panel shows {name}"


def test_every_panel_reads_the_datasource_variable() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert {p["datasource"]["uid"] for p in panels} == {"${datasource}"}
    assert all(t["datasource"]["uid"] == "${datasource}" for p in panels for t in p["targets"])
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])


def test_the_name_extractor_finds_what_a_query_selects() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le) (rate(mlfc_coordinator_evaluation_seconds_bucket{job=~"$job"}[5m]))) '
        '/ on (instance) group_left (job) mlfc_typo_total{state="a{b}"} * 1e6 + time() - x:recorded offset 5m'
    )
    assert metric_names(expr) == {"mlfc_coordinator_evaluation_seconds_bucket", "mlfc_typo_total", "x:recorded"}
    assert "mlfc_typo_total" not in exposed_names(agent_registry())  # so the dashboard test would name it


def test_the_scrape_config_keeps_the_mlfc_job_label() -> None:
    """Prometheus renames a scraped `job` label to `exported_job` unless honor_labels: the dashboard selects by
    the mlfc job id, so every scrape job of the example must honour it."""
    config = yaml.safe_load(SCRAPE_CONFIG.read_text())
    jobs = {j["job_name"]: j for j in config["scrape_configs"]}
    assert set(jobs) == {"mlfc-controller", "mlfc-coordinator", "mlfc-agent"}
    assert all(j["honor_labels"] is True for j in jobs.values())
    roles = {j["job_name"]: {c["labels"]["role"] for c in j["static_configs"]} for j in jobs.values()}
    assert roles == {"mlfc-controller": {"controller"}, "mlfc-coordinator": {"coordinator"}, "mlfc-agent": {"agent"}}


@needs_artifacts
def test_docs_list_every_metric_the_daemons_register(tmp_path: Path) -> None:
    registered = set().union(
        *(family_names(r) for r in (controller_registry(), coordinator_registry(tmp_path), agent_registry()))
    )
    rows = [line for line in METRICS_DOC.read_text().splitlines() if line.startswith("| `mlfc_")]
    documented = {name for line in rows for name in re.findall(r"`(mlfc_\w+)`", line.split(" | ")[0])}
    assert registered - documented == set(), "registered but not in docs/metrics.md"
    assert documented - registered == set(), "in docs/metrics.md but registered by no daemon"
