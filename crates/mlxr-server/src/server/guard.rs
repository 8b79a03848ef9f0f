//! Keeps web pages from driving the daemon through a user's browser, as
//! Ollama does since its DNS-rebinding advisories:
//!
//! - `Origin`: a request that carries one must come from a loopback origin
//!   (any port), from the server's own origin, or from `--origins` (`*`
//!   allows all). Clients that are not browsers send no `Origin` and pass.
//! - `Host`: while the TCP listener is on a loopback address, the `Host`
//!   header must name this machine (loopback addresses, `localhost`,
//!   `*.localhost`, the `--host` name, the machine's hostname) or one of
//!   `--allowed-hosts` (`*` turns the check off). A page whose own name was
//!   rebound to 127.0.0.1 still sends its own name, so it is refused. A
//!   non-loopback listener and the Unix socket skip the check.
//!
//! The third rule, JSON bodies only as `application/json`, is in
//! [`crate::extract::JsonBody`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::Response;

use crate::error::ApiError;
use crate::server::ServerConfig;

/// The listener a request came through (a request extension).
#[derive(Clone, Copy, Debug)]
pub enum Listener {
    Tcp(SocketAddr),
    Unix,
}

#[derive(Debug)]
pub struct Guard {
    /// `--origins`, lowercased, without a trailing `/`.
    origins: Vec<String>,
    /// Host names allowed besides loopback ones; `None` when `*` turns
    /// the check off.
    hosts: Option<Vec<String>>,
}

impl Guard {
    pub fn new(config: &ServerConfig) -> Self {
        let origins = config
            .cors_origins
            .iter()
            .map(|o| o.trim().trim_end_matches('/').to_ascii_lowercase())
            .collect();
        let hosts = if config.allowed_hosts.iter().any(|h| h.trim() == "*") {
            None
        } else {
            let mut hosts: Vec<String> = config
                .allowed_hosts
                .iter()
                .map(|h| host_name(h.trim()))
                .collect();
            hosts.push(host_name(&config.host));
            hosts.extend(machine_hostname().map(|h| host_name(&h)));
            hosts.retain(|h| !h.is_empty());
            Some(hosts)
        };
        Self { origins, hosts }
    }

    fn check(&self, req: &Request) -> Result<(), ApiError> {
        let host = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .or_else(|| req.uri().authority().map(|a| a.as_str()));
        let check_host = match req.extensions().get::<Listener>() {
            Some(Listener::Unix) => false,
            Some(Listener::Tcp(addr)) => addr.ip().to_canonical().is_loopback(),
            None => true,
        };
        if let (true, Some(allowed), Some(host)) = (check_host, &self.hosts, host) {
            if !host_allowed(host, allowed) {
                let name = host_name(host);
                return Err(forbidden(format!(
                    "host '{name}' is not allowed: this server listens on a loopback address and \
                     answers only requests addressed to this machine (DNS rebinding protection); \
                     if '{name}' names this machine, start mlxr serve with \
                     --allowed-hosts {name} (or MLXR_ALLOWED_HOSTS)"
                )));
            }
        }
        if let Some(origin) = req.headers().get(header::ORIGIN) {
            let origin = String::from_utf8_lossy(origin.as_bytes());
            if !origin_allowed(&origin, &self.origins, host) {
                return Err(forbidden(format!(
                    "origin '{origin}' is not allowed to use this server; to let that web page \
                     call the API, start mlxr serve with --origins {origin} (or MLXR_ORIGINS)"
                )));
            }
        }
        Ok(())
    }
}

fn forbidden(message: String) -> ApiError {
    ApiError::new(StatusCode::FORBIDDEN, message)
}

/// The middleware: refuses what [`Guard`] does not allow with a 403.
pub async fn guard(State(guard): State<Arc<Guard>>, req: Request, next: Next) -> Response {
    match guard.check(&req) {
        Ok(()) => next.run(req).await,
        Err(e) => {
            tracing::warn!(path = req.uri().path(), "refused: {}", e.message);
            e.for_path(req.uri().path())
        }
    }
}

/// An `Origin` (`scheme://host[:port]`) a browser may call from: a loopback
/// one, the server's own (`request_host` is the request's `Host`), or one
/// of `allowed` (lowercased; `*` allows all).
fn origin_allowed(origin: &str, allowed: &[String], request_host: Option<&str>) -> bool {
    let origin = origin.trim().to_ascii_lowercase();
    if allowed.iter().any(|o| o == "*" || *o == origin) {
        return true;
    }
    let Some(authority) = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
    else {
        return false;
    };
    is_loopback_name(&host_name(authority))
        || request_host.is_some_and(|h| h.eq_ignore_ascii_case(authority))
}

/// A `Host` header value the loopback listener answers: a loopback name
/// or one of `allowed` (host names without ports), on any port.
fn host_allowed(host: &str, allowed: &[String]) -> bool {
    let name = host_name(host);
    is_loopback_name(&name) || allowed.contains(&name)
}

/// The host part of `host[:port]` or `[v6][:port]`, lowercased, without a
/// trailing dot.
fn host_name(authority: &str) -> String {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        // One colon is a port; more are a bare IPv6 address.
        None if authority.matches(':').count() == 1 => authority.split(':').next().unwrap_or(""),
        None => authority,
    };
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// 127.0.0.0/8, ::1, the unspecified addresses (browsers send 0.0.0.0 to
/// this machine), `localhost` and `*.localhost` (browsers resolve those to
/// loopback themselves).
fn is_loopback_name(name: &str) -> bool {
    match name.parse::<IpAddr>() {
        Ok(ip) => {
            let ip = ip.to_canonical();
            ip.is_loopback() || ip.is_unspecified()
        }
        Err(_) => name == "localhost" || name.ends_with(".localhost"),
    }
}

fn machine_hostname() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname writes at
    // most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = std::str::from_utf8(&buf[..end]).ok()?;
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_names() {
        for (authority, name) in [
            ("localhost:11435", "localhost"),
            ("LOCALHOST.", "localhost"),
            ("[::1]:80", "::1"),
            ("::1", "::1"),
            ("127.0.0.1", "127.0.0.1"),
            ("Example.COM:8080", "example.com"),
        ] {
            assert_eq!(host_name(authority), name, "{authority}");
        }
    }

    #[test]
    fn loopback_hosts_pass_and_others_need_the_allow_list() {
        let allowed = vec!["mybox".to_string()];
        for ok in [
            "localhost:11435",
            "127.0.0.1:11435",
            "127.8.9.10",
            "[::1]:11435",
            "[::ffff:127.0.0.1]:1",
            "0.0.0.0:11435",
            "app.localhost:3000",
            "mybox:11435",
            "MyBox",
        ] {
            assert!(host_allowed(ok, &allowed), "{ok}");
        }
        for bad in [
            "evil.example",
            "evil.example:11435",
            "localhost.evil.example",
            "127.0.0.1.evil.example",
            "10.0.0.5:11435",
            "mybox.evil.example",
            "",
        ] {
            assert!(!host_allowed(bad, &allowed), "{bad}");
        }
    }

    #[test]
    fn loopback_own_and_listed_origins_pass() {
        let allowed = vec!["https://app.example.com".to_string()];
        for (origin, host) in [
            ("http://localhost:3000", None),
            ("http://127.0.0.1", None),
            ("https://[::1]:8080", None),
            ("http://0.0.0.0:1", None),
            ("http://ui.localhost:5173", None),
            ("https://app.example.com", None),
            ("HTTPS://APP.EXAMPLE.COM", None),
            // The page the server itself served, reached by another name.
            ("http://mybox.lan:11435", Some("mybox.lan:11435")),
        ] {
            assert!(origin_allowed(origin, &allowed, host), "{origin}");
        }
        for (origin, host) in [
            ("http://evil.example", None),
            ("http://evil.example", Some("127.0.0.1:11435")),
            ("http://localhost.evil.example", None),
            ("http://app.example.com", None),
            ("https://app.example.com.evil.example", None),
            ("null", None),
            ("file://", None),
            ("", None),
        ] {
            assert!(!origin_allowed(origin, &allowed, host), "{origin}");
        }
        assert!(origin_allowed(
            "http://evil.example",
            &["*".to_string()],
            None
        ));
    }
}
