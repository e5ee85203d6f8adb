"""Writes reports into a coordinator store in a loop until killed (test support, run by
test_coordinator_store_durability.py): batches of BATCH reports of job 1, worker 0, one transaction
each, "committed K" printed after the transaction of iterations ..K returned."""

from __future__ import annotations

import argparse
import time

from mlfc.coordinator.store import ReportRow, Store

BATCH = 50


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("db")
    ap.add_argument("--start", type=int, default=0)
    args = ap.parse_args()
    store = Store(args.db)
    it = args.start
    while True:
        now = time.time()
        rows = [ReportRow(1, 0, i, 0.5, 0.01, 0.02, 1000, now, now + 1e-6 * (i - it)) for i in range(it, it + BATCH)]
        with store.transaction() as db:
            Store.insert_reports(db, rows)
        it += BATCH
        print(f"committed {it - 1}", flush=True)


if __name__ == "__main__":
    main()
