"""The per-switch agent's lifecycle against an in-memory switch (no P4Runtime): restore, updates,
partial write failures, restarts and a rival primary. The bmv2 tests repeat the real cases."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass

from controller_helpers import make_config, switch_doc

from mlfc.controller import compile as comp
from mlfc.controller.agent import DesiredState, SwitchAgent
from mlfc.controller.config import ControllerSettings
from mlfc.controller.entries import TableEntry
from mlfc.controller.queues import QueueClient
from mlfc.controller.reconcile import Diff, apply_diff
from mlfc.controller.switch import CounterValue, SwitchError
from mlfc.proto import intent_pb2 as pb

CONFIG = make_config(switch_doc("s1", 50051, 1))
SETTINGS = ControllerSettings(reconnect_min_s=0.01, reconnect_max_s=0.05, audit_interval_s=0.2, counter_interval_s=0.05)


@dataclass
class StubPipeline:
    name: str = "mlfc@0x1"
    cookie: int = 1
    p4info_path: None = None
    device_config_path: None = None

    def counter_size(self, _name: str) -> int:
        return 4096


class FakeSwitch:
    """Holds a pipeline cookie and entries; can crash, lose the primary role, reject writes."""

    def __init__(self) -> None:
        self.up = True  # process running
        self.cookie: int | None = None
        self.entries: dict = {}
        self.fail_next_writes = 0  # reject the second half of the next N batches
        self.rival = False  # another controller is primary
        self.pipeline_loads = 0


class FakeClient:
    def __init__(self, switch: FakeSwitch) -> None:
        self.sw = switch
        self.connected = False
        self.election_id = 10
        self.primary_election_id = 10
        self._changed = asyncio.Event()

    @property
    def primary(self) -> bool:
        return self.connected and not self.sw.rival

    def poke(self) -> None:
        self._changed.set()

    async def listening(self) -> bool:
        return self.sw.up

    async def wait_listening(self, interval_s: float) -> None:
        while not self.sw.up:
            await asyncio.sleep(interval_s)

    async def connect(self, timeout_s: float = 0) -> None:
        if not self.sw.up:
            raise SwitchError("s1: connect failed: UNAVAILABLE", "UNAVAILABLE")
        self.connected = True

    async def close(self) -> None:
        self.connected = False

    async def wait_role_change(self) -> None:
        await self._changed.wait()
        self._changed.clear()

    def _check(self) -> None:
        if not (self.connected and self.sw.up):
            self.connected = False
            raise SwitchError("s1: UNAVAILABLE", "UNAVAILABLE")
        if self.sw.rival:
            raise SwitchError("s1: not primary", "PERMISSION_DENIED")

    async def load_pipeline(self, force: bool = False) -> bool:
        self._check()
        if self.sw.cookie == 1 and not force:
            return False
        self.sw.cookie, self.sw.entries = 1, {}
        self.sw.pipeline_loads += 1
        return True

    async def has_our_pipeline(self) -> bool:
        self._check()
        return self.sw.cookie == 1

    async def read_entries(self, tables: Iterable[str] | None = None) -> list[TableEntry]:
        self._check()
        return list(self.sw.entries.values())

    async def apply(self, d: Diff, batch_size: int = 5000) -> int:
        self._check()
        if self.sw.fail_next_writes:
            self.sw.fail_next_writes -= 1
            half = Diff(d.inserts[: len(d.inserts) // 2], d.modifies, d.deletes)
            self.sw.entries = apply_diff(self.sw.entries.values(), half)
            raise SwitchError("s1: Write failed: RESOURCE_EXHAUSTED", "RESOURCE_EXHAUSTED")
        self.sw.entries = apply_diff(self.sw.entries.values(), d)
        return 1

    async def read_many_counters(self, requests: dict) -> dict:
        self._check()
        return {name: {i: CounterValue(i, 10 * i) for i in idx} for name, idx in requests.items()}

    async def read_counters(self, counter: str, indices=None) -> dict:
        self._check()
        return {i: CounterValue(i, 10 * i) for i in (indices if indices is not None else range(8))}


class CountingQueues(QueueClient):
    """Accepts every setting and counts configure calls (one per restore)."""

    def __init__(self) -> None:
        self.calls = 0

    def run(self, commands) -> list[str]:
        return ["OK"] * len(commands)

    def describe(self) -> str:
        return "counting"

    def configure(self, ports) -> int:
        self.calls += 1
        return 0


def desired(generation: int, intent: pb.Intent) -> DesiredState:
    c = comp.compile_intent(intent, CONFIG)
    return DesiredState(generation, c.entries["s1"], tuple(j.job_id for j in c.policy.jobs))


def run_agent(scenario) -> None:
    async def main() -> None:
        sw = FakeSwitch()
        queues = CountingQueues()
        agent = SwitchAgent(CONFIG.switch("s1"), StubPipeline(), SETTINGS, queues, {}, desired(0, pb.Intent()))  # type: ignore[arg-type]
        client = FakeClient(sw)
        agent.client = client  # type: ignore[assignment]
        agent.start()
        try:
            await asyncio.wait_for(scenario(agent, sw, client, queues), 10)
        finally:
            await agent.stop()

    asyncio.run(main())


async def until(cond, timeout_s: float = 5.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.01)


def held(sw: FakeSwitch) -> set:
    return set(sw.entries.values())


A = pb.Intent(jobs=[pb.JobIntent(job_id=i, priority=i % 7) for i in range(1, 30)])
B = pb.Intent(jobs=[pb.JobIntent(job_id=i, priority=(i + 1) % 7) for i in range(10, 40)], interleaving=True)


def test_restore_then_updates() -> None:
    async def scenario(agent, sw, client, queues) -> None:
        assert await agent.wait_applied(0, 5)
        assert sw.pipeline_loads == 1 and queues.calls == 1
        assert held(sw) == set(desired(0, pb.Intent()).entries)
        agent.set_desired(desired(1, A))
        assert await agent.wait_applied(1, 5)
        assert held(sw) == set(desired(1, A).entries)
        agent.set_desired(desired(2, B))
        assert await agent.wait_applied(2, 5)
        assert held(sw) == set(desired(2, B).entries)
        assert agent.stats.writes["modify"] > 0 and agent.stats.writes["delete"] > 0
        await until(
            lambda: agent.stats.counters.get("MlfcIngress.stats.job_packets", {}).get(10) == CounterValue(10, 100)
        )

    run_agent(scenario)


def test_partial_write_failure_is_retried_until_converged() -> None:
    async def scenario(agent, sw, client, queues) -> None:
        assert await agent.wait_applied(0, 5)
        sw.fail_next_writes = 2
        agent.set_desired(desired(1, A))
        await until(lambda: "RESOURCE_EXHAUSTED" in agent.stats.last_error)
        assert await agent.wait_applied(1, 5)
        assert held(sw) == set(desired(1, A).entries)
        assert agent.stats.last_error == ""

    run_agent(scenario)


def test_restarted_switch_is_restored() -> None:
    async def scenario(agent, sw, client, queues) -> None:
        agent.set_desired(desired(1, A))
        assert await agent.wait_applied(1, 5)
        sw.up, sw.cookie, sw.entries = False, None, {}  # crash: state gone
        client.poke()
        await until(lambda: agent.stats.applied_generation == -1)  # the agent noticed: state unknown
        assert not agent.refresh().connected
        await asyncio.sleep(0.1)  # a few failed reconnects
        sw.up = True
        assert await agent.wait_applied(1, 5)
        assert held(sw) == set(desired(1, A).entries)
        assert sw.pipeline_loads == 2 and queues.calls >= 2

    run_agent(scenario)


def test_drift_is_repaired_by_the_audit() -> None:
    async def scenario(agent, sw, client, queues) -> None:
        agent.set_desired(desired(1, A))
        assert await agent.wait_applied(1, 5)
        victim = next(iter(sw.entries))
        del sw.entries[victim]  # someone else deleted an entry
        await until(lambda: victim in sw.entries, timeout_s=2)
        sw.cookie = 7  # someone loaded another pipeline
        await until(lambda: sw.cookie == 1 and held(sw) == set(desired(1, A).entries), timeout_s=2)

    run_agent(scenario)


def test_rival_primary_then_recovery() -> None:
    async def scenario(agent, sw, client, queues) -> None:
        assert await agent.wait_applied(0, 5)
        sw.rival = True
        client.poke()
        await until(lambda: "not primary" in agent.stats.last_error)
        agent.set_desired(desired(1, A))
        await asyncio.sleep(0.1)
        assert held(sw) == set(desired(0, pb.Intent()).entries)  # nothing written while backup
        sw.entries = {}  # the rival wiped the tables
        sw.rival = False
        client.poke()
        assert await agent.wait_applied(1, 5)
        assert held(sw) == set(desired(1, A).entries)

    run_agent(scenario)
