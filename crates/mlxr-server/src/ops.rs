//! Liveness, version and metrics.

use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use axum::Json;
use serde_json::json;

use crate::state::AppState;

/// `GET /` — Ollama clients probe this.
pub async fn root() -> &'static str {
    "MLXR is running"
}

/// 200 `{"status":"ok"}`, or 503 `{"status":"loading"}` while a model loads
/// (requests for it wait meanwhile).
pub async fn health(State(state): State<AppState>) -> impl IntoResponse {
    if state.models.is_loading() {
        (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"status": "loading"})),
        )
    } else {
        (axum::http::StatusCode::OK, Json(json!({"status": "ok"})))
    }
}

/// `GET /api/version`: numeric X.Y.Z, as Ollama clients parse it.
pub async fn version() -> Json<serde_json::Value> {
    Json(json!({"version": env!("CARGO_PKG_VERSION")}))
}

/// Prometheus text: each loaded model's engine metrics, labelled by model.
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    let mut out = String::new();
    let mut seen_headers = std::collections::HashSet::new();
    for (model, engine) in state.models.metrics().await {
        for line in engine.metrics().render_prometheus().lines() {
            if line.starts_with('#') {
                if seen_headers.insert(line.to_string()) {
                    out.push_str(line);
                    out.push('\n');
                }
                continue;
            }
            out.push_str(&label_line(line, &model));
            out.push('\n');
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
}

/// Adds `model="..."` to a sample line (`name{a="b"} v` or `name v`).
fn label_line(line: &str, model: &str) -> String {
    let model = model.replace('\\', "\\\\").replace('"', "\\\"");
    match line.find('{') {
        Some(i) => format!("{}{{model=\"{model}\",{}", &line[..i], &line[i + 1..]),
        None => match line.split_once(' ') {
            Some((name, value)) => format!("{name}{{model=\"{model}\"}} {value}"),
            None => line.to_string(),
        },
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn labels() {
        assert_eq!(
            super::label_line("a_total 3", "m:1"),
            "a_total{model=\"m:1\"} 3"
        );
        assert_eq!(
            super::label_line("h_bucket{le=\"0.5\"} 2", "m"),
            "h_bucket{model=\"m\",le=\"0.5\"} 2"
        );
    }
}
