//! voxspec-serve: speech over HTTP with an OpenAI-style endpoint, on the `voxspec-tts` pipeline.
//!
//! - `POST /v1/audio/speech` — body `{"input": "...", "voice": "default", "response_format":
//!   "wav"|"pcm", "speed": 1.0}` as OpenAI's, plus `decoder` (`ar`, `mtp`, `mtp-viterbi`,
//!   `self-spec`), `heads`, `seed` and `temperature`; answers with the audio (headers
//!   `x-sample-rate`, `x-ar-tokens`, `x-ar-forwards`, `x-decoder`). Bad requests get a 4xx with
//!   `{"error": {"message", "type"}}` naming the field.
//! - `GET /health` — status, sample rate, registered voices.
//! - `GET /metrics` — Prometheus text: requests by outcome, queue depth, audio and synthesis
//!   seconds, AR tokens and forwards.
//!
//! Requests run one at a time on a worker thread that owns the models ([`Synthesizer`]); a
//! panic in one synthesis answers that request with a 500 and the server goes on. Not built yet:
//! streaming responses (`stream: true` is refused), batching concurrent requests, voice upload.

#![warn(missing_docs)]

mod api;
mod error;
mod metrics;
mod routes;
mod server;
mod worker;

pub use api::{ResponseFormat, SpeechRequest};
pub use error::{ApiError, ServeError};
pub use metrics::Metrics;
pub use routes::{AppState, router};
pub use server::{ServerConfig, build_app, serve};
pub use worker::{Defaults, Speech, Synthesizer};
