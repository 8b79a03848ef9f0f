//! What the tray shows: whether the engine runs or loads a model
//! (`/health`), the models it has loaded (`/api/ps`) and how fast it
//! generates (`/metrics`' token counters between two polls).

use std::path::Path;
use std::time::{Duration, Instant};

use crate::uds_http::{self, Request};

#[derive(Debug, Clone, PartialEq)]
pub enum EngineState {
    /// Nothing answers on the socket.
    Stopped,
    /// The app started the daemon and waits for it to answer.
    Starting,
    /// The daemon loads a model (its `/health` is 503 `loading`; `/api/ps`
    /// waits for the load to end).
    Loading,
    Running {
        models: Vec<String>,
        /// Requests being generated for, over all models.
        busy: u64,
        /// Generated tokens per second since the last poll.
        tokens_per_s: Option<f64>,
    },
}

impl EngineState {
    /// The tray menu's status line.
    pub fn summary(&self) -> String {
        match self {
            EngineState::Stopped => "MLXR is stopped".into(),
            EngineState::Starting => "MLXR is starting…".into(),
            EngineState::Loading => "MLXR is loading a model…".into(),
            EngineState::Running {
                models,
                tokens_per_s,
                ..
            } => {
                let mut s = "MLXR is running".to_string();
                match tokens_per_s {
                    Some(t) if *t > 0.0 => s += &format!(" — {t:.1} tokens/s"),
                    _ => {}
                }
                if models.is_empty() {
                    s += " (no model loaded)";
                }
                s
            }
        }
    }
}

/// What the daemon's `/health` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Nothing answers (or not as the daemon does).
    Down,
    Loading,
    Ready,
}

/// Asks the daemon at `socket` how it is.
pub fn health(socket: &Path, timeout: Duration) -> Health {
    let answer =
        uds_http::send(socket, &Request::get("/health"), Some(timeout)).and_then(|r| r.read_all());
    match answer {
        Ok((head, body)) => health_of(head.status, &body),
        Err(_) => Health::Down,
    }
}

/// `/health`'s answer read: 200, or 503 `{"status":"loading"}`.
pub fn health_of(status: u16, body: &[u8]) -> Health {
    let said = serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|v| v.get("status")?.as_str().map(str::to_string));
    match (status, said.as_deref()) {
        (200, _) => Health::Ready,
        (503, Some("loading")) => Health::Loading,
        _ => Health::Down,
    }
}

/// The names in an `/api/ps` answer.
pub fn loaded_models(ps: &[u8]) -> Vec<String> {
    let json: serde_json::Value = serde_json::from_slice(ps).unwrap_or_default();
    json.get("models")
        .and_then(|m| m.as_array())
        .map(|models| {
            models
                .iter()
                .filter_map(|m| m.get("name").and_then(|n| n.as_str()).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// The sum over all models of a `/metrics` counter or gauge (the
/// Prometheus text format, `name{labels} value` lines).
pub fn metric_sum(metrics: &str, name: &str) -> f64 {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (key, value) = l.rsplit_once(' ')?;
            let metric = key.split('{').next()?;
            (metric == name).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

const GENERATED: &str = "mlxr:generation_tokens_total";
const RUNNING: &str = "mlxr:num_requests_running";

/// Polls the daemon; remembers the last token count for the rate.
#[derive(Default)]
pub struct Poller {
    last: Option<(Instant, f64)>,
}

impl Poller {
    /// The engine's state now (`starting`: the app has started a daemon
    /// that does not answer yet).
    pub fn poll(&mut self, socket: &Path, starting: bool) -> EngineState {
        let timeout = Duration::from_secs(3);
        let down = || {
            if starting {
                EngineState::Starting
            } else {
                EngineState::Stopped
            }
        };
        match health(socket, timeout) {
            Health::Down => {
                self.last = None;
                return down();
            }
            Health::Loading => return EngineState::Loading,
            Health::Ready => {}
        }
        // A load that began since may hold `/api/ps` past its timeout.
        let Ok(ps) = uds_http::get(socket, "/api/ps", timeout) else {
            return match health(socket, timeout) {
                Health::Loading => EngineState::Loading,
                _ => {
                    self.last = None;
                    down()
                }
            };
        };
        let metrics = uds_http::get(socket, "/metrics", timeout)
            .map(|m| String::from_utf8_lossy(&m).into_owned())
            .unwrap_or_default();
        let generated = metric_sum(&metrics, GENERATED);
        let now = Instant::now();
        let tokens_per_s = self.last.and_then(|(t, n)| {
            let secs = now.duration_since(t).as_secs_f64();
            (secs > 0.0 && generated >= n).then(|| (generated - n) / secs)
        });
        self.last = Some((now, generated));
        EngineState::Running {
            models: loaded_models(&ps),
            busy: metric_sum(&metrics, RUNNING) as u64,
            tokens_per_s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const METRICS: &str = "\
# HELP mlxr:generation_tokens_total Generated tokens.
# TYPE mlxr:generation_tokens_total counter
mlxr:generation_tokens_total{model=\"a:latest\"} 5
mlxr:generation_tokens_total{model=\"b:latest\"} 7
mlxr:generation_tokens_total_extra{model=\"b:latest\"} 100
mlxr:num_requests_running{model=\"a:latest\"} 1
process_resident_memory_bytes 19472384
";

    #[test]
    fn sums_a_metric_over_models() {
        assert_eq!(metric_sum(METRICS, GENERATED), 12.0);
        assert_eq!(metric_sum(METRICS, RUNNING), 1.0);
        assert_eq!(
            metric_sum(METRICS, "process_resident_memory_bytes"),
            19472384.0
        );
        assert_eq!(metric_sum(METRICS, "missing"), 0.0);
    }

    #[test]
    fn lists_loaded_models() {
        let ps = br#"{"models":[{"name":"smollm2:latest","size":1},{"name":"qwen:latest"}]}"#;
        assert_eq!(loaded_models(ps), ["smollm2:latest", "qwen:latest"]);
        assert!(loaded_models(b"{\"models\":[]}").is_empty());
        assert!(loaded_models(b"not json").is_empty());
    }

    #[test]
    fn health_tells_loading_from_down() {
        assert_eq!(health_of(200, br#"{"status":"ok"}"#), Health::Ready);
        assert_eq!(health_of(503, br#"{"status":"loading"}"#), Health::Loading);
        assert_eq!(health_of(503, b"busy"), Health::Down);
        assert_eq!(health_of(404, b""), Health::Down);
    }

    #[test]
    fn a_daemon_that_loads_a_model_is_loading() {
        let server = crate::test_server::TestServer::start(|mut conn| {
            std::io::Write::write_all(
                &mut conn,
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 20\r\n\r\n{\"status\":\"loading\"}",
            )
            .unwrap();
        });
        let state = Poller::default().poll(server.path(), false);
        assert_eq!(state, EngineState::Loading);
        assert!(server.finish().starts_with("GET /health "));
    }

    #[test]
    fn summaries() {
        assert_eq!(EngineState::Stopped.summary(), "MLXR is stopped");
        assert_eq!(EngineState::Loading.summary(), "MLXR is loading a model…");
        let running = EngineState::Running {
            models: vec![],
            busy: 0,
            tokens_per_s: Some(12.34),
        };
        assert_eq!(
            running.summary(),
            "MLXR is running — 12.3 tokens/s (no model loaded)"
        );
    }
}
