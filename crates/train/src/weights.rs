//! Model files every voxspec model shares: weights as safetensors written atomically, loaded
//! strictly (every tensor present, none left over, shapes equal — or an error naming each one
//! that differs), and a `config.json` whose `kind` says which model it describes.
//!
//! ```text
//! <dir>/config.json        { "kind": "mtp", "voxspec_version": "0.1.0", ...model-specific }
//! <dir>/model.safetensors  the weights, tensor names = module paths (`transformer.blocks.0...`)
//! ```

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleMapper, Param};
use burn::store::{ApplyError, ModuleSnapshot, SafetensorsStore};
use burn::tensor::{DType, Tensor};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Result, TrainError};

/// File name of the weights inside a model directory.
pub const WEIGHTS_FILE: &str = "model.safetensors";
/// File name of the configuration inside a model directory.
pub const CONFIG_FILE: &str = "config.json";

/// Writes `module`'s parameters to `path` through a temporary sibling and a rename, so a crash
/// never leaves a half-written file under the final name.
///
/// # Errors
/// [`TrainError::Weights`] naming the file.
pub fn save_weights<M: Module>(module: &M, path: &Path) -> Result<()> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| WEIGHTS_FILE.to_string());
    let tmp = path.with_file_name(format!(".{name}.tmp"));
    let mut store = SafetensorsStore::from_file(&tmp).overwrite(true);
    module
        .save_into(&mut store)
        .map_err(|e| weights_err(&tmp, e.to_string()))?;
    canonicalize_header(&tmp)?;
    std::fs::rename(&tmp, path).map_err(|e| TrainError::io(path, e))
}

/// Rewrites the JSON header of the safetensors file at `path` with its keys in a fixed order
/// (the writer fills `__metadata__` from a hash map, so identical weights gave different bytes
/// from run to run). Tensor data and offsets are untouched: offsets count from the end of the
/// header. The header stays padded with spaces to a multiple of 8 bytes.
///
/// # Errors
/// [`TrainError::Weights`] when the file is not safetensors; I/O errors naming the file.
pub fn canonicalize_header(path: &Path) -> Result<()> {
    use std::collections::BTreeMap;
    use std::io::Read;
    let bad = |what: &str| weights_err(path, format!("not a safetensors file: {what}"));
    // Only the header is read; the tensor data is read (and rewritten) only when the sorted
    // header has another length.
    let mut file = std::fs::File::open(path).map_err(|e| TrainError::io(path, e))?;
    let size = file.metadata().map_err(|e| TrainError::io(path, e))?.len();
    let mut len = [0u8; 8];
    file.read_exact(&mut len)
        .map_err(|_| bad("shorter than its 8-byte header length"))?;
    let n = u64::from_le_bytes(len);
    let end = usize::try_from(n)
        .ok()
        .and_then(|n| n.checked_add(8))
        .filter(|&e| e as u64 <= size)
        .ok_or_else(|| bad("header length past the end of the file"))?;
    let mut head = vec![0u8; end - 8];
    file.read_exact(&mut head)
        .map_err(|e| TrainError::io(path, e))?;
    let mut header: BTreeMap<String, serde_json::Value> =
        serde_json::from_slice(&head).map_err(|e| bad(&e.to_string()))?;
    if let Some(meta) = header.remove("__metadata__") {
        let sorted: BTreeMap<String, serde_json::Value> =
            serde_json::from_value(meta).map_err(|e| bad(&e.to_string()))?;
        let sorted = serde_json::to_value(sorted).map_err(|e| bad(&e.to_string()))?;
        header.insert("__metadata__".into(), sorted);
    }
    let mut text = serde_json::to_vec(&header).map_err(|e| bad(&e.to_string()))?;
    while text.len() % 8 != 0 {
        text.push(b' ');
    }
    if text.len() == end - 8 {
        // Same length (the usual case: only the key order changed): rewrite the header in
        // place instead of the whole file, which for a large model is hundreds of megabytes.
        use std::io::{Seek, SeekFrom, Write};
        drop(file);
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| TrainError::io(path, e))?;
        return file
            .seek(SeekFrom::Start(8))
            .and_then(|_| file.write_all(&text))
            .and_then(|()| file.sync_data())
            .map_err(|e| TrainError::io(path, e));
    }
    let mut data = Vec::new();
    file.read_to_end(&mut data)
        .map_err(|e| TrainError::io(path, e))?;
    drop(file);
    let mut out = Vec::with_capacity(8 + text.len() + data.len());
    out.extend_from_slice(&(text.len() as u64).to_le_bytes());
    out.extend_from_slice(&text);
    out.extend_from_slice(&data);
    std::fs::write(path, out).map_err(|e| TrainError::io(path, e))
}

/// Loads `path` into `module` (built from the matching config) and checks that the file and
/// the module agree exactly. Float tensors stored at a lower precision (bf16 or f16, as
/// `voxspec export --dtype bf16` writes them) are widened to f32 on load.
///
/// # Errors
/// [`TrainError::Weights`] when the file is missing or unreadable, or listing every tensor the
/// file lacks, every tensor the module does not have, and every shape or dtype that differs.
pub fn load_weights<M: Module>(module: M, path: &Path) -> Result<M> {
    if !path.is_file() {
        return Err(weights_err(path, "no such file".into()));
    }
    let mut module = module;
    // Collect every problem instead of stopping at the first kind: checked below.
    let mut store = SafetensorsStore::from_file(path)
        .validate(false)
        .allow_partial(true);
    let applied = module
        .load_from(&mut store)
        .map_err(|e| weights_err(path, e.to_string()))?;
    if applied.missing.is_empty() && applied.unused.is_empty() && applied.errors.is_empty() {
        return Ok(module.map(&mut WidenToF32));
    }
    let mut detail = String::from("the weights do not match the model's config:");
    for (name, _) in &applied.missing {
        let _ = write!(detail, "\n  missing in the file: {name}");
    }
    for name in &applied.unused {
        let _ = write!(detail, "\n  not in the model: {name}");
    }
    for error in &applied.errors {
        let _ = match error {
            ApplyError::ShapeMismatch {
                path,
                expected,
                found,
            } => write!(
                detail,
                "\n  shape of {path}: model {:?}, file {:?}",
                expected.as_slice(),
                found.as_slice()
            ),
            other => write!(detail, "\n  {other:?}"),
        };
    }
    Err(weights_err(path, detail))
}

/// Casts every float parameter that is not f32 to f32, keeping its id and `require_grad`.
struct WidenToF32;

impl ModuleMapper for WidenToF32 {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        if param.val().dtype() == DType::F32 {
            return param;
        }
        param.map(|t| {
            let trainable = t.is_require_grad();
            let t = t.cast(DType::F32).detach();
            if trainable { t.require_grad() } else { t }
        })
    }
}

fn weights_err(path: &Path, detail: String) -> TrainError {
    TrainError::Weights {
        path: path.to_path_buf(),
        message: detail,
    }
}

/// Writes `<dir>/config.json` as `{"kind": kind, "voxspec_version": .., ...config}` atomically.
///
/// # Errors
/// [`TrainError::Io`] or [`TrainError::Weights`] (serialisation) naming the file.
pub fn write_model_config<C: Serialize>(dir: &Path, kind: &str, config: &C) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| TrainError::io(dir, e))?;
    let path = dir.join(CONFIG_FILE);
    let mut value = serde_json::to_value(config).map_err(|e| weights_err(&path, e.to_string()))?;
    let Some(map) = value.as_object_mut() else {
        return Err(weights_err(
            &path,
            "a model config must be a JSON object".into(),
        ));
    };
    map.insert("kind".into(), kind.into());
    map.insert("voxspec_version".into(), env!("CARGO_PKG_VERSION").into());
    let json = serde_json::to_vec_pretty(&value).map_err(|e| weights_err(&path, e.to_string()))?;
    let tmp = dir.join(format!(".{CONFIG_FILE}.tmp"));
    std::fs::write(&tmp, json).map_err(|e| TrainError::io(&tmp, e))?;
    std::fs::rename(&tmp, &path).map_err(|e| TrainError::io(&path, e))?;
    Ok(path)
}

/// The `kind` a model directory's `config.json` names (`None` when the file is missing, not
/// JSON or has no kind): what loaders and commands dispatch on before reading the rest.
pub fn model_kind(dir: &Path) -> Option<String> {
    let bytes = std::fs::read(dir.join(CONFIG_FILE)).ok()?;
    let value: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    value.get("kind")?.as_str().map(str::to_string)
}

/// Reads `<dir>/config.json`, checks its `kind` is one of `expected`, and parses the rest as
/// `C`. Returns the kind found and the config.
///
/// # Errors
/// [`TrainError::Weights`] naming the file when it is missing, not JSON, of another kind
/// (the kind found and those expected named), or missing a field of `C`.
pub fn read_model_config<C: DeserializeOwned>(
    dir: &Path,
    expected: &[&str],
) -> Result<(String, C)> {
    let path = dir.join(CONFIG_FILE);
    if !path.is_file() {
        return Err(weights_err(
            &path,
            "no such file: not a voxspec model directory".into(),
        ));
    }
    let bytes = std::fs::read(&path).map_err(|e| TrainError::io(&path, e))?;
    let value: serde_json::Value =
        serde_json::from_slice(&bytes).map_err(|e| weights_err(&path, format!("not JSON: {e}")))?;
    let kind = value
        .get("kind")
        .and_then(|k| k.as_str())
        .unwrap_or("")
        .to_string();
    if !expected.contains(&kind.as_str()) {
        return Err(weights_err(
            &path,
            format!(
                "this is a {} checkpoint; expected {}",
                if kind.is_empty() {
                    "kind-less".to_string()
                } else {
                    format!("{kind:?}")
                },
                expected
                    .iter()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(" or ")
            ),
        ));
    }
    let config = serde_json::from_value(value)
        .map_err(|e| weights_err(&path, format!("bad config: {e}")))?;
    Ok((kind, config))
}
