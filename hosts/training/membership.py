"""Who belongs to a parameter server's job: the handshake (HELLO, WELCOME and in PS mode INITIAL), the checks
that every worker runs the same model in the same mode with the same compression, refusals, re-joins while
the job runs (PS mode), pushes that came before their sender's HELLO (stashed), late HELLOs that end an
aggregate-mode job, and calling back the workers of a previous run: REJOIN after a PS's restart from a
checkpoint, ABORT to the ranks a killed aggregator's roster file names (roster.py)."""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path

import numpy as np

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training import roster as aggregator_roster
from mlfc.hosts.training.compress import parse
from mlfc.hosts.training.peers import Peers, TrainingError, Worker, wait_all
from mlfc.hosts.training.pushes import Pushes
from mlfc.hosts.transport import DeliveredTensor, Sender, TransferAborted

log = logging.getLogger(__name__)


class Membership:
    def __init__(self, peers: Peers, pushes: Pushes, info: dict) -> None:
        self.peers = peers
        self.pushes = pushes
        self.info = info  # goes to every worker in the WELCOME
        self.rejoins = 0  # workers that connected again while the job ran
        self._stashed: list[DeliveredTensor] = []
        self._rejoin_roster: dict[int, tuple[str, int]] = {}
        self._warned_unknown = False

    def accept(self) -> None:
        """Wait for every worker's HELLO, check they agree on the model, answer each. After ``resume``
        the workers the checkpoint names are asked to connect again first (REJOIN)."""
        peers, cfg = self.peers, self.peers.cfg
        knocks = self._send_rejoins() + self._tell_lost_ranks()
        while len(peers.workers) < cfg.workers:
            delivery = peers.recv(f"{cfg.workers - len(peers.workers)} more worker(s) to connect")
            if delivery.tensor_id != proto.HELLO:
                self.stash(delivery)
                continue
            self._admit(delivery)
        for th in knocks:
            th.join(timeout=0.1)
        error = self._check_models()
        for worker in peers.workers.values():
            peers.open_pull_flow(worker)
        futures = [w.pool.submit(self._send_welcome, w, self._welcome(error)) for w in peers.workers.values()]  # type: ignore[union-attr]
        wait_all(futures)
        if error:
            raise TrainingError(error)
        self._claim_stashed()
        self._save_roster()

    def _admit(self, delivery: DeliveredTensor) -> Worker | None:
        """A HELLO: the worker it describes (filed under its rank, replacing an earlier connection of that
        rank: a restarted worker), or None when refused or unusable."""
        peers, cfg = self.peers, self.peers.cfg
        try:
            msg = proto.decode(delivery.data, "HELLO")
            rank = int(msg["rank"])
            rx_ip, rx_port = msg["rx"]
            numels = [int(n) for n in msg.get("numels", [])]
            compression = parse(msg.get("compression"))
            loss_feedback = msg.get("loss_feedback", False)
            if not isinstance(loss_feedback, bool):
                raise ValueError(f"loss_feedback={loss_feedback!r} is not a boolean")
            precision = msg.get("precision", False)  # its pushes' precision varies (mlfc.policy.precision)
            if not isinstance(precision, bool):
                raise ValueError(f"precision={precision!r} is not a boolean")
        except (proto.ProtocolError, KeyError, TypeError, ValueError) as exc:
            log.warning("job %d: unusable HELLO from %s:%d: %s", cfg.job, *delivery.peer, exc)
            peers.stray += 1
            return None
        if msg.get("mode") != cfg.mode:
            self._refuse(
                delivery, f"worker {rank} runs in {msg.get('mode')!r} mode, this {peers.role} in {cfg.mode!r} mode"
            )
            return None
        if not 0 <= rank < cfg.workers:
            self._refuse(
                delivery, f"rank {rank} outside 0..{cfg.workers - 1}: this {peers.role} serves {cfg.workers} workers"
            )
            return None
        if precision and (cfg.mode != "ps" or compression.active):
            self._refuse(delivery, f"worker {rank} varies its pushes' precision: PS mode without compression only")
            return None
        if compression.active and cfg.mode != "ps":
            self._refuse(delivery, f"worker {rank} compresses its pushes ({compression.spec()}): PS mode only")
            return None
        others = {worker.compression for r, worker in peers.workers.items() if r != rank}
        if others and compression not in others:
            self._refuse(
                delivery,
                f"worker {rank} compresses with {compression.spec()}, the others with "
                f"{', '.join(sorted(c.spec() for c in others))}: a job uses one scheme",
            )
            return None
        if rx_ip in ("", "0.0.0.0"):
            rx_ip = delivery.peer[0]
        old = peers.workers.get(rank)
        if old is not None:  # the newest connection of a rank wins: the old process crashed or gave up
            log.warning("job %d: worker %d connected again from %s:%d (was %s:%d)", cfg.job, rank, *delivery.peer,
                        *old.push_peer)  # fmt: skip
            peers.by_peer.pop(old.push_peer, None)
            peers.close_worker(old)
            self.rejoins += 1
        worker = Worker(
            rank,
            delivery.peer,
            (rx_ip, int(rx_port)),
            numels,
            compression,
            loss_feedback,
            session=delivery.iteration,
            precision=precision,
        )
        peers.workers[rank] = worker
        peers.compression = compression
        peers.by_peer[delivery.peer] = worker
        log.info("job %d: worker %d connected from %s:%d", cfg.job, rank, *delivery.peer)
        return worker

    def _welcome(self, error: str | None = None) -> bytes:
        peers, cfg = self.peers, self.peers.cfg
        return proto.encode(
            {**self.info, "mode": cfg.mode, "workers": cfg.workers, "tensors": len(peers.numels()),
             "iteration": peers.iteration, "error": error}
        )  # fmt: skip

    def rejoin(self, delivery: DeliveredTensor) -> None:
        """A HELLO while the job runs (PS mode): a restarted worker, or one that lost the PS for a while.
        It gets the current parameters and starts at the current iteration; what its rank already pushed
        of this iteration stays (the same values: same parameters, same batch)."""
        peers = self.peers
        error = None
        worker = self._admit(delivery)
        if worker is None:
            return
        if worker.numels != peers.numels():
            error = self._check_models()
        peers.open_pull_flow(worker)
        sending = worker.pool.submit(self._send_welcome, worker, self._welcome(error))  # type: ignore[union-attr]
        peers.watch_pulls({worker.rank: sending})  # a new HELLO of this rank aborts the retries to the old process
        try:
            wait_all([sending])
        except TrainingError as exc:  # gone again before it got the parameters: it will knock again
            log.warning(
                "job %d: worker %d re-joined but did not take the parameters: %s", peers.cfg.job, worker.rank, exc
            )
            return
        if error is None:
            log.warning("job %d: worker %d re-joined at iteration %d", peers.cfg.job, worker.rank, peers.iteration)
            self._claim_stashed()

    def stash(self, delivery: DeliveredTensor) -> None:
        """A push from a peer that has not said HELLO (yet): a worker that was pushing when this PS
        restarted. Its transport finished the tensor here, so its re-push after the HELLO would be taken
        as a duplicate: keep it for when the peer's HELLO names its rank."""
        peers, cfg = self.peers, self.peers.cfg
        ps_push = cfg.mode == "ps" and delivery.tensor_id < proto.MAX_TENSORS
        if ps_push and delivery.iteration >= peers.iteration and len(self._stashed) < 4096:
            self._stashed.append(delivery)
            return
        peers.stray += 1
        if cfg.mode == "aggregate" and delivery.tensor_id < proto.MAX_TENSORS and not self._warned_unknown:
            self._warned_unknown = True
            log.warning(
                "job %d: bucket pushes from %s:%d, which did not say HELLO to this aggregator: a rank of a job "
                "this aggregator does not know (it restarted?). Aggregate mode cannot resume it: %s",
                cfg.job, *delivery.peer,
                "its ranks were told" if cfg.roster_file else "its ranks fail at their bucket timeout "
                "(a roster file, --checkpoint, has them told at once)",
            )  # fmt: skip

    # -- aggregate mode: the roster a restarted aggregator reads ----------------------------------------

    def _tell_lost_ranks(self) -> list[threading.Thread]:
        """A roster file left by an aggregator that did not end (killed): ABORT, in the background, to each
        rank it names, with that rank's session (a new process on the same port is not hit). Aggregate mode
        keeps no gradients and the ranks may be in different buckets of a step: resuming them is not safe."""
        cfg = self.peers.cfg
        if cfg.roster_file is None:
            return []
        path, job = Path(cfg.roster_file), cfg.job
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
                with Sender(rx, (cfg.bind, 0), cfg.sender) as tx:
                    tx.send_tensor(job, session, proto.ABORT, body, importance=proto.CONTROL_IMPORTANCE,
                                   timeout=min(5.0, cfg.timeout))  # fmt: skip
            except Exception as exc:  # that rank is gone already
                log.info("job %d: ABORT to rank %d of the previous aggregator not delivered: %s", job, rank, exc)

        threads = [threading.Thread(target=tell, args=(r, (ip, port), session), daemon=True, name=f"mlfc-lost-{r}")
                   for r, (ip, port, session) in ranks.items()]  # fmt: skip
        for th in threads:
            th.start()
        path.unlink(missing_ok=True)  # told: a second restart has nobody of that run to tell
        return threads

    def _save_roster(self) -> None:
        cfg = self.peers.cfg
        if cfg.roster_file is None:
            return
        ranks = {r: (worker.rx[0], worker.rx[1], worker.session) for r, worker in self.peers.workers.items()}
        aggregator_roster.save(Path(cfg.roster_file), cfg.job, cfg.workers, ranks)

    def drop_roster(self) -> None:
        """The job ended (every BYE, or the ranks were told why not): a restart has nobody to tell."""
        if self.peers.cfg.roster_file is not None:
            Path(self.peers.cfg.roster_file).unlink(missing_ok=True)

    def _claim_stashed(self) -> None:
        keep = []
        for delivery in self._stashed:
            if delivery.peer in self.peers.by_peer:
                if delivery.iteration < self.peers.iteration or not self.pushes.place(delivery):
                    self.peers.stray += 1
            else:
                keep.append(delivery)
        self._stashed = keep

    def roster(self) -> dict[int, tuple[str, int]]:
        """Where each worker receives its pulls (what a checkpoint keeps, to call them back after a restart)."""
        return {r: worker.rx for r, worker in sorted(self.peers.workers.items())}

    def resume(self, iteration: int, roster: dict[int, tuple[str, int]] | None = None) -> None:
        """Continue a job at ``iteration`` (from a checkpoint; the caller restored the parameters and the
        optimizer): ``accept`` sends REJOIN to every worker of ``roster`` and ``run`` starts there."""
        if iteration < 0:
            raise ValueError(f"iteration {iteration} < 0")
        self.peers.iteration = iteration
        self._rejoin_roster = dict(roster or {})

    def _send_rejoins(self) -> list[threading.Thread]:
        """Best effort, in parallel: a worker that is gone too will connect when it is restarted."""
        cfg = self.peers.cfg
        session = proto.new_session()
        body = proto.encode({"iteration": self.peers.iteration})

        def knock(rank: int, rx: tuple[str, int]) -> None:
            try:
                with Sender(rx, (cfg.bind, 0), cfg.sender) as tx:
                    tx.send_tensor(cfg.job, session, proto.REJOIN, body, importance=proto.CONTROL_IMPORTANCE,
                                   timeout=min(10.0, cfg.timeout))  # fmt: skip
            except Exception as exc:
                log.info("job %d: REJOIN to worker %d at %s:%d not delivered: %s", cfg.job, rank, *rx, exc)

        threads = [threading.Thread(target=knock, args=(r, tuple(rx)), daemon=True, name=f"mlfc-rejoin-{r}")
                   for r, rx in self._rejoin_roster.items()]  # fmt: skip
        for th in threads:
            th.start()
        return threads

    def _refuse(self, delivery: DeliveredTensor, reason: str) -> None:
        """Tell a worker it cannot join (the connected ones carry on waiting for the right one)."""
        cfg = self.peers.cfg
        log.warning("job %d: refused %s:%d: %s", cfg.job, *delivery.peer, reason)
        try:
            msg = proto.decode(delivery.data, "HELLO")
            rx_ip, rx_port = msg["rx"]
            rx = (delivery.peer[0] if rx_ip in ("", "0.0.0.0") else rx_ip, int(rx_port))
            with Sender(rx, (cfg.bind, 0), cfg.sender) as tx:
                tx.send_tensor(
                    cfg.job,
                    delivery.iteration,  # the HELLO's session: what the worker waits for
                    proto.WELCOME,
                    proto.encode({"error": reason}),
                    importance=proto.CONTROL_IMPORTANCE,
                    timeout=5.0,
                )
        except Exception as exc:  # the refused peer may be gone already: the refusal is best effort
            log.warning("job %d: could not tell %s:%d: %s", cfg.job, *delivery.peer, exc)

    def _check_models(self) -> str | None:
        peers = self.peers
        want = peers.numels()
        for worker in sorted(peers.workers.values(), key=lambda worker: worker.rank):
            if worker.numels != want:
                src = f"the {peers.role}'s model" if peers.params is not None else "worker 0"
                return (
                    f"worker {worker.rank} has {len(worker.numels)} tensors of {sum(worker.numels)} elements, {src} "
                    f"{len(want)} of {sum(want)}: not the same model"
                )
        return None

    def _send_welcome(self, worker: Worker, welcome: bytes) -> None:
        """WELCOME, then (PS mode) INITIAL. Each is retried while the worker's feedback is silent, up to the
        job's timeout (the worker waits that long for it): under strict priority a low class can be starved
        for longer than the transport's peer timeout, and a worker left without its parameters would wait
        out its whole timeout."""
        params = self.peers.params
        self._send_control(worker, proto.WELCOME, welcome)
        if params is not None and json.loads(welcome).get("error") is None:
            flat = np.concatenate(params) if params else np.zeros(1, np.float32)
            self._send_control(worker, proto.INITIAL, flat)

    def _send_control(self, worker: Worker, tensor_id: int, data: bytes | np.ndarray) -> None:
        cfg = self.peers.cfg
        tx = worker.sender
        assert tx is not None
        end = time.monotonic() + cfg.timeout
        while True:
            try:
                tx.send_tensor(
                    cfg.job,
                    worker.session,
                    tensor_id,
                    data,
                    importance=proto.CONTROL_IMPORTANCE,
                    timeout=max(1.0, end - time.monotonic()),
                )
                return
            except TransferAborted:  # the worker said HELLO again (watch_pulls): that HELLO is answered instead
                raise
            except TimeoutError as exc:
                if time.monotonic() >= end:
                    raise
                log.warning("job %d: worker %d: %s; sending it again", cfg.job, worker.rank, exc)

    # -- aggregate mode: HELLOs once the buckets flow --------------------------------------------------

    def late_hello(self, delivery: DeliveredTensor, active: set[int]) -> None:
        """A HELLO while the buckets flow (aggregate mode has no re-join): a rank beyond ``workers`` (the DDP
        group is larger than this aggregator was told) or a second process of an admitted rank. Either way
        the means so far are of the wrong group: refuse it, tell the admitted workers, end the job."""
        peers, cfg = self.peers, self.peers.cfg
        try:
            rank: int | str = int(proto.decode(delivery.data, "HELLO")["rank"])
        except (proto.ProtocolError, KeyError, TypeError, ValueError):
            peers.stray += 1
            return
        if not 0 <= rank < cfg.workers:
            reason = (
                f"rank {rank} connected after the {cfg.workers} workers this aggregator serves (ranks "
                f"0..{cfg.workers - 1}) were admitted: the DDP group has more ranks than --workers {cfg.workers}"
            )
        else:
            reason = f"a second process of rank {rank} connected while the job ran: aggregate mode has no re-join"
        self._refuse(delivery, reason)
        peers.abort(active, reason)
        self.linger(reason)
        raise TrainingError(reason)

    def linger(self, reason: str, seconds: float = 3.0) -> None:
        """After ending the job, answer HELLOs of late ranks for a few seconds (a refusal with the reason)
        rather than leave them knocking at a closed port."""
        peers = self.peers
        end = time.monotonic() + min(seconds, peers.cfg.timeout)
        while (left := end - time.monotonic()) > 0:
            try:
                delivery = peers.rx.recv(timeout=left)
            except TimeoutError:
                return
            if delivery.tensor_id != proto.HELLO or delivery.peer in peers.by_peer:
                continue
            try:
                rank = int(proto.decode(delivery.data, "HELLO")["rank"])
            except (proto.ProtocolError, KeyError, TypeError, ValueError):
                continue
            n = peers.cfg.workers
            why = f"rank {rank} outside 0..{n - 1}: this aggregator serves {n} workers" if not 0 <= rank < n else ""
            self._refuse(delivery, f"{why}; the job has ended: {reason}" if why else f"the job has ended: {reason}")
