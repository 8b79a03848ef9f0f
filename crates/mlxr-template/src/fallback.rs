/// The format used for models that ship no chat template.
///
/// Each message becomes `Role: content` on its own line, the role capitalised
/// (`System:`, `User:`, `Assistant:`, any other role as given with its first
/// letter upper-cased); with `add_generation_prompt` a final `Assistant:`
/// line (no trailing space) invites the model to answer:
///
/// ```text
/// System: You are terse.
/// User: Hi
/// Assistant:
/// ```
pub(crate) const FALLBACK_TEMPLATE: &str = "\
{%- for message in messages %}
{{- message.role[:1] | upper }}{{ message.role[1:] }}: {{ message.content }}
{% endfor %}
{%- if add_generation_prompt %}Assistant:{% endif %}";
