from mlfc.proto import intent_pb2 as _intent_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MetricKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    METRIC_KIND_UNSPECIFIED: _ClassVar[MetricKind]
    ACCURACY: _ClassVar[MetricKind]
    LOSS: _ClassVar[MetricKind]

class FallbackMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FALLBACK_OFF: _ClassVar[FallbackMode]
    FALLBACK_IDLE: _ClassVar[FallbackMode]
    FALLBACK_ENGAGED: _ClassVar[FallbackMode]
METRIC_KIND_UNSPECIFIED: MetricKind
ACCURACY: MetricKind
LOSS: MetricKind
FALLBACK_OFF: FallbackMode
FALLBACK_IDLE: FallbackMode
FALLBACK_ENGAGED: FallbackMode

class Worker(_message.Message):
    __slots__ = ("rank", "host", "address", "flows")
    RANK_FIELD_NUMBER: _ClassVar[int]
    HOST_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    FLOWS_FIELD_NUMBER: _ClassVar[int]
    rank: int
    host: str
    address: str
    flows: _containers.RepeatedCompositeFieldContainer[_intent_pb2.Flow]
    def __init__(self, rank: _Optional[int] = ..., host: _Optional[str] = ..., address: _Optional[str] = ..., flows: _Optional[_Iterable[_Union[_intent_pb2.Flow, _Mapping]]] = ...) -> None: ...

class JobSpec(_message.Message):
    __slots__ = ("job_id", "name", "metric", "workers", "bytes_per_iteration", "final_iteration")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    BYTES_PER_ITERATION_FIELD_NUMBER: _ClassVar[int]
    FINAL_ITERATION_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    name: str
    metric: MetricKind
    workers: _containers.RepeatedCompositeFieldContainer[Worker]
    bytes_per_iteration: int
    final_iteration: int
    def __init__(self, job_id: _Optional[int] = ..., name: _Optional[str] = ..., metric: _Optional[_Union[MetricKind, str]] = ..., workers: _Optional[_Iterable[_Union[Worker, _Mapping]]] = ..., bytes_per_iteration: _Optional[int] = ..., final_iteration: _Optional[int] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("job", "instance", "replace")
    JOB_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REPLACE_FIELD_NUMBER: _ClassVar[int]
    job: JobSpec
    instance: str
    replace: bool
    def __init__(self, job: _Optional[_Union[JobSpec, _Mapping]] = ..., instance: _Optional[str] = ..., replace: _Optional[bool] = ...) -> None: ...

class WorkerProgress(_message.Message):
    __slots__ = ("rank", "has_reports", "last_iteration", "reports")
    RANK_FIELD_NUMBER: _ClassVar[int]
    HAS_REPORTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ITERATION_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    rank: int
    has_reports: bool
    last_iteration: int
    reports: int
    def __init__(self, rank: _Optional[int] = ..., has_reports: _Optional[bool] = ..., last_iteration: _Optional[int] = ..., reports: _Optional[int] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("resumed", "workers")
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    resumed: bool
    workers: _containers.RepeatedCompositeFieldContainer[WorkerProgress]
    def __init__(self, resumed: _Optional[bool] = ..., workers: _Optional[_Iterable[_Union[WorkerProgress, _Mapping]]] = ...) -> None: ...

class IterationReport(_message.Message):
    __slots__ = ("job_id", "worker", "iteration", "metric", "compute_seconds", "comm_seconds", "bytes", "timestamp")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    ITERATION_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    COMPUTE_SECONDS_FIELD_NUMBER: _ClassVar[int]
    COMM_SECONDS_FIELD_NUMBER: _ClassVar[int]
    BYTES_FIELD_NUMBER: _ClassVar[int]
    TIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    worker: int
    iteration: int
    metric: float
    compute_seconds: float
    comm_seconds: float
    bytes: int
    timestamp: float
    def __init__(self, job_id: _Optional[int] = ..., worker: _Optional[int] = ..., iteration: _Optional[int] = ..., metric: _Optional[float] = ..., compute_seconds: _Optional[float] = ..., comm_seconds: _Optional[float] = ..., bytes: _Optional[int] = ..., timestamp: _Optional[float] = ...) -> None: ...

class ReportBatch(_message.Message):
    __slots__ = ("reports",)
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    reports: _containers.RepeatedCompositeFieldContainer[IterationReport]
    def __init__(self, reports: _Optional[_Iterable[_Union[IterationReport, _Mapping]]] = ...) -> None: ...

class ReportAck(_message.Message):
    __slots__ = ("accepted", "duplicates")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    DUPLICATES_FIELD_NUMBER: _ClassVar[int]
    accepted: int
    duplicates: int
    def __init__(self, accepted: _Optional[int] = ..., duplicates: _Optional[int] = ...) -> None: ...

class FinishRequest(_message.Message):
    __slots__ = ("job_id", "reason")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    reason: str
    def __init__(self, job_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class FinishReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("job_id",)
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    def __init__(self, job_id: _Optional[int] = ...) -> None: ...

class CurveFit(_message.Message):
    __slots__ = ("model", "a", "b", "c", "r2", "points", "last_iteration", "last_quality", "t0")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    A_FIELD_NUMBER: _ClassVar[int]
    B_FIELD_NUMBER: _ClassVar[int]
    C_FIELD_NUMBER: _ClassVar[int]
    R2_FIELD_NUMBER: _ClassVar[int]
    POINTS_FIELD_NUMBER: _ClassVar[int]
    LAST_ITERATION_FIELD_NUMBER: _ClassVar[int]
    LAST_QUALITY_FIELD_NUMBER: _ClassVar[int]
    T0_FIELD_NUMBER: _ClassVar[int]
    model: str
    a: float
    b: float
    c: float
    r2: float
    points: int
    last_iteration: int
    last_quality: float
    t0: float
    def __init__(self, model: _Optional[str] = ..., a: _Optional[float] = ..., b: _Optional[float] = ..., c: _Optional[float] = ..., r2: _Optional[float] = ..., points: _Optional[int] = ..., last_iteration: _Optional[int] = ..., last_quality: _Optional[float] = ..., t0: _Optional[float] = ...) -> None: ...

class JobExplanation(_message.Message):
    __slots__ = ("job_id", "name", "state", "fit", "predicted_gain", "next_iterations", "network_seconds", "score", "rank", "priority", "windows", "reasons", "decision", "text")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    FIT_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_GAIN_FIELD_NUMBER: _ClassVar[int]
    NEXT_ITERATIONS_FIELD_NUMBER: _ClassVar[int]
    NETWORK_SECONDS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    REASONS_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    name: str
    state: str
    fit: CurveFit
    predicted_gain: float
    next_iterations: float
    network_seconds: float
    score: float
    rank: int
    priority: int
    windows: _containers.RepeatedCompositeFieldContainer[_intent_pb2.IterationWindow]
    reasons: _containers.RepeatedScalarFieldContainer[str]
    decision: int
    text: str
    def __init__(self, job_id: _Optional[int] = ..., name: _Optional[str] = ..., state: _Optional[str] = ..., fit: _Optional[_Union[CurveFit, _Mapping]] = ..., predicted_gain: _Optional[float] = ..., next_iterations: _Optional[float] = ..., network_seconds: _Optional[float] = ..., score: _Optional[float] = ..., rank: _Optional[int] = ..., priority: _Optional[int] = ..., windows: _Optional[_Iterable[_Union[_intent_pb2.IterationWindow, _Mapping]]] = ..., reasons: _Optional[_Iterable[str]] = ..., decision: _Optional[int] = ..., text: _Optional[str] = ...) -> None: ...

class StatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class FallbackStatus(_message.Message):
    __slots__ = ("mode", "reason")
    MODE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    mode: FallbackMode
    reason: str
    def __init__(self, mode: _Optional[_Union[FallbackMode, str]] = ..., reason: _Optional[str] = ...) -> None: ...

class StatusReply(_message.Message):
    __slots__ = ("jobs", "decision", "applied_decision", "controller_error", "reports", "fallback")
    JOBS_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    APPLIED_DECISION_FIELD_NUMBER: _ClassVar[int]
    CONTROLLER_ERROR_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    FALLBACK_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobExplanation]
    decision: int
    applied_decision: int
    controller_error: str
    reports: int
    fallback: FallbackStatus
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobExplanation, _Mapping]]] = ..., decision: _Optional[int] = ..., applied_decision: _Optional[int] = ..., controller_error: _Optional[str] = ..., reports: _Optional[int] = ..., fallback: _Optional[_Union[FallbackStatus, _Mapping]] = ...) -> None: ...

class JobInfo(_message.Message):
    __slots__ = ("job_id", "name", "metric", "state", "reason", "instance", "registered_at", "changed_at", "workers", "reports", "metric_points", "final_iteration")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    METRIC_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    INSTANCE_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_AT_FIELD_NUMBER: _ClassVar[int]
    CHANGED_AT_FIELD_NUMBER: _ClassVar[int]
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    REPORTS_FIELD_NUMBER: _ClassVar[int]
    METRIC_POINTS_FIELD_NUMBER: _ClassVar[int]
    FINAL_ITERATION_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    name: str
    metric: MetricKind
    state: str
    reason: str
    instance: str
    registered_at: float
    changed_at: float
    workers: _containers.RepeatedCompositeFieldContainer[WorkerProgress]
    reports: int
    metric_points: int
    final_iteration: int
    def __init__(self, job_id: _Optional[int] = ..., name: _Optional[str] = ..., metric: _Optional[_Union[MetricKind, str]] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., instance: _Optional[str] = ..., registered_at: _Optional[float] = ..., changed_at: _Optional[float] = ..., workers: _Optional[_Iterable[_Union[WorkerProgress, _Mapping]]] = ..., reports: _Optional[int] = ..., metric_points: _Optional[int] = ..., final_iteration: _Optional[int] = ...) -> None: ...

class ListJobsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListJobsReply(_message.Message):
    __slots__ = ("jobs",)
    JOBS_FIELD_NUMBER: _ClassVar[int]
    jobs: _containers.RepeatedCompositeFieldContainer[JobInfo]
    def __init__(self, jobs: _Optional[_Iterable[_Union[JobInfo, _Mapping]]] = ...) -> None: ...

class RankedJob(_message.Message):
    __slots__ = ("job_id", "rank", "priority", "plateau", "windows")
    JOB_ID_FIELD_NUMBER: _ClassVar[int]
    RANK_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    PLATEAU_FIELD_NUMBER: _ClassVar[int]
    WINDOWS_FIELD_NUMBER: _ClassVar[int]
    job_id: int
    rank: int
    priority: int
    plateau: bool
    windows: _containers.RepeatedCompositeFieldContainer[_intent_pb2.IterationWindow]
    def __init__(self, job_id: _Optional[int] = ..., rank: _Optional[int] = ..., priority: _Optional[int] = ..., plateau: _Optional[bool] = ..., windows: _Optional[_Iterable[_Union[_intent_pb2.IterationWindow, _Mapping]]] = ...) -> None: ...

class DecisionRecord(_message.Message):
    __slots__ = ("seq", "created_at", "applied_at", "generation", "intent", "jobs")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    APPLIED_AT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    INTENT_FIELD_NUMBER: _ClassVar[int]
    JOBS_FIELD_NUMBER: _ClassVar[int]
    seq: int
    created_at: float
    applied_at: float
    generation: int
    intent: _intent_pb2.Intent
    jobs: _containers.RepeatedCompositeFieldContainer[RankedJob]
    def __init__(self, seq: _Optional[int] = ..., created_at: _Optional[float] = ..., applied_at: _Optional[float] = ..., generation: _Optional[int] = ..., intent: _Optional[_Union[_intent_pb2.Intent, _Mapping]] = ..., jobs: _Optional[_Iterable[_Union[RankedJob, _Mapping]]] = ...) -> None: ...

class ListDecisionsRequest(_message.Message):
    __slots__ = ("after", "limit")
    AFTER_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    after: int
    limit: int
    def __init__(self, after: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class ListDecisionsReply(_message.Message):
    __slots__ = ("decisions", "latest", "applied")
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    LATEST_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[DecisionRecord]
    latest: int
    applied: int
    def __init__(self, decisions: _Optional[_Iterable[_Union[DecisionRecord, _Mapping]]] = ..., latest: _Optional[int] = ..., applied: _Optional[int] = ...) -> None: ...
