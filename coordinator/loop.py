"""The decision thread: runs a decision after every commit (bursts coalesce, decisions at least
``min_gap_s`` apart) and every ``tick_s`` even without reports (silent jobs retire on a tick)."""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable

log = logging.getLogger(__name__)


class DecisionLoop:
    def __init__(self, decide: Callable[[], object], tick_s: float = 1.0, min_gap_s: float = 0.005) -> None:
        self._decide = decide
        self.tick_s, self.min_gap_s = tick_s, min_gap_s
        self._cv = threading.Condition()
        self._dirty = False
        self._stopping = False
        self._thread: threading.Thread | None = None

    def poke(self) -> None:
        """Something was committed: decide again soon."""
        with self._cv:
            self._dirty = True
            self._cv.notify_all()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="maif-decide", daemon=True)
        self._thread.start()
        self.poke()

    def stop(self) -> None:
        with self._cv:
            self._stopping = True
            self._cv.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _run(self) -> None:
        last = -math.inf
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._dirty or self._stopping, self.tick_s)
                if self._stopping:
                    return
                self._dirty = False
            gap = last + self.min_gap_s - time.monotonic()  # pacing is real time, whatever the engine's clock
            if gap > 0:
                time.sleep(gap)
            try:
                self._decide()
            except Exception:  # keep deciding; the next report or tick retries
                log.exception("MAIF decision failed")
            last = time.monotonic()
