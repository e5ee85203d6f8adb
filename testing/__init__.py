"""Test support: the packets switch tests send, veth pairs and namespaces for the host tests, lossy
sockets. Imported by tests, the PTF suite and benchmarks, never by the product."""
