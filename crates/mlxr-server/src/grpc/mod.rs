//! The gRPC API, `mlxr.v1.Inference` (`proto/mlxr/v1/inference.proto`),
//! with the standard health (`grpc.health.v1`) and reflection services,
//! served by the same router as REST: HTTP/2 on the daemon's port and
//! socket, told apart by path (`/mlxr.v1.Inference/Generate`, ...).
//!
//! Requests become the Ollama API's bodies ([`convert`]) and run through
//! its preparation and the one stream loop ([`crate::generation::pieces`]),
//! so defaults, limits and errors are REST's.

mod convert;
mod inference;

use std::convert::Infallible;
use std::sync::Arc;

use axum::extract::Request;
use axum::Router;
use tonic::server::NamedService;
use tonic::service::interceptor::InterceptedService;
use tonic::Status;
use tower::{Service, ServiceExt};

use crate::state::AppState;

/// The generated messages and server.
pub mod pb {
    tonic::include_proto!("mlxr.v1");

    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("mlxr_descriptor");
}

use pb::inference_server::InferenceServer;

/// The paths gRPC services answer on (`/package.Service/Method`): the REST
/// middleware leaves their authentication to [`check_key`].
pub fn is_grpc_path(path: &str) -> bool {
    path.starts_with("/mlxr.v1.") || path.starts_with("/grpc.")
}

/// The gRPC services as routes. Health answers without the API key, as
/// `/health` does; the rest need it.
pub fn routes(state: AppState, api_key: Option<Arc<str>>) -> Router<AppState> {
    let (health_reporter, health) = tonic_health::server::health_reporter();
    if let Ok(runtime) = tokio::runtime::Handle::try_current() {
        runtime.spawn(async move {
            health_reporter
                .set_serving::<InferenceServer<inference::Inference>>()
                .await;
        });
    }
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(pb::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let (v1, v1alpha) = match (reflection().build_v1(), reflection().build_v1alpha()) {
        (Ok(v1), Ok(v1alpha)) => (v1, v1alpha),
        (Err(e), _) | (_, Err(e)) => panic!("the compiled descriptor set is invalid: {e}"),
    };
    let state_body_limit = state.server.body_limit;
    let inference = InferenceServer::new(inference::Inference::new(state))
        .max_decoding_message_size(state_body_limit);
    let key = move |req| check_key(api_key.as_deref(), req);
    Router::new()
        .route_service(
            &path::<InferenceServer<inference::Inference>>(),
            grpc(InterceptedService::new(inference, key.clone())),
        )
        .route_service(
            &path_of(&v1),
            grpc(InterceptedService::new(v1, key.clone())),
        )
        .route_service(
            &path_of(&v1alpha),
            grpc(InterceptedService::new(v1alpha, key)),
        )
        .route_service(&path_of(&health), grpc(health))
}

fn path<S: NamedService>() -> String {
    format!("/{}/{{*method}}", S::NAME)
}

fn path_of<S: NamedService>(_: &S) -> String {
    path::<S>()
}

/// A tonic service as an axum one: tonic reads its own body type.
fn grpc<S>(
    svc: S,
) -> impl Service<Request, Response = S::Response, Error = Infallible, Future = impl Send + 'static>
       + Clone
       + Send
       + Sync
       + 'static
where
    S: Service<axum::http::Request<tonic::body::Body>, Error = Infallible>
        + Clone
        + Send
        + Sync
        + 'static,
    S::Future: Send + 'static,
{
    svc.map_request(|req: Request| req.map(tonic::body::Body::new))
}

/// The daemon's API key as metadata `authorization: Bearer <key>`.
fn check_key(key: Option<&str>, req: tonic::Request<()>) -> Result<tonic::Request<()>, Status> {
    let Some(key) = key else { return Ok(req) };
    let given = req
        .metadata()
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    if given == Some(key) {
        Ok(req)
    } else {
        Err(Status::unauthenticated(
            "invalid or missing API key (metadata authorization: Bearer <key>)",
        ))
    }
}
