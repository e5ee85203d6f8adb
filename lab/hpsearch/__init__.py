"""`make hpsearch`: MAIF's time to accuracy in a hyper-parameter search of real PyTorch jobs (issue 26).

cli.py is the command line and runs the search on each dataplane; search.py the grid, the rounds and one
search under a treatment; report.py its tables, CSVs, plots and published rows; rows.py the published rows'
fields and key; rescore.py recomputes a published row from a finished run's files; figures.py is the docs'
table.
"""
