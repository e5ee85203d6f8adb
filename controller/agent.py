"""The daemon's per-switch agent: keep one switch converged on the desired state, forever.

Lifecycle (one asyncio task per switch):

  connect + arbitrate ──► not primary? log, wait for promotion up to the backoff delay, reconnect
        │ primary
        ▼
  restore: pipeline (if the cookie differs: a new or restarted switch), queue settings,
           full read-back + diff + write
        │
        ▼
  serve: on a new desired state -> diff + write; every audit period -> cookie check + full
         read-back + repair; in parallel the telemetry loop reads counters
        │ channel down / primary lost / switch error
        ▼
  close, back off (exponential, capped), start over — a restarted switch is restored in full.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import grpc

from mlfc import contract
from mlfc.controller.config import ControllerSettings, SwitchConfig
from mlfc.controller.entries import EntryKey, TableEntry
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.queues import QueueClient, QueueConfigError, QueueSettings
from mlfc.controller.reconcile import Diff, apply_diff, count_by_table, diff
from mlfc.controller.switch import CounterValue, SwitchClient, SwitchError
from mlfc.proto import intent_pb2 as pb

DISCOVERY_EVERY = 5  # telemetry cycles between scans for jobs with traffic
LOG = logging.getLogger(__name__)

_CONNECTION_CODES = {"UNAVAILABLE", "DEADLINE_EXCEEDED", "CANCELLED"}


@dataclass(frozen=True)
class DesiredState:
    generation: int
    entries: tuple[TableEntry, ...]
    job_ids: tuple[int, ...] = ()


@dataclass
class AgentStats:
    """What Status and /metrics report about one switch."""

    connected: bool = False
    primary: bool = False
    pipeline: str = ""
    applied_generation: int = -1  # -1: nothing applied yet (generation 0 is the defaults)
    entries: dict[str, int] = field(default_factory=dict)
    last_error: str = ""
    pipeline_loads: int = 0  # the switch came up without our pipeline (new, restarted or replaced)
    connects: int = 0
    queue_error: str = ""
    write_error: str = ""  # the last refused write, until a reconcile succeeds
    writes: dict[str, int] = field(default_factory=lambda: {"insert": 0, "modify": 0, "delete": 0})
    write_rpcs: int = 0
    reconcile_seconds: float = 0.0  # last reconcile, read-back included
    counters: dict[str, dict[int, CounterValue]] = field(default_factory=dict)
    counters_at: float = 0.0


class Backoff:
    def __init__(self, lo: float, hi: float) -> None:
        self.lo, self.hi = lo, hi
        self.current = lo

    def next(self) -> float:
        delay = self.current
        self.current = min(self.hi, self.current * 2)
        return delay

    def reset(self) -> None:
        self.current = self.lo


class SwitchAgent:
    def __init__(
        self,
        sw: SwitchConfig,
        pipeline: Pipeline,
        settings: ControllerSettings,
        queue_adapter: QueueClient,
        queues: Mapping[int, QueueSettings],
        desired: DesiredState,
    ) -> None:
        self.config = sw
        self.pipeline = pipeline
        self.settings = settings
        self.queue_adapter = queue_adapter
        self.queues = dict(queues)
        self.client = SwitchClient(
            sw.name,
            sw.grpc_addr,
            pipeline,
            sw.device_id,
            sw.election_id or settings.election_id,
            tls=settings.switch_tls(sw),
        )
        self.stats = AgentStats()
        self._desired = desired
        # Jobs whose counters are polled: every job of any intent so far, plus jobs found counting on
        # the switch (untagged or tagged traffic of jobs no intent named, e.g. with no priorities at all).
        self._seen_jobs: set[int] = set()
        self._telemetry_cycles = 0
        self._desired_changed = asyncio.Event()
        self._applied = asyncio.Condition()
        self._installed: dict[EntryKey, TableEntry] | None = None  # model of the switch; None = read it
        self._queues_ok = False
        self._outranked: str | None = None  # why we are not primary, kept while re-arbitrating
        self._task: asyncio.Task[None] | None = None
        self._stopping = False

    @property
    def name(self) -> str:
        return self.config.name

    # ---- interface for the daemon ---------------------------------------------------------------

    def start(self) -> None:
        self._stopping = False
        self._task = asyncio.create_task(self.run(), name=f"agent:{self.name}")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stopping = True
        # Cancel until it is done: Python 3.11's asyncio.wait_for can swallow a cancellation that
        # arrives as the awaited call (e.g. finsy's connect) completes, and the loop would go on.
        while not task.done():
            task.cancel()
            await asyncio.wait({task}, timeout=1.0)
        with contextlib.suppress(asyncio.CancelledError, Exception):
            task.result()

    def set_desired(self, desired: DesiredState) -> None:
        self._desired = desired
        self._desired_changed.set()

    @property
    def desired(self) -> DesiredState:
        return self._desired

    async def wait_applied(self, generation: int, timeout_s: float) -> bool:
        """True once this switch holds ``generation`` (or a later one); False on timeout."""
        async with self._applied:
            try:
                await asyncio.wait_for(
                    self._applied.wait_for(lambda: self.stats.applied_generation >= generation), timeout_s
                )
            except TimeoutError:
                return False
        return True

    # ---- lifecycle ------------------------------------------------------------------------------

    async def run(self) -> None:
        backoff = Backoff(self.settings.reconnect_min_s, self.settings.reconnect_max_s)
        while not self._stopping:
            try:
                # A TCP probe every probe_interval_s costs far less than a P4Runtime handshake: a switch
                # back after any outage is seen within one interval, and the backoff below only spaces
                # out handshakes that fail on an open port.
                if not await self.client.listening():
                    self._error(
                        f"UNAVAILABLE: nothing listens on {self.config.grpc_addr}; "
                        f"probing every {self.settings.probe_interval_s:g} s"
                    )
                    await self.client.wait_listening(self.settings.probe_interval_s)
                await self.client.connect(timeout_s=max(5.0, self.settings.reconnect_max_s))
                self.stats.connects += 1
                self._set_link(True)
                if not self.client.primary:
                    await self._wait_for_primary(backoff.next())
                    continue
                backoff.reset()
                await self._restore()
                await self._serve()
            except asyncio.CancelledError:
                raise
            except (SwitchError, QueueConfigError, grpc.RpcError, OSError) as exc:
                self._error(str(exc))
            except Exception as exc:  # a bug must not silently stop a switch's reconciliation forever
                LOG.exception("%s: unexpected error", self.name)
                self._error(f"internal error: {exc!r}")
            finally:
                await self.client.close()
                self._set_link(False)
            if not self._stopping and not await self.client.listening():
                continue  # the switch is gone: the probe above notices it back, no backoff to wait out
            delay = backoff.next()
            LOG.debug("%s: reconnecting in %.2gs", self.name, delay)
            await self._wait_out_backoff(delay)

    async def _wait_out_backoff(self, delay: float) -> None:
        """Sleep ``delay`` before the next handshake, probing meanwhile: a switch that is dying can still
        listen when the stream breaks, and once its port closes the probe at the top of ``run`` takes over,
        so its restart is met at once instead of after the rest of the backoff."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + delay
        while (left := deadline - loop.time()) > 0:
            await asyncio.sleep(min(left, self.settings.probe_interval_s))
            if not await self.client.listening():
                return

    async def _wait_for_primary(self, delay: float) -> None:
        """Another controller is primary: wait for finsy to report a promotion, else reconnect later."""
        self._outranked = (
            f"not primary (election id {self.client.election_id}, primary holds {self.client.primary_election_id})"
        )
        self._error(f"{self._outranked}; retrying in {delay:.2g}s")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.client.wait_role_change(), delay)
        if self.client.primary:
            LOG.info("%s: became primary", self.name)
            await self._restore()
            await self._serve()

    async def _restore(self) -> None:
        """Everything a fresh (or restarted) switch needs: pipeline, queues, all entries."""
        t0 = time.monotonic()
        self._outranked = None
        if await self.client.load_pipeline():
            self.stats.pipeline_loads += 1
        self.stats.pipeline = self.pipeline.name
        self._installed = None
        await self._configure_queues()
        d = await self._reconcile(full=True)
        LOG.info("%s: in sync after %.0f ms (%s)", self.name, (time.monotonic() - t0) * 1000, d.summary())

    async def _serve(self) -> None:
        telemetry = asyncio.create_task(self._telemetry_loop(), name=f"telemetry:{self.name}")
        retry = Backoff(self.settings.reconnect_min_s, self.settings.reconnect_max_s)
        next_audit = time.monotonic() + self.settings.audit_interval_s
        next_retry: float | None = None
        try:
            while True:
                if not self.client.connected or not self.client.primary:
                    if self.client.connected:
                        self._outranked = f"primary role lost to election id {self.client.primary_election_id}"
                    self._error("connection lost" if not self.client.connected else "primary role lost")
                    return
                wake_at = next_audit if next_retry is None else min(next_audit, next_retry)
                await self._wait_event(wake_at - time.monotonic())
                if not self.client.connected or not self.client.primary:
                    continue
                now = time.monotonic()
                try:
                    if now >= next_audit:
                        next_audit = now + self.settings.audit_interval_s
                        await self._audit()
                    elif self._desired_changed.is_set() or next_retry is not None:
                        self._desired_changed.clear()
                        await self._reconcile(full=self.settings.read_back_on_apply or next_retry is not None)
                    next_retry = None
                    retry.reset()
                except SwitchError as exc:
                    if exc.code in _CONNECTION_CODES:
                        raise
                    # E.g. a rejected batch: the switch may hold part of it. Re-read and retry.
                    self._installed = None
                    next_retry = time.monotonic() + retry.next()
                    self.stats.write_error = str(exc)
                    self._error(f"{exc} (retrying)")
        finally:
            telemetry.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await telemetry

    async def _wait_event(self, timeout_s: float) -> None:
        waits = [
            asyncio.ensure_future(self._desired_changed.wait()),
            asyncio.ensure_future(self.client.wait_role_change()),
        ]
        try:
            await asyncio.wait(waits, timeout=max(0.0, timeout_s), return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _audit(self) -> None:
        """Repair drift: a pipeline replaced behind our back, entries changed by someone else."""
        if not await self.client.has_our_pipeline():
            LOG.warning("%s: pipeline missing or replaced; restoring", self.name)
            self.stats.pipeline = ""
            await self._restore()
            return
        if not self._queues_ok:
            await self._configure_queues()
        d = await self._reconcile(full=True)
        if not d.empty:
            LOG.warning("%s: audit repaired drift (%s)", self.name, d.summary())

    async def _configure_queues(self) -> None:
        try:
            await asyncio.to_thread(self.queue_adapter.configure, self.queues)
            self._queues_ok = True
            self.stats.queue_error = ""
        except QueueConfigError as exc:
            # Entries matter more than shaping: keep going, retry at the next audit. Status reports it in
            # queue_error, and the lab refuses to measure on an unshaped bottleneck.
            self._queues_ok = False
            self.stats.queue_error = str(exc)
            LOG.error("%s: queue settings NOT applied: %s", self.name, exc)

    async def _reconcile(self, full: bool) -> Diff:
        desired = self._desired
        t0 = time.monotonic()
        if full or self._installed is None:
            self._installed = {e.key: e for e in await self.client.read_entries()}
        changes = diff(desired.entries, self._installed.values())
        if not changes.empty:
            try:
                self.stats.write_rpcs += await self.client.apply(changes, self.settings.write_batch)
            except SwitchError:
                self._installed = None
                raise
            self._installed = apply_diff(self._installed.values(), changes)
            self.stats.writes["insert"] += len(changes.inserts)
            self.stats.writes["modify"] += len(changes.modifies)
            self.stats.writes["delete"] += len(changes.deletes)
            LOG.info("%s: generation %d written (%s)", self.name, desired.generation, changes.summary())
        self.stats.reconcile_seconds = time.monotonic() - t0
        self.stats.entries = count_by_table(self._installed.values())
        self.stats.last_error = self.stats.write_error = ""
        async with self._applied:
            self.stats.applied_generation = desired.generation
            self._applied.notify_all()
        return changes

    # ---- telemetry ------------------------------------------------------------------------------

    def counter_requests(self) -> dict[str, list[int]]:
        job_size = self.pipeline.counter_size(contract.JOB_PACKETS)
        self._seen_jobs.update(j for j in self._desired.job_ids if j < job_size)
        jobs = sorted({0, *self._seen_jobs})
        ports = sorted(
            p for p in self.config.port_numbers if p < self.pipeline.counter_size(contract.SHIM_BAD_HEADER_COUNTER)
        )
        return {**{c: jobs for c in contract.JOB_COUNTERS}, **{c: ports for c in contract.PORT_COUNTERS}}

    async def _telemetry_loop(self) -> None:
        while True:
            try:
                if self._telemetry_cycles % DISCOVERY_EVERY == 0:
                    # One wildcard read of the per-job packet counter finds jobs that carry traffic.
                    cells = await self.client.read_counters(contract.JOB_PACKETS)
                    self._seen_jobs.update(i for i, v in cells.items() if v.packets)
                self._telemetry_cycles += 1
                self.stats.counters = await self.client.read_many_counters(self.counter_requests())
                self.stats.counters_at = time.time()
            except SwitchError as exc:
                LOG.debug("%s: counter read failed: %s", self.name, exc)
            except Exception:  # telemetry must never take the agent down with it
                LOG.exception("%s: counter read failed", self.name)
            await asyncio.sleep(self.settings.counter_interval_s)

    # ---- status helpers -------------------------------------------------------------------------

    def refresh(self) -> AgentStats:
        """The stats with the live connection state."""
        self.stats.connected = self.client.connected
        self.stats.primary = self.client.primary
        return self.stats

    def sync_state(self, generation: int) -> tuple[int, str]:
        """(intent_pb2.SyncState, reason) of this switch against ``generation``."""
        st = self.refresh()
        if self._outranked and not st.primary:  # also while reconnecting to re-arbitrate
            return pb.NOT_PRIMARY, self._outranked
        if not st.connected:
            return pb.DISCONNECTED, st.last_error or "no P4Runtime stream"
        if not st.primary:
            return pb.NOT_PRIMARY, st.last_error or "not primary"
        if st.applied_generation >= generation:
            return pb.IN_SYNC, ""
        if st.write_error:
            return pb.WRITE_ERROR, st.write_error
        return pb.PENDING, f"holds generation {st.applied_generation}, writing {generation}"

    def _set_link(self, up: bool) -> None:
        self.refresh()
        if not up:
            # Unknown until the next restore: a restarted switch holds nothing.
            self.stats.pipeline = ""
            self.stats.applied_generation = -1
            self._installed = None

    def _error(self, message: str) -> None:
        """Record for Status; log only when it changes (a switch down for hours logs once)."""
        if not message.startswith(f"{self.name}:"):
            message = f"{self.name}: {message}"
        if message != self.stats.last_error:
            LOG.warning("%s", message)
        self.stats.last_error = message
