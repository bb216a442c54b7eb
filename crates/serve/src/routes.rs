//! The HTTP routes: `POST /v1/audio/speech`, `GET /health`, `GET /metrics`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::extract::rejection::JsonRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Serialize;
use voxspec_audio::{Audio, WavFormat, f32_to_i16, wav_bytes};

use crate::api::{ResponseFormat, SpeechRequest};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::worker::Synthesizer;

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The synthesis worker.
    pub synth: Synthesizer,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Output sample rate (for `/health`).
    pub sample_rate: u32,
    /// Registered voice names (for `/health`).
    pub voices: Vec<String>,
}

/// The server's routes on `state`; request bodies above `max_body_bytes` get a 413.
pub fn router(state: AppState, max_body_bytes: usize) -> Router {
    Router::new()
        .route("/v1/audio/speech", post(speech))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .with_state(state)
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
    sample_rate: u32,
    voices: Vec<String>,
}

async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        sample_rate: state.sample_rate,
        voices: state.voices.clone(),
    })
}

async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.metrics.render(),
    )
}

async fn speech(
    State(state): State<AppState>,
    body: Result<Json<SpeechRequest>, JsonRejection>,
) -> Response {
    let result = match body {
        Ok(Json(request)) => run(&state, request).await,
        Err(rejection) => Err(ApiError {
            status: rejection.status(),
            message: rejection.body_text(),
        }),
    };
    let counter = match &result {
        Ok(_) => &state.metrics.ok,
        Err(e) if e.status.is_client_error() => &state.metrics.client_errors,
        Err(_) => &state.metrics.server_errors,
    };
    counter.fetch_add(1, Ordering::Relaxed);
    match result {
        Ok(response) => response,
        Err(e) => {
            tracing::info!(status = %e.status, "{}", e.message);
            e.into_response()
        }
    }
}

async fn run(state: &AppState, request: SpeechRequest) -> Result<Response, ApiError> {
    let format = request.response_format;
    let speech = state.synth.synthesize(request).await?;
    let rate = speech.sample_rate;
    let (content_type, bytes) = match format {
        ResponseFormat::Wav => (
            "audio/wav",
            wav_bytes(&Audio::new(speech.samples, rate), WavFormat::Pcm16)
                .map_err(|e| ApiError::internal(format!("encoding the WAV file: {e}")))?,
        ),
        ResponseFormat::Pcm => (
            "audio/pcm",
            speech
                .samples
                .iter()
                .flat_map(|&x| f32_to_i16(x).to_le_bytes())
                .collect(),
        ),
    };
    let mut response = (StatusCode::OK, bytes).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("x-sample-rate", HeaderValue::from(rate));
    headers.insert("x-ar-tokens", HeaderValue::from(speech.tokens));
    headers.insert("x-ar-forwards", HeaderValue::from(speech.forwards));
    headers.insert("x-batch", HeaderValue::from(speech.batch));
    if let Ok(v) = HeaderValue::from_str(&speech.decoder) {
        headers.insert("x-decoder", v);
    }
    Ok(response)
}
