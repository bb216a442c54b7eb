//! `voxspec`: the command-line tool. One subcommand per pipeline stage; run
//! `voxspec <command> --help` for each.

mod align_cmd;
mod asr_judge;
mod audio_cmd;
mod bench;
mod bench_accept;
mod bench_codec;
mod bench_decode;
mod bench_model;
mod bench_multistream;
mod bench_pipeline;
mod codec_args;
mod codec_cmd;
mod codec_eval;
mod codec_mel;
mod common;
mod eval_cmd;
mod export;
mod groups;
mod prepare;
mod progress;
mod serve;
mod socodec_cmd;
mod stats;
mod synth;
mod synth_args;
mod synth_multistream;
mod teacher_cmd;
mod tokenizer;
mod train_cmd;
mod train_lm;
mod train_loop;
mod train_multistream;
mod vocoder_cmd;
mod vocoder_eval;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Codec-language-model text-to-speech with a fast autoregressive stage.
///
/// Pipeline: prepare → tokenizer train → codec train/extract → train mtp/nar/draft → synthesize →
/// bench → export. `recipes/libritts/train_mtp.sh` runs it end to end.
#[derive(Debug, Parser)]
#[command(name = "voxspec", version, propagate_version = true)]
struct Cli {
    /// More logging: -v info from every crate, -vv debug, -vvv trace (RUST_LOG overrides).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    verbose: u8,
    /// Worker threads for parallel work (default: all cores).
    #[arg(long, global = true, value_name = "N")]
    threads: Option<usize>,
    /// Device to compute on: cpu; wgpu:N, the N-th GPU adapter (discrete GPUs first; wgpu =
    /// wgpu:0) through Vulkan, Metal or DX12 (needs a build with `--features gpu`); cuda or
    /// cuda:N (`--features cuda`).
    /// `train mtp | nar | ctc` take a comma-separated list to train data-parallel, e.g.
    /// wgpu:0,wgpu:1.
    #[arg(
        long,
        global = true,
        value_name = "DEVICE[,..]",
        value_delimiter = ',',
        default_value = "cpu"
    )]
    device: Vec<voxspec_train::DeviceSpec>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Scan a corpus (LibriTTS layout or plain) and write train/dev/test manifests.
    Prepare(prepare::PrepareArgs),
    /// Phone alignments of a prepared corpus (TextGrids), from an aligner trained on it.
    Align(align_cmd::AlignArgs),
    /// Train or apply the text tokenizer.
    #[command(subcommand)]
    Tokenizer(tokenizer::TokenizerCommand),
    /// Inspect and convert audio files.
    #[command(subcommand)]
    Audio(audio_cmd::AudioCommand),
    /// Train a model through the one training loop (checkpoints, resume, TensorBoard).
    #[command(subcommand)]
    Train(train_cmd::TrainCommand),
    /// Semantic teachers: extract features of a corpus, transcribe and score (CER).
    #[command(subcommand)]
    Teacher(teacher_cmd::TeacherCommand),
    /// Train the SpeechTokenizer codec, encode/decode audio, extract token stores, evaluate
    /// resynthesis (MCD, CER).
    #[command(subcommand)]
    Codec(codec_cmd::CodecCommand),
    /// Train the Vocos-style vocoder (log-mel → waveform), resynthesise audio with it or with
    /// Griffin-Lim, evaluate resynthesis (MCD, CER, forced choice).
    #[command(subcommand)]
    Vocoder(vocoder_cmd::VocoderCommand),
    /// Evaluate audio: forced-choice sentence identification (intelligibility) and CER.
    #[command(subcommand)]
    Eval(eval_cmd::EvalCommand),
    /// Text to speech: AR model (any decoder) → NAR model → codec decoder → WAV.
    Synthesize(synth_args::SynthesizeArgs),
    /// Serve speech over HTTP (OpenAI-style `POST /v1/audio/speech`, /health, /metrics).
    Serve(serve::ServeArgs),
    /// Benchmarks that write JSON reports.
    #[command(subcommand)]
    Bench(bench::BenchCommand),
    /// Statistics of extracted codes (the transition matrix for Viterbi decoding).
    #[command(subcommand)]
    Stats(stats::StatsCommand),
    /// Export a trained model as a self-contained card (weights, config, tokenizer, README).
    Export(export::ExportArgs),
    /// Acoustic similarity groups of a model's codes for PCG speculative decoding.
    #[command(subcommand)]
    Groups(groups::GroupsCommand),
}

fn init_logging(verbose: u8) {
    use tracing_subscriber::EnvFilter;
    // symphonia logs a failed probe at ERROR before returning the error that voxspec reports
    // itself (naming the file): one message per failure, so its log is shown only with -vv.
    let default = match verbose {
        0 => {
            "warn,voxspec=info,voxspec_cli=info,voxspec_data=info,voxspec_codec=info,voxspec_teacher=info,voxspec_train=info,voxspec_eval=info,symphonia_core=off,symphonia=off"
        }
        1 => "info,symphonia_core=off,symphonia=off",
        2 => "debug",
        _ => "trace",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_target(verbose > 0)
        .init();
}

fn run(cli: Cli) -> anyhow::Result<()> {
    // `bench train --float` sets the float type before the device computes anything.
    let float = match &cli.command {
        Command::Bench(bench::BenchCommand::Train(args)) => args.float_dtype(),
        _ => None,
    };
    voxspec_train::device::select(cli.device, float)?;
    if let Some(n) = cli.threads {
        anyhow::ensure!(n > 0, "--threads must be at least 1");
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .build_global()
            .map_err(|e| anyhow::anyhow!("cannot set up {n} worker threads: {e}"))?;
    }
    match cli.command {
        Command::Prepare(args) => prepare::run(args),
        Command::Align(args) => align_cmd::run(args),
        Command::Tokenizer(cmd) => tokenizer::run(cmd),
        Command::Audio(cmd) => audio_cmd::run(cmd),
        Command::Train(cmd) => train_cmd::run(cmd),
        Command::Teacher(cmd) => teacher_cmd::run(cmd),
        Command::Codec(cmd) => codec_cmd::run(cmd),
        Command::Vocoder(cmd) => vocoder_cmd::run(cmd),
        Command::Eval(cmd) => eval_cmd::run(cmd),
        Command::Synthesize(args) => synth::synthesize(args),
        Command::Serve(args) => serve::run(args),
        Command::Bench(cmd) => bench::run(cmd),
        Command::Stats(cmd) => stats::run(cmd),
        Command::Groups(cmd) => groups::run(cmd),
        Command::Export(args) => export::run(args),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.verbose);
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {}", render_error(&e));
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes joined by ": ", leaving out a cause whose text the message already
/// holds (a library error that prints its source and also exposes it would say it twice).
fn render_error(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn a_cause_already_in_the_message_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory");
        let e = anyhow::Error::new(voxspec_audio::AudioError::Write {
            path: "/x/y.wav".into(),
            source: io,
        })
        .context("synthesis");
        assert_eq!(
            render_error(&e),
            "synthesis: cannot write audio file /x/y.wav: No such file or directory"
        );
    }

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
