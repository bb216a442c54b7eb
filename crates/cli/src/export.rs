//! `voxspec export`: a self-contained model card for other projects — the inference part of a
//! run directory (no optimizer state, no checkpoints) plus a README.md that documents the
//! config, every tensor's name and shape, the data and the final metrics.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use safetensors::SafeTensors;
use voxspec_mtp::{load_mtp, load_nar};

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
    dtype: ExportDtype,
}

/// Precision of exported weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum ExportDtype {
    F32,
    Bf16,
}

/// f32 → bf16, rounding to nearest even (NaN stays NaN).
fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounded = bits.wrapping_add(0x7FFF + ((bits >> 16) & 1));
    (rounded >> 16) as u16
}

/// Copies the safetensors file `from` to `to` with every F32 tensor stored as BF16 (other
/// dtypes and the metadata unchanged).
fn write_bf16(from: &Path, to: &Path) -> anyhow::Result<()> {
    use safetensors::tensor::{Dtype, TensorView};
    let bytes = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
    let (_, meta) = SafeTensors::read_metadata(&bytes)
        .with_context(|| format!("{} is not a safetensors file", from.display()))?;
    let st = SafeTensors::deserialize(&bytes)
        .with_context(|| format!("{} is not a safetensors file", from.display()))?;
    let mut converted: Vec<(String, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
    for (name, view) in st.tensors() {
        let data = if view.dtype() == Dtype::F32 {
            view.data()
                .chunks_exact(4)
                .flat_map(|c| bf16_bits(f32::from_le_bytes([c[0], c[1], c[2], c[3]])).to_le_bytes())
                .collect()
        } else {
            view.data().to_vec()
        };
        let dtype = if view.dtype() == Dtype::F32 {
            Dtype::BF16
        } else {
            view.dtype()
        };
        converted.push((name, dtype, view.shape().to_vec(), data));
    }
    let views = converted
        .iter()
        .map(|(name, dtype, shape, data)| {
            TensorView::new(*dtype, shape.clone(), data)
                .map(|v| (name.clone(), v))
                .with_context(|| format!("converting {name} of {}", from.display()))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let out = safetensors::serialize(views, meta.metadata().clone())
        .with_context(|| format!("writing the bf16 weights of {}", from.display()))?;
    voxspec_data::write_atomic(to, &out)?;
    Ok(())
}

fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    std::fs::copy(from, to)
        .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
    Ok(())
}

/// `(name, dtype, shape)` of every tensor in a safetensors file, sorted by name.
fn tensor_table(path: &Path) -> anyhow::Result<Vec<(String, String, Vec<usize>)>> {
    let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let st = SafeTensors::deserialize(&bytes)
        .with_context(|| format!("{} is not a safetensors file", path.display()))?;
    let mut rows: Vec<_> = st
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, format!("{:?}", view.dtype()), view.shape().to_vec()))
        .collect();
    rows.sort();
    Ok(rows)
}

/// The last logged values of each split in `metrics.jsonl`, if there is one.
fn last_metrics(dir: &Path) -> Vec<String> {
    let Ok(records) = voxspec_train::read_metrics(&dir.join("metrics.jsonl")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for split in ["train", "valid"] {
        if let Some(r) = records.iter().rev().find(|r| r.split == split) {
            let values: Vec<String> = r
                .values
                .iter()
                .filter(|(k, _)| !k.contains("per_sec"))
                .map(|(k, v)| format!("{k} {v:.4}"))
                .collect();
            out.push(format!(
                "- {split} at step {}: {}",
                r.step,
                values.join(", ")
            ));
        }
    }
    out
}

pub fn run(args: ExportArgs) -> anyhow::Result<()> {
    let src = &args.checkpoint;
    let config_text = std::fs::read_to_string(src.join("config.json"))
        .with_context(|| format!("reading {}", src.join("config.json").display()))?;
    let config: serde_json::Value = serde_json::from_str(&config_text)
        .with_context(|| format!("parsing {}", src.join("config.json").display()))?;
    let kind = config["kind"].as_str().unwrap_or("").to_string();
    // Load (strictly) before writing anything: a card must hold weights that fit its config.
    let device = crate::device::single()?;
    match kind.as_str() {
        "mtp" | "draft" => {
            load_mtp(src, &device)?;
        }
        "nar" => {
            load_nar(src, &device)?;
        }
        other => bail!(
            "{} holds a {other:?} model; export handles \"mtp\", \"draft\" and \"nar\"",
            src.display()
        ),
    }
    let tokenizer = src.join("tokenizer.json");
    anyhow::ensure!(
        tokenizer.is_file(),
        "{} has no tokenizer.json: export a directory written by `voxspec train`",
        src.display()
    );
    if args.to.exists() {
        let empty = std::fs::read_dir(&args.to)
            .with_context(|| format!("listing {}", args.to.display()))?
            .next()
            .is_none();
        anyhow::ensure!(empty, "{} exists and is not empty", args.to.display());
    }
    std::fs::create_dir_all(&args.to).with_context(|| format!("creating {}", args.to.display()))?;
    for name in ["config.json", "tokenizer.json"] {
        copy(&src.join(name), &args.to.join(name))?;
    }
    let weights = args.to.join("model.safetensors");
    match args.dtype {
        ExportDtype::F32 => copy(&src.join("model.safetensors"), &weights)?,
        ExportDtype::Bf16 => {
            write_bf16(&src.join("model.safetensors"), &weights)?;
            // The narrowed file must still load into the model its config describes.
            match kind.as_str() {
                "nar" => drop(load_nar(&args.to, &device)?),
                _ => drop(load_mtp(&args.to, &device)?),
            }
        }
    }
    let mut extras = Vec::new();
    if let Some(t) = &args.transitions {
        voxspec_infer::Transitions::load(t).with_context(|| format!("checking {}", t.display()))?;
        copy(t, &args.to.join("transitions.safetensors"))?;
        extras
            .push("transitions.safetensors: stream-0 transition statistics Q for Viterbi decoding");
    }
    let groups = args
        .groups
        .clone()
        .or_else(|| Some(src.join("groups.safetensors")).filter(|p| p.is_file()));
    if let Some(g) = &groups {
        voxspec_infer::SimilarityGroups::load(g)
            .with_context(|| format!("checking {}", g.display()))?;
        copy(g, &args.to.join("groups.safetensors"))?;
        extras.push("groups.safetensors: PCG similarity groups (CSR)");
    }

    let tensors = tensor_table(&args.to.join("model.safetensors"))?;
    let params: usize = tensors
        .iter()
        .map(|(_, _, s)| s.iter().product::<usize>())
        .sum();
    let mut card = String::new();
    let _ = writeln!(card, "# voxspec {kind} model\n");
    let _ = writeln!(
        card,
        "Exported by voxspec {} from `{}`. {:.2}M parameters.\n",
        env!("CARGO_PKG_VERSION"),
        src.display(),
        params as f64 / 1e6
    );
    let _ = writeln!(card, "## Files\n");
    let _ = writeln!(card, "- config.json: model kind and configuration (below)");
    let _ = writeln!(
        card,
        "- model.safetensors: the weights ({}); names are module paths, linear weights are stored `[in, out]` (transpose for PyTorch's `nn.Linear`)",
        match args.dtype {
            ExportDtype::F32 => "f32",
            ExportDtype::Bf16 => "bf16, rounded to nearest even from the trained f32",
        }
    );
    let _ = writeln!(
        card,
        "- tokenizer.json: the text tokenizer (Hugging Face `tokenizers` format)"
    );
    for e in &extras {
        let _ = writeln!(card, "- {e}");
    }
    let _ = writeln!(
        card,
        "\nRead it from Python: `python tools/load_export.py <this dir>` (needs `safetensors` and `numpy`).\n"
    );
    let _ = writeln!(card, "## Data and training\n");
    match std::fs::read_to_string(src.join("run.json")) {
        Ok(run) => {
            let _ = writeln!(
                card,
                "Run settings (`run.json`):\n\n```json\n{}\n```\n",
                run.trim()
            );
        }
        Err(_) => {
            let _ = writeln!(card, "No run.json in the source directory.\n");
        }
    }
    let metrics = last_metrics(src);
    if metrics.is_empty() {
        let _ = writeln!(card, "No metrics.jsonl in the source directory.\n");
    } else {
        let _ = writeln!(card, "Final logged metrics:\n\n{}\n", metrics.join("\n"));
    }
    let _ = writeln!(card, "## Config\n\n```json\n{}\n```\n", config_text.trim());
    let _ = writeln!(
        card,
        "## Tensors\n\n| name | dtype | shape |\n|---|---|---|"
    );
    for (name, dtype, shape) in &tensors {
        let _ = writeln!(card, "| `{name}` | {dtype} | {shape:?} |");
    }
    voxspec_data::write_atomic(&args.to.join("README.md"), card.as_bytes())?;
    println!(
        "exported {kind} model ({} tensors, {:.2}M parameters) → {}",
        tensors.len(),
        params as f64 / 1e6,
        args.to.display()
    );
    Ok(())
}
