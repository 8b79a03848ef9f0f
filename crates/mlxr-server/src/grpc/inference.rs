//! `mlxr.v1.Inference`: each call runs what the matching REST endpoint
//! runs. A reply streams as REST's do, polled by the connection: the client
//! going away drops the engine's stream, which aborts the request and frees
//! its KV blocks, as a REST disconnect does. A pull runs in a task of its
//! own that selects on the client going away.

use std::pin::Pin;
use std::time::Instant;

use futures_util::{Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::{Request, Response, Status};

use super::convert::{self, status};
use super::pb;
use crate::generation::{pieces, submit};
use crate::models::KeepAlive;
use crate::ollama::info::show_model;
use crate::ollama::manage::{delete_model, registry_error, start_pull};
use crate::ollama::{Prepared, ReplyBody};
use crate::state::AppState;

pub struct Inference {
    state: AppState,
}

impl Inference {
    pub fn new(state: AppState) -> Self {
        Self { state }
    }
}

type ReplyStream = Pin<Box<dyn Stream<Item = Result<pb::GenerateResponse, Status>> + Send>>;

/// Pull progress messages wait here for a slow client.
const STREAM_BUFFER: usize = 16;

fn keep_alive(text: Option<&str>) -> Result<Option<KeepAlive>, Status> {
    text.map(|t| KeepAlive::parse(&serde_json::Value::String(t.to_owned())))
        .transpose()
        .map_err(Status::invalid_argument)
}

/// Checks and prepares a Generate or Chat request, then streams its pieces
/// until the reply ends or the client goes away; the model is released
/// either way.
async fn reply<B: ReplyBody>(
    state: &AppState,
    body: B,
    started: Instant,
) -> Result<Response<ReplyStream>, Status> {
    let keep_alive = body.check().map_err(status)?;
    if body.is_load_only() {
        return Err(Status::invalid_argument(format!(
            "{} (LoadModel loads a model)",
            B::EMPTY
        )));
    }
    let Prepared {
        acquired,
        request,
        reader,
        keep_alive,
    } = body.prepare(state, keep_alive).await.map_err(status)?;
    let state = state.clone();
    let model = acquired.spec.name.clone();
    let load_ms = acquired.load_duration.as_secs_f64() * 1e3;
    let stream = match submit(&acquired.engine, request).await {
        Ok(stream) => stream,
        Err(e) => {
            state.models.release(&model, keep_alive).await;
            return Err(status(e));
        }
    };
    // Polled by the connection's own task, as REST's streams are (a task
    // and a channel between here and tonic were one more wake-up a token).
    // The client going away drops this stream, and with it the engine's:
    // the request is aborted and its KV blocks freed.
    let messages = async_stream::stream! {
        let mut pieces = std::pin::pin!(pieces(stream, reader));
        while let Some(piece) = pieces.next().await {
            let message = convert::response(piece, load_ms);
            let last = !matches!(&message, Ok(m) if !matches!(m.event, Some(pb::generate_response::Event::Done(_))));
            yield message;
            if last {
                break;
            }
        }
        state.models.release(&model, keep_alive).await;
        tracing::debug!(
            model,
            ms = started.elapsed().as_millis() as u64,
            "grpc reply ended"
        );
    };
    Ok(Response::new(Box::pin(messages)))
}

type PullStream = Pin<Box<dyn Stream<Item = Result<pb::PullProgress, Status>> + Send>>;

#[tonic::async_trait]
impl pb::inference_server::Inference for Inference {
    type GenerateStream = ReplyStream;
    type ChatStream = ReplyStream;
    type PullModelStream = PullStream;

    async fn generate(
        &self,
        request: Request<pb::GenerateRequest>,
    ) -> Result<Response<ReplyStream>, Status> {
        let started = Instant::now();
        let body = convert::generate_body(request.into_inner())?;
        reply(&self.state, body, started).await
    }

    async fn chat(
        &self,
        request: Request<pb::ChatRequest>,
    ) -> Result<Response<ReplyStream>, Status> {
        let started = Instant::now();
        let body = convert::chat_body(request.into_inner())?;
        reply(&self.state, body, started).await
    }

    async fn embed(
        &self,
        request: Request<pb::EmbedRequest>,
    ) -> Result<Response<pb::EmbedResponse>, Status> {
        let r = request.into_inner();
        let out = crate::embedding::embed(
            &self.state,
            &r.model,
            r.input,
            r.truncate.unwrap_or(true),
            r.dimensions.map(|d| d as usize),
            keep_alive(r.keep_alive.as_deref())?,
        )
        .await
        .map_err(status)?;
        Ok(Response::new(pb::EmbedResponse {
            model: out.model,
            embeddings: out
                .vectors
                .into_iter()
                .map(|values| pb::Embedding { values })
                .collect(),
            prompt_tokens: u32::try_from(out.prompt_tokens).unwrap_or(u32::MAX),
        }))
    }

    async fn tokenize(
        &self,
        request: Request<pb::TokenizeRequest>,
    ) -> Result<Response<pb::TokenizeResponse>, Status> {
        let r = request.into_inner();
        crate::limits::at_most(
            "text (bytes)",
            r.text.len(),
            crate::limits::MAX_EMBED_INPUT_BYTES,
        )
        .map_err(status)?;
        let acquired = self
            .state
            .models
            .acquire(&r.model, None)
            .await
            .map_err(status)?;
        let lm = acquired.engine.model().clone();
        let ids = tokio::task::spawn_blocking(move || {
            lm.tokenizer.encode(&r.text, r.add_special, r.parse_special)
        })
        .await;
        self.state.models.release(&acquired.spec.name, None).await;
        let ids = ids.map_err(|e| Status::internal(format!("tokenizing panicked: {e}")))?;
        Ok(Response::new(pb::TokenizeResponse { ids }))
    }

    async fn detokenize(
        &self,
        request: Request<pb::DetokenizeRequest>,
    ) -> Result<Response<pb::DetokenizeResponse>, Status> {
        let r = request.into_inner();
        crate::limits::at_most(
            "ids (number of token ids)",
            r.ids.len(),
            crate::limits::MAX_PROMPT_TOKEN_IDS,
        )
        .map_err(status)?;
        let acquired = self
            .state
            .models
            .acquire(&r.model, None)
            .await
            .map_err(status)?;
        let tokenizer = acquired.engine.model().tokenizer.clone();
        self.state.models.release(&acquired.spec.name, None).await;
        let n_vocab = tokenizer.vocab_size();
        if let Some(bad) = r.ids.iter().find(|&&id| id as usize >= n_vocab) {
            return Err(Status::invalid_argument(format!(
                "token id {bad} is outside the vocabulary (0..{n_vocab})"
            )));
        }
        let text = tokenizer.decode(&r.ids, false);
        Ok(Response::new(pb::DetokenizeResponse { text }))
    }

    async fn list_models(
        &self,
        _: Request<pb::ListModelsRequest>,
    ) -> Result<Response<pb::ListModelsResponse>, Status> {
        let models = self
            .state
            .models
            .catalog()
            .list()
            .map_err(Status::internal)?
            .into_iter()
            .map(|m| pb::Model {
                name: m.name.clone(),
                size: m.size,
                digest: m.digest.trim_start_matches("sha256:").to_owned(),
                modified_at: rfc3339(m.modified_at),
                details: Some(details(&m)),
            })
            .collect();
        Ok(Response::new(pb::ListModelsResponse { models }))
    }

    async fn list_running(
        &self,
        _: Request<pb::ListRunningRequest>,
    ) -> Result<Response<pb::ListRunningResponse>, Status> {
        let models = self
            .state
            .models
            .loaded()
            .await
            .into_iter()
            .map(|l| pb::RunningModel {
                name: l.spec.name.clone(),
                size: l.spec.size,
                digest: l.spec.digest.trim_start_matches("sha256:").to_owned(),
                details: Some(details(&l.spec)),
                expires_at: l.expires_at.map(rfc3339).unwrap_or_default(),
                context_length: l.context_length as u64,
                device: l.device,
            })
            .collect();
        Ok(Response::new(pb::ListRunningResponse { models }))
    }

    async fn load_model(
        &self,
        request: Request<pb::LoadModelRequest>,
    ) -> Result<Response<pb::LoadModelResponse>, Status> {
        let r = request.into_inner();
        let keep_alive = keep_alive(r.keep_alive.as_deref())?;
        let acquired = self
            .state
            .models
            .acquire(&r.model, keep_alive)
            .await
            .map_err(status)?;
        self.state
            .models
            .release(&acquired.spec.name, keep_alive)
            .await;
        Ok(Response::new(pb::LoadModelResponse {
            load_ms: acquired.load_duration.as_secs_f64() * 1e3,
        }))
    }

    async fn unload_model(
        &self,
        request: Request<pb::UnloadModelRequest>,
    ) -> Result<Response<pb::UnloadModelResponse>, Status> {
        let r = request.into_inner();
        self.state.models.resolve(&r.model).map_err(status)?;
        let unloaded = self.state.models.unload(&r.model).await;
        Ok(Response::new(pb::UnloadModelResponse { unloaded }))
    }

    async fn show_model(
        &self,
        request: Request<pb::ShowModelRequest>,
    ) -> Result<Response<pb::ShowModelResponse>, Status> {
        let r = request.into_inner();
        let v = show_model(&self.state, &r.model, r.verbose).map_err(status)?;
        let text = |key: &str| v[key].as_str().unwrap_or_default().to_owned();
        let spec = self.state.models.resolve(&r.model).map_err(status)?;
        Ok(Response::new(pb::ShowModelResponse {
            modelfile: text("modelfile"),
            parameters: text("parameters"),
            template: text("template"),
            system: v["system"].as_str().map(str::to_owned),
            license: v["license"].as_str().map(str::to_owned),
            details: Some(details(&spec)),
            capabilities: v["capabilities"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|c| c.as_str().map(str::to_owned))
                .collect(),
            model_info_json: v["model_info"].to_string(),
            modified_at: text("modified_at"),
            device: text("device"),
        }))
    }

    async fn pull_model(
        &self,
        request: Request<pb::PullModelRequest>,
    ) -> Result<Response<PullStream>, Status> {
        let (mut progress, task) =
            start_pull(&self.state, &request.into_inner().model).map_err(status)?;
        let (tx, rx) = mpsc::channel(STREAM_BUFFER);
        tokio::spawn(async move {
            loop {
                let p = tokio::select! {
                    p = progress.recv() => p,
                    () = tx.closed() => return,
                };
                let Some(p) = p else { break };
                let message = pb::PullProgress {
                    status: p.status,
                    digest: p.digest.map(|d| d.to_string()).unwrap_or_default(),
                    total: p.total.unwrap_or(0),
                    completed: p.completed.unwrap_or(0),
                };
                if tx.send(Ok(message)).await.is_err() {
                    return;
                }
            }
            let end = match task.await {
                Ok(Ok(_)) => return,
                Ok(Err(e)) => status(registry_error(e)),
                Err(e) => Status::internal(format!("pull panicked: {e}")),
            };
            let _ = tx.send(Err(end)).await;
        });
        Ok(Response::new(Box::pin(ReceiverStream::new(rx))))
    }

    async fn delete_model(
        &self,
        request: Request<pb::DeleteModelRequest>,
    ) -> Result<Response<pb::DeleteModelResponse>, Status> {
        delete_model(&self.state, &request.into_inner().model)
            .await
            .map_err(status)?;
        Ok(Response::new(pb::DeleteModelResponse {}))
    }
}

fn rfc3339(t: chrono::DateTime<chrono::Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Nanos, true)
}

fn details(m: &crate::catalog::ModelSpec) -> pb::ModelDetails {
    let d = &m.details;
    pb::ModelDetails {
        format: d.format.clone(),
        family: d.family.clone(),
        parameter_size: d.parameter_size.clone(),
        quantization_level: d.quantization_level.clone(),
    }
}
