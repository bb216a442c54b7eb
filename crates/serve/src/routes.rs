//! The HTTP routes: `POST /v1/audio/speech`, `GET /health`, `GET /metrics`.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use std::pin::Pin;
use std::task::{Context, Poll};

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use voxspec_audio::{Audio, WavFormat, f32_to_i16, wav_bytes};
use voxspec_tts::ModelKind;

use crate::api::{ResponseFormat, SpeechRequest};
use crate::error::ApiError;
use crate::metrics::Metrics;
use crate::worker::{Reply, Speech, Synthesizer, decoder_names};

/// What the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// The synthesis worker.
    pub synth: Synthesizer,
    /// Counters for `/metrics`.
    pub metrics: Arc<Metrics>,
    /// Output sample rate (for `/health`).
    pub sample_rate: u32,
    /// The pipeline's kind (for `/health` and the page's decoder picker).
    pub kind: ModelKind,
}

/// The server's routes on `state`; speech request bodies above `max_body_bytes` and voice
/// uploads above `max_voice_bytes` get a 413.
pub fn router(state: AppState, max_body_bytes: usize, max_voice_bytes: usize) -> Router {
    Router::new()
        .route(
            "/v1/audio/speech",
            post(speech).layer(DefaultBodyLimit::max(max_body_bytes)),
        )
        .route(
            "/v1/voices",
            post(upload_voice)
                .get(list_voices)
                .layer(DefaultBodyLimit::max(max_voice_bytes)),
        )
        .route("/", get(page))
        .route("/health", get(health))
        .route("/metrics", get(metrics))
        .with_state(state)
}

/// The page at `/`: a text box, voice and decoder pickers, a play button, and the time to first
/// audio and real-time factor the browser measured.
const PAGE: &str = include_str!("page.html");

async fn page() -> Html<&'static str> {
    Html(PAGE)
}

/// The query of a voice upload.
#[derive(Deserialize)]
struct VoiceQuery {
    name: String,
}

/// `POST /v1/voices?name=NAME`, body: an audio file. 201 with `{"voice", "seconds"}`.
async fn upload_voice(
    State(state): State<AppState>,
    query: Result<Query<VoiceQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let result = async {
        let Query(query) = query.map_err(|r| ApiError {
            status: r.status(),
            message: format!("name: {}", r.body_text()),
        })?;
        let body = body.map_err(|r| ApiError {
            status: r.status(),
            message: format!("audio: {}", r.body_text()),
        })?;
        state.synth.add_voice(query.name, body.to_vec()).await
    }
    .await;
    match result {
        Ok(info) => (StatusCode::CREATED, Json(info)).into_response(),
        Err(e) => e.into_response(),
    }
}

/// `GET /v1/voices`: the voices requests can pick.
async fn list_voices(State(state): State<AppState>) -> Json<Vec<String>> {
    let mut names = vec!["default".to_string()];
    names.extend(state.synth.voice_names());
    Json(names)
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
    /// `single-stream` or `multistream`.
    kind: &'static str,
    sample_rate: u32,
    /// The decoders requests can name.
    decoders: &'static [&'static str],
    voices: Vec<String>,
}

async fn health(State(state): State<AppState>) -> Json<Health> {
    Json(Health {
        status: "ok",
        kind: state.kind.name(),
        sample_rate: state.sample_rate,
        decoders: decoder_names(state.kind),
        voices: state.synth.voice_names(),
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
    let (speech, mut response) = match state.synth.synthesize_text(request).await? {
        Reply::Whole(speech) => {
            let rate = speech.sample_rate;
            let bytes = match format {
                ResponseFormat::Wav => {
                    wav_bytes(&Audio::new(speech.samples.clone(), rate), WavFormat::Pcm16)
                        .map_err(|e| ApiError::internal(format!("encoding the WAV file: {e}")))?
                }
                ResponseFormat::Pcm => pcm_bytes(&speech.samples),
            };
            (speech, (StatusCode::OK, bytes).into_response())
        }
        Reply::Stream(speech, chunks) => {
            let header = match format {
                ResponseFormat::Wav => Some(Bytes::from(streaming_wav_header(speech.sample_rate))),
                ResponseFormat::Pcm => None,
            };
            let body = Body::from_stream(Chunks { header, chunks });
            (speech, (StatusCode::OK, body).into_response())
        }
    };
    add_headers(&mut response, &speech, format);
    Ok(response)
}

fn add_headers(response: &mut Response, speech: &Speech, format: ResponseFormat) {
    let content_type = match format {
        ResponseFormat::Wav => "audio/wav",
        ResponseFormat::Pcm => "audio/pcm",
    };
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert("x-sample-rate", HeaderValue::from(speech.sample_rate));
    headers.insert("x-ar-tokens", HeaderValue::from(speech.tokens));
    headers.insert("x-ar-forwards", HeaderValue::from(speech.forwards));
    headers.insert("x-batch", HeaderValue::from(speech.batch));
    if let Ok(v) = HeaderValue::from_str(&speech.decoder) {
        headers.insert("x-decoder", v);
    }
}

/// 16-bit little-endian PCM.
fn pcm_bytes(samples: &[f32]) -> Vec<u8> {
    samples
        .iter()
        .flat_map(|&x| f32_to_i16(x).to_le_bytes())
        .collect()
}

/// The 44-byte header of a 16-bit mono WAV stream whose length is not known yet: the RIFF and
/// data sizes hold 0xFFFFFFFF, the value streaming readers (ffmpeg, browsers, SoX) take for
/// "until the end of the stream".
fn streaming_wav_header(sample_rate: u32) -> Vec<u8> {
    let mut h = Vec::with_capacity(44);
    h.extend_from_slice(b"RIFF");
    h.extend_from_slice(&u32::MAX.to_le_bytes());
    h.extend_from_slice(b"WAVEfmt ");
    h.extend_from_slice(&16u32.to_le_bytes()); // fmt chunk size
    h.extend_from_slice(&1u16.to_le_bytes()); // PCM
    h.extend_from_slice(&1u16.to_le_bytes()); // mono
    h.extend_from_slice(&sample_rate.to_le_bytes());
    h.extend_from_slice(&(sample_rate * 2).to_le_bytes()); // bytes per second
    h.extend_from_slice(&2u16.to_le_bytes()); // block align
    h.extend_from_slice(&16u16.to_le_bytes()); // bits per sample
    h.extend_from_slice(b"data");
    h.extend_from_slice(&u32::MAX.to_le_bytes());
    h
}

/// A streamed response body: the WAV header (if any), then each chunk as 16-bit PCM as the
/// worker sends it; an error from the worker ends the body with that error (the connection is
/// closed before the chunked body's end, so the client sees the response is incomplete).
struct Chunks {
    header: Option<Bytes>,
    chunks: tokio::sync::mpsc::UnboundedReceiver<Result<Vec<f32>, ApiError>>,
}

impl futures_core::Stream for Chunks {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(header) = self.header.take() {
            return Poll::Ready(Some(Ok(header)));
        }
        match self.chunks.poll_recv(cx) {
            Poll::Ready(Some(Ok(samples))) => {
                Poll::Ready(Some(Ok(Bytes::from(pcm_bytes(&samples)))))
            }
            Poll::Ready(Some(Err(e))) => {
                tracing::error!(status = %e.status, "a streamed synthesis failed: {}", e.message);
                Poll::Ready(Some(Err(std::io::Error::other(e.message))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}
