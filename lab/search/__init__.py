"""`make search`: an Optuna study of real PyTorch jobs on the dumbbell, its time to accuracy with and without
MAIF (issue 47 item 1).

cli.py is the command line and runs the studies on each dataplane; study.py one study (the sampler, the
pruner, the trials as jobs); report.py its CSVs, plots and published rows; rows.py the figures made from
trial histories and the published rows' fields and key; figures.py is the docs' table and plot.
"""
