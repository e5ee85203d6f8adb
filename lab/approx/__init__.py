"""`make approx`: accuracy-centric approximate flow control against full delivery and rigid compression
(issue 25).

The command line and the run are cli.py; figures.py is the docs' table.
"""
