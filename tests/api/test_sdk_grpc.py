"""The Python SDK's gRPC client (`mlxr.grpc`, `pip install 'mlxr[grpc]'`):
its stubs are those of the committed protos, and `connect` reaches a real
daemon over TCP and its Unix socket, with the API key."""

import subprocess
import sys

import grpc
import pytest
from google.protobuf import descriptor_pb2

from conftest import MODEL, ROOT, Server


def test_the_stubs_are_those_of_the_protos(tmp_path):
    from mlxr.v1 import inference_pb2

    out = tmp_path / "set.bin"
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", f"-I{ROOT / 'proto'}",
                    f"--descriptor_set_out={out}", "mlxr/v1/inference.proto"], check=True)
    fresh = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in fresh.message_type:  # the Python gencode leaves them out
        for field in message.field:
            field.ClearField("json_name")
    shipped = descriptor_pb2.FileDescriptorProto.FromString(inference_pb2.DESCRIPTOR.serialized_pb)
    assert shipped == fresh, "proto/ changed: run scripts/gen-python-grpc.sh"


def greedy(stub, pb):
    out = ""
    for m in stub.Generate(pb.GenerateRequest(model=MODEL, prompt="Name three colors.",
                                              options=pb.Options(temperature=0, num_predict=12))):
        if m.HasField("token"):
            out += m.token.text
    return out


def test_connect_over_tcp_and_the_socket_with_the_key(tmp_path, monkeypatch):
    from mlxr.grpc import connect, pb

    sock = tmp_path / "mlxr.sock"
    s = Server(tmp_path, "--api-key", "sekrit", "--socket", str(sock))
    try:
        with pytest.raises(grpc.RpcError) as e:
            greedy(connect(f"127.0.0.1:{s.port}"), pb)
        assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED
        tcp = greedy(connect(s.url, api_key="sekrit"), pb)
        assert tcp
        assert greedy(connect(f"unix:{sock}", api_key="sekrit"), pb) == tcp
        monkeypatch.setenv("MLXR_HOST", f"unix://{sock}")
        assert greedy(connect(api_key="sekrit"), pb) == tcp
    finally:
        s.stop()
