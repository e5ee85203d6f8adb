"""A worker's end of the PS path: push tagged gradient tensors, receive pulled tensors.

One ``Sender`` (the push flow) and one ``Receiver`` (pulls), plus a dispatcher thread that files each
delivered tensor under (iteration, tensor id) so callers can wait for the ones they need in any order.
No torch here: tensors are float32 numpy arrays (torch's ``.numpy()`` views work as they are).

Importance of a pushed chunk: ``mlfc.hosts.importance.assign_importance`` on the real gradient values
(mean |g| rank of the chunk within its tensor) and the tensor's layer position (``layer_index`` of
``num_layers``); the ``protect_fraction`` largest chunks are protected. The classes computed are
passed to the transport explicitly, so the push result can say how many chunks were protected.

Loss becomes delay (``loss_feedback``, PS mode with a loss bound): the elements of a push the PS zero-filled
(the send result's missing chunks) are kept in a per-tensor residual (hosts/training/residual.py) and added to
the next push of that tensor, as error feedback does for top-k; importance is computed on gradient + residual.

The network decides how much (``withhold``, issue 25): the worker keeps a congestion estimate for its job (an
EWMA over pushes of the policy's signal, by default the share of chunks marked or dropped) and before a push
withholds its least important chunks up to min(loss bound, f(estimate)) of the push's bytes
(mlfc.policy.withhold): nothing on a free link. Withheld chunks are not sent; the PS zero-fills them like lost
ones, and their elements reach the residual by the same path (the send result's missing chunks), once.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from mlfc.hosts.importance import assign_importance, chunk_magnitudes
from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.compress import NONE, Compression, Compressor
from mlfc.hosts.training.residual import Residuals
from mlfc.hosts.transport import DeliveredTensor, Receiver, ReceiverConfig, Sender, SenderConfig
from mlfc.hosts.transport.config import stale_timeout_for
from mlfc.policy.aggregation import received_elements
from mlfc.policy.withhold import CongestionEstimate, WithholdPolicy, choose_withheld, withheld_share
from mlfc.wire import IMPORTANCE_PROTECTED


class WorkerError(RuntimeError):
    """The PS refused this worker, or stopped answering."""


class JobAborted(WorkerError):
    """The aggregator ended the job (ABORT): e.g. a rank beyond its ``workers`` knocked, or another rank gave up."""


class PsRestarted(WorkerError):
    """The PS restarted (from its checkpoint) and asks this worker to connect again (REJOIN)."""


@dataclass(frozen=True)
class ClientConfig:
    job: int
    rank: int
    ps: tuple[str, int]
    bind: str = "127.0.0.1"
    rx_port: int = proto.WORKER_RX_PORT  # 0: any free shim port (several workers on one address)
    tx_port: int = proto.WORKER_TX_PORT
    mode: str = "ps"
    loss_bound: float = 0.0  # fraction of each pushed tensor the PS may zero-fill (unprotected chunks only)
    protect_fraction: float = 0.25  # largest-gradient chunks of each tensor that are protected
    deadline: float = 0.02  # receiver: s after a pull's last chunk before zero-fill (pulls are lossless anyway)
    connect_timeout: float = 60.0  # s to keep knocking while the PS starts
    timeout: float = 60.0  # s for one transfer / one pull
    sender: SenderConfig = field(default_factory=SenderConfig)
    # Rigid compression of every push (hosts/training/compress.py): sent protected, retransmitted until complete.
    compression: Compression = NONE
    # PS mode with a loss bound: what the PS zero-filled of a push goes out again, added to the tensor's next
    # push (error feedback). Not in aggregate mode: DDP rebuilds its buckets after the first step, so a bucket
    # index does not name the same elements from one step to the next.
    loss_feedback: bool = True
    # The network-decided withheld share (mlfc.policy.withhold); None: every chunk is sent. Needs loss feedback
    # (what is withheld must come later, not be lost).
    withhold: WithholdPolicy | None = None

    def __post_init__(self) -> None:
        if isinstance(self.loss_bound, bool) or not 0.0 <= self.loss_bound <= 1.0:
            raise ValueError(f"loss_bound={self.loss_bound!r} must be in [0, 1]")
        if self.compression.active and self.loss_bound > 0:
            raise ValueError(
                f"compression {self.compression.spec()} needs loss bound 0 (a lost chunk of a compressed "
                f"push cannot be zero-filled), not {self.loss_bound:g}"
            )
        if self.compression.active and self.mode != "ps":
            raise ValueError("compression is for PS mode pushes, not DDP buckets (aggregate mode)")
        if self.withhold is not None and not self.feeds_back_loss:
            raise ValueError("withhold needs loss feedback: PS mode, a loss bound > 0 and loss_feedback on")

    @property
    def feeds_back_loss(self) -> bool:
        """Lost elements of a push are held for the next one (see ``loss_feedback``)."""
        return self.loss_feedback and self.loss_bound > 0 and self.mode == "ps"


@dataclass
class PushResult:
    bytes: int = 0
    chunks: int = 0
    protected_chunks: int = 0
    retransmits: int = 0
    tolerated_chunks: int = 0  # lost chunks the sender left to the PS's zero-fill (an upper bound on the loss)
    held_elements: int = 0  # gradient elements the PS zero-filled, held back for the next push (loss feedback)
    withheld_chunks: int = 0  # chunks not sent at all (the network-decided share; among the zero-filled ones)
    withheld_bytes: int = 0

    @property
    def sent_bytes(self) -> int:
        """Payload bytes handed to the network (retransmissions aside)."""
        return self.bytes - self.withheld_bytes


class WorkerClient:
    def __init__(self, cfg: ClientConfig, *, push_sock=None) -> None:
        """``push_sock``: a socket-like object for the push flow (e.g. a loss-injecting wrapper in tests)."""
        self.cfg = cfg
        self._push_sock = push_sock
        self.welcome: dict = {}
        self.compressor = Compressor(cfg.compression)
        self.residuals = Residuals()  # loss feedback: per tensor, what the PS zero-filled of the last push
        # this job's congestion estimate (withhold): kept across reconnects, like the residuals
        self.congestion = None if cfg.withhold is None else CongestionEstimate(cfg.withhold)
        self.reconnects = 0
        self._rejoins_seen: set[int] = set()  # REJOIN sessions acted on (its sender retransmits until acked)
        self._open()

    def _open(self, rx_port: int | None = None, tx_port: int | None = None) -> None:
        cfg = self.cfg
        rx_port = cfg.rx_port if rx_port is None else rx_port
        tx_port = cfg.tx_port if tx_port is None else tx_port
        self.rx = Receiver(
            (cfg.bind, rx_port),
            ReceiverConfig(
                deadline=cfg.deadline, jobs=frozenset({cfg.job}), stale_timeout=stale_timeout_for(cfg.sender)
            ),
        )
        try:
            self.tx = Sender(cfg.ps, (cfg.bind, tx_port), cfg.sender, sock=self._push_sock)
        except BaseException:
            self.rx.close()
            raise
        self._cv = threading.Condition()
        self._box: dict[tuple[int, int], DeliveredTensor] = {}
        self._closing = False
        self._error: BaseException | None = None
        self._rejoin: dict | None = None
        self._abort: str | None = None
        self.session = 0
        self._thread = threading.Thread(target=self._dispatch, name=f"mlfc-pull-rx-{cfg.rank}", daemon=True)
        self._thread.start()

    def reconnect(self) -> None:
        """Drop both flows and open them again on the same ports (the PS knows this worker by them): what
        was in flight belongs to the old connection. ``connect`` follows."""
        # the same ports, even if the config said "any" (a given push socket is reused as it is)
        ports = self.rx.address[1], None if self._push_sock is not None else self.tx.local_address[1]
        self.close()
        self.reconnects += 1
        self._open(*ports)

    # -- plumbing ---------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            with self._cv:
                if self._closing:
                    return
            try:
                d = self.rx.recv(timeout=0.2)
            except TimeoutError:
                continue
            except BaseException as exc:
                with self._cv:
                    if not self._closing:
                        self._error = exc
                    self._cv.notify_all()
                return
            with self._cv:
                if d.tensor_id == proto.REJOIN:
                    if d.iteration in self._rejoins_seen:
                        continue
                    try:
                        self._rejoin = {**proto.decode(d.data, "REJOIN"), "session": d.iteration}
                    except proto.ProtocolError:
                        continue
                    self.tx.abort()  # a push to the old PS would wait for the peer timeout
                elif d.tensor_id == proto.PING:  # the receiver acknowledged it: that is the answer
                    continue
                elif d.tensor_id == proto.ABORT:
                    if d.iteration != self.session:  # for an earlier process on this port (a restarted rank)
                        continue
                    try:
                        self._abort = str(proto.decode(d.data, "ABORT").get("error") or "no reason given")
                    except proto.ProtocolError as exc:
                        self._abort = str(exc)
                    self.tx.abort()  # a push would wait for the peer timeout
                else:
                    self._box[(d.iteration, d.tensor_id)] = d
                self._cv.notify_all()

    @property
    def role(self) -> str:
        """What this worker's server is called in messages: "aggregator" (aggregate mode) or "PS"."""
        return proto.role(self.cfg.mode)

    def wait(self, iteration: int, tensor_id: int, timeout: float | None = None) -> DeliveredTensor:
        """The pulled tensor (iteration, tensor id), waiting up to ``timeout`` (default: the config's)."""
        timeout = self.cfg.timeout if timeout is None else timeout
        key = (iteration, tensor_id)
        with self._cv:
            ok = self._cv.wait_for(
                lambda: (
                    key in self._box or self._error is not None or self._rejoin is not None or self._abort is not None
                ),
                timeout,
            )
            if self._abort is not None:
                raise JobAborted(
                    f"job {self.cfg.job} worker {self.cfg.rank}: the {self.role} ended the job: {self._abort}"
                )
            if self._error is not None:
                raise WorkerError(f"pull receiver failed: {self._error}") from self._error
            if key not in self._box and self._rejoin is not None:
                self._rejoins_seen.add(self._rejoin["session"])
                raise PsRestarted(
                    f"job {self.cfg.job} worker {self.cfg.rank}: the PS restarted at iteration "
                    f"{self._rejoin.get('iteration')}"
                )
            if not ok:
                raise WorkerError(
                    f"job {self.cfg.job} worker {self.cfg.rank}: tensor {tensor_id} of iteration "
                    f"{iteration} not received from the {self.role} within {timeout:.0f} s"
                )
            return self._box.pop(key)

    # -- protocol ---------------------------------------------------------------------------------

    def connect(self, numels: Sequence[int], *, welcome_timeout: float | None = None) -> dict:
        """HELLO to the PS (retried while it is not up yet), then wait for its WELCOME (up to
        ``welcome_timeout``; default the longer of the config's timeouts: the PS answers once every
        worker has connected). Returns it."""
        cfg = self.cfg
        host, port = self.rx.address
        hello = {"rank": cfg.rank, "rx": [host, port], "numels": list(numels), "mode": cfg.mode}
        if cfg.compression.active:  # a PS without compression refuses the worker (unknown size of its pushes)
            hello["compression"] = cfg.compression.spec()
        if cfg.feeds_back_loss:  # the PS counts this worker's zero-filled elements as coming later
            hello["loss_feedback"] = True
        hello = proto.encode(hello)
        self.session = proto.new_session()
        with self._cv:
            if self._rejoin is not None:  # this HELLO answers it
                self._rejoins_seen.add(self._rejoin["session"])
                self._rejoin = None
        end = time.monotonic() + cfg.connect_timeout
        while True:
            with self._cv:  # a REJOIN while knocking (it aborts the knock) is answered by the next knock
                if self._rejoin is not None:
                    self._rejoins_seen.add(self._rejoin["session"])
                    self._rejoin = None
            try:
                self.tx.send_tensor(
                    cfg.job,
                    self.session,
                    proto.HELLO,
                    hello,
                    importance=proto.CONTROL_IMPORTANCE,
                    timeout=max(1.0, end - time.monotonic()),
                )
                break
            except TimeoutError:  # the transport's PeerTimeout: nobody answering yet
                if time.monotonic() >= end:
                    raise WorkerError(
                        f"no {self.role} answering at {cfg.ps[0]}:{cfg.ps[1]} within {cfg.connect_timeout:g} s"
                    ) from None
                time.sleep(0.2)
        # The PS answers once every worker has connected: wait as long as we would knock.
        if welcome_timeout is None:
            welcome_timeout = max(cfg.timeout, cfg.connect_timeout)
        try:
            d = self.wait(self.session, proto.WELCOME, timeout=welcome_timeout)
        except JobAborted:
            raise
        except WorkerError as exc:
            if "not received" not in str(exc):
                raise
            raise WorkerError(
                f"job {cfg.job} worker {cfg.rank}: the {self.role} at {cfg.ps[0]}:{cfg.ps[1]} took the HELLO but did "
                f"not admit this worker within {welcome_timeout:g} s (it answers once all its workers have "
                "connected: are the others up, and is its worker count this job's?)"
            ) from None
        self.welcome = proto.decode(d.data, "WELCOME")
        if self.welcome.get("error"):
            raise WorkerError(f"the {self.role} refused worker {cfg.rank}: {self.welcome['error']}")
        if self.welcome.get("mode") != cfg.mode:
            raise WorkerError(f"the {self.role} runs in {self.welcome.get('mode')!r} mode, not {cfg.mode!r}")
        return self.welcome

    def initial_parameters(self) -> np.ndarray:
        """PS mode: every parameter, concatenated (sent right after WELCOME): the parameters of the
        iteration the WELCOME names."""
        return np.frombuffer(self.wait(self.session, proto.INITIAL).data, dtype=np.float32)

    def push_bytes(self, numels: Sequence[int]) -> int:
        """Bytes one iteration's pushes of tensors of ``numels`` elements take on the wire (compressed or not)."""
        return sum(self.cfg.compression.payload_bytes(n) for n in numels)

    def start_iteration(self, expected_bytes: int) -> None:
        self.tx.start_iteration(expected_bytes)

    def push(
        self,
        iteration: int,
        tensor_id: int,
        grad: np.ndarray,
        *,
        layer_index: int,
        num_layers: int,
        result: PushResult | None = None,
    ) -> PushResult:
        """Push one float32 gradient tensor; blocks until the PS has it (or accepted it within the loss bound)."""
        cfg = self.cfg
        with self._cv:
            if self._rejoin is not None:
                self._rejoins_seen.add(self._rejoin["session"])
                raise PsRestarted(f"job {cfg.job} worker {cfg.rank}: the PS restarted; not pushing to it")
        buf = np.ascontiguousarray(grad, dtype=np.float32).reshape(-1)
        chunk = self.tx.config.chunk_size
        if cfg.compression.active:
            payload: bytes | np.ndarray = self.compressor.encode(tensor_id, buf)
            classes: bytes | int = IMPORTANCE_PROTECTED
            protected = -(-len(payload) // chunk)
        else:
            payload = self.residuals.add(tensor_id, buf) if cfg.feeds_back_loss else buf
            classes = assign_importance(
                payload, chunk, layer_index=layer_index, num_layers=num_layers, protect_fraction=cfg.protect_fraction
            )
            # the transport raises the last chunk to protected (end-of-tensor marker): count it the same way
            protected = sum(c >= IMPORTANCE_PROTECTED for c in classes[:-1]) + 1
        withhold = self._to_withhold(payload, classes, chunk) if isinstance(payload, np.ndarray) else []
        res = self.tx.send_tensor(
            cfg.job, iteration, tensor_id, payload, importance=classes, loss_bound=cfg.loss_bound, timeout=cfg.timeout,
            withhold=withhold,
        )  # fmt: skip
        if self.congestion is not None:
            self.congestion.update(res.congestion(self.congestion.policy))
        out = result if result is not None else PushResult()
        out.withheld_chunks += res.withheld_chunks
        out.withheld_bytes += res.withheld_bytes
        if cfg.feeds_back_loss and isinstance(payload, np.ndarray):
            out.held_elements += self._hold_lost(tensor_id, payload, res.missing_chunks, chunk)
        out.bytes += len(payload) if isinstance(payload, bytes) else payload.nbytes
        out.chunks += res.chunks
        out.protected_chunks += protected
        out.retransmits += res.retransmits
        out.tolerated_chunks += res.tolerated_chunks
        return out

    def _to_withhold(self, payload: np.ndarray, classes: bytes | int, chunk: int) -> list[int]:
        """The chunks of this push the network's congestion says to withhold (none without ``withhold``)."""
        if self.congestion is None or isinstance(classes, int):
            return []
        share = withheld_share(self.cfg.withhold, self.congestion.value, self.cfg.loss_bound)  # type: ignore[arg-type]
        if share <= 0:
            return []
        nbytes = payload.nbytes
        sizes = [chunk] * (len(classes) - 1) + [nbytes - chunk * (len(classes) - 1)]
        return choose_withheld(classes, sizes, share, chunk_magnitudes(payload, chunk).tolist())

    def _hold_lost(self, tensor_id: int, sent: np.ndarray, missing_chunks: Sequence[int], chunk: int) -> int:
        """Keep the elements of ``sent`` in ``missing_chunks`` (by the PS's own element rule) for the next push;
        the rest arrived. Returns how many elements are held."""
        if not missing_chunks:
            self.residuals.clear(tensor_id)
            return 0
        lost = ~received_elements(sent.size, sent.itemsize, chunk, missing_chunks)
        self.residuals.hold(tensor_id, sent, lost)
        return int(np.count_nonzero(lost))

    def stats(self, iteration: int) -> dict:
        """PS mode: the PS's STATS message for ``iteration`` (what it zero-filled of this worker's pushes)."""
        return proto.decode(self.wait(iteration, proto.STATS).data, "STATS")

    def bye(self, error: str | None = None, timeout: float = 10.0) -> None:
        """Aggregate mode: tell the aggregator this worker is done (it ends when every worker has). A PS
        knows its iterations and is gone after the last pull: PS-mode workers do not say BYE. With
        ``error`` the worker gives up: the aggregator ends the job (and tells the other workers)."""
        body = {"rank": self.cfg.rank} if error is None else {"rank": self.cfg.rank, "error": error}
        with contextlib.suppress(Exception):  # best effort: the PS may have finished and gone already
            self.tx.send_tensor(
                self.cfg.job,
                0,
                proto.BYE,
                proto.encode(body),
                importance=proto.CONTROL_IMPORTANCE,
                timeout=timeout,
            )

    def close(self) -> None:
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join(timeout=2)
        self.tx.close()
        self.rx.close()

    def __enter__(self) -> WorkerClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
