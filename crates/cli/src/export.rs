//! `voxspec export`: a self-contained model card for other projects (written by
//! `voxspec_mtp::export`).

use std::path::PathBuf;

use clap::Args;
use voxspec_mtp::{ExportDtype, ExportExtras, ExportSource};

/// Export a trained AR (mtp), draft or NAR model: config.json, model.safetensors (tensor names
/// are module paths; linear weights are [in, out]), tokenizer.json, optional
/// transitions.safetensors / groups.safetensors, and a README.md model card. The weights are
/// loaded and checked against the config before anything is written. `tools/load_export.py`
/// shows how to read the result from Python with `safetensors`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// Run directory of `voxspec train mtp|nar|draft`.
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
    let source = ExportSource::open(&args.checkpoint)?;
    let device = crate::device::single()?;
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
