"""Adapters that make a third-party framework's units of work mlfc jobs (e.g. an Optuna search's trials)."""
