//! Model names: `[host/][namespace/]model[:tag]`, Ollama style.
//!
//! Every part is `[A-Za-z0-9._-]+`, must not start with `.` or `-` and must
//! not contain `..`, so a name can never be turned into a path that escapes a
//! directory. The tag defaults to `latest`. Names compare case-insensitively in
//! the database, as Ollama's do.

use std::fmt;
use std::str::FromStr;

use crate::error::{RegistryError, Result};

/// Longest host part (a DNS name).
const MAX_HOST_LEN: usize = 253;
/// Longest namespace, model or tag part.
const MAX_PART_LEN: usize = 128;
/// Longest whole name.
const MAX_NAME_LEN: usize = 512;

/// A validated model name.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelName {
    host: Option<String>,
    namespace: Option<String>,
    model: String,
    tag: String,
}

impl ModelName {
    /// Parses and validates `[host/][namespace/]model[:tag]`.
    pub fn parse(s: &str) -> Result<ModelName> {
        let invalid = |reason: &str| RegistryError::InvalidName {
            name: s.chars().take(80).collect(),
            reason: reason.to_string(),
        };
        if s.is_empty() {
            return Err(invalid("the name is empty"));
        }
        if s.len() > MAX_NAME_LEN {
            return Err(invalid(&format!("longer than {MAX_NAME_LEN} bytes")));
        }
        let (path, tag) = match s.rfind(':') {
            Some(i) if !s[i..].contains('/') => (&s[..i], Some(&s[i + 1..])),
            Some(_) => return Err(invalid("':' is only allowed before the tag")),
            None => (s, None),
        };
        if path.contains(':') {
            return Err(invalid("':' is only allowed once, before the tag"));
        }
        let parts: Vec<&str> = path.split('/').collect();
        let (host, namespace, model) = match parts.as_slice() {
            [m] => (None, None, *m),
            [n, m] => (None, Some(*n), *m),
            [h, n, m] => (Some(*h), Some(*n), *m),
            _ => return Err(invalid("at most host/namespace/model is allowed")),
        };
        if let Some(h) = host {
            check_part(h, "host", MAX_HOST_LEN).map_err(|r| invalid(&r))?;
        }
        if let Some(n) = namespace {
            check_part(n, "namespace", MAX_PART_LEN).map_err(|r| invalid(&r))?;
        }
        check_part(model, "model", MAX_PART_LEN).map_err(|r| invalid(&r))?;
        let tag = match tag {
            Some(t) => {
                check_part(t, "tag", MAX_PART_LEN).map_err(|r| invalid(&r))?;
                t
            }
            None => "latest",
        };
        Ok(ModelName {
            host: host.map(str::to_string),
            namespace: namespace.map(str::to_string),
            model: model.to_string(),
            tag: tag.to_string(),
        })
    }

    /// The registry host, e.g. `hf.co`.
    pub fn host(&self) -> Option<&str> {
        self.host.as_deref()
    }

    /// The namespace (user or organisation).
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The model part.
    pub fn model(&self) -> &str {
        &self.model
    }

    /// The tag (`latest` when none was given).
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The same name with another tag.
    pub fn with_tag(&self, tag: &str) -> Result<ModelName> {
        let mut name = self.clone();
        check_part(tag, "tag", MAX_PART_LEN).map_err(|reason| RegistryError::InvalidName {
            name: format!("{self}"),
            reason,
        })?;
        name.tag = tag.to_string();
        Ok(name)
    }

    /// Builds a valid model part from free text (a file name): characters
    /// outside `[A-Za-z0-9._-]` become `-`, runs of dots collapse, and leading
    /// `.`/`-` are dropped. Returns `None` when nothing usable is left.
    pub fn sanitize_part(text: &str) -> Option<String> {
        let mut out = String::new();
        for c in text.chars() {
            let c = if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            };
            if c == '.' && out.ends_with('.') {
                continue;
            }
            out.push(c);
        }
        let out = out.trim_start_matches(['.', '-']).to_string();
        let out: String = out.chars().take(MAX_PART_LEN).collect();
        (!out.is_empty()).then_some(out)
    }
}

fn check_part(part: &str, what: &str, max: usize) -> std::result::Result<(), String> {
    if part.is_empty() {
        return Err(format!("the {what} is empty"));
    }
    if part.len() > max {
        return Err(format!("the {what} is longer than {max} bytes"));
    }
    if let Some(c) = part
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        return Err(format!(
            "the {what} contains {c:?}; only letters, digits, '.', '_' and '-' are allowed"
        ));
    }
    if part.starts_with('.') || part.starts_with('-') {
        return Err(format!("the {what} must not start with '.' or '-'"));
    }
    if part.contains("..") {
        return Err(format!("the {what} must not contain '..'"));
    }
    Ok(())
}

impl fmt::Display for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(h) = &self.host {
            write!(f, "{h}/")?;
        }
        if let Some(n) = &self.namespace {
            write!(f, "{n}/")?;
        }
        write!(f, "{}:{}", self.model, self.tag)
    }
}

impl fmt::Debug for ModelName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ModelName({self})")
    }
}

impl FromStr for ModelName {
    type Err = RegistryError;
    fn from_str(s: &str) -> Result<ModelName> {
        ModelName::parse(s)
    }
}

impl serde::Serialize for ModelName {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for ModelName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<ModelName, D::Error> {
        let s = String::deserialize(d)?;
        ModelName::parse(&s).map_err(serde::de::Error::custom)
    }
}
