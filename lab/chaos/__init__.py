"""`make chaos`: real training while a seeded schedule kills, freezes and cuts every component in turn.

    python -m mlfc.lab.chaos --seed N | --seeds 1,2,3 [--faults 13] [--actions kill,stop,down]
                             [--iterations 150] [--dataplane ref|bmv2|auto] [--out results/chaos]
                             [--no-baseline] [--publish]

The command line is cli.py; the parts: the schedule, job and network (schedule), the job's processes in the
Mininet hosts (processes), the switches against the decisions (check), one run with its faults and supervisor
(run), the ledger of acknowledged reports and decisions (ledger), what the processes printed (records), the
per-fault table, summary and plot (outputs).
"""
