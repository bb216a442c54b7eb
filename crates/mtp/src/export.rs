//! Exporting a trained AR, draft or NAR model as a self-contained card for other projects: the
//! inference part of a run directory (no optimizer state, no checkpoints), optionally with the
//! weights narrowed to bf16, plus a README.md that documents the config, every tensor's name and
//! shape, the data and the final metrics.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use safetensors::SafeTensors;

use crate::checkpoint::{load_mtp, load_nar};
use crate::error::{MtpError, Result};

/// Precision of exported weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportDtype {
    /// As trained.
    F32,
    /// Every f32 tensor rounded to nearest even bf16.
    Bf16,
}

/// The model directory to export, its `config.json` read.
#[derive(Debug, Clone)]
pub struct ExportSource {
    /// The run directory.
    pub dir: PathBuf,
    /// The text of its `config.json`.
    pub config_text: String,
    /// The model kind the config names (`mtp`, `draft`, `nar`, or another).
    pub kind: String,
}

/// What to ship besides the model.
#[derive(Debug, Clone, Default)]
pub struct ExportExtras {
    /// Stream-0 transition statistics (checked before they are copied).
    pub transitions: Option<PathBuf>,
    /// Similarity groups (checked before they are copied).
    pub groups: Option<PathBuf>,
}

/// What an export wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exported {
    /// The model kind.
    pub kind: String,
    /// Tensors in the exported weights.
    pub tensors: usize,
    /// Parameters in the exported weights.
    pub params: usize,
}

fn io(action: String) -> impl FnOnce(std::io::Error) -> MtpError {
    move |source| MtpError::Io { action, source }
}

fn not_safetensors(path: &Path) -> impl FnOnce(safetensors::SafeTensorError) -> MtpError {
    let action = format!("{} is not a safetensors file", path.display());
    move |source| MtpError::Safetensors { action, source }
}

/// f32 → bf16, rounding to nearest even (NaN stays NaN).
pub fn bf16_bits(x: f32) -> u16 {
    let bits = x.to_bits();
    if x.is_nan() {
        return ((bits >> 16) | 0x40) as u16;
    }
    let rounded = bits.wrapping_add(0x7FFF + ((bits >> 16) & 1));
    (rounded >> 16) as u16
}

/// Copies the safetensors file `from` to `to` with every F32 tensor stored as BF16 (other
/// dtypes and the metadata unchanged).
///
/// # Errors
/// [`MtpError::Io`] and [`MtpError::Safetensors`] naming the file; the atomic write's error.
pub fn write_bf16(from: &Path, to: &Path) -> Result<()> {
    use safetensors::tensor::{Dtype, TensorView};
    let bytes = std::fs::read(from).map_err(io(format!("reading {}", from.display())))?;
    let (_, meta) = SafeTensors::read_metadata(&bytes).map_err(not_safetensors(from))?;
    let st = SafeTensors::deserialize(&bytes).map_err(not_safetensors(from))?;
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
                .map_err(|source| MtpError::Safetensors {
                    action: format!("converting {name} of {}", from.display()),
                    source,
                })
        })
        .collect::<Result<Vec<_>>>()?;
    let out = safetensors::serialize(views, meta.metadata().clone()).map_err(|source| {
        MtpError::Safetensors {
            action: format!("writing the bf16 weights of {}", from.display()),
            source,
        }
    })?;
    voxspec_data::write_atomic(to, &out)?;
    Ok(())
}

fn copy(from: &Path, to: &Path) -> Result<()> {
    std::fs::copy(from, to).map_err(io(format!(
        "copying {} to {}",
        from.display(),
        to.display()
    )))?;
    Ok(())
}

/// `(name, dtype, shape)` of every tensor in a safetensors file, sorted by name.
///
/// # Errors
/// [`MtpError::Io`] and [`MtpError::Safetensors`] naming the file.
pub fn tensor_table(path: &Path) -> Result<Vec<(String, String, Vec<usize>)>> {
    let bytes = std::fs::read(path).map_err(io(format!("reading {}", path.display())))?;
    let st = SafeTensors::deserialize(&bytes).map_err(not_safetensors(path))?;
    let mut rows: Vec<_> = st
        .tensors()
        .into_iter()
        .map(|(name, view)| (name, format!("{:?}", view.dtype()), view.shape().to_vec()))
        .collect();
    rows.sort();
    Ok(rows)
}

/// The last logged values of each split in `<dir>/metrics.jsonl`, one markdown list item each
/// (none when there is no such file).
pub fn last_metrics(dir: &Path) -> Vec<String> {
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

impl ExportSource {
    /// Reads `<dir>/config.json`.
    ///
    /// # Errors
    /// [`MtpError::Io`] when it cannot be read, [`MtpError::ConfigJson`] when it is not JSON.
    pub fn open(dir: &Path) -> Result<Self> {
        let path = dir.join("config.json");
        let config_text =
            std::fs::read_to_string(&path).map_err(io(format!("reading {}", path.display())))?;
        let config: serde_json::Value = serde_json::from_str(&config_text)
            .map_err(|source| MtpError::ConfigJson { path, source })?;
        let kind = config["kind"].as_str().unwrap_or("").to_string();
        Ok(Self {
            dir: dir.to_path_buf(),
            config_text,
            kind,
        })
    }

    /// Loads the model strictly on `device` (the weights must fit the config) and, when it fits,
    /// writes the card into `to` (created; must be empty or absent): config.json,
    /// tokenizer.json, model.safetensors in `dtype` (a narrowed file is loaded again), the
    /// `extras` (default groups: the source's groups.safetensors if present) and README.md.
    ///
    /// # Errors
    /// [`MtpError::Export`] for a kind other than mtp, draft or nar, a source without
    /// tokenizer.json or a non-empty `to`; loading, I/O and file-format errors naming the file.
    pub fn export(
        &self,
        to: &Path,
        dtype: ExportDtype,
        extras: &ExportExtras,
        device: &Device,
    ) -> Result<Exported> {
        let src = &self.dir;
        let kind = self.kind.as_str();
        match kind {
            "mtp" | "draft" => {
                load_mtp(src, device)?;
            }
            "nar" => {
                load_nar(src, device)?;
            }
            other => {
                return Err(MtpError::Export {
                    detail: format!(
                        "{} holds a {other:?} model; export handles \"mtp\", \"draft\" and \"nar\"",
                        src.display()
                    ),
                });
            }
        }
        if !src.join("tokenizer.json").is_file() {
            return Err(MtpError::Export {
                detail: format!(
                    "{} has no tokenizer.json: export a directory written by `voxspec train`",
                    src.display()
                ),
            });
        }
        if to.exists() {
            let empty = std::fs::read_dir(to)
                .map_err(io(format!("listing {}", to.display())))?
                .next()
                .is_none();
            if !empty {
                return Err(MtpError::Export {
                    detail: format!("{} exists and is not empty", to.display()),
                });
            }
        }
        std::fs::create_dir_all(to).map_err(io(format!("creating {}", to.display())))?;
        for name in ["config.json", "tokenizer.json"] {
            copy(&src.join(name), &to.join(name))?;
        }
        let weights = to.join("model.safetensors");
        match dtype {
            ExportDtype::F32 => copy(&src.join("model.safetensors"), &weights)?,
            ExportDtype::Bf16 => {
                write_bf16(&src.join("model.safetensors"), &weights)?;
                // The narrowed file must still load into the model its config describes.
                match kind {
                    "nar" => drop(load_nar(to, device)?),
                    _ => drop(load_mtp(to, device)?),
                }
            }
        }
        let mut shipped = Vec::new();
        if let Some(t) = &extras.transitions {
            voxspec_infer::Transitions::load(t).map_err(|source| MtpError::Extra {
                path: t.clone(),
                source,
            })?;
            copy(t, &to.join("transitions.safetensors"))?;
            shipped.push(
                "transitions.safetensors: stream-0 transition statistics Q for Viterbi decoding",
            );
        }
        let groups = extras
            .groups
            .clone()
            .or_else(|| Some(src.join("groups.safetensors")).filter(|p| p.is_file()));
        if let Some(g) = &groups {
            voxspec_infer::SimilarityGroups::load(g).map_err(|source| MtpError::Extra {
                path: g.clone(),
                source,
            })?;
            copy(g, &to.join("groups.safetensors"))?;
            shipped.push("groups.safetensors: PCG similarity groups (CSR)");
        }

        let tensors = tensor_table(&to.join("model.safetensors"))?;
        let params: usize = tensors
            .iter()
            .map(|(_, _, s)| s.iter().product::<usize>())
            .sum();
        let card = self.card(dtype, &shipped, &tensors, params);
        voxspec_data::write_atomic(&to.join("README.md"), card.as_bytes())?;
        Ok(Exported {
            kind: self.kind.clone(),
            tensors: tensors.len(),
            params,
        })
    }

    /// The README.md of the card.
    fn card(
        &self,
        dtype: ExportDtype,
        shipped: &[&str],
        tensors: &[(String, String, Vec<usize>)],
        params: usize,
    ) -> String {
        let src = &self.dir;
        let mut card = String::new();
        let _ = writeln!(card, "# voxspec {} model\n", self.kind);
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
            match dtype {
                ExportDtype::F32 => "f32",
                ExportDtype::Bf16 => "bf16, rounded to nearest even from the trained f32",
            }
        );
        let _ = writeln!(
            card,
            "- tokenizer.json: the text tokenizer (Hugging Face `tokenizers` format)"
        );
        for e in shipped {
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
        let _ = writeln!(
            card,
            "## Config\n\n```json\n{}\n```\n",
            self.config_text.trim()
        );
        let _ = writeln!(
            card,
            "## Tensors\n\n| name | dtype | shape |\n|---|---|---|"
        );
        for (name, dtype, shape) in tensors {
            let _ = writeln!(card, "| `{name}` | {dtype} | {shape:?} |");
        }
        card
    }
}
