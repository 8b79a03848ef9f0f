//! Request errors and how each API spells them: OpenAI's
//! `{"error": {"message", "type", "param", "code"}}` and Ollama's
//! `{"error": "..."}`, both with a real HTTP status.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use mlxr_engine::EngineError;
use serde_json::json;

#[derive(Debug, Clone)]
pub struct ApiError {
    pub status: StatusCode,
    pub message: String,
    /// OpenAI's machine-readable `code`, e.g. `context_length_exceeded`.
    pub code: Option<&'static str>,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            code: None,
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, message)
    }

    pub fn model_not_found(name: &str) -> Self {
        Self::not_found(format!("model '{name}' not found"))
    }

    /// OpenAI's error `type` for this status.
    pub fn openai_type(&self) -> &'static str {
        match self.status.as_u16() {
            400 | 413 | 415 | 422 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            503 => "unavailable_error",
            _ => "server_error",
        }
    }

    pub fn openai_body(&self) -> serde_json::Value {
        json!({"error": {
            "message": self.message,
            "type": self.openai_type(),
            "param": null,
            "code": self.code,
        }})
    }

    pub fn ollama_body(&self) -> serde_json::Value {
        json!({ "error": self.message })
    }

    /// The response in the shape of the API `path` belongs to (Ollama's
    /// under `/api/`, OpenAI's elsewhere), for code that runs before a
    /// handler picks its shape: middleware, extractors, the fallback.
    pub fn for_path(&self, path: &str) -> Response {
        let body = if path.starts_with("/api/") {
            self.ollama_body()
        } else {
            self.openai_body()
        };
        (self.status, Json(body)).into_response()
    }
}

/// Engine errors a request can cause map to 400; the rest are ours (500).
impl From<EngineError> for ApiError {
    fn from(e: EngineError) -> Self {
        let message = e.to_string();
        match e {
            EngineError::PromptTooLong { .. } | EngineError::RequestTooLong { .. } => Self {
                status: StatusCode::BAD_REQUEST,
                message,
                code: Some("context_length_exceeded"),
            },
            EngineError::EmptyPrompt
            | EngineError::InvalidToken { .. }
            | EngineError::LogitBiasToken { .. }
            | EngineError::Sampling(_)
            | EngineError::Speculation(_)
            | EngineError::Template(_)
            | EngineError::Constraint(mlxr_structured::StructuredError::Invalid { .. }) => {
                Self::bad_request(message)
            }
            _ => Self::internal(message),
        }
    }
}

/// An error answered in OpenAI's shape.
pub struct OpenAiError(pub ApiError);

impl IntoResponse for OpenAiError {
    fn into_response(self) -> Response {
        (self.0.status, Json(self.0.openai_body())).into_response()
    }
}

impl From<ApiError> for OpenAiError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}

/// An error answered in Ollama's shape.
pub struct OllamaError(pub ApiError);

impl IntoResponse for OllamaError {
    fn into_response(self) -> Response {
        (self.0.status, Json(self.0.ollama_body())).into_response()
    }
}

impl From<ApiError> for OllamaError {
    fn from(e: ApiError) -> Self {
        Self(e)
    }
}
