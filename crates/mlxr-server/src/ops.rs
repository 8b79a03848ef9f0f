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

/// Prometheus text: each loaded model's engine metrics, labelled by model,
/// then the process's memory.
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
    out.push_str(&process_memory());
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        out,
    )
}

/// `process_resident_memory_bytes` (the Prometheus process collector's
/// name) and, under glibc, `mlxr:heap_in_use_bytes`: the bytes malloc has
/// handed out and not had back. RSS also holds freed memory the allocator
/// keeps for reuse (up to `M_TRIM_THRESHOLD`, see `mlxr`'s main), so a leak
/// shows as growth of the second, not the first.
fn process_memory() -> String {
    let mut out = String::new();
    // /proc/self/statm counts pages (16 KiB ones on some aarch64 kernels).
    #[cfg(unix)]
    // SAFETY: sysconf only reads a system constant.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    #[cfg(not(unix))]
    let page = 4096u64;
    if let Some(pages) = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
    {
        out.push_str("# HELP process_resident_memory_bytes Resident memory size in bytes.\n");
        out.push_str("# TYPE process_resident_memory_bytes gauge\n");
        out.push_str(&format!("process_resident_memory_bytes {}\n", pages * page));
    }
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallinfo2 only reads the allocator's counters.
        let info = unsafe { libc::mallinfo2() };
        out.push_str("# HELP mlxr:heap_in_use_bytes Bytes allocated with malloc and not freed.\n");
        out.push_str("# TYPE mlxr:heap_in_use_bytes gauge\n");
        out.push_str(&format!(
            "mlxr:heap_in_use_bytes {}\n",
            info.uordblks + info.hblkhd
        ));
    }
    out
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
    fn process_memory_is_reported() {
        let text = super::process_memory();
        let value = |name: &str| -> u64 {
            let line = text
                .lines()
                .find(|l| l.starts_with(name))
                .unwrap_or_else(|| panic!("{text}"));
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert!(value("process_resident_memory_bytes ") > 1 << 20, "{text}");
        // Other tests allocate and free meanwhile, so only a bound holds:
        // the heap in use includes what this test holds.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        {
            let held = std::hint::black_box(vec![1u8; 64 << 20]);
            let text = super::process_memory();
            let heap = text
                .lines()
                .find_map(|l| l.strip_prefix("mlxr:heap_in_use_bytes "))
                .unwrap_or_else(|| panic!("{text}"));
            assert!(heap.parse::<u64>().unwrap() >= 64 << 20, "{text}");
            drop(held);
        }
    }

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
