"""A gRPC client of the daemon's `mlxr.v1.Inference` service (`pip install
'mlxr[grpc]'`): the stubs generated from proto/mlxr/v1 (`mlxr.v1`), on a
channel to the daemon's port or Unix socket that sends the API key.

>>> from mlxr.grpc import connect, pb
>>> stub = connect()                 # MLXR_HOST, else 127.0.0.1:11435; "unix:/path.sock"
>>> for m in stub.Generate(pb.GenerateRequest(model="smollm2", prompt="Hi",
...                                           options=pb.Options(num_predict=32))):
...     print(m.token.text if m.HasField("token") else "", end="")
"""

import collections
from typing import Optional

import grpc

from ._client import _base_url
from .v1 import inference_pb2 as pb
from .v1.inference_pb2_grpc import InferenceStub

__all__ = ["channel", "connect", "pb", "InferenceStub"]


class _Details(collections.namedtuple("_Details", ("method", "timeout", "metadata", "credentials",
                                                   "wait_for_ready", "compression")),
               grpc.ClientCallDetails):
    pass


class _ApiKey(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Adds `authorization: Bearer KEY` to every call's metadata."""

    def __init__(self, api_key: str):
        self.header = ("authorization", f"Bearer {api_key}")

    def _details(self, d):
        metadata = list(d.metadata or []) + [self.header]
        return _Details(d.method, d.timeout, metadata, d.credentials,
                        getattr(d, "wait_for_ready", None), getattr(d, "compression", None))

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation, details, request):
        return continuation(self._details(details), request)


def channel(host: Optional[str] = None, api_key: Optional[str] = None) -> grpc.Channel:
    """A channel to the daemon: `host` as `mlxr.Client` reads it (`host:port`,
    an http URL, `unix:PATH`; default `MLXR_HOST`, else 127.0.0.1:11435)."""
    base, socket = _base_url(host)
    if socket:
        # grpcio would send the socket's path as the HTTP/2 authority, which
        # the daemon (like any HTTP/2 server) refuses.
        ch = grpc.insecure_channel(f"unix:{socket}", options=[("grpc.default_authority", "localhost")])
    elif base.startswith("https://"):
        ch = grpc.secure_channel(base[len("https://"):], grpc.ssl_channel_credentials())
    else:
        ch = grpc.insecure_channel(base[len("http://"):])
    return grpc.intercept_channel(ch, _ApiKey(api_key)) if api_key else ch


def connect(host: Optional[str] = None, api_key: Optional[str] = None) -> InferenceStub:
    """The `mlxr.v1.Inference` stub on [`channel`](host, api_key)."""
    return InferenceStub(channel(host, api_key))
