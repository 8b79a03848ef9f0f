#!/usr/bin/env bash
# Regenerates the Python SDK's gRPC stubs (sdks/python/mlxr/v1/) from
# proto/mlxr/v1 with grpcio-tools (which bundles protoc). Run it after
# changing a .proto; tests/api/test_sdk_grpc.py fails while they differ.
#
#   scripts/gen-python-grpc.sh            with the API test venv's python
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-$HOME/.cache/mlxr/api-venv/bin/python}"
"$python" -m grpc_tools.protoc -I proto --python_out=sdks/python --pyi_out=sdks/python \
    --grpc_python_out=sdks/python mlxr/v1/inference.proto
touch sdks/python/mlxr/v1/__init__.py
echo "wrote sdks/python/mlxr/v1/ (grpcio-tools $("$python" -c 'import grpc_tools, importlib.metadata as m; print(m.version("grpcio-tools"))'))"
