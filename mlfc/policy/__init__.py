"""Policies as plain functions: the controller compiles them into table entries, hosts and the
reference switch call them, and switch tests check BMv2 against them."""
