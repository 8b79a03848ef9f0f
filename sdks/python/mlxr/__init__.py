"""MLXR's Python SDK: a client of the `mlxr serve` daemon's REST API.

>>> import mlxr
>>> client = mlxr.Client()                      # MLXR_HOST, else 127.0.0.1:11435
>>> client.chat("smollm2", [{"role": "user", "content": "Hi"}]).message.content
>>> for part in client.generate("smollm2", "Once upon a time", stream=True, num_predict=32):
...     print(part.response, end="")
"""

from ._client import DEFAULT_HOST, AsyncClient, Client
from ._types import (
    ChatResponse,
    EmbedResponse,
    Function,
    GenerateResponse,
    ListResponse,
    Message,
    Model,
    ModelDetails,
    ProcessResponse,
    ProgressResponse,
    ResponseError,
    RunningModel,
    ShowResponse,
    ToolCall,
)

__version__ = "0.1.0"

__all__ = [
    "AsyncClient", "ChatResponse", "Client", "DEFAULT_HOST", "EmbedResponse", "Function", "GenerateResponse",
    "ListResponse", "Message", "Model", "ModelDetails", "ProcessResponse", "ProgressResponse", "ResponseError",
    "RunningModel", "ShowResponse", "ToolCall",
]
