"""`Client` and `AsyncClient`: the daemon's Ollama-style `/api/*` routes.

Every method builds a `_Call` (route, body, how to read the answer) once in
`_Calls`; the two clients only differ in how they send it. The Ollama-style
routes are the natural ones for an SDK that also manages models: they carry
`options`, `format`, `tools`, `keep_alive`, `context` and NDJSON streams, and
model management has no OpenAI counterpart. For the OpenAI API, point the
`openai` package at `http://127.0.0.1:11435/v1`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, AsyncIterator, Callable, Iterator, Optional, Sequence, Union

import httpx

from ._types import (
    ChatResponse,
    EmbedResponse,
    GenerateResponse,
    Message,
    ListResponse,
    ProcessResponse,
    ProgressResponse,
    ResponseError,
    ShowResponse,
)

DEFAULT_HOST = "127.0.0.1:11435"
# No read limit (a load may take minutes, as may a long reply without `stream`),
# but a daemon that is not there fails fast.
DEFAULT_TIMEOUT = httpx.Timeout(None, connect=5.0)

# Request fields of /api/chat and /api/generate that sit beside `options`;
# any other keyword argument of `chat`/`generate` is a model option.
_CHAT_FIELDS = {"tools", "format", "keep_alive", "template", "think", "logprobs", "top_logprobs", "grammar"}
_GENERATE_FIELDS = _CHAT_FIELDS - {"tools"} | {"suffix", "system", "context", "raw", "images"}

Progress = Callable[[ProgressResponse], None]


def _base_url(host: Optional[str]) -> tuple[str, Optional[str]]:
    """`host`, else `MLXR_HOST`, else 127.0.0.1:11435, as the `mlxr` CLI reads
    it: `host:port`, a URL, or `unix:PATH` (also `unix://PATH`). Returns the
    base URL and the socket path, if any."""
    host = host or os.environ.get("MLXR_HOST") or DEFAULT_HOST
    if host.startswith("unix:"):
        path = host[len("unix:"):]
        return "http://localhost", path[2:] if path.startswith("//") else path
    host = host.rstrip("/")
    if not host.startswith(("http://", "https://")):
        host = "http://" + host
    return host, None


def _headers(api_key: Optional[str]) -> dict:
    headers = {"Accept": "application/json", "User-Agent": "mlxr-python/0.1.0"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def _error_message(status: int, text: str) -> str:
    """The `error` of an Ollama-shaped (`{"error": "..."}`) or OpenAI-shaped
    (`{"error": {"message": ...}}`) body, else the body itself."""
    try:
        error = json.loads(text).get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict):
        error = error.get("message")
    if isinstance(error, str) and error:
        return error
    return text.strip() or f"HTTP {status}"


def _line(text: str) -> Optional[dict]:
    """One NDJSON line; an in-band `{"error": ...}` line raises."""
    if not text.strip():
        return None
    data = json.loads(text)
    if isinstance(data, dict) and "error" in data:
        raise ResponseError(-1, _error_message(-1, text))
    return data


def _connect_error(base: str, socket: Optional[str], e: Exception) -> ConnectionError:
    where = f"unix:{socket}" if socket else base
    return ConnectionError(f"could not connect to mlxr serve at {where} (start it with `mlxr serve`): {e}")


@dataclass
class _Call:
    method: str
    path: str
    body: Optional[dict] = None
    # "json": one object read by `result`; "stream": NDJSON lines read by
    # `result` one by one; "progress": NDJSON progress lines, each given to
    # `progress`, the last returned; "none": no result.
    kind: str = "json"
    result: Callable[[dict], Any] = lambda d: d
    progress: Optional[Progress] = None


def _generation_body(model: str, fields: set, required: dict, stream: bool, options: dict) -> dict:
    body = {"model": model, **required, "stream": stream}
    model_options = dict(options.pop("options", None) or {})
    for key, value in options.items():
        if key in fields:
            if value is not None:
                body[key] = value
        elif value is not None:
            model_options[key] = value
    if model_options:
        body["options"] = model_options
    return body


def _messages(messages: Sequence[Any]) -> list:
    """Messages as dicts (a `Message` from an earlier reply is fine too)."""
    out = []
    for m in messages:
        if isinstance(m, Message):
            m = dict(m.raw) or {"role": m.role, "content": m.content}
        out.append(m)
    return out


class _Calls:
    """What each method sends and how its answer is read."""

    def _chat(self, model, messages, stream, options) -> _Call:
        body = _generation_body(model, _CHAT_FIELDS, {"messages": _messages(messages)}, stream, options)
        return _Call("POST", "/api/chat", body, "stream" if stream else "json", ChatResponse.from_json)

    def _generate(self, model, prompt, stream, options) -> _Call:
        body = _generation_body(model, _GENERATE_FIELDS, {"prompt": prompt}, stream, options)
        return _Call("POST", "/api/generate", body, "stream" if stream else "json", GenerateResponse.from_json)

    def _embed(self, model, input, truncate, dimensions, keep_alive) -> _Call:
        body = {"model": model, "input": input}
        for key, value in (("truncate", truncate), ("dimensions", dimensions), ("keep_alive", keep_alive)):
            if value is not None:
                body[key] = value
        return _Call("POST", "/api/embed", body, result=EmbedResponse.from_json)

    def _pull(self, model, progress) -> _Call:
        body = {"model": model, "stream": True}
        return _Call("POST", "/api/pull", body, "progress", ProgressResponse.from_json, progress)

    def _create(self, model, progress, fields) -> _Call:
        body = {"model": model, "stream": True}
        if "from_" in fields:
            fields["from"] = fields.pop("from_")
        body.update({k: v for k, v in fields.items() if v is not None})
        return _Call("POST", "/api/create", body, "progress", ProgressResponse.from_json, progress)


class Client(_Calls):
    """A client of a running `mlxr serve`.

    `host`: `host:port`, a URL or `unix:PATH` (a daemon started with
    `--socket PATH`); default `MLXR_HOST`, else `127.0.0.1:11435`.
    `api_key`: sent as `Authorization: Bearer KEY` (default `MLXR_API_KEY`).

    >>> import mlxr
    >>> client = mlxr.Client()
    >>> r = client.chat("smollm2", [{"role": "user", "content": "Hi"}], temperature=0)
    >>> print(r.message.content)
    >>> for part in client.chat("smollm2", [{"role": "user", "content": "Hi"}], stream=True):
    ...     print(part.message.content, end="", flush=True)
    """

    def __init__(self, host: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: Union[float, httpx.Timeout, None] = DEFAULT_TIMEOUT, **httpx_args):
        self._base, self._socket = _base_url(host)
        transport = httpx.HTTPTransport(uds=self._socket) if self._socket else None
        self._http = httpx.Client(base_url=self._base, timeout=timeout, transport=transport,
                                  headers=_headers(api_key or os.environ.get("MLXR_API_KEY")), **httpx_args)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _send(self, call: _Call) -> httpx.Response:
        request = self._http.build_request(call.method, call.path, json=call.body)
        try:
            response = self._http.send(request, stream=True)
        except httpx.TransportError as e:
            raise _connect_error(self._base, self._socket, e) from e
        if response.is_error:
            response.read()
            response.close()
            raise ResponseError(response.status_code, _error_message(response.status_code, response.text))
        return response

    def _run(self, call: _Call):
        response = self._send(call)
        if call.kind == "stream":
            return self._stream(response, call.result)
        try:
            if call.kind == "progress":
                last = None
                for line in response.iter_lines():
                    data = _line(line)
                    if data is not None:
                        last = call.result(data)
                        if call.progress:
                            call.progress(last)
                return last
            response.read()
            if call.kind == "none":
                return None
            return call.result(response.json())
        finally:
            response.close()

    @staticmethod
    def _stream(response: httpx.Response, result) -> Iterator:
        try:
            for line in response.iter_lines():
                data = _line(line)
                if data is not None:
                    yield result(data)
        finally:
            response.close()

    def chat(self, model: str, messages: Sequence[Any], stream: bool = False, **options) -> Any:
        """A reply to `messages` (dicts with `role` and `content`, or earlier
        replies' `Message`s) from `/api/chat`.

        Request fields are keyword arguments: `tools` (OpenAI-style function
        definitions), `format` (`"json"` or a JSON schema), `keep_alive`,
        `template`, `logprobs`, `top_logprobs`, `grammar`; every other
        keyword is a model option (`temperature`, `seed`, `num_predict`,
        `top_k`, `top_p`, `stop`, `num_ctx`, ...), or pass them as
        `options={...}`. With `stream=True` the reply comes as an iterator of
        `ChatResponse` pieces; the request is sent (and an error raised)
        before the iterator is returned.

        >>> r = client.chat("smollm2", [{"role": "user", "content": "Name a colour"}],
        ...                 format={"type": "object", "properties": {"colour": {"type": "string"}}},
        ...                 temperature=0, seed=1)
        >>> json.loads(r.message.content)["colour"]
        """
        return self._run(self._chat(model, messages, stream, options))

    def generate(self, model: str, prompt: str = "", stream: bool = False, **options) -> Any:
        """A completion of `prompt` from `/api/generate` (through the model's
        chat template unless `raw=True`). Besides `chat`'s keywords (less
        `tools`): `system`, `suffix`, `context` (an earlier reply's), `raw`.

        >>> client.generate("smollm2", "Why is the sky blue?", num_predict=32).response
        """
        return self._run(self._generate(model, prompt, stream, options))

    def embed(self, model: str, input: Union[str, Sequence[str]], truncate: Optional[bool] = None,
              dimensions: Optional[int] = None, keep_alive: Any = None) -> EmbedResponse:
        """Embeddings of one text or several (`/api/embed`).

        >>> client.embed("all-minilm", ["a cat", "a dog"]).embeddings[1][:3]
        """
        return self._run(self._embed(model, input, truncate, dimensions, keep_alive))

    def list(self) -> ListResponse:
        """The models the daemon can serve (`/api/tags`).

        >>> [m.model for m in client.list().models]
        """
        return self._run(_Call("GET", "/api/tags", result=ListResponse.from_json))

    def ps(self) -> ProcessResponse:
        """The models loaded now (`/api/ps`)."""
        return self._run(_Call("GET", "/api/ps", result=ProcessResponse.from_json))

    def show(self, model: str) -> ShowResponse:
        """A model's Modelfile, template, parameters and metadata (`/api/show`)."""
        return self._run(_Call("POST", "/api/show", {"model": model}, result=ShowResponse.from_json))

    def pull(self, model: str, progress: Optional[Progress] = None) -> ProgressResponse:
        """Pulls `model` (`smollm2:135m`, `hf.co/ORG/REPO[:QUANT]`, an https
        URL) into the daemon's registry; `progress` gets every
        `ProgressResponse` line as the daemon streams it. Returns the last
        (`status == "success"`); a failed download raises `ResponseError`.

        >>> def show(p):
        ...     if p.total:
        ...         print(f"{p.status}: {p.completed}/{p.total}")
        >>> client.pull("smollm2:135m", progress=show)
        """
        return self._run(self._pull(model, progress))

    def create(self, model: str, from_: Optional[str] = None, *, files: Optional[dict] = None,
               template: Optional[str] = None, system: Optional[str] = None,
               parameters: Optional[dict] = None, messages: Optional[list] = None,
               license: Any = None, quantize: Optional[str] = None,
               progress: Optional[Progress] = None) -> ProgressResponse:
        """Creates `model` from another model (`from_`) or from uploaded
        blobs (`files`: name -> `sha256:...` digest), with a template
        (Jinja), system prompt, parameters, messages and license, as a
        Modelfile would (`/api/create`).

        >>> client.create("pirate", from_="smollm2:135m", system="Talk like a pirate.",
        ...               parameters={"temperature": 0.7})
        """
        fields = dict(from_=from_, files=files, template=template, system=system, parameters=parameters,
                      messages=messages, license=license, quantize=quantize)
        return self._run(self._create(model, progress, fields))

    def copy(self, source: str, destination: str) -> None:
        """Copies a registry model under a new name (`/api/copy`)."""
        self._run(_Call("POST", "/api/copy", {"source": source, "destination": destination}, "none"))

    def delete(self, model: str) -> None:
        """Deletes a registry model (`DELETE /api/delete`); its blobs go when
        no other model uses them."""
        self._run(_Call("DELETE", "/api/delete", {"model": model}, "none"))

    def version(self) -> str:
        """The daemon's version (`/api/version`)."""
        return self._run(_Call("GET", "/api/version", result=lambda d: d["version"]))


class AsyncClient(_Calls):
    """`Client`'s methods as coroutines; streams are async iterators.

    >>> client = mlxr.AsyncClient()
    >>> async for part in await client.chat("smollm2", messages, stream=True):
    ...     print(part.message.content, end="")
    """

    def __init__(self, host: Optional[str] = None, api_key: Optional[str] = None,
                 timeout: Union[float, httpx.Timeout, None] = DEFAULT_TIMEOUT, **httpx_args):
        self._base, self._socket = _base_url(host)
        transport = httpx.AsyncHTTPTransport(uds=self._socket) if self._socket else None
        self._http = httpx.AsyncClient(base_url=self._base, timeout=timeout, transport=transport,
                                       headers=_headers(api_key or os.environ.get("MLXR_API_KEY")), **httpx_args)

    async def close(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.close()

    async def _send(self, call: _Call) -> httpx.Response:
        request = self._http.build_request(call.method, call.path, json=call.body)
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as e:
            raise _connect_error(self._base, self._socket, e) from e
        if response.is_error:
            await response.aread()
            await response.aclose()
            raise ResponseError(response.status_code, _error_message(response.status_code, response.text))
        return response

    async def _run(self, call: _Call):
        response = await self._send(call)
        if call.kind == "stream":
            return self._stream(response, call.result)
        try:
            if call.kind == "progress":
                last = None
                async for line in response.aiter_lines():
                    data = _line(line)
                    if data is not None:
                        last = call.result(data)
                        if call.progress:
                            call.progress(last)
                return last
            await response.aread()
            if call.kind == "none":
                return None
            return call.result(response.json())
        finally:
            await response.aclose()

    @staticmethod
    async def _stream(response: httpx.Response, result) -> AsyncIterator:
        try:
            async for line in response.aiter_lines():
                data = _line(line)
                if data is not None:
                    yield result(data)
        finally:
            await response.aclose()

    async def chat(self, model: str, messages: Sequence[Any], stream: bool = False, **options) -> Any:
        """See `Client.chat`; with `stream=True`, `async for part in await client.chat(...)`."""
        return await self._run(self._chat(model, messages, stream, options))

    async def generate(self, model: str, prompt: str = "", stream: bool = False, **options) -> Any:
        """See `Client.generate`."""
        return await self._run(self._generate(model, prompt, stream, options))

    async def embed(self, model: str, input: Union[str, Sequence[str]], truncate: Optional[bool] = None,
                    dimensions: Optional[int] = None, keep_alive: Any = None) -> EmbedResponse:
        """See `Client.embed`."""
        return await self._run(self._embed(model, input, truncate, dimensions, keep_alive))

    async def list(self) -> ListResponse:
        return await self._run(_Call("GET", "/api/tags", result=ListResponse.from_json))

    async def ps(self) -> ProcessResponse:
        return await self._run(_Call("GET", "/api/ps", result=ProcessResponse.from_json))

    async def show(self, model: str) -> ShowResponse:
        return await self._run(_Call("POST", "/api/show", {"model": model}, result=ShowResponse.from_json))

    async def pull(self, model: str, progress: Optional[Progress] = None) -> ProgressResponse:
        """See `Client.pull`; `progress` is a plain (not async) callback."""
        return await self._run(self._pull(model, progress))

    async def create(self, model: str, from_: Optional[str] = None, *, files: Optional[dict] = None,
                     template: Optional[str] = None, system: Optional[str] = None,
                     parameters: Optional[dict] = None, messages: Optional[list] = None,
                     license: Any = None, quantize: Optional[str] = None,
                     progress: Optional[Progress] = None) -> ProgressResponse:
        """See `Client.create`."""
        fields = dict(from_=from_, files=files, template=template, system=system, parameters=parameters,
                      messages=messages, license=license, quantize=quantize)
        return await self._run(self._create(model, progress, fields))

    async def copy(self, source: str, destination: str) -> None:
        await self._run(_Call("POST", "/api/copy", {"source": source, "destination": destination}, "none"))

    async def delete(self, model: str) -> None:
        await self._run(_Call("DELETE", "/api/delete", {"model": model}, "none"))

    async def version(self) -> str:
        return await self._run(_Call("GET", "/api/version", result=lambda d: d["version"]))
