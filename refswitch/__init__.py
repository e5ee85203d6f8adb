"""The reference dataplane: mlfc.p4's semantics as an executable Python switch speaking P4Runtime.

* ``pipeline.process(frame, port, tables, state)`` -> ``Decision``: the pure model (tests, oracle).
* ``server.RefSwitchServer``: the switch in-process (dataplane + P4Runtime + admin endpoint).
* ``switch.RefSwitch``: an ``mlfc-refswitch`` process, with the API of ``topologies.bmv2.Bmv2Switch``.

See docs/refswitch.md.
"""
