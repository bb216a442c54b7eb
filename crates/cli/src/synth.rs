//! `voxspec synthesize`, and the text → speech pipeline the decoder benchmark shares with it:
//!
//! ```text
//! text ──tokenizer──▶ ids ──AR (any decoder)──▶ RVQ-1 codes ──NAR──▶ codes [n_q][frames]
//!                                                                     └─codec decoder─▶ waveform
//! ```
//!
//! With `--prompt ref.wav` the reference is encoded by the codec; its codes condition the NAR
//! (VALL-E style, the prompt's frames come first). With `--prompt-text` (the reference's
//! transcript) the AR continues the reference as well: its text is the prompt's transcript
//! followed by the text to speak and its code prefix the reference's RVQ-1 codes. Without it the
//! AR starts from the text alone, as it was trained.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{Context, bail};
use burn::tensor::{Device, Int, Tensor, TensorData};
use clap::{Args, ValueEnum};
use serde::Serialize;
use voxspec_audio::{Audio, WavFormat, write_wav};
use voxspec_codec::{SpeechTokenizer, SpeechTokenizerConfig};
use voxspec_data::TextTokenizer;
use voxspec_infer::verify::AcceptanceRule;
use voxspec_infer::{
    ArDecoder, Decoder, Generation, LanguageModel, Limits, MtpDecoder, Request, SamplerConfig,
    SelfSpeculativeDecoder, SimilarityGroups, SpeculativeConfig, SpeculativeDecoder, StopReason,
    Transitions, ViterbiConfig, groups_of_mean_size,
};
use voxspec_mtp::{MtpModel, NarModel, TtsPrompt, load_mtp, load_nar};

use crate::codec_cmd::{load_codec, read_audio};
use crate::engine::{ArEngine, EngineKind};

/// Positions kept free in the AR model's context beyond the longest generation: the lookahead
/// of a verification block (γ + 1) and the padding of ragged blocks.
const CACHE_SLACK: usize = 16;

/// Where the models of a trained experiment live (`recipes/libritts/train_mtp.sh` layout).
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Experiment directory of train_mtp.sh: the defaults below are read from it.
    #[arg(long, value_name = "DIR", default_value = "exp/minitts")]
    pub exp: PathBuf,
    /// AR model directory (`voxspec train mtp`) [default: <EXP>/ar].
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// NAR model directory (`voxspec train nar`) [default: <EXP>/nar].
    #[arg(long, value_name = "DIR")]
    pub nar: Option<PathBuf>,
    /// Codec model directory [default: checkpoints/codec-minitts].
    #[arg(long, value_name = "DIR")]
    pub codec: Option<PathBuf>,
    /// Stream-0 transition matrix for Viterbi decoding (`voxspec stats transitions`)
    /// [default: <EXP>/transitions.safetensors].
    #[arg(long, value_name = "FILE")]
    pub transitions: Option<PathBuf>,
    /// Implementation that runs the AR model and the draft: the native CPU engine, or Burn on
    /// --device (use `burn` on a GPU).
    #[arg(long, value_enum, default_value_t = EngineKind::Native)]
    pub engine: EngineKind,
}

impl ModelArgs {
    pub fn ar_dir(&self) -> PathBuf {
        self.model.clone().unwrap_or_else(|| self.exp.join("ar"))
    }

    pub fn nar_dir(&self) -> PathBuf {
        self.nar.clone().unwrap_or_else(|| self.exp.join("nar"))
    }

    pub fn codec_dir(&self) -> PathBuf {
        self.codec
            .clone()
            .unwrap_or_else(|| PathBuf::from("checkpoints/codec-minitts"))
    }

    pub fn transitions_file(&self) -> PathBuf {
        self.transitions
            .clone()
            .unwrap_or_else(|| self.exp.join("transitions.safetensors"))
    }
}

/// The loaded models of the pipeline.
pub struct Pipeline {
    pub device: Device,
    pub tokenizer: TextTokenizer,
    pub ar: MtpModel,
    /// The AR model on the engine chosen by `--engine`: what the decoders drive.
    pub lm: ArEngine,
    pub nar: NarModel,
    pub codec: SpeechTokenizer,
    pub codec_config: SpeechTokenizerConfig,
}

/// A reference recording: its codes `[n_q][frames]` and, when known, its transcript's ids.
#[derive(Debug, Clone, Default)]
pub struct VoicePrompt {
    pub codes: Vec<Vec<u32>>,
    pub text: Vec<u32>,
}

/// What one synthesis produced.
pub struct Synthesis {
    pub generation: Generation,
    /// Wall time of the AR stage (the decoder), seconds.
    pub ar_seconds: f64,
    /// Wall time of the NAR stage and the codec decoder, seconds.
    pub rest_seconds: f64,
    pub samples: Vec<f32>,
}

impl Pipeline {
    /// Loads the AR model (with its tokenizer.json), the NAR model and the codec, and checks
    /// that they agree on the codebook.
    pub fn load(models: &ModelArgs, device: &Device) -> anyhow::Result<Self> {
        let ar_dir = models.ar_dir();
        let (ar_file, ar) = load_mtp(&ar_dir, device)
            .with_context(|| format!("loading the AR model {}", ar_dir.display()))?;
        let lm = ArEngine::new(models.engine, &ar, &ar_file.model)?;
        let tok_path = ar_dir.join("tokenizer.json");
        let tokenizer = TextTokenizer::load(&tok_path)
            .with_context(|| format!("loading the AR model's tokenizer {}", tok_path.display()))?;
        let nar_dir = models.nar_dir();
        let (_, nar) = load_nar(&nar_dir, device)
            .with_context(|| format!("loading the NAR model {}", nar_dir.display()))?;
        let codec_dir = models.codec_dir();
        let (codec_config, codec) = load_codec(&codec_dir, device)?;
        if ar.codebook_size() != codec_config.codebook_size
            || nar.codebook_size() != codec_config.codebook_size
        {
            bail!(
                "the models do not share a codebook: AR {} codes ({}), NAR {} ({}), codec {} ({})",
                ar.codebook_size(),
                ar_dir.display(),
                nar.codebook_size(),
                nar_dir.display(),
                codec_config.codebook_size,
                codec_dir.display()
            );
        }
        if nar.n_q() > codec_config.n_q {
            bail!(
                "the NAR model {} predicts {} code layers, the codec {} has {}",
                nar_dir.display(),
                nar.n_q(),
                codec_dir.display(),
                codec_config.n_q
            );
        }
        Ok(Self {
            device: device.clone(),
            tokenizer,
            ar,
            lm,
            nar,
            codec,
            codec_config,
        })
    }

    /// Output sample rate.
    pub fn sample_rate(&self) -> u32 {
        self.codec_config.sample_rate
    }

    /// Text ids of `text`, refusing text that is empty or made only of characters the
    /// tokenizer does not know.
    pub fn text_ids(&self, text: &str) -> anyhow::Result<Vec<u32>> {
        if text.trim().is_empty() {
            bail!("the text is empty: give the sentence to speak");
        }
        let unknown = self.tokenizer.unknown_chars(text)?;
        let known = self
            .tokenizer
            .normalize(text)?
            .chars()
            .any(|c| !c.is_whitespace() && !unknown.contains(&c));
        if !known {
            bail!(
                "the text {:?} has no character the model's tokenizer knows (unknown: {:?})",
                text.chars().take(60).collect::<String>(),
                unknown
            );
        }
        Ok(self.tokenizer.encode(text)?)
    }

    /// Encodes a reference recording (resampled to the codec's rate when needed) into the
    /// NAR's code layers.
    pub fn encode_prompt(&self, path: &Path, text: Option<&str>) -> anyhow::Result<VoicePrompt> {
        let samples = read_audio(path, self.sample_rate())?;
        if samples.len() < self.codec_config.hop_length() {
            bail!(
                "{} is too short for a prompt ({} samples, at least one frame of {} needed)",
                path.display(),
                samples.len(),
                self.codec_config.hop_length()
            );
        }
        let n = samples.len();
        let wave: Tensor<3> = Tensor::from_data(TensorData::new(samples, [1, 1, n]), &self.device);
        let codes = self
            .codec
            .encode(wave, self.nar.n_q())
            .with_context(|| format!("encoding the prompt {}", path.display()))?;
        let [n_q, _, frames] = codes.dims();
        let flat = codes
            .into_data()
            .convert::<i64>()
            .try_into_vec::<i64>()
            .map_err(|e| anyhow::anyhow!("reading the prompt codes back: {e:?}"))?;
        let codes = (0..n_q)
            .map(|q| {
                flat[q * frames..(q + 1) * frames]
                    .iter()
                    .map(|&c| c as u32)
                    .collect()
            })
            .collect();
        let text = match text {
            Some(t) => self.text_ids(t).context("the prompt's transcript")?,
            None => Vec::new(),
        };
        Ok(VoicePrompt { codes, text })
    }

    /// The AR request for `text` (with a voice prompt's transcript and RVQ-1 codes in front
    /// when its transcript is known), its length bounded by the text length.
    pub fn request(
        &self,
        text: &[u32],
        prompt: Option<&VoicePrompt>,
        lengths: &LengthArgs,
        seed: u64,
    ) -> anyhow::Result<Request<TtsPrompt>> {
        let mut limits = Limits::for_text(text.len(), lengths.min_ratio, lengths.max_ratio)?;
        if self.ar.is_aligned() {
            // The duration predictor sets the length: EOS is due at its frame count T. The
            // voice prompt conditions the NAR only (an aligned AR model continues no codes).
            let durations = self
                .ar
                .predict_durations(text, lengths.pace)
                .context("predicting the phone durations")?;
            let frames: usize = durations.iter().map(|&d| d as usize).sum();
            limits.min_tokens = frames / 2;
            limits.max_tokens = frames + frames / 4 + 8;
            let used = text.len() + 1 + CACHE_SLACK;
            let room = self.ar.transformer.max_seq_len().saturating_sub(used);
            if room < frames {
                bail!(
                    "the text needs {frames} frames, more than the {room} positions left in the \
                     AR model's context of {}; split it into shorter sentences",
                    self.ar.transformer.max_seq_len()
                );
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
            bail!(
                "the text and prompt take {used} positions, more than the AR model's context of {} positions",
                self.ar.transformer.max_seq_len()
            );
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

    /// Runs one request through `decoder`, then the NAR and the codec decoder.
    pub fn synthesize(
        &self,
        decoder: &mut dyn Decoder<ArEngine>,
        request: &Request<TtsPrompt>,
        text: &[u32],
        prompt: Option<&VoicePrompt>,
        sampler: &SamplerConfig,
    ) -> anyhow::Result<Synthesis> {
        let start = Instant::now();
        let generation = decoder
            .generate(&self.lm, std::slice::from_ref(request), sampler)?
            .into_iter()
            .next()
            .context("the decoder returned no sequence")?;
        let ar_seconds = start.elapsed().as_secs_f64();
        let start = Instant::now();
        let samples = if generation.tokens.is_empty() {
            Vec::new()
        } else {
            self.vocode(text, prompt, &generation.tokens)?
        };
        Ok(Synthesis {
            generation,
            ar_seconds,
            rest_seconds: start.elapsed().as_secs_f64(),
            samples,
        })
    }

    /// NAR layers 2..N from the AR's RVQ-1 codes, then the codec decoder; the prompt's frames
    /// are dropped from the output.
    pub fn vocode(
        &self,
        text: &[u32],
        prompt: Option<&VoicePrompt>,
        first: &[u32],
    ) -> anyhow::Result<Vec<f32>> {
        let n_q = self.nar.n_q();
        let empty = vec![Vec::new(); n_q];
        let (prompt_codes, nar_text) = match prompt {
            Some(p) => {
                let mut t = p.text.clone();
                t.extend_from_slice(text);
                (&p.codes, t)
            }
            None => (&empty, text.to_vec()),
        };
        let codes = self
            .nar
            .generate(&nar_text, prompt_codes, first)
            .context("the NAR stage")?;
        let frames = first.len();
        let flat: Vec<i64> = codes
            .iter()
            .flat_map(|l| l.iter().map(|&c| i64::from(c)))
            .collect();
        let codes: Tensor<3, Int> =
            Tensor::from_data(TensorData::new(flat, [n_q, 1, frames]), &self.device);
        let wave = self.codec.decode(codes).context("the codec decoder")?;
        wave.into_data()
            .try_into_vec::<f32>()
            .map_err(|e| anyhow::anyhow!("reading the waveform back: {e:?}"))
    }
}

/// Length bounds relative to the text (CosyVoice's rule).
#[derive(Debug, Clone, Args)]
pub struct LengthArgs {
    /// At least this many codes per text token (end of speech is masked before).
    #[arg(long, default_value_t = 2.0)]
    pub min_ratio: f32,
    /// At most this many codes per text token.
    #[arg(long, default_value_t = 20.0)]
    pub max_ratio: f32,
    /// Aligned AR models: scales the predicted phone durations (above 1 speaks slower); the
    /// length bounds then follow the predicted frame count instead of the ratios above.
    #[arg(long, default_value_t = 1.0)]
    pub pace: f32,
}

/// Sampling settings of the AR stage.
#[derive(Debug, Clone, Args)]
pub struct SamplingArgs {
    /// Sampling temperature (0: greedy).
    #[arg(long, default_value_t = 1.0)]
    pub temperature: f32,
    /// Sample among the most likely this many codes (0: all).
    #[arg(long, default_value_t = 0)]
    pub sample_top_k: usize,
    /// Nucleus sampling mass (1: off).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
}

impl SamplingArgs {
    pub fn config(&self) -> anyhow::Result<SamplerConfig> {
        let config = SamplerConfig {
            temperature: self.temperature,
            top_k: self.sample_top_k,
            top_p: self.top_p,
            ..SamplerConfig::default()
        };
        config.validate()?;
        Ok(config)
    }
}

/// Decoding strategies of `synthesize` (the benchmark adds the speculative ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum DecoderKind {
    /// One token per forward (the baseline).
    Ar,
    /// `--heads` tokens per forward, each head sampled on its own.
    Mtp,
    /// `--heads` tokens per forward, the block chosen by Viterbi over the top-K candidates of
    /// each head and the transition matrix (the MTP paper's Algorithm 1).
    MtpViterbi,
    /// Self-speculation: the extra heads draft `--heads − 1` tokens, the next-token head
    /// verifies them in the following forward (exact rule).
    SelfSpec,
    /// Exact speculative sampling: the --draft model proposes --gamma tokens, the AR model
    /// verifies them in one forward (the output follows the AR model's distribution).
    Sd,
    /// Speculative decoding with SSD's tolerance --beta (faster, not exact).
    Ssd,
    /// Speculative decoding with PCG group acceptance (groups from the AR model's code
    /// embeddings at --theta, or at the θ whose groups have a mean size of 4.5).
    Pcg,
}

/// How drafted tokens are accepted.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "rule", rename_all = "lowercase")]
pub enum RuleSpec {
    /// Exact speculative sampling.
    Sd,
    /// SSD tolerance β.
    Ssd { beta: f32 },
    /// PCG groups at cosine threshold θ.
    Pcg { theta: f32 },
}

/// One decoder configuration: what a benchmark row measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "decoder", rename_all = "kebab-case")]
pub enum DecoderSpec {
    Ar,
    Mtp {
        heads: usize,
    },
    MtpViterbi {
        heads: usize,
        top_k: usize,
    },
    /// A separate draft model proposes `gamma` tokens.
    Speculative {
        #[serde(flatten)]
        rule: RuleSpec,
        gamma: usize,
    },
    /// The MTP heads propose `gamma` tokens.
    SelfSpec {
        #[serde(flatten)]
        rule: RuleSpec,
        gamma: usize,
    },
}

impl DecoderSpec {
    /// Short label for tables and plots.
    pub fn label(&self) -> String {
        let rule = |r: &RuleSpec| match r {
            RuleSpec::Sd => "sd".to_string(),
            RuleSpec::Ssd { beta } => format!("ssd β={beta}"),
            RuleSpec::Pcg { theta } => format!("pcg θ={theta:.3}"),
        };
        match self {
            DecoderSpec::Ar => "ar".into(),
            DecoderSpec::Mtp { heads } => format!("mtp k={heads}"),
            DecoderSpec::MtpViterbi { heads, top_k } => {
                format!("mtp+viterbi k={heads} top_k={top_k}")
            }
            DecoderSpec::Speculative { rule: r, gamma } => format!("{} γ={gamma}", rule(r)),
            DecoderSpec::SelfSpec { rule: r, gamma } => {
                format!("self-spec {} γ={gamma}", rule(r))
            }
        }
    }
}

/// What decoders may need besides the target model.
#[derive(Default)]
pub struct DecoderParts {
    pub transitions: Option<Arc<Transitions>>,
    /// The draft on the same engine as the target.
    pub draft: Option<ArEngine>,
    /// Similarity groups of each PCG threshold θ.
    pub groups: Vec<(f32, Arc<SimilarityGroups>)>,
}

/// Loads the draft model at `dir` onto the engine `engine` and checks that it predicts
/// `target`'s tokens.
pub fn load_draft(
    dir: &Path,
    target: &MtpModel,
    engine: EngineKind,
    device: &Device,
) -> anyhow::Result<ArEngine> {
    let (file, draft) =
        load_mtp(dir, device).with_context(|| format!("loading the draft {}", dir.display()))?;
    if draft.codebook_size() != target.codebook_size() {
        bail!(
            "the draft {} predicts {} tokens, the target {} — a draft must share its target's \
             codebook",
            dir.display(),
            draft.codebook_size() + 1,
            target.codebook_size() + 1
        );
    }
    ArEngine::new(engine, &draft, &file.model)
}

impl DecoderParts {
    fn groups_at(&self, theta: f32) -> anyhow::Result<Arc<SimilarityGroups>> {
        self.groups
            .iter()
            .find(|(t, _)| (t - theta).abs() < 1e-6)
            .map(|(_, g)| g.clone())
            .with_context(|| format!("no similarity groups built for θ = {theta}"))
    }

    fn rule(&self, spec: &RuleSpec) -> anyhow::Result<AcceptanceRule> {
        Ok(match spec {
            RuleSpec::Sd => AcceptanceRule::Exact,
            RuleSpec::Ssd { beta } => AcceptanceRule::Tolerance { beta: *beta },
            RuleSpec::Pcg { theta } => AcceptanceRule::Groups(self.groups_at(*theta)?),
        })
    }

    /// The decoder of `spec` for `target`.
    pub fn build(
        &self,
        spec: &DecoderSpec,
        target: &ArEngine,
    ) -> anyhow::Result<Box<dyn Decoder<ArEngine>>> {
        let heads_needed = match spec {
            DecoderSpec::Mtp { heads } | DecoderSpec::MtpViterbi { heads, .. } => *heads,
            DecoderSpec::SelfSpec { gamma, .. } => gamma + 1,
            _ => 1,
        };
        if heads_needed > target.n_heads() {
            bail!(
                "{} needs {heads_needed} prediction heads; the AR model has {} (train it with \
                 --heads {heads_needed} or more)",
                spec.label(),
                target.n_heads()
            );
        }
        Ok(match spec {
            DecoderSpec::Ar => Box::new(ArDecoder::new()),
            DecoderSpec::Mtp { heads } => Box::new(MtpDecoder::new(*heads)?),
            DecoderSpec::MtpViterbi { heads, top_k } => {
                let transitions = self.transitions.clone().context(
                    "Viterbi decoding needs the transition matrix (`voxspec stats transitions`, \
                     --transitions)",
                )?;
                // The outputs are the codes and EOS.
                let codebook = target.vocab_size() - 1;
                if transitions.vocab_size() != codebook + 1 && transitions.vocab_size() != codebook
                {
                    bail!(
                        "the transition matrix covers {} tokens, the AR model has {codebook} codes",
                        transitions.vocab_size(),
                    );
                }
                Box::new(MtpDecoder::with_viterbi(
                    *heads,
                    ViterbiConfig::new(*top_k),
                    transitions,
                )?)
            }
            DecoderSpec::Speculative { rule, gamma } => {
                let draft = self
                    .draft
                    .clone()
                    .context("speculative decoding needs a draft model (--draft)")?;
                Box::new(SpeculativeDecoder::new(
                    draft,
                    SpeculativeConfig::new(*gamma, self.rule(rule)?),
                )?)
            }
            DecoderSpec::SelfSpec { rule, gamma } => Box::new(SelfSpeculativeDecoder::new(
                SpeculativeConfig::new(*gamma, self.rule(rule)?),
            )?),
        })
    }
}

/// `voxspec synthesize`: text (and optionally a reference voice) to a WAV file, or every line
/// of a text file to a folder of WAV files with a manifest.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["text", "text_file"])))]
pub struct SynthesizeArgs {
    /// The sentence to speak (--out is then a WAV file).
    #[arg(long)]
    text: Option<String>,
    /// One sentence per line (blank lines skipped): --out is then a folder that receives
    /// NNNN.wav per line and manifest.jsonl (index, text, wav, codes, seconds, stop).
    #[arg(long, value_name = "FILE")]
    text_file: Option<PathBuf>,
    /// Reference recording whose codes condition the NAR stage (any rate; resampled).
    #[arg(long, value_name = "WAV")]
    prompt: Option<PathBuf>,
    /// Transcript of --prompt: the AR model then continues the reference too.
    #[arg(long, requires = "prompt")]
    prompt_text: Option<String>,
    /// Decoding strategy of the AR stage.
    #[arg(long, value_enum, default_value_t = DecoderKind::MtpViterbi)]
    decoder: DecoderKind,
    /// Tokens per forward (MTP heads used; the model needs at least this many).
    #[arg(long, default_value_t = 4)]
    heads: usize,
    /// Candidates per head for Viterbi path selection.
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Draft model of sd, ssd and pcg (`voxspec train draft`).
    #[arg(long, value_name = "DIR")]
    draft: Option<PathBuf>,
    /// Tokens the draft proposes per verification (sd, ssd, pcg).
    #[arg(long, default_value_t = 3)]
    gamma: usize,
    /// SSD tolerance β (ssd).
    #[arg(long, default_value_t = 0.4)]
    beta: f32,
    /// PCG similarity threshold θ in (−1, 1) (pcg) [default: the θ of mean group size 4.5].
    #[arg(long, allow_hyphen_values = true)]
    theta: Option<f32>,
    /// Seed of the sampler (line i of --text-file uses seed + i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Output WAV file (--text) or folder (--text-file).
    #[arg(long, short, value_name = "PATH")]
    out: PathBuf,
    #[command(flatten)]
    models: ModelArgs,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    lengths: LengthArgs,
}

/// One line of the manifest `synthesize --text-file` writes.
#[derive(Debug, Serialize)]
struct SynthesizedLine {
    index: usize,
    text: String,
    wav: String,
    codes: usize,
    seconds: f64,
    stop: &'static str,
}

pub fn synthesize(args: SynthesizeArgs) -> anyhow::Result<()> {
    let device = crate::device::single()?;
    let sampler = args.sampling.config()?;
    let speculative = |rule| {
        anyhow::ensure!(args.gamma >= 1, "--gamma must be at least 1");
        Ok(DecoderSpec::Speculative {
            rule,
            gamma: args.gamma,
        })
    };
    let spec = match args.decoder {
        DecoderKind::Ar => DecoderSpec::Ar,
        DecoderKind::Mtp => DecoderSpec::Mtp { heads: args.heads },
        DecoderKind::MtpViterbi => DecoderSpec::MtpViterbi {
            heads: args.heads,
            top_k: args.top_k,
        },
        DecoderKind::SelfSpec => DecoderSpec::SelfSpec {
            rule: RuleSpec::Sd,
            gamma: args.heads.saturating_sub(1),
        },
        DecoderKind::Sd => speculative(RuleSpec::Sd)?,
        DecoderKind::Ssd => {
            if !(args.beta.is_finite() && args.beta >= 0.0) {
                bail!("--beta {} must be finite and at least 0", args.beta);
            }
            speculative(RuleSpec::Ssd { beta: args.beta })?
        }
        // θ is fixed below, once the model's groups are built.
        DecoderKind::Pcg => speculative(RuleSpec::Pcg { theta: 0.0 })?,
    };
    if args.draft.is_some() && !matches!(spec, DecoderSpec::Speculative { .. }) {
        bail!("--draft is used by --decoder sd, ssd or pcg only");
    }
    let pipeline = Pipeline::load(&args.models, &device)?;
    let mut parts = DecoderParts::default();
    if matches!(spec, DecoderSpec::MtpViterbi { .. }) {
        let path = args.models.transitions_file();
        parts.transitions =
            Some(Arc::new(Transitions::load(&path).with_context(|| {
                format!("loading the transition matrix {}", path.display())
            })?));
    }
    let spec = match spec {
        DecoderSpec::Speculative { rule, gamma } => {
            let dir = args.draft.as_deref().with_context(|| {
                format!(
                    "--decoder {} needs a draft model (--draft DIR)",
                    spec_name(&rule)
                )
            })?;
            parts.draft = Some(load_draft(dir, &pipeline.ar, args.models.engine, &device)?);
            let rule = match rule {
                RuleSpec::Pcg { .. } => {
                    let (table, vocab, dim) = pipeline.ar.code_embeddings()?;
                    let groups = match args.theta {
                        Some(theta) => {
                            SimilarityGroups::from_embeddings(&table, vocab, dim, theta)?
                        }
                        None => groups_of_mean_size(&table, vocab, dim, 4.5)?,
                    };
                    crate::groups::report(&groups);
                    let theta = groups.theta();
                    parts.groups.push((theta, Arc::new(groups)));
                    RuleSpec::Pcg { theta }
                }
                other => other,
            };
            DecoderSpec::Speculative { rule, gamma }
        }
        other => other,
    };
    let mut decoder = parts.build(&spec, &pipeline.lm)?;
    let prompt = match &args.prompt {
        Some(p) => Some(pipeline.encode_prompt(p, args.prompt_text.as_deref())?),
        None => None,
    };
    let lines: Vec<String> = match (&args.text, &args.text_file) {
        (Some(text), _) => vec![text.clone()],
        (None, Some(file)) => {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading the text file {}", file.display()))?;
            let lines: Vec<String> = text
                .lines()
                .map(str::trim)
                .filter(|l| !l.is_empty())
                .map(String::from)
                .collect();
            if lines.is_empty() {
                bail!("{} has no sentence (every line is blank)", file.display());
            }
            std::fs::create_dir_all(&args.out)
                .with_context(|| format!("creating the output folder {}", args.out.display()))?;
            lines
        }
        (None, None) => bail!("give --text or --text-file"),
    };
    let mut manifest = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let text = pipeline
            .text_ids(line)
            .with_context(|| format!("line {} ({line:?})", index + 1))?;
        let seed = args.seed + index as u64;
        let request = pipeline.request(&text, prompt.as_ref(), &args.lengths, seed)?;
        let out =
            pipeline.synthesize(decoder.as_mut(), &request, &text, prompt.as_ref(), &sampler)?;
        let g = &out.generation;
        if g.tokens.is_empty() {
            bail!(
                "the AR model ended speech before the first code ({}, {line:?}); try another \
                 --seed or a lower --temperature",
                spec.label()
            );
        }
        let wav = if args.text_file.is_some() {
            args.out.join(format!("{:04}.wav", index + 1))
        } else {
            args.out.clone()
        };
        let seconds = out.samples.len() as f64 / f64::from(pipeline.sample_rate());
        write_wav(
            &wav,
            &Audio::new(out.samples, pipeline.sample_rate()),
            WavFormat::Pcm16,
        )?;
        let stop = match g.stop {
            StopReason::Eos => "end of speech",
            StopReason::MaxTokens => "the length limit",
        };
        let forwards = g.stats.target_forwards.max(1);
        println!(
            "{}: {} codes ({seconds:.2} s of audio, stopped at {stop}) → {}",
            spec.label(),
            g.tokens.len(),
            wav.display()
        );
        println!(
            "AR: TPT {:.2} ms/token, LM RTF {:.3}, {:.3} forward passes per token ({} forwards); \
             NAR + codec {:.2} s",
            1e3 * out.ar_seconds / g.tokens.len() as f64,
            out.ar_seconds / seconds.max(1e-9),
            forwards as f64 / g.tokens.len() as f64,
            forwards,
            out.rest_seconds
        );
        manifest.push(SynthesizedLine {
            index: index + 1,
            text: line.clone(),
            wav: wav
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            codes: g.tokens.len(),
            seconds,
            stop,
        });
    }
    if args.text_file.is_some() {
        let mut jsonl = String::new();
        for line in &manifest {
            jsonl.push_str(&serde_json::to_string(line)?);
            jsonl.push('\n');
        }
        let path = args.out.join("manifest.jsonl");
        voxspec_data::write_atomic(&path, jsonl.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("{} sentences → {}", manifest.len(), path.display());
    }
    Ok(())
}

fn spec_name(rule: &RuleSpec) -> &'static str {
    match rule {
        RuleSpec::Sd => "sd",
        RuleSpec::Ssd { .. } => "ssd",
        RuleSpec::Pcg { .. } => "pcg",
    }
}
