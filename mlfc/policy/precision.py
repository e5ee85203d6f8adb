"""The precision is part of the decision (issue 46, item 3): how a push sheds the bytes the network asks for.

``share_for(policy, congestion)`` (mlfc.policy.withhold) says what share s of a push's float32 bytes the
network asks the flow to shed (its share of the excess). Withholding whole chunks sheds them by delaying all
of their information a push (error feedback); lowering the precision sheds them by delaying only the
rounding. So precision goes first, and only withholding is capped by the tensor's loss bound: the bound says
how many elements the PS may go without, and a rounded push delivers every element. (The first cut chose
the precision from s capped by the bound: at the default bound 0.5 three jobs on a saturated link, each
asked to shed ~2/3, ran fp16 and never int8.)

* **Per-push precision** (not per chunk): the whole push goes fp32, fp16 (2 bytes an element: sheds 1/2) or
  int8 (each wire chunk one float32 scale, max|x|/127, then chunk - 4 int8 values: sheds ~3/4). The PS learns
  it from the tensor header's total length (it knows each tensor's element count and the chunk size; a
  precision whose size equals a finer one's for a tensor is never used for it), so no field is added to the
  wire and the bytes on the wire really shrink. Per-chunk mixed precision would need a chunk-to-elements
  map the PS cannot infer from the header: not done.
* The precision is the level whose shed is **nearest** to s (ties to the finer one): fp32 for s < 1/4, fp16
  up to s < 5/8, int8 beyond. What s asks beyond the level's shed is withheld as before (least important
  chunks of the encoded push, ``choose_withheld``); below 1/4 that is all of s, like mlfc-telemetry.
* Alone (s = 0): fp32, nothing withheld. Protected and most important chunks are never withheld; at a lower
  precision they are rounded like the rest (per push), their rounding kept in the residual.

The rounding (sent minus what the PS decodes) and the withheld chunks go to the same error-feedback residual
(hosts/training/residual.py): the sum of what the PS received plus the residual is the sum of the gradients.
One source of truth: the worker (hosts/training/push_shaping.py), the PS (hosts/training/pushes.py) and the
tests call these; the codec is hosts/training/compress.py's.
"""

from __future__ import annotations

from dataclasses import dataclass

from mlfc.policy.priority import PolicyError

PRECISIONS = ("fp32", "fp16", "int8")  # finest first
INT8_SCALE_BYTES = 4  # each int8 wire chunk starts with its float32 scale


def elements_per_chunk(precision: str, chunk: int) -> float:
    """Elements one wire chunk of ``chunk`` bytes carries (fp32/fp16: may be fractional; int8: chunk - 4)."""
    if precision == "fp32":
        return chunk / 4
    if precision == "fp16":
        return chunk / 2
    if precision == "int8":
        return chunk - INT8_SCALE_BYTES
    raise PolicyError(f"precision {precision!r}: one of {', '.join(PRECISIONS)}")


def encoded_bytes(precision: str, numel: int, chunk: int) -> int:
    """Bytes a push of ``numel`` float32 elements takes on the wire at ``precision``."""
    if precision == "int8":
        per = chunk - INT8_SCALE_BYTES
        if per < 1:
            raise PolicyError(f"int8 needs chunks of more than {INT8_SCALE_BYTES} bytes, not {chunk}")
        return numel + INT8_SCALE_BYTES * -(-numel // per)
    if precision == "fp16":
        return 2 * numel
    if precision == "fp32":
        return 4 * numel
    raise PolicyError(f"precision {precision!r}: one of {', '.join(PRECISIONS)}")


def usable(numel: int, chunk: int) -> tuple[str, ...]:
    """The precisions a push of this tensor may use: those whose size on the wire no finer one has (so the
    PS can tell them apart by the length) and that shrink it (int8 of a tiny tensor may not)."""
    out: list[str] = []
    sizes: list[int] = []
    for p in PRECISIONS:
        if p == "int8" and chunk <= INT8_SCALE_BYTES:
            continue
        size = encoded_bytes(p, numel, chunk)
        if not sizes or size < min(sizes):
            out.append(p)
            sizes.append(size)
    return tuple(out)


def precision_of(total_bytes: int, numel: int, chunk: int) -> str:
    """The PS's side: the precision of a push of ``total_bytes`` for a tensor of ``numel`` elements."""
    for p in usable(numel, chunk):
        if encoded_bytes(p, numel, chunk) == total_bytes:
            return p
    raise PolicyError(f"a push of {total_bytes} bytes is no precision of a tensor of {numel} elements")


@dataclass(frozen=True, slots=True)
class Plan:
    """How one push sheds: its ``precision`` and the share of the encoded push's bytes to withhold."""

    precision: str = "fp32"
    withhold: float = 0.0


FP32 = Plan()


def shed_of(precision: str, numel: int, chunk: int) -> float:
    """The share of the float32 bytes ``precision`` sheds for this tensor."""
    return 1.0 - encoded_bytes(precision, numel, chunk) / (4 * numel) if numel else 0.0


def plan(share: float, numel: int, chunk: int, bound: float = 1.0) -> Plan:
    """The precision whose shed is nearest to ``share`` (ties to the finer), and what ``share`` asks beyond
    it as a share of the encoded push, withheld up to ``bound`` (the tensor's loss bound; module doc).
    share 0: fp32, nothing withheld."""
    if not 0.0 <= share <= 1.0:
        raise PolicyError(f"share={share!r} must be in [0, 1]")
    if not 0.0 <= bound <= 1.0:
        raise PolicyError(f"bound={bound!r} must be in [0, 1]")
    if share <= 0 or numel <= 0:
        return FP32
    best, best_gap = "fp32", share
    for p in usable(numel, chunk)[1:]:
        gap = abs(shed_of(p, numel, chunk) - share)
        if gap < best_gap:
            best, best_gap = p, gap
    shed = shed_of(best, numel, chunk)
    rest = max(0.0, share - shed) / (1.0 - shed)  # of the encoded bytes, which are 1 - shed of the float32 ones
    return Plan(best, min(bound, rest))
