//! Running one request on an engine from async code, shared by both APIs:
//! the one loop over a request's events ([`pieces`]) that every wire format
//! writes out, streamed or collected.

use futures_util::{Stream, StreamExt};
use mlxr_engine::{
    EngineHandle, Event, FinishReason, GenerateRequest, RequestStream, Timings, TokenId,
    TokenLogprob, Usage,
};

use crate::error::ApiError;
use crate::tools::{self, ReplyCall, ToolReader};

/// Tokenizes and submits on a blocking thread (templating and tokenizing a
/// long prompt takes milliseconds).
pub async fn submit(
    engine: &EngineHandle,
    req: GenerateRequest,
) -> Result<RequestStream, ApiError> {
    let engine = engine.clone();
    tokio::task::spawn_blocking(move || engine.submit(&req))
        .await
        .map_err(|e| ApiError::internal(format!("submitting the request panicked: {e}")))?
        .map_err(ApiError::from)
}

/// One piece of a reply, in the order a client gets them.
pub enum Piece {
    /// A generated token: the text that became final with it (often empty
    /// while text is held back), and its logprobs when they were asked for.
    Token {
        id: TokenId,
        text: String,
        logprob: Option<(TokenLogprob, Vec<TokenLogprob>)>,
    },
    /// Text released at the end (held back for stop strings, or a tool
    /// call's tag that turned out to be text).
    Text(String),
    /// A tool call, whole.
    Call(ReplyCall),
    Done {
        finish_reason: FinishReason,
        /// The reply made tool calls.
        called: bool,
        usage: Usage,
        timings: Timings,
    },
    /// The request failed after it started; nothing follows.
    Error(String),
}

impl Piece {
    /// OpenAI's finish reason: `tool_calls` when the reply made calls.
    pub fn openai_finish(finish_reason: FinishReason, called: bool) -> &'static str {
        if called {
            "tool_calls"
        } else {
            finish_reason_str(finish_reason)
        }
    }
}

/// The reply's pieces: the engine's events with tool calls read out of the
/// text when the request has tools (`reader`). Ends after `Done` or `Error`.
pub fn pieces(
    mut stream: RequestStream,
    mut reader: Option<ToolReader>,
) -> impl Stream<Item = Piece> + Send {
    async_stream::stream! {
        while let Some(event) = stream.next().await {
            match event {
                Event::Token(t) => {
                    let read = tools::read(&mut reader, &t.text, false);
                    let logprob = t.logprob.map(|c| (c, t.top_logprobs));
                    yield Piece::Token { id: t.id, text: read.text, logprob };
                    for call in read.calls {
                        yield Piece::Call(call);
                    }
                }
                Event::Done { finish_reason, text, usage, timings } => {
                    let read = tools::read(&mut reader, &text, true);
                    if !read.text.is_empty() {
                        yield Piece::Text(read.text);
                    }
                    for call in read.calls {
                        yield Piece::Call(call);
                    }
                    let called = reader.as_ref().is_some_and(ToolReader::called);
                    yield Piece::Done { finish_reason, called, usage, timings };
                    return;
                }
                Event::Error(message) => {
                    yield Piece::Error(message);
                    return;
                }
            }
        }
        yield Piece::Error("the engine stopped before the request finished".to_owned());
    }
}

/// A whole reply, for non-streaming responses.
#[derive(Default)]
pub struct Collected {
    pub text: String,
    pub tokens: Vec<u32>,
    pub logprobs: Vec<(TokenLogprob, Vec<TokenLogprob>)>,
    pub calls: Vec<ReplyCall>,
    pub finish_reason: Option<FinishReason>,
    pub called: bool,
    pub usage: Usage,
    pub timings: Timings,
}

pub async fn collect(
    stream: RequestStream,
    reader: Option<ToolReader>,
) -> Result<Collected, ApiError> {
    let mut out = Collected::default();
    let mut pieces = std::pin::pin!(pieces(stream, reader));
    while let Some(piece) = pieces.next().await {
        match piece {
            Piece::Token { id, text, logprob } => {
                out.text.push_str(&text);
                out.tokens.push(id);
                out.logprobs.extend(logprob);
            }
            Piece::Text(text) => out.text.push_str(&text),
            Piece::Call(call) => out.calls.push(call),
            Piece::Done {
                finish_reason,
                called,
                usage,
                timings,
            } => {
                out.finish_reason = Some(finish_reason);
                out.called = called;
                out.usage = usage;
                out.timings = timings;
                return Ok(out);
            }
            Piece::Error(message) => return Err(ApiError::internal(message)),
        }
    }
    Err(ApiError::internal(
        "the engine stopped before the request finished",
    ))
}

pub fn finish_reason_str(reason: FinishReason) -> &'static str {
    match reason {
        FinishReason::Stop | FinishReason::Cancelled => "stop",
        FinishReason::Length => "length",
    }
}
