//! Either pipeline behind one type: [`AnyPipeline`] holds a single-stream [`Pipeline`] (AR,
//! NAR, codec) or a [`MultiStreamPipeline`] (multi-stream LM, SoCodec, vocoder), chosen by the
//! kind in the model directory's `config.json` ([`ModelKind::of_model_dir`]), and offers what
//! a caller that takes either model needs: load, voices, whole and streamed synthesis, the
//! sample rate.

use std::path::Path;

use burn::tensor::Device;
use voxspec_audio::Audio;
use voxspec_infer::SamplerConfig;

use crate::decoders::{DecoderParts, DecoderSpec};
use crate::error::{Result, TtsError};
use crate::longform::LongForm;
use crate::multistream::{MultiStreamPaths, MultiStreamPipeline, is_multistream_dir};
use crate::pipeline::{Lengths, ModelPaths, Pipeline, VoicePrompt};
use crate::stream::{SpeechStream, StreamConfig};

/// Which pipeline a model needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelKind {
    /// An AR model (`voxspec train mtp`) with a NAR model and an RVQ codec.
    SingleStream,
    /// A delayed multi-stream LM (`voxspec train multistream`) with a SoCodec and a vocoder.
    MultiStream,
}

impl ModelKind {
    /// The kind of the AR or LM model directory `dir`: [`ModelKind::MultiStream`] when its
    /// `config.json` has the kind `multistream` (or `multistream-draft`), else
    /// [`ModelKind::SingleStream`] (also without a readable `config.json`: the single-stream
    /// loader then says what is wrong with the directory).
    pub fn of_model_dir(dir: &Path) -> Self {
        if is_multistream_dir(dir) {
            Self::MultiStream
        } else {
            Self::SingleStream
        }
    }

    /// `single-stream` or `multistream`.
    pub fn name(self) -> &'static str {
        match self {
            Self::SingleStream => "single-stream",
            Self::MultiStream => "multistream",
        }
    }
}

/// The models of either pipeline.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    /// An experiment's AR, NAR and codec.
    SingleStream(ModelPaths),
    /// A multi-stream LM, its codec and vocoder.
    MultiStream(MultiStreamPaths),
}

/// Either loaded pipeline.
// Loaded once and kept where it was made: the variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum AnyPipeline {
    /// AR → NAR → codec decoder.
    SingleStream(Pipeline),
    /// Multi-stream LM → SoCodec decoder → vocoder.
    MultiStream(MultiStreamPipeline),
}

impl From<Pipeline> for AnyPipeline {
    fn from(p: Pipeline) -> Self {
        Self::SingleStream(p)
    }
}

impl From<MultiStreamPipeline> for AnyPipeline {
    fn from(p: MultiStreamPipeline) -> Self {
        Self::MultiStream(p)
    }
}

/// A voice either pipeline speaks with (encoded once, used by many syntheses).
#[derive(Debug, Clone)]
pub enum AnyVoice {
    /// A single-stream voice prompt: the reference's codes, which condition the NAR.
    SingleStream(VoicePrompt),
    /// A multi-stream voice vector `[D]` (SoCodec's global embedding of the reference).
    MultiStream(Vec<f32>),
}

/// How one utterance is spoken.
#[derive(Debug, Clone, PartialEq)]
pub struct SpeakSettings {
    /// The decoder of the AR (or LM) stage. A multi-stream LM takes
    /// [`DecoderSpec::Ar`], [`DecoderSpec::Mtp`] and [`DecoderSpec::MtpViterbi`].
    pub decoder: DecoderSpec,
    /// The sampler.
    pub sampler: SamplerConfig,
    /// Length bounds (a multi-stream LM uses `pace` only, for its duration predictor).
    pub lengths: Lengths,
    /// The sampler's seed.
    pub seed: u64,
}

/// What one synthesis through [`AnyPipeline`] produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AnySpeech {
    /// The waveform at [`AnyPipeline::sample_rate`] (empty from [`AnyPipeline::stream`]: the
    /// stream holds it).
    pub samples: Vec<f32>,
    /// AR codes (single-stream) or LM frames (multi-stream) generated.
    pub tokens: usize,
    /// Forwards of the AR model or LM (prefill included).
    pub forwards: usize,
    /// Tokens proposed for verification (0 for decoders that draft none).
    pub drafted: usize,
    /// Proposed tokens the verification kept.
    pub accepted: usize,
    /// The decoder's label ([`DecoderSpec::label`]).
    pub decoder: String,
}

/// The audio of one utterance chunk by chunk ([`AnyPipeline::stream`]).
// One per running utterance, moved once into its slot: not worth a box.
#[allow(clippy::large_enum_variant)]
pub enum AnySpeechStream<'p> {
    /// A single-stream pipeline's stream: NAR and codec decoder chunk by chunk.
    SingleStream(SpeechStream<'p>),
    /// A whole clip handed out as one chunk (a multi-stream LM's: its SoCodec decoder and
    /// vocoder run over the whole utterance). `None` once it has been handed out.
    Whole(Option<Vec<f32>>),
}

impl AnySpeechStream<'_> {
    /// Whether every chunk has been returned.
    pub fn is_done(&self) -> bool {
        match self {
            Self::SingleStream(s) => s.is_done(),
            Self::Whole(samples) => samples.is_none(),
        }
    }

    /// The audio of the next chunk, `None` once the utterance is out (a chunk may be empty).
    ///
    /// # Errors
    /// A single-stream stream's NAR and codec errors, each naming its stage.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<f32>>> {
        match self {
            Self::SingleStream(s) => s.next_chunk(),
            Self::Whole(samples) => Ok(samples.take()),
        }
    }
}

/// Characters at which a multi-stream LM's sentence is cut into clauses (its pipeline has no
/// context check to split by).
const MULTISTREAM_PIECE_CHARS: usize = 200;

/// One piece of a long text as a caller that speaks pieces one request at a time needs it.
#[derive(Debug, Clone, PartialEq)]
pub struct TextPiece {
    /// The piece's text (a sentence, or a clause of one too long for the model).
    pub text: String,
    /// Silence after it, seconds (0 after the last piece).
    pub pause: f32,
}

impl AnyPipeline {
    /// The pieces `text` is spoken in, one request each, in order: for a single-stream
    /// pipeline those of [`Pipeline::plan_text`] (sentences, and clauses of a sentence whose
    /// request would not fit the AR model's context with `voice`'s prompt), for a multi-stream
    /// LM its sentences, a sentence over 200 characters cut into clauses. A text of one short
    /// sentence is one piece with its text unchanged.
    ///
    /// # Errors
    /// [`TtsError::Text`] for a text with nothing to speak or that the tokenizer cannot read;
    /// [`TtsError::TooLong`] for a single word that does not fit.
    pub fn plan_pieces(
        &self,
        text: &str,
        voice: Option<&AnyVoice>,
        lengths: &Lengths,
        config: &LongForm,
    ) -> Result<Vec<TextPiece>> {
        match self {
            Self::SingleStream(p) => {
                let prompt = match voice {
                    Some(AnyVoice::SingleStream(prompt)) => Some(prompt),
                    _ => None,
                };
                let pieces = p.plan_text(text, prompt, lengths, config, 0)?;
                Ok(pieces
                    .into_iter()
                    .map(|piece| TextPiece {
                        text: piece.text,
                        pause: piece.pause,
                    })
                    .collect())
            }
            Self::MultiStream(_) => {
                let sentences = voxspec_data::sentences::split_sentences(text);
                if sentences.is_empty() {
                    return Err(TtsError::Text("the text has nothing to speak".into()));
                }
                let mut pieces = Vec::new();
                for (s, sentence) in sentences.iter().enumerate() {
                    let clauses = voxspec_data::sentences::split_clauses(
                        &sentence.text,
                        MULTISTREAM_PIECE_CHARS,
                    );
                    let n = clauses.len();
                    for (i, clause) in clauses.into_iter().enumerate() {
                        let pause = if i + 1 < n {
                            config.clause_pause
                        } else {
                            config.pause_after(sentence, s + 1 == sentences.len())
                        };
                        pieces.push(TextPiece {
                            text: clause,
                            pause,
                        });
                    }
                }
                Ok(pieces)
            }
        }
    }

    /// Loads the models of `source` onto `device`.
    ///
    /// # Errors
    /// [`Pipeline::load`]'s or [`MultiStreamPipeline::load`]'s, naming the directory at fault.
    pub fn load(source: &ModelSource, device: &Device) -> Result<Self> {
        Ok(match source {
            ModelSource::SingleStream(paths) => Self::SingleStream(Pipeline::load(paths, device)?),
            ModelSource::MultiStream(paths) => {
                Self::MultiStream(MultiStreamPipeline::load(paths, device)?)
            }
        })
    }

    /// Which pipeline this is.
    pub fn kind(&self) -> ModelKind {
        match self {
            Self::SingleStream(_) => ModelKind::SingleStream,
            Self::MultiStream(_) => ModelKind::MultiStream,
        }
    }

    /// Output sample rate.
    pub fn sample_rate(&self) -> u32 {
        match self {
            Self::SingleStream(p) => p.sample_rate(),
            Self::MultiStream(p) => p.sample_rate(),
        }
    }

    /// Text ids of `text` (`[N]`).
    ///
    /// # Errors
    /// [`TtsError::Text`] for text that cannot be spoken; the tokenizer's errors.
    pub fn text_ids(&self, text: &str) -> Result<Vec<u32>> {
        match self {
            Self::SingleStream(p) => p.text_ids(text),
            Self::MultiStream(p) => p.text_ids(text),
        }
    }

    /// The voice of a reference recording at `path` (any rate; resampled): a single-stream
    /// voice prompt (no transcript), or a multi-stream voice vector (a directory of recordings
    /// of one voice gives their mean).
    ///
    /// # Errors
    /// The audio reader's and [`TtsError::Prompt`], naming the file.
    pub fn encode_voice_file(&self, path: &Path) -> Result<AnyVoice> {
        Ok(match self {
            Self::SingleStream(p) => AnyVoice::SingleStream(p.encode_prompt(path, None)?),
            Self::MultiStream(p) => AnyVoice::MultiStream(p.voice(path)?),
        })
    }

    /// [`AnyPipeline::encode_voice_file`] of audio already decoded (an upload, say); `name`
    /// stands for it in errors.
    ///
    /// # Errors
    /// As [`AnyPipeline::encode_voice_file`].
    pub fn encode_voice(&self, audio: &Audio, name: &Path) -> Result<AnyVoice> {
        Ok(match self {
            Self::SingleStream(p) => AnyVoice::SingleStream(p.encode_voice(audio, name, None)?),
            Self::MultiStream(p) => {
                let rate = p.sample_rate();
                let samples = if audio.sample_rate == rate {
                    audio.samples.clone()
                } else {
                    voxspec_audio::resample(&audio.samples, audio.sample_rate, rate)?
                };
                AnyVoice::MultiStream(p.voice_of_samples(&samples, name)?)
            }
        })
    }

    /// Builds the decoder of `spec` (with `parts`, for a single-stream pipeline) and drops it:
    /// whether this pipeline can decode with it.
    ///
    /// # Errors
    /// [`TtsError::Decoder`] or [`TtsError::Config`] naming what the decoder lacks.
    pub fn check_decoder(&self, spec: &DecoderSpec, parts: &DecoderParts) -> Result<()> {
        match self {
            Self::SingleStream(p) => parts.build(spec, &p.lm).map(drop),
            Self::MultiStream(p) => p.decoder(spec).map(drop),
        }
    }

    /// Speaks `text` with `voice` (a single-stream pipeline speaks without one; a multi-stream
    /// LM needs one) and `settings`; `parts` holds what single-stream decoders need besides the
    /// AR model (a multi-stream LM ignores it). Returns the waveform `[samples]` at
    /// [`AnyPipeline::sample_rate`] and the decoder's counters.
    ///
    /// # Errors
    /// [`TtsError::NoVoice`] for a multi-stream LM without a voice; [`TtsError::Incompatible`]
    /// for a voice of the other kind; [`TtsError::Text`] or [`TtsError::TooLong`] for text
    /// that cannot be spoken; [`TtsError::Decoder`] for a decoder the model cannot run; the
    /// stages' errors.
    pub fn synthesize(
        &self,
        text: &str,
        voice: Option<&AnyVoice>,
        settings: &SpeakSettings,
        parts: &DecoderParts,
    ) -> Result<AnySpeech> {
        match self {
            Self::SingleStream(p) => {
                let prompt = single_stream_voice(voice)?;
                let ids = p.text_ids(text)?;
                let request = p.request(&ids, prompt, &settings.lengths, settings.seed)?;
                let mut decoder = parts.build(&settings.decoder, &p.lm)?;
                let s =
                    p.synthesize(decoder.as_mut(), &request, &ids, prompt, &settings.sampler)?;
                Ok(AnySpeech {
                    samples: s.samples,
                    tokens: s.generation.tokens.len(),
                    forwards: s.generation.stats.target_forwards,
                    drafted: s.generation.stats.drafted,
                    accepted: s.generation.stats.accepted,
                    decoder: settings.decoder.label(),
                })
            }
            Self::MultiStream(p) => {
                let voice = match voice {
                    None => return Err(TtsError::NoVoice),
                    Some(AnyVoice::MultiStream(v)) => v,
                    Some(AnyVoice::SingleStream(_)) => {
                        return Err(TtsError::Incompatible(
                            "a single-stream voice prompt cannot voice a multi-stream LM".into(),
                        ));
                    }
                };
                let ids = p.text_ids(text)?;
                let decoder = p.decoder(&settings.decoder)?;
                let (durations, max_frames) = p.plan(&ids, settings.lengths.pace)?;
                let g = p.generate(
                    &decoder,
                    &ids,
                    voice,
                    durations.as_deref(),
                    max_frames,
                    settings.seed,
                    &settings.sampler,
                )?;
                if g.frames.first().is_none_or(Vec::is_empty) {
                    return Err(TtsError::NoFrames);
                }
                Ok(AnySpeech {
                    samples: p.render(&g.frames, voice)?,
                    tokens: g.frames.first().map_or(0, Vec::len),
                    forwards: g.stats.target_forwards,
                    drafted: g.stats.drafted.iter().sum(),
                    accepted: g.stats.accepted.iter().sum(),
                    decoder: decoder.label(),
                })
            }
        }
    }

    /// [`AnyPipeline::synthesize`] as a stream of audio chunks, with `config` cutting a
    /// single-stream pipeline's audio (its AR stage runs first, then the NAR and codec decoder
    /// chunk by chunk). A multi-stream LM cannot stream chunks: its stream holds the whole clip
    /// as one chunk ([`AnySpeechStream::Whole`]), made before this returns. The returned
    /// [`AnySpeech`] has the counters and no samples.
    ///
    /// # Errors
    /// As [`AnyPipeline::synthesize`]; [`TtsError::Config`] for a bad `config`.
    pub fn stream(
        &self,
        text: &str,
        voice: Option<&AnyVoice>,
        settings: &SpeakSettings,
        parts: &DecoderParts,
        config: StreamConfig,
    ) -> Result<(AnySpeechStream<'_>, AnySpeech)> {
        match self {
            Self::SingleStream(p) => {
                config.validate()?;
                let prompt = single_stream_voice(voice)?;
                let ids = p.text_ids(text)?;
                let request = p.request(&ids, prompt, &settings.lengths, settings.seed)?;
                let mut decoder = parts.build(&settings.decoder, &p.lm)?;
                let g = decoder
                    .generate(&p.lm, std::slice::from_ref(&request), &settings.sampler)?
                    .pop()
                    .ok_or_else(|| TtsError::Decoder {
                        spec: settings.decoder.label(),
                        reason: "the decoder returned no sequence".into(),
                    })?;
                let stream = p.stream(
                    &ids,
                    prompt,
                    &g.tokens,
                    request.prompt.durations.as_deref(),
                    config,
                )?;
                let speech = AnySpeech {
                    samples: Vec::new(),
                    tokens: g.tokens.len(),
                    forwards: g.stats.target_forwards,
                    drafted: g.stats.drafted,
                    accepted: g.stats.accepted,
                    decoder: settings.decoder.label(),
                };
                Ok((AnySpeechStream::SingleStream(stream), speech))
            }
            Self::MultiStream(_) => {
                let mut speech = self.synthesize(text, voice, settings, parts)?;
                let samples = std::mem::take(&mut speech.samples);
                Ok((AnySpeechStream::Whole(Some(samples)), speech))
            }
        }
    }
}

/// The voice prompt of a single-stream synthesis.
fn single_stream_voice(voice: Option<&AnyVoice>) -> Result<Option<&VoicePrompt>> {
    match voice {
        None => Ok(None),
        Some(AnyVoice::SingleStream(p)) => Ok(Some(p)),
        Some(AnyVoice::MultiStream(_)) => Err(TtsError::Incompatible(
            "a multi-stream voice vector cannot voice a single-stream pipeline".into(),
        )),
    }
}
