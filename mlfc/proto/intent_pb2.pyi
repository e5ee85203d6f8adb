from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SyncState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SYNC_UNKNOWN: _ClassVar[SyncState]
    IN_SYNC: _ClassVar[SyncState]
    PENDING: _ClassVar[SyncState]
    NOT_PRIMARY: _ClassVar[SyncState]
    DISCONNECTED: _ClassVar[SyncState]
    WRITE_ERROR: _ClassVar[SyncState]
SYNC_UNKNOWN: SyncState
IN_SYNC: SyncState
PENDING: SyncState
NOT_PRIMARY: SyncState
DISCONNECTED: SyncState
WRITE_ERROR: SyncState

class IterationWindow(_message.Message):
    __slots__ = ("first", "last", "priority")
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    first: int
    last: int
    priority: int
    def __init__(self, first: _Optional[int] = ..., last: _Optional[int] = ..., priority: _Optional[int] = ...) -> None: ...

class Flow(_message.Message):
    __slots__ = ("src", "dst", "protocol", "src_port", "dst_port")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    SRC_PORT_FIELD_NUMBER: _ClassVar[int]
    DST_PORT_FIELD_NUMBER: _ClassVar[int]
    src: str
    dst: str
    protocol: int
    src_port: int
    dst_port: int
    def __init__(self, src: _Optional[str] = ..., dst: _Optional[str] = ..., protocol: _Optional[int] = ..., src_port: _Optional[int] = ..., dst_port: _Optional[int] = ...) -> None: ...

class JobIntent(_message.Message):
    __slots__ = ("job_id", "priority", "windows", "flows")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    priority: int
    windows: _containers.RepeatedCompositeFieldContainer[IterationWindow]
    flows: _containers.RepeatedCompositeFieldContainer[Flow]
    def __init__(self, job_id: _Optional[int] = ..., priority: _Optional[int] = ..., windows: _Optional[_Iterable[_Union[IterationWindow, _Mapping]]] = ..., flows: _Optional[_Iterable[_Union[Flow, _Mapping]]] = ...) -> None: ...

class EcnProfile(_message.Message):
    __slots__ = ("kmin", "kmax", "pmax")
    KMIN_FIELD_NUMBER: _ClassVar[int]
    KMAX_FIELD_NUMBER: _ClassVar[int]
    PMAX_FIELD_NUMBER: _ClassVar[int]
    kmin: int
    kmax: int
    pmax: float
    def __init__(self, kmin: _Optional[int] = ..., kmax: _Optional[int] = ..., pmax: _Optional[float] = ...) -> None: ...

class PortEcn(_message.Message):
    __slots__ = ("switch", "port", "profile")
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    PROFILE_FIELD_NUMBER: _ClassVar[int]
    switch: str
    port: int
    profile: EcnProfile
    def __init__(self, switch: _Optional[str] = ..., port: _Optional[int] = ..., profile: _Optional[_Union[EcnProfile, _Mapping]] = ...) -> None: ...

class DropPolicy(_message.Message):
    __slots__ = ("level_depths", "min_importance")
    LEVEL_DEPTHS_FIELD_NUMBER: _ClassVar[int]
    MIN_IMPORTANCE_FIELD_NUMBER: _ClassVar[int]
    level_depths: _containers.RepeatedScalarFieldContainer[int]
    min_importance: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, level_depths: _Optional[_Iterable[int]] = ..., min_importance: _Optional[_Iterable[int]] = ...) -> None: ...

class Intent(_message.Message):
    __slots__ = ("jobs", "drop_policy", "ecn", "interleaving", "source")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    DROP_POLICY_FIELD_NUMBER: _ClassVar[int]
    ECN_FIELD_NUMBER: _ClassVar[int]
    INTERLEAVING_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobIntent]
    drop_policy: DropPolicy
    ecn: _containers.RepeatedCompositeFieldContainer[PortEcn]
    interleaving: bool
    source: str
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobIntent, _Mapping]]] = ..., drop_policy: _Optional[_Union[DropPolicy, _Mapping]] = ..., ecn: _Optional[_Iterable[_Union[PortEcn, _Mapping]]] = ..., interleaving: _Optional[bool] = ..., source: _Optional[str] = ...) -> None: ...

class Unconverged(_message.Message):
    __slots__ = ("switch", "state", "reason")
    SWITCH_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    switch: str
    state: SyncState
    reason: str
    def __init__(self, switch: _Optional[str] = ..., state: _Optional[_Union[SyncState, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class ApplyReply(_message.Message):
    __slots__ = ("generation", "entries", "unconverged")
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    UNCONVERGED_FIELD_NUMBER: _ClassVar[int]
    generation: int
    entries: int
    unconverged: _containers.RepeatedCompositeFieldContainer[Unconverged]
    def __init__(self, generation: _Optional[int] = ..., entries: _Optional[int] = ..., unconverged: _Optional[_Iterable[_Union[Unconverged, _Mapping]]] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetReply(_message.Message):
    __slots__ = ("intent", "generation")
    INTENT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    intent: Intent
    generation: int
    def __init__(self, intent: _Optional[_Union[Intent, _Mapping]] = ..., generation: _Optional[int] = ...) -> None: ...

class SwitchStatus(_message.Message):
    __slots__ = ("name", "connected", "primary", "pipeline", "applied_generation", "entries", "last_error", "state", "queue_error", "applied")
    class EntriesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    PRIMARY_FIELD_NUMBER: _ClassVar[int]
    PIPELINE_FIELD_NUMBER: _ClassVar[int]
    APPLIED_GENERATION_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    LAST_ERROR_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    QUEUE_ERROR_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    name: str
    connected: bool
    primary: bool
    pipeline: str
    applied_generation: int
    entries: _containers.ScalarMap[str, int]
    last_error: str
    state: SyncState
    queue_error: str
    applied: bool
    def __init__(self, name: _Optional[str] = ..., connected: _Optional[bool] = ..., primary: _Optional[bool] = ..., pipeline: _Optional[str] = ..., applied_generation: _Optional[int] = ..., entries: _Optional[_Mapping[str, int]] = ..., last_error: _Optional[str] = ..., state: _Optional[_Union[SyncState, str]] = ..., queue_error: _Optional[str] = ..., applied: _Optional[bool] = ...) -> None: ...

class JobCounters(_message.Message):
    __slots__ = ("job_id", "packets", "bytes", "ecn_marks", "drops")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    PACKETS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    ECN_MARKS_FIELD_NUMBER: _ClassVar[int]
    DROPS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    packets: int
    bytes: int
    ecn_marks: int
    drops: int
    def __init__(self, job_id: _Optional[int] = ..., packets: _Optional[int] = ..., bytes: _Optional[int] = ..., ecn_marks: _Optional[int] = ..., drops: _Optional[int] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("switches", "jobs", "generation")
    SWITCHES_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    switches: _containers.RepeatedCompositeFieldContainer[SwitchStatus]
    jobs: _containers.RepeatedCompositeFieldContainer[JobCounters]
    generation: int
    def __init__(self, switches: _Optional[_Iterable[_Union[SwitchStatus, _Mapping]]] = ..., jobs: _Optional[_Iterable[_Union[JobCounters, _Mapping]]] = ..., generation: _Optional[int] = ...) -> None: ...
