//! The command-line settings `synthesize`, `serve` and the decoder benchmarks share: models,
//! corpus split, length bounds, streaming, sampling, and `synthesize`'s own flags.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use voxspec_data::{Utterance, read_manifest};
use voxspec_infer::SamplerConfig;
use voxspec_tts::{
    DecoderSpec, EngineKind, Lengths, ModelPaths, NarWindow, RuleSpec, StreamConfig,
};

/// Where the models of a trained experiment live (`recipes/libritts/train_mtp.sh` layout).
#[derive(Debug, Clone, Args)]
pub struct ModelArgs {
    /// Experiment directory of train_mtp.sh (e.g. exp/kathleen): the defaults below are read
    /// from it. The default is the shipped real voice, trained on datasets/kathleen.
    #[arg(long, value_name = "DIR", default_value = "checkpoints/kathleen")]
    pub exp: PathBuf,
    /// AR model directory (`voxspec train mtp`) [default: <EXP>/ar].
    #[arg(long, value_name = "DIR")]
    pub model: Option<PathBuf>,
    /// NAR model directory (`voxspec train nar`) [default: <EXP>/nar].
    #[arg(long, value_name = "DIR")]
    pub nar: Option<PathBuf>,
    /// Codec model directory [default: <EXP>/codec, else checkpoints/codec-minitts].
    #[arg(long, value_name = "DIR")]
    pub codec: Option<PathBuf>,
    /// Codes → log-mel decoder (`voxspec codec train-mel`) that renders the codes in place of
    /// the codec's decoder [default: <EXP>/mel_decoder when there is one].
    #[arg(long, value_name = "DIR", conflicts_with = "codec_decoder")]
    pub mel_decoder: Option<PathBuf>,
    /// Vocoder that renders the mel decoder's log-mel; `none`: Griffin-Lim [default:
    /// <EXP>/vocoder when there is one, else Griffin-Lim].
    #[arg(long, value_name = "DIR")]
    pub mel_vocoder: Option<PathBuf>,
    /// Render the codes with the codec's own decoder even when the experiment has a mel
    /// decoder.
    #[arg(long)]
    pub codec_decoder: bool,
    /// Stream-0 transition matrix for Viterbi decoding (`voxspec stats transitions`)
    /// [default: <EXP>/transitions.safetensors].
    #[arg(long, value_name = "FILE")]
    pub transitions: Option<PathBuf>,
    /// Weight of the transition matrix against the heads' scores in Viterbi decoding (its
    /// log-probabilities are multiplied by it; 1: the MTP paper's, 0: each head's own best).
    /// The default 0.25 keeps the sentences the paper's weight loses on the real voice (greedy
    /// MTP k=8 + Viterbi: 78 % identified at 1, 90 % at 0.25; AR 88 %).
    #[arg(long, default_value_t = 0.25, value_name = "W")]
    pub transition_weight: f32,
    /// Implementation that runs the AR model, the draft, the NAR model and the mel decoder and
    /// vocoder: the native CPU engine with f32, bf16 or int8 weights, or Burn on --device (use
    /// `burn` on a GPU) [default: native; `serve` and `bench serve`: native-bf16].
    #[arg(long, value_enum)]
    pub engine: Option<EngineKind>,
}

impl ModelArgs {
    /// The model paths these arguments name, on `--engine` or else the native engine in f32.
    pub fn paths(&self) -> ModelPaths {
        self.paths_on(EngineKind::Native)
    }

    /// [`Self::paths`] for the server: bf16 weights unless `--engine` says otherwise (the
    /// shipped checkpoints are stored in bf16, so the weights lose nothing; on AMX tiles the
    /// activations of long products are rounded to bf16).
    pub fn serving_paths(&self) -> ModelPaths {
        self.paths_on(EngineKind::NativeBf16)
    }

    fn paths_on(&self, default_engine: EngineKind) -> ModelPaths {
        let defaults = ModelPaths::experiment(&self.exp);
        ModelPaths {
            ar: self.model.clone().unwrap_or(defaults.ar),
            nar: self.nar.clone().unwrap_or(defaults.nar),
            codec: self.codec.clone().unwrap_or(defaults.codec),
            transitions: self.transitions.clone().unwrap_or(defaults.transitions),
            mel_decoder: if self.codec_decoder {
                None
            } else {
                self.mel_decoder.clone().or(defaults.mel_decoder)
            },
            vocoder: match &self.mel_vocoder {
                Some(dir) if dir.as_os_str() == "none" => None,
                Some(dir) => Some(dir.clone()),
                None => defaults.vocoder,
            },
            engine: self.engine.unwrap_or(default_engine),
        }
    }
}

/// A split of a prepared corpus whose transcripts are spoken (the benchmarks' sentences).
#[derive(Debug, Clone, Args)]
pub struct SplitArgs {
    /// Prepared data directory with <SPLIT>.jsonl [default: <EXP>/data].
    #[arg(long, value_name = "DIR")]
    pub data: Option<PathBuf>,
    /// Split whose transcripts are spoken.
    #[arg(long, default_value = "test")]
    pub split: String,
}

impl SplitArgs {
    /// The split's manifest path and its utterances (`exp` gives the default data directory).
    pub fn read(&self, exp: &Path) -> anyhow::Result<(PathBuf, Vec<Utterance>)> {
        let data = self.data.clone().unwrap_or_else(|| exp.join("data"));
        let manifest = data.join(format!("{}.jsonl", self.split));
        let utterances = read_manifest(&manifest)
            .with_context(|| format!("reading the {} manifest", self.split))?;
        if utterances.is_empty() {
            bail!("{} has no utterances", manifest.display());
        }
        Ok((manifest, utterances))
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

impl LengthArgs {
    /// The pipeline's length bounds.
    pub fn lengths(&self) -> Lengths {
        Lengths {
            min_ratio: self.min_ratio,
            max_ratio: self.max_ratio,
            pace: self.pace,
        }
    }
}

/// How streamed audio is cut (`synthesize --stream`, `serve`).
#[derive(Debug, Clone, Args)]
#[command(next_help_heading = "Streaming")]
pub struct StreamArgs {
    /// Frames of the first streamed chunk (50 per second with the shipped codec).
    #[arg(long, value_name = "FRAMES", default_value_t = 20)]
    pub stream_first: usize,
    /// Frames of every later streamed chunk.
    #[arg(long, value_name = "FRAMES", default_value_t = 100)]
    pub stream_chunk: usize,
    /// Frames of AR codes the NAR sees on each side of a streamed chunk, or `whole` for one NAR
    /// pass over the utterance (audio equal to unstreamed synthesis, later first chunk).
    #[arg(long, value_name = "FRAMES|whole", default_value = "50", value_parser = parse_nar_window)]
    pub nar_window: NarWindow,
}

fn parse_nar_window(s: &str) -> Result<NarWindow, String> {
    if s == "whole" {
        return Ok(NarWindow::Whole);
    }
    s.parse()
        .map(|context| NarWindow::Sliding { context })
        .map_err(|_| format!("{s:?}: expected a number of frames or `whole`"))
}

impl StreamArgs {
    /// The pipeline's stream settings.
    ///
    /// # Errors
    /// For a chunk of 0 frames.
    pub fn config(&self) -> anyhow::Result<StreamConfig> {
        let config = StreamConfig {
            first_frames: self.stream_first,
            chunk_frames: self.stream_chunk,
            nar: self.nar_window,
        };
        config.validate()?;
        Ok(config)
    }
}

/// Sampling settings of the AR stage.
#[derive(Debug, Clone, Args)]
pub struct SamplingArgs {
    /// Sampling temperature (0: greedy). Default: 0 for `synthesize` and `serve` with the MTP AR
    /// model (greedy MTP k=4 was the best-identified setting of the shipped real voice), 1 for
    /// the benchmarks and multi-stream models.
    #[arg(long)]
    pub temperature: Option<f32>,
    /// Sample among the most likely this many codes (0: all).
    #[arg(long, default_value_t = 0)]
    pub sample_top_k: usize,
    /// Nucleus sampling mass (1: off).
    #[arg(long, default_value_t = 1.0)]
    pub top_p: f32,
}

impl SamplingArgs {
    /// The temperature given, else `default`.
    pub fn temperature(&self, default: f32) -> f32 {
        self.temperature.unwrap_or(default)
    }

    /// The sampler of these settings (temperature `default` when none was given), checked.
    pub fn config(&self, default: f32) -> anyhow::Result<SamplerConfig> {
        let config = SamplerConfig {
            temperature: self.temperature(default),
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

impl DecoderKind {
    /// The decoder's spec: AR, MTP with `heads` heads (+ Viterbi over `top_k` candidates),
    /// self-speculation drafting `heads − 1` tokens, or a draft model's `gamma` tokens verified
    /// by the exact rule, SSD's tolerance `beta` or PCG groups (θ set once the groups are built).
    ///
    /// # Errors
    /// A `gamma` of 0 or a negative or non-finite `beta` for the speculative decoders.
    pub fn spec(
        self,
        heads: usize,
        top_k: usize,
        gamma: usize,
        beta: f32,
    ) -> anyhow::Result<DecoderSpec> {
        let speculative = |rule| {
            anyhow::ensure!(gamma >= 1, "--gamma must be at least 1");
            Ok(DecoderSpec::Speculative { rule, gamma })
        };
        match self {
            DecoderKind::Ar => Ok(DecoderSpec::Ar),
            DecoderKind::Mtp => Ok(DecoderSpec::Mtp { heads }),
            DecoderKind::MtpViterbi => Ok(DecoderSpec::MtpViterbi { heads, top_k }),
            DecoderKind::SelfSpec => Ok(DecoderSpec::SelfSpec {
                rule: RuleSpec::Sd,
                gamma: heads.saturating_sub(1),
            }),
            DecoderKind::Sd => speculative(RuleSpec::Sd),
            DecoderKind::Ssd => {
                anyhow::ensure!(
                    beta.is_finite() && beta >= 0.0,
                    "--beta {beta} must be finite and at least 0"
                );
                speculative(RuleSpec::Ssd { beta })
            }
            DecoderKind::Pcg => speculative(RuleSpec::Pcg { theta: 0.0 }),
        }
    }
}

/// `voxspec synthesize`: text (and optionally a reference voice) to a WAV file, or every line
/// of a text file to a folder of WAV files with a manifest.
///
/// A --text of several sentences (or a --text-file with --join) is spoken sentence by sentence
/// with the same voice and decoder and joined by pauses (a blank line ends a paragraph); a
/// sentence too long for the AR model's context is split at its clauses.
#[derive(Debug, Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["text", "text_file"])))]
pub struct SynthesizeArgs {
    /// The text to speak: a sentence, or several (--out is then a WAV file).
    #[arg(long)]
    pub(crate) text: Option<String>,
    /// One sentence per line (blank lines skipped): --out is then a folder that receives
    /// NNNN.wav per line and manifest.jsonl (index, text, wav, codes, seconds, stop).
    /// With --join: a long text (paragraphs separated by blank lines) spoken into one WAV.
    #[arg(long, value_name = "FILE")]
    pub(crate) text_file: Option<PathBuf>,
    /// Speak --text-file as one text into the one WAV file --out.
    #[arg(long)]
    pub(crate) join: bool,
    /// Reference recording whose codes condition the NAR stage (any rate; resampled); for a
    /// multi-stream LM, the recording whose voice vector it speaks with.
    #[arg(long, value_name = "WAV")]
    pub(crate) prompt: Option<PathBuf>,
    /// Transcript of --prompt: the AR model then continues the reference too.
    #[arg(long, requires = "prompt")]
    pub(crate) prompt_text: Option<String>,
    /// Decoding strategy of the AR stage.
    #[arg(long, value_enum, default_value_t = DecoderKind::Mtp)]
    pub(crate) decoder: DecoderKind,
    /// Tokens per forward (MTP heads used; the model needs at least this many).
    #[arg(long, default_value_t = 4)]
    pub(crate) heads: usize,
    /// Candidates per head for Viterbi path selection.
    #[arg(long, default_value_t = 5)]
    pub(crate) top_k: usize,
    /// Draft model of sd, ssd and pcg (`voxspec train draft`).
    #[arg(long, value_name = "DIR")]
    pub(crate) draft: Option<PathBuf>,
    /// Tokens the draft proposes per verification (sd, ssd, pcg).
    #[arg(long, default_value_t = 3)]
    pub(crate) gamma: usize,
    /// SSD tolerance β (ssd).
    #[arg(long, default_value_t = 0.4)]
    pub(crate) beta: f32,
    /// PCG similarity threshold θ in (−1, 1) (pcg) [default: the θ of mean group size 4.5].
    #[arg(long, allow_hyphen_values = true)]
    pub(crate) theta: Option<f32>,
    /// Seed of the sampler (line i of --text-file uses seed + i).
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Output WAV file (--text) or folder (--text-file).
    #[arg(long, short, value_name = "PATH")]
    pub(crate) out: PathBuf,
    #[command(flatten)]
    pub(crate) models: ModelArgs,
    #[command(flatten)]
    pub(crate) sampling: SamplingArgs,
    #[command(flatten)]
    pub(crate) lengths: LengthArgs,
    #[command(flatten)]
    pub(crate) vocoding: VocoderArgs,
    /// Make the audio in chunks, as a server streams it, and report the time to the first
    /// chunk (the output file is the chunks joined).
    #[arg(long)]
    pub(crate) stream: bool,
    #[command(flatten)]
    pub(crate) streaming: StreamArgs,
}

/// The sentences of `--text` or `--text-file` (for a file, `--out` is created as a folder).
pub(crate) fn sentences(args: &SynthesizeArgs) -> anyhow::Result<Vec<String>> {
    Ok(match (&args.text, &args.text_file) {
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
    })
}

/// How a multi-stream LM's log-mel becomes audio (synthesize, serve, bench multistream).
#[derive(Debug, Clone, Args)]
pub struct VocoderArgs {
    /// Multi-stream LMs: the vocoder that turns the codec's log-mel into audio.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "checkpoints/vocoder-minitts"
    )]
    pub(crate) vocoder: PathBuf,
    /// Multi-stream LMs: Griffin-Lim instead of the vocoder.
    #[arg(long)]
    pub(crate) griffin_lim: bool,
}

impl VocoderArgs {
    /// The vocoder directory, `None` for Griffin-Lim.
    pub(crate) fn vocoder(&self) -> Option<PathBuf> {
        (!self.griffin_lim).then(|| self.vocoder.clone())
    }
}
