//! `/api/mlxr/config` and `/api/mlxr/logs` through the whole router (auth
//! included), without a model.

mod common;

use std::time::Duration;

use axum::body::Body;
use axum::http::{header, Request, StatusCode};
use axum::response::Response;
use axum::Router;
use futures_util::StreamExt;
use mlxr_server::{LogBuffer, ServerConfig};
use tower::ServiceExt;

fn app(config: &ServerConfig) -> (Router, tempfile::TempDir) {
    common::app_with(config, Router::new())
}

async fn get(app: &Router, path: &str, key: Option<&str>) -> Response {
    let mut req = Request::get(path);
    if let Some(key) = key {
        req = req.header(header::AUTHORIZATION, format!("Bearer {key}"));
    }
    app.clone()
        .oneshot(req.body(Body::empty()).unwrap())
        .await
        .unwrap()
}

async fn json(r: Response) -> serde_json::Value {
    let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

#[tokio::test]
async fn config_reports_settings_but_never_the_key() {
    let config = ServerConfig {
        host: "127.0.0.1:9999".into(),
        api_key: Some("sekrit-key".into()),
        cors_origins: vec!["https://example.com".into()],
        threads: Some(3),
        ..ServerConfig::default()
    };
    let (app, _home) = app(&config);
    assert_eq!(
        get(&app, "/api/mlxr/config", None).await.status(),
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        get(&app, "/api/mlxr/logs", Some("wrong")).await.status(),
        StatusCode::UNAUTHORIZED
    );
    let r = get(&app, "/api/mlxr/config", Some("sekrit-key")).await;
    assert_eq!(r.status(), StatusCode::OK);
    let body = json(r).await;
    assert!(!body.to_string().contains("sekrit"), "{body}");
    assert_eq!(body["listen"]["host"], "127.0.0.1:9999");
    assert_eq!(body["security"]["api_key_set"], true);
    assert_eq!(body["security"]["origins"][0], "https://example.com");
    assert_eq!(body["models"]["keep_alive"], "10m");
    assert_eq!(body["models"]["max_loaded_models"], 3);
    assert_eq!(body["models"]["max_loaded_memory"], 1u64 << 30);
    assert_eq!(body["models"]["context_size"], 2048);
    assert_eq!(body["models"]["threads"], 3);
    assert_eq!(body["engine"]["max_num_seqs"], 4);
    assert_eq!(body["kv_cache"]["budget_bytes"], 256u64 << 20);
    assert_eq!(body["kv_cache"]["dtype"], "f16");
    assert_eq!(body["kv_cache"]["prefix_caching"], true);
}

#[tokio::test]
async fn config_without_a_key() {
    let (app, _home) = app(&ServerConfig::default());
    let body = json(get(&app, "/api/mlxr/config", None).await).await;
    assert_eq!(body["security"]["api_key_set"], false);
    assert_eq!(body["listen"]["socket"], serde_json::Value::Null);
}

/// The data of each `log` event in an SSE text.
fn log_messages(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter(|e| e.contains("event: log"))
        .filter_map(|e| e.lines().find_map(|l| l.strip_prefix("data: ")))
        .map(|d| {
            let line: serde_json::Value = serde_json::from_str(d).unwrap();
            line["message"].as_str().unwrap().to_string()
        })
        .collect()
}

#[tokio::test]
async fn logs_stream_the_tail_then_live_lines_until_shutdown() {
    let logs = LogBuffer::new(50);
    for i in 0..5 {
        logs.push("t".into(), "INFO", "test", format!("old {i}"));
    }
    let config = ServerConfig {
        logs: logs.clone(),
        ..ServerConfig::default()
    };
    let (app, _home) = app(&config);
    let r = get(&app, "/api/mlxr/logs?tail=2", None).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(r.headers()[header::CONTENT_TYPE], "text/event-stream");
    let mut body = r.into_body().into_data_stream();
    let mut text = String::new();
    while log_messages(&text).len() < 2 {
        let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
            .await
            .expect("the tail arrives")
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    assert_eq!(log_messages(&text), ["old 3", "old 4"]);
    assert!(text.contains("id: 4\n"), "{text}");

    logs.push("t".into(), "WARN", "test", "new line".into());
    logs.close();
    let rest = tokio::time::timeout(Duration::from_secs(5), async {
        while let Some(chunk) = body.next().await {
            text.push_str(std::str::from_utf8(&chunk.unwrap()).unwrap());
        }
    })
    .await;
    assert!(rest.is_ok(), "the stream ends when the buffer is closed");
    assert_eq!(log_messages(&text), ["old 3", "old 4", "new line"]);
}

#[tokio::test]
async fn a_bad_tail_is_a_client_error() {
    let (app, _home) = app(&ServerConfig::default());
    let r = get(&app, "/api/mlxr/logs?tail=lots", None).await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
}

async fn patch(app: &Router, body: &str) -> Response {
    let req = Request::patch("/api/mlxr/config")
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    app.clone().oneshot(req).await.unwrap()
}

#[tokio::test]
async fn keep_alive_is_the_one_setting_that_changes() {
    let (app, _home) = app(&ServerConfig::default());
    let r = patch(&app, r#"{"keep_alive": "1h"}"#).await;
    assert_eq!(r.status(), StatusCode::OK);
    assert_eq!(json(r).await["models"]["keep_alive"], "1h");
    let body = json(get(&app, "/api/mlxr/config", None).await).await;
    assert_eq!(body["models"]["keep_alive"], "1h");
    let r = patch(&app, r#"{"keep_alive": -1}"#).await;
    assert_eq!(json(r).await["models"]["keep_alive"], "-1");

    for (bad, says) in [
        (r#"{"keep_alive": "soon"}"#, "keep_alive: invalid duration"),
        (
            r#"{"max_loaded_models": 9}"#,
            "only keep_alive can be changed",
        ),
        (r#"{"keep_alive": [1]}"#, "keep_alive"),
        ("not json", "invalid JSON body"),
        ("", "missing request body"),
    ] {
        let r = patch(&app, bad).await;
        assert_eq!(r.status(), StatusCode::BAD_REQUEST, "{bad}");
        let message = json(r).await["error"].as_str().unwrap().to_string();
        assert!(message.contains(says), "{bad}: {message}");
    }
    let body = json(get(&app, "/api/mlxr/config", None).await).await;
    assert_eq!(
        body["models"]["keep_alive"], "-1",
        "bad updates change nothing"
    );
}

#[tokio::test]
async fn changing_settings_needs_the_key() {
    let config = ServerConfig {
        api_key: Some("k".into()),
        ..ServerConfig::default()
    };
    let (app, _home) = app(&config);
    let r = patch(&app, r#"{"keep_alive": "1h"}"#).await;
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let body = json(get(&app, "/api/mlxr/config", Some("k")).await).await;
    assert_eq!(body["models"]["keep_alive"], "10m");
}
