//! Speech from a delayed multi-stream LM: text (phones) → voice vector of a reference
//! recording → the LM (any frame decoder) → SoCodec decoder → vocoder. `voxspec synthesize`
//! comes here when `--model` is a multi-stream LM directory; `bench decode --multistream` too.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use burn::tensor::{Device, Tensor, TensorData};
use voxspec_codec::socodec::{MelToWave, SoCodec, SoCodecConfig};
use voxspec_data::TextTokenizer;
use voxspec_engine::NativeMultiStream;
use voxspec_infer::{
    AcceptanceRule, FrameArDecoder, FrameDecoder, FrameGeneration, FrameModel, FrameMtpDecoder,
    FrameRequest, FrameSpeculativeDecoder, SamplerConfig, SimilarityGroups, SpeculativeConfig,
    Transitions, ViterbiConfig, groups_of_mean_size,
};
use voxspec_multistream::{
    MsFile, MsFrameLm, MsPrompt, MultiStreamConfig, MultiStreamModel, StepTrack, load_multistream,
    load_stream_transitions,
};
use voxspec_tts::EngineKind;

/// The LM stage of [`MsPipeline::speak`]: (text, durations, frame limit) → frames `[K][T]`.
pub(crate) type FrameDecodeFn<'a> =
    dyn FnMut(&[u32], Option<&[u32]>, usize) -> anyhow::Result<Vec<Vec<u32>>> + 'a;

/// A draft multi-stream LM (`voxspec train multistream --target`).
pub(crate) struct MsDraft {
    pub(crate) config: MultiStreamConfig,
    pub(crate) model: MultiStreamModel,
    /// The draft on the native engine (when the target runs there).
    pub(crate) native: Option<NativeMultiStream>,
}

/// Loads a draft and checks it against the pipeline's target.
pub(crate) fn load_draft(
    dir: &Path,
    target: &MsPipeline,
    device: &Device,
) -> anyhow::Result<MsDraft> {
    let (file, model) = load_multistream(dir, device)
        .with_context(|| format!("loading the draft {}", dir.display()))?;
    let (d, t) = (&file.model, target.config());
    anyhow::ensure!(
        d.streams == t.streams
            && d.codebook_size == t.codebook_size
            && d.delay == t.delay
            && d.text_vocab == t.text_vocab
            && d.global_dim == t.global_dim
            && d.align == t.align,
        "the draft {} does not read what the target reads (streams, codebook, delay, text, \
         voice, alignment must match)",
        dir.display()
    );
    let native = match &target.native {
        Some(t) => Some(
            NativeMultiStream::from_burn_with(&model, &file.model, t.weight_format())
                .with_context(|| format!("the draft {} on the native engine", dir.display()))?,
        ),
        None => None,
    };
    Ok(MsDraft {
        config: file.model,
        model,
        native,
    })
}

/// A frame decoder of the multi-stream LM.
pub(crate) enum MsDecoder<'a> {
    /// One forward per step.
    Ar,
    /// A draft proposes γ steps, the target verifies them in one forward.
    Speculative {
        draft: &'a MsDraft,
        config: SpeculativeConfig,
        /// PCG: each stream's own similarity groups (overriding `config.rule`).
        stream_rules: Option<Vec<AcceptanceRule>>,
    },
    /// Multi-token heads: up to `heads` steps per forward, independent or Viterbi per stream.
    Mtp(FrameMtpDecoder),
}

impl<'a> MsDecoder<'a> {
    /// The decoder `synthesize`'s flags ask for.
    pub(crate) fn from_args(
        args: &crate::synth::SynthesizeArgs,
        pipeline: &MsPipeline,
        draft: Option<&'a MsDraft>,
    ) -> anyhow::Result<Self> {
        use crate::synth::DecoderKind;
        let rule = match args.decoder {
            DecoderKind::Ar => return Ok(Self::Ar),
            DecoderKind::Mtp => return Ok(Self::Mtp(pipeline.mtp(args.heads, None)?)),
            DecoderKind::MtpViterbi => {
                return Ok(Self::Mtp(pipeline.mtp(args.heads, Some(args.top_k))?));
            }
            DecoderKind::Sd | DecoderKind::Pcg => AcceptanceRule::Exact,
            DecoderKind::Ssd => AcceptanceRule::Tolerance { beta: args.beta },
            other => anyhow::bail!(
                "--decoder {other:?} is not available for multi-stream LMs (ar, mtp, \
                 mtp-viterbi, sd, ssd, pcg are)"
            ),
        };
        let draft = draft.context("--decoder sd/ssd/pcg needs a draft (--draft DIR)")?;
        let config = SpeculativeConfig::new(args.gamma, rule);
        config.validate()?;
        let stream_rules = match args.decoder {
            DecoderKind::Pcg => Some(pipeline.stream_groups(args.theta)?),
            _ => None,
        };
        Ok(Self::Speculative {
            draft,
            config,
            stream_rules,
        })
    }

    /// Short name for logs and tables.
    pub(crate) fn label(&self) -> String {
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
    decoder: &MsDecoder<'_>,
    target: &M,
    draft: Option<D>,
    request: &FrameRequest<MsPrompt>,
    sampler: &SamplerConfig,
) -> anyhow::Result<FrameGeneration>
where
    M: FrameModel<Prompt = MsPrompt>,
    D: FrameModel<Prompt = MsPrompt>,
{
    Ok(match decoder {
        MsDecoder::Ar => FrameArDecoder::new().generate(target, request, sampler)?,
        MsDecoder::Speculative {
            config,
            stream_rules,
            ..
        } => {
            let draft = draft.context("speculative decoding without a draft")?;
            let mut d = FrameSpeculativeDecoder::new(draft, config.clone())?;
            if let Some(rules) = stream_rules {
                d = d.with_stream_rules(rules.clone())?;
            }
            d.generate(target, request, sampler)?
        }
        MsDecoder::Mtp(d) => d.generate(target, request, sampler)?,
    })
}

/// Whether `dir` holds a multi-stream LM (or draft).
pub(crate) fn is_multistream(dir: &Path) -> bool {
    std::fs::read_to_string(dir.join("config.json"))
        .ok()
        .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
        .and_then(|v| v.get("kind").and_then(|k| k.as_str()).map(String::from))
        .is_some_and(|k| k.starts_with("multistream"))
}

/// Everything that turns text into audio with a multi-stream LM.
pub(crate) struct MsPipeline {
    pub(crate) tokenizer: TextTokenizer,
    pub(crate) file: MsFile,
    pub(crate) model: MultiStreamModel,
    pub(crate) codec_config: SoCodecConfig,
    pub(crate) codec: SoCodec,
    pub(crate) render: MelToWave,
    pub(crate) device: Device,
    /// One transition matrix per stream (models trained with `--mtp-heads`).
    pub(crate) transitions: Option<Vec<Arc<Transitions>>>,
    /// The LM on the native CPU engine (`--engine native`, the default), else Burn runs it.
    pub(crate) native: Option<NativeMultiStream>,
}

/// One utterance's result.
pub(crate) struct MsSpeech {
    /// Frames `[streams][T]`.
    pub(crate) frames: Vec<Vec<u32>>,
    /// Waveform at the codec's rate.
    pub(crate) samples: Vec<f32>,
    /// Wall seconds of the LM (durations + decoding).
    pub(crate) lm_seconds: f64,
    /// Wall seconds of the codec decoder and vocoder.
    pub(crate) rest_seconds: f64,
}

impl MsPipeline {
    /// Loads the LM in `model_dir`, its tokenizer, the codec (`codec` or the one the model
    /// was trained on) and the vocoder (or Griffin-Lim).
    pub(crate) fn load(
        model_dir: &Path,
        codec: Option<&Path>,
        vocoder: &Path,
        griffin_lim: bool,
        engine: EngineKind,
        device: &Device,
    ) -> anyhow::Result<Self> {
        let (file, model) = load_multistream(model_dir, device)
            .with_context(|| format!("loading the multi-stream LM {}", model_dir.display()))?;
        let tok = model_dir.join("tokenizer.json");
        let tokenizer = TextTokenizer::load(&tok)
            .with_context(|| format!("loading the tokenizer {}", tok.display()))?;
        let codec_dir = match (codec, &file.codec) {
            (Some(c), _) => c.to_path_buf(),
            (None, Some(c)) => PathBuf::from(c),
            (None, None) => anyhow::bail!(
                "{} does not name its codec: pass --codec <DIR>",
                model_dir.display()
            ),
        };
        let (codec_config, codec) = crate::socodec_cmd::load(&codec_dir, device)
            .with_context(|| format!("loading the codec {}", codec_dir.display()))?;
        anyhow::ensure!(
            codec.n_streams() >= file.model.streams
                && codec.stream_vocab() == file.model.codebook_size,
            "the codec {} has {} streams of {} tokens; the LM reads {} of {}",
            codec_dir.display(),
            codec.n_streams(),
            codec.stream_vocab(),
            file.model.streams,
            file.model.codebook_size
        );
        let render = crate::socodec_cmd::renderer(vocoder, griffin_lim, &codec_config, device)?;
        let transitions = load_stream_transitions(model_dir, file.model.streams)
            .with_context(|| format!("loading the transition matrices of {}", model_dir.display()))?
            .map(|t| t.into_iter().map(Arc::new).collect());
        let native = match engine.weight_format() {
            Some(format) => Some(
                NativeMultiStream::from_burn_with(&model, &file.model, format)
                    .with_context(|| format!("{} on the native engine", model_dir.display()))?,
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
            render,
            device: device.clone(),
        })
    }

    /// The LM's configuration.
    pub(crate) fn config(&self) -> &MultiStreamConfig {
        &self.file.model
    }

    /// PCG acceptance rules, one per stream: similarity groups of that stream's input
    /// embeddings (its codes, and `S` standing for EOS) at `theta`, or at the θ whose groups
    /// have a mean size of 4.5 (the paper's setting).
    pub(crate) fn stream_groups(&self, theta: Option<f32>) -> anyhow::Result<Vec<AcceptanceRule>> {
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
                    .map_err(|e| anyhow::anyhow!("stream {j} embeddings: {e:?}"))?;
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
    pub(crate) fn mtp(
        &self,
        heads: usize,
        top_k: Option<usize>,
    ) -> anyhow::Result<FrameMtpDecoder> {
        let have = self.config().n_heads();
        anyhow::ensure!(
            (1..=have).contains(&heads),
            "--heads {heads}: the multi-stream LM has {have} prediction head(s); decode it with \
             `--decoder ar` (or sd/ssd/pcg with --draft), or train heads with `voxspec train \
             multistream --base LM --mtp-heads N`"
        );
        Ok(match top_k {
            None => FrameMtpDecoder::new(heads)?,
            Some(k) => {
                let transitions = self.transitions.clone().context(
                    "--decoder mtp-viterbi needs the model's transition matrices \
                     (transitions-<j>.safetensors, written by `voxspec train multistream \
                     --mtp-heads`)",
                )?;
                FrameMtpDecoder::with_viterbi(heads, ViterbiConfig::new(k), transitions)?
            }
        })
    }

    /// The codec's sample rate.
    pub(crate) fn sample_rate(&self) -> u32 {
        self.codec_config.mel.sample_rate
    }

    /// Text ids of a sentence.
    pub(crate) fn text_ids(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        anyhow::ensure!(!text.trim().is_empty(), "the text is empty");
        Ok(self.tokenizer.encode(text)?)
    }

    /// The voice vector of a reference recording, or the mean of those of every recording in
    /// a directory (the LM trains on speaker means: several recordings of one voice match it
    /// best).
    pub(crate) fn voice(&self, reference: &Path) -> anyhow::Result<Vec<f32>> {
        let files: Vec<PathBuf> = if reference.is_dir() {
            let mut files: Vec<PathBuf> = std::fs::read_dir(reference)
                .with_context(|| format!("reading {}", reference.display()))?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.extension()
                        .and_then(|e| e.to_str())
                        .is_some_and(|e| ["wav", "flac", "mp3", "ogg"].contains(&e))
                })
                .collect();
            files.sort();
            anyhow::ensure!(
                !files.is_empty(),
                "{} holds no wav/flac/mp3/ogg recording",
                reference.display()
            );
            files
        } else {
            vec![reference.to_path_buf()]
        };
        let mut mean: Vec<f32> = Vec::new();
        for file in &files {
            let samples = crate::codec_cmd::read_audio(file, self.sample_rate())?;
            let v = self
                .codec
                .voice(&self.codec_config, &samples, &self.device)
                .with_context(|| format!("the reference {}", file.display()))?
                .into_data()
                .try_into_vec::<f32>()
                .map_err(|e| anyhow::anyhow!("voice vector: {e:?}"))?;
            if mean.is_empty() {
                mean = vec![0.0; v.len()];
            }
            for (m, x) in mean.iter_mut().zip(&v) {
                *m += x / files.len() as f32;
            }
        }
        Ok(mean)
    }

    /// Predicted durations (aligned models) and the frame limit of a text.
    pub(crate) fn plan(&self, text: &[u32]) -> anyhow::Result<(Option<Vec<u32>>, usize)> {
        match &self.config().align {
            Some(align) => {
                let units = self
                    .model
                    .duration
                    .as_ref()
                    .context("the aligned model has no duration predictor")?
                    .predict(text, 1.0)?;
                let frames = StepTrack::new(text, &units, align).frames();
                // The track ends at its last frame; allow two more for the model's EOS.
                Ok((Some(units), frames + 2))
            }
            // At most ~3 frames per phone (120 ms frames).
            None => Ok((None, 3 * text.len() + 8)),
        }
    }

    /// Tokens → audio with a voice.
    pub(crate) fn render(&self, frames: &[Vec<u32>], voice: &[f32]) -> anyhow::Result<Vec<f32>> {
        let global = Tensor::<2>::from_data(
            TensorData::new(voice.to_vec(), [1, voice.len()]),
            &self.device,
        );
        let (mel, n) =
            self.codec
                .decode_tokens(&self.codec_config, frames, global, &self.device)?;
        Ok(self.render.render(&mel, n)?)
    }

    /// Runs the LM stage with `decoder`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn generate(
        &self,
        decoder: &MsDecoder<'_>,
        text: &[u32],
        voice: &[f32],
        durations: Option<&[u32]>,
        max_frames: usize,
        seed: u64,
        sampler: &SamplerConfig,
    ) -> anyhow::Result<FrameGeneration> {
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
            (Some(native), MsDecoder::Speculative { draft, .. }) => {
                let d = draft
                    .native
                    .as_ref()
                    .context("the draft was not loaded on the native engine")?;
                run_decoder(decoder, native, Some(d), &request, sampler)
            }
            (Some(native), _) => {
                run_decoder::<_, &NativeMultiStream>(decoder, native, None, &request, sampler)
            }
            (None, MsDecoder::Speculative { draft, .. }) => {
                let d = MsFrameLm {
                    model: &draft.model,
                    config: &draft.config,
                };
                run_decoder(decoder, &target, Some(d), &request, sampler)
            }
            (None, _) => run_decoder::<_, MsFrameLm<'_>>(decoder, &target, None, &request, sampler),
        }
    }

    /// Speaks `text` with `voice` using `decode` for the LM stage (text, durations, frame limit
    /// → frames).
    pub(crate) fn speak(
        &self,
        text: &[u32],
        voice: &[f32],
        decode: &mut FrameDecodeFn<'_>,
    ) -> anyhow::Result<MsSpeech> {
        let start = Instant::now();
        let (durations, max_frames) = self.plan(text)?;
        let frames = decode(text, durations.as_deref(), max_frames)?;
        let lm_seconds = start.elapsed().as_secs_f64();
        anyhow::ensure!(
            frames.first().is_some_and(|f| !f.is_empty()),
            "the LM ended speech before its first frame"
        );
        let start = Instant::now();
        let samples = self.render(&frames, voice)?;
        Ok(MsSpeech {
            frames,
            samples,
            lm_seconds,
            rest_seconds: start.elapsed().as_secs_f64(),
        })
    }
}

/// `voxspec synthesize` with a multi-stream LM (`--model` holds one).
pub(crate) fn synthesize(args: &crate::synth::SynthesizeArgs) -> anyhow::Result<()> {
    use crate::synth::DecoderKind;
    let device = crate::device::single()?;
    let model_dir = args
        .models
        .model
        .as_deref()
        .context("--model names the multi-stream LM")?;
    let reference = args.prompt.as_deref().context(
        "a multi-stream LM speaks with the voice of a reference recording: pass --prompt <WAV> \
         (or a directory of recordings of one voice)",
    )?;
    if args.draft.is_none() && matches!(args.decoder, DecoderKind::Sd | DecoderKind::Ssd) {
        anyhow::bail!("--decoder sd/ssd needs a draft (--draft DIR)");
    }
    let pipeline = MsPipeline::load(
        model_dir,
        args.models.codec.as_deref(),
        &args.vocoder,
        args.griffin_lim,
        args.models.engine,
        &device,
    )?;
    let voice = pipeline.voice(reference)?;
    let sampler = args.sampling.config(1.0)?;
    let draft = match &args.draft {
        Some(dir) => Some(load_draft(dir, &pipeline, &device)?),
        None => None,
    };
    let decoder = MsDecoder::from_args(args, &pipeline, draft.as_ref())?;
    let lines = crate::synth::sentences(args)?;
    let mut manifest = String::new();
    for (index, line) in lines.iter().enumerate() {
        let text = pipeline
            .text_ids(line)
            .with_context(|| format!("line {} ({line:?})", index + 1))?;
        let seed = args.seed + index as u64;
        let mut stats = None;
        let mut decode = |text: &[u32], durations: Option<&[u32]>, max_frames: usize| {
            let g = pipeline.generate(
                &decoder, text, &voice, durations, max_frames, seed, &sampler,
            )?;
            let frames = g.frames.clone();
            stats = Some(g.stats);
            Ok(frames)
        };
        let out = pipeline.speak(&text, &voice, &mut decode)?;
        let wav = if args.text_file.is_some() {
            args.out.join(format!("{:04}.wav", index + 1))
        } else {
            args.out.clone()
        };
        let rate = pipeline.sample_rate();
        let seconds = out.samples.len() as f64 / f64::from(rate);
        let n_frames = out.frames[0].len();
        voxspec_audio::write_wav(
            &wav,
            &voxspec_audio::Audio::new(out.samples, rate),
            voxspec_audio::WavFormat::Pcm16,
        )?;
        let forwards = stats.as_ref().map_or(0, |s| s.target_forwards);
        println!(
            "multistream {}: {n_frames} frames × {} streams ({seconds:.2} s) → {}; LM RTF {:.3}, \
             {forwards} target forwards, codec + vocoder {:.2} s",
            decoder.label(),
            out.frames.len(),
            wav.display(),
            out.lm_seconds / seconds.max(1e-9),
            out.rest_seconds
        );
        if args.text_file.is_some() {
            let txt = wav.with_extension("txt");
            std::fs::write(&txt, format!("{line}\n"))
                .with_context(|| format!("writing {}", txt.display()))?;
            let record = serde_json::json!({
                "index": index + 1,
                "text": line,
                "wav": wav.file_name().map(|n| n.to_string_lossy().into_owned()),
                "frames": n_frames,
                "seconds": seconds,
                "lm_seconds": out.lm_seconds,
            });
            manifest.push_str(&record.to_string());
            manifest.push('\n');
        }
    }
    if args.text_file.is_some() {
        let path = args.out.join("manifest.jsonl");
        voxspec_data::write_atomic(&path, manifest.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("{} sentences → {}", lines.len(), path.display());
    }
    Ok(())
}
