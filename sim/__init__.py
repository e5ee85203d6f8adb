"""mlfc on ns-3: the same policies (mlfc/policy via the controller's compiled entries), MLTCP and the
coordinator's MAIF ranking on simulated fabrics of many jobs at 100 Gb/s. See docs/sim.md."""
