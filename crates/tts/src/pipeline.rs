//! The text → speech pipeline:
//!
//! ```text
//! text ──tokenizer──▶ ids ──AR (any decoder)──▶ RVQ-1 codes ──NAR──▶ codes [n_q][frames]
//!                                                                     └─codec decoder─▶ waveform
//! ```
//!
//! With a voice prompt the reference is encoded by the codec; its codes condition the NAR
//! (VALL-E style, the prompt's frames come first). When the prompt's transcript is known, a plain
//! AR model continues the reference as well: its text is the prompt's transcript followed by the
//! text to speak and its code prefix the reference's RVQ-1 codes. Without it the AR model starts
//! from the text alone, as it was trained. An aligned AR model takes its length from its duration
//! predictor and leaves the prompt to the NAR.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_audio::Audio;
use voxspec_codec::{MelSpeech, SpeechTokenizer, SpeechTokenizerConfig, load_codec};
use voxspec_data::TextTokenizer;
use voxspec_engine::{NativeMelSpeech, NativeNar, WeightFormat};
use voxspec_infer::{Decoder, Generation, Limits, Request, SamplerConfig};
use voxspec_mtp::{FrameTrack, MtpModel, NarModel, TtsPrompt, load_mtp, load_nar};

use crate::engine::{ArEngine, EngineKind};
use crate::error::{Result, TtsError};

/// Positions kept free in the AR model's context beyond the longest generation: the lookahead
/// of a verification block (γ + 1) and the padding of ragged blocks.
const CACHE_SLACK: usize = 16;

/// Where the models of a trained experiment live, and the engine that runs the AR model.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelPaths {
    /// AR model directory (`voxspec train mtp`).
    pub ar: PathBuf,
    /// NAR model directory (`voxspec train nar`).
    pub nar: PathBuf,
    /// Codec model directory (`voxspec codec train`, or a shipped one under `checkpoints/`).
    pub codec: PathBuf,
    /// Stream-0 transition matrix for Viterbi decoding (`voxspec stats transitions`).
    pub transitions: PathBuf,
    /// A codes → log-mel decoder (`voxspec codec train-mel`) that renders the codes in place
    /// of the codec's own decoder; `None`: the codec's decoder.
    pub mel_decoder: Option<PathBuf>,
    /// The vocoder that renders the mel decoder's log-mel; `None`: Griffin-Lim.
    pub vocoder: Option<PathBuf>,
    /// Implementation that runs the AR model, the draft and the NAR model.
    pub engine: EngineKind,
}

impl ModelPaths {
    /// The layout `recipes/libritts/train_mtp.sh` writes (and the shipped
    /// `checkpoints/kathleen` has): `<exp>/ar`, `<exp>/nar`, `<exp>/transitions.safetensors`,
    /// the codec `<exp>/codec` (the recipe links the codec its tokens came from there; without
    /// one, the shipped `checkpoints/codec-minitts`), the mel decoder `<exp>/mel_decoder` and its
    /// vocoder `<exp>/vocoder` when they are there, the native engine.
    pub fn experiment(exp: impl AsRef<Path>) -> Self {
        let exp = exp.as_ref();
        let codec = exp.join("codec");
        let model_dir = |name: &str| {
            let dir = exp.join(name);
            dir.join("config.json").is_file().then_some(dir)
        };
        let mel_decoder = model_dir("mel_decoder");
        Self {
            vocoder: mel_decoder.as_ref().and_then(|_| model_dir("vocoder")),
            mel_decoder,
            ar: exp.join("ar"),
            nar: exp.join("nar"),
            codec: if codec.join("config.json").is_file() {
                codec
            } else {
                PathBuf::from("checkpoints/codec-minitts")
            },
            transitions: exp.join("transitions.safetensors"),
            engine: EngineKind::default(),
        }
    }
}

/// Length bounds of a generation relative to its text (CosyVoice's rule), or, for aligned AR
/// models, to the predicted durations.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lengths {
    /// At least this many codes per text token (end of speech is masked before).
    pub min_ratio: f32,
    /// At most this many codes per text token.
    pub max_ratio: f32,
    /// Aligned AR models: scales the predicted phone durations (above 1 speaks slower); the
    /// length bounds then follow the predicted frame count instead of the ratios.
    pub pace: f32,
}

impl Default for Lengths {
    fn default() -> Self {
        Self {
            min_ratio: 2.0,
            max_ratio: 20.0,
            pace: 1.0,
        }
    }
}

/// The loaded models of the pipeline.
pub struct Pipeline {
    /// The device of the Burn models (AR, NAR, codec).
    pub device: Device,
    /// The AR model's tokenizer (`tokenizer.json` in its directory).
    pub tokenizer: TextTokenizer,
    /// The AR model as loaded (Burn).
    pub ar: MtpModel,
    /// The AR model on the engine of [`ModelPaths::engine`]: what the decoders drive.
    pub lm: ArEngine,
    /// The NAR model (code layers 2..N).
    pub nar: NarModel,
    /// The NAR model on the native engine (with [`EngineKind::Native`],
    /// [`EngineKind::NativeBf16`] or [`EngineKind::NativeInt8`]): what fills the code layers
    /// then.
    pub nar_engine: Option<NativeNar>,
    /// The codec whose decoder turns codes into a waveform.
    pub codec: SpeechTokenizer,
    /// The codec's config (sample rate, hop, codebook).
    pub codec_config: SpeechTokenizerConfig,
    /// The mel decoder and its renderer, when they replace the codec's decoder.
    pub mel: Option<MelSpeech>,
    /// The mel decoder and its vocoder on the native engine (with a native
    /// [`ModelPaths::engine`] and a vocoder that does not refine its phase): what renders the
    /// codes then. Its weights are stored as the AR engine's (bf16 for int8: the renderer's
    /// convolutions are not quantized).
    pub mel_engine: Option<NativeMelSpeech>,
}

/// A reference recording: its codes `[n_q][frames]` and, when known, its transcript's ids.
#[derive(Debug, Clone, Default)]
pub struct VoicePrompt {
    /// Codes of every layer the NAR predicts, `[n_q][frames]`.
    pub codes: Vec<Vec<u32>>,
    /// Text ids of the transcript (empty when unknown).
    pub text: Vec<u32>,
}

/// One utterance of a batch: its AR request, its text ids (without a prompt's transcript) and
/// its voice prompt.
#[derive(Debug, Clone)]
pub struct SpeechItem<'a> {
    /// The AR request ([`Pipeline::request`]).
    pub request: Request<TtsPrompt>,
    /// The text ids the request was made from.
    pub text: Vec<u32>,
    /// The voice prompt, if any.
    pub prompt: Option<&'a VoicePrompt>,
}

/// What one synthesis produced.
pub struct Synthesis {
    /// The AR stage's tokens, stop reason and decoding statistics.
    pub generation: Generation,
    /// Wall time of the AR stage (the decoder), seconds.
    pub ar_seconds: f64,
    /// Wall time from the AR codes to the samples (the NAR stage when it runs, then the codec
    /// decoder or the mel decoder and its renderer), seconds.
    pub rest_seconds: f64,
    /// The waveform at [`Pipeline::sample_rate`] (empty when the AR model ended at once).
    pub samples: Vec<f32>,
}

impl Pipeline {
    /// Loads the AR model (with its `tokenizer.json`), the NAR model and the codec, and checks
    /// that they agree on the codebook.
    ///
    /// # Errors
    /// [`TtsError::Load`] naming the directory that cannot be loaded, or
    /// [`TtsError::Incompatible`] naming the models that disagree.
    pub fn load(paths: &ModelPaths, device: &Device) -> Result<Self> {
        let (ar_file, ar) =
            load_mtp(&paths.ar, device).map_err(TtsError::load("the AR model", &paths.ar))?;
        let lm = ArEngine::new(paths.engine, &ar, &ar_file.model).map_err(TtsError::load(
            "the AR model onto the native engine",
            &paths.ar,
        ))?;
        let tok_path = paths.ar.join("tokenizer.json");
        let tokenizer = TextTokenizer::load(&tok_path)
            .map_err(TtsError::load("the AR model's tokenizer", &tok_path))?;
        let (nar_config, nar) =
            load_nar(&paths.nar, device).map_err(TtsError::load("the NAR model", &paths.nar))?;
        let nar_engine = match paths.engine.weight_format() {
            Some(format) => Some(
                NativeNar::from_burn_with(&nar, &nar_config, format).map_err(TtsError::load(
                    "the NAR model onto the native engine",
                    &paths.nar,
                ))?,
            ),
            None => None,
        };
        let (codec_config, codec) =
            load_codec(&paths.codec, device).map_err(TtsError::load("the codec", &paths.codec))?;
        if ar.codebook_size() != codec_config.codebook_size
            || nar.codebook_size() != codec_config.codebook_size
        {
            return Err(TtsError::Incompatible(format!(
                "the models do not share a codebook: AR {} codes ({}), NAR {} ({}), codec {} ({})",
                ar.codebook_size(),
                paths.ar.display(),
                nar.codebook_size(),
                paths.nar.display(),
                codec_config.codebook_size,
                paths.codec.display()
            )));
        }
        if nar.n_q() > codec_config.n_q {
            return Err(TtsError::Incompatible(format!(
                "the NAR model {} predicts {} code layers, the codec {} has {}",
                paths.nar.display(),
                nar.n_q(),
                paths.codec.display(),
                codec_config.n_q
            )));
        }
        let mel = match &paths.mel_decoder {
            Some(dir) => {
                let mel = MelSpeech::load(dir, paths.vocoder.as_deref(), device)
                    .map_err(TtsError::load("the mel decoder", dir))?;
                let c = mel.config();
                if c.codebook_size != codec_config.codebook_size
                    || c.n_q > codec_config.n_q
                    || c.codec_hop != codec_config.hop_length()
                    || mel.sample_rate() != codec_config.sample_rate
                {
                    return Err(TtsError::Incompatible(format!(
                        "the mel decoder {} reads {} layers of {} codes, {} samples a frame at {}                          Hz; the codec {} has {} of {}, {} at {} Hz",
                        dir.display(),
                        c.n_q,
                        c.codebook_size,
                        c.codec_hop,
                        mel.sample_rate(),
                        paths.codec.display(),
                        codec_config.n_q,
                        codec_config.codebook_size,
                        codec_config.hop_length(),
                        codec_config.sample_rate
                    )));
                }
                if mel.phones() > 0 {
                    check_mel_phones(&mel, dir, &ar, &tokenizer, &paths.ar)?;
                }
                Some(mel)
            }
            None => None,
        };
        let mel_engine = match (&mel, &paths.mel_decoder, paths.engine.weight_format()) {
            (Some(mel), Some(dir), Some(format)) if NativeMelSpeech::runs(mel) => Some(
                NativeMelSpeech::from_burn(mel, render_format(format)).map_err(TtsError::load(
                    "the mel decoder onto the native engine",
                    dir,
                ))?,
            ),
            _ => None,
        };
        Ok(Self {
            device: device.clone(),
            tokenizer,
            ar,
            lm,
            nar,
            nar_engine,
            codec,
            codec_config,
            mel,
            mel_engine,
        })
    }

    /// What renders the codes, for reports: the mel decoder and its renderer (and on which
    /// implementation), or the codec's decoder.
    pub fn renderer_name(&self) -> String {
        match (&self.mel_engine, &self.mel) {
            (Some(engine), _) => format!(
                "mel decoder + vocoder (native, {} weights)",
                engine.weight_format()
            ),
            (None, Some(mel)) => format!("mel decoder + {} (Burn)", mel.renderer().name()),
            (None, None) => "codec decoder (Burn)".into(),
        }
    }

    /// Output sample rate.
    pub fn sample_rate(&self) -> u32 {
        self.codec_config.sample_rate
    }

    /// Text ids of `text`, refusing text that is empty or made only of characters the
    /// tokenizer does not know.
    ///
    /// # Errors
    /// [`TtsError::Text`] for such text; the tokenizer's errors.
    pub fn text_ids(&self, text: &str) -> Result<Vec<u32>> {
        if text.trim().is_empty() {
            return Err(TtsError::Text(
                "the text is empty: give the sentence to speak".into(),
            ));
        }
        let unknown = self.tokenizer.unknown_chars(text)?;
        let known = self
            .tokenizer
            .normalize(text)?
            .chars()
            .any(|c| !c.is_whitespace() && !unknown.contains(&c));
        if !known {
            return Err(TtsError::Text(format!(
                "the text {:?} has no character the model's tokenizer knows (unknown: {:?})",
                text.chars().take(60).collect::<String>(),
                unknown
            )));
        }
        Ok(self.tokenizer.encode(text)?)
    }

    /// Encodes a reference recording (resampled to the codec's rate when needed) into the
    /// NAR's code layers; `text` is its transcript when known.
    ///
    /// # Errors
    /// The audio reader's (naming the file), [`TtsError::Prompt`] for a recording shorter than
    /// one frame, the codec's.
    pub fn encode_prompt(&self, path: &Path, text: Option<&str>) -> Result<VoicePrompt> {
        let audio = voxspec_audio::load_resampled(path, self.sample_rate())?;
        self.encode_voice(&audio, path, text)
    }

    /// [`Pipeline::encode_prompt`] of audio already decoded (an upload, say); `name` stands for
    /// it in errors.
    ///
    /// # Errors
    /// As [`Pipeline::encode_prompt`].
    pub fn encode_voice(
        &self,
        audio: &Audio,
        name: &Path,
        text: Option<&str>,
    ) -> Result<VoicePrompt> {
        let path = name;
        let samples = if audio.sample_rate == self.sample_rate() {
            audio.samples.clone()
        } else {
            voxspec_audio::resample(&audio.samples, audio.sample_rate, self.sample_rate())?
        };
        if samples.len() < self.codec_config.hop_length() {
            return Err(TtsError::Prompt {
                path: path.to_path_buf(),
                reason: format!(
                    "too short ({} samples, at least one frame of {} needed)",
                    samples.len(),
                    self.codec_config.hop_length()
                ),
            });
        }
        let n = samples.len();
        let wave: Tensor<3> = Tensor::from_data(TensorData::new(samples, [1, 1, n]), &self.device);
        let codes = self
            .codec
            .encode(wave, self.nar.n_q())
            .map_err(|e| TtsError::Prompt {
                path: path.to_path_buf(),
                reason: format!("the codec cannot encode it: {e}"),
            })?;
        let [n_q, _, frames] = codes.dims();
        let flat = codes
            .into_data()
            .convert::<i64>()
            .try_into_vec::<i64>()
            .map_err(|e| TtsError::TensorRead {
                what: "the prompt's codes",
                reason: format!("{e:?}"),
            })?;
        let codes = (0..n_q)
            .map(|q| {
                flat[q * frames..(q + 1) * frames]
                    .iter()
                    .map(|&c| c as u32)
                    .collect()
            })
            .collect();
        let text = match text {
            Some(t) => self.text_ids(t).map_err(|e| TtsError::Prompt {
                path: path.to_path_buf(),
                reason: format!("its transcript: {e}"),
            })?,
            None => Vec::new(),
        };
        Ok(VoicePrompt { codes, text })
    }

    /// The AR request for `text` (with a voice prompt's transcript and RVQ-1 codes in front
    /// when its transcript is known), its length bounded by `lengths`.
    ///
    /// # Errors
    /// [`TtsError::Text`] when the text does not fit in the AR model's context; the duration
    /// predictor's errors.
    pub fn request(
        &self,
        text: &[u32],
        prompt: Option<&VoicePrompt>,
        lengths: &Lengths,
        seed: u64,
    ) -> Result<Request<TtsPrompt>> {
        let mut limits = Limits::for_text(text.len(), lengths.min_ratio, lengths.max_ratio)?;
        if self.ar.is_aligned() {
            // The duration predictor sets the length: EOS is due at its frame count T. The
            // voice prompt conditions the NAR only (an aligned AR model continues no codes).
            let durations = self
                .ar
                .predict_durations(text, lengths.pace)
                .map_err(TtsError::stage("predicting the phone durations"))?;
            let frames: usize = durations.iter().map(|&d| d as usize).sum();
            limits.min_tokens = frames / 2;
            limits.max_tokens = frames + frames / 4 + 8;
            let used = text.len() + 1 + CACHE_SLACK;
            let room = self.ar.transformer.max_seq_len().saturating_sub(used);
            if room < frames {
                return Err(TtsError::TooLong(format!(
                    "the text needs {frames} frames, more than the {room} positions left in the \
                     AR model's context of {}; split it into shorter sentences",
                    self.ar.transformer.max_seq_len()
                )));
            }
            limits.max_tokens = limits.max_tokens.min(room);
            return Ok(Request {
                prompt: TtsPrompt {
                    text: text.to_vec(),
                    codes: Vec::new(),
                    durations: Some(durations),
                },
                limits,
                seed,
            });
        }
        let (text, codes) = match prompt {
            Some(p) if !p.text.is_empty() => {
                let mut ids = p.text.clone();
                ids.extend_from_slice(text);
                (ids, p.codes.first().cloned().unwrap_or_default())
            }
            _ => (text.to_vec(), Vec::new()),
        };
        // The AR model's positions end at max_seq_len; keep room for the prompt, the separator
        // and a verification block.
        let used = text.len() + 1 + codes.len() + CACHE_SLACK;
        let room = self.ar.transformer.max_seq_len().saturating_sub(used);
        if room == 0 {
            return Err(TtsError::TooLong(format!(
                "the text and prompt take {used} positions, more than the AR model's context of \
                 {} positions",
                self.ar.transformer.max_seq_len()
            )));
        }
        if limits.max_tokens > room {
            tracing::debug!(
                from = limits.max_tokens,
                to = room,
                "length limit cut to the AR model's context"
            );
            limits.max_tokens = room;
            limits.min_tokens = limits.min_tokens.min(room);
        }
        Ok(Request {
            prompt: TtsPrompt::new(text, codes),
            limits,
            seed,
        })
    }

    /// Speaks `text` with `decoder` at the default [`Lengths`] and no voice prompt: the
    /// shortest way from a sentence to a waveform ([`Pipeline::text_ids`],
    /// [`Pipeline::request`], [`Pipeline::synthesize`]).
    ///
    /// # Errors
    /// Those of the three steps.
    pub fn speak(
        &self,
        text: &str,
        decoder: &mut dyn Decoder<ArEngine>,
        sampler: &SamplerConfig,
        seed: u64,
    ) -> Result<Synthesis> {
        let ids = self.text_ids(text)?;
        let request = self.request(&ids, None, &Lengths::default(), seed)?;
        self.synthesize(decoder, &request, &ids, None, sampler)
    }

    /// The AR stage alone: `request` through `decoder`, its one generation.
    ///
    /// # Errors
    /// The decoder's; [`TtsError::Decoder`] when it returns no sequence.
    pub(crate) fn generate_one(
        &self,
        decoder: &mut dyn Decoder<ArEngine>,
        request: &Request<TtsPrompt>,
        sampler: &SamplerConfig,
    ) -> Result<Generation> {
        decoder
            .generate(&self.lm, std::slice::from_ref(request), sampler)?
            .pop()
            .ok_or_else(|| TtsError::Decoder {
                spec: decoder.name(),
                reason: "the decoder returned no sequence".into(),
            })
    }

    /// Runs one request through `decoder`, then the NAR and the codec decoder. `text` is the
    /// text of the request without the prompt's transcript (the NAR prepends it).
    ///
    /// # Errors
    /// The decoder's, the NAR's and the codec's, each naming its stage.
    pub fn synthesize(
        &self,
        decoder: &mut dyn Decoder<ArEngine>,
        request: &Request<TtsPrompt>,
        text: &[u32],
        prompt: Option<&VoicePrompt>,
        sampler: &SamplerConfig,
    ) -> Result<Synthesis> {
        let item = SpeechItem {
            request: request.clone(),
            text: text.to_vec(),
            prompt,
        };
        self.synthesize_batch(decoder, std::slice::from_ref(&item), sampler)?
            .pop()
            .ok_or_else(|| TtsError::Decoder {
                spec: decoder.name(),
                reason: "the decoder returned no sequence".into(),
            })
    }

    /// Runs the AR stage of every item in one batched decode (ragged lengths; each request keeps
    /// its own seed, so an item's codes do not depend on its batch), then the NAR and the codec
    /// decoder item by item. Each [`Synthesis::ar_seconds`] is the batch's AR time.
    ///
    /// # Errors
    /// The decoder's, the NAR's and the codec's, each naming its stage.
    pub fn synthesize_batch(
        &self,
        decoder: &mut dyn Decoder<ArEngine>,
        items: &[SpeechItem<'_>],
        sampler: &SamplerConfig,
    ) -> Result<Vec<Synthesis>> {
        let requests: Vec<Request<TtsPrompt>> = items.iter().map(|i| i.request.clone()).collect();
        let start = Instant::now();
        let generations = decoder.generate(&self.lm, &requests, sampler)?;
        let ar_seconds = start.elapsed().as_secs_f64();
        if generations.len() != items.len() {
            return Err(TtsError::Decoder {
                spec: decoder.name(),
                reason: format!(
                    "{} sequences returned for {} requests",
                    generations.len(),
                    items.len()
                ),
            });
        }
        items
            .iter()
            .zip(generations)
            .map(|(item, generation)| {
                let start = Instant::now();
                let samples = if generation.tokens.is_empty() {
                    Vec::new()
                } else {
                    self.vocode(
                        &item.text,
                        item.prompt,
                        &generation.tokens,
                        item.request.prompt.durations.as_deref(),
                    )?
                };
                Ok(Synthesis {
                    generation,
                    ar_seconds,
                    rest_seconds: start.elapsed().as_secs_f64(),
                    samples,
                })
            })
            .collect()
    }

    /// NAR layers 2..N from the AR's RVQ-1 codes `first`, then the codec decoder; the prompt's
    /// frames are dropped from the output. `durations` (frames per token of `text`, as an
    /// aligned AR model's request carries them) place the phones for an aligned NAR.
    ///
    /// # Errors
    /// The NAR's and the codec's, each naming its stage.
    pub fn vocode(
        &self,
        text: &[u32],
        prompt: Option<&VoicePrompt>,
        first: &[u32],
        durations: Option<&[u32]>,
    ) -> Result<Vec<f32>> {
        let (nar_text, prompt_codes) = self.nar_inputs(text, prompt, first.len())?;
        let track = self.nar_track(text, durations, first.len());
        let codes = self.nar_codes(&nar_text, &prompt_codes, first, track.as_deref())?;
        let phones = self.mel_phones(text, durations, first.len())?;
        self.decode_codes(&codes, phones.as_deref())
    }

    /// The phone of each of `frames` frames of `text` spoken for `durations` frames per token,
    /// for a mel decoder with a phone input; `None` for any other renderer.
    ///
    /// # Errors
    /// [`TtsError::Config`] when the mel decoder reads phones and no durations (of one per
    /// token) came with the codes.
    pub(crate) fn mel_phones(
        &self,
        text: &[u32],
        durations: Option<&[u32]>,
        frames: usize,
    ) -> Result<Option<Vec<u32>>> {
        let Some(mel) = self.mel.as_ref().filter(|m| m.phones() > 0) else {
            return Ok(None);
        };
        match durations {
            Some(d) if d.len() == text.len() => Ok(Some(mel.frame_phones(text, d, frames))),
            _ => Err(TtsError::Config(
                "the mel decoder reads each frame's phone, and no phone durations came with the \
                 codes (an aligned AR model's request carries them)"
                    .into(),
            )),
        }
    }

    /// An aligned NAR's track ids of `frames` frames speaking `text` for `durations` frames
    /// each (frames past their sum are END); `None` for a NAR without a track, or when no
    /// durations (of one per token) are known, which leaves its frames untold.
    pub(crate) fn nar_track(
        &self,
        text: &[u32],
        durations: Option<&[u32]>,
        frames: usize,
    ) -> Option<Vec<u32>> {
        let layout = self.nar.track_layout()?;
        match durations {
            Some(d) if d.len() == text.len() => {
                Some(FrameTrack::new(text, d).ids(&layout, 0, frames))
            }
            _ => {
                tracing::warn!(
                    "the NAR model is aligned but no phone durations came with the codes; its \
                     frames are not told their phones"
                );
                None
            }
        }
    }

    /// The NAR's text (a prompt's transcript, then `text`) and prompt codes `[n_q][frames]` for
    /// `frames` new frames, checked against the NAR's context (an untranscribed voice prompt is
    /// cut to fit).
    ///
    /// # Errors
    /// [`TtsError::Text`] when the text and frames (or a transcribed prompt) do not fit.
    pub(crate) fn nar_inputs(
        &self,
        text: &[u32],
        prompt: Option<&VoicePrompt>,
        frames: usize,
    ) -> Result<(Vec<u32>, Vec<Vec<u32>>)> {
        let n_q = self.nar.n_q();
        let (prompt_codes, nar_text) = match prompt {
            Some(p) => {
                let mut t = p.text.clone();
                t.extend_from_slice(text);
                (p.codes.clone(), t)
            }
            None => (vec![Vec::new(); n_q], text.to_vec()),
        };
        // The NAR sees the text, a separator, the prompt's frames and the new frames at once.
        let limit = self.nar.transformer.max_seq_len();
        let used = nar_text.len() + 1 + frames;
        if used > limit {
            return Err(TtsError::Text(format!(
                "the text, a separator and its {frames} frames take {used} positions, more than \
                 the NAR model's context of {limit}; split it into shorter sentences"
            )));
        }
        let prompt_frames = prompt_codes.first().map_or(0, Vec::len);
        let prompt_codes = if used + prompt_frames <= limit {
            prompt_codes
        } else if prompt.is_some_and(|p| p.text.is_empty()) {
            // An untranscribed voice prompt: its first frames are enough to set the voice.
            tracing::debug!(
                from = prompt_frames,
                to = limit - used,
                "voice prompt cut to the NAR model's context"
            );
            prompt_codes
                .into_iter()
                .map(|mut l| {
                    l.truncate(limit - used);
                    l
                })
                .collect()
        } else {
            return Err(TtsError::Text(format!(
                "the prompt's {prompt_frames} frames and transcript with the text take {} \
                 positions, more than the NAR model's context of {limit}; use a shorter prompt",
                used + prompt_frames
            )));
        };
        Ok((nar_text, prompt_codes))
    }

    /// The RVQ layers synthesis renders: those the mel decoder reads, or every layer of the
    /// NAR for the codec's decoder.
    pub fn synthesis_layers(&self) -> usize {
        let all = self.nar.n_q();
        self.mel.as_ref().map_or(all, |mel| mel.n_q().min(all))
    }

    /// The codes `[layers][frames]` synthesis renders ([`Pipeline::synthesis_layers`]) for
    /// RVQ-1 codes `first` (layer 0 is `first`) and, for an aligned NAR, the frames' track ids
    /// ([`Pipeline::nar_track`]): the NAR runs only the stages whose layers are rendered.
    ///
    /// # Errors
    /// The NAR's, naming its stage.
    pub(crate) fn nar_codes(
        &self,
        nar_text: &[u32],
        prompt_codes: &[Vec<u32>],
        first: &[u32],
        track: Option<&[u32]>,
    ) -> Result<Vec<Vec<u32>>> {
        let layers = self.synthesis_layers();
        self.nar_layers(nar_text, prompt_codes, first, track, layers)
    }

    /// The NAR's first `layers` code layers `[layers][frames]` (layer 0 is `first`; a layer
    /// beyond the first runs one NAR stage each).
    ///
    /// # Errors
    /// The NAR's, naming its stage.
    pub(crate) fn nar_layers(
        &self,
        nar_text: &[u32],
        prompt_codes: &[Vec<u32>],
        first: &[u32],
        track: Option<&[u32]>,
        layers: usize,
    ) -> Result<Vec<Vec<u32>>> {
        if layers <= 1 {
            return Ok(vec![first.to_vec()]);
        }
        match &self.nar_engine {
            Some(engine) => engine
                .generate_layers(nar_text, prompt_codes, first, track, layers)
                .map_err(TtsError::stage("the NAR stage")),
            None => {
                let mut codes = self
                    .nar
                    .generate(nar_text, prompt_codes, first, track)
                    .map_err(TtsError::stage("the NAR stage"))?;
                codes.truncate(layers);
                Ok(codes)
            }
        }
    }

    /// Samples of frames `from..to` of the window `codes` `[n_q][frames]`, through the mel
    /// decoder and its vocoder ([`voxspec_codec::MelSpeech::synthesize_span`]).
    ///
    /// # Errors
    /// [`TtsError::Config`] without a mel decoder; the mel decoder's, naming its stage.
    pub(crate) fn render_span(
        &self,
        codes: &[Vec<u32>],
        phones: Option<&[u32]>,
        from: usize,
        to: usize,
    ) -> Result<Vec<f32>> {
        if let Some(engine) = &self.mel_engine {
            return engine
                .synthesize_span(codes, phones, from, to)
                .map_err(TtsError::stage("the mel decoder"));
        }
        let mel = self
            .mel
            .as_ref()
            .ok_or_else(|| TtsError::Config("the pipeline has no mel decoder".into()))?;
        mel.synthesize_span(codes, phones, from, to)
            .map_err(TtsError::stage("the mel decoder"))
    }

    /// Codes `[n_q][frames]` → `frames · hop` samples through the mel decoder and its renderer
    /// when the pipeline has one, else through the codec decoder. `phones` (one per frame,
    /// [`Pipeline::mel_phones`]) feed a mel decoder with a phone input.
    ///
    /// # Errors
    /// The codec's or the mel decoder's, naming its stage; [`TtsError::TensorRead`].
    pub fn decode_codes(&self, codes: &[Vec<u32>], phones: Option<&[u32]>) -> Result<Vec<f32>> {
        if let Some(engine) = &self.mel_engine {
            return engine
                .synthesize(codes, phones)
                .map_err(TtsError::stage("the mel decoder"));
        }
        if let Some(mel) = &self.mel {
            return mel
                .synthesize(codes, phones)
                .map_err(TtsError::stage("the mel decoder"));
        }
        let wave = self
            .codec
            .decode(self.codes_tensor(codes, 0, codes.first().map_or(0, Vec::len)))
            .map_err(TtsError::stage("the codec decoder"))?;
        wave.into_data()
            .try_into_vec::<f32>()
            .map_err(|e| TtsError::TensorRead {
                what: "the waveform",
                reason: format!("{e:?}"),
            })
    }

    /// Frames `from..to` of codes `[n_q][frames]` as the codec's `[n_q, 1, to − from]` tensor.
    pub(crate) fn codes_tensor(
        &self,
        codes: &[Vec<u32>],
        from: usize,
        to: usize,
    ) -> Tensor<3, Int> {
        let flat: Vec<i64> = codes
            .iter()
            .flat_map(|l| l[from..to].iter().map(|&c| i64::from(c)))
            .collect();
        Tensor::from_data(
            TensorData::new(flat, [codes.len(), 1, to - from]),
            &self.device,
        )
    }
}

/// The weight format of the native renderer for the AR engine's `format`: the same, but bf16
/// for int8 (weight-only int8 is measured on the language models only).
fn render_format(format: WeightFormat) -> WeightFormat {
    match format {
        WeightFormat::Int8 => WeightFormat::Bf16,
        f => f,
    }
}

/// A mel decoder with a phone input reads the AR model's phone ids: the AR model must be
/// aligned (its requests carry durations) and its tokenizer the decoder's (`tokenizer.json`
/// beside the decoder, when there is one, maps every id to the same phone).
fn check_mel_phones(
    mel: &MelSpeech,
    dir: &std::path::Path,
    ar: &MtpModel,
    tokenizer: &TextTokenizer,
    ar_dir: &std::path::Path,
) -> Result<()> {
    let incompatible = |what: String| {
        Err(TtsError::Incompatible(format!(
            "the mel decoder {} reads {} phone ids; {what}",
            dir.display(),
            mel.phones()
        )))
    };
    if !ar.is_aligned() {
        return incompatible(format!(
            "the AR model {} is not aligned, so no phone durations place them",
            ar_dir.display()
        ));
    }
    if tokenizer.vocab_size() != mel.phones() {
        return incompatible(format!(
            "the AR model's tokenizer ({}) has {}",
            ar_dir.display(),
            tokenizer.vocab_size()
        ));
    }
    let own = dir.join("tokenizer.json");
    if own.is_file() {
        let theirs = TextTokenizer::load(&own)
            .map_err(TtsError::load("the mel decoder's tokenizer", &own))?;
        let same = (0..tokenizer.vocab_size() as u32)
            .all(|id| theirs.decode(&[id]).ok() == tokenizer.decode(&[id]).ok());
        if !same {
            return incompatible(format!(
                "its tokenizer {} and the AR model's ({}) name the ids differently",
                own.display(),
                ar_dir.display()
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_experiment_uses_its_own_codec_when_it_has_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let exp = dir.path();
        let paths = ModelPaths::experiment(exp);
        assert_eq!(paths.ar, exp.join("ar"));
        assert_eq!(paths.nar, exp.join("nar"));
        assert_eq!(paths.transitions, exp.join("transitions.safetensors"));
        assert_eq!(paths.codec, PathBuf::from("checkpoints/codec-minitts"));
        std::fs::create_dir_all(exp.join("codec")).expect("mkdir");
        // A folder without a model is not a codec.
        assert_eq!(
            ModelPaths::experiment(exp).codec,
            PathBuf::from("checkpoints/codec-minitts")
        );
        std::fs::write(exp.join("codec/config.json"), "{}").expect("write");
        assert_eq!(ModelPaths::experiment(exp).codec, exp.join("codec"));
    }

    #[test]
    fn an_experiment_renders_through_its_mel_decoder_and_vocoder_when_it_has_them() {
        let dir = tempfile::tempdir().expect("tempdir");
        let exp = dir.path();
        let model = |name: &str| {
            std::fs::create_dir_all(exp.join(name)).expect("mkdir");
            std::fs::write(exp.join(name).join("config.json"), "{}").expect("write");
        };
        // A vocoder alone renders nothing: it needs a mel decoder.
        model("vocoder");
        let paths = ModelPaths::experiment(exp);
        assert_eq!((paths.mel_decoder, paths.vocoder), (None, None));
        model("mel_decoder");
        let paths = ModelPaths::experiment(exp);
        assert_eq!(paths.mel_decoder, Some(exp.join("mel_decoder")));
        assert_eq!(paths.vocoder, Some(exp.join("vocoder")));
        std::fs::remove_dir_all(exp.join("vocoder")).expect("rm");
        let paths = ModelPaths::experiment(exp);
        assert_eq!(paths.mel_decoder, Some(exp.join("mel_decoder")));
        assert_eq!(paths.vocoder, None, "Griffin-Lim");
    }
}
