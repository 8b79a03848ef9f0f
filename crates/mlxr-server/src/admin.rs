//! The daemon's own endpoints for the web UI, behind the API key like the
//! rest:
//!
//! - `GET /api/mlxr/config`: the effective configuration as JSON (whether
//!   an API key is set, never the key).
//! - `PATCH /api/mlxr/config` with `{"keep_alive": "10m"}`: changes the
//!   default keep-alive (the one safe setting to change at run time; any
//!   other key is a 400) and answers the new configuration.
//! - `GET /api/mlxr/logs[?tail=N]`: Server-Sent Events, one `log` event per
//!   line (JSON [`LogLine`], `id` = its sequence number): the last `N`
//!   lines (default 200), then new ones as they are logged. A follower that
//!   falls behind gets a `skipped` event with the number of lines it
//!   missed. The stream ends when the server shuts down.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive as SseKeepAlive, Sse};
use axum::routing::get;
use axum::{Json, Router};
use futures_util::Stream;
use mlxr_engine::KvBudget;
use serde::Deserialize;
use serde_json::{json, Value};
use tokio::sync::broadcast::error::RecvError;

use crate::error::{ApiError, OllamaError};
use crate::extract::JsonBody;
use crate::logs::LogLine;
use crate::models::KeepAlive;
use crate::state::AppState;

/// Lines a new log follower gets first when it names no `tail`.
pub const DEFAULT_TAIL: usize = 200;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/mlxr/config", get(config).patch(update_config))
        .route("/api/mlxr/logs", get(logs))
}

/// `GET /api/mlxr/config`.
pub async fn config(State(state): State<AppState>) -> Json<Value> {
    Json(config_json(&state))
}

/// The settings `PATCH /api/mlxr/config` may change.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConfigUpdate {
    keep_alive: Option<Value>,
}

/// `PATCH /api/mlxr/config`.
pub async fn update_config(
    State(state): State<AppState>,
    JsonBody(body): JsonBody<Value>,
) -> Result<Json<Value>, OllamaError> {
    let update: ConfigUpdate = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(format!(
            "{e}; only keep_alive can be changed while the server runs"
        ))
    })?;
    if let Some(value) = update.keep_alive {
        let keep_alive = KeepAlive::parse(&value)
            .map_err(|e| ApiError::bad_request(format!("keep_alive: {e}")))?;
        state.models.set_default_keep_alive(keep_alive);
        tracing::info!(
            keep_alive = %keep_alive_text(keep_alive),
            "default keep_alive changed"
        );
    }
    Ok(Json(config_json(&state)))
}

fn config_json(state: &AppState) -> Value {
    let server = &state.server;
    let models = &state.models;
    let engine = models.engine_config();
    json!({
        "version": env!("CARGO_PKG_VERSION"),
        "listen": {
            "host": server.host,
            "socket": server.socket,
            "socket_group": server.socket_group,
        },
        "security": {
            "api_key_set": server.api_key.is_some(),
            "origins": server.cors_origins,
            "allowed_hosts": server.allowed_hosts,
            "body_limit": server.body_limit,
        },
        "models": {
            "home": server.home,
            "keep_alive": keep_alive_text(models.default_keep_alive()),
            "load_timeout_s": models.load_timeout().as_secs_f64(),
            "max_loaded_models": models.max_loaded(),
            "max_loaded_memory": models.max_memory(),
            "context_size": models.context_size(),
            "threads": server.threads,
        },
        "engine": {
            "max_num_seqs": engine.max_num_seqs,
            "max_num_batched_tokens": engine.max_num_batched_tokens,
            "long_prefill_token_threshold": engine.long_prefill_token_threshold,
        },
        "kv_cache": {
            "budget": kv_budget_text(&engine.kv_budget),
            "budget_bytes": engine.kv_budget.bytes(),
            "dtype": format!("{:?}", engine.kv_dtype).to_lowercase(),
            "block_size": engine.block_size,
            "prefix_caching": engine.prefix_caching,
        },
        "logs": {
            "buffered_lines": server.logs.capacity(),
        },
    })
}

/// `5m`, `1h`, `90s`, `-1` (forever), `0` — the forms `--keep-alive` takes.
fn keep_alive_text(k: KeepAlive) -> String {
    match k {
        KeepAlive::Forever => "-1".into(),
        KeepAlive::UnloadNow => "0".into(),
        KeepAlive::For(d) => {
            let ms = d.as_millis();
            match d.as_secs() {
                s if ms % 3_600_000 == 0 => format!("{}h", s / 3600),
                s if ms % 60_000 == 0 => format!("{}m", s / 60),
                _ if ms % 1000 == 0 => format!("{}s", d.as_secs()),
                _ => format!("{}s", d.as_secs_f64()),
            }
        }
    }
}

/// `1 GiB`, `512 MiB`, `1000 bytes`, or `0.1 of memory` — as `--kv-cache-mem` takes it.
fn kv_budget_text(b: &KvBudget) -> String {
    match *b {
        KvBudget::Bytes(n) => {
            let units = [
                (1u64 << 40, "TiB"),
                (1 << 30, "GiB"),
                (1 << 20, "MiB"),
                (1 << 10, "KiB"),
            ];
            match units.iter().find(|(size, _)| n >= *size && n % size == 0) {
                Some((size, unit)) => format!("{} {unit}", n / size),
                None => format!("{n} bytes"),
            }
        }
        KvBudget::Fraction(f) => format!("{f} of memory"),
    }
}

#[derive(Deserialize)]
pub struct LogsQuery {
    tail: Option<usize>,
}

/// `GET /api/mlxr/logs`.
pub async fn logs(
    State(state): State<AppState>,
    Query(query): Query<LogsQuery>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let buffer = state.server.logs.clone();
    let n = query.tail.unwrap_or(DEFAULT_TAIL).min(buffer.capacity());
    let (tail, mut live) = buffer.follow(n);
    let mut closed = buffer.closed();
    let stream = async_stream::stream! {
        for line in &tail {
            yield Ok(log_event(line));
        }
        loop {
            if *closed.borrow_and_update() {
                // Shutting down: the lines already logged, then the end.
                while let Ok(line) = live.try_recv() {
                    yield Ok(log_event(&line));
                }
                break;
            }
            tokio::select! {
                received = live.recv() => match received {
                    Ok(line) => yield Ok(log_event(&line)),
                    Err(RecvError::Lagged(missed)) => {
                        yield Ok(Event::default().event("skipped").data(missed.to_string()));
                    }
                    Err(RecvError::Closed) => break,
                },
                changed = closed.changed() => if changed.is_err() {
                    break;
                },
            }
        }
    };
    Sse::new(stream).keep_alive(SseKeepAlive::new().interval(Duration::from_secs(15)))
}

fn log_event(line: &LogLine) -> Event {
    Event::default()
        .event("log")
        .id(line.seq.to_string())
        .data(crate::wire::json_line(line))
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mlxr_engine::KvBudget;

    use super::{keep_alive_text, kv_budget_text};
    use crate::models::KeepAlive;

    #[test]
    fn keep_alive_forms() {
        for (k, want) in [
            (KeepAlive::For(Duration::from_secs(300)), "5m"),
            (KeepAlive::For(Duration::from_secs(7200)), "2h"),
            (KeepAlive::For(Duration::from_secs(90)), "90s"),
            (KeepAlive::For(Duration::from_millis(1500)), "1.5s"),
            (KeepAlive::Forever, "-1"),
            (KeepAlive::UnloadNow, "0"),
        ] {
            assert_eq!(keep_alive_text(k), want);
        }
    }

    #[test]
    fn kv_budget_forms() {
        for (b, want) in [
            (KvBudget::Bytes(1 << 30), "1 GiB"),
            (KvBudget::Bytes(256 << 20), "256 MiB"),
            (KvBudget::Bytes(1536 << 20), "1536 MiB"),
            (KvBudget::Bytes(1000), "1000 bytes"),
            (KvBudget::Fraction(0.1), "0.1 of memory"),
        ] {
            assert_eq!(kv_budget_text(&b), want);
        }
    }
}
