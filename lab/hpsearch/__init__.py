"""`make hpsearch`: MAIF's time to accuracy in a hyper-parameter search of real PyTorch jobs (issue 26).

The command line and the run are cli.py; the published rows and their key are rows.py; rescore.py recomputes
a published row from a finished run's files; figures.py is the docs' table.
"""
