//! Starting the server: load the pipeline (either kind), encode the registered voices once,
//! spawn the worker, serve until Ctrl-C or SIGTERM (requests in flight are finished first).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use axum::Router;
use tokio::net::TcpListener;
use voxspec_tts::{AnyPipeline, DecoderParts, ModelKind};

use crate::error::ServeError;
use crate::metrics::Metrics;
use crate::routes::{AppState, router};
use crate::worker::{Defaults, Synthesizer, decoder_spec};

/// How the server runs.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Request defaults and limits.
    pub defaults: Defaults,
    /// Voices registered at start: name → reference recording (any rate; resampled).
    pub voices: Vec<(String, PathBuf)>,
    /// The recording whose voice requests that name none (or `default`) get. A multi-stream
    /// LM needs one (it speaks with the voice vector of a reference: a recording, or a
    /// directory of recordings of one voice); a single-stream pipeline speaks without a voice
    /// prompt when there is none.
    pub default_voice: Option<PathBuf>,
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
            default_voice: None,
            max_body_bytes: 64 * 1024,
            max_voice_bytes: 10 << 20,
        }
    }
}

/// The router of a server on `pipeline` (a single-stream [`voxspec_tts::Pipeline`], a
/// [`voxspec_tts::MultiStreamPipeline`] or an [`AnyPipeline`]): registered voices encoded, the
/// worker started.
///
/// # Errors
/// [`ServeError::Config`] for a voice named twice or `default`, or a multi-stream LM without
/// [`ServerConfig::default_voice`]; the pipeline's errors for a voice recording it cannot
/// encode (naming the file) and, for a multi-stream LM, for a default decoder it cannot run.
pub fn build_app(
    pipeline: impl Into<AnyPipeline>,
    parts: DecoderParts,
    config: &ServerConfig,
) -> Result<Router, ServeError> {
    let pipeline = pipeline.into();
    let kind = pipeline.kind();
    let default_voice = match &config.default_voice {
        Some(path) => {
            let voice = pipeline.encode_voice_file(path)?;
            tracing::info!(file = %path.display(), "default voice");
            Some(voice)
        }
        None if kind == ModelKind::MultiStream => {
            return Err(ServeError::Config {
                field: "default_voice",
                reason: "a multi-stream LM speaks with the voice of a reference recording: give \
                         the server one (`voxspec serve --prompt <WAV>`)"
                    .into(),
            });
        }
        None => None,
    };
    if kind == ModelKind::MultiStream {
        // Its decoders are built per request: refuse a default it cannot run now, not on every
        // request.
        let d = &config.defaults;
        let spec =
            decoder_spec(kind, &d.decoder, d.heads, d.top_k).map_err(|e| ServeError::Config {
                field: "decoder",
                reason: e.message,
            })?;
        pipeline.check_decoder(&spec, &parts)?;
    }
    let mut voices = BTreeMap::new();
    for (name, path) in &config.voices {
        if name == "default" || voices.contains_key(name) {
            return Err(ServeError::Config {
                field: "voice",
                reason: format!("the name {name:?} is reserved or given twice"),
            });
        }
        voices.insert(name.clone(), pipeline.encode_voice_file(path)?);
        tracing::info!(voice = %name, file = %path.display(), "voice registered");
    }
    let metrics = Arc::new(Metrics::default());
    let state = AppState {
        sample_rate: pipeline.sample_rate(),
        kind,
        metrics: metrics.clone(),
        synth: Synthesizer::spawn(
            pipeline,
            parts,
            voices,
            default_voice,
            config.defaults.clone(),
            metrics,
        ),
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
