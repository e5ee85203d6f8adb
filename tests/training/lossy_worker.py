"""``mlfc-train worker`` whose push flow loses chunks (test support: mlfc.testing.lossy on the push socket).

    python tests/training/lossy_worker.py --drop-rate 0.05 [--drop-seed 1] -- worker --job 1 --rank 1 ...

Drops the first transmission of each pushed gradient chunk with probability ``drop-rate`` (seeded), as
a congested switch would; retransmissions and control messages pass. What the PS then zero-fills is
counted by the PS and shows in this worker's records (lost_chunks).
"""

from __future__ import annotations

import argparse
import random
import sys

from mlfc.hosts.training import protocol as proto
from mlfc.hosts.training.cli import build_parser, run_worker_command
from mlfc.hosts.transport import bind_shim_socket
from mlfc.testing.lossy import LossySocket


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--drop-rate", type=float, required=True)
    ap.add_argument("--drop-seed", type=int, default=1)
    ap.add_argument("rest", nargs=argparse.REMAINDER)
    ours = ap.parse_args(argv)
    rest = ours.rest[1:] if ours.rest[:1] == ["--"] else ours.rest
    args = build_parser().parse_args(rest)
    rng = random.Random(ours.drop_seed)

    def drop(header, attempt: int) -> bool:
        return attempt == 0 and header.tensor_id < proto.MAX_TENSORS and rng.random() < ours.drop_rate

    sock = LossySocket(bind_shim_socket(args.bind, args.tx_port), drop)
    return run_worker_command(args, push_sock=sock)


if __name__ == "__main__":
    sys.exit(main())
