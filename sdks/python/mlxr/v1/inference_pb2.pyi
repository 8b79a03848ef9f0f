from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_STOP: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
    FINISH_REASON_TOOL_CALLS: _ClassVar[FinishReason]
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_STOP: FinishReason
FINISH_REASON_LENGTH: FinishReason
FINISH_REASON_TOOL_CALLS: FinishReason

class Options(_message.Message):
    __slots__ = ("temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "presence_penalty", "frequency_penalty", "seed", "num_predict", "stop", "num_ctx", "speculation")
    TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    TOP_K_FIELD_NUMBER: _ClassVar[int]
    TOP_P_FIELD_NUMBER: _ClassVar[int]
    MIN_P_FIELD_NUMBER: _ClassVar[int]
    REPEAT_PENALTY_FIELD_NUMBER: _ClassVar[int]
    REPEAT_LAST_N_FIELD_NUMBER: _ClassVar[int]
    PRESENCE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    FREQUENCY_PENALTY_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    NUM_PREDICT_FIELD_NUMBER: _ClassVar[int]
    STOP_FIELD_NUMBER: _ClassVar[int]
    NUM_CTX_FIELD_NUMBER: _ClassVar[int]
    SPECULATION_FIELD_NUMBER: _ClassVar[int]
    temperature: float
    top_k: int
    top_p: float
    min_p: float
    repeat_penalty: float
    repeat_last_n: int
    presence_penalty: float
    frequency_penalty: float
    seed: int
    num_predict: int
    stop: _containers.RepeatedScalarFieldContainer[str]
    num_ctx: int
    speculation: Speculation
    def __init__(self, temperature: _Optional[float] = ..., top_k: _Optional[int] = ..., top_p: _Optional[float] = ..., min_p: _Optional[float] = ..., repeat_penalty: _Optional[float] = ..., repeat_last_n: _Optional[int] = ..., presence_penalty: _Optional[float] = ..., frequency_penalty: _Optional[float] = ..., seed: _Optional[int] = ..., num_predict: _Optional[int] = ..., stop: _Optional[_Iterable[str]] = ..., num_ctx: _Optional[int] = ..., speculation: _Optional[_Union[Speculation, _Mapping]] = ...) -> None: ...

class Speculation(_message.Message):
    __slots__ = ("type", "n_max", "n_min", "p_min", "ngram_min", "ngram_max", "draft_length")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    N_MAX_FIELD_NUMBER: _ClassVar[int]
    N_MIN_FIELD_NUMBER: _ClassVar[int]
    P_MIN_FIELD_NUMBER: _ClassVar[int]
    NGRAM_MIN_FIELD_NUMBER: _ClassVar[int]
    NGRAM_MAX_FIELD_NUMBER: _ClassVar[int]
    DRAFT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    type: str
    n_max: int
    n_min: int
    p_min: float
    ngram_min: int
    ngram_max: int
    draft_length: str
    def __init__(self, type: _Optional[str] = ..., n_max: _Optional[int] = ..., n_min: _Optional[int] = ..., p_min: _Optional[float] = ..., ngram_min: _Optional[int] = ..., ngram_max: _Optional[int] = ..., draft_length: _Optional[str] = ...) -> None: ...

class Format(_message.Message):
    __slots__ = ("json_object", "json_schema", "regex", "lark")
    JSON_OBJECT_FIELD_NUMBER: _ClassVar[int]
    JSON_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    REGEX_FIELD_NUMBER: _ClassVar[int]
    LARK_FIELD_NUMBER: _ClassVar[int]
    json_object: bool
    json_schema: str
    regex: str
    lark: str
    def __init__(self, json_object: _Optional[bool] = ..., json_schema: _Optional[str] = ..., regex: _Optional[str] = ..., lark: _Optional[str] = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ("model", "prompt", "system", "raw", "options", "format", "keep_alive", "logprobs", "top_logprobs")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    model: str
    prompt: str
    system: str
    raw: bool
    options: Options
    format: Format
    keep_alive: str
    logprobs: bool
    top_logprobs: int
    def __init__(self, model: _Optional[str] = ..., prompt: _Optional[str] = ..., system: _Optional[str] = ..., raw: _Optional[bool] = ..., options: _Optional[_Union[Options, _Mapping]] = ..., format: _Optional[_Union[Format, _Mapping]] = ..., keep_alive: _Optional[str] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ("id", "name", "arguments_json")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ARGUMENTS_JSON_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    arguments_json: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments_json: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ("role", "content", "tool_calls", "tool_call_id", "tool_name")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    role: str
    content: str
    tool_calls: _containers.RepeatedCompositeFieldContainer[ToolCall]
    tool_call_id: str
    tool_name: str
    def __init__(self, role: _Optional[str] = ..., content: _Optional[str] = ..., tool_calls: _Optional[_Iterable[_Union[ToolCall, _Mapping]]] = ..., tool_call_id: _Optional[str] = ..., tool_name: _Optional[str] = ...) -> None: ...

class Tool(_message.Message):
    __slots__ = ("name", "description", "parameters_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    description: str
    parameters_json: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters_json: _Optional[str] = ...) -> None: ...

class ChatRequest(_message.Message):
    __slots__ = ("model", "messages", "tools", "options", "format", "keep_alive", "logprobs", "top_logprobs", "tool_choice", "parallel_tool_calls")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    TOOL_CHOICE_FIELD_NUMBER: _ClassVar[int]
    PARALLEL_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    model: str
    messages: _containers.RepeatedCompositeFieldContainer[Message]
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    options: Options
    format: Format
    keep_alive: str
    logprobs: bool
    top_logprobs: int
    tool_choice: str
    parallel_tool_calls: bool
    def __init__(self, model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[Message, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., options: _Optional[_Union[Options, _Mapping]] = ..., format: _Optional[_Union[Format, _Mapping]] = ..., keep_alive: _Optional[str] = ..., logprobs: _Optional[bool] = ..., top_logprobs: _Optional[int] = ..., tool_choice: _Optional[str] = ..., parallel_tool_calls: _Optional[bool] = ...) -> None: ...

class TokenLogprob(_message.Message):
    __slots__ = ("token", "logprob")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    token: str
    logprob: float
    def __init__(self, token: _Optional[str] = ..., logprob: _Optional[float] = ...) -> None: ...

class Token(_message.Message):
    __slots__ = ("id", "text", "logprob", "top_logprobs")
    ID_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    LOGPROB_FIELD_NUMBER: _ClassVar[int]
    TOP_LOGPROBS_FIELD_NUMBER: _ClassVar[int]
    id: int
    text: str
    logprob: TokenLogprob
    top_logprobs: _containers.RepeatedCompositeFieldContainer[TokenLogprob]
    def __init__(self, id: _Optional[int] = ..., text: _Optional[str] = ..., logprob: _Optional[_Union[TokenLogprob, _Mapping]] = ..., top_logprobs: _Optional[_Iterable[_Union[TokenLogprob, _Mapping]]] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ("prompt_tokens", "completion_tokens", "cached_tokens")
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    def __init__(self, prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cached_tokens: _Optional[int] = ...) -> None: ...

class Timings(_message.Message):
    __slots__ = ("load_ms", "ttft_ms", "prompt_n", "prompt_ms", "predicted_n", "predicted_ms", "draft_n", "draft_n_accepted")
    LOAD_MS_FIELD_NUMBER: _ClassVar[int]
    TTFT_MS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_N_FIELD_NUMBER: _ClassVar[int]
    PROMPT_MS_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_N_FIELD_NUMBER: _ClassVar[int]
    PREDICTED_MS_FIELD_NUMBER: _ClassVar[int]
    DRAFT_N_FIELD_NUMBER: _ClassVar[int]
    DRAFT_N_ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    load_ms: float
    ttft_ms: float
    prompt_n: int
    prompt_ms: float
    predicted_n: int
    predicted_ms: float
    draft_n: int
    draft_n_accepted: int
    def __init__(self, load_ms: _Optional[float] = ..., ttft_ms: _Optional[float] = ..., prompt_n: _Optional[int] = ..., prompt_ms: _Optional[float] = ..., predicted_n: _Optional[int] = ..., predicted_ms: _Optional[float] = ..., draft_n: _Optional[int] = ..., draft_n_accepted: _Optional[int] = ...) -> None: ...

class Done(_message.Message):
    __slots__ = ("finish_reason", "usage", "timings")
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    TIMINGS_FIELD_NUMBER: _ClassVar[int]
    finish_reason: FinishReason
    usage: Usage
    timings: Timings
    def __init__(self, finish_reason: _Optional[_Union[FinishReason, str]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., timings: _Optional[_Union[Timings, _Mapping]] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("token", "text", "tool_call", "done")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    DONE_FIELD_NUMBER: _ClassVar[int]
    token: Token
    text: str
    tool_call: ToolCall
    done: Done
    def __init__(self, token: _Optional[_Union[Token, _Mapping]] = ..., text: _Optional[str] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., done: _Optional[_Union[Done, _Mapping]] = ...) -> None: ...

class EmbedRequest(_message.Message):
    __slots__ = ("model", "input", "truncate", "dimensions", "keep_alive")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    TRUNCATE_FIELD_NUMBER: _ClassVar[int]
    DIMENSIONS_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    model: str
    input: _containers.RepeatedScalarFieldContainer[str]
    truncate: bool
    dimensions: int
    keep_alive: str
    def __init__(self, model: _Optional[str] = ..., input: _Optional[_Iterable[str]] = ..., truncate: _Optional[bool] = ..., dimensions: _Optional[int] = ..., keep_alive: _Optional[str] = ...) -> None: ...

class Embedding(_message.Message):
    __slots__ = ("values",)
    VALUES_FIELD_NUMBER: _ClassVar[int]
    values: _containers.RepeatedScalarFieldContainer[float]
    def __init__(self, values: _Optional[_Iterable[float]] = ...) -> None: ...

class EmbedResponse(_message.Message):
    __slots__ = ("model", "embeddings", "prompt_tokens")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    EMBEDDINGS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    model: str
    embeddings: _containers.RepeatedCompositeFieldContainer[Embedding]
    prompt_tokens: int
    def __init__(self, model: _Optional[str] = ..., embeddings: _Optional[_Iterable[_Union[Embedding, _Mapping]]] = ..., prompt_tokens: _Optional[int] = ...) -> None: ...

class TokenizeRequest(_message.Message):
    __slots__ = ("model", "text", "add_special", "parse_special")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ADD_SPECIAL_FIELD_NUMBER: _ClassVar[int]
    PARSE_SPECIAL_FIELD_NUMBER: _ClassVar[int]
    model: str
    text: str
    add_special: bool
    parse_special: bool
    def __init__(self, model: _Optional[str] = ..., text: _Optional[str] = ..., add_special: _Optional[bool] = ..., parse_special: _Optional[bool] = ...) -> None: ...

class TokenizeResponse(_message.Message):
    __slots__ = ("ids",)
    IDS_FIELD_NUMBER: _ClassVar[int]
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, ids: _Optional[_Iterable[int]] = ...) -> None: ...

class DetokenizeRequest(_message.Message):
    __slots__ = ("model", "ids")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    IDS_FIELD_NUMBER: _ClassVar[int]
    model: str
    ids: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, model: _Optional[str] = ..., ids: _Optional[_Iterable[int]] = ...) -> None: ...

class DetokenizeResponse(_message.Message):
    __slots__ = ("text",)
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelDetails(_message.Message):
    __slots__ = ("format", "family", "parameter_size", "quantization_level")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    FAMILY_FIELD_NUMBER: _ClassVar[int]
    PARAMETER_SIZE_FIELD_NUMBER: _ClassVar[int]
    QUANTIZATION_LEVEL_FIELD_NUMBER: _ClassVar[int]
    format: str
    family: str
    parameter_size: str
    quantization_level: str
    def __init__(self, format: _Optional[str] = ..., family: _Optional[str] = ..., parameter_size: _Optional[str] = ..., quantization_level: _Optional[str] = ...) -> None: ...

class Model(_message.Message):
    __slots__ = ("name", "size", "digest", "modified_at", "details")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_AT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    digest: str
    modified_at: str
    details: ModelDetails
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., digest: _Optional[str] = ..., modified_at: _Optional[str] = ..., details: _Optional[_Union[ModelDetails, _Mapping]] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[Model]
    def __init__(self, models: _Optional[_Iterable[_Union[Model, _Mapping]]] = ...) -> None: ...

class ListRunningRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RunningModel(_message.Message):
    __slots__ = ("name", "size", "digest", "details", "expires_at", "context_length", "device")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_LENGTH_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    name: str
    size: int
    digest: str
    details: ModelDetails
    expires_at: str
    context_length: int
    device: str
    def __init__(self, name: _Optional[str] = ..., size: _Optional[int] = ..., digest: _Optional[str] = ..., details: _Optional[_Union[ModelDetails, _Mapping]] = ..., expires_at: _Optional[str] = ..., context_length: _Optional[int] = ..., device: _Optional[str] = ...) -> None: ...

class ListRunningResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[RunningModel]
    def __init__(self, models: _Optional[_Iterable[_Union[RunningModel, _Mapping]]] = ...) -> None: ...

class LoadModelRequest(_message.Message):
    __slots__ = ("model", "keep_alive")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    KEEP_ALIVE_FIELD_NUMBER: _ClassVar[int]
    model: str
    keep_alive: str
    def __init__(self, model: _Optional[str] = ..., keep_alive: _Optional[str] = ...) -> None: ...

class LoadModelResponse(_message.Message):
    __slots__ = ("load_ms",)
    LOAD_MS_FIELD_NUMBER: _ClassVar[int]
    load_ms: float
    def __init__(self, load_ms: _Optional[float] = ...) -> None: ...

class UnloadModelRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class UnloadModelResponse(_message.Message):
    __slots__ = ("unloaded",)
    UNLOADED_FIELD_NUMBER: _ClassVar[int]
    unloaded: bool
    def __init__(self, unloaded: _Optional[bool] = ...) -> None: ...

class ShowModelRequest(_message.Message):
    __slots__ = ("model", "verbose")
    MODEL_FIELD_NUMBER: _ClassVar[int]
    VERBOSE_FIELD_NUMBER: _ClassVar[int]
    model: str
    verbose: bool
    def __init__(self, model: _Optional[str] = ..., verbose: _Optional[bool] = ...) -> None: ...

class ShowModelResponse(_message.Message):
    __slots__ = ("modelfile", "parameters", "template", "system", "license", "details", "capabilities", "model_info_json", "modified_at", "device")
    MODELFILE_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    TEMPLATE_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_FIELD_NUMBER: _ClassVar[int]
    LICENSE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    MODEL_INFO_JSON_FIELD_NUMBER: _ClassVar[int]
    MODIFIED_AT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    modelfile: str
    parameters: str
    template: str
    system: str
    license: str
    details: ModelDetails
    capabilities: _containers.RepeatedScalarFieldContainer[str]
    model_info_json: str
    modified_at: str
    device: str
    def __init__(self, modelfile: _Optional[str] = ..., parameters: _Optional[str] = ..., template: _Optional[str] = ..., system: _Optional[str] = ..., license: _Optional[str] = ..., details: _Optional[_Union[ModelDetails, _Mapping]] = ..., capabilities: _Optional[_Iterable[str]] = ..., model_info_json: _Optional[str] = ..., modified_at: _Optional[str] = ..., device: _Optional[str] = ...) -> None: ...

class PullModelRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class PullProgress(_message.Message):
    __slots__ = ("status", "digest", "total", "completed")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    status: str
    digest: str
    total: int
    completed: int
    def __init__(self, status: _Optional[str] = ..., digest: _Optional[str] = ..., total: _Optional[int] = ..., completed: _Optional[int] = ...) -> None: ...

class DeleteModelRequest(_message.Message):
    __slots__ = ("model",)
    MODEL_FIELD_NUMBER: _ClassVar[int]
    model: str
    def __init__(self, model: _Optional[str] = ...) -> None: ...

class DeleteModelResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
