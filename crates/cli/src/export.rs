//! `voxspec export`: a self-contained model card for other projects (written by
//! `voxspec_mtp::export`).

use std::path::{Path, PathBuf};

use anyhow::Context;

use clap::Args;
use voxspec_mtp::{ExportDtype, ExportExtras, ExportSource};

/// Export a trained AR (mtp), draft or NAR model: config.json, model.safetensors (tensor names
/// are module paths; linear weights are [in, out]), tokenizer.json, optional
/// transitions.safetensors / groups.safetensors, and a README.md model card. A mel decoder
/// (`codec train-mel` output) or a vocoder (`vocoder train`) is exported as its config.json and
/// weights (and a mel decoder's tokenizer.json when it reads phones). The weights are loaded
/// and checked against the config before anything is written. `tools/load_export.py`
/// shows how to read the result from Python with `safetensors`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Run directory of `voxspec train mtp|nar|draft`, `voxspec codec train-mel` or `voxspec
    /// vocoder train`.
    #[arg(long, value_name = "DIR")]
    checkpoint: PathBuf,
    /// Output directory (created; must be empty or absent).
    #[arg(long, value_name = "DIR")]
    to: PathBuf,
    /// Transition statistics to ship with an AR model (`voxspec stats transitions`).
    #[arg(long, value_name = "FILE")]
    transitions: Option<PathBuf>,
    /// Similarity groups to ship (`voxspec groups build`; default: <CHECKPOINT>/groups.safetensors if present).
    #[arg(long, value_name = "FILE")]
    groups: Option<PathBuf>,
    /// Precision of the exported float weights: f32 (as trained) or bf16 (half the size; voxspec
    /// widens them to f32 on load, and its native engine runs bf16 weights anyway).
    #[arg(long, value_enum, default_value = "f32")]
    dtype: DtypeArg,
}

/// Precision of exported weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum DtypeArg {
    F32,
    Bf16,
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    if let Some(kind) = renderer_kind(&args.checkpoint) {
        return export_renderer(&args, kind);
    }
    let source = ExportSource::open(&args.checkpoint)?;
    let device = voxspec_train::device::single()?;
    let dtype = match args.dtype {
        DtypeArg::F32 => ExportDtype::F32,
        DtypeArg::Bf16 => ExportDtype::Bf16,
    };
    let extras = ExportExtras {
        transitions: args.transitions,
        groups: args.groups,
    };
    let exported = source.export(&args.to, dtype, &extras, &device)?;
    println!(
        "exported {} model ({} tensors, {:.2}M parameters) → {}",
        exported.kind,
        exported.tensors,
        exported.params as f64 / 1e6,
        args.to.display()
    );
    Ok(())
}

/// The models between codes and samples that export as their config and weights alone.
#[derive(Debug, Clone, Copy)]
enum Renderer {
    MelDecoder,
    Vocoder,
}

impl Renderer {
    fn name(self) -> &'static str {
        match self {
            Self::MelDecoder => "mel decoder",
            Self::Vocoder => "vocoder",
        }
    }
}

fn renderer_kind(dir: &Path) -> Option<Renderer> {
    let kind = voxspec_train::weights::model_kind(dir)?;
    if kind == voxspec_codec::mel_decoder::MEL_DECODER_KIND {
        Some(Renderer::MelDecoder)
    } else if kind == voxspec_codec::vocoder::VOCODER_KIND {
        Some(Renderer::Vocoder)
    } else {
        None
    }
}

/// A mel decoder or a vocoder: its weights are loaded (and so checked against its config)
/// before its config.json and weights (f32 or bf16) are written to `--to`.
fn export_renderer(args: &ExportArgs, kind: Renderer) -> anyhow::Result<()> {
    let (name, dir) = (kind.name(), &args.checkpoint);
    anyhow::ensure!(
        args.transitions.is_none() && args.groups.is_none(),
        "--transitions and --groups belong to AR models, not to the {name} {}",
        dir.display()
    );
    let device = voxspec_train::device::single()?;
    let loading = || format!("loading the {name} {}", dir.display());
    let params = match kind {
        Renderer::MelDecoder => {
            let (_, model) = voxspec_codec::load_mel_decoder(dir, &device).with_context(loading)?;
            burn::module::Module::num_params(&model)
        }
        Renderer::Vocoder => {
            let (_, model) =
                voxspec_codec::vocoder::load_vocoder(dir, &device).with_context(loading)?;
            burn::module::Module::num_params(&model)
        }
    };
    if args.to.exists() {
        let empty = std::fs::read_dir(&args.to)
            .with_context(|| format!("reading {}", args.to.display()))?
            .next()
            .is_none();
        anyhow::ensure!(empty, "{} exists and is not empty", args.to.display());
    }
    std::fs::create_dir_all(&args.to).with_context(|| format!("creating {}", args.to.display()))?;
    std::fs::copy(
        args.checkpoint.join("config.json"),
        args.to.join("config.json"),
    )
    .with_context(|| format!("copying {}/config.json", args.checkpoint.display()))?;
    // A mel decoder with a phone input keeps the tokenizer that numbers its phones.
    let tokenizer = args.checkpoint.join("tokenizer.json");
    if tokenizer.is_file() {
        std::fs::copy(&tokenizer, args.to.join("tokenizer.json"))
            .with_context(|| format!("copying {}", tokenizer.display()))?;
    }
    let weights = voxspec_train::weights::WEIGHTS_FILE;
    let (from, to) = (args.checkpoint.join(weights), args.to.join(weights));
    match args.dtype {
        DtypeArg::F32 => {
            std::fs::copy(&from, &to).with_context(|| format!("copying {}", from.display()))?;
        }
        DtypeArg::Bf16 => voxspec_mtp::export::write_bf16(&from, &to)?,
    }
    println!(
        "exported {name} ({:.2}M parameters) → {}",
        params as f64 / 1e6,
        args.to.display()
    );
    Ok(())
}
