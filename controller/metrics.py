"""Prometheus /metrics: per-job and per-port switch counters, and the controller's own health.

Switch counters are exported as they were last read (the telemetry loop of each agent), through a
custom collector, so values are never double-counted; they restart from 0 when a switch restarts,
which Prometheus' rate() treats as a counter reset.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from mlfc import contract

if TYPE_CHECKING:
    from mlfc.controller.daemon import Daemon


class ControllerCollector(Collector):
    def __init__(self, daemon: Daemon) -> None:
        self.daemon = daemon

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        daemon = self.daemon
        job_packets = CounterMetricFamily(
            "mlfc_job_packets", "Packets of a job seen in ingress", labels=["switch", "job"]
        )
        job_bytes = CounterMetricFamily("mlfc_job_bytes", "Bytes of a job seen in ingress", labels=["switch", "job"])
        ecn_marks = CounterMetricFamily("mlfc_job_ecn_marks", "Packets of a job marked CE", labels=["switch", "job"])
        drops = CounterMetricFamily("mlfc_job_drops", "Packets of a job selectively dropped", labels=["switch", "job"])
        drop_bytes = CounterMetricFamily(
            "mlfc_job_drop_bytes", "Bytes of a job selectively dropped", labels=["switch", "job"]
        )
        shim = CounterMetricFamily(
            "mlfc_port_shim_errors", "Malformed shims by ingress port", labels=["switch", "port", "kind"]
        )
        connected = GaugeMetricFamily("mlfc_switch_connected", "P4Runtime stream up", labels=["switch"])
        primary = GaugeMetricFamily("mlfc_switch_primary", "This controller is the primary", labels=["switch"])
        applied = GaugeMetricFamily(
            "mlfc_switch_applied_generation", "Intent generation the switch holds", labels=["switch"]
        )
        entries = GaugeMetricFamily("mlfc_table_entries", "Entries held per table", labels=["switch", "table"])
        writes = CounterMetricFamily("mlfc_entry_writes", "Entry updates written", labels=["switch", "op"])
        rpcs = CounterMetricFamily("mlfc_write_rpcs", "Write RPCs sent", labels=["switch"])
        loads = CounterMetricFamily(
            "mlfc_pipeline_loads", "Pipeline (re)loads: new, restarted or replaced switch", labels=["switch"]
        )
        connects = CounterMetricFamily("mlfc_switch_connects", "Successful P4Runtime connections", labels=["switch"])
        reconcile = GaugeMetricFamily("mlfc_reconcile_seconds", "Duration of the last reconcile", labels=["switch"])
        write_error = GaugeMetricFamily(
            "mlfc_switch_write_error",
            "1 while the switch's last refused write stands (until a reconcile succeeds)",
            labels=["switch"],
        )
        for name, agent in list(daemon.agents.items()):
            status = agent.refresh()
            counters = status.counters
            for job, count in counters.get(contract.JOB_PACKETS, {}).items():
                job_packets.add_metric([name, str(job)], count.packets)
                job_bytes.add_metric([name, str(job)], count.bytes)
            for job, count in counters.get(contract.JOB_ECN_MARKS, {}).items():
                ecn_marks.add_metric([name, str(job)], count.packets)
            for job, count in counters.get(contract.JOB_DROPS, {}).items():
                drops.add_metric([name, str(job)], count.packets)
                drop_bytes.add_metric([name, str(job)], count.bytes)
            for counter, kind in (
                (contract.SHIM_BAD_HEADER_COUNTER, "bad_header"),
                (contract.SHIM_TRUNCATED_COUNTER, "truncated"),
            ):
                for port, count in counters.get(counter, {}).items():
                    shim.add_metric([name, str(port), kind], count.packets)
            connected.add_metric([name], int(status.connected))
            primary.add_metric([name], int(status.primary))
            applied.add_metric([name], status.applied_generation)
            for table, n in sorted(status.entries.items()):
                entries.add_metric([name, table], n)
            for op, n in status.writes.items():
                writes.add_metric([name, op], n)
            rpcs.add_metric([name], status.write_rpcs)
            loads.add_metric([name], status.pipeline_loads)
            connects.add_metric([name], status.connects)
            reconcile.add_metric([name], status.reconcile_seconds)
            write_error.add_metric([name], int(bool(status.write_error)))
        generation = GaugeMetricFamily("mlfc_intent_generation", "Generation of the accepted intent")
        generation.add_metric([], daemon.generation)
        yield from (
            job_packets,
            job_bytes,
            ecn_marks,
            drops,
            drop_bytes,
            shim,
            connected,
            primary,
            applied,
            entries,
            writes,
            rpcs,
            loads,
            connects,
            reconcile,
            write_error,
            generation,
        )


def start_metrics_server(daemon: Daemon, addr: str) -> tuple[object, int]:
    """Serve /metrics on ``addr`` (host:port, port 0 = any free port) in a daemon thread."""
    host, port = addr.rsplit(":", 1)
    registry = CollectorRegistry()
    registry.register(ControllerCollector(daemon))
    server, _thread = start_http_server(int(port), addr=host.strip("[]"), registry=registry)
    return server, server.server_port
