"""A blocking facade over ``SwitchClient`` for code that is not asyncio (PTF tests, scripts).

It runs ``SwitchClient`` on a private event loop in a background thread, so there is one P4Runtime
client code path in mlfc:

    with SwitchConnection("127.0.0.1:50051", device_id=1, p4info=..., device_config=...) as sw:
        sw.load_pipeline()
        sw.write_entries([entry(...), ...])
        packets, nbytes = sw.read_counter("MlfcIngress.stats.job_packets", 7)
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

from mlfc.controller.entries import TableEntry
from mlfc.controller.pipeline import Pipeline
from mlfc.controller.reconcile import Diff
from mlfc.controller.switch import DEFAULT_ELECTION_ID, CounterValue, SwitchClient
from mlfc.tls import TlsConfig

_T = TypeVar("_T")


async def _cancel_leftover_tasks() -> None:
    """Cancel what finsy/gRPC left running on the loop, and wait for it, so no pending task is
    garbage-collected later ("Task was destroyed but it is pending")."""
    tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


class SwitchConnection:
    def __init__(
        self,
        grpc_addr: str,
        device_id: int = 1,
        p4info: Path | str | None = None,
        device_config: Path | str | None = None,
        *,
        pipeline: Pipeline | None = None,
        election_id: int = DEFAULT_ELECTION_ID,
        name: str | None = None,
        timeout_s: float = 30.0,
        tls: TlsConfig | None = None,
    ) -> None:
        """``p4info``/``device_config`` default to p4src/build/mlfc.*; pass ``pipeline`` to share one.
        ``tls``: the switch serves P4Runtime over TLS."""
        self.tls = tls
        self.pipeline = pipeline or Pipeline.load(p4info, device_config)
        self.timeout_s = timeout_s
        self._closed = False
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name=f"p4rt-{grpc_addr}", daemon=True)
        self._thread.start()
        self.client: SwitchClient = self._call(self._make_client(name or grpc_addr, grpc_addr, device_id, election_id))

    async def _make_client(self, name: str, grpc_addr: str, device_id: int, election_id: int) -> SwitchClient:
        # Built on the loop thread so finsy's asyncio objects belong to that loop.
        return SwitchClient(name, grpc_addr, self.pipeline, device_id, election_id, tls=self.tls)

    def _call(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(self.timeout_s)

    # ---- lifecycle ------------------------------------------------------------------------------

    def connect(self) -> SwitchConnection:
        self._call(self.client.connect(self.timeout_s))
        return self

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._call(self.client.close())
        finally:
            with contextlib.suppress(Exception):
                self._call(_cancel_leftover_tasks())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
            # The loop is stopped but deliberately not closed: gRPC's completion-queue poller may
            # still hand it a callback after the channel closed, and a closed loop answers that
            # with an "Event loop is closed" traceback on stderr.

    def __enter__(self) -> SwitchConnection:
        try:
            return self.connect()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def primary(self) -> bool:
        return self.client.primary

    # ---- operations -----------------------------------------------------------------------------

    def load_pipeline(self, force: bool = False) -> bool:
        """Load p4info + device config unless the switch runs the same cookie (``force``: always)."""
        return self._call(self.client.load_pipeline(force))

    def pipeline_cookie(self) -> int | None:
        return self._call(self.client.pipeline_cookie())

    def write_entries(self, entries: Iterable[TableEntry], batch_size: int = 5000) -> None:
        """INSERT ``entries`` (fails if one exists already; use ``reconcile`` to converge instead)."""
        self._call(self.client.insert(list(entries), batch_size))

    def modify_entries(self, entries: Iterable[TableEntry], batch_size: int = 5000) -> None:
        self._call(self.client.modify(list(entries), batch_size))

    def delete_entries(self, entries: Iterable[TableEntry], batch_size: int = 5000) -> None:
        self._call(self.client.delete(list(entries), batch_size))

    def reconcile(self, desired: Iterable[TableEntry], batch_size: int = 5000) -> Diff:
        """Make the switch hold exactly ``desired``: read back, then write only the difference."""
        return self._call(self.client.reconcile(list(desired), batch_size))

    def clear_entries(self) -> int:
        return self._call(self.client.clear_entries())

    def read_entries(self, tables: Iterable[str] | None = None) -> list[TableEntry]:
        return self._call(self.client.read_entries(tables))

    def read_counter(self, counter: str, index: int) -> tuple[int, int]:
        """(packets, bytes) of one counter cell."""
        v = self._call(self.client.read_counter(counter, index))
        return (v.packets, v.bytes)

    def read_counters(self, counter: str, indices: Iterable[int] | None = None) -> dict[int, CounterValue]:
        return self._call(self.client.read_counters(counter, indices))
