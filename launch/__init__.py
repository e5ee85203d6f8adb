"""Start, health-check, stop and crash the processes mlfc runs (switches, daemons): used by the lab, the
tests and the benchmarks; the product's daemons never import it."""
