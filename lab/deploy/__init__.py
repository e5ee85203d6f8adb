"""The off-host deployment of docs/deploy.md stood up in network namespaces (``make deploy-test``)."""
