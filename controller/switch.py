"""One P4Runtime connection to one switch, on finsy: the only code in mlfc that talks P4Runtime.

``SwitchClient`` connects (stream + arbitration with an election id), loads the pipeline when asked
(SetForwardingPipelineConfig VERIFY_AND_COMMIT when the switch's cookie differs, or always with
``force``), reads and writes table entries as ``TableEntry`` values, and reads counters. The daemon's
per-switch agent and the synchronous ``SwitchConnection`` (PTF tests) both use it.

finsy is used through its public API, except for the three calls it has no public equivalent for
(pipeline cookie, pipeline push, raw reads), which live in controller/finsy_private.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import finsy as fy
from finsy.grpcutil import GRPCStatusCode
from finsy.p4client import P4ClientError
from finsy.proto import p4r

from mlfc.controller import finsy_private
from mlfc.controller.entries import TableEntry
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.reconcile import Diff, batches, diff, to_updates
from mlfc.tls import TlsConfig, load, tls_failure

LOG = logging.getLogger(__name__)

DEFAULT_ELECTION_ID = 10


class SwitchError(RuntimeError):
    """A P4Runtime operation failed; ``code`` is the gRPC status name when there is one."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code


class NotPrimaryError(SwitchError):
    pass


@dataclass(frozen=True, slots=True)
class CounterValue:
    packets: int
    bytes: int


class SwitchClient:
    """Async P4Runtime client for one device. Use ``async with`` or ``connect()``/``close()``."""

    def __init__(
        self,
        name: str,
        grpc_addr: str,
        pipeline: Pipeline | None = None,
        device_id: int = 1,
        election_id: int = DEFAULT_ELECTION_ID,
        tls: TlsConfig | None = None,
    ) -> None:
        """``tls``: the switch serves P4Runtime over TLS (docs/tls.md); None: plain text."""
        self.name = name
        self.grpc_addr = grpc_addr
        self.pipeline = pipeline
        self.device_id = device_id
        self.election_id = election_id
        # No p4blob for finsy: it would load the pipeline by itself on connect, and the agent needs
        # to know whether the switch came up empty (load_pipeline() says so).
        options = fy.SwitchOptions(
            p4info=pipeline.p4info_path if pipeline else None,
            device_id=device_id,
            initial_election_id=election_id,
            channel_credentials=None if tls is None else finsy_credentials(tls),
        )
        self.tls = tls
        self._sw = fy.Switch(name, grpc_addr, options)
        self._session: contextlib.AsyncExitStack | None = None
        self._role_changed = asyncio.Event()
        self._sw.ee.on(fy.SwitchEvent.BECOME_BACKUP, self._on_role_change)
        self._sw.ee.on(fy.SwitchEvent.BECOME_PRIMARY, self._on_role_change)
        self._sw.ee.on(fy.SwitchEvent.CHANNEL_DOWN, self._on_role_change)

    # ---- connection -----------------------------------------------------------------------------

    async def connect(self, timeout_s: float = 10.0) -> None:
        """Open the stream, arbitrate, and (as primary) make sure the pipeline is loaded."""
        if self._session is not None:
            return
        self._role_changed.clear()
        session = contextlib.AsyncExitStack()
        try:
            await asyncio.wait_for(session.enter_async_context(self._sw), timeout_s)
        except TimeoutError:
            raise SwitchError(
                f"{self.name}: no P4Runtime answer from {self.grpc_addr} in {timeout_s:g}s", "DEADLINE_EXCEEDED"
            ) from None
        except P4ClientError as exc:
            named = tls_failure(str(exc.message), self.grpc_addr, self.tls)
            if named is not None and exc.code == GRPCStatusCode.UNAVAILABLE:
                raise SwitchError(f"{self.name}: {named}", "UNAVAILABLE") from None
            raise _switch_error(self.name, "connect", exc) from None
        self._session = session

    async def listening(self) -> bool:
        """Whether the switch's gRPC port accepts a TCP connection now."""
        host, _, port = self.grpc_addr.rpartition(":")
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host.strip("[]"), int(port)), 1.0)
        except (OSError, TimeoutError):
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    async def wait_listening(self, interval_s: float) -> None:
        while not await self.listening():
            await asyncio.sleep(interval_s)

    async def close(self) -> None:
        session, self._session = self._session, None
        if session is not None:
            try:
                await session.aclose()
            except Exception as exc:  # closing a broken stream must not mask the real error
                LOG.debug("%s: close: %s", self.name, exc)

    async def __aenter__(self) -> SwitchClient:
        await self.connect()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def connected(self) -> bool:
        return self._session is not None and self._sw.is_up

    @property
    def primary(self) -> bool:
        return self.connected and self._sw.is_primary

    @property
    def primary_election_id(self) -> int:
        return self._sw.primary_id

    async def wait_role_change(self) -> None:
        """Returns when the channel went down or the primary role was won or lost."""
        await self._role_changed.wait()
        self._role_changed.clear()

    def _on_role_change(self, *_: object) -> None:
        self._role_changed.set()

    def _require_primary(self, what: str) -> None:
        if not self.connected:
            raise SwitchError(f"{self.name}: {what}: not connected", "UNAVAILABLE")
        if not self._sw.is_primary:
            raise NotPrimaryError(
                f"{self.name}: {what}: not primary (our election id {self._sw.election_id}, "
                f"primary's {self._sw.primary_id})",
                "PERMISSION_DENIED",
            )

    # ---- pipeline -------------------------------------------------------------------------------

    async def pipeline_cookie(self) -> int | None:
        """The cookie of the loaded pipeline, None if the switch has none."""
        try:
            reply = await finsy_private.pipeline_cookie_reply(self._sw)
        except P4ClientError as exc:
            if exc.is_pipeline_missing:
                return None
            raise _switch_error(self.name, "GetForwardingPipelineConfig", exc) from None
        return reply.config.cookie.cookie if reply.config.HasField("cookie") else None

    async def has_our_pipeline(self) -> bool:
        return self.pipeline is not None and await self.pipeline_cookie() == self.pipeline.cookie

    async def load_pipeline(self, force: bool = False) -> bool:
        """SetForwardingPipelineConfig(VERIFY_AND_COMMIT) unless the same cookie is loaded already.
        Returns True if it was (re)loaded. Loading clears every table on BMv2."""
        if self.pipeline is None:
            raise SwitchError(f"{self.name}: no pipeline artifacts given")
        self._require_primary("load pipeline")
        if not force and await self.has_our_pipeline():
            return False
        try:
            await finsy_private.set_pipeline(self._sw, self.pipeline.schema.get_pipeline_config())
        except P4ClientError as exc:
            raise _switch_error(self.name, "SetForwardingPipelineConfig", exc) from None
        LOG.info("%s: pipeline %s loaded", self.name, self.pipeline.name)
        return True

    # ---- entries --------------------------------------------------------------------------------

    def _schema_pipeline(self) -> Pipeline:
        if self.pipeline is None:
            raise SwitchError(f"{self.name}: no pipeline artifacts given")
        return self.pipeline

    async def read_entries(self, tables: Iterable[str] | None = None) -> list[TableEntry]:
        """Every non-default entry of ``tables`` (all tables if None), read back from the switch."""
        pipeline = self._schema_pipeline()
        if tables is None:
            ents = [p4r.Entity(table_entry=p4r.TableEntry())]
        else:
            ents = [p4r.Entity(table_entry=p4r.TableEntry(table_id=pipeline.schema.tables[t].id)) for t in tables]
        out = []
        for ent in await self._read_raw(ents, "read entries"):
            if ent.HasField("table_entry") and not ent.table_entry.is_default_action:
                out.append(pipeline.decode(ent.table_entry))
        return out

    async def write_updates(self, updates: Sequence[p4r.Update], batch_size: int = 5000) -> int:
        """Send ``updates`` in Write RPCs of at most ``batch_size``; returns the number of RPCs."""
        self._require_primary("write")
        rpcs = 0
        for chunk in batches(list(updates), batch_size):
            try:
                await self._sw.write(chunk)
            except P4ClientError as exc:
                raise _switch_error(self.name, "Write", exc) from None
            rpcs += 1
        return rpcs

    async def apply(self, d: Diff, batch_size: int = 5000) -> int:
        return await self.write_updates(to_updates(d, self._schema_pipeline()), batch_size)

    async def insert(self, entries: Iterable[TableEntry], batch_size: int = 5000) -> int:
        return await self.apply(Diff(inserts=tuple(entries)), batch_size)

    async def modify(self, entries: Iterable[TableEntry], batch_size: int = 5000) -> int:
        return await self.apply(Diff(modifies=tuple(entries)), batch_size)

    async def delete(self, entries: Iterable[TableEntry], batch_size: int = 5000) -> int:
        return await self.apply(Diff(deletes=tuple(entries)), batch_size)

    async def reconcile(self, desired: Iterable[TableEntry], batch_size: int = 5000) -> Diff:
        """Read the switch, write only the difference to ``desired``; returns what was written."""
        d = diff(desired, await self.read_entries())
        if not d.empty:
            await self.apply(d, batch_size)
        return d

    async def clear_entries(self, batch_size: int = 5000) -> int:
        """Delete every non-default entry; returns how many there were."""
        return len((await self.reconcile([], batch_size)).deletes)

    # ---- counters -------------------------------------------------------------------------------

    async def read_counter(self, counter: str, index: int) -> CounterValue:
        return (await self.read_counters(counter, [index])).get(index, CounterValue(0, 0))

    async def read_counters(self, counter: str, indices: Iterable[int] | None = None) -> dict[int, CounterValue]:
        """Counter cells by index: the listed ``indices`` in one Read RPC, or every cell if None."""
        pipeline = self._schema_pipeline()
        cid = pipeline.schema.counters[counter].id
        if indices is None:
            ents = [p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=cid))]
        else:
            ents = [
                p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=cid, index=p4r.Index(index=i))) for i in indices
            ]
            if not ents:
                return {}
        out = {}
        for ent in await self._read_raw(ents, f"read counter {counter}"):
            c = ent.counter_entry
            out[c.index.index] = CounterValue(c.data.packet_count, c.data.byte_count)
        return out

    async def read_many_counters(self, requests: dict[str, Iterable[int]]) -> dict[str, dict[int, CounterValue]]:
        """Several counters' cells in one Read RPC: {counter: indices} -> {counter: {index: value}}."""
        pipeline = self._schema_pipeline()
        by_id = {pipeline.schema.counters[name].id: name for name in requests}
        ents = [
            p4r.Entity(
                counter_entry=p4r.CounterEntry(counter_id=pipeline.schema.counters[name].id, index=p4r.Index(index=i))
            )
            for name, indices in requests.items()
            for i in indices
        ]
        out: dict[str, dict[int, CounterValue]] = {name: {} for name in requests}
        if not ents:
            return out
        for ent in await self._read_raw(ents, "read counters"):
            c = ent.counter_entry
            out[by_id[c.counter_id]][c.index.index] = CounterValue(c.data.packet_count, c.data.byte_count)
        return out

    async def _read_raw(self, entities: list[p4r.Entity], what: str) -> list[p4r.Entity]:
        if not self.connected:
            raise SwitchError(f"{self.name}: {what}: not connected", "UNAVAILABLE")
        request = p4r.ReadRequest(device_id=self.device_id, entities=entities)
        out: list[p4r.Entity] = []
        try:
            async for reply in finsy_private.read_raw(self._sw, request):
                out.extend(reply.entities)
        except P4ClientError as exc:
            raise _switch_error(self.name, what, exc) from None
        return out


def finsy_credentials(tls: TlsConfig) -> fy.GRPCCredentialsTLS:
    """finsy's form of a client TlsConfig (files read and checked by mlfc.tls)."""
    m = load(tls, "client")
    return fy.GRPCCredentialsTLS(cacert=m.ca, cert=m.cert, private_key=m.key, target_name_override=tls.server_name)


def _switch_error(name: str, what: str, exc: P4ClientError) -> SwitchError:
    details = "; ".join(f"update {i}: {e.canonical_code.name} {e.message}" for i, e in list(exc.details.items())[:5])
    more = f" (+{len(exc.details) - 5} more)" if len(exc.details) > 5 else ""
    text = f"{name}: {what} failed: {exc.code.name} {exc.message}" + (f" [{details}{more}]" if details else "")
    cls = NotPrimaryError if exc.code == GRPCStatusCode.PERMISSION_DENIED else SwitchError
    return cls(text, exc.code.name)
