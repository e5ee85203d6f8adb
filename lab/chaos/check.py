"""Do the switches hold exactly the entries of the coordinator's decisions? Read as a backup P4Runtime client
(election id 1) and compared with the controller's own compiler's output; per decision, the first time every
switch held its entries (the ledger's sightings)."""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

from mlfc import contract
from mlfc.controller.compile import compile_intent, compile_policy
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.reconcile import diff
from mlfc.controller.sync import SwitchConnection
from mlfc.controller.validate import default_policy
from mlfc.coordinator.client import CoordinatorClient
from mlfc.lab.stack import Control
from mlfc.proto import intent_pb2 as ipb


class DecisionCheck:
    def __init__(self, ctl: Control, coord_addr: str, token: Path) -> None:
        self.ctl = ctl
        self.config = ctl.controller.config
        self.pipeline = Pipeline.load(contract.P4INFO, contract.BMV2_JSON)
        self.coord_addr, self.token = coord_addr, token
        self.latest: ipb.Intent | None = None
        self.latest_seq = 0
        self.seen: dict[int, float] = {}  # decision seq -> first time every switch held exactly its entries
        self.observed_until = 0.0  # the last complete reading of every switch
        self._pending: dict[int, dict[str, tuple]] = {}  # decisions not seen yet -> their entries per switch
        self._io = threading.Lock()  # one backup client at a time (the watcher and a fault's converge)

    def _refresh(self) -> None:
        with contextlib.suppress(Exception), CoordinatorClient(self.coord_addr, token_file=self.token) as c:
            while page := c.decisions(after=self.latest_seq, limit=1000):
                for d in page:
                    self._pending[d.seq] = dict(compile_intent(d.intent, self.config).entries)
                self.latest_seq, self.latest = page[-1].seq, page[-1].intent

    def expected(self) -> dict[str, tuple]:
        if self.latest is None:
            return dict(compile_policy(default_policy(self.config), self.config).entries)
        return dict(compile_intent(self.latest, self.config).entries)

    def mismatch(self) -> str | None:
        """Read every switch once, note the decisions they hold; None when they hold exactly the latest's."""
        with self._io:
            self._refresh()
            held = {}
            stamp = time.time()
            for sw in self.config.switches:
                stamp = time.time()  # the last switch's reading: the earlier ones held it by then too
                try:
                    with SwitchConnection(
                        sw.grpc_addr, sw.device_id, pipeline=self.pipeline, election_id=1, timeout_s=2.0
                    ).connect() as conn:
                        held[sw.name] = conn.read_entries()
                except Exception as exc:  # down or not serving yet
                    return f"{sw.name}: {type(exc).__name__}"
            self.observed_until = time.time()
            self._note(held, stamp)
            want = self.expected()
            for name, entries in held.items():
                d = diff(want[name], entries)
                if not d.empty:
                    return f"{name}: {d.summary()}"
            return None

    def _note(self, held: dict[str, list], stamp: float) -> None:
        for seq, want in list(self._pending.items()):
            if all(diff(want[name], entries).empty for name, entries in held.items()):
                self.seen[seq] = stamp
                del self._pending[seq]
        # older decisions than one the switches were seen holding are gone for good: stop comparing them
        top = max(self.seen, default=0)
        for seq in [s for s in self._pending if s < top]:
            del self._pending[seq]

    def converge(self, timeout: float = 15.0) -> tuple[float, str | None]:
        """Seconds until the switches matched (from now), and the last mismatch if they never did."""
        t0 = time.monotonic()
        last = None
        while time.monotonic() - t0 < timeout:
            last = self.mismatch()
            if last is None:
                return time.monotonic() - t0, None
            time.sleep(0.05)
        return float("nan"), last

    def watch(self, stop: threading.Event, interval: float = 0.25) -> None:
        """Read the switches every ``interval`` s until ``stop``: the sightings between faults."""
        while not stop.wait(interval):
            with contextlib.suppress(Exception):
                self.mismatch()
