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
