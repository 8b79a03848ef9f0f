//! Resumable HTTP downloads into blobs, and Hugging Face file resolution.
//!
//! A download writes `blobs/sha256-<key>-partial` (the key is the expected
//! digest when known, else a hash of the URL). A later pull of the same URL
//! hashes the partial bytes again and asks for the rest with `Range`; a
//! server that ignores the range (200) restarts the file. The finished file
//! is verified, fsynced and renamed to its digest name.

use std::fs::{self, File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use crate::blobs::{copy_chunks, sync_dir};
use crate::db;
use crate::digest::Digest;
use crate::error::{RegistryError, Result};
use crate::pull::{pulling_status, Reporter};
use crate::registry::Registry;

/// Environment variable overriding the Hugging Face endpoint.
pub const HF_ENDPOINT_ENV: &str = "HF_ENDPOINT";
const HF_DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Redirects followed per request (the Hub sends one, to its CDN).
const MAX_REDIRECTS: usize = 10;

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .http_status_as_error(false)
        // Redirects are followed by `get`, which checks every hop.
        .max_redirects(0)
        .timeout_connect(Some(Duration::from_secs(30)))
        .user_agent(concat!("mlxr/", env!("CARGO_PKG_VERSION")))
        .build()
        .into()
}

fn http_err(url: &str, reason: impl ToString) -> RegistryError {
    RegistryError::Http {
        url: url.to_string(),
        reason: reason.to_string(),
    }
}

/// `GET url` (with `range`), following redirects; every URL, the first
/// and each `Location`, must pass the registry's [`crate::PullPolicy`].
fn get(
    reg: &Registry,
    agent: &ureq::Agent,
    url: &str,
    range: Option<&str>,
) -> Result<ureq::http::Response<ureq::Body>> {
    let mut current = url.to_string();
    for _ in 0..=MAX_REDIRECTS {
        reg.policy.check_url(&current, &reg.hf_endpoint)?;
        let mut req = agent.get(&current);
        if let Some(range) = range {
            req = req.header("Range", range);
        }
        let resp = req.call().map_err(|e| http_err(&current, e))?;
        if !resp.status().is_redirection() {
            return Ok(resp);
        }
        let location = resp
            .headers()
            .get("location")
            .and_then(|v| v.to_str().ok())
            .ok_or_else(|| {
                http_err(
                    &current,
                    format!("HTTP status {} without a Location", resp.status()),
                )
            })?;
        current = join_location(&current, location);
    }
    Err(http_err(
        url,
        format!("more than {MAX_REDIRECTS} redirects"),
    ))
}

/// Resolves a `Location` header against the URL that answered it.
fn join_location(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let (scheme, rest) = base.split_once("://").unwrap_or(("https", base));
    if let Some(net_path) = location.strip_prefix("//") {
        return format!("{scheme}://{net_path}");
    }
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let origin = format!("{scheme}://{}", &rest[..authority_end]);
    if location.starts_with('/') {
        return format!("{origin}{location}");
    }
    let path = rest[authority_end..].split(['?', '#']).next().unwrap_or("");
    let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    let dir = if dir.is_empty() { "/" } else { dir };
    format!("{origin}{dir}{location}")
}

/// Downloads `url` into a blob (resuming a partial download) and returns its
/// digest. With `expected`, or a SHA-256 ETag when `trust_etag`, the content
/// is verified against it; a mismatch deletes the partial file.
pub(crate) fn fetch_url(
    reg: &Registry,
    url: &str,
    expected: Option<Digest>,
    trust_etag: bool,
    r: &mut Reporter<'_>,
) -> Result<Digest> {
    let key = match &expected {
        Some(d) => d.hex().to_string(),
        None => Digest::of_bytes(url.as_bytes()).hex().to_string(),
    };
    // Another pull of the same file would truncate and interleave writes
    // with this one: wait for it, then find its result below.
    let waiting = format!("waiting for another pull of {}", file_label(url));
    let _claim = reg.blobs.claim_partial(&key, r, &waiting)?;
    // Already downloaded: by known digest, or by this URL's last result.
    let known = match expected.clone() {
        Some(d) => Some(d),
        None => db::source_digest(&reg.lock(), url)?,
    };
    if let Some(d) = known.filter(|d| reg.blobs.exists(d)) {
        let size = fs::metadata(reg.blobs.path(&d)).map(|m| m.len()).ok();
        r.bytes(
            &pulling_status(Some(&d), ""),
            Some(&d),
            size,
            size.unwrap_or(0),
        )?;
        return Ok(d);
    }

    let partial = reg.blobs.partial_path(&key);
    let agent = agent();
    let mut expected = expected;
    // Two attempts: the second restarts from zero if the range was refused.
    for attempt in 0..2 {
        let offset = if attempt == 0 {
            fs::metadata(&partial).map(|m| m.len()).unwrap_or(0)
        } else {
            let _ = fs::remove_file(&partial);
            0
        };
        let range = (offset > 0).then(|| format!("bytes={offset}-"));
        let resp = get(reg, &agent, url, range.as_deref())?;
        let status = resp.status().as_u16();
        if status == 416 && offset > 0 {
            continue;
        }
        if !(status == 200 || status == 206) {
            return Err(http_err(url, format!("HTTP status {status}")));
        }
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_string)
        };
        if expected.is_none() && trust_etag {
            expected = header("x-linked-etag")
                .or_else(|| header("etag"))
                .and_then(|e| Digest::from_hex(e.trim_start_matches("W/").trim_matches('"')).ok());
        }
        let length: Option<u64> = header("content-length").and_then(|v| v.parse().ok());
        let resumed = status == 206;
        if resumed {
            let range_ok =
                header("content-range").is_some_and(|v| v.starts_with(&format!("bytes {offset}-")));
            if !range_ok {
                continue;
            }
        }
        let start = if resumed { offset } else { 0 };
        let total = length.map(|l| l + start);

        let mut file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&partial)
            .map_err(|e| RegistryError::io_at("opening", &partial, e))?;
        file.set_len(start)
            .and_then(|_| file.seek(SeekFrom::Start(start)).map(|_| ()))
            .map_err(|e| RegistryError::io_at("preparing", &partial, e))?;
        let mut hasher = hash_prefix(&partial, start)?;

        let status_line = pulling_status(expected.as_ref(), file_label(url));
        r.bytes(&status_line, expected.as_ref(), total, start)?;
        let mut body = resp.into_body().into_reader();
        copy_chunks(
            &mut body,
            &mut |chunk| {
                hasher.update(chunk);
                file.write_all(chunk)
                    .map_err(|e| RegistryError::io_at("writing", &partial, e))
            },
            &mut |done| r.bytes(&status_line, expected.as_ref(), total, start + done),
        )
        .map_err(|e| match e {
            RegistryError::Io { context, source } if context.is_empty() => {
                http_err(url, format!("transfer interrupted: {source}"))
            }
            e => e,
        })?;
        file.sync_all()
            .map_err(|e| RegistryError::io_at("syncing", &partial, e))?;
        drop(file);
        let actual = Digest::from_hasher(hasher);
        if let Some(expected) = &expected {
            if *expected != actual {
                let _ = fs::remove_file(&partial);
                return Err(RegistryError::DigestMismatch {
                    expected: expected.clone(),
                    actual,
                });
            }
        }
        reg.blobs.install(&partial, &actual)?;
        sync_dir(reg.blobs.dir());
        db::set_source_digest(&reg.lock(), url, &actual)?;
        return Ok(actual);
    }
    Err(http_err(url, "the server rejected the resume range twice"))
}

/// A hasher fed with the first `len` bytes of `path`.
fn hash_prefix(path: &Path, len: u64) -> Result<Sha256> {
    let mut hasher = Sha256::new();
    if len > 0 {
        let mut f = File::open(path).map_err(|e| RegistryError::io_at("opening", path, e))?;
        let mut limited = std::io::Read::take(&mut f, len);
        std::io::copy(&mut limited, &mut hasher)
            .map_err(|e| RegistryError::io_at("reading", path, e))?;
    }
    Ok(hasher)
}

fn file_label(url: &str) -> &str {
    url.split(['?', '#'])
        .next()
        .unwrap_or(url)
        .rsplit('/')
        .next()
        .unwrap_or(url)
}

/// `HF_ENDPOINT`, else huggingface.co, without a trailing slash.
pub(crate) fn hf_endpoint_from_env() -> String {
    std::env::var(HF_ENDPOINT_ENV)
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| HF_DEFAULT_ENDPOINT.to_string())
        .trim_end_matches('/')
        .to_string()
}

/// What to download from a Hugging Face repository.
#[derive(Debug, PartialEq)]
pub(crate) enum HfFiles {
    /// One GGUF file's URL.
    Gguf(String),
    /// A safetensors model folder: the repository's file names (weights,
    /// index and companion files; no GGUF in the repository).
    Folder(Vec<String>),
}

/// The URL of `file` in `repo` (main branch).
pub(crate) fn hf_file_url(reg: &Registry, repo: &str, file: &str) -> String {
    format!("{}/{repo}/resolve/main/{file}", reg.hf_endpoint)
}

/// What to pull from `repo`: `file_or_quant` names a `.gguf` file, or a
/// quantization (`Q4_K_M`) to look for in the repo's file list;
/// `None`/`latest` prefers Q4_K_M, then the first GGUF; a repository without
/// GGUF files is pulled as a safetensors folder (Hugging Face or MLX).
pub(crate) fn resolve_hf(
    reg: &Registry,
    repo: &str,
    file_or_quant: Option<&str>,
) -> Result<HfFiles> {
    let wanted = file_or_quant.filter(|q| !q.eq_ignore_ascii_case("latest"));
    if let Some(file) = wanted.filter(|f| f.to_ascii_lowercase().ends_with(".gguf")) {
        return Ok(HfFiles::Gguf(hf_file_url(reg, repo, file)));
    }
    let api = format!("{}/api/models/{repo}", reg.hf_endpoint);
    let resp = get(reg, &agent(), &api, None)?;
    let status = resp.status().as_u16();
    if status != 200 {
        return Err(http_err(&api, format!("HTTP status {status}")));
    }
    let text = resp
        .into_body()
        .read_to_string()
        .map_err(|e| http_err(&api, e))?;
    let info: serde_json::Value = serde_json::from_str(&text).map_err(|e| http_err(&api, e))?;
    let siblings: Vec<String> = info["siblings"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["rfilename"].as_str().map(str::to_string))
        .collect();
    let mut ggufs: Vec<String> = siblings
        .iter()
        .filter(|f| f.to_ascii_lowercase().ends_with(".gguf") && !f.contains("mmproj"))
        .cloned()
        .collect();
    ggufs.sort();
    if ggufs.is_empty() && wanted.is_none() {
        let has = |f: &str| siblings.iter().any(|s| s == f);
        if has("model.safetensors") || has("model.safetensors.index.json") {
            return Ok(HfFiles::Folder(siblings));
        }
    }
    let pick = |quant: &str| {
        let q = quant.to_ascii_uppercase();
        ggufs
            .iter()
            .find(|f| {
                let up = f.to_ascii_uppercase();
                up.contains(&format!(".{q}."))
                    || up.contains(&format!("-{q}."))
                    || up.contains(&format!("_{q}."))
            })
            .cloned()
    };
    let file = match wanted {
        Some(q) => pick(q).ok_or_else(|| RegistryError::UnknownSource {
            spec: format!("hf.co/{repo}:{q}"),
            reason: format!("no GGUF file for {q} (files: {})", ggufs.join(", ")),
        })?,
        None => pick("Q4_K_M")
            .or_else(|| ggufs.first().cloned())
            .ok_or_else(|| RegistryError::UnknownSource {
                spec: format!("hf.co/{repo}"),
                reason: "the repository has neither GGUF files nor safetensors weights".to_string(),
            })?,
    };
    Ok(HfFiles::Gguf(hf_file_url(reg, repo, &file)))
}

#[cfg(test)]
mod tests {
    use super::join_location;

    #[test]
    fn locations_resolve_against_the_url() {
        let base = "https://hub.example/org/repo/resolve/main/m.gguf?x=1";
        for (location, want) in [
            ("https://cdn.example/a", "https://cdn.example/a"),
            ("http://cdn.example/a", "http://cdn.example/a"),
            ("//cdn.example/a", "https://cdn.example/a"),
            ("/api/x", "https://hub.example/api/x"),
            (
                "other.gguf",
                "https://hub.example/org/repo/resolve/main/other.gguf",
            ),
        ] {
            assert_eq!(join_location(base, location), want, "{location}");
        }
        assert_eq!(join_location("http://h:1", "a"), "http://h:1/a");
    }
}
