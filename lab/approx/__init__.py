"""`make approx`: accuracy-centric approximate flow control against full delivery and rigid compression
(issue 25).

cli.py is the command line and runs every model on each dataplane; variants.py the treatments and how each
runs; run.py one run and its result; report.py the tables, plots, CSVs and published rows; figures.py the
docs' table.
"""
