//! The request body of `POST /v1/audio/speech`: OpenAI's speech request (`input`, `voice`,
//! `response_format`, `speed`; `model` is accepted and ignored) plus voxspec's fields
//! (`decoder`, `heads`, `seed`, `temperature`).

use serde::Deserialize;

/// Audio encodings of a response.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResponseFormat {
    /// A 16-bit PCM WAV file.
    #[default]
    Wav,
    /// Raw 16-bit little-endian mono samples at the rate in the `x-sample-rate` header.
    Pcm,
}

/// The JSON body of a speech request.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct SpeechRequest {
    /// The text to speak.
    pub input: String,
    /// OpenAI's model name: accepted, ignored (the server speaks with the models it loaded).
    #[serde(default)]
    pub model: Option<String>,
    /// A voice registered at start (`--voice NAME=FILE`), or `default` / absent for none.
    #[serde(default)]
    pub voice: Option<String>,
    /// `wav` (default) or `pcm`.
    #[serde(default)]
    pub response_format: ResponseFormat,
    /// Speaking rate, 0.25 to 4 (aligned AR models scale their predicted durations by 1 / speed;
    /// plain ones ignore it).
    #[serde(default)]
    pub speed: Option<f32>,
    /// Stream the audio in chunks as they are produced (chunked transfer; a `wav` stream's
    /// header holds 0xFFFFFFFF for the unknown sizes).
    #[serde(default)]
    pub stream: bool,
    /// `ar`, `mtp`, `mtp-viterbi` or `self-spec` (default: the server's `--decoder`).
    #[serde(default)]
    pub decoder: Option<String>,
    /// Tokens per forward of the MTP decoders; self-speculation drafts `heads − 1`.
    #[serde(default)]
    pub heads: Option<usize>,
    /// Sampler seed (default 0): the same request and seed give the same audio.
    #[serde(default)]
    pub seed: Option<u64>,
    /// Sampling temperature (default: the server's).
    #[serde(default)]
    pub temperature: Option<f32>,
}
