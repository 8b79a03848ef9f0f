use thiserror::Error;

/// What went wrong compiling or rendering a chat template.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum TemplateError {
    /// The template text is not valid Jinja (as far as minijinja can parse it).
    #[error("chat template does not compile{}: {message}", at_line(*.line))]
    Syntax {
        message: String,
        line: Option<usize>,
    },
    /// The template called `raise_exception(message)`, usually because the
    /// conversation breaks one of the model's rules (roles must alternate...).
    #[error("chat template raised an exception: {0}")]
    Raised(String),
    /// The template source is longer than the limit.
    #[error("chat template is {bytes} bytes; at most {max} bytes are accepted")]
    TooLarge { bytes: usize, max: usize },
    /// The render did more work than its fuel allows (a runaway loop, or
    /// text built up without bound).
    #[error("chat template ran out of fuel (a budget of {fuel} steps): it loops or builds text without bound")]
    OutOfFuel { fuel: u64 },
    /// The rendered prompt is longer than the limit.
    #[error("chat template rendered more than {max} bytes")]
    OutputTooLarge { max: usize },
    /// Rendering failed for another reason (a type error, a missing method...).
    #[error("chat template failed to render{}: {message}", at_line(*.line))]
    Render {
        message: String,
        line: Option<usize>,
    },
}

fn at_line(line: Option<usize>) -> String {
    line.map(|l| format!(" at line {l}")).unwrap_or_default()
}
