//! Starting the server: load the pipeline, encode the registered voices once, spawn the worker,
//! serve until Ctrl-C or SIGTERM (requests in flight are finished first).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use voxspec_tts::{DecoderParts, Pipeline};

use crate::error::ServeError;
use crate::metrics::Metrics;
use crate::routes::{AppState, router};
use crate::worker::{Defaults, Synthesizer};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Request defaults and limits.
    pub defaults: Defaults,
    /// Voices registered at start: name → reference recording (any rate; resampled).
    pub voices: Vec<(String, PathBuf)>,
    /// Largest accepted speech request body, bytes.
    pub max_body_bytes: usize,
    /// Largest accepted voice upload, bytes.
    pub max_voice_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        Self {
            defaults: Defaults::default(),
            voices: Vec::new(),
            max_body_bytes: 64 * 1024,
            max_voice_bytes: 10 << 20,
        }
    }
}

/// The router of a server on `pipeline`: registered voices encoded, the worker started.
///
/// # Errors
/// [`ServeError::Config`] for a voice named twice or `default`; the pipeline's errors for a
/// voice recording it cannot encode.
pub fn build_app(
    pipeline: Pipeline,
    parts: DecoderParts,
    config: &ServerConfig,
) -> Result<Router, ServeError> {
    let mut voices = BTreeMap::new();
    for (name, path) in &config.voices {
        if name == "default" || voices.contains_key(name) {
            return Err(ServeError::Config {
                field: "voice",
                reason: format!("the name {name:?} is reserved or given twice"),
            });
        }
        voices.insert(name.clone(), pipeline.encode_prompt(path, None)?);
        tracing::info!(voice = %name, file = %path.display(), "voice registered");
    }
    let metrics = Arc::new(Metrics::default());
    let state = AppState {
        sample_rate: pipeline.sample_rate(),
        metrics: metrics.clone(),
        synth: Synthesizer::spawn(pipeline, parts, voices, config.defaults.clone(), metrics),
    };
    Ok(router(state, config.max_body_bytes, config.max_voice_bytes))
}

/// Serves `app` on `listener` until `shutdown` completes; requests in flight are finished.
///
/// # Errors
/// [`ServeError::Io`] when serving fails.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), ServeError> {
    let addr = listener
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown)
        .await
        .map_err(|source| ServeError::Io { addr, source })
}
