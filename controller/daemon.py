"""The controller daemon: one agent per switch, the intent API, the metrics endpoint.

Write semantics of an intent (docs/controller.md): validate and compile it for every switch first
(a bad intent raises ``ValidationError`` and changes nothing); then it becomes the desired state
(a new generation) and each switch's agent diffs and writes it. A switch that fails a write, is
unreachable or restarts keeps being reconciled until it holds the current generation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

import grpc

from mlfc import contract
from mlfc.controller.agent import DesiredState, SwitchAgent
from mlfc.controller.compile import CompiledIntent, compile_intent, compile_policy
from mlfc.controller.config import ARCHITECTURES, DeploymentConfig, queue_settings
from mlfc.controller.errors import ValidationError
from mlfc.controller.intent_server import start_intent_server
from mlfc.controller.metrics import start_metrics_server
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.queues import queue_client
from mlfc.controller.state import load_state, save_state
from mlfc.controller.validate import default_policy
from mlfc.proto import intent_pb2 as pb

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class ApplyResult:
    generation: int
    entries: int  # per switch (the largest switch's count)
    unconverged: tuple[pb.Unconverged, ...]  # switches that did not confirm in time, and why


def load_pipelines(config: DeploymentConfig, v1model: Pipeline | None = None) -> dict[str, Pipeline]:
    """The compiled program of every architecture the deployment's switches run."""
    out: dict[str, Pipeline] = {}
    for arch in config.architectures:
        if arch == "tna":
            out[arch] = Pipeline.load_tofino(config.tofino)
        else:
            out[arch] = v1model or Pipeline.load(config.p4info, config.device_config)
    return out


class Daemon:
    def __init__(self, config: DeploymentConfig, pipeline: Pipeline | None = None) -> None:
        """``pipeline`` replaces the v1model program's artifacts (tests); Tofino switches get the TNA
        program from ``config.tofino``."""
        self.config = config
        self.pipelines = load_pipelines(config, pipeline)
        self.pipeline = next(iter(self.pipelines.values()))  # table sizes: the same on every target
        self.generation = 0  # generation 0: the deployment file's defaults, before any intent
        self.intent = pb.Intent()
        self.compiled: CompiledIntent = compile_policy(default_policy(config), config, self.pipeline)
        self._restore()
        self.started_at = time.time()
        self.agents: dict[str, SwitchAgent] = {
            sw.name: SwitchAgent(
                sw,
                self.pipelines[ARCHITECTURES[sw.target]],
                config.controller,
                queue_client(sw.target, sw.thrift_port, sw.thrift_host),
                queue_settings(sw, config.defaults.queue),
                self._desired_for(sw.name),
            )
            for sw in config.switches
        }
        self._apply_lock = asyncio.Lock()
        self._stop = asyncio.Event()
        self._grpc_server: grpc.aio.Server | None = None
        self._metrics_server: object | None = None
        self.intent_port: int | None = None
        self.metrics_port: int | None = None

    def _desired_for(self, switch: str) -> DesiredState:
        job_ids = tuple(j.job_id for j in self.compiled.policy.jobs)
        return DesiredState(self.generation, self.compiled.entries[switch], job_ids)

    def _restore(self) -> None:
        """Serve the intent accepted before a restart, if the deployment keeps a state file. One
        that no longer loads or compiles (e.g. the deployment file changed) is moved aside, named in
        the log, and the defaults apply until the next intent."""
        path = self.config.controller.state_file
        if path is None:
            return
        try:
            saved = load_state(path)
            if saved is None:
                LOG.info("no saved intent in %s: the deployment file's defaults apply", path)
                return
            compiled = compile_intent(saved.intent, self.config, self.pipeline)
        except (ValueError, ValidationError) as exc:
            aside = path.with_name(path.name + ".rejected")
            path.replace(aside)
            LOG.error("saved intent not restored (%s); moved to %s, the defaults apply", exc, aside)
            return
        self.generation, self.compiled = saved.generation, compiled
        self.intent.CopyFrom(saved.intent)
        LOG.info("restored intent generation %d from %s (%d job(s))", saved.generation, path, len(compiled.policy.jobs))

    # ---- intents --------------------------------------------------------------------------------

    async def apply(self, intent: pb.Intent, timeout_s: float | None = None) -> ApplyResult:
        """Validate + compile (raises ``ValidationError``), publish, then wait up to ``timeout_s``
        for every connected switch to hold it."""
        async with self._apply_lock:
            compiled = compile_intent(intent, self.config, self.pipeline)
            if self.config.controller.state_file is not None:
                # Saved before it is published: an intent the controller cannot keep is not accepted
                # (StateError), so a restart never serves older state than a caller was told about.
                save_state(self.config.controller.state_file, self.generation + 1, intent)
            self.generation += 1
            self.intent = pb.Intent()
            self.intent.CopyFrom(intent)
            self.compiled = compiled
            generation = self.generation
            for name, agent in self.agents.items():
                agent.set_desired(self._desired_for(name))
        LOG.info(
            "intent generation %d accepted from %r: %d job(s), %d entries per switch",
            generation,
            intent.source,
            len(compiled.policy.jobs),
            compiled.entries_per_switch,
        )
        timeout_s = self.config.controller.apply_timeout_s if timeout_s is None else timeout_s
        # Only a primary can write: waiting for a switch that cannot converge would just burn the timeout.
        live = [a for a in self.agents.values() if a.client.primary]
        await asyncio.gather(*(a.wait_applied(generation, timeout_s) for a in live))
        unconverged = []
        for agent in self.agents.values():
            state, reason = agent.sync_state(generation)
            if state != pb.IN_SYNC:
                unconverged.append(pb.Unconverged(switch=agent.name, state=state, reason=reason))
        if unconverged:
            LOG.warning(
                "generation %d not confirmed within %.1fs by %s",
                generation,
                timeout_s,
                "; ".join(f"{u.switch} ({pb.SyncState.Name(u.state)}: {u.reason})" for u in unconverged),
            )
        return ApplyResult(generation, compiled.entries_per_switch, tuple(unconverged))

    def status(self) -> pb.StatusReply:
        reply = pb.StatusReply(generation=self.generation)
        totals: dict[int, dict[str, int]] = {}
        for agent in self.agents.values():
            st = agent.refresh()
            state, _ = agent.sync_state(self.generation)
            reply.switches.append(
                pb.SwitchStatus(
                    name=agent.name,
                    connected=st.connected,
                    primary=st.primary,
                    pipeline=st.pipeline if st.connected else "",
                    applied_generation=max(0, st.applied_generation),
                    applied=st.applied_generation >= 0,
                    entries=st.entries,
                    last_error=st.last_error,
                    state=state,
                    queue_error=st.queue_error,
                )
            )
            for counter in contract.JOB_COUNTERS:
                for job, value in st.counters.get(counter, {}).items():
                    t = totals.setdefault(job, {"packets": 0, "bytes": 0, "ecn_marks": 0, "drops": 0})
                    if counter == contract.JOB_PACKETS:
                        t["packets"] += value.packets
                        t["bytes"] += value.bytes
                    elif counter == contract.JOB_ECN_MARKS:
                        t["ecn_marks"] += value.packets
                    elif counter == contract.JOB_DROPS:
                        t["drops"] += value.packets
        for job, t in sorted(totals.items()):
            reply.jobs.append(pb.JobCounters(job_id=job, **t))
        return reply

    # ---- lifecycle ------------------------------------------------------------------------------

    async def start(self) -> None:
        for arch, p in self.pipelines.items():
            LOG.info("%s pipeline %s (%s)", arch, p.name, p.p4info_path)
        LOG.info("%d switch(es)", len(self.agents))
        c = self.config.controller
        self._grpc_server, self.intent_port = await start_intent_server(self, c.intent_addr, c.tls, c.allow_remote)
        self._metrics_server, self.metrics_port = start_metrics_server(self, self.config.controller.metrics_addr)
        for agent in self.agents.values():
            agent.start()
        LOG.info(
            "intent API on %s%s, metrics on %s",
            self.intent_address,
            "" if c.tls is None else (" (TLS, client certificates required)" if c.tls.client_auth else " (TLS)"),
            self.metrics_address,
        )

    @property
    def intent_address(self) -> str:
        host = self.config.controller.intent_addr.rsplit(":", 1)[0]
        return f"{host}:{self.intent_port}"

    @property
    def metrics_address(self) -> str:
        host = self.config.controller.metrics_addr.rsplit(":", 1)[0]
        return f"{host}:{self.metrics_port}"

    def request_stop(self) -> None:
        self._stop.set()

    async def run(self) -> None:
        """Start, serve until ``request_stop()``, stop."""
        await self.start()
        try:
            await self._stop.wait()
        finally:
            await self.stop()

    async def stop(self) -> None:
        for agent in self.agents.values():
            await agent.stop()
        if self._grpc_server is not None:
            await self._grpc_server.stop(grace=0.5)
            self._grpc_server = None
        if self._metrics_server is not None:
            with contextlib.suppress(Exception):
                self._metrics_server.shutdown()  # type: ignore[attr-defined]
                self._metrics_server.server_close()  # type: ignore[attr-defined]
            self._metrics_server = None
        LOG.info("stopped")
