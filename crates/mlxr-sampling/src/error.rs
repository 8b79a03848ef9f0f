use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq)]
pub enum SamplingError {
    /// A [`crate::SamplingParams`] field is out of its range.
    #[error("invalid sampling parameter `{field}`: {reason}")]
    InvalidParam { field: &'static str, reason: String },
}

impl SamplingError {
    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        SamplingError::InvalidParam {
            field,
            reason: reason.into(),
        }
    }
}
