"""The parameter server: one process, one push port, several workers.

Workers announce themselves (HELLO: rank, pull address, tensor sizes); once all ``workers`` have, the
PS answers each (WELCOME, and in PS mode the initial parameters) and the job runs:

* **PS mode** (``run``): per iteration, wait for every worker's push of every tensor, aggregate each
  tensor with the bounded-loss rule (``mlfc.policy.aggregation.average_received``), hand the means to
  ``apply`` (the optimizer step, done by the caller: this module needs no torch), then pull: send the
  updated parameters and a STATS message to every worker, in parallel (one thread per worker flow).
* **aggregate mode** (``serve``, for the DDP hook): no model here; as soon as every worker pushed a
  tensor (a DDP bucket) the mean goes back to all of them. Ends when every worker said BYE.

Pulls are lossless (loss bound 0) and protected: replicas must receive identical parameters/means, and a
zero-filled weight would be a corrupted model rather than a noisy update. The exception is opt-in, PS mode
only (``pull_withhold``, issue 25): under congestion a pull leaves out the parameter chunks that changed
least and the worker keeps its previous values there (hosts/training/pull_copies.py).

One file (over 400 lines): both modes share the handshake, the per-worker pull threads and the loss
accounting; splitting them would split the one connection state machine.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from mlfc import contract
from mlfc.hosts.importance import assign_importance
from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training import roster as aggregator_roster
from mlfc.hosts.training.accounting import LossLedger, lost_by_tensor
from mlfc.hosts.training.compress import NONE, Compression, decode, parse
from mlfc.hosts.training.pull_copies import PullCopies
from mlfc.hosts.transport import DeliveredTensor, Receiver, ReceiverConfig, Sender, SenderConfig, TransferAborted
from mlfc.hosts.transport.config import stale_timeout_for
from mlfc.policy.aggregation import average_received, received_elements
from mlfc.policy.withhold import WithholdPolicy

log = logging.getLogger(__name__)


class TrainingError(RuntimeError):
    """The job cannot go on (a worker vanished, a transfer timed out, peers disagree about the model)."""


@dataclass(frozen=True)
class ServerConfig:
    job: int
    workers: int
    bind: str = "127.0.0.1"
    port: int = proto.PS_PORT
    mode: str = "ps"
    tx_port_base: int | None = proto.PS_TX_PORT_BASE  # pull flow to worker r from this + r; None: any port
    deadline: float = 0.02  # receiver: s after a push's last chunk before missing chunks may be zero-filled
    timeout: float = 60.0  # s to wait for workers (HELLO, a push) and for one pulled tensor to be delivered
    sender: SenderConfig = field(default_factory=SenderConfig)
    # Aggregate mode: keep the admitted ranks (their pull addresses) in this file while the job runs, so
    # that a restarted aggregator tells the ranks of the job it lost at once (it cannot resume them).
    roster_file: str | None = None
    # PS mode: approximate pulls (hosts/training/pull_copies.py): None, every pull whole and protected
    pull_withhold: WithholdPolicy | None = None
    pull_loss_bound: float = 0.0  # of each pulled tensor, at most this share left out (with pull_withhold)

    def __post_init__(self) -> None:
        if self.pull_withhold is not None and (self.mode != "ps" or not 0.0 < self.pull_loss_bound <= 1.0):
            raise ValueError(
                f"pull_withhold needs PS mode and a pull loss bound in (0, 1], not {self.mode}, "
                f"{self.pull_loss_bound!r}"
            )
        if self.roster_file is not None and self.mode != "aggregate":
            raise ValueError("roster_file is for aggregate mode: a PS keeps its state in a Checkpoint (loop.py)")
        if self.mode not in proto.MODES:
            raise ValueError(f"mode={self.mode!r}: choose one of {', '.join(proto.MODES)}")
        if self.workers < 1:
            raise ValueError(f"workers={self.workers} must be >= 1")
        if not 1 <= self.job <= contract.MAX_JOB_ID:
            raise ValueError(f"job={self.job} must be in 1..{contract.MAX_JOB_ID}")


@dataclass
class _Worker:
    rank: int
    push_peer: tuple[str, int]
    rx: tuple[str, int]
    numels: list[int]
    compression: Compression = NONE
    loss_feedback: bool = False  # what this PS zero-fills of its pushes comes again later (error feedback)
    sender: Sender | None = None
    pool: ThreadPoolExecutor | None = None
    session: int = 0  # its HELLO's iteration field: WELCOME and INITIAL carry it back
    pulls: PullCopies | None = None  # approximate pulls: what this worker holds (new with each pull flow)


def _emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


class TrainingServer:
    def __init__(
        self,
        cfg: ServerConfig,
        *,
        parameters: Sequence[np.ndarray] | None = None,
        apply: Callable[[int, list[np.ndarray]], None] | None = None,
        emit: Callable[[dict], None] | None = _emit,
        info: dict | None = None,
        on_step: Callable[[int], None] | None = None,
    ) -> None:
        """PS mode needs ``parameters`` (float32 arrays the caller's optimizer updates in place, e.g. views
        of torch parameters) and ``apply(iteration, mean_gradients)``. ``emit`` gets one dict per
        iteration (PS mode) or per aggregated tensor (aggregate mode); None: silent. ``info`` goes to
        every worker in the WELCOME (e.g. the number of iterations and the data seed). ``on_step(next)`` runs
        after each optimizer step, before the pulls (``next`` = the iteration a restart would resume at):
        the place to checkpoint."""
        if cfg.mode == "ps" and (parameters is None or apply is None):
            raise ValueError("PS mode needs parameters and apply")
        self.cfg = cfg
        self.params = [np.ascontiguousarray(p).reshape(-1) for p in parameters] if parameters is not None else None
        if self.params is not None:
            for i, p in enumerate(self.params):
                if p.dtype != np.float32:
                    raise ValueError(f"parameter {i} is {p.dtype}; the PS exchanges float32")
            if len(self.params) > proto.MAX_TENSORS:
                raise ValueError(f"{len(self.params)} tensors; at most {proto.MAX_TENSORS}")
        self.apply = apply
        self.emit = emit
        self.info = dict(info or {})
        self.ledger = LossLedger(cfg.job)
        self.workers: dict[int, _Worker] = {}
        self._by_peer: dict[tuple[str, int], _Worker] = {}
        self._pending: dict[int, dict[int, dict[int, DeliveredTensor]]] = defaultdict(lambda: defaultdict(dict))
        self._done: set[tuple[int, int]] = set()  # aggregate mode: (iteration, tensor) already answered
        self._inflight: list[Future] = []
        self.stray = 0  # deliveries from unknown peers or for finished iterations
        self.compression = NONE  # the workers' push compression (from their HELLOs; all must agree)
        self.iteration = 0  # PS mode: the iteration being served (resume() sets where to start)
        self.rejoins = 0  # workers that connected again while the job ran
        self.pull_failures = 0  # pulls to a worker that failed (it was gone; it re-joins or the job times out)
        self.on_step = on_step
        self._stashed: list[DeliveredTensor] = []
        self._deferred: list[DeliveredTensor] = []
        self._rejoin_roster: dict[int, tuple[str, int]] = {}
        self._warned_unknown = False
        self.rx = Receiver(
            (cfg.bind, cfg.port),
            ReceiverConfig(
                deadline=cfg.deadline, jobs=frozenset({cfg.job}), stale_timeout=stale_timeout_for(cfg.sender)
            ),
        )

    @property
    def address(self) -> tuple[str, int]:
        return self.rx.address

    # -- set-up --------------------------------------------------------------------------------

    def _recv(self, what: str) -> DeliveredTensor:
        if self._deferred:  # read while the pulls ran
            return self._deferred.pop(0)
        try:
            return self.rx.recv(timeout=self.cfg.timeout)
        except TimeoutError:
            have = sorted(self.workers)
            raise TrainingError(
                f"nothing from the workers for {self.cfg.timeout:.0f} s while "
                f"waiting for {what} (workers connected: {have})"
            ) from None

    def accept(self) -> None:
        """Wait for every worker's HELLO, check they agree on the model, answer each. After ``resume``
        the workers the checkpoint names are asked to connect again first (REJOIN)."""
        cfg = self.cfg
        knocks = self._send_rejoins() + self._tell_lost_ranks()
        while len(self.workers) < cfg.workers:
            d = self._recv(f"{cfg.workers - len(self.workers)} more worker(s) to connect")
            if d.tensor_id != proto.HELLO:
                self._stash(d)
                continue
            self._admit(d)
        for th in knocks:
            th.join(timeout=0.1)
        error = self._check_models()
        for w in self.workers.values():
            self._open_pull_flow(w)
        futures = [w.pool.submit(self._send_welcome, w, self._welcome(error)) for w in self.workers.values()]  # type: ignore[union-attr]
        self._wait(futures)
        if error:
            raise TrainingError(error)
        self._claim_stashed()
        self._save_roster()

    def _admit(self, d: DeliveredTensor) -> _Worker | None:
        """A HELLO: the worker it describes (filed under its rank, replacing an earlier connection of that
        rank: a restarted worker), or None when refused or unusable."""
        cfg = self.cfg
        try:
            msg = proto.decode(d.data, "HELLO")
            rank = int(msg["rank"])
            rx_ip, rx_port = msg["rx"]
            numels = [int(n) for n in msg.get("numels", [])]
            compression = parse(msg.get("compression"))
            loss_feedback = msg.get("loss_feedback", False)
            if not isinstance(loss_feedback, bool):
                raise ValueError(f"loss_feedback={loss_feedback!r} is not a boolean")
        except (proto.ProtocolError, KeyError, TypeError, ValueError) as exc:
            log.warning("job %d: unusable HELLO from %s:%d: %s", cfg.job, *d.peer, exc)
            self.stray += 1
            return None
        if msg.get("mode") != cfg.mode:
            self._refuse(d, f"worker {rank} runs in {msg.get('mode')!r} mode, this {self.role} in {cfg.mode!r} mode")
            return None
        if not 0 <= rank < cfg.workers:
            self._refuse(d, f"rank {rank} outside 0..{cfg.workers - 1}: this {self.role} serves {cfg.workers} workers")
            return None
        if compression.active and cfg.mode != "ps":
            self._refuse(d, f"worker {rank} compresses its pushes ({compression.spec()}): PS mode only")
            return None
        others = {w.compression for r, w in self.workers.items() if r != rank}
        if others and compression not in others:
            self._refuse(
                d,
                f"worker {rank} compresses with {compression.spec()}, the others with "
                f"{', '.join(sorted(c.spec() for c in others))}: a job uses one scheme",
            )
            return None
        if rx_ip in ("", "0.0.0.0"):
            rx_ip = d.peer[0]
        old = self.workers.get(rank)
        if old is not None:  # the newest connection of a rank wins: the old process crashed or gave up
            log.warning("job %d: worker %d connected again from %s:%d (was %s:%d)", cfg.job, rank, *d.peer,
                        *old.push_peer)  # fmt: skip
            self._by_peer.pop(old.push_peer, None)
            self._close_worker(old)
            self.rejoins += 1
        w = _Worker(rank, d.peer, (rx_ip, int(rx_port)), numels, compression, loss_feedback, session=d.iteration)
        self.workers[rank] = w
        self.compression = compression
        self._by_peer[d.peer] = w
        log.info("job %d: worker %d connected from %s:%d", cfg.job, rank, *d.peer)
        return w

    @property
    def role(self) -> str:
        return proto.role(self.cfg.mode)

    def _welcome(self, error: str | None = None) -> bytes:
        cfg = self.cfg
        return proto.encode(
            {**self.info, "mode": cfg.mode, "workers": cfg.workers, "tensors": len(self._numels()),
             "iteration": self.iteration, "error": error}
        )  # fmt: skip

    def _open_pull_flow(self, w: _Worker) -> None:
        port = 0 if self.cfg.tx_port_base is None else self.cfg.tx_port_base + w.rank
        w.sender = Sender(w.rx, (self.cfg.bind, port), self.cfg.sender)
        w.pool = ThreadPoolExecutor(1, thread_name_prefix=f"mlfc-pull-{w.rank}")
        if self.cfg.pull_withhold is not None:  # a new flow (a new or re-joined worker): its first pull is whole
            w.pulls = PullCopies(self.cfg.pull_withhold, self.cfg.pull_loss_bound)

    def _close_worker(self, w: _Worker) -> None:
        if w.pool is not None:
            w.pool.shutdown(wait=True, cancel_futures=True)
        if w.sender is not None:
            w.sender.close()

    def _rejoin(self, d: DeliveredTensor) -> None:
        """A HELLO while the job runs (PS mode): a restarted worker, or one that lost the PS for a while.
        It gets the current parameters and starts at the current iteration; what its rank already pushed
        of this iteration stays (the same values: same parameters, same batch)."""
        error = None
        w = self._admit(d)
        if w is None:
            return
        if w.numels != self._numels():
            error = self._check_models()
        self._open_pull_flow(w)
        sending = w.pool.submit(self._send_welcome, w, self._welcome(error))  # type: ignore[union-attr]
        self._watch_pulls({w.rank: sending})  # a new HELLO of this rank aborts the retries to the old process
        try:
            self._wait([sending])
        except TrainingError as exc:  # gone again before it got the parameters: it will knock again
            log.warning("job %d: worker %d re-joined but did not take the parameters: %s", self.cfg.job, w.rank, exc)
            return
        if error is None:
            log.warning("job %d: worker %d re-joined at iteration %d", self.cfg.job, w.rank, self.iteration)
            self._claim_stashed()

    def _stash(self, d: DeliveredTensor) -> None:
        """A push from a peer that has not said HELLO (yet): a worker that was pushing when this PS
        restarted. Its transport finished the tensor here, so its re-push after the HELLO would be taken
        as a duplicate: keep it for when the peer's HELLO names its rank."""
        ps_push = self.cfg.mode == "ps" and d.tensor_id < proto.MAX_TENSORS
        if ps_push and d.iteration >= self.iteration and len(self._stashed) < 4096:
            self._stashed.append(d)
            return
        self.stray += 1
        if self.cfg.mode == "aggregate" and d.tensor_id < proto.MAX_TENSORS and not self._warned_unknown:
            self._warned_unknown = True
            log.warning(
                "job %d: bucket pushes from %s:%d, which did not say HELLO to this aggregator: a rank of a job "
                "this aggregator does not know (it restarted?). Aggregate mode cannot resume it: %s",
                self.cfg.job, *d.peer,
                "its ranks were told" if self.cfg.roster_file else "its ranks fail at their bucket timeout "
                "(a roster file, --checkpoint, has them told at once)",
            )  # fmt: skip

    # -- aggregate mode: the roster a restarted aggregator reads ----------------------------------------

    def _tell_lost_ranks(self) -> list[threading.Thread]:
        """A roster file left by an aggregator that did not end (killed): ABORT, in the background, to each
        rank it names, with that rank's session (a new process on the same port is not hit). Aggregate mode
        keeps no gradients and the ranks may be in different buckets of a step: resuming them is not safe."""
        if self.cfg.roster_file is None:
            return []
        path, job = Path(self.cfg.roster_file), self.cfg.job
        try:
            ranks = aggregator_roster.load(path, job)
        except ValueError as exc:
            raise TrainingError(str(exc)) from None
        if ranks is None:
            return []
        reason = (
            f"the aggregator of job {job} was restarted (its previous process ended mid-job, e.g. killed) and "
            "cannot resume a DDP step in flight: start the DDP ranks again (torchrun --max-restarts does); "
            "the restarted aggregator admits them as a new run"
        )
        log.warning("job %d: telling the %d rank(s) of the previous aggregator: %s", job, len(ranks), reason)
        body = proto.encode({"error": reason})

        def tell(rank: int, rx: tuple[str, int], session: int) -> None:
            try:
                with Sender(rx, (self.cfg.bind, 0), self.cfg.sender) as tx:
                    tx.send_tensor(job, session, proto.ABORT, body, importance=proto.CONTROL_IMPORTANCE,
                                   timeout=min(5.0, self.cfg.timeout))  # fmt: skip
            except Exception as exc:  # that rank is gone already
                log.info("job %d: ABORT to rank %d of the previous aggregator not delivered: %s", job, rank, exc)

        threads = [threading.Thread(target=tell, args=(r, (ip, port), session), daemon=True, name=f"mlfc-lost-{r}")
                   for r, (ip, port, session) in ranks.items()]  # fmt: skip
        for th in threads:
            th.start()
        path.unlink(missing_ok=True)  # told: a second restart has nobody of that run to tell
        return threads

    def _save_roster(self) -> None:
        if self.cfg.roster_file is None:
            return
        ranks = {r: (w.rx[0], w.rx[1], w.session) for r, w in self.workers.items()}
        aggregator_roster.save(Path(self.cfg.roster_file), self.cfg.job, self.cfg.workers, ranks)

    def _drop_roster(self) -> None:
        """The job ended (every BYE, or the ranks were told why not): a restart has nobody to tell."""
        if self.cfg.roster_file is not None:
            Path(self.cfg.roster_file).unlink(missing_ok=True)

    def _claim_stashed(self) -> None:
        keep = []
        for d in self._stashed:
            if d.peer in self._by_peer:
                if d.iteration < self.iteration or not self._place(d):
                    self.stray += 1
            else:
                keep.append(d)
        self._stashed = keep

    def roster(self) -> dict[int, tuple[str, int]]:
        """Where each worker receives its pulls (what a checkpoint keeps, to call them back after a restart)."""
        return {r: w.rx for r, w in sorted(self.workers.items())}

    def resume(self, iteration: int, roster: dict[int, tuple[str, int]] | None = None) -> None:
        """Continue a job at ``iteration`` (from a checkpoint; the caller restored the parameters and the
        optimizer): ``accept`` sends REJOIN to every worker of ``roster`` and ``run`` starts there."""
        if iteration < 0:
            raise ValueError(f"iteration {iteration} < 0")
        self.iteration = iteration
        self._rejoin_roster = dict(roster or {})

    def _send_rejoins(self) -> list[threading.Thread]:
        """Best effort, in parallel: a worker that is gone too will connect when it is restarted."""
        session = proto.new_session()
        body = proto.encode({"iteration": self.iteration})

        def knock(rank: int, rx: tuple[str, int]) -> None:
            try:
                with Sender(rx, (self.cfg.bind, 0), self.cfg.sender) as tx:
                    tx.send_tensor(self.cfg.job, session, proto.REJOIN, body, importance=proto.CONTROL_IMPORTANCE,
                                   timeout=min(10.0, self.cfg.timeout))  # fmt: skip
            except Exception as exc:
                log.info("job %d: REJOIN to worker %d at %s:%d not delivered: %s", self.cfg.job, rank, *rx, exc)

        threads = [threading.Thread(target=knock, args=(r, tuple(rx)), daemon=True, name=f"mlfc-rejoin-{r}")
                   for r, rx in self._rejoin_roster.items()]  # fmt: skip
        for th in threads:
            th.start()
        return threads

    def _refuse(self, d: DeliveredTensor, reason: str) -> None:
        """Tell a worker it cannot join (the connected ones carry on waiting for the right one)."""
        log.warning("job %d: refused %s:%d: %s", self.cfg.job, *d.peer, reason)
        try:
            msg = proto.decode(d.data, "HELLO")
            rx_ip, rx_port = msg["rx"]
            rx = (d.peer[0] if rx_ip in ("", "0.0.0.0") else rx_ip, int(rx_port))
            with Sender(rx, (self.cfg.bind, 0), self.cfg.sender) as tx:
                tx.send_tensor(
                    self.cfg.job,
                    d.iteration,  # the HELLO's session: what the worker waits for
                    proto.WELCOME,
                    proto.encode({"error": reason}),
                    importance=proto.CONTROL_IMPORTANCE,
                    timeout=5.0,
                )
        except Exception as exc:  # the refused peer may be gone already: the refusal is best effort
            log.warning("job %d: could not tell %s:%d: %s", self.cfg.job, *d.peer, exc)

    def _numels(self) -> list[int]:
        if self.params is not None:
            return [p.size for p in self.params]
        return self.workers[0].numels

    def _check_models(self) -> str | None:
        want = self._numels()
        for w in sorted(self.workers.values(), key=lambda w: w.rank):
            if w.numels != want:
                src = f"the {self.role}'s model" if self.params is not None else "worker 0"
                return (
                    f"worker {w.rank} has {len(w.numels)} tensors of {sum(w.numels)} elements, {src} "
                    f"{len(want)} of {sum(want)}: not the same model"
                )
        return None

    def _send_welcome(self, w: _Worker, welcome: bytes) -> None:
        """WELCOME, then (PS mode) INITIAL. Each is retried while the worker's feedback is silent, up to the
        job's timeout (the worker waits that long for it): under strict priority a low class can be starved
        for longer than the transport's peer timeout, and a worker left without its parameters would wait
        out its whole timeout."""
        self._send_control(w, proto.WELCOME, welcome)
        if self.params is not None and json.loads(welcome).get("error") is None:
            flat = np.concatenate(self.params) if self.params else np.zeros(1, np.float32)
            self._send_control(w, proto.INITIAL, flat)

    def _send_control(self, w: _Worker, tensor_id: int, data: bytes | np.ndarray) -> None:
        tx = w.sender
        assert tx is not None
        end = time.monotonic() + self.cfg.timeout
        while True:
            try:
                tx.send_tensor(
                    self.cfg.job,
                    w.session,
                    tensor_id,
                    data,
                    importance=proto.CONTROL_IMPORTANCE,
                    timeout=max(1.0, end - time.monotonic()),
                )
                return
            except TransferAborted:  # the worker said HELLO again (_watch_pulls): that HELLO is answered instead
                raise
            except TimeoutError as exc:
                if time.monotonic() >= end:
                    raise
                log.warning("job %d: worker %d: %s; sending it again", self.cfg.job, w.rank, exc)

    def _wait(self, futures: Sequence[Future]) -> None:
        for f in futures:
            exc = f.exception()
            if exc is not None:
                raise TrainingError(f"pull failed: {exc}") from exc

    # -- receiving pushes ------------------------------------------------------------------------

    def _place(self, d: DeliveredTensor) -> bool:
        """File a push under its iteration and tensor; False for anything else (control, strays)."""
        w = self._by_peer.get(d.peer)
        if w is None or d.tensor_id >= proto.MAX_TENSORS:
            if w is not None and d.tensor_id == proto.BYE:
                return False
            self.stray += 1
            return False
        numels = self._numels()
        if self.cfg.mode == "ps":
            bad = d.tensor_id >= len(numels) or d.loss.total_bytes != self.compression.payload_bytes(
                numels[d.tensor_id]
            )
        else:  # DDP buckets: sizes are DDP's business; all workers' copies must match (checked when averaged)
            bad = d.loss.total_bytes % 4 != 0
        if bad:
            self.stray += 1
            log.warning(
                "job %d: worker %d sent tensor %d of %d bytes: not in the model",
                self.cfg.job,
                w.rank,
                d.tensor_id,
                d.loss.total_bytes,
            )
            return False
        if (d.iteration, d.tensor_id) in self._done:
            self.stray += 1
            return False
        self._pending[d.iteration][d.tensor_id][w.rank] = d
        return True

    def _aggregate(self, iteration: int, tensor: int, pushes: dict[int, DeliveredTensor]) -> np.ndarray:
        values, masks, delayed = [], [], []
        for rank in sorted(pushes):
            w = self.workers.get(rank)
            delayed.append(w is not None and w.loss_feedback)
            d = pushes[rank]
            rep = d.loss
            if self.compression.active:
                if rep.missing_chunks:  # the workers send compressed pushes with loss bound 0: cannot happen
                    raise TrainingError(f"iteration {iteration} tensor {tensor}: a compressed push arrived incomplete")
                try:
                    v = decode(self.compression, d.data, self._numels()[tensor])
                except ValueError as exc:
                    raise TrainingError(f"iteration {iteration} tensor {tensor} of worker {rank}: {exc}") from None
            else:
                v = np.frombuffer(d.data, dtype=np.float32)
            values.append(v)
            n_chunks = -(-rep.total_bytes // rep.chunk_size)
            self.ledger.record(iteration, rank, tensor, n_chunks, len(rep.missing_chunks))
            masks.append(
                received_elements(v.size, 4, rep.chunk_size, rep.missing_chunks) if rep.missing_chunks else None
            )
        try:
            agg = average_received(values, masks, delayed)
        except ValueError as exc:
            raise TrainingError(f"iteration {iteration} tensor {tensor}: {exc}") from None
        self.ledger.record_elements(iteration, tensor, agg.lost_elements)
        return agg.mean

    # -- PS mode -----------------------------------------------------------------------------------

    def run(self, iterations: int) -> None:
        """Serve ``iterations`` synchronous iterations (after ``accept``)."""
        assert self.params is not None and self.apply is not None
        n_tensors = len(self.params)
        for it in range(self.iteration, iterations):
            self.iteration = it
            t0 = time.time()
            pending = self._pending[it]
            while len(pending) < n_tensors or any(len(r) < self.cfg.workers for r in pending.values()):
                have = sum(len(r) for r in pending.values())
                d = self._recv(f"iteration {it}'s pushes ({have}/{n_tensors * self.cfg.workers} tensors in)")
                if d.tensor_id == proto.HELLO:
                    self._rejoin(d)
                    continue
                if d.iteration < it:
                    self.stray += 1  # a late duplicate of an earlier iteration
                    continue
                if d.peer not in self._by_peer:
                    self._stash(d)
                    continue
                self._place(d)
            t_in = time.time()
            del self._pending[it]
            means = [self._aggregate(it, t, pending[t]) for t in range(n_tensors)]
            t_agg = time.time()
            self.apply(it, means)
            if self.on_step is not None:
                self.on_step(it + 1)
            t_step = time.time()
            loss = self.ledger.of(it)
            pulls = {w.rank: w.pool.submit(self._pull_params, w, it, loss) for w in self.workers.values()}  # type: ignore[union-attr]
            self._watch_pulls(pulls)
            for rank, f in pulls.items():
                exc = f.exception()
                if exc is not None:  # the worker is gone: it gets the parameters when it connects again
                    self.pull_failures += 1
                    log.warning("job %d: pull of iteration %d to worker %d failed (%s); waiting for it to re-join",
                                self.cfg.job, it, rank, exc)  # fmt: skip
            self.iteration = it + 1
            self.ledger.finished(it)
            t_out = time.time()
            if self.emit is not None:
                self.emit(
                    {
                        "ps": True,
                        "job": self.cfg.job,
                        "iteration": it,
                        "start": t0,
                        "pushes_in": t_in,
                        "wait_s": round(t_in - t0, 5),
                        "aggregate_s": round(t_agg - t_in, 5),
                        "step_s": round(t_step - t_agg, 5),
                        "pull_s": round(t_out - t_step, 5),
                        "end": t_out,
                        "lost_chunks": loss.total(),
                        "chunks": sum(loss.chunks.values()),
                        "lost_by_worker": {str(r): loss.total(r) for r in sorted(self.workers)},
                        "lost_elements": sum(loss.lost_elements.values()),
                    }
                )

    def _watch_pulls(self, pulls: dict[int, Future]) -> None:
        """Wait for the pulls (or a re-joined worker's parameters), reading what arrives meanwhile (kept for
        the next iteration): a HELLO from a rank whose pull is still running means that worker restarted, and
        the pull to its old process would only end at the peer timeout: abort it (the new process gets the
        parameters on re-joining)."""
        while not all(f.done() for f in pulls.values()):
            try:
                d = self.rx.recv(timeout=0.05)
            except TimeoutError:
                continue
            self._deferred.append(d)
            if d.tensor_id != proto.HELLO:
                continue
            try:
                rank = int(proto.decode(d.data, "HELLO")["rank"])
            except (proto.ProtocolError, KeyError, TypeError, ValueError):
                continue
            f, w = pulls.get(rank), self.workers.get(rank)
            if f is not None and not f.done() and w is not None and w.sender is not None:
                log.warning("job %d: worker %d says HELLO while its pull runs: aborting the pull", self.cfg.job, rank)
                w.sender.abort()

    def _pull_params(self, w: _Worker, it: int, loss) -> None:
        assert self.params is not None and w.sender is not None
        tx, cfg = w.sender, self.cfg
        n = len(self.params)
        chunk = tx.config.chunk_size
        tx.start_iteration(sum(p.nbytes for p in self.params))
        sent = stale = withheld = 0
        for t, p in enumerate(self.params):
            plan = w.pulls.plan(t, p, chunk, t, n) if w.pulls is not None else None
            if plan is None:
                res = tx.send_tensor(cfg.job, it, t, p, importance=_pull_classes(p, chunk, t, n), timeout=cfg.timeout)
            else:
                res = tx.send_tensor(cfg.job, it, t, p, importance=plan.classes, loss_bound=plan.loss_bound,
                                     withhold=plan.withhold, timeout=cfg.timeout)  # fmt: skip
            if w.pulls is not None:
                stale += w.pulls.delivered(t, p, res.missing_chunks, chunk, res.congestion(w.pulls.policy))
            sent += p.nbytes - res.withheld_bytes
            withheld += res.withheld_chunks
        stats = {
            "pull_sent_bytes": sent,  # the parameters' bytes this pull handed to the network
            "pull_withheld_chunks": withheld,
            "pull_stale_elements": stale,  # elements the worker now holds from an earlier pull
            "lost_chunks": loss.total(w.rank),
            "job_lost_chunks": loss.total(),
            "lost_by_tensor": lost_by_tensor(loss.by_rank(w.rank)),
            "chunks": loss.chunks[w.rank],
            "lost_elements": sum(loss.lost_elements.values()),
        }
        tx.send_tensor(
            cfg.job, it, proto.STATS, proto.encode(stats), importance=proto.CONTROL_IMPORTANCE, timeout=cfg.timeout
        )

    # -- aggregate mode ------------------------------------------------------------------------------

    def serve(self) -> None:
        """Aggregate pushed tensors (DDP buckets) as they complete until every worker said BYE."""
        try:
            self._serve()
        finally:  # ended with the ranks' BYEs or telling them why (a killed process keeps the roster)
            self._drop_roster()

    def _serve(self) -> None:
        active = set(self.workers)
        while active:
            finished = [f for f in self._inflight if f.done()]
            self._wait(finished)  # a failed pull ends the job here, not at the end
            self._inflight = [f for f in self._inflight if not f.done()]
            d = self._next_in_serve(active)
            w = self._by_peer.get(d.peer)
            if d.tensor_id == proto.HELLO:
                self._late_hello(d, active)
                continue
            if w is not None and d.tensor_id == proto.BYE:
                active.discard(w.rank)
                error = self._bye_error(d)
                if error is not None:
                    reason = f"worker {w.rank} gave up: {error}"
                    self._abort(active, reason)
                    self._linger(reason)
                    raise TrainingError(reason)
                continue
            if not self._place(d):
                continue
            pushes = self._pending[d.iteration][d.tensor_id]
            if len(pushes) < self.cfg.workers:
                continue
            del self._pending[d.iteration][d.tensor_id]
            if not self._pending[d.iteration]:
                del self._pending[d.iteration]
            t0 = time.time()
            mean = self._aggregate(d.iteration, d.tensor_id, pushes)
            self._done.add((d.iteration, d.tensor_id))
            if len(self._done) > 8192:  # remember recent buckets only: duplicates come from the last steps
                newest = max(it for it, _ in self._done)
                self._done = {k for k in self._done if k[0] >= newest - 16}
            for peer in self.workers.values():
                self._inflight.append(peer.pool.submit(self._pull_mean, peer, d.iteration, d.tensor_id, mean))  # type: ignore[union-attr]
            if self.emit is not None:
                loss = self.ledger.of(d.iteration)
                self.emit(
                    {
                        "ps": True,
                        "job": self.cfg.job,
                        "iteration": d.iteration,
                        "tensor": d.tensor_id,
                        "aggregate_s": round(time.time() - t0, 5),
                        "lost_chunks": sum(n for (_, t), n in loss.lost_chunks.items() if t == d.tensor_id),
                    }
                )
        self._wait(self._inflight)
        self._inflight.clear()

    PROBE_AFTER = 2.0  # s without anything from the workers before the aggregator checks they are alive

    def _next_in_serve(self, active: set[int]) -> DeliveredTensor:
        """The next delivery; while none comes, every PROBE_AFTER s a PING to each active worker: a rank
        that is gone (killed, no BYE) ends the job then, not at the timeout."""
        waited = 0.0
        while True:
            step = min(self.PROBE_AFTER, self.cfg.timeout - waited)
            try:
                return self.rx.recv(timeout=step)
            except TimeoutError:
                waited += step
            if waited >= self.cfg.timeout:
                raise TrainingError(
                    f"nothing from the workers for {self.cfg.timeout:.0f} s while waiting for buckets or BYE "
                    f"from workers {sorted(active)}"
                )
            gone = self._probe(active)
            if gone:
                reason = f"worker(s) {gone} gone: no answer to the aggregator's probe (killed without a BYE?)"
                self._abort(active - set(gone), reason)
                raise TrainingError(reason)

    def _probe(self, active: set[int]) -> list[int]:
        self._pings = getattr(self, "_pings", 0) + 1
        n = self._pings

        def ping(w: _Worker) -> None:
            assert w.sender is not None
            w.sender.send_tensor(self.cfg.job, n, proto.PING, b"\0", importance=proto.CONTROL_IMPORTANCE,
                                 timeout=min(5.0, self.cfg.timeout))  # fmt: skip

        futures = {r: w.pool.submit(ping, w) for r, w in self.workers.items() if r in active}  # type: ignore[union-attr]
        return sorted(r for r, f in futures.items() if f.exception() is not None)

    @staticmethod
    def _bye_error(d: DeliveredTensor) -> str | None:
        try:
            error = proto.decode(d.data, "BYE").get("error")
        except proto.ProtocolError:
            return None
        return None if error is None else str(error)

    def _late_hello(self, d: DeliveredTensor, active: set[int]) -> None:
        """A HELLO while the buckets flow (aggregate mode has no re-join): a rank beyond ``workers`` (the DDP
        group is larger than this aggregator was told) or a second process of an admitted rank. Either way
        the means so far are of the wrong group: refuse it, tell the admitted workers, end the job."""
        cfg = self.cfg
        try:
            rank: int | str = int(proto.decode(d.data, "HELLO")["rank"])
        except (proto.ProtocolError, KeyError, TypeError, ValueError):
            self.stray += 1
            return
        if not 0 <= rank < cfg.workers:
            reason = (
                f"rank {rank} connected after the {cfg.workers} workers this aggregator serves (ranks "
                f"0..{cfg.workers - 1}) were admitted: the DDP group has more ranks than --workers {cfg.workers}"
            )
        else:
            reason = f"a second process of rank {rank} connected while the job ran: aggregate mode has no re-join"
        self._refuse(d, reason)
        self._abort(active, reason)
        self._linger(reason)
        raise TrainingError(reason)

    def _linger(self, reason: str, seconds: float = 3.0) -> None:
        """After ending the job, answer HELLOs of late ranks for a few seconds (a refusal with the reason)
        rather than leave them knocking at a closed port."""
        end = time.monotonic() + min(seconds, self.cfg.timeout)
        while (left := end - time.monotonic()) > 0:
            try:
                d = self.rx.recv(timeout=left)
            except TimeoutError:
                return
            if d.tensor_id != proto.HELLO or d.peer in self._by_peer:
                continue
            try:
                rank = int(proto.decode(d.data, "HELLO")["rank"])
            except (proto.ProtocolError, KeyError, TypeError, ValueError):
                continue
            n = self.cfg.workers
            why = f"rank {rank} outside 0..{n - 1}: this aggregator serves {n} workers" if not 0 <= rank < n else ""
            self._refuse(d, f"{why}; the job has ended: {reason}" if why else f"the job has ended: {reason}")

    def _abort(self, ranks: set[int], reason: str) -> None:
        """Best effort, in parallel: ABORT to each worker of ``ranks`` so its waits end with ``reason``."""

        def tell(w: _Worker) -> None:
            try:
                with Sender(w.rx, (self.cfg.bind, 0), self.cfg.sender) as tx:
                    tx.send_tensor(self.cfg.job, w.session, proto.ABORT, proto.encode({"error": reason}),
                                   importance=proto.CONTROL_IMPORTANCE, timeout=min(5.0, self.cfg.timeout))  # fmt: skip
            except Exception as exc:
                log.info("job %d: ABORT to worker %d not delivered: %s", self.cfg.job, w.rank, exc)

        threads = [threading.Thread(target=tell, args=(w,), daemon=True, name=f"mlfc-abort-{w.rank}")
                   for r, w in self.workers.items() if r in ranks]  # fmt: skip
        for th in threads:
            th.start()
        for th in threads:
            th.join(timeout=10)

    def _pull_mean(self, w: _Worker, it: int, tensor: int, mean: np.ndarray) -> None:
        assert w.sender is not None
        w.sender.send_tensor(
            self.cfg.job, it, tensor, mean, importance=proto.CONTROL_IMPORTANCE, timeout=self.cfg.timeout
        )

    # -- teardown -------------------------------------------------------------------------------------

    def close(self) -> None:
        for w in self.workers.values():
            self._close_worker(w)
        self.rx.close()

    def __enter__(self) -> TrainingServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _pull_classes(p: np.ndarray, chunk: int, index: int, n: int) -> bytes:
    """Parameters are protected (8..15, higher for later layers): the switch never drops them selectively."""
    return assign_importance(p, chunk, layer_index=index, num_layers=n, protect_fraction=1.0, gradients=False)
