"""A small synchronous P4Runtime client speaking in the model's terms (``tables.Entry``), for tests,
the benchmark and the differential suite: the same entries go to BMv2 and to the reference switch.
(The controller daemon uses finsy; this client exists so tests need no asyncio.)"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterable, Iterator

import grpc
from finsy.proto import p4i, p4r, p4r_grpc, rpc_status

from mlfc.contract import COUNTERS
from mlfc.refswitch import codec
from mlfc.refswitch.p4info import P4InfoIndex, index_p4info
from mlfc.refswitch.tables import Entry


class ClientError(RuntimeError):
    def __init__(self, code: grpc.StatusCode, message: str, details: list[p4r.Error]) -> None:
        failed = [(d.canonical_code, d.message) for d in details if d.canonical_code]
        super().__init__(f"{code.name}: {message} {failed}")
        self.code = code
        self.message = message
        self.details = details


def _details(err: grpc.RpcError) -> list[p4r.Error]:
    for key, value in err.trailing_metadata() or ():
        if key == "grpc-status-details-bin":
            status = rpc_status.Status.FromString(value)
            out = []
            for d in status.details:
                e = p4r.Error()
                d.Unpack(e)
                out.append(e)
            return out
    return []


def wrap(err: grpc.RpcError) -> ClientError:
    return ClientError(err.code(), err.details() or "", _details(err))


class P4RuntimeClient:
    def __init__(self, addr: str, device_id: int = 1, election_id: int = 1, timeout: float = 10.0) -> None:
        self.addr = addr
        self.device_id = device_id
        self.election_id = election_id
        self.timeout = timeout
        self.channel = grpc.insecure_channel(addr)
        self.stub = p4r_grpc.P4RuntimeStub(self.channel)
        self._requests: queue.Queue = queue.Queue()
        self.responses: queue.Queue = queue.Queue()
        self._stream = None
        self.index: P4InfoIndex | None = None

    # ---- stream and arbitration ------------------------------------------------------------------

    def _request_iter(self) -> Iterator[p4r.StreamMessageRequest]:
        while (req := self._requests.get()) is not None:
            yield req

    def open_stream(self) -> None:
        self._stream = self.stub.StreamChannel(self._request_iter())

        def pump() -> None:
            try:
                for resp in self._stream:
                    self.responses.put(resp)
            except grpc.RpcError as err:
                self.responses.put(wrap(err))
            self.responses.put(None)

        threading.Thread(target=pump, daemon=True, name="p4rt-client").start()

    def arbitrate(self, election_id: int | None = None) -> p4r.MasterArbitrationUpdate:
        """Send an arbitration update and return the switch's answer (raises if the stream ended)."""
        if self._stream is None:
            self.open_stream()
        if election_id is not None:
            self.election_id = election_id
        self._requests.put(
            p4r.StreamMessageRequest(
                arbitration=p4r.MasterArbitrationUpdate(
                    device_id=self.device_id,
                    election_id=p4r.Uint128(high=self.election_id >> 64, low=self.election_id & (2**64 - 1)),
                )
            )
        )
        return self.next_arbitration()

    def next_arbitration(self, timeout: float | None = None) -> p4r.MasterArbitrationUpdate:
        while True:
            item = self.responses.get(timeout=timeout or self.timeout)
            if isinstance(item, ClientError):
                raise item
            if item is None:
                raise ClientError(grpc.StatusCode.CANCELLED, "stream ended", [])
            if item.WhichOneof("update") == "arbitration":
                return item.arbitration

    def close(self) -> None:
        self._requests.put(None)
        self.channel.close()

    def __enter__(self) -> P4RuntimeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- pipeline ---------------------------------------------------------------------------------

    def _election(self) -> p4r.Uint128:
        return p4r.Uint128(high=self.election_id >> 64, low=self.election_id & (2**64 - 1))

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
        try:
            self.stub.SetForwardingPipelineConfig(
                p4r.SetForwardingPipelineConfigRequest(
                    device_id=self.device_id, election_id=self._election(), action=action, config=config
                ),
                timeout=self.timeout,
            )
        except grpc.RpcError as err:
            raise wrap(err) from None
        if len(p4info.tables):  # COMMIT carries no P4Info: keep the saved one's index
            self.index = index_p4info(p4info)

    def get_pipeline(
        self, response_type: int = p4r.GetForwardingPipelineConfigRequest.ALL
    ) -> p4r.ForwardingPipelineConfig:
        try:
            return self.stub.GetForwardingPipelineConfig(
                p4r.GetForwardingPipelineConfigRequest(device_id=self.device_id, response_type=response_type),
                timeout=self.timeout,
            ).config
        except grpc.RpcError as err:
            raise wrap(err) from None

    # ---- writes and reads -----------------------------------------------------------------------------

    def write(self, updates: Iterable[p4r.Update], election: bool = True) -> None:
        req = p4r.WriteRequest(device_id=self.device_id, updates=list(updates))
        if election:
            req.election_id.CopyFrom(self._election())
        try:
            self.stub.Write(req, timeout=self.timeout)
        except grpc.RpcError as err:
            raise wrap(err) from None

    def table_update(self, utype: int, table: str, entry: Entry) -> p4r.Update:
        assert self.index is not None, "set_pipeline first"
        update = p4r.Update(type=utype)
        update.entity.table_entry.CopyFrom(codec.encode_entry(self.index, table, entry))
        return update

    def insert(self, table: str, entries: Iterable[Entry]) -> None:
        self.write(self.table_update(p4r.Update.INSERT, table, e) for e in entries)

    def read(self, entities: Iterable[p4r.Entity]) -> list[p4r.Entity]:
        try:
            out: list[p4r.Entity] = []
            for resp in self.stub.Read(
                p4r.ReadRequest(device_id=self.device_id, entities=list(entities)), timeout=self.timeout
            ):
                out.extend(resp.entities)
            return out
        except grpc.RpcError as err:
            raise wrap(err) from None

    def read_table(self, table: str) -> list[p4r.TableEntry]:
        assert self.index is not None
        ent = p4r.Entity()
        ent.table_entry.table_id = self.index.table_ids[table]
        return [e.table_entry for e in self.read([ent])]

    def read_counter(self, counter: str, index: int | None = None) -> dict[int, tuple[int, int]]:
        """Non-zero cells (or the one asked for) as index -> (packets, bytes)."""
        assert self.index is not None
        cid = next(i for i, spec in self.index.counters.items() if spec.name == counter)
        ent = p4r.Entity()
        ent.counter_entry.counter_id = cid
        if index is not None:
            ent.counter_entry.index.index = index
        cells = {}
        for e in self.read([ent]):
            ce = e.counter_entry
            if index is not None or ce.data.packet_count or ce.data.byte_count:
                cells[ce.index.index] = (ce.data.packet_count, ce.data.byte_count)
        return cells

    def read_counters(self) -> dict[str, dict[int, tuple[int, int]]]:
        return {name: self.read_counter(name) for name in COUNTERS}
