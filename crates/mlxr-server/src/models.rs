//! Loaded models: load on first use, keep alive for a while after the last
//! request, unload the least recently used one when too many are loaded.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use chrono::{DateTime, Utc};
use mlxr_engine::{file_key, DecoderModel, DeviceChoice, EngineConfig, EngineHandle, LoadedModel};
use tokio::sync::Mutex;

use mlxr_embed::EmbeddingModel;

use crate::catalog::{
    model_draft, resolve_draft, with_tag, ModelCatalog, ModelKind, ModelSpec, MODEL_DRAFT_PARAMETER,
};
use crate::error::ApiError;
use crate::limits;
use axum::http::StatusCode;

/// How long a model stays loaded after a request.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum KeepAlive {
    For(Duration),
    Forever,
    /// Unload as soon as the request is done.
    UnloadNow,
}

impl KeepAlive {
    /// Ollama's forms: seconds as a number, or a Go duration string
    /// ("5m", "1h30m", "10s", "0"); any negative value means forever (as in
    /// Ollama), 0 unloads now. Values that are not finite or are longer than
    /// [`limits::MAX_KEEP_ALIVE`] are refused.
    pub fn parse(value: &serde_json::Value) -> Result<KeepAlive, String> {
        let seconds = match value {
            serde_json::Value::Number(n) => n.as_f64().ok_or("keep_alive is not a number")?,
            serde_json::Value::String(s) => parse_go_duration(s)?,
            other => return Err(format!("keep_alive must be a duration, got {other}")),
        };
        let max = limits::MAX_KEEP_ALIVE;
        if !seconds.is_finite() {
            return Err(format!(
                "keep_alive {value} is not a duration; give e.g. 5m, 1h, 3600, or -1 to keep \
                 the model loaded"
            ));
        }
        Ok(if seconds < 0.0 {
            KeepAlive::Forever
        } else if seconds == 0.0 {
            KeepAlive::UnloadNow
        } else if seconds > max.as_secs_f64() {
            return Err(format!(
                "keep_alive {value} is longer than {}h (100 years); give -1 to keep the model \
                 loaded",
                max.as_secs() / 3600
            ));
        } else {
            KeepAlive::For(Duration::from_secs_f64(seconds))
        })
    }
}

/// Seconds of a Go-style duration (`5m`, `1h30m`, `250ms`) or a number.
pub fn parse_go_duration(s: &str) -> Result<f64, String> {
    let bad = || format!("invalid duration '{s}' (e.g. 5m, 1h, 30s, -1)");
    let t = s.trim();
    if let Ok(n) = t.parse::<f64>() {
        return Ok(n);
    }
    let (sign, mut rest) = match t.strip_prefix('-') {
        Some(r) => (-1.0, r),
        None => (1.0, t),
    };
    if rest.is_empty() {
        return Err(bad());
    }
    let mut total = 0.0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        let value: f64 = rest[..num_end].parse().map_err(|_| bad())?;
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_end] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = &rest[unit_end..];
    }
    Ok(sign * total)
}

/// A loaded model as `/api/ps` shows it.
#[derive(Clone)]
pub struct LoadedInfo {
    pub spec: ModelSpec,
    pub context_length: usize,
    /// Where it runs (`--device` notation).
    pub device: String,
    /// `None`: kept forever.
    pub expires_at: Option<DateTime<Utc>>,
}

/// A loaded model: a generation engine or an embedding model.
#[derive(Clone)]
enum Backend {
    Engine(EngineHandle),
    Embedder(Arc<EmbeddingModel>),
}

/// The weights every loaded engine holds (its model's and its draft
/// model's), by file.
type LoadedWeights = HashMap<PathBuf, Arc<DecoderModel>>;

fn loaded_weights(loaded: &HashMap<String, Loaded>) -> LoadedWeights {
    let mut weights = LoadedWeights::new();
    for l in loaded.values() {
        if let Backend::Engine(engine) = &l.backend {
            for lm in std::iter::once(engine.model()).chain(engine.draft_model()) {
                weights
                    .entry(file_key(&lm.path))
                    .or_insert_with(|| lm.model.clone());
            }
        }
    }
    weights
}

/// The weight files the loaded engines hold, each once, with its size.
fn held_files(loaded: &HashMap<String, Loaded>) -> HashMap<PathBuf, u64> {
    loaded
        .values()
        .flat_map(|l| l.files.iter().cloned())
        .collect()
}

struct Loaded {
    backend: Backend,
    spec: ModelSpec,
    /// Bytes of its own: the KV cache a generation engine allocates, an
    /// embedding model's weights.
    memory: u64,
    /// The weight files a generation engine holds (its model's and its
    /// draft model's), by [`file_key`], with their sizes: a file held by
    /// several engines is in memory once.
    files: Vec<(PathBuf, u64)>,
    expires: Option<Instant>,
    last_used: Instant,
}

pub struct ModelManager {
    catalog: Arc<dyn ModelCatalog>,
    engine_config: EngineConfig,
    context_size: Option<usize>,
    /// Changeable at run time (`PATCH /api/mlxr/config`).
    default_keep_alive: std::sync::Mutex<KeepAlive>,
    max_loaded: usize,
    /// Bytes all loaded models may take (weights plus KV cache), if capped.
    max_memory: Option<u64>,
    loaded: Mutex<HashMap<String, Loaded>>,
    /// Loads in progress (`/health` answers 503 meanwhile).
    loading: std::sync::atomic::AtomicUsize,
    /// How long a request waits for another request's model load before
    /// it is answered 503.
    load_timeout: Duration,
}

/// Ollama's default (`OLLAMA_LOAD_TIMEOUT`).
pub const DEFAULT_LOAD_TIMEOUT: Duration = Duration::from_secs(300);

/// What a request gets: the engine and how long loading took.
pub struct Acquired {
    pub engine: EngineHandle,
    pub spec: ModelSpec,
    pub load_duration: Duration,
}

/// What an embedding request gets.
pub struct AcquiredEmbedder {
    pub model: Arc<EmbeddingModel>,
    pub spec: ModelSpec,
    pub load_duration: Duration,
}

impl ModelManager {
    pub fn new(
        catalog: Arc<dyn ModelCatalog>,
        engine_config: EngineConfig,
        context_size: Option<usize>,
        default_keep_alive: KeepAlive,
        max_loaded: usize,
    ) -> Self {
        Self {
            catalog,
            engine_config,
            context_size,
            default_keep_alive: std::sync::Mutex::new(default_keep_alive),
            max_loaded: max_loaded.max(1),
            max_memory: None,
            loaded: Mutex::new(HashMap::new()),
            loading: std::sync::atomic::AtomicUsize::new(0),
            load_timeout: DEFAULT_LOAD_TIMEOUT,
        }
    }

    /// How long a request waits while another request loads a model;
    /// past it the request gets 503 (the load goes on).
    pub fn with_load_timeout(mut self, timeout: Duration) -> Self {
        self.load_timeout = timeout;
        self
    }

    pub fn load_timeout(&self) -> Duration {
        self.load_timeout
    }

    /// Caps the memory of loaded models: least recently used ones unload
    /// to make room, and a model larger than the cap is refused.
    pub fn with_max_memory(mut self, bytes: Option<u64>) -> Self {
        self.max_memory = bytes;
        self
    }

    /// What loading `spec` takes beside its weight files: the KV cache a
    /// generation engine allocates (a draft model's shares its budget), an
    /// embedding model's weights; and the weight files ([`Loaded::files`]).
    fn memory_estimate(&self, spec: &ModelSpec) -> (u64, Vec<(PathBuf, u64)>) {
        match spec.kind {
            ModelKind::Generate => {
                let mut files = vec![(file_key(&spec.path), spec.size)];
                let draft = self
                    .engine_config_for(spec)
                    .ok()
                    .and_then(|c| c.draft_model);
                if let Some(draft) = draft {
                    let key = file_key(&draft);
                    if key != files[0].0 {
                        let size = std::fs::metadata(&draft).map_or(0, |m| m.len());
                        files.push((key, size));
                    }
                }
                (self.engine_config.kv_budget.bytes(), files)
            }
            ModelKind::Embed => (spec.size, Vec::new()),
        }
    }

    pub fn catalog(&self) -> &Arc<dyn ModelCatalog> {
        &self.catalog
    }

    /// How long a model stays loaded after a request that names no `keep_alive`.
    pub fn default_keep_alive(&self) -> KeepAlive {
        *self
            .default_keep_alive
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the default for later requests; loaded models keep the
    /// expiry their last request gave them.
    pub fn set_default_keep_alive(&self, keep_alive: KeepAlive) {
        *self
            .default_keep_alive
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = keep_alive;
    }

    pub fn engine_config(&self) -> &EngineConfig {
        &self.engine_config
    }

    /// The context size every model gets (`None`: its trained one).
    pub fn context_size(&self) -> Option<usize> {
        self.context_size
    }

    pub fn max_loaded(&self) -> usize {
        self.max_loaded
    }

    /// The memory cap of loaded models, in bytes.
    pub fn max_memory(&self) -> Option<u64> {
        self.max_memory
    }

    pub fn resolve(&self, name: &str) -> Result<ModelSpec, ApiError> {
        self.catalog
            .resolve(name)
            .map_err(ApiError::internal)?
            .ok_or_else(|| ApiError::model_not_found(name))
    }

    /// The model's engine, loading it if needed (loads are serialised).
    pub async fn acquire(
        &self,
        name: &str,
        keep_alive: Option<KeepAlive>,
    ) -> Result<Acquired, ApiError> {
        let (backend, spec, load_duration) = self
            .acquire_backend(name, keep_alive, ModelKind::Generate)
            .await?;
        match backend {
            Backend::Engine(engine) => Ok(Acquired {
                engine,
                spec,
                load_duration,
            }),
            Backend::Embedder(_) => unreachable!("kind checked"),
        }
    }

    /// An embedding model, loading it if needed.
    pub async fn acquire_embedder(
        &self,
        name: &str,
        keep_alive: Option<KeepAlive>,
    ) -> Result<AcquiredEmbedder, ApiError> {
        let (backend, spec, load_duration) = self
            .acquire_backend(name, keep_alive, ModelKind::Embed)
            .await?;
        match backend {
            Backend::Embedder(model) => Ok(AcquiredEmbedder {
                model,
                spec,
                load_duration,
            }),
            Backend::Engine(_) => unreachable!("kind checked"),
        }
    }

    async fn acquire_backend(
        &self,
        name: &str,
        keep_alive: Option<KeepAlive>,
        kind: ModelKind,
    ) -> Result<(Backend, ModelSpec, Duration), ApiError> {
        let spec = self.resolve(name)?;
        if spec.kind != kind {
            return Err(ApiError::bad_request(match kind {
                ModelKind::Embed => format!("model '{name}' does not support embeddings"),
                ModelKind::Generate => {
                    format!("model '{name}' is an embedding model; it does not generate text")
                }
            }));
        }
        let key = with_tag(&spec.name);
        let keep_alive = keep_alive.unwrap_or_else(|| self.default_keep_alive());
        let started = Instant::now();
        let Ok(mut loaded) = tokio::time::timeout(self.load_timeout, self.loaded.lock()).await
        else {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                format!(
                    "model '{name}' is not available yet: a model load has taken longer than \
                     {:?} (--load-timeout); retry shortly",
                    self.load_timeout
                ),
            ));
        };
        if !loaded.contains_key(&key) {
            let (own, files) = self.memory_estimate(&spec);
            let alone = own + files.iter().map(|(_, size)| size).sum::<u64>();
            if let Some(cap) = self.max_memory {
                if alone > cap {
                    return Err(ApiError::bad_request(format!(
                        "model '{name}' needs about {} MiB (weights and KV cache) but the server \
                         may hold {} MiB of models (--max-loaded-memory)",
                        alone >> 20,
                        cap >> 20
                    )));
                }
            }
            // Weight files already held (by another model, or as a draft
            // model) are shared, not loaded again.
            let over = |loaded: &HashMap<String, Loaded>| {
                let held = held_files(loaded);
                let new_files: u64 = files
                    .iter()
                    .filter(|(path, _)| !held.contains_key(path))
                    .map(|(_, size)| size)
                    .sum();
                let held_bytes: u64 =
                    loaded.values().map(|l| l.memory).sum::<u64>() + held.values().sum::<u64>();
                loaded.len() >= self.max_loaded
                    || self
                        .max_memory
                        .is_some_and(|cap| held_bytes + own + new_files > cap)
            };
            while !loaded.is_empty() && over(&loaded) {
                let oldest = loaded
                    .iter()
                    .min_by_key(|(_, l)| l.last_used)
                    .map(|(k, _)| k.clone())
                    .expect("non-empty");
                tracing::info!(model = %oldest, "unloading (model count or memory cap reached)");
                loaded.remove(&oldest);
            }
            let weights = loaded_weights(&loaded);
            let backend = self.load(&spec, &weights).await?;
            loaded.insert(
                key.clone(),
                Loaded {
                    backend,
                    spec: spec.clone(),
                    memory: own,
                    files,
                    expires: None,
                    last_used: Instant::now(),
                },
            );
        }
        let load_duration = started.elapsed();
        let entry = loaded.get_mut(&key).expect("inserted above");
        entry.last_used = Instant::now();
        entry.expires = expiry(keep_alive);
        Ok((entry.backend.clone(), entry.spec.clone(), load_duration))
    }

    /// Where generation models run.
    pub fn device(&self) -> DeviceChoice {
        self.engine_config.device
    }

    pub fn is_loading(&self) -> bool {
        self.loading.load(std::sync::atomic::Ordering::Relaxed) > 0
    }

    async fn load(&self, spec: &ModelSpec, weights: &LoadedWeights) -> Result<Backend, ApiError> {
        use std::sync::atomic::Ordering::Relaxed;
        self.loading.fetch_add(1, Relaxed);
        let result = self.load_now(spec, weights).await;
        self.loading.fetch_sub(1, Relaxed);
        result
    }

    async fn load_now(
        &self,
        spec: &ModelSpec,
        weights: &LoadedWeights,
    ) -> Result<Backend, ApiError> {
        tracing::info!(model = %spec.name, path = %spec.path.display(), "loading");
        if spec.kind == ModelKind::Embed {
            let path = spec.path.clone();
            return tokio::task::spawn_blocking(move || EmbeddingModel::load(&path))
                .await
                .map_err(|e| ApiError::internal(format!("loading the model panicked: {e}")))?
                .map(|m| Backend::Embedder(Arc::new(m)))
                .map_err(|e| ApiError::internal(format!("loading model '{}': {e}", spec.name)));
        }
        let path = spec.path.clone();
        let context = self.context_size;
        let config = self.engine_config_for(spec)?;
        let template = spec.template.clone();
        // A model and a draft model loaded from the same file share one copy
        // of the weights.
        let shared = weights.get(&file_key(&path)).cloned();
        let draft_shared = config
            .draft_model
            .as_deref()
            .and_then(|p| weights.get(&file_key(p)).cloned());
        if shared.is_some() || draft_shared.is_some() {
            tracing::info!(model = %spec.name, "sharing weights already loaded from the same file");
        }
        tokio::task::spawn_blocking(move || {
            let mut lm = LoadedModel::load_sharing(&path, context, config.device, shared)?;
            if let Some(source) = template {
                lm.set_chat_template(&source)?;
            }
            let lm = Arc::new(lm);
            lm.prepare_grammars_in_background();
            EngineHandle::start_sharing(lm, config, draft_shared)
        })
        .await
        .map_err(|e| ApiError::internal(format!("loading the model panicked: {e}")))?
        .map(Backend::Engine)
        .map_err(|e| ApiError::internal(format!("loading model '{}': {e}", spec.name)))
    }

    /// The engine configuration of `spec`: the server's, with the draft
    /// model its parameters name (which drafts by default, as with
    /// `--model-draft`: the engine's rule).
    fn engine_config_for(&self, spec: &ModelSpec) -> Result<EngineConfig, ApiError> {
        let mut config = self.engine_config.clone();
        let draft = model_draft(&spec.parameters).map_err(ApiError::bad_request)?;
        if let Some(given) = draft {
            let path = resolve_draft(self.catalog.as_ref(), given).map_err(|e| {
                ApiError::bad_request(format!(
                    "model '{}': {MODEL_DRAFT_PARAMETER}: {e}",
                    spec.name
                ))
            })?;
            config.draft_model = Some(path);
        }
        Ok(config)
    }

    /// Marks a request done: the keep-alive clock starts now, and
    /// `UnloadNow` unloads.
    pub async fn release(&self, name: &str, keep_alive: Option<KeepAlive>) {
        let keep_alive = keep_alive.unwrap_or_else(|| self.default_keep_alive());
        let mut loaded = self.loaded.lock().await;
        let key = with_tag(name);
        if keep_alive == KeepAlive::UnloadNow {
            loaded.remove(&key);
        } else if let Some(entry) = loaded.get_mut(&key) {
            entry.expires = expiry(keep_alive);
            entry.last_used = Instant::now();
        }
    }

    /// Unloads every model, waiting for each engine thread to free its
    /// model and KV cache (the server is stopping; no request holds one).
    pub async fn unload_all(&self) {
        let loaded: Vec<Loaded> = self.loaded.lock().await.drain().map(|(_, l)| l).collect();
        let _ = tokio::task::spawn_blocking(move || {
            for l in loaded {
                if let Backend::Engine(engine) = l.backend {
                    engine.shutdown();
                }
            }
        })
        .await;
    }

    pub async fn unload(&self, name: &str) -> bool {
        self.loaded.lock().await.remove(&with_tag(name)).is_some()
    }

    pub async fn is_loaded(&self, name: &str) -> bool {
        self.loaded.lock().await.contains_key(&with_tag(name))
    }

    /// Drops models whose keep-alive ran out. Requests in flight keep their
    /// engine until they finish.
    pub async fn unload_expired(&self) {
        let now = Instant::now();
        self.loaded.lock().await.retain(|name, l| {
            let keep = l.expires.is_none_or(|t| t > now);
            if !keep {
                tracing::info!(model = %name, "unloading (keep_alive expired)");
            }
            keep
        });
    }

    pub async fn loaded(&self) -> Vec<LoadedInfo> {
        let now = Instant::now();
        let mut out: Vec<LoadedInfo> = self
            .loaded
            .lock()
            .await
            .values()
            .map(|l| LoadedInfo {
                spec: l.spec.clone(),
                context_length: match &l.backend {
                    Backend::Engine(e) => e.max_sequence_len(),
                    Backend::Embedder(m) => m.max_tokens(),
                },
                device: match &l.backend {
                    Backend::Engine(e) => DeviceChoice::of(e.model().model.device()).to_string(),
                    // Embedding models run on the CPU.
                    Backend::Embedder(_) => DeviceChoice::Cpu.to_string(),
                },
                // Expiries are bounded (MAX_KEEP_ALIVE); one past chrono's
                // range would show as never.
                expires_at: l.expires.and_then(|t| {
                    let left = chrono::Duration::from_std(t.saturating_duration_since(now)).ok()?;
                    Utc::now().checked_add_signed(left)
                }),
            })
            .collect();
        out.sort_by(|a, b| a.spec.name.cmp(&b.spec.name));
        out
    }

    /// Prometheus text of every loaded model's engine, labelled by model.
    pub async fn metrics(&self) -> Vec<(String, EngineHandle)> {
        self.loaded
            .lock()
            .await
            .values()
            .filter_map(|l| match &l.backend {
                Backend::Engine(e) => Some((l.spec.name.clone(), e.clone())),
                Backend::Embedder(_) => None,
            })
            .collect()
    }
}

/// `None`: never (also for a duration past what `Instant` can hold).
fn expiry(keep_alive: KeepAlive) -> Option<Instant> {
    match keep_alive {
        KeepAlive::For(d) => Instant::now().checked_add(d),
        KeepAlive::Forever => None,
        KeepAlive::UnloadNow => Some(Instant::now()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keep_alive_forms() {
        let p = |v| KeepAlive::parse(&v).unwrap();
        assert_eq!(p(json!("5m")), KeepAlive::For(Duration::from_secs(300)));
        assert_eq!(p(json!("1h30m")), KeepAlive::For(Duration::from_secs(5400)));
        assert_eq!(p(json!(10)), KeepAlive::For(Duration::from_secs(10)));
        assert_eq!(p(json!("0")), KeepAlive::UnloadNow);
        assert_eq!(p(json!(0)), KeepAlive::UnloadNow);
        assert_eq!(p(json!(-1)), KeepAlive::Forever);
        assert_eq!(p(json!("-1m")), KeepAlive::Forever);
        assert_eq!(p(json!(-5)), KeepAlive::Forever);
        assert_eq!(p(json!("876000h")), KeepAlive::For(limits::MAX_KEEP_ALIVE));
        for bad in [
            json!("5 minutes"),
            json!("m"),
            json!(true),
            json!(""),
            json!("inf"),
            json!("NaN"),
            json!("-inf"),
            json!(1e300),
            json!("9999999999999999h"),
            json!("876001h"),
        ] {
            assert!(KeepAlive::parse(&bad).is_err(), "{bad}");
        }
    }
}
