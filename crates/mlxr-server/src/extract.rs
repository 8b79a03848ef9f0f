//! [`JsonBody`]: the one way handlers read a JSON request body.
//!
//! It requires `Content-Type: application/json` (or `application/*+json`).
//! A web page can send a "simple" cross-site request (no CORS preflight)
//! only with `text/plain`, form or multipart bodies, so requiring the JSON
//! type keeps other sites from driving the API through a user's browser.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use serde::de::DeserializeOwned;

use crate::error::ApiError;

/// A request body parsed as JSON into `T`; rejections are answered in the
/// shape of the API the path belongs to.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = Response;

    async fn from_request(req: Request, state: &S) -> Result<Self, Response> {
        let path = req.uri().path().to_string();
        check_content_type(req.headers()).map_err(|e| e.for_path(&path))?;
        let body = Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::new(e.status(), e.body_text()).for_path(&path))?;
        parse_json(&body)
            .map(JsonBody)
            .map_err(|e| e.for_path(&path))
    }
}

/// Parses a JSON body with a readable error instead of axum's plain-text
/// rejection (bad JSON and wrong types are 400s in both APIs). Public for
/// the fuzz targets, which feed it the bodies a handler would see.
pub fn parse_json<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, ApiError> {
    if body.is_empty() {
        return Err(ApiError::bad_request("missing request body"));
    }
    serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid JSON body: {e}")))
}

fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let given = headers.get(header::CONTENT_TYPE);
    if given.and_then(|v| v.to_str().ok()).is_some_and(is_json) {
        return Ok(());
    }
    let given = match given {
        Some(v) => format!("got '{}'", String::from_utf8_lossy(v.as_bytes())),
        None => "no Content-Type header".to_string(),
    };
    Err(ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        format!(
            "the request body must be JSON sent as Content-Type: application/json ({given}); \
             with curl, add -H 'Content-Type: application/json'"
        ),
    ))
}

/// `application/json` or `application/<anything>+json`, any parameters
/// (`; charset=utf-8`), any case.
fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || essence
            .strip_prefix("application/")
            .is_some_and(|sub| sub.len() > "+json".len() && sub.ends_with("+json"))
}

#[cfg(test)]
mod tests {
    use super::is_json;

    #[test]
    fn json_content_types() {
        for ok in [
            "application/json",
            "Application/JSON; charset=utf-8",
            "application/json;charset=UTF-8",
            "application/vnd.api+json",
            " application/merge-patch+json ",
        ] {
            assert!(is_json(ok), "{ok}");
        }
        for bad in [
            "text/plain",
            "text/plain; charset=application/json",
            "application/x-www-form-urlencoded",
            "multipart/form-data; boundary=x",
            "application/+json",
            "text/json",
            "application/jsonp",
            "",
        ] {
            assert!(!is_json(bad), "{bad}");
        }
    }
}
