"""A bare gRPC P4Runtime caller for the reference switch's server-conformance tests only.

It exists to send what a real client never sends: several streams with chosen (even duplicate)
election ids, wrong device ids, writes without an election id, pipeline actions other than
VERIFY_AND_COMMIT, malformed entries, default entries and counter writes; and to see the server's
answers as they are (gRPC status, per-update ``p4.v1.Error`` details, raw protobufs). Product code and
every other test talk P4Runtime through the controller's one client, ``mlfc.controller.sync.SwitchConnection``.

Table entries are the controller's ``TableEntry`` values encoded by its ``Pipeline``; ``table_entry``
then puts match fields and action parameters in P4Info order, so a test can address them by position.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

import grpc
from finsy.proto import p4i, p4r, p4r_grpc, rpc_status

from mlfc.controller.entries import TableEntry
from mlfc.controller.pipeline import Pipeline


class RawError(RuntimeError):
    """A failed RPC: its gRPC status code, message and the per-update errors of a Write."""

    def __init__(self, err: grpc.RpcError) -> None:
        self.code: grpc.StatusCode = err.code()
        self.message: str = err.details() or ""
        self.details: list[p4r.Error] = _details(err)
        failed = [(d.canonical_code, d.message) for d in self.details if d.canonical_code]
        super().__init__(f"{self.code.name}: {self.message} {failed}")


class StreamEnded(RuntimeError):
    pass


def _details(err: grpc.RpcError) -> list[p4r.Error]:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            out = []
            for any_msg in rpc_status.Status.FromString(value).details:
                e = p4r.Error()
                any_msg.Unpack(e)
                out.append(e)
            return out
    return []


def _uint128(value: int) -> p4r.Uint128:
    return p4r.Uint128(high=value >> 64, low=value & (2**64 - 1))


class RawP4Runtime:
    def __init__(self, addr: str, pipeline: Pipeline, device_id: int = 1, election_id: int = 1) -> None:
        self.pipeline = pipeline
        self.device_id = device_id
        self.election_id = election_id
        self.timeout = 10.0
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue[p4r.StreamMessageRequest | None] = queue.Queue()
        self._responses: queue.Queue[p4r.StreamMessageResponse | RawError | None] = queue.Queue()
        self._stream_open = False

    def __enter__(self) -> RawP4Runtime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._requests.put(None)
        self.channel.close()

    # ---- the stream: arbitration ----------------------------------------------------------------

    def _open_stream(self) -> None:
        def requests() -> Iterator[p4r.StreamMessageRequest]:
            while (req := self._requests.get()) is not None:
                yield req

        def pump() -> None:
            try:
                for resp in self.stub.StreamChannel(requests()):
                    self._responses.put(resp)
            except grpc.RpcError as err:
                self._responses.put(RawError(err))
            self._responses.put(None)

        threading.Thread(target=pump, daemon=True, name="raw-p4rt").start()
        self._stream_open = True

    def arbitrate(self, election_id: int | None = None) -> p4r.MasterArbitrationUpdate:
        """Send an arbitration update on this caller's stream; returns the switch's answer."""
        if not self._stream_open:
            self._open_stream()
        if election_id is not None:
            self.election_id = election_id
        update = p4r.MasterArbitrationUpdate(device_id=self.device_id, election_id=_uint128(self.election_id))
        self._requests.put(p4r.StreamMessageRequest(arbitration=update))
        return self.next_arbitration()

    def next_arbitration(self) -> p4r.MasterArbitrationUpdate:
        """The next arbitration message on the stream (raises the error that ended it)."""
        while True:
            item = self._responses.get(timeout=self.timeout)
            if isinstance(item, RawError):
                raise item
            if item is None:
                raise StreamEnded("the stream ended")
            if item.WhichOneof("update") == "arbitration":
                return item.arbitration

    # ---- pipeline ---------------------------------------------------------------------------------

    def set_pipeline(
        self,
        p4info: p4i.P4Info,
        device_config: bytes = b"",
        cookie: int | None = None,
        action: int = p4r.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT,
    ) -> None:
        config = p4r.ForwardingPipelineConfig(p4info=p4info, p4_device_config=device_config)
        if cookie is not None:
            config.cookie.cookie = cookie
        request = p4r.SetForwardingPipelineConfigRequest(
            device_id=self.device_id, election_id=_uint128(self.election_id), action=action, config=config
        )
        self._call(self.stub.SetForwardingPipelineConfig, request)

    def get_pipeline(
        self, response_type: int = p4r.GetForwardingPipelineConfigRequest.ALL
    ) -> p4r.ForwardingPipelineConfig:
        request = p4r.GetForwardingPipelineConfigRequest(device_id=self.device_id, response_type=response_type)
        return self._call(self.stub.GetForwardingPipelineConfig, request).config

    # ---- writes and reads -------------------------------------------------------------------------

    def table_entry(self, te: TableEntry) -> p4r.TableEntry:
        """``te`` encoded by the controller's Pipeline, fields and parameters in P4Info order."""
        msg = self.pipeline.encode(te)
        fields = sorted(msg.match, key=lambda m: m.field_id)
        params = sorted(msg.action.action.params, key=lambda p: p.param_id)
        del msg.match[:]
        msg.match.extend(fields)
        del msg.action.action.params[:]
        msg.action.action.params.extend(params)
        return msg

    def table_update(self, utype: int, te: TableEntry) -> p4r.Update:
        return p4r.Update(type=utype, entity=p4r.Entity(table_entry=self.table_entry(te)))

    def insert(self, entries: Iterable[TableEntry]) -> None:
        self.write(self.table_update(p4r.Update.INSERT, te) for te in entries)

    def write(self, updates: Iterable[p4r.Update], election: bool = True) -> None:
        request = p4r.WriteRequest(device_id=self.device_id, updates=list(updates))
        if election:
            request.election_id.CopyFrom(_uint128(self.election_id))
        self._call(self.stub.Write, request)

    def read(self, entities: Iterable[p4r.Entity]) -> list[p4r.Entity]:
        request = p4r.ReadRequest(device_id=self.device_id, entities=list(entities))
        try:
            return [e for reply in self.stub.Read(request, timeout=self.timeout) for e in reply.entities]
        except grpc.RpcError as err:
            raise RawError(err) from None

    def read_table(self, table: str) -> list[p4r.TableEntry]:
        entity = p4r.Entity(table_entry=p4r.TableEntry(table_id=self.pipeline.schema.tables[table].id))
        return [e.table_entry for e in self.read([entity])]

    def counter_id(self, counter: str) -> int:
        return self.pipeline.schema.counters[counter].id

    def read_counter(self, counter: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """Non-zero cells (or the one asked for) as index -> (packets, bytes)."""
        entity = p4r.Entity(counter_entry=p4r.CounterEntry(counter_id=self.counter_id(counter)))
        if index is not None:
            entity.counter_entry.index.index = index
        cells = {}
        for e in self.read([entity]):
            c = e.counter_entry
            if index is not None or c.data.packet_count or c.data.byte_count:
                cells[c.index.index] = (c.data.packet_count, c.data.byte_count)
        return cells

    def _call(self, rpc, request):  # type: ignore[no-untyped-def]
        try:
            return rpc(request, timeout=self.timeout)
        except grpc.RpcError as err:
            raise RawError(err) from None
