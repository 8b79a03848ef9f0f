//! The CLI's client for the `mlxr serve` API under `/api`: blocking HTTP
//! (TCP or the Unix socket), or gRPC ([`super::grpc_client`]) for a
//! `grpc://` / `grpc+unix:` host. Either way the commands send the REST
//! API's JSON bodies and read its answers.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{anyhow, Context, Result};
use serde_json::Value;
use ureq::http::Response;
#[cfg(unix)]
use ureq::unversioned::resolver::DefaultResolver;
use ureq::{Agent, Body, SendBody};

use super::grpc_client::{GrpcClient, GrpcTarget};
#[cfg(unix)]
use super::unix_socket::UnixConnector;

pub const DEFAULT_HOST: &str = "127.0.0.1:11435";

/// A streamed answer: one REST-shaped JSON value per line. A line with an
/// `error` field ends the stream with that error.
pub type Lines = Box<dyn Iterator<Item = Result<Value>>>;

pub enum Client {
    Http(HttpClient),
    Grpc(GrpcClient),
}

pub struct HttpClient {
    agent: Agent,
    /// `http://host:port`, without a trailing slash.
    base: String,
    /// `host:port` as the user wrote it, for messages.
    display: String,
    /// `MLXR_API_KEY`, sent as `Authorization: Bearer`.
    api_key: Option<String>,
}

/// An API call's error: the server's `error` message, or a failed connection.
#[derive(Debug)]
pub struct ApiError {
    pub status: u16,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for ApiError {}

impl Client {
    /// `--host`, else `MLXR_HOST`, else the default: `host:port`, a URL,
    /// `unix:PATH` (also `unix://PATH`) for `mlxr serve --socket PATH`, or
    /// `grpc://HOST:PORT` / `grpc+unix:PATH` for the gRPC API. The API key
    /// comes from `MLXR_API_KEY`.
    pub fn new(host: Option<&str>) -> Result<Client> {
        let env = |key: &str| std::env::var(key).ok().filter(|v| !v.is_empty());
        let host = host
            .map(str::to_string)
            .or(env("MLXR_HOST"))
            .unwrap_or_else(|| DEFAULT_HOST.to_string());
        let api_key = env("MLXR_API_KEY");
        if let Some(target) = GrpcTarget::parse(&host) {
            return Ok(Client::Grpc(GrpcClient::new(target, host, api_key)?));
        }
        Ok(Client::Http(HttpClient::new(&host, api_key)))
    }

    pub fn get(&self, path: &str) -> Result<Value> {
        match self {
            Client::Http(c) => c.get(path),
            Client::Grpc(c) => c.get(path),
        }
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Value> {
        match self {
            Client::Http(c) => c.post(path, body),
            Client::Grpc(c) => c.post(path, body),
        }
    }

    pub fn delete(&self, path: &str, body: &Value) -> Result<()> {
        match self {
            Client::Http(c) => c.delete(path, body),
            Client::Grpc(c) => c.delete(path, body),
        }
    }

    pub fn post_stream(&self, path: &str, body: &Value) -> Result<Lines> {
        match self {
            Client::Http(c) => Ok(Box::new(c.post_stream(path, body)?)),
            Client::Grpc(c) => c.post_stream(path, body),
        }
    }

    /// `HEAD`: whether the resource exists (2xx) or not (404).
    pub fn exists(&self, path: &str) -> Result<bool> {
        match self {
            Client::Http(c) => c.exists(path),
            Client::Grpc(c) => Err(c.not_for_uploads()),
        }
    }

    /// POSTs `len` bytes of `body` with a Content-Length (so the daemon can
    /// refuse an upload over its limits before it is sent).
    pub fn upload(&self, path: &str, body: &mut dyn Read, len: u64) -> Result<()> {
        match self {
            Client::Http(c) => c.upload(path, body, len),
            Client::Grpc(c) => Err(c.not_for_uploads()),
        }
    }
}

impl HttpClient {
    fn new(host: &str, api_key: Option<String>) -> HttpClient {
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(5)))
            .build();
        #[cfg(unix)]
        if let Some(path) = host.strip_prefix("unix:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            return HttpClient {
                agent: Agent::with_parts(
                    config,
                    UnixConnector::new(PathBuf::from(path)),
                    DefaultResolver::default(),
                ),
                base: "http://localhost".to_string(),
                display: format!("unix:{path}"),
                api_key,
            };
        }
        let host = host.trim_end_matches('/');
        let base = if host.starts_with("http://") || host.starts_with("https://") {
            host.to_string()
        } else {
            format!("http://{host}")
        };
        let display = base
            .trim_start_matches("http://")
            .trim_start_matches("https://")
            .to_string();
        HttpClient {
            agent: config.into(),
            base,
            display,
            api_key,
        }
    }

    fn authed<B>(&self, request: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.api_key {
            Some(key) => request.header("authorization", format!("Bearer {key}")),
            None => request,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn connect_error(&self) -> anyhow::Error {
        anyhow!(
            "could not connect to mlxr serve at {} (start it with `mlxr serve`)",
            self.display
        )
    }

    /// Turns a transport error into the one-line "could not connect" message
    /// and a non-2xx response into the server's `error` message.
    fn check(&self, result: Result<Response<Body>, ureq::Error>) -> Result<Response<Body>> {
        let mut response = match result {
            Ok(r) => r,
            Err(
                ureq::Error::Io(_)
                | ureq::Error::ConnectionFailed
                | ureq::Error::HostNotFound
                | ureq::Error::Timeout(_),
            ) => return Err(self.connect_error()),
            Err(e) => return Err(anyhow!("{}: {e}", self.display)),
        };
        let status = response.status().as_u16();
        if (200..300).contains(&status) {
            return Ok(response);
        }
        let text = response.body_mut().read_to_string().unwrap_or_default();
        let message = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_string))
            .unwrap_or_else(|| format!("server answered {status}: {}", text.trim()));
        Err(ApiError { status, message }.into())
    }

    pub fn get(&self, path: &str) -> Result<Value> {
        let response = self.check(self.authed(self.agent.get(self.url(path))).call())?;
        read_json(response)
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Value> {
        let response =
            self.check(self.send_json(self.authed(self.agent.post(self.url(path))), body))?;
        read_json(response)
    }

    pub fn delete(&self, path: &str, body: &Value) -> Result<()> {
        let request = self
            .authed(self.agent.delete(self.url(path)))
            .force_send_body();
        self.check(self.send_json(request, body))?;
        Ok(())
    }

    /// A POST whose answer is NDJSON: one `Value` per line. A line with an
    /// `error` field ends the stream with that error.
    pub fn post_stream(&self, path: &str, body: &Value) -> Result<NdJson> {
        let response =
            self.check(self.send_json(self.authed(self.agent.post(self.url(path))), body))?;
        Ok(NdJson {
            lines: BufReader::new(response.into_body().into_reader()),
        })
    }

    /// `HEAD`: whether the resource exists (2xx) or not (404).
    pub fn exists(&self, path: &str) -> Result<bool> {
        match self.check(self.authed(self.agent.head(self.url(path))).call()) {
            Ok(_) => Ok(true),
            Err(e)
                if e.downcast_ref::<ApiError>()
                    .is_some_and(|e| e.status == 404) =>
            {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// POSTs `len` bytes of `body` with a Content-Length (so the daemon can
    /// refuse an upload over its limits before it is sent).
    pub fn upload(&self, path: &str, body: &mut dyn Read, len: u64) -> Result<()> {
        let request = self
            .authed(self.agent.post(self.url(path)))
            .header("content-length", len.to_string())
            // The daemon answers 413/507 before taking a body it cannot keep.
            .header("expect", "100-continue")
            .content_type("application/octet-stream");
        self.check(request.send(SendBody::from_reader(body)))?;
        Ok(())
    }

    fn send_json(
        &self,
        request: ureq::RequestBuilder<ureq::typestate::WithBody>,
        body: &Value,
    ) -> Result<Response<Body>, ureq::Error> {
        request
            .content_type("application/json")
            .send(body.to_string())
    }
}

fn read_json(mut response: Response<Body>) -> Result<Value> {
    let text = response
        .body_mut()
        .read_to_string()
        .context("reading the server's answer")?;
    if text.trim().is_empty() {
        return Ok(Value::Null);
    }
    serde_json::from_str(&text).context("the server's answer is not JSON")
}

pub struct NdJson {
    lines: BufReader<ureq::BodyReader<'static>>,
}

impl Iterator for NdJson {
    type Item = Result<Value>;

    fn next(&mut self) -> Option<Result<Value>> {
        let mut line = String::new();
        loop {
            line.clear();
            match self.lines.read_line(&mut line) {
                Ok(0) => return None,
                Ok(_) if line.trim().is_empty() => continue,
                Ok(_) => break,
                Err(e) => return Some(Err(anyhow!("reading the server's answer: {e}"))),
            }
        }
        let value: Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(e) => return Some(Err(anyhow!("bad line from the server: {e}"))),
        };
        if let Some(error) = value["error"].as_str() {
            return Some(Err(anyhow!("{error}")));
        }
        Some(Ok(value))
    }
}

/// Whether `err` is the server saying "not found".
pub fn is_not_found(err: &anyhow::Error) -> bool {
    err.downcast_ref::<ApiError>()
        .is_some_and(|e| e.status == 404)
}
