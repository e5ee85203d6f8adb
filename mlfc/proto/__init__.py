"""gRPC/protobuf definitions of mlfc's own services (intent API, coordinator API)."""
