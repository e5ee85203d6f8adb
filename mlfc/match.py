"""Match values of a P4Runtime table entry, one class per match kind (exact, lpm, ternary, range).

Shared by the controller (what it compiles and diffs) and the reference switch (what it validates and
looks up), so the two speak the same values; the refswitch never imports the controller. Plain values:
a ternary keeps the value bits outside its mask, because the switch must reject them as PI does; the
controller's ``entry()`` masks them off so its entries compare equal to a switch's read-back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, order=True)
class Exact:
    value: int


@dataclass(frozen=True, slots=True, order=True)
class Lpm:
    value: int
    prefix_len: int


@dataclass(frozen=True, slots=True, order=True)
class Ternary:
    value: int
    mask: int

    def masked(self) -> Ternary:
        """The same match with the value bits outside the mask cleared (P4Runtime's canonical form)."""
        return self if self.value & ~self.mask == 0 else Ternary(self.value & self.mask, self.mask)


@dataclass(frozen=True, slots=True, order=True)
class Range:
    lo: int
    hi: int


Match = Exact | Lpm | Ternary | Range
