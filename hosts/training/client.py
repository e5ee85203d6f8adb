"""A worker's end of the PS path: push tagged gradient tensors, receive pulled tensors.

One ``Sender`` (the push flow) and one ``Receiver`` (pulls), plus a dispatcher thread that files each
delivered tensor under (iteration, tensor id) so callers can wait for the ones they need in any order.
No torch here: tensors are float32 numpy arrays (torch's ``.numpy()`` views work as they are).

What a push sends (importance classes, compression, loss feedback, the withheld share) is
hosts/training/push_shaping.py; what a worker is told, hosts/training/client_config.py.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence

import numpy as np

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.client_config import ClientConfig
from mlfc.hosts.training.compress import Compressor
from mlfc.hosts.training.push_shaping import PushResult, PushShaper
from mlfc.hosts.training.residual import Residuals
from mlfc.hosts.transport import DeliveredTensor, Receiver, ReceiverConfig, Sender
from mlfc.hosts.transport.config import stale_timeout_for
from mlfc.policy.withhold import CongestionEstimate, repair_bound

# ClientConfig and PushResult are part of this module's interface (the loop, DDP and the tests import them here)
__all__ = ["ClientConfig", "JobAborted", "PsRestarted", "PushResult", "WorkerClient", "WorkerError"]


class WorkerError(RuntimeError):
    """The PS refused this worker, or stopped answering."""


class JobAborted(WorkerError):
    """The aggregator ended the job (ABORT): e.g. a rank beyond its ``workers`` knocked, or another rank gave up."""


class PsRestarted(WorkerError):
    """The PS restarted (from its checkpoint) and asks this worker to connect again (REJOIN)."""


class WorkerClient:
    def __init__(self, cfg: ClientConfig, *, push_sock=None) -> None:
        """``push_sock``: a socket-like object for the push flow (e.g. a loss-injecting wrapper in tests)."""
        self.cfg = cfg
        self._push_sock = push_sock
        self.welcome: dict = {}
        self.shaper = PushShaper(cfg)  # kept across reconnects: its state is about earlier pushes
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

    # what earlier pushes left to later ones (the shaper's, named here as before the split)
    @property
    def compressor(self) -> Compressor:
        return self.shaper.compressor

    @property
    def residuals(self) -> Residuals:
        return self.shaper.residuals

    @property
    def congestion(self) -> CongestionEstimate | None:
        return self.shaper.congestion

    # -- plumbing ---------------------------------------------------------------------------------

    def _dispatch(self) -> None:
        while True:
            with self._cv:
                if self._closing:
                    return
            try:
                delivery = self.rx.recv(timeout=0.2)
            except TimeoutError:
                continue
            except BaseException as exc:
                with self._cv:
                    if not self._closing:
                        self._error = exc
                    self._cv.notify_all()
                return
            with self._cv:
                if delivery.tensor_id == proto.REJOIN:
                    if delivery.iteration in self._rejoins_seen:
                        continue
                    try:
                        self._rejoin = {**proto.decode(delivery.data, "REJOIN"), "session": delivery.iteration}
                    except proto.ProtocolError:
                        continue
                    self.tx.abort()  # a push to the old PS would wait for the peer timeout
                elif delivery.tensor_id == proto.PING:  # the receiver acknowledged it: that is the answer
                    continue
                elif delivery.tensor_id == proto.ABORT:
                    if delivery.iteration != self.session:  # for an earlier process on this port (a restarted rank)
                        continue
                    try:
                        self._abort = str(proto.decode(delivery.data, "ABORT").get("error") or "no reason given")
                    except proto.ProtocolError as exc:
                        self._abort = str(exc)
                    self.tx.abort()  # a push would wait for the peer timeout
                else:
                    self._box[(delivery.iteration, delivery.tensor_id)] = delivery
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
        if cfg.precision:  # the PS reads each push's precision from its length
            hello["precision"] = True
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
        chunk = self.tx.config.chunk_size
        shaped = self.shaper.shape(tensor_id, grad, chunk, layer_index=layer_index, num_layers=num_layers)
        bound = cfg.loss_bound
        if cfg.repair_drops:  # only the withheld chunks may be missing (the last chunk is never withheld)
            p = shaped.payload
            bound = repair_bound(len(shaped.withhold) * chunk, len(p) if isinstance(p, bytes) else p.nbytes)
        sent = self.tx.send_tensor(
            cfg.job, iteration, tensor_id, shaped.payload, importance=shaped.classes, loss_bound=bound,
            timeout=cfg.timeout, withhold=shaped.withhold,
        )  # fmt: skip
        return self.shaper.settle(tensor_id, shaped, sent, chunk, result)

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
