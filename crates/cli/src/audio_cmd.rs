//! `voxspec audio info | convert`.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use voxspec_audio::{Audio, WavFormat};

#[derive(Debug, Subcommand)]
pub enum AudioCommand {
    /// Print rate, channels, frames, duration and codec of audio files.
    Info(InfoArgs),
    /// Decode any supported file (WAV, FLAC, MP3, OGG/Vorbis), downmix to mono, resample and
    /// write WAV.
    Convert(ConvertArgs),
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
