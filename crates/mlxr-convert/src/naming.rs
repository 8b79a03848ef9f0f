//! `general.*` metadata from the folder: the model's name, its size label
//! and name components (parsed from config.json's `_name_or_path` when it is
//! a Hub id, else from the folder name, by the heuristics gguf-py applies),
//! and the sampling defaults of generation_config.json.

use std::path::Path;

use serde_json::Value;

use crate::hf_folder::read_json_object;
use crate::kvs::Kvs;
use crate::ConvertError;

#[derive(Default, Debug, PartialEq)]
pub struct NameParts {
    pub name: Option<String>,
    pub organization: Option<String>,
    pub basename: Option<String>,
    pub finetune: Option<String>,
    pub version: Option<String>,
    pub size_label: Option<String>,
}

impl NameParts {
    fn fill_from(&mut self, other: NameParts) {
        let fill = |a: &mut Option<String>, b: Option<String>| {
            if a.is_none() {
                *a = b;
            }
        };
        fill(&mut self.name, other.name);
        fill(&mut self.organization, other.organization);
        fill(&mut self.basename, other.basename);
        fill(&mut self.finetune, other.finetune);
        fill(&mut self.version, other.version);
        fill(&mut self.size_label, other.size_label);
    }
}

/// Capitalises lower-case words (not versions or words starting with a
/// digit); dashes become spaces.
pub fn id_to_title(s: &str) -> String {
    s.trim()
        .replace('-', " ")
        .split_whitespace()
        .map(|w| {
            let is_lower = w.chars().any(char::is_lowercase) && !w.chars().any(char::is_uppercase);
            if is_lower && !is_version(w) && !w.starts_with(|c: char| c.is_ascii_digit()) {
                title(w)
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn title(w: &str) -> String {
    let mut out = String::with_capacity(w.len());
    let mut prev_letter = false;
    for c in w.chars() {
        if prev_letter {
            out.extend(c.to_lowercase());
        } else {
            out.extend(c.to_uppercase());
        }
        prev_letter = c.is_alphabetic();
    }
    out
}

/// `v1`, `v1.2.3`.
fn is_version(w: &str) -> bool {
    w.strip_prefix('v').is_some_and(dotted_number)
}

/// `1`, `1.2`, `1.2.3`.
fn dotted_number(s: &str) -> bool {
    !s.is_empty()
        && s.split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `(v|iter)?\d+(.\d+)*`, case-insensitive.
fn is_version_part(p: &str) -> bool {
    let l = p.to_ascii_lowercase();
    let rest = l
        .strip_prefix("iter")
        .or_else(|| l.strip_prefix('v'))
        .unwrap_or(&l);
    dotted_number(rest) || dotted_number(&l)
}

/// `i?q\d(_\w)*|b?fp?(16|32)`, case-insensitive.
fn is_type_part(p: &str) -> bool {
    let l = p.to_ascii_lowercase();
    let q = l.strip_prefix('i').unwrap_or(&l);
    if let Some(rest) = q.strip_prefix('q') {
        let mut chars = rest.chars();
        if chars.next().is_some_and(|c| c.is_ascii_digit()) {
            let tail: String = chars.collect();
            if tail.is_empty()
                || (tail.starts_with('_')
                    && tail.chars().all(|c| c.is_alphanumeric() || c == '_')
                    && !tail.ends_with('_'))
            {
                return true;
            }
        }
    }
    let f = l.strip_prefix('b').unwrap_or(&l);
    if let Some(rest) = f.strip_prefix('f') {
        let rest = rest.strip_prefix('p').unwrap_or(rest);
        return rest == "16" || rest == "32";
    }
    false
}

/// `(([A]|\d+x)?\d+([._]\d+)?[KMBT]\d?|small|mini|medium|large|x?xl)`, case-insensitive.
fn is_size_part(p: &str) -> bool {
    let l = p.to_ascii_lowercase();
    if matches!(
        l.as_str(),
        "small" | "mini" | "medium" | "large" | "xl" | "xxl"
    ) {
        return true;
    }
    let b = l.as_bytes();
    let mut i = 0;
    let digits = |i: &mut usize| {
        let s = *i;
        while *i < b.len() && b[*i].is_ascii_digit() {
            *i += 1;
        }
        *i > s
    };
    // optional prefix: "a" or digits+"x"
    let try_from = |start: usize| -> bool {
        let mut j = start;
        if !digits(&mut j) {
            return false;
        }
        if j < b.len() && (b[j] == b'.' || b[j] == b'_') {
            let mut k = j + 1;
            if digits(&mut k) {
                j = k;
            }
        }
        if j >= b.len() || !b"kmbt".contains(&b[j]) {
            return false;
        }
        j += 1;
        if j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        j == b.len()
    };
    if try_from(0) {
        return true;
    }
    if b.first() == Some(&b'a') && try_from(1) {
        return true;
    }
    if digits(&mut i) && i < b.len() && b[i] == b'x' {
        return try_from(i + 1);
    }
    false
}

/// gguf-py's reading of a model id (`org/name-size-finetune-version`).
pub fn model_id_components(model_id: &str, total_params: u64) -> NameParts {
    if model_id.contains(' ') {
        return NameParts {
            name: Some(model_id.to_string()),
            ..Default::default()
        };
    }
    let (org, full) = match model_id.split_once('/') {
        Some((o, n)) => (Some(o.to_string()).filter(|o| !o.starts_with('.')), n),
        None => (None, model_id),
    };
    let mut parts: Vec<String> = full
        .split('-')
        .filter(|p| !p.is_empty())
        .map(str::to_string)
        .collect();
    #[derive(Default, Clone)]
    struct T {
        basename: bool,
        size: bool,
        finetune: bool,
        version: bool,
        ty: bool,
    }
    impl T {
        fn empty(&self) -> bool {
            !(self.basename || self.size || self.finetune || self.version || self.ty)
        }
        fn count(&self) -> usize {
            [
                self.basename,
                self.size,
                self.finetune,
                self.version,
                self.ty,
            ]
            .iter()
            .filter(|b| **b)
            .count()
        }
    }
    let mut types = vec![T::default(); parts.len()];
    for i in 0..parts.len() {
        let part = parts[i].clone();
        if is_version_part(&part) {
            types[i].version = true;
        } else if is_type_part(&part) {
            types[i].ty = true;
            parts[i] = part.to_uppercase();
        } else if i > 0 && is_size_part(&part) {
            let mut part = part.replace('_', ".");
            if part.ends_with(|c: char| c.is_ascii_digit()) && part.len() >= 2 {
                let c: Vec<char> = part.chars().collect();
                let n = c.len();
                part = format!(
                    "{}.{}{}",
                    c[..n - 2].iter().collect::<String>(),
                    c[n - 1],
                    c[n - 2]
                );
            }
            let c: Vec<char> = part.chars().collect();
            if c.len() > 1 && c[c.len() - 2].is_ascii_digit() && "kmbt".contains(c[c.len() - 1]) {
                part = format!(
                    "{}{}",
                    &part[..part.len() - 1],
                    c[c.len() - 1].to_ascii_uppercase()
                );
            }
            if total_params != 0 {
                let last = part.chars().last().unwrap_or(' ');
                if let Ok(x) = part[..part.len() - last.len_utf8()].parse::<f64>() {
                    let exp = " KMBT".find(last).map(|e| e as i32).unwrap_or(-1);
                    let label = x * 1000f64.powi(exp);
                    if (label - total_params as f64).abs() > (7 * total_params / 8) as f64 {
                        types[i].finetune = true;
                        part = format!(
                            "{}{}",
                            &part[..part.len() - last.len_utf8()],
                            last.to_ascii_lowercase()
                        );
                    }
                }
            }
            if types[i].empty() {
                types[i].size = true;
            }
            parts[i] = part;
        } else if i > 0
            && matches!(
                part.to_ascii_lowercase().as_str(),
                "chat" | "instruct" | "vision" | "lora"
            )
        {
            types[i].finetune = true;
        }
    }
    let has_numeric_size = parts
        .iter()
        .zip(&types)
        .any(|(p, t)| t.size && p.chars().any(|c| c.is_ascii_digit()));
    if has_numeric_size {
        for (p, t) in parts.iter().zip(types.iter_mut()) {
            if t.size && p.chars().all(char::is_alphabetic) {
                t.size = false;
            }
        }
    }
    let mut at_start = true;
    for (p, t) in parts.iter().zip(types.iter_mut()) {
        if at_start && ((t.empty() && p.starts_with(char::is_alphabetic)) || t.version) {
            t.basename = true;
        } else {
            at_start = false;
            if t.empty() {
                t.finetune = true;
            }
        }
    }
    for t in types.iter_mut().rev() {
        if t.basename && t.count() > 1 {
            t.basename = false;
        } else {
            break;
        }
    }
    let join = |f: &dyn Fn(&T) -> bool| {
        let mut seen: Vec<&str> = Vec::new();
        for (p, t) in parts.iter().zip(&types) {
            if f(t) {
                seen.push(p);
            }
        }
        Some(seen.join("-")).filter(|s| !s.is_empty())
    };
    let mut basename = join(&|t| t.basename);
    let size_label = {
        let mut uniq: Vec<&str> = Vec::new();
        for (p, t) in parts.iter().zip(&types) {
            if t.size && !uniq.contains(&p.as_str()) {
                uniq.push(p);
            }
        }
        Some(uniq.join("-")).filter(|s| !s.is_empty())
    };
    let finetune = join(&|t| t.finetune);
    let version = join(&|t| t.version && !t.basename);
    if size_label.is_none() && finetune.is_none() && version.is_none() {
        basename = None;
    }
    NameParts {
        name: Some(full.to_string()),
        organization: org,
        basename,
        finetune,
        version,
        size_label,
    }
}

/// `394K`, `1.7B`: two significant digits at least.
pub fn size_label(total_params: u64) -> String {
    let n = total_params as f64;
    let (scaled, suffix) = if n > 1e12 {
        (n * 1e-12, "T")
    } else if n > 1e9 {
        (n * 1e-9, "B")
    } else if n > 1e6 {
        (n * 1e-6, "M")
    } else {
        (n * 1e-3, "K")
    };
    let rounded = format!("{}", scaled.round_ties_even() as u64);
    let digits = rounded.trim_start_matches('0').len();
    let fix = 2usize.saturating_sub(digits);
    format!("{scaled:.fix$}{suffix}")
}

/// Writes `general.sampling.*` (from generation_config.json), `general.name`
/// and the name components, and `general.size_label`.
pub fn write_general(
    dir: &Path,
    config: &serde_json::Map<String, Value>,
    total_params: u64,
    kvs: &mut Kvs,
) -> Result<(), ConvertError> {
    // generation_config.json that is not valid JSON is ignored, as gguf-py does.
    let gen = read_json_object(&dir.join("generation_config.json"))
        .ok()
        .flatten()
        .unwrap_or_default();
    let num = |k: &str| gen.get(k).and_then(Value::as_f64).map(|x| x as f32);
    if let Some(k) = gen.get("top_k").and_then(Value::as_i64) {
        kvs.set("general.sampling.top_k", k as i32);
    }
    if let Some(p) = num("top_p") {
        kvs.set("general.sampling.top_p", p);
    }
    if let Some(p) = num("min_p") {
        kvs.set("general.sampling.min_p", p);
    }
    if let Some(t) = num("temperature") {
        kvs.set("general.sampling.temp", t);
    }
    if let Some(r) = num("penalty_repeat").or_else(|| num("repetition_penalty")) {
        kvs.set("general.sampling.penalty_repeat", r);
    }

    let mut parts = NameParts::default();
    if let Some(id) = config.get("_name_or_path").and_then(Value::as_str) {
        if id.matches('/').count() <= 1 {
            parts.fill_from(model_id_components(id, total_params));
        }
    }
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .or_else(|| {
            let full = dir.canonicalize().ok()?;
            full.file_name().map(|n| n.to_string_lossy().into_owned())
        })
        .unwrap_or_default();
    if !dir_name.is_empty() {
        parts.fill_from(model_id_components(&dir_name, total_params));
    }
    let name = parts
        .name
        .as_deref()
        .map(id_to_title)
        .unwrap_or_else(|| dir_name.clone());
    kvs.set("general.name", name);
    if let Some(v) = parts.version {
        kvs.set("general.version", v);
    }
    if let Some(o) = parts.organization {
        kvs.set("general.organization", id_to_title(&o));
    }
    if let Some(f) = parts.finetune {
        kvs.set("general.finetune", f);
    }
    if let Some(b) = parts.basename {
        kvs.set("general.basename", b);
    }
    let label = parts
        .size_label
        .or_else(|| (total_params > 0).then(|| size_label(total_params)));
    if let Some(l) = label {
        kvs.set("general.size_label", l);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn titles() {
        assert_eq!(id_to_title("gemma2-gguf"), "Gemma2 Gguf");
        assert_eq!(id_to_title("llama"), "Llama");
        assert_eq!(
            id_to_title("SmolLM2-135M-Instruct"),
            "SmolLM2 135M Instruct"
        );
        assert_eq!(id_to_title("v1.2-x"), "v1.2 X");
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(393_856), "394K");
        assert_eq!(size_label(134_515_008), "135M");
        assert_eq!(size_label(1_711_376_384), "1.7B");
    }

    #[test]
    fn hub_ids() {
        let p = model_id_components("HuggingFaceTB/SmolLM2-135M-Instruct", 134_515_008);
        assert_eq!(p.organization.as_deref(), Some("HuggingFaceTB"));
        assert_eq!(p.basename.as_deref(), Some("SmolLM2"));
        assert_eq!(p.size_label.as_deref(), Some("135M"));
        assert_eq!(p.finetune.as_deref(), Some("Instruct"));
        let p = model_id_components("gemma2-gguf", 1);
        assert_eq!(p.basename, None);
        assert_eq!(p.finetune, None);
        assert!(is_type_part("Q4_K_M") && is_type_part("bf16") && !is_type_part("gguf"));
        assert!(
            is_size_part("135M")
                && is_size_part("8x7B")
                && is_size_part("7b1")
                && !is_size_part("gguf")
        );
    }
}
