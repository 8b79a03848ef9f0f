//! transformers' `{% generation %}...{% endgeneration %}` tag only marks
//! assistant text for training masks; it renders its body unchanged. minijinja
//! has no such tag, so it is rewritten to an always-true `if` block, which
//! keeps the tag's whitespace control (`{%-`, `-%}`) and line-trimming.

pub(crate) fn rewrite_generation_tags(source: &str) -> Option<String> {
    if !source.contains("generation") {
        return None;
    }
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    let mut changed = false;
    while let Some(start) = rest.find("{%") {
        let (before, tag) = rest.split_at(start);
        out.push_str(before);
        let body_start = 2 + usize::from(tag[2..].starts_with(['-', '+']));
        let keyword_start =
            body_start + (tag[body_start..].len() - tag[body_start..].trim_start().len());
        let after_keyword = &tag[keyword_start..];
        let replacement = [("endgeneration", "endif"), ("generation", "if true")]
            .into_iter()
            .find(|(keyword, _)| {
                after_keyword.starts_with(keyword)
                    && after_keyword[keyword.len()..]
                        .trim_start()
                        .trim_start_matches(['-', '+'])
                        .starts_with("%}")
            });
        match replacement {
            Some((keyword, with)) => {
                out.push_str(&tag[..keyword_start]);
                out.push_str(with);
                rest = &tag[keyword_start + keyword.len()..];
                changed = true;
            }
            None => {
                out.push_str("{%");
                rest = &tag[2..];
            }
        }
    }
    out.push_str(rest);
    changed.then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rewrites_only_generation_tags() {
        let src = "{% for m in messages %}{%- generation -%}{{ m }}{% endgeneration %}{% endfor %}";
        assert_eq!(
            rewrite_generation_tags(src).as_deref(),
            Some("{% for m in messages %}{%- if true -%}{{ m }}{% endif %}{% endfor %}")
        );
        assert_eq!(
            rewrite_generation_tags("{% set generation = 1 %}{{ generation }}"),
            None
        );
        assert_eq!(
            rewrite_generation_tags("{% if generationx %}{% endif %}"),
            None
        );
        assert_eq!(rewrite_generation_tags("plain"), None);
    }
}
