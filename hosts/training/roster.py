"""The aggregator's roster file: the ranks it admitted (pull address and connection session of each), kept
while its job runs so that a restarted aggregator can tell them it lost their job (aggregate mode cannot
resume a DDP step: docs/training.md, "When things fail"). Written atomically and fsynced."""

from __future__ import annotations

import json
from pathlib import Path

from mlfc.hosts.training.durable import remove_leftovers, write_atomic

Rank = tuple[str, int, int]  # pull address ip, port; the session of its HELLO (what its ABORT must carry)


def save(path: Path, job: int, workers: int, ranks: dict[int, Rank]) -> None:
    body = {"job": job, "workers": workers, "ranks": {str(r): list(v) for r, v in sorted(ranks.items())}}
    data = json.dumps(body).encode()
    write_atomic(path, lambda f: f.write(data))


def load(path: Path, job: int) -> dict[int, Rank] | None:
    """The ranks of ``job`` a previous aggregator left in ``path``, or None when there is no roster.
    ValueError for a file that is not a roster, or one of another job."""
    remove_leftovers(path)
    if not path.exists():
        return None
    try:
        body = json.loads(path.read_text())
        found = int(body["job"])
        ranks = {int(r): (str(ip), int(port), int(session)) for r, (ip, port, session) in body["ranks"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"roster file {path} unreadable: {exc} (delete it to start afresh)") from None
    if found != job:
        raise ValueError(f"roster file {path} is of job {found}, this aggregator runs job {job}")
    return ranks
