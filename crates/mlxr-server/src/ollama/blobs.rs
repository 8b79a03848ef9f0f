//! `HEAD|POST /api/blobs/{digest}`: the uploads `/api/create` builds models
//! from. An upload is refused before its body is read when its
//! `Content-Length` passes `--max-blob-size` (413) or the free disk space
//! of the blobs folder less a margin (507); a body without a length is cut
//! off at the cap. Nothing partial ever appears under a digest name.

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use futures_util::StreamExt;
use mlxr_registry::Digest;
use tokio::sync::mpsc;

use super::manage::registry_error;
use crate::error::{ApiError, OllamaError};
use crate::state::AppState;
use mlxr_engine::ByteSize;

/// The default `--max-blob-size`: well above the largest model this machine
/// can hold in memory, the larger of 64 GiB and 4 × physical RAM.
pub fn default_max_blob_size() -> u64 {
    (64u64 << 30).max(mlxr_engine::config::physical_memory().saturating_mul(4))
}

/// `HEAD /api/blobs/{digest}`: 200 when stored, 404 otherwise.
pub async fn blob_exists(State(state): State<AppState>, Path(digest): Path<String>) -> StatusCode {
    match Digest::parse(&digest) {
        Ok(d) if state.registry.has_blob(&d) => StatusCode::OK,
        Ok(_) => StatusCode::NOT_FOUND,
        Err(_) => StatusCode::BAD_REQUEST,
    }
}

/// `POST /api/blobs/{digest}`: stores the body if its sha256 is `digest`.
pub async fn blob_upload(
    State(state): State<AppState>,
    Path(digest): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, OllamaError> {
    let expected = Digest::parse(&digest).map_err(registry_error)?;
    if state.registry.has_blob(&expected) {
        return Ok(StatusCode::OK);
    }
    let limit = state.server.max_blob_size;
    let length = content_length(&headers)?;
    if let Some(length) = length.filter(|&l| l > limit) {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "the blob is {length} bytes, more than the daemon's --max-blob-size of {} \
                 (start it with a larger --max-blob-size)",
                ByteSize(limit)
            ),
        )
        .into());
    }
    state
        .registry
        .check_blob_space(length.unwrap_or(0))
        .map_err(registry_error)?;

    // The registry hashes and writes synchronously; feed it the body chunk
    // by chunk. When it stops early (over the cap, a failed write), the
    // send fails and the rest of the body is never read.
    let (tx, rx) = mpsc::channel::<Result<Bytes, String>>(8);
    let registry = state.registry.clone();
    let writer = tokio::task::spawn_blocking(move || {
        let mut reader = ChannelReader {
            rx,
            current: Bytes::new(),
        };
        registry.put_blob_capped(&mut reader, Some(&expected), limit)
    });
    let mut stream = body.into_data_stream();
    while let Some(chunk) = stream.next().await {
        let item = chunk.map_err(|e| e.to_string());
        let failed = item.is_err();
        if tx.send(item).await.is_err() || failed {
            break;
        }
    }
    drop(tx);
    match writer.await {
        Ok(Ok(_)) => Ok(StatusCode::CREATED),
        Ok(Err(e)) => Err(registry_error(e).into()),
        Err(e) => Err(ApiError::internal(format!("storing the blob panicked: {e}")).into()),
    }
}

fn content_length(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    headers
        .get(header::CONTENT_LENGTH)
        .map(|v| {
            v.to_str()
                .ok()
                .and_then(|v| v.trim().parse::<u64>().ok())
                .ok_or_else(|| ApiError::bad_request("Content-Length is not a number"))
        })
        .transpose()
}

/// The upload's chunks as a blocking [`std::io::Read`].
struct ChannelReader {
    rx: mpsc::Receiver<Result<Bytes, String>>,
    current: Bytes,
}

impl std::io::Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(Ok(bytes)) => self.current = bytes,
                Some(Err(e)) => {
                    return Err(std::io::Error::other(format!("upload interrupted: {e}")))
                }
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current[..n]);
        self.current = self.current.slice(n..);
        Ok(n)
    }
}
