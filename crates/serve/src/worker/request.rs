//! Checking a request against the server's limits, voices and models, and planning its text:
//! what the worker does before a request runs.

use std::collections::BTreeMap;

use voxspec_infer::SamplerConfig;
use voxspec_tts::{
    AnyVoice, DecoderSpec, Lengths, ModelKind, Pipeline, RuleSpec, SpeechItem, TextPiece, TtsError,
};

use super::Worker;
use crate::api::SpeechRequest;
use crate::error::ApiError;

impl Worker {
    /// The pieces of `request`'s text, after the checks of a request (limits, voice, decoder).
    pub(super) fn plan(
        &self,
        voices: &BTreeMap<String, AnyVoice>,
        request: &SpeechRequest,
    ) -> Result<Vec<TextPiece>, ApiError> {
        let checked = self.check(voices, request)?;
        let lengths = Lengths {
            pace: checked.pace,
            ..Lengths::default()
        };
        self.pipeline
            .plan_pieces(
                &request.input,
                checked.voice,
                &lengths,
                &self.defaults.long_form,
            )
            .map_err(|e| match e {
                TtsError::Text(reason) | TtsError::TooLong(reason) => {
                    ApiError::bad_request(format!("input: {reason}"))
                }
                other => ApiError::internal_chain(&other),
            })
    }

    /// The decoder of a request.
    pub(super) fn spec(&self, request: &SpeechRequest) -> Result<DecoderSpec, ApiError> {
        let heads = request.heads.unwrap_or(self.defaults.heads);
        let name = request.decoder.as_deref().unwrap_or(&self.defaults.decoder);
        decoder_spec(self.pipeline.kind(), name, heads, self.defaults.top_k)
    }

    /// Checks `request` against the server's limits and voices: its decoder and sampler, its
    /// voice (`default` or none: the server's default voice), pace and seed.
    pub(super) fn check<'a>(
        &'a self,
        voices: &'a BTreeMap<String, AnyVoice>,
        request: &SpeechRequest,
    ) -> Result<Checked<'a>, ApiError> {
        let chars = request.input.chars().count();
        if request.input.trim().is_empty() {
            return Err(ApiError::bad_request("input: the text is empty"));
        }
        if chars > self.defaults.max_input_chars {
            return Err(ApiError::bad_request(format!(
                "input: {chars} characters, more than the server's limit of {}",
                self.defaults.max_input_chars
            )));
        }
        let voice = match request.voice.as_deref() {
            None | Some("default") => self.default_voice.as_ref(),
            Some(name) => Some(voices.get(name).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "voice: unknown voice {name:?} (registered: default{})",
                    voices.keys().map(|k| format!(", {k}")).collect::<String>()
                ))
            })?),
        };
        let pace = match request.speed {
            None => 1.0,
            Some(s) if (0.25..=4.0).contains(&s) => 1.0 / s,
            Some(s) => {
                return Err(ApiError::bad_request(format!(
                    "speed: {s} is outside 0.25..=4"
                )));
            }
        };
        let mut sampler = self.defaults.sampler;
        if let Some(t) = request.temperature {
            sampler.temperature = t;
        }
        sampler
            .validate()
            .map_err(|e| ApiError::bad_request(format!("temperature: {e}")))?;
        let spec = self.spec(request)?;
        Ok(Checked {
            plan: Plan { spec, sampler },
            voice,
            pace,
            seed: request.seed.unwrap_or(0),
        })
    }

    /// Checks `request` against the models and makes its AR request on the single-stream
    /// `pipeline`. The decoder is built once per batch ([`Worker::run_ar`]); a spec it refuses
    /// answers that batch with a 400.
    pub(super) fn prepare<'v>(
        &'v self,
        pipeline: &Pipeline,
        voices: &'v BTreeMap<String, AnyVoice>,
        request: &SpeechRequest,
    ) -> Result<(Plan, SpeechItem<'v>), ApiError> {
        let checked = self.check(voices, request)?;
        let prompt = match checked.voice {
            None => None,
            Some(AnyVoice::SingleStream(prompt)) => Some(prompt),
            Some(AnyVoice::MultiStream(_)) => {
                return Err(ApiError::internal(
                    "voice: a multi-stream voice vector on a single-stream pipeline",
                ));
            }
        };
        let text = pipeline
            .text_ids(&request.input)
            .map_err(|e| ApiError::bad_request(format!("input: {e}")))?;
        let lengths = Lengths {
            pace: checked.pace,
            ..Lengths::default()
        };
        let ar_request = pipeline
            .request(&text, prompt, &lengths, checked.seed)
            .map_err(request_error)?;
        Ok((
            checked.plan,
            SpeechItem {
                request: ar_request,
                text,
                prompt,
            },
        ))
    }
}

/// The decoders a pipeline of `kind` serves, by the name requests give.
pub(crate) fn decoder_names(kind: ModelKind) -> &'static [&'static str] {
    match kind {
        ModelKind::SingleStream => &["ar", "mtp", "mtp-viterbi", "self-spec"],
        ModelKind::MultiStream => &["ar", "mtp", "mtp-viterbi"],
    }
}

/// The decoder `name` with `heads` (and Viterbi's `top_k`) for a pipeline of `kind`.
///
/// # Errors
/// A 400 naming the field for zero heads or a decoder `kind` does not serve.
pub(crate) fn decoder_spec(
    kind: ModelKind,
    name: &str,
    heads: usize,
    top_k: usize,
) -> Result<DecoderSpec, ApiError> {
    if heads == 0 {
        return Err(ApiError::bad_request("heads: must be at least 1"));
    }
    let names = decoder_names(kind);
    if !names.contains(&name) {
        return Err(ApiError::bad_request(format!(
            "decoder: unknown decoder {name:?} ({}){}",
            names.join(", "),
            match kind {
                ModelKind::SingleStream => "",
                ModelKind::MultiStream => " for a multi-stream LM",
            }
        )));
    }
    Ok(match name {
        "ar" => DecoderSpec::Ar,
        "mtp" => DecoderSpec::Mtp { heads },
        "mtp-viterbi" => DecoderSpec::MtpViterbi { heads, top_k },
        _ => DecoderSpec::SelfSpec {
            rule: RuleSpec::Sd,
            gamma: heads.saturating_sub(1).max(1),
        },
    })
}

/// A 400 naming the field for a request the models cannot serve (its text, decoder or voice),
/// else a 500 with the error's chain.
pub(super) fn request_error(e: TtsError) -> ApiError {
    match e {
        TtsError::Text(m) | TtsError::TooLong(m) => ApiError::bad_request(format!("input: {m}")),
        e @ (TtsError::Decoder { .. } | TtsError::Config(_)) => {
            ApiError::bad_request(format!("decoder: {e}"))
        }
        e @ (TtsError::NoVoice | TtsError::Prompt { .. }) => {
            ApiError::bad_request(format!("voice: {e}"))
        }
        other => ApiError::internal_chain(&other),
    }
}

/// A request checked against the server's limits and voices.
pub(super) struct Checked<'a> {
    pub(super) plan: Plan,
    /// Its voice (the server's default for none).
    pub(super) voice: Option<&'a AnyVoice>,
    /// Aligned models: the factor of the predicted durations (1 / speed).
    pub(super) pace: f32,
    pub(super) seed: u64,
}

/// What a batch shares: the decoder and the sampler.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Plan {
    pub(super) spec: DecoderSpec,
    pub(super) sampler: SamplerConfig,
}
