//! A minijinja environment configured like transformers' chat-template
//! environment (`_compile_jinja_template`).

use minijinja::syntax::SyntaxConfig;
use minijinja::{AutoEscape, Environment, Error, Output, State, UndefinedBehavior, Value};

use crate::functions::{raise_exception, string_filter, trim_filter};
use crate::pyfmt::py_str;
use crate::pyjson::tojson;
use crate::tests_jinja::{is_iterable, is_sequence};

pub(crate) fn hf_environment() -> Result<Environment<'static>, Error> {
    let mut env = Environment::new();
    // trim_blocks + lstrip_blocks as transformers sets them; Jinja2's default
    // keep_trailing_newline=False, which transformers leaves alone.
    env.set_syntax(
        SyntaxConfig::builder()
            .trim_blocks(true)
            .lstrip_blocks(true)
            .keep_trailing_newline(false)
            .build()?,
    );
    env.set_undefined_behavior(UndefinedBehavior::Lenient);
    env.set_auto_escape_callback(|_| AutoEscape::None);
    env.set_formatter(python_formatter);
    env.set_unknown_method_callback(minijinja_contrib::pycompat::unknown_method_callback);
    env.add_filter("tojson", tojson);
    env.add_filter("string", string_filter);
    env.add_filter("trim", trim_filter);
    env.add_test("sequence", is_sequence);
    env.add_test("iterable", is_iterable);
    env.add_function("raise_exception", raise_exception);
    Ok(env)
}

/// Prints `{{ value }}` the way Jinja2 does: with Python's `str()`.
fn python_formatter(out: &mut Output, _state: &mut State, value: &Value) -> Result<(), Error> {
    if let Some(s) = value.as_str() {
        return out.write_str(s).map_err(Error::from);
    }
    out.write_str(&py_str(value)).map_err(Error::from)
}
