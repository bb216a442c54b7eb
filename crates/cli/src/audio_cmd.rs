//! `voxspec audio info | convert | f0`.

use std::path::PathBuf;

use anyhow::Context;
use clap::{Args, Subcommand, ValueEnum};
use voxspec_audio::{Audio, WavFormat};

#[derive(Debug, Subcommand)]
pub enum AudioCommand {
    /// Print rate, channels, frames, duration and codec of audio files.
    Info(InfoArgs),
    /// Decode any supported file (WAV, FLAC, MP3, OGG/Vorbis), downmix to mono, resample and
    /// write WAV.
    Convert(ConvertArgs),
    /// Median F0 (YIN) and voiced fraction of audio files.
    F0(F0Args),
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    /// Audio files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum FormatArg {
    /// 16-bit PCM.
    Pcm16,
    /// 32-bit float.
    Float32,
}

impl From<FormatArg> for WavFormat {
    fn from(f: FormatArg) -> Self {
        match f {
            FormatArg::Pcm16 => WavFormat::Pcm16,
            FormatArg::Float32 => WavFormat::Float32,
        }
    }
}

#[derive(Debug, Args)]
pub struct ConvertArgs {
    /// Input audio file.
    input: PathBuf,
    /// Output WAV file.
    output: PathBuf,
    /// Output sample rate in Hz (default: keep the input's).
    #[arg(long)]
    rate: Option<u32>,
    /// Output sample format.
    #[arg(long, value_enum, default_value = "pcm16")]
    format: FormatArg,
}

/// Fundamental frequency by YIN (de Cheveigné & Kawahara 2002) with its voicing decision.
///
/// Each file is decoded and downmixed (at its own rate); frames of --frame seconds every --hop
/// seconds are voiced when the cumulative-mean-normalised difference function dips below
/// --threshold at a lag within [1/--fmax, 1/--fmin]. Prints, per file, the median F0 of the
/// voiced frames (or "unvoiced") and the fraction of voiced frames; with several files, the
/// median over all their voiced frames too.
#[derive(Debug, Args)]
pub struct F0Args {
    /// Audio files.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// Lowest F0 searched (Hz).
    #[arg(long, default_value_t = 50.0)]
    fmin: f32,
    /// Highest F0 searched (Hz).
    #[arg(long, default_value_t = 500.0)]
    fmax: f32,
    /// Analysis (integration) window in seconds.
    #[arg(long, default_value_t = 0.025)]
    frame: f32,
    /// Hop between frames in seconds.
    #[arg(long, default_value_t = 0.01)]
    hop: f32,
    /// Voicing threshold on the aperiodicity (0..1; lower is stricter).
    #[arg(long, default_value_t = 0.15)]
    threshold: f32,
}

fn f0(a: &F0Args) -> anyhow::Result<()> {
    let cfg = voxspec_audio::PitchConfig {
        fmin: a.fmin,
        fmax: a.fmax,
        frame: a.frame,
        hop: a.hop,
        threshold: a.threshold,
    };
    let mut all = Vec::new();
    for f in &a.files {
        let audio = voxspec_audio::load(f)?;
        let track = voxspec_audio::pitch_track(&audio.samples, audio.sample_rate, &cfg)
            .with_context(|| format!("F0 of {}", f.display()))?;
        let median = voxspec_audio::median_f0(&track)
            .map_or_else(|| "unvoiced".to_string(), |m| format!("{m:.1} Hz"));
        println!(
            "{}: median F0 {median}, voiced {:.1} % of {} frames",
            f.display(),
            100.0 * voxspec_audio::voiced_fraction(&track),
            track.len()
        );
        all.extend(track);
    }
    if a.files.len() > 1 {
        let median = voxspec_audio::median_f0(&all)
            .map_or_else(|| "unvoiced".to_string(), |m| format!("{m:.1} Hz"));
        println!(
            "all {} files: median F0 {median}, voiced {:.1} % of {} frames",
            a.files.len(),
            100.0 * voxspec_audio::voiced_fraction(&all),
            all.len()
        );
    }
    Ok(())
}

pub fn run(cmd: AudioCommand) -> anyhow::Result<()> {
    match cmd {
        AudioCommand::Info(a) => {
            for f in &a.files {
                let i = voxspec_audio::probe(f)?;
                println!(
                    "{}: {} Hz, {} channel(s), {} frames, {:.3} s, {}",
                    f.display(),
                    i.sample_rate,
                    i.channels,
                    i.n_frames,
                    i.duration_secs(),
                    i.codec
                );
            }
            Ok(())
        }
        AudioCommand::F0(a) => f0(&a),
        AudioCommand::Convert(a) => {
            let audio: Audio = match a.rate {
                Some(r) => voxspec_audio::load_resampled(&a.input, r)?,
                None => voxspec_audio::load(&a.input)?,
            };
            voxspec_audio::write_wav(&a.output, &audio, a.format.into())?;
            println!(
                "wrote {} ({} Hz, {:.3} s)",
                a.output.display(),
                audio.sample_rate,
                audio.duration_secs()
            );
            Ok(())
        }
    }
}
