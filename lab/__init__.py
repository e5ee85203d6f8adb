"""Emulated networks: topologies as data, a Mininet builder for BMv2 or the reference switch, scenarios."""
