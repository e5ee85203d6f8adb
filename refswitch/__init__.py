"""The reference dataplane: mlfc.p4's semantics as an executable Python switch speaking P4Runtime.

* ``pipeline.process(frame, port, tables, state)`` -> ``Decision``: the pure model (tests, oracle).
* ``server.RefSwitchServer``: the switch in-process (dataplane + P4Runtime + admin endpoint).
* ``mlfc.launch.switches.RefSwitch``: an ``mlfc-refswitch`` process, with the API of ``Bmv2Switch``.

It implements the dataplane contract (mlfc/contract.py); clients talk to it with the controller's
``mlfc.controller.sync.SwitchConnection``, as to BMv2.

See docs/refswitch.md.
"""
