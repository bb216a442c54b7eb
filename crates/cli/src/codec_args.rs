//! The arguments of `voxspec codec train | encode | decode | extract | eval` (both codec
//! families; `codec_cmd.rs` dispatches them).

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use voxspec_codec::QuantizerKind;
use voxspec_nn::Preset;

use crate::train_loop::LoopArgs;

/// Train a SpeechTokenizer codec on a prepared corpus.
///
/// SEANet encoder + BiLSTM, residual vector quantizer, SEANet
/// decoder; mel, waveform L1 and commitment losses, plus distillation of RVQ-1 towards
/// semantic-teacher features when --teacher-features is given (the output of `voxspec
/// teacher extract`; its frames are brought to the codec's frame rate, 50 Hz at hop 320, by
/// linear interpolation when the rates differ). --adversarial adds MPD + MSD discriminators
/// (a generator and a discriminator phase per step).
///
/// Reads <DATA>/train.jsonl (and dev.jsonl for validation); audio is resampled to the codec's
/// rate. Writes into <OUT>: run.json (the run settings) at the start; metrics.jsonl and TensorBoard events while
/// training; checkpoint-NNNNNN/ every --checkpoint-every steps; at the end (or on Ctrl-C) the
/// codec model directory: config.json ("kind": "speechtokenizer") + model.safetensors, which
/// `codec encode|decode|extract --codec <OUT>` load.
///
/// Ctrl-C finishes the current step, writes a checkpoint and the model, and exits 0 (a second
/// Ctrl-C exits at once). `--resume` continues from the newest checkpoint with the saved task
/// settings; a run directory with checkpoints is not reused without it.
#[derive(Debug, Args)]
#[command(mut_arg("batch", |a| a.default_value("4")))]
pub struct TrainArgs {
    /// Prepared data directory (train.jsonl, optional dev.jsonl).
    #[arg(long, value_name = "DIR")]
    pub(crate) data: PathBuf,
    /// Teacher feature stores (`voxspec teacher extract` output) for semantic distillation.
    #[arg(long, value_name = "DIR")]
    pub(crate) teacher_features: Option<PathBuf>,
    /// Run directory.
    #[arg(long, short, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// Model size. SpeechTokenizer: tiny (width 4, latent 16, 4 × 32 codes: tests and smoke
    /// runs), small (width 16, latent 128, 8 × 256 codes at 50 Hz: 2 CPU cores), base (the
    /// published SpeechTokenizer: width 32, latent 1024, 8 × 1024 codes). SoCodec: tiny (width
    /// 16), small (width 192, latent 128, sub-codebooks of 128), base (width 1024).
    #[arg(long, value_enum, default_value = "small")]
    pub(crate) preset: Preset,
    /// Seconds per training segment (rounded down to whole frames).
    #[arg(long, default_value_t = 1.0)]
    pub(crate) segment: f64,
    /// Train with MPD + MSD discriminators (slower; two phases per step).
    #[arg(long)]
    pub(crate) adversarial: bool,
    /// Start from this trained codec (a `codec train` output) instead of fresh weights:
    /// fine-tuning on a new voice. Its config replaces --preset; the semantic dimension must
    /// match --teacher-features.
    #[arg(long, value_name = "DIR", conflicts_with = "resume")]
    pub(crate) init: Option<PathBuf>,
    /// With --init: train the decoder only. The encoder and the codebooks stay as they are, so
    /// the codes (and every language model trained on them) keep their meaning while the audio
    /// made from them improves.
    #[arg(long, requires = "init")]
    pub(crate) decoder_only: bool,
    /// With --decoder-only: a token store (train and dev shards, the codec's n_q and frame
    /// rate) whose codes the decoder renders instead of the codec's own encoding of each
    /// recording — e.g. the recordings' RVQ-1 with layers 2..N filled in by a NAR model, so the
    /// decoder learns the codes synthesis hands it. The targets stay the recordings.
    #[arg(long, value_name = "DIR", requires = "decoder_only")]
    pub(crate) decoder_codes: Option<PathBuf>,
    /// Codec family: the SpeechTokenizer-style waveform codec, or SoCodec (teacher features →
    /// ordered token streams → log-mel; needs --teacher-features and, to make audio, a vocoder).
    #[arg(long, value_enum, default_value = "speechtokenizer")]
    pub(crate) kind: CodecKind,
    /// SoCodec: token streams (4 at 120 ms and 8 at 240 ms in the paper).
    #[arg(long, default_value_t = 4, help_heading = "SoCodec")]
    pub(crate) streams: usize,
    /// SoCodec: token frame shift in ms, a multiple of the 20 ms features (40, 120, 240).
    #[arg(long, default_value_t = 120, help_heading = "SoCodec")]
    pub(crate) frame_ms: usize,
    /// SoCodec: quantizer (opq: ordered, with nested dropout; pq: the same without; rq: residual).
    #[arg(long, value_enum, default_value = "opq", help_heading = "SoCodec")]
    pub(crate) quantizer: QuantizerArg,
    /// SoCodec: entries K of each sub-codebook (a stream has K² tokens; default: the preset's,
    /// 128 for small and base, so 16,384 per stream as in the paper).
    #[arg(long, value_name = "K", help_heading = "SoCodec")]
    pub(crate) sub_codebook: Option<usize>,
    #[command(flatten, next_help_heading = "Training loop")]
    pub(crate) train: LoopArgs,
}

/// Encode one audio file into RVQ codes (a safetensors file).
///
/// The audio (any format voxspec-audio reads) is resampled to the codec's rate and encoded
/// into the codes of the first --n-q RVQ layers: a safetensors file with one I64 tensor "codes"
/// [n_q, frames] and metadata format=voxspec-codes, sample_rate, frame_rate, hop,
/// codebook_size, samples.
#[derive(Debug, Args)]
pub struct EncodeArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) codec: PathBuf,
    /// Input audio file.
    pub(crate) input: PathBuf,
    /// Output codes file.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// RVQ layers to keep (default: all).
    #[arg(long, value_name = "K")]
    pub(crate) n_q: Option<usize>,
    /// SoCodec: the CTC teacher whose hidden states the codec reads.
    #[arg(long, value_name = "DIR", default_value = crate::common::DEFAULT_TEACHER)]
    pub(crate) teacher: PathBuf,
}

/// Decode a codes file written by `codec encode` back to a WAV file.
///
/// The WAV is written at the codec's sample rate
/// (float 32-bit PCM; trimmed to the encoded length when the file records it).
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) codec: PathBuf,
    /// Input codes file.
    pub(crate) input: PathBuf,
    /// Output WAV file.
    #[arg(long, short, value_name = "FILE")]
    pub(crate) out: PathBuf,
    /// Sample format: 16-bit PCM (every WAV reader opens it) or 32-bit float.
    #[arg(long, value_enum, default_value = "pcm16")]
    pub(crate) format: crate::audio_cmd::FormatArg,
    /// SoCodec: the recording whose voice (global embedding) the speech gets (≥ 1 s).
    #[arg(long, value_name = "AUDIO")]
    pub(crate) reference: Option<PathBuf>,
    /// SoCodec: decode from the first N streams only (the rest zeroed).
    #[arg(long, value_name = "N")]
    pub(crate) streams: Option<usize>,
    /// SoCodec: the vocoder that renders the log-mel (`voxspec vocoder train` output).
    #[arg(long, value_name = "DIR", default_value = crate::common::DEFAULT_VOCODER)]
    pub(crate) vocoder: PathBuf,
    /// SoCodec: render with Griffin-Lim instead of the vocoder (fallback; buzzy).
    #[arg(long)]
    pub(crate) griffin_lim: bool,
}

/// Write token stores (RVQ codes) for every split of a prepared corpus.
///
/// Every utterance of the train, dev and test splits goes into
/// <OUT>/<split>-NNNNN.safetensors (read with voxspec_data::TokenStore), codes [n_q, frames]
/// per utterance id. Audio is read in parallel batches and resampled to the codec's rate; each
/// utterance is encoded at its own length. Every utterance's frame count must equal
/// ceil(samples / hop) and agree (±1 frame) with its manifest duration, or extraction stops
/// naming the utterance. Finished shards are kept: rerunning after an interruption encodes
/// only the utterances not in the store yet.
#[derive(Debug, Args)]
pub struct ExtractArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) codec: PathBuf,
    /// Prepared data directory (train.jsonl, dev.jsonl, test.jsonl).
    #[arg(long, value_name = "DIR")]
    pub(crate) data: PathBuf,
    /// Output directory of the token shards.
    #[arg(long, short, value_name = "DIR")]
    pub(crate) out: PathBuf,
    /// RVQ layers to keep (default: all).
    #[arg(long, value_name = "K")]
    pub(crate) n_q: Option<usize>,
    /// Splits to extract (comma separated; a split without a manifest is skipped).
    #[arg(long, value_delimiter = ',', default_value = "train,dev,test")]
    pub(crate) splits: Vec<String>,
    /// Utterances whose audio is read in parallel per batch.
    #[arg(long, default_value_t = 16)]
    pub(crate) batch: usize,
    /// Utterances per shard flush (frames per shard before a new shard starts).
    #[arg(long, default_value_t = 100_000)]
    pub(crate) shard_frames: usize,
    /// SoCodec: teacher feature stores of the splits (`voxspec teacher extract` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) teacher_features: Option<PathBuf>,
    /// SoCodec, data augmentation: also encode every training utterance on N − 1 other token
    /// grids, its first s teacher frames dropped (s = 1..N−1, at most the teacher frames per
    /// token frame), stored as `<id>@<ms>ms`; `voxspec train multistream` adds them as
    /// training utterances with their phone alignments moved by as much. 1: none.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub(crate) phase_shifts: usize,
}

/// Codes as synthesis hands them to the codec decoder, for `codec train --decoder-only
/// --decoder-codes`: every recording's RVQ-1 codes (from --tokens) with layers 2..N filled in
/// by the experiment's NAR model (on the engine synthesis uses, told the recording's phone
/// durations when the NAR is aligned). A decoder trained on them renders generated speech
/// better than one trained on its encoder's codes, whose upper layers no NAR reproduces.
#[derive(Debug, Args)]
pub struct FillArgs {
    #[command(flatten)]
    pub(crate) models: crate::synth_args::ModelArgs,
    /// Token store of the recordings' codes (`codec extract` output) [default: <EXP>/tokens].
    #[arg(long, value_name = "DIR")]
    pub(crate) tokens: Option<PathBuf>,
    /// Prepared data directory with the splits' manifests [default: <EXP>/data].
    #[arg(long, value_name = "DIR")]
    pub(crate) data: Option<PathBuf>,
    /// Splits to fill (comma separated; the decoder trains on train and validates on dev).
    #[arg(long, value_delimiter = ',', default_value = "train,dev")]
    pub(crate) splits: Vec<String>,
    /// Output directory of the token shards.
    #[arg(long, short, value_name = "DIR")]
    pub(crate) out: PathBuf,
}

/// Which codec family `codec train` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodecKind {
    /// SEANet + RVQ waveform codec with semantic distillation.
    Speechtokenizer,
    /// SoCodec: teacher features → ordered token streams → log-mel (+ vocoder).
    Socodec,
}

/// The quantizer of a SoCodec (`--quantizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantizerArg {
    /// Ordered product quantization (paired sub-codebooks, nested dropout).
    Opq,
    /// Product quantization (the same streams, no nested dropout).
    Pq,
    /// Residual vector quantization (one K²-entry codebook per stream).
    Rq,
}

impl From<QuantizerArg> for QuantizerKind {
    fn from(q: QuantizerArg) -> Self {
        match q {
            QuantizerArg::Opq => QuantizerKind::Opq,
            QuantizerArg::Pq => QuantizerKind::Pq,
            QuantizerArg::Rq => QuantizerKind::Rq,
        }
    }
}

/// Resynthesis quality of a codec on one split of a prepared corpus.
///
/// Every utterance of <DATA>/<SPLIT>.jsonl (at most --max-utterances) is read at the codec's rate,
/// encoded with all RVQ layers and decoded twice: with all layers ("full") and with the first
/// quantizer's code vectors alone ("RVQ-1"). Reported: the mean mel-cepstral distortion (an
/// MFCC-based MCD, not SPTK's mcep: DCT-II of the log mel spectrogram, 25 ms window, 10 ms
/// hop, 80 bands, c1..c13, frames paired by index, mean over frames and then over utterances)
/// of both reconstructions against the original, and the CTC teacher's corpus character error
/// rate (total edits / total reference characters) on the original audio and on both
/// reconstructions, each resampled to the teacher's rate, and its forced-choice accuracy:
/// the fraction of utterances whose own transcript has the highest CTC likelihood among all
/// transcripts of the split (chance = 1 / split size; see `voxspec eval intelligibility`).
/// Prints a markdown table and writes a JSON report with per-utterance scores.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) codec: PathBuf,
    /// CTC teacher directory (`voxspec train ctc` output) that transcribes for the CER.
    #[arg(long, value_name = "DIR")]
    pub(crate) teacher: PathBuf,
    /// Prepared data directory (`voxspec prepare` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) data: PathBuf,
    /// Split whose manifest <DATA>/<SPLIT>.jsonl is evaluated.
    #[arg(long, default_value = "test")]
    pub(crate) split: String,
    /// Evaluate at most this many utterances (the first of the manifest).
    #[arg(long, value_name = "N")]
    pub(crate) max_utterances: Option<usize>,
    /// Where to write the JSON report.
    #[arg(long, short, value_name = "FILE", default_value = "codec-eval.json")]
    pub(crate) out: PathBuf,
    /// Also write WAVs (<ID>.reference.wav, <ID>.full.wav, <ID>.rvq1.wav, at the codec's
    /// rate) of the first --save-count utterances into this directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) save_audio: Option<PathBuf>,
    /// Utterances whose audio --save-audio writes.
    #[arg(long, default_value_t = 3)]
    pub(crate) save_count: usize,
    /// A codes → log-mel decoder (`codec train-mel` output): the first row renders the
    /// codec's codes through it and the vocoder, the second through the codec's own decoder.
    #[arg(long, value_name = "DIR")]
    pub(crate) mel_decoder: Option<PathBuf>,
    /// SoCodec or --mel-decoder: the vocoder that renders the log-mel.
    #[arg(long, value_name = "DIR", default_value = crate::common::DEFAULT_VOCODER)]
    pub(crate) vocoder: PathBuf,
    /// SoCodec or --mel-decoder: render with Griffin-Lim instead of the vocoder.
    #[arg(long)]
    pub(crate) griffin_lim: bool,
    #[command(flatten)]
    pub(crate) asr: crate::asr_judge::AsrArgs,
}
