#!/usr/bin/env bash
# Regenerate the committed Python bindings of mlfc's own protos (make proto).
set -euo pipefail
cd "$(dirname "$0")/../.."
"${PYTHON:-python}" -m grpc_tools.protoc -I. --python_out=. --grpc_python_out=. --pyi_out=. mlfc/proto/*.proto
