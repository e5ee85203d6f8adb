"""`make e2e`: every job mix under its treatments on the Mininet network, the switches' MLTCP rows and the
coordinator's (docs/data/mltcp, docs/data/coordinated).

cli.py is the command line and the runs of a mix; figures.py is the coordinator's docs' table (the MLTCP
table is lab/mltcp/figures.py's).
"""
