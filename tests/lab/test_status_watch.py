"""lab/status_watch.py: one poller (the coordinator's own client) feeds the lab's Status watchers; it keeps
polling through failures and stops cleanly."""

from __future__ import annotations

import time
from pathlib import Path

from mlfc.coordinator.engine import EngineConfig
from mlfc.coordinator.service import Coordinator
from mlfc.lab.fallback_watch import FallbackWatch
from mlfc.lab.status_watch import StatusPoller
from mlfc.proto import coordinator_pb2 as pb


def _wait(cond, timeout: float = 10.0) -> bool:  # type: ignore[no-untyped-def]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_the_poller_hands_every_reply_to_its_callback_and_counts_failures(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("status-watch-token\n")
    coord = Coordinator(str(tmp_path / "c.sqlite"), token="status-watch-token", config=EngineConfig(tick_s=0.05))
    coord.start()
    replies: list[pb.StatusReply] = []
    poller = StatusPoller(coord.address, token, replies.append, interval_s=0.05).start()
    try:
        assert _wait(lambda: len(replies) >= 3)
        assert replies[0].fallback.mode == pb.FALLBACK_OFF  # this coordinator runs without the fallback
        coord.stop()
        assert _wait(lambda: poller.errors >= 2)  # it goes on polling (and failing) until stopped
    finally:
        poller.stop()
    seen = len(replies)
    time.sleep(0.2)
    assert len(replies) == seen  # stopped


def test_the_fallback_watch_sees_nothing_without_a_fallback(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("fw-token\n")
    coord = Coordinator(str(tmp_path / "c.sqlite"), token="fw-token", config=EngineConfig(tick_s=0.05)).start()
    watch = FallbackWatch(interval_s=0.05)
    try:
        watch.hook(coord.address, token)
        time.sleep(0.4)
    finally:
        switches = watch.stop()
        coord.stop()
    assert switches == []
