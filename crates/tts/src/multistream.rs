//! Speech from a delayed multi-stream LM (`voxspec train multistream`, SoCodec §4):
//!
//! ```text
//! text ──tokenizer──▶ phone ids ──(aligned LM: duration predictor)──▶ LM (any frame decoder)
//!   reference recording ──SoCodec global encoder──▶ voice vector [D] ──┘      │
//!                                                                      frames [streams][T]
//!            waveform ◀──vocoder (or Griffin-Lim)── log-mel ◀──SoCodec decoder (+ voice)──┘
//! ```
//!
//! [`MultiStreamPipeline`] loads the LM, its tokenizer, the codec and the vocoder; its frame
//! decoders ([`MultiStreamDecoder`]) are AR, speculative decoding with a draft
//! ([`load_multistream_draft`]; exact, SSD or per-stream PCG acceptance) and multi-token heads
//! (independent or Viterbi per stream). The LM runs on the native CPU engine or on Burn
//! ([`MultiStreamPaths::engine`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use burn::tensor::{Device, Tensor, TensorData};
use voxspec_codec::Vocoder;
use voxspec_codec::socodec::{MelToWave, SoCodec, SoCodecConfig, load_socodec};
use voxspec_data::TextTokenizer;
use voxspec_engine::NativeMultiStream;
use voxspec_infer::{
    AcceptanceRule, FrameArDecoder, FrameDecoder, FrameGeneration, FrameModel, FrameMtpDecoder,
    FrameRequest, FrameSpeculativeDecoder, FrameStats, SamplerConfig, SimilarityGroups,
    SpeculativeConfig, Transitions, ViterbiConfig, groups_of_mean_size,
};
use voxspec_multistream::{
    MULTISTREAM_DRAFT_KIND, MULTISTREAM_KIND, MsFile, MsFrameLm, MsPrompt, MultiStreamConfig,
    MultiStreamModel, StepTrack, load_multistream, load_stream_transitions,
};

use crate::decoders::DecoderSpec;
use crate::engine::EngineKind;
use crate::error::{Result, TtsError};

/// The LM stage of [`MultiStreamPipeline::speak`]: (text ids, durations, frame limit) → frames
/// `[streams][T]`.
pub type FrameDecodeFn<'a> = dyn FnMut(&[u32], Option<&[u32]>, usize) -> Result<Vec<Vec<u32>>> + 'a;

/// Whether `dir` holds a multi-stream LM or draft: its `config.json` has the kind
/// `multistream` or `multistream-draft`. False when there is no readable `config.json` (the
/// single-stream loader then says what is wrong with the directory).
pub fn is_multistream_dir(dir: &Path) -> bool {
    voxspec_train::weights::model_kind(dir)
        .is_some_and(|k| k == MULTISTREAM_KIND || k == MULTISTREAM_DRAFT_KIND)
}

/// Where the models of a multi-stream LM live, and the engine that runs it.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiStreamPaths {
    /// The LM directory (`voxspec train multistream`), with its `tokenizer.json`.
    pub model: PathBuf,
    /// The SoCodec directory; `None`: the codec the LM's `config.json` names (the one it was
    /// trained on).
    pub codec: Option<PathBuf>,
    /// The vocoder of the codec's log-mel; `None`: Griffin-Lim (no training, buzzy).
    pub vocoder: Option<PathBuf>,
    /// Implementation that runs the LM (and a draft): the native CPU engine or Burn.
    pub engine: EngineKind,
}

/// A draft multi-stream LM (`voxspec train multistream --target`).
pub struct MultiStreamDraft {
    /// Its architecture.
    pub config: MultiStreamConfig,
    /// The draft as loaded (Burn).
    pub model: MultiStreamModel,
    /// The draft on the native engine (when the target runs there).
    pub native: Option<NativeMultiStream>,
}

/// Loads the draft in `dir` and checks that it reads what `target`'s LM reads.
///
/// # Errors
/// [`TtsError::Load`] naming the directory; [`TtsError::Incompatible`] when the streams,
/// codebook, delay, text vocabulary, voice or alignment differ.
pub fn load_multistream_draft(
    dir: &Path,
    target: &MultiStreamPipeline,
    device: &Device,
) -> Result<MultiStreamDraft> {
    let (file, model) = load_multistream(dir, device).map_err(TtsError::load("the draft", dir))?;
    let (d, t) = (&file.model, target.config());
    if !(d.streams == t.streams
        && d.codebook_size == t.codebook_size
        && d.delay == t.delay
        && d.text_vocab == t.text_vocab
        && d.global_dim == t.global_dim
        && d.align == t.align)
    {
        return Err(TtsError::Incompatible(format!(
            "the draft {} does not read what the target reads (streams, codebook, delay, text, \
             voice, alignment must match)",
            dir.display()
        )));
    }
    let native = match &target.native {
        Some(t) => Some(
            NativeMultiStream::from_burn_with(&model, &file.model, t.weight_format())
                .map_err(TtsError::load("the draft onto the native engine", dir))?,
        ),
        None => None,
    };
    Ok(MultiStreamDraft {
        config: file.model,
        model,
        native,
    })
}

/// A frame decoder of the multi-stream LM.
pub enum MultiStreamDecoder<'a> {
    /// One forward per step.
    Ar,
    /// A draft proposes γ steps, the target verifies them in one forward.
    Speculative {
        /// The draft.
        draft: &'a MultiStreamDraft,
        /// γ and the acceptance rule.
        config: SpeculativeConfig,
        /// PCG: each stream's own similarity groups (overriding `config.rule`).
        stream_rules: Option<Vec<AcceptanceRule>>,
    },
    /// Multi-token heads: up to `heads` steps per forward, independent or Viterbi per stream.
    Mtp(FrameMtpDecoder),
}

impl MultiStreamDecoder<'_> {
    /// Short name for logs and tables (`ar`, `sd γ=3`, `pcg γ=3`, `mtp k=4`, …).
    pub fn label(&self) -> String {
        match self {
            Self::Ar => "ar".into(),
            Self::Speculative {
                config,
                stream_rules: Some(_),
                ..
            } => format!("pcg γ={}", config.gamma),
            Self::Speculative { config, .. } => {
                format!("{} γ={}", config.rule.name(), config.gamma)
            }
            Self::Mtp(d) => match d.viterbi() {
                Some(v) => format!("mtp-viterbi k={} top-k={}", d.heads(), v.top_k),
                None => format!("mtp k={}", d.heads()),
            },
        }
    }
}

/// Runs `decoder` on `target` (and, for speculation, `draft`): the Burn adapter or the native
/// engine, which implement the same `FrameModel`.
fn run_decoder<M, D>(
    decoder: &MultiStreamDecoder<'_>,
    target: &M,
    draft: Option<D>,
    request: &FrameRequest<MsPrompt>,
    sampler: &SamplerConfig,
) -> Result<FrameGeneration>
where
    M: FrameModel<Prompt = MsPrompt>,
    D: FrameModel<Prompt = MsPrompt>,
{
    Ok(match decoder {
        MultiStreamDecoder::Ar => FrameArDecoder::new().generate(target, request, sampler)?,
        MultiStreamDecoder::Speculative {
            config,
            stream_rules,
            ..
        } => {
            let draft = draft.ok_or_else(|| TtsError::Decoder {
                spec: decoder.label(),
                reason: "speculative decoding without a draft".into(),
            })?;
            let mut d = FrameSpeculativeDecoder::new(draft, config.clone())?;
            if let Some(rules) = stream_rules {
                d = d.with_stream_rules(rules.clone())?;
            }
            d.generate(target, request, sampler)?
        }
        MultiStreamDecoder::Mtp(d) => d.generate(target, request, sampler)?,
    })
}

/// Everything that turns text into audio with a multi-stream LM.
pub struct MultiStreamPipeline {
    /// The LM's tokenizer (`tokenizer.json` in its directory).
    pub tokenizer: TextTokenizer,
    /// The LM's `config.json` (architecture, codec, draft origin).
    pub file: MsFile,
    /// The LM as loaded (Burn).
    pub model: MultiStreamModel,
    /// The codec's configuration (mel settings, sample rate, frame rate).
    pub codec_config: SoCodecConfig,
    /// The codec: its global encoder makes voice vectors, its decoder log-mel.
    pub codec: SoCodec,
    /// The vocoder (or Griffin-Lim) that turns the codec's log-mel into audio.
    pub renderer: MelToWave,
    /// The device of the Burn models.
    pub device: Device,
    /// One transition matrix per stream (models trained with `--mtp-heads`).
    pub transitions: Option<Vec<Arc<Transitions>>>,
    /// The LM on the native CPU engine, else Burn runs it.
    pub native: Option<NativeMultiStream>,
}

/// One utterance's result.
pub struct MultiStreamSpeech {
    /// Frames `[streams][T]`.
    pub frames: Vec<Vec<u32>>,
    /// Waveform at [`MultiStreamPipeline::sample_rate`].
    pub samples: Vec<f32>,
    /// Wall seconds of the LM (durations + decoding).
    pub lm_seconds: f64,
    /// Wall seconds of the codec decoder and vocoder.
    pub rest_seconds: f64,
}

impl MultiStreamPipeline {
    /// Loads the LM in `paths.model`, its tokenizer, the codec (`paths.codec` or the one the
    /// model was trained on) and the vocoder (or Griffin-Lim), and checks that they fit.
    ///
    /// # Errors
    /// [`TtsError::Load`] naming the directory or file that cannot be loaded;
    /// [`TtsError::NoCodec`] when neither the paths nor the model name a codec;
    /// [`TtsError::Incompatible`] when the codec's streams do not fit the LM;
    /// [`TtsError::Vocoder`] for a vocoder that cannot be loaded or does not take the codec's
    /// log-mel.
    pub fn load(paths: &MultiStreamPaths, device: &Device) -> Result<Self> {
        let model_dir = &paths.model;
        let (file, model) = load_multistream(model_dir, device)
            .map_err(TtsError::load("the multi-stream LM", model_dir))?;
        let tok = model_dir.join("tokenizer.json");
        let tokenizer = TextTokenizer::load(&tok).map_err(TtsError::load("the tokenizer", &tok))?;
        let codec_dir = match (&paths.codec, &file.codec) {
            (Some(c), _) => c.clone(),
            (None, Some(c)) => PathBuf::from(c),
            (None, None) => {
                return Err(TtsError::NoCodec {
                    model: model_dir.clone(),
                });
            }
        };
        let (codec_config, codec) =
            load_socodec(&codec_dir, device).map_err(TtsError::load("the codec", &codec_dir))?;
        if codec.n_streams() < file.model.streams
            || codec.stream_vocab() != file.model.codebook_size
        {
            return Err(TtsError::Incompatible(format!(
                "the codec {} has {} streams of {} tokens; the LM reads {} of {}",
                codec_dir.display(),
                codec.n_streams(),
                codec.stream_vocab(),
                file.model.streams,
                file.model.codebook_size
            )));
        }
        let renderer = renderer(paths.vocoder.as_deref(), &codec_config, device)?;
        let transitions = load_stream_transitions(model_dir, file.model.streams)
            .map_err(TtsError::load(
                "the transition matrices of the multi-stream LM",
                model_dir,
            ))?
            .map(|t| t.into_iter().map(Arc::new).collect());
        let native = match paths.engine.weight_format() {
            Some(format) => Some(
                NativeMultiStream::from_burn_with(&model, &file.model, format).map_err(
                    TtsError::load("the multi-stream LM onto the native engine", model_dir),
                )?,
            ),
            None => None,
        };
        Ok(Self {
            native,
            transitions,
            tokenizer,
            file,
            model,
            codec_config,
            codec,
            renderer,
            device: device.clone(),
        })
    }

    /// The LM's configuration.
    pub fn config(&self) -> &MultiStreamConfig {
        &self.file.model
    }

    /// PCG acceptance rules, one per stream: similarity groups of that stream's input
    /// embeddings (its codes, and `S` standing for EOS) at `theta`, or at the θ whose groups
    /// have a mean size of 4.5 (the paper's setting).
    ///
    /// # Errors
    /// [`TtsError::TensorRead`]; the grouping's errors for a θ outside (−1, 1).
    pub fn stream_groups(&self, theta: Option<f32>) -> Result<Vec<AcceptanceRule>> {
        self.model
            .stream_embeddings
            .iter()
            .enumerate()
            .map(|(j, table)| {
                let [vocab, dim] = table.weight.val().dims();
                let weights = table
                    .weight
                    .val()
                    .into_data()
                    .try_into_vec::<f32>()
                    .map_err(|e| TtsError::TensorRead {
                        what: "a stream's embeddings",
                        reason: format!("stream {j}: {e:?}"),
                    })?;
                let groups = match theta {
                    Some(t) => SimilarityGroups::from_embeddings(&weights, vocab, dim, t)?,
                    None => groups_of_mean_size(&weights, vocab, dim, 4.5)?,
                };
                tracing::debug!(
                    stream = j,
                    theta = groups.theta(),
                    mean = groups.mean_group_size(),
                    "PCG groups"
                );
                Ok(AcceptanceRule::Groups(Arc::new(groups)))
            })
            .collect()
    }

    /// The MTP decoder of `heads` steps per forward; with `top_k`, Viterbi over the model's
    /// per-stream transition matrices.
    ///
    /// # Errors
    /// [`TtsError::Config`] for more heads than the LM has, or Viterbi on a model without
    /// transition matrices; the decoder's own checks.
    pub fn mtp(&self, heads: usize, top_k: Option<usize>) -> Result<FrameMtpDecoder> {
        let have = self.config().n_heads();
        if !(1..=have).contains(&heads) {
            return Err(TtsError::Config(format!(
                "--heads {heads}: the multi-stream LM has {have} prediction head(s); decode it \
                 with `--decoder ar` (or sd/ssd/pcg with --draft), or train heads with \
                 `voxspec train multistream --base LM --mtp-heads N`"
            )));
        }
        Ok(match top_k {
            None => FrameMtpDecoder::new(heads)?,
            Some(k) => {
                let transitions = self.transitions.clone().ok_or_else(|| {
                    TtsError::Config(
                        "--decoder mtp-viterbi needs the model's transition matrices \
                         (transitions-<j>.safetensors, written by `voxspec train multistream \
                         --mtp-heads`)"
                            .into(),
                    )
                })?;
                FrameMtpDecoder::with_viterbi(heads, ViterbiConfig::new(k), transitions)?
            }
        })
    }

    /// The draft-free decoder of `spec`: [`DecoderSpec::Ar`], [`DecoderSpec::Mtp`] and
    /// [`DecoderSpec::MtpViterbi`] (Viterbi over the LM's per-stream transition matrices).
    /// Speculative decoders need a draft: build [`MultiStreamDecoder::Speculative`] with one from
    /// [`load_multistream_draft`].
    ///
    /// # Errors
    /// [`TtsError::Decoder`] for a speculative or self-speculative `spec`; as [`Self::mtp`].
    pub fn decoder(&self, spec: &DecoderSpec) -> Result<MultiStreamDecoder<'static>> {
        Ok(match spec {
            DecoderSpec::Ar => MultiStreamDecoder::Ar,
            DecoderSpec::Mtp { heads } => MultiStreamDecoder::Mtp(self.mtp(*heads, None)?),
            DecoderSpec::MtpViterbi { heads, top_k } => {
                MultiStreamDecoder::Mtp(self.mtp(*heads, Some(*top_k))?)
            }
            DecoderSpec::Speculative { .. } | DecoderSpec::SelfSpec { .. } => {
                return Err(TtsError::Decoder {
                    spec: spec.label(),
                    reason: "not available for a multi-stream LM without a draft (ar, mtp and \
                             mtp-viterbi are)"
                        .into(),
                });
            }
        })
    }

    /// The codec's sample rate (the rate of every waveform this pipeline makes).
    pub fn sample_rate(&self) -> u32 {
        self.codec_config.mel.sample_rate
    }

    /// Text ids of a sentence.
    ///
    /// # Errors
    /// [`TtsError::Text`] for empty text; the tokenizer's errors.
    pub fn text_ids(&self, text: &str) -> Result<Vec<u32>> {
        if text.trim().is_empty() {
            return Err(TtsError::Text("the text is empty".into()));
        }
        Ok(self.tokenizer.encode(text)?)
    }

    /// The voice vector `[D]` of a reference recording, or the mean of those of every
    /// recording (wav, flac, mp3, ogg) in a directory (the LM trains on speaker means: several
    /// recordings of one voice match it best). Recordings are resampled to the codec's rate.
    ///
    /// # Errors
    /// [`TtsError::Prompt`] naming a reference that does not exist, a directory without
    /// recordings, or a recording the codec cannot take (shorter than its clip window);
    /// the audio reader's, naming the file.
    pub fn voice(&self, reference: &Path) -> Result<Vec<f32>> {
        let prompt = |reason: String| TtsError::Prompt {
            path: reference.to_path_buf(),
            reason,
        };
        if !reference.exists() {
            return Err(prompt("no such file or directory".into()));
        }
        let files: Vec<PathBuf> = if reference.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(reference)
                .map_err(|e| prompt(format!("cannot read the directory: {e}")))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| ["wav", "flac", "mp3", "ogg"].contains(&e))
                })
                .collect();
            files.sort();
            if files.is_empty() {
                return Err(prompt("holds no wav/flac/mp3/ogg recording".into()));
            }
            files
        } else {
            vec![reference.to_path_buf()]
        };
        let mut mean: Vec<f32> = Vec::new();
        for file in &files {
            let audio = voxspec_audio::load_resampled(file, self.sample_rate())?;
            let v = self.voice_of_samples(&audio.samples, file)?;
            if mean.is_empty() {
                mean = vec![0.0; v.len()];
            }
            for (m, x) in mean.iter_mut().zip(&v) {
                *m += x / files.len() as f32;
            }
        }
        Ok(mean)
    }

    /// The voice vector `[D]` of a recording `samples` `[n]` at [`Self::sample_rate`]; `name`
    /// stands for it in errors.
    ///
    /// # Errors
    /// [`TtsError::Prompt`] when the codec cannot take it (shorter than its clip window);
    /// [`TtsError::TensorRead`].
    pub fn voice_of_samples(&self, samples: &[f32], name: &Path) -> Result<Vec<f32>> {
        self.codec
            .voice(&self.codec_config, samples, &self.device)
            .map_err(|e| TtsError::Prompt {
                path: name.to_path_buf(),
                reason: format!("the codec cannot take it as a voice reference: {e}"),
            })?
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| TtsError::TensorRead {
                what: "the voice vector",
                reason: format!("{e:?}"),
            })
    }

    /// Predicted durations (aligned models; frames per phone, scaled by `pace`, above 1 slower)
    /// and the frame limit of text ids `[N]`.
    ///
    /// # Errors
    /// [`TtsError::Incompatible`] for an aligned model without a duration predictor; the
    /// predictor's errors (empty text, a non-positive pace).
    pub fn plan(&self, text: &[u32], pace: f32) -> Result<(Option<Vec<u32>>, usize)> {
        match &self.config().align {
            Some(align) => {
                let units = self
                    .model
                    .duration
                    .as_ref()
                    .ok_or_else(|| {
                        TtsError::Incompatible("the aligned model has no duration predictor".into())
                    })?
                    .predict(text, pace)?;
                let frames = StepTrack::new(text, &units, align).frames();
                // The track ends at its last frame; allow two more for the model's EOS.
                Ok((Some(units), frames + 2))
            }
            // At most ~3 frames per phone (120 ms frames).
            None => Ok((None, 3 * text.len() + 8)),
        }
    }

    /// Frames `[streams][T]` → waveform `[T · samples per frame]` with a voice vector `[D]`:
    /// the codec decoder's log-mel, then the vocoder.
    ///
    /// # Errors
    /// The codec's (ragged or empty streams, a token out of range); the vocoder's, as
    /// [`TtsError::Stage`].
    pub fn render(&self, frames: &[Vec<u32>], voice: &[f32]) -> Result<Vec<f32>> {
        let global = Tensor::<2>::from_data(
            TensorData::new(voice.to_vec(), [1, voice.len()]),
            &self.device,
        );
        let (mel, n) =
            self.codec
                .decode_tokens(&self.codec_config, frames, global, &self.device)?;
        self.renderer
            .render(&mel, n)
            .map_err(TtsError::stage("the vocoder"))
    }

    /// Runs the LM stage with `decoder`: text ids `[N]`, voice vector `[D]`, an aligned
    /// model's durations `[N]` ([`Self::plan`]) → frames `[streams][T]` with `T ≤ max_frames`
    /// and the decoder's counters.
    ///
    /// # Errors
    /// The prompt's (text or voice that does not fit the LM) and the decoder's;
    /// [`TtsError::Incompatible`] for a draft not loaded on the engine the LM runs on.
    #[allow(clippy::too_many_arguments)]
    pub fn generate(
        &self,
        decoder: &MultiStreamDecoder<'_>,
        text: &[u32],
        voice: &[f32],
        durations: Option<&[u32]>,
        max_frames: usize,
        seed: u64,
        sampler: &SamplerConfig,
    ) -> Result<FrameGeneration> {
        let config = self.config();
        let target = MsFrameLm {
            model: &self.model,
            config,
        };
        let prompt = MsPrompt::new(&self.model, config, text, Some(voice), durations)?;
        // An aligned model speaks the frames its track lays out: its end of speech is banned
        // before the last of them (with a flat distribution, EOS can be the argmax early).
        let min_frames = prompt.track_frames().map_or(1, |t| {
            t.saturating_sub(1)
                .clamp(1, max_frames.saturating_sub(1).max(1))
        });
        let request = FrameRequest::new(prompt, max_frames, seed).with_min_frames(min_frames);
        match (&self.native, decoder) {
            (Some(native), MultiStreamDecoder::Speculative { draft, .. }) => {
                let d = draft.native.as_ref().ok_or_else(|| {
                    TtsError::Incompatible("the draft was not loaded on the native engine".into())
                })?;
                run_decoder(decoder, native, Some(d), &request, sampler)
            }
            (Some(native), _) => {
                run_decoder::<_, &NativeMultiStream>(decoder, native, None, &request, sampler)
            }
            (None, MultiStreamDecoder::Speculative { draft, .. }) => {
                let d = MsFrameLm {
                    model: &draft.model,
                    config: &draft.config,
                };
                run_decoder(decoder, &target, Some(d), &request, sampler)
            }
            (None, _) => run_decoder::<_, MsFrameLm<'_>>(decoder, &target, None, &request, sampler),
        }
    }

    /// Speaks text ids `[N]` with a voice vector `[D]`, using `decode` for the LM stage (text,
    /// durations at pace 1, frame limit → frames `[streams][T]`), then the codec decoder and the
    /// vocoder.
    ///
    /// # Errors
    /// [`TtsError::NoFrames`] when the LM ends speech before its first frame; `decode`'s, the
    /// duration predictor's, the codec's and the vocoder's.
    pub fn speak(
        &self,
        text: &[u32],
        voice: &[f32],
        decode: &mut FrameDecodeFn<'_>,
    ) -> Result<MultiStreamSpeech> {
        let start = Instant::now();
        let (durations, max_frames) = self.plan(text, 1.0)?;
        let frames = decode(text, durations.as_deref(), max_frames)?;
        let lm_seconds = start.elapsed().as_secs_f64();
        if frames.first().is_none_or(Vec::is_empty) {
            return Err(TtsError::NoFrames);
        }
        let start = Instant::now();
        let samples = self.render(&frames, voice)?;
        Ok(MultiStreamSpeech {
            frames,
            samples,
            lm_seconds,
            rest_seconds: start.elapsed().as_secs_f64(),
        })
    }
}

impl MultiStreamPipeline {
    /// Speaks text ids `[N]` with a voice vector `[D]` through [`Self::speak`], the LM stage run
    /// by `decoder` ([`Self::generate`] with `seed`); returns the speech and the decoder's
    /// counters.
    ///
    /// # Errors
    /// As [`Self::speak`] and [`Self::generate`].
    pub fn speak_with(
        &self,
        decoder: &MultiStreamDecoder<'_>,
        text: &[u32],
        voice: &[f32],
        seed: u64,
        sampler: &SamplerConfig,
    ) -> Result<(MultiStreamSpeech, Option<FrameStats>)> {
        let mut stats = None;
        let mut decode = |text: &[u32], durations: Option<&[u32]>, max_frames: usize| {
            let g = self.generate(decoder, text, voice, durations, max_frames, seed, sampler)?;
            stats = Some(g.stats);
            Ok(g.frames)
        };
        let speech = self.speak(text, voice, &mut decode)?;
        Ok((speech, stats))
    }
}

/// The vocoder at `vocoder` (or Griffin-Lim for `None`), checked against the codec's mel.
fn renderer(vocoder: Option<&Path>, config: &SoCodecConfig, device: &Device) -> Result<MelToWave> {
    let r = match vocoder {
        None => MelToWave::GriffinLim(config.mel),
        Some(path) => {
            let v = Vocoder::load(path, device).map_err(|e| TtsError::Vocoder {
                path: path.to_path_buf(),
                source: Box::new(e),
            })?;
            MelToWave::Vocoder(Box::new(v))
        }
    };
    r.check(&config.mel).map_err(|e| TtsError::Vocoder {
        path: vocoder.map_or_else(|| PathBuf::from("Griffin-Lim"), Path::to_path_buf),
        source: Box::new(e),
    })?;
    Ok(r)
}
