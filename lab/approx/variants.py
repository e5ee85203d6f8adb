"""Approximate flow control's treatments: the models, the variants of each scheme (full, fp16, top-k + EF,
the old selective drop, mlfc's), their order per round and the jobs and stack each runs with."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, replace

from mlfc.hosts.transport.recovery import DEFAULT_TOLERATED_LOSS
from mlfc.lab.jobs import JobSpec
from mlfc.lab.realjobs import start_lead, training_spec
from mlfc.lab.scenarios import TREATMENTS
from mlfc.lab.stack import StackConfig
from mlfc.policy.drop import DropPolicy
from mlfc.policy.withhold import WithholdPolicy

NO_SELECTIVE_DROP = DropPolicy(min_importance=(0, 0, 0, 0))  # tail drop only
FRACTION = 0.95
FINAL_EVALUATIONS = 5  # the final accuracy is the mean of a job's last 5 evaluations
OLD_LOSS_BOUND = 0.1  # selective-old: the bound measured before issue 25


@dataclass(frozen=True)
class Model:
    """One of the experiment's models: a task, its width and learning rate, the compute it is padded to and
    how many iterations a run takes (enough for full delivery to reach 0.95 A* with room to spare)."""

    task: str
    width: int
    lr: float
    compute_s: float
    iterations: int
    what: str


# digits-cnn: the digits CNN (153 KB of gradients, compute padded to 0.1 s); synthetic-mlp: a wide MLP on
# the generated task, whose real compute is a fraction of a millisecond: communication dominates.
MODELS: dict[str, Model] = {
    "digits-cnn": Model("digits", 16, 0.1, 0.1, 100, "digits CNN, width 16"),
    "synthetic-mlp": Model("synthetic", 256, 0.1, 0.05, 160, "MLP width 256 on the generated 8-class task"),
}
TREATMENT_NAMES = (
    "full", "fp16", "topk-ef", "selective-old", "mlfc-push", "mlfc", "mlfc-share", "mlfc-telemetry", "mlfc-precision",
    "mlfc-precision-pulls", "mlfc-precision-repair",
)  # fmt: skip
# the schemes must cost nothing alone
ALONE_TREATMENTS = (
    "full", "mlfc", "mlfc-share", "mlfc-telemetry", "mlfc-precision", "mlfc-precision-pulls", "mlfc-precision-repair",
)  # fmt: skip


@dataclass(frozen=True)
class Variant:
    """One way of running the jobs: a loss bound, a drop policy at the switch, a push compression, whether
    the worker withholds and feeds back, and the window's reaction to a tolerated drop."""

    name: str
    loss_bound: float = 0.0
    drop_policy: DropPolicy = NO_SELECTIVE_DROP
    compress: str = "none"  # none | fp16 | topk (the fraction in ``topk``)
    topk: float | None = None  # topk's fraction; None: matched to the round's mlfc run
    loss_feedback: bool = False  # zero-filled (and withheld) elements go out with the next push
    withhold: bool = False  # the network decides how much of a push is withheld
    withhold_signal: str = WithholdPolicy().signal  # by which congestion signal (mlfc.policy.withhold)
    precision: bool = False  # the withheld share shed by precision first (mlfc.policy.precision)
    pull_bound: float = 0.0  # approximate pulls: at most this share of a pulled tensor left out (0: whole)
    pull_precision: bool = False  # congested pulls go as the change at fp16/int8 first (pull_copies.py)
    repair_drops: bool = False  # only the chunks shed by plan are tolerated; network drops retransmitted
    tolerated_loss: str = DEFAULT_TOLERATED_LOSS

    def compression(self, topk: float | None = None) -> str:
        if self.compress != "topk":
            return self.compress
        f = self.topk if self.topk is not None else topk
        if f is None:
            raise ValueError(f"{self.name}: no top-k fraction (no mlfc run of this round to match)")
        return f"topk:{f:.4g}"

    def describe(self) -> str:
        if self.compress == "topk":
            return "top-k pushes with error feedback, " + (
                f"F = {self.topk:g}" if self.topk is not None else "bytes matched to mlfc"
            )
        if self.compress != "none":
            return f"{self.compress} pushes"
        if self.loss_bound == 0:
            return "every chunk delivered, tail drop"
        drops = "tail drop, drops retransmitted" if self.repair_drops else "selective drop"
        parts = [f"loss bound {self.loss_bound:g} (withheld only)" if self.repair_drops else
                 f"loss bound {self.loss_bound:g}", drops]  # fmt: skip
        parts.append(f"withheld as congested ({self.withhold_signal})" if self.withhold else "")
        parts.append("fp16/int8 before withholding" if self.precision else "")
        parts.append("loss feedback" if self.loss_feedback else "lost for good")
        parts.append("pulls as fp16/int8 changes first" if self.pull_precision else "")
        parts.append(f"pulls left out up to {self.pull_bound:g}" if self.pull_bound else "")
        parts.append(f"tolerated drop: {self.tolerated_loss}")
        return ", ".join(p for p in parts if p)


def variants(args: argparse.Namespace) -> list[Variant]:
    """The treatments in the order named, then the sweep; topk-ef runs after mlfc when it matches it."""
    made = {
        "full": Variant("full"),
        "fp16": Variant("fp16", compress="fp16"),
        "topk-ef": Variant("topk-ef", compress="topk", topk=args.topk),
        "selective-old": Variant(
            "selective-old", OLD_LOSS_BOUND, DropPolicy(), loss_feedback=False, tolerated_loss="loss"
        ),
        "mlfc-push": mlfc_variant("mlfc-push", args.mlfc_bound, pulls=False),
        "mlfc": mlfc_variant("mlfc", args.mlfc_bound),
        "mlfc-share": replace(mlfc_variant("mlfc-share", args.mlfc_bound), withhold_signal="share"),
        # issue 46: the switch's in-band queue depth says how congested the link is and the flow's delivery
        # rate how much of it is its own (mlfc.policy.withhold's telemetry signal)
        "mlfc-telemetry": replace(mlfc_variant("mlfc-telemetry", args.mlfc_bound), withhold_signal="telemetry"),
        # issue 46 item 3: the telemetry signal's share shed by lowering the push's precision first, withholding
        # only what that cannot shed (mlfc.policy.precision)
        "mlfc-precision": replace(
            mlfc_variant("mlfc-precision", args.mlfc_bound), withhold_signal="telemetry", precision=True
        ),
        # its second design: the pulls too (measured cause: pulls that leave chunks out keep the evaluating
        # worker's copy stale by whole chunks); the change since the worker's copy at fp16/int8 first
        "mlfc-precision-pulls": replace(
            mlfc_variant("mlfc-precision-pulls", args.mlfc_bound),
            withhold_signal="telemetry",
            precision=True,
            pull_precision=True,
        ),
        # its third design (on the synthetic MLP about a third of what the PS went without each iteration was
        # dropped by the switches, not withheld by plan): shed by plan, repair the rest; the switch tail-drops
        # only (no selective drop) and the hosts retransmit what it drops
        "mlfc-precision-repair": replace(
            mlfc_variant("mlfc-precision-repair", args.mlfc_bound),
            drop_policy=NO_SELECTIVE_DROP,
            withhold_signal="telemetry",
            precision=True,
            pull_precision=True,
            repair_drops=True,
        ),
    }
    out = [made[n] for n in args.treatments]
    out += [mlfc_variant(f"mlfc-b{b:g}", b) for b in args.sweep if b != args.mlfc_bound]
    return out


def mlfc_variant(name: str, bound: float, pulls: bool = True) -> Variant:
    return Variant(name, bound, DropPolicy(), loss_feedback=True, withhold=True, pull_bound=bound if pulls else 0.0)


def run_order(vs: Sequence[Variant], rnd: int) -> list[Variant]:
    """Round ``rnd``'s order: rotated by the round (slow drift of the machine hits all alike), a matched
    topk-ef moved right after mlfc (it needs mlfc's bytes)."""
    k = rnd % len(vs) if vs else 0
    order = list(vs[k:]) + list(vs[:k])
    matched = [v for v in order if v.compress == "topk" and v.topk is None]
    if matched and any(v.name == "mlfc" for v in order):
        order = [v for v in order if v not in matched]
        i = next(i for i, v in enumerate(order) if v.name == "mlfc")
        order[i + 1 : i + 1] = matched
    return order


def jobs_for(
    args: argparse.Namespace, model: Model, v: Variant, n: int, seed: int, topk: float | None
) -> tuple[JobSpec, ...]:
    out = []
    for j in range(1, n + 1):
        spec = training_spec(j, task=model.task, width=model.width, lr=model.lr, compute_s=model.compute_s,
                             workers=args.workers, eval_every=args.eval_every, seed=seed, loss_bound=v.loss_bound,
                             name=v.name)  # fmt: skip
        t = replace(spec.training, compress=v.compression(topk), loss_feedback=v.loss_feedback, withhold=v.withhold,
                    withhold_signal=v.withhold_signal, precision=v.precision,
                    pull_loss_bound=v.pull_bound, pull_precision=v.pull_precision,
                    repair_drops=v.repair_drops)  # fmt: skip
        out.append(replace(spec, training=t))
    return tuple(out)


def stack(
    args: argparse.Namespace, model: Model, v: Variant, n: int, seed: int, topk: float | None = None
) -> StackConfig:
    return StackConfig(
        name=f"approx/{v.name}",
        jobs=jobs_for(args, model, v, n, seed, topk),
        iterations=args.iterations or model.iterations,
        cc=TREATMENTS["baseline"].cc,
        bottleneck_pps=args.bottleneck_pps,
        drop_policy=v.drop_policy,
        start_lead_s=start_lead(n),
        tolerated_loss=v.tolerated_loss,
    )
