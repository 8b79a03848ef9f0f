//! Embeddings for both APIs: run the model off the async threads, then
//! optionally shorten the vectors (`dimensions`) and renormalize them.

use std::time::Duration;

use crate::error::ApiError;
use crate::models::KeepAlive;
use crate::state::AppState;

pub struct Embedded {
    pub vectors: Vec<Vec<f32>>,
    pub prompt_tokens: usize,
    pub load_duration: Duration,
    pub model: String,
}

pub async fn embed(
    state: &AppState,
    model: &str,
    texts: Vec<String>,
    truncate: bool,
    dimensions: Option<usize>,
    keep_alive: Option<KeepAlive>,
) -> Result<Embedded, ApiError> {
    crate::limits::check_embed_inputs(&texts)?;
    let acquired = state.models.acquire_embedder(model, keep_alive).await?;
    if let Some(d) = dimensions {
        let full = acquired.model.dimensions();
        if d == 0 || d > full {
            return Err(ApiError::bad_request(format!(
                "dimensions must be between 1 and {full} for this model, got {d}"
            )));
        }
    }
    let embedder = acquired.model.clone();
    let result = tokio::task::spawn_blocking(move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        embedder.embed(&refs, truncate)
    })
    .await
    .map_err(|e| ApiError::internal(format!("embedding panicked: {e}")))?;
    state.models.release(&acquired.spec.name, keep_alive).await;
    let out = result.map_err(|e| match e {
        mlxr_embed::EmbedError::InputTooLong { .. } | mlxr_embed::EmbedError::Tokenize { .. } => {
            ApiError::bad_request(e.to_string())
        }
        other => ApiError::internal(other.to_string()),
    })?;
    let vectors = match dimensions {
        Some(d) => out.vectors.into_iter().map(|v| shorten(v, d)).collect(),
        None => out.vectors,
    };
    Ok(Embedded {
        vectors,
        prompt_tokens: out.prompt_tokens,
        load_duration: acquired.load_duration,
        model: acquired.spec.name,
    })
}

/// The first `d` components, scaled back to unit length.
fn shorten(mut v: Vec<f32>, d: usize) -> Vec<f32> {
    v.truncate(d);
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    #[test]
    fn shortened_vectors_have_unit_length() {
        let v = super::shorten(vec![3.0, 4.0, 12.0], 2);
        assert_eq!(v, vec![0.6, 0.8]);
    }
}
