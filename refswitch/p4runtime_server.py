"""The P4Runtime service of the reference switch, behaving like BMv2's (PI's) server for mlfc's P4Info.

Arbitration follows PI: the live StreamChannel with the highest election id is primary; a duplicate
id ends that stream with INVALID_ARGUMENT ("Election id already exists"); every change of primary is
announced to all streams (OK "Is primary" / ALREADY_EXISTS "Is backup", carrying the primary's id).
Write and SetForwardingPipelineConfig need the primary's election id (none at all is accepted while
no stream is open, as PI does). A Write reports per-update errors the P4Runtime way: status UNKNOWN
whose details hold one p4.v1.Error per update. docs/refswitch.md lists the error codes.

One file (over 400 lines): the RPC handlers share arbitration state; the codec (``codec.py``), the
tables and the pipeline already live apart.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Iterator
from concurrent import futures

import grpc
from finsy.proto import p4r, p4r_grpc, rpc_status
from google.protobuf import any_pb2

from mlfc.refswitch import codec
from mlfc.refswitch.device import Device
from mlfc.refswitch.errors import Code, P4RuntimeError, invalid
from mlfc.tls import TlsConfig, add_port

log = logging.getLogger("mlfc.refswitch.p4runtime")

P4RUNTIME_API_VERSION = "1.3.0"  # what PI (simple_switch_grpc) reports
MAX_CONNECTIONS = 16
ERROR_SPACE = "mlfc-refswitch"
_GRPC_CODES = {sc.value[0]: sc for sc in grpc.StatusCode}


def _u128(msg: p4r.Uint128) -> int:
    return (msg.high << 64) | msg.low


def _to_u128(value: int) -> p4r.Uint128:
    return p4r.Uint128(high=value >> 64, low=value & 0xFFFFFFFFFFFFFFFF)


def abort(context: grpc.ServicerContext, code: Code, message: str, details: list[p4r.Error] | None = None) -> None:
    """End the RPC with ``code``; like PI, the google.rpc.Status travels in grpc-status-details-bin."""
    status = rpc_status.Status(code=int(code), message=message)
    for err in details or []:
        packed = any_pb2.Any()
        packed.Pack(err)
        status.details.append(packed)
    context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
    context.abort(_GRPC_CODES[int(code)], message)


class Connection:
    def __init__(self) -> None:
        self.election_id: int | None = None
        self.device_id: int | None = None
        self.out: queue.Queue = queue.Queue()


class Arbiter:
    """Controller arbitration for the default role (PI ignores roles)."""

    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.lock = threading.Lock()
        self.connections: list[Connection] = []

    def primary(self) -> Connection | None:
        return max(self.connections, key=lambda c: c.election_id, default=None)

    def is_primary_id(self, election_id: int) -> bool:
        with self.lock:
            p = self.primary()
            return p is not None and p.election_id == election_id

    def count(self) -> int:
        with self.lock:
            return len(self.connections)

    def arbitrate(self, conn: Connection, update: p4r.MasterArbitrationUpdate) -> None:
        election_id = _u128(update.election_id)
        with self.lock:
            if conn.election_id is None:
                if update.device_id != self.device_id:
                    raise P4RuntimeError(Code.NOT_FOUND, f"Unknown device id {update.device_id}")
                if len(self.connections) >= MAX_CONNECTIONS:
                    raise P4RuntimeError(Code.RESOURCE_EXHAUSTED, "Too many connections")
                if any(c.election_id == election_id for c in self.connections):
                    raise invalid("Election id already exists")
                conn.election_id, conn.device_id = election_id, update.device_id
                self.connections.append(conn)
                if self.primary() is conn:
                    self._notify_all()
                else:
                    self._notify(conn)
                return
            if update.device_id != conn.device_id:
                raise P4RuntimeError(Code.FAILED_PRECONDITION, "Invalid device id")
            if election_id == conn.election_id:
                return
            was_primary = self.primary() is conn
            if any(c.election_id == election_id for c in self.connections if c is not conn):
                raise invalid("New election id already exists")
            conn.election_id = election_id
            if (self.primary() is conn) != was_primary:
                self._notify_all()
            else:
                self._notify(conn)

    def remove(self, conn: Connection) -> None:
        with self.lock:
            if conn not in self.connections:
                return
            was_primary = self.primary() is conn
            self.connections.remove(conn)
            if was_primary:
                self._notify_all()

    def _notify(self, conn: Connection) -> None:
        primary = self.primary()
        assert primary is not None and primary.election_id is not None
        is_primary = primary is conn
        status = rpc_status.Status(
            code=int(Code.OK if is_primary else Code.ALREADY_EXISTS),
            message="Is primary" if is_primary else "Is backup",
        )
        conn.out.put(
            p4r.StreamMessageResponse(
                arbitration=p4r.MasterArbitrationUpdate(
                    device_id=self.device_id, election_id=_to_u128(primary.election_id), status=status
                )
            )
        )

    def _notify_all(self) -> None:
        for c in self.connections:
            self._notify(c)


class P4RuntimeService(p4r_grpc.P4RuntimeServicer):
    def __init__(self, device: Device) -> None:
        self.device = device
        self.arbiter = Arbiter(device.device_id)

    # ---- access checks -------------------------------------------------------------------------

    def _check_device(self, device_id: int) -> None:
        if device_id != self.device.device_id:
            raise P4RuntimeError(Code.NOT_FOUND, f"Unknown device id {device_id}")

    def _check_primary(self, request: p4r.WriteRequest | p4r.SetForwardingPipelineConfigRequest) -> None:
        n = self.arbiter.count()
        if n == 0 and request.HasField("election_id"):
            raise P4RuntimeError(Code.PERMISSION_DENIED, "Not primary")
        if n > 0 and not self.arbiter.is_primary_id(_u128(request.election_id)):
            raise P4RuntimeError(Code.PERMISSION_DENIED, "Not primary")

    # ---- RPCs ------------------------------------------------------------------------------------

    def Capabilities(self, request: p4r.CapabilitiesRequest, context: grpc.ServicerContext) -> p4r.CapabilitiesResponse:
        return p4r.CapabilitiesResponse(p4runtime_api_version=P4RUNTIME_API_VERSION)

    def SetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            self._check_primary(request)
            self.device.set_pipeline(request.action, request.config)
            log.info("pipeline set (action %s)", p4r.SetForwardingPipelineConfigRequest.Action.Name(request.action))
        except P4RuntimeError as err:
            log.info("SetForwardingPipelineConfig refused: %s", err)
            abort(context, err.code, err.message)
        return p4r.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(self, request, context):
        try:
            self._check_device(request.device_id)
            config = self.device.get_pipeline(request.response_type)
        except P4RuntimeError as err:
            abort(context, err.code, err.message)
        return p4r.GetForwardingPipelineConfigResponse(config=config)

    def Write(self, request: p4r.WriteRequest, context: grpc.ServicerContext) -> p4r.WriteResponse:
        try:
            self._check_device(request.device_id)
            self._check_primary(request)
            self.device.require_pipeline()
            if request.atomicity != p4r.WriteRequest.CONTINUE_ON_ERROR:
                raise P4RuntimeError(Code.UNIMPLEMENTED, "Support for atomic write modes has not been implemented")
        except P4RuntimeError as err:
            abort(context, err.code, err.message)
        errors: list[p4r.Error] = []
        failed = False
        with self.device.lock, self.device.tables.batch():
            for update in request.updates:
                try:
                    self._write_one(update)
                    errors.append(p4r.Error(canonical_code=int(Code.OK)))
                except P4RuntimeError as err:
                    failed = True
                    errors.append(p4r.Error(canonical_code=int(err.code), message=err.message, space=ERROR_SPACE))
        if failed:
            log.info(
                "Write: %d of %d updates failed: %s",
                sum(e.canonical_code != 0 for e in errors),
                len(errors),
                "; ".join(e.message for e in errors if e.canonical_code)[:500],
            )
            abort(context, Code.UNKNOWN, "Write failure.", errors)
        return p4r.WriteResponse()

    def Read(self, request: p4r.ReadRequest, context: grpc.ServicerContext) -> Iterator[p4r.ReadResponse]:
        try:
            self._check_device(request.device_id)
            self.device.require_pipeline()
            response = p4r.ReadResponse()
            for entity in request.entities:
                self._read_one(entity, response)
        except P4RuntimeError as err:
            abort(context, err.code, err.message)
        yield response

    def StreamChannel(self, request_iterator, context):
        conn = Connection()

        def read_requests() -> None:
            try:
                for req in request_iterator:
                    kind = req.WhichOneof("update")
                    if kind == "arbitration":
                        self.arbiter.arbitrate(conn, req.arbitration)
                    # Packet-out and digest acks: mlfc.p4 has no CPU port and no digests; PI ignores them too.
            except P4RuntimeError as err:
                conn.out.put(err)
            except grpc.RpcError as err:  # the client cancelled or the channel broke: the stream just ends
                log.debug("StreamChannel request stream ended: %s", err)
            except Exception:  # a bug here must not leave the stream open with no reader: log it, end the stream
                log.exception("StreamChannel: reading the request stream failed")
            conn.out.put(None)

        context.add_callback(lambda: conn.out.put(None))
        threading.Thread(target=read_requests, name="p4rt-stream", daemon=True).start()
        try:
            while True:
                item = conn.out.get()
                if item is None:
                    return
                if isinstance(item, P4RuntimeError):
                    log.info("StreamChannel ended: %s", item)
                    self.arbiter.remove(conn)
                    abort(context, item.code, item.message)
                yield item
        finally:
            self.arbiter.remove(conn)

    # ---- writes ----------------------------------------------------------------------------------

    def _write_one(self, update: p4r.Update) -> None:
        index = self.device.require_pipeline()
        kind = update.entity.WhichOneof("entity")
        if update.type not in (p4r.Update.INSERT, p4r.Update.MODIFY, p4r.Update.DELETE):
            raise invalid("Update type is not set" if update.type == p4r.Update.UNSPECIFIED else "Invalid update type")
        if kind == "table_entry":
            self._write_table(update.type, update.entity.table_entry)
        elif kind == "counter_entry":
            self._write_counter(update.type, update.entity.counter_entry)
        elif kind == "register_entry":
            raise P4RuntimeError(Code.UNIMPLEMENTED, "Register writes are not supported (as on BMv2)")
        elif kind in ("value_set_entry", "extern_entry", "packet_replication_engine_entry"):
            raise P4RuntimeError(Code.UNIMPLEMENTED, f"{kind} writes are not supported")
        elif kind in (
            "meter_entry",
            "direct_meter_entry",
            "action_profile_member",
            "action_profile_group",
            "direct_counter_entry",
            "digest_entry",
        ):
            raise invalid(f"{codec.INVALID_ID}: mlfc.p4 has no {kind.replace('_', ' ')}s")
        else:
            raise P4RuntimeError(Code.UNKNOWN, "Incorrect entity type")
        del index

    def _write_table(self, utype: int, te: p4r.TableEntry) -> None:
        index = self.device.require_pipeline()
        spec = codec.table_spec(index, te.table_id)
        if te.HasField("time_since_last_hit"):
            raise invalid("has_time_since_last_hit must not be set in WriteRequest")
        table = self.device.tables[spec.name]
        if te.is_default_action:
            if utype != p4r.Update.MODIFY:
                raise invalid(f"Cannot use {p4r.Update.Type.Name(utype)} for default entry")
            if len(te.match):
                raise invalid("Non-empty key for default entry")
            if te.priority:
                raise invalid("Non-zero priority for default entry")
            if spec.const_default:
                raise P4RuntimeError(
                    Code.PERMISSION_DENIED,
                    f"Cannot set / reset default action for {spec.name}, which has a const default",
                )
            if te.HasField("action"):
                table.set_default(*codec.decode_action(index, te, default=True))
            else:
                table.reset_default()
            return
        if utype == p4r.Update.DELETE:
            table.delete(codec.decode_key(index, te))
            return
        entry = codec.decode_entry(index, te)
        if utype == p4r.Update.INSERT:
            table.insert(entry)
        else:
            table.modify(entry)

    def _write_counter(self, utype: int, ce: p4r.CounterEntry) -> None:
        index = self.device.require_pipeline()
        spec = index.counters.get(ce.counter_id)
        if spec is None:
            raise invalid(f"{codec.INVALID_ID} (counter {ce.counter_id:#x})")
        if not ce.HasField("index"):
            raise P4RuntimeError(Code.UNIMPLEMENTED, "Wildcard write is not supported for indirect counters yet")
        if ce.index.index < 0:
            raise invalid("A negative number is not a valid index value")
        counter = self.device.state.counters[spec.name]
        if utype == p4r.Update.INSERT:
            raise invalid("INSERT update type not supported for counters")
        if utype == p4r.Update.MODIFY:
            counter.write(ce.index.index, ce.data.packet_count, ce.data.byte_count)
        else:
            counter.write(ce.index.index, 0, 0)

    # ---- reads -----------------------------------------------------------------------------------

    def _read_one(self, entity: p4r.Entity, response: p4r.ReadResponse) -> None:
        index = self.device.require_pipeline()
        kind = entity.WhichOneof("entity")
        if kind == "table_entry":
            self._read_table(entity.table_entry, response)
        elif kind == "counter_entry":
            self._read_counter(entity.counter_entry, response)
        elif kind == "register_entry":
            raise P4RuntimeError(Code.UNIMPLEMENTED, "Register reads are not supported (as on BMv2)")
        elif kind in ("value_set_entry", "extern_entry", "packet_replication_engine_entry"):
            raise P4RuntimeError(Code.UNIMPLEMENTED, f"{kind} reads are not supported")
        elif kind == "direct_counter_entry":
            codec.table_spec(index, entity.direct_counter_entry.table_entry.table_id)
            raise invalid("Table has no direct counters")
        elif kind == "direct_meter_entry":
            codec.table_spec(index, entity.direct_meter_entry.table_entry.table_id)
            raise invalid("Table has no direct meters")
        elif kind in ("meter_entry", "action_profile_member", "action_profile_group", "digest_entry"):
            msg = getattr(entity, kind)
            ident = next(
                (getattr(msg, f) for f in ("meter_id", "action_profile_id", "digest_id") if hasattr(msg, f)), 0
            )
            if ident:  # id 0 is a wildcard over none of them
                raise invalid(f"{codec.INVALID_ID}: mlfc.p4 has no {kind.replace('_', ' ')}s")
        else:
            raise P4RuntimeError(Code.UNKNOWN, "Incorrect entity type")

    def _read_table(self, te: p4r.TableEntry, response: p4r.ReadResponse) -> None:
        index = self.device.require_pipeline()
        if te.HasField("time_since_last_hit"):
            raise invalid("Do not set time_since_last_hit: no table of mlfc.p4 supports idle timeout")
        if te.table_id == 0:
            if len(te.match):
                raise invalid("A match key needs a table id")
            ids = list(index.tables)
        else:
            codec.table_spec(index, te.table_id)
            ids = [te.table_id]
        for tid in ids:
            spec = index.tables[tid]
            table = self.device.tables[spec.name]
            if te.is_default_action:
                response.entities.add().table_entry.CopyFrom(codec.encode_default(index, spec.name, *table.default))
            elif len(te.match):
                found = table.get(codec.decode_key(index, te))
                if found is not None:
                    response.entities.add().table_entry.CopyFrom(codec.encode_entry(index, spec.name, found))
            else:
                for entry in table.entries():
                    response.entities.add().table_entry.CopyFrom(codec.encode_entry(index, spec.name, entry))

    def _read_counter(self, ce: p4r.CounterEntry, response: p4r.ReadResponse) -> None:
        index = self.device.require_pipeline()
        if ce.counter_id == 0:
            ids = list(index.counters)
        elif ce.counter_id in index.counters:
            ids = [ce.counter_id]
        else:
            raise invalid(f"{codec.INVALID_ID} (counter {ce.counter_id:#x})")
        for cid in ids:
            counter = self.device.state.counters[index.counters[cid].name]
            if ce.HasField("index"):
                if ce.index.index < 0:
                    raise invalid("A negative number is not a valid index value")
                cells = [ce.index.index]
            else:
                cells = range(counter.spec.size)
            for i in cells:
                packets, nbytes = counter.read(i)
                out = response.entities.add().counter_entry
                out.counter_id = cid
                out.index.index = i
                out.data.packet_count = packets
                out.data.byte_count = nbytes


def serve(
    device: Device, address: str, max_workers: int = 32, tls: TlsConfig | None = None
) -> tuple[grpc.Server, P4RuntimeService]:
    """Start the P4Runtime server on ``address`` (host:port; port 0 picks one, see ``server.port``), with TLS
    when ``tls`` is given (docs/tls.md). Which addresses may be served is the caller's check (check_listen)."""
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="p4rt"),
        options=[
            ("grpc.max_receive_message_length", 256 << 20),
            ("grpc.max_send_message_length", 256 << 20),
            ("grpc.so_reuseport", 0),
        ],
    )
    service = P4RuntimeService(device)
    p4r_grpc.add_P4RuntimeServicer_to_server(service, server)
    port = add_port(server, address, tls)
    if port == 0:
        raise OSError(f"cannot listen for P4Runtime on {address}")
    server.start()
    server.port = port  # type: ignore[attr-defined]
    return server, service
