//! voxspec-serve: speech over HTTP with an OpenAI-style endpoint, on either `voxspec-tts`
//! pipeline ([`voxspec_tts::AnyPipeline`]): a single-stream experiment (AR, NAR, codec) or a
//! multi-stream LM (SoCodec, vocoder; it speaks with a reference's voice vector, so the server
//! needs [`ServerConfig::default_voice`]).
//!
//! - `POST /v1/audio/speech` — body `{"input": "...", "voice": "default", "response_format":
//!   "wav"|"pcm", "speed": 1.0}` as OpenAI's, plus `decoder` (`ar`, `mtp`, `mtp-viterbi`,
//!   `self-spec`), `heads`, `seed`, `temperature` and `stream`; answers with the audio (headers
//!   `x-sample-rate`, `x-ar-tokens`, `x-ar-forwards`, `x-decoder`, `x-batch`). Bad requests get a 4xx with
//!   `{"error": {"message", "type"}}` naming the field.
//! - `POST /v1/voices?name=NAME` — body: an audio file (any format and rate the audio reader
//!   takes); encoded once, then requests can name it as their `voice`. `GET /v1/voices` lists
//!   them.
//! - `GET /` — a page: text box, voice and decoder pickers, play button, and the time to first
//!   audio and real-time factor the browser measured.
//! - `GET /health` — status, the model's kind (`single-stream` or `multistream`), sample
//!   rate, the decoders requests can name, voices.
//! - `GET /metrics` — Prometheus text: requests by outcome, queue depth, audio and synthesis
//!   seconds, time to first audio, AR tokens and forwards.
//!
//! A worker thread owns the models ([`Synthesizer`]) and batches continuously: up to
//! [`Defaults::max_batch`] sequences run at once and a waiting request takes a free slot at once.
//! The requests admitted together run their AR stage as one batched decode per decoder and
//! sampler (each keeps its own seed, so a request gets the same audio in a batch as alone); then
//! each round advances every streamed sequence and the oldest whole one by a chunk (NAR and codec
//! for its next frames), and a finished one leaves at once. `"stream": true` sends each chunk as
//! it is made (chunked transfer; [`Defaults::stream`] sets the chunk sizes and the NAR's window).
//! A multi-stream LM (decoders `ar`, `mtp`, `mtp-viterbi`) speaks each request whole, without a
//! batched decode, and sends its audio as one chunk. A panic in a synthesis answers its requests
//! with a 500 and the server goes on.
//!
//! A text of several sentences (up to [`Defaults::max_input_chars`], 20,000 by default) is
//! spoken sentence by sentence — a sentence too long for the model's context in clauses — and
//! joined with pauses; a streamed response starts with the first sentence's first chunk.

#![warn(missing_docs)]

mod api;
mod error;
mod load;
mod longform;
mod metrics;
mod routes;
mod server;
mod worker;

pub use api::{ResponseFormat, SpeechRequest};
pub use error::{ApiError, ServeError};
pub use load::{LoadConfig, LoadReport, load_test, run_load};
pub use metrics::Metrics;
pub use routes::{AppState, router};
pub use server::{ServerConfig, build_app, serve};
pub use worker::{Defaults, Reply, Speech, Synthesizer, VoiceInfo};
