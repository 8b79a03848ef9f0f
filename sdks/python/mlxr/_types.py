"""The daemon's answers as dataclasses.

Each type keeps the JSON fields Ollama's API documents (the daemon's `/api/*`
routes) and can be read like a dict too (`r["message"]["content"]`), as the
`ollama` package's responses can; `raw` holds the whole JSON object,
including fields this version of the SDK does not name.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Optional


class ResponseError(Exception):
    """The daemon refused a request or failed it.

    `status_code` is the HTTP status (404 for an unknown model, 400 for a bad
    option, 401 for a missing or wrong API key, ...), or -1 for an error the
    daemon reported inside a stream that had already started (a pull whose
    download failed). `message` is the daemon's own message.

    >>> try:
    ...     client.chat("no-such-model", [{"role": "user", "content": "Hi"}])
    ... except mlxr.ResponseError as e:
    ...     print(e.status_code, e.message)
    404 model 'no-such-model' not found
    """

    def __init__(self, status_code: int, message: str):
        super().__init__(message)
        self.status_code = status_code
        self.message = message

    @property
    def error(self) -> str:
        """The message, under the name the `ollama` package uses."""
        return self.message

    def __str__(self) -> str:
        return self.message if self.status_code < 0 else f"{self.status_code}: {self.message}"


class _Record:
    """Dict-style reads of a dataclass's fields, and construction from JSON
    that ignores unknown keys (kept in `raw`)."""

    raw: dict

    def __getitem__(self, key: str) -> Any:
        if key in self._names():
            return getattr(self, key)
        return self.raw[key]

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: str) -> bool:
        return key in self._names() or key in self.raw

    @classmethod
    def _names(cls) -> set:
        return {f.name for f in dataclasses.fields(cls)} - {"raw"}

    @classmethod
    def from_json(cls, data: dict):
        known = {k: v for k, v in data.items() if k in cls._names()}
        return cls(**cls._convert(known), raw=data)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        return known


@dataclass
class Function(_Record):
    name: str = ""
    arguments: Any = None
    index: Optional[int] = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class ToolCall(_Record):
    """A call the model made: `function.name` and `function.arguments` (an
    object)."""

    function: Function = field(default_factory=Function)
    id: Optional[str] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        if isinstance(known.get("function"), dict):
            known["function"] = Function.from_json(known["function"])
        return known


@dataclass
class Message(_Record):
    role: str = "assistant"
    content: str = ""
    tool_calls: Optional[list] = None
    thinking: Optional[str] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        if known.get("tool_calls"):
            known["tool_calls"] = [ToolCall.from_json(c) for c in known["tool_calls"]]
        return known


@dataclass
class _Timings(_Record):
    model: str = ""
    created_at: Optional[str] = None
    done: bool = False
    done_reason: Optional[str] = None
    total_duration: Optional[int] = None
    load_duration: Optional[int] = None
    prompt_eval_count: Optional[int] = None
    prompt_eval_duration: Optional[int] = None
    eval_count: Optional[int] = None
    eval_duration: Optional[int] = None
    logprobs: Optional[list] = None


@dataclass
class ChatResponse(_Timings):
    """One reply of `chat` (or, streamed, one piece of it: the last has
    `done=True`, the reason and the counts)."""

    message: Message = field(default_factory=Message)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        if isinstance(known.get("message"), dict):
            known["message"] = Message.from_json(known["message"])
        return known


@dataclass
class GenerateResponse(_Timings):
    """One reply of `generate` (or one streamed piece of it); `context` is
    the conversation's token ids, to pass back for a follow-up."""

    response: str = ""
    thinking: Optional[str] = None
    context: Optional[list] = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class EmbedResponse(_Record):
    """One vector per input, L2-normalized by the daemon."""

    model: str = ""
    embeddings: list = field(default_factory=list)
    total_duration: Optional[int] = None
    load_duration: Optional[int] = None
    prompt_eval_count: Optional[int] = None
    raw: dict = field(default_factory=dict, repr=False)


@dataclass
class ModelDetails(_Record):
    parent_model: str = ""
    format: str = ""
    family: str = ""
    families: Optional[list] = None
    parameter_size: str = ""
    quantization_level: str = ""
    raw: dict = field(default_factory=dict, repr=False)


def _details(known: dict) -> dict:
    if isinstance(known.get("details"), dict):
        known["details"] = ModelDetails.from_json(known["details"])
    return known


@dataclass
class Model(_Record):
    """A model in the registry or served from a file (`list`)."""

    name: str = ""
    model: str = ""
    modified_at: Optional[str] = None
    size: int = 0
    digest: str = ""
    details: ModelDetails = field(default_factory=ModelDetails)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        return _details(known)


@dataclass
class ListResponse(_Record):
    models: list = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        known["models"] = [Model.from_json(m) for m in known.get("models") or []]
        return known


@dataclass
class RunningModel(_Record):
    """A loaded model (`ps`): when it unloads, its context and device."""

    name: str = ""
    model: str = ""
    size: int = 0
    digest: str = ""
    details: ModelDetails = field(default_factory=ModelDetails)
    expires_at: Optional[str] = None
    size_vram: int = 0
    context_length: Optional[int] = None
    device: Optional[str] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        return _details(known)


@dataclass
class ProcessResponse(_Record):
    models: list = field(default_factory=list)
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        known["models"] = [RunningModel.from_json(m) for m in known.get("models") or []]
        return known


@dataclass
class ShowResponse(_Record):
    """A model's Modelfile, template, parameters, system prompt, license,
    details, `model_info` (GGUF metadata) and capabilities."""

    modelfile: Optional[str] = None
    template: Optional[str] = None
    parameters: Optional[str] = None
    system: Optional[str] = None
    license: Optional[str] = None
    messages: Optional[list] = None
    details: ModelDetails = field(default_factory=ModelDetails)
    model_info: Optional[dict] = None
    capabilities: Optional[list] = None
    modified_at: Optional[str] = None
    device: Optional[str] = None
    raw: dict = field(default_factory=dict, repr=False)

    @classmethod
    def _convert(cls, known: dict) -> dict:
        return _details(known)


@dataclass
class ProgressResponse(_Record):
    """A line of `pull`'s or `create`'s progress: `status`, and while bytes
    move, `completed` of `total`."""

    status: str = ""
    digest: Optional[str] = None
    total: Optional[int] = None
    completed: Optional[int] = None
    raw: dict = field(default_factory=dict, repr=False)
