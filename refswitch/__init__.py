"""The reference dataplane: mlfc.p4's semantics as an executable Python switch speaking P4Runtime."""
