"""The lab: a shared harness at the top level (emulated networks for BMv2 or the reference switch, the stack,
jobs, measurements, the published rows) and one package per experiment (e2e, mltcp, hpsearch, approx, chaos);
docs/architecture.md, "The lab, by experiment"."""
