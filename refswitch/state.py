"""The program's stateful objects: indexed counters (same names and indexing as mlfc.p4) and the
congestion-level register that egress writes and ingress reads."""

from __future__ import annotations

from collections.abc import Iterable

from mlfc import contract
from mlfc.refswitch.errors import Code, P4RuntimeError


class CounterArray:
    def __init__(self, spec: contract.CounterSpec) -> None:
        self.spec = spec
        self.packets = [0] * spec.size
        self.bytes = [0] * spec.size

    def count(self, index: int, length: int) -> None:
        self.packets[index] += 1
        if self.spec.unit != "PACKETS":
            self.bytes[index] += length

    def read(self, index: int) -> tuple[int, int]:
        self._check(index)
        return (self.packets[index], self.bytes[index])

    def write(self, index: int, packets: int, nbytes: int) -> None:
        self._check(index)
        self.packets[index] = packets
        self.bytes[index] = nbytes if self.spec.unit != "PACKETS" else 0

    def _check(self, index: int) -> None:
        if not 0 <= index < self.spec.size:
            raise P4RuntimeError(
                Code.OUT_OF_RANGE, f"{self.spec.name}: index {index} out of range 0..{self.spec.size - 1}"
            )


class SwitchState:
    """Counters and registers; reset whenever a pipeline is (re)committed, as BMv2 resets them."""

    def __init__(self, counters: Iterable[contract.CounterSpec] = contract.COUNTERS.values()) -> None:
        self.counters: dict[str, CounterArray] = {c.name: CounterArray(c) for c in counters}
        self.congestion_level: list[int] = [0] * contract.REGISTERS[contract.CONGESTION_LEVEL_REGISTER].size

    def count(self, counter: str, index: int, length: int) -> None:
        self.counters[counter].count(index, length)

    def counter(self, counter: str, index: int) -> tuple[int, int]:
        """(packets, bytes) at ``index``; bytes is 0 for packet-only counters."""
        return self.counters[counter].read(index)

    def snapshot(self) -> dict[str, dict[int, tuple[int, int]]]:
        """Non-zero cells of every counter: what differential tests compare."""
        out: dict[str, dict[int, tuple[int, int]]] = {}
        for name, c in self.counters.items():
            out[name] = {i: (p, c.bytes[i]) for i, p in enumerate(c.packets) if p or c.bytes[i]}
        return out
