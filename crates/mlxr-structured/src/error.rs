/// Why a constraint cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum StructuredError {
    /// The schema, regex or grammar does not compile (the request's fault).
    #[error("{what}: {message}")]
    Invalid { what: &'static str, message: String },
    /// The parser failed while generating (limits exceeded, internal error).
    #[error("grammar: {0}")]
    Matcher(String),
}
