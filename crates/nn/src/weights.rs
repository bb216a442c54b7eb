//! Reading checkpoints of other frameworks: a JSON config ([`read_json`]) and a safetensors
//! weight file consumed tensor by tensor ([`WeightFile`]), F32, F16 and BF16 tensors read as
//! f32 after a shape check. The loaders of imported models (HuBERT, SpeechTokenizer) map their
//! tensor names onto Burn modules with it; every error names the file and tensor at fault.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors};
use serde::de::DeserializeOwned;

/// Errors of reading a config or weight file.
#[derive(Debug, thiserror::Error)]
pub enum WeightError {
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A JSON config file could not be parsed.
    #[error("{path} is not a valid config file: {source}")]
    ConfigParse {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A weight file is not a readable safetensors file.
    #[error("{path} is not a valid safetensors file: {reason}")]
    Safetensors {
        /// The file.
        path: PathBuf,
        /// What the parser reported.
        reason: String,
    },
    /// A tensor the model needs is absent from the weight file.
    #[error("tensor `{name}` is missing from {path}")]
    MissingTensor {
        /// The tensor name as expected in the file.
        name: String,
        /// The file.
        path: PathBuf,
    },
    /// A tensor of the weight file does not have the shape the config implies.
    #[error("tensor `{name}` in {path} has shape {found:?}, but the config implies {expected:?}")]
    ShapeMismatch {
        /// The tensor name in the file.
        name: String,
        /// The file.
        path: PathBuf,
        /// The shape implied by the config (in the file's layout).
        expected: Vec<usize>,
        /// The shape found in the file.
        found: Vec<usize>,
    },
    /// The weight file holds tensors no module consumes.
    #[error("{path} holds {} tensor(s) the model does not use: {names:?}", names.len())]
    UnexpectedTensors {
        /// The file.
        path: PathBuf,
        /// The unused tensor names.
        names: Vec<String>,
    },
    /// A tensor is stored with an element type the loader cannot convert.
    #[error("tensor `{name}` in {path} has dtype {dtype}; expected F32, F16 or BF16")]
    UnsupportedDtype {
        /// The tensor name in the file.
        name: String,
        /// The file.
        path: PathBuf,
        /// The dtype found.
        dtype: String,
    },
}

/// Reads and parses a JSON file.
///
/// # Errors
/// [`WeightError::Io`] or [`WeightError::ConfigParse`], naming the file.
pub fn read_json<T: DeserializeOwned>(path: &Path) -> Result<T, WeightError> {
    let text = std::fs::read_to_string(path).map_err(|source| WeightError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| WeightError::ConfigParse {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads the bytes of a weight file, to be parsed by [`WeightFile::parse`].
///
/// # Errors
/// [`WeightError::Io`] naming the file.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, WeightError> {
    std::fs::read(path).map_err(|source| WeightError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// A safetensors file being consumed tensor by tensor: every tensor read is marked used, and
/// [`WeightFile::check_unused`] reports the ones no module took.
///
/// Tensor names given to [`WeightFile::read`] and [`WeightFile::contains`] are relative to a
/// prefix ([`WeightFile::with_prefix`]; none by default), for checkpoints that nest the model
/// under a task head (`hubert.` in `HubertForCTC`).
pub struct WeightFile<'a> {
    tensors: SafeTensors<'a>,
    path: PathBuf,
    prefix: &'static str,
    used: BTreeSet<String>,
    device: &'a Device,
}

impl<'a> WeightFile<'a> {
    /// Parses the bytes of the safetensors file `path` (see [`read_bytes`]); tensors are made
    /// on `device`.
    ///
    /// # Errors
    /// [`WeightError::Safetensors`] naming the file when the bytes are not a safetensors file.
    pub fn parse(bytes: &'a [u8], path: &Path, device: &'a Device) -> Result<Self, WeightError> {
        let tensors = SafeTensors::deserialize(bytes).map_err(|e| WeightError::Safetensors {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Ok(Self {
            tensors,
            path: path.to_path_buf(),
            prefix: "",
            used: BTreeSet::new(),
            device,
        })
    }

    /// Reads tensor names relative to `prefix` (prepended to every name, e.g. `"hubert."`);
    /// [`WeightFile::check_unused`] then looks only at tensors under it.
    pub fn with_prefix(mut self, prefix: &'static str) -> Self {
        self.prefix = prefix;
        self
    }

    /// The names of all tensors of the file, prefix included.
    pub fn names(&self) -> Vec<&str> {
        self.tensors.names()
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of tensors read (or marked used) so far.
    pub fn used_count(&self) -> usize {
        self.used.len()
    }

    /// Marks tensor `full_name` (prefix included, as errors name it) as consumed, so that
    /// [`WeightFile::check_unused`] does not report it.
    pub fn mark_used(&mut self, full_name: String) {
        self.used.insert(full_name);
    }

    fn full_name(&self, name: &str) -> String {
        format!("{}{name}", self.prefix)
    }

    /// Whether the file holds tensor `name` (relative to the prefix).
    pub fn contains(&self, name: &str) -> bool {
        self.tensors.tensor(&self.full_name(name)).is_ok()
    }

    /// Reads tensor `name` as f32 after checking its shape, and marks it used.
    ///
    /// # Errors
    /// [`WeightError::MissingTensor`], [`WeightError::ShapeMismatch`] or
    /// [`WeightError::UnsupportedDtype`], naming the tensor (prefix included) and the file.
    pub fn read<const D: usize>(
        &mut self,
        name: &str,
        expected: [usize; D],
    ) -> Result<Tensor<D>, WeightError> {
        let full = self.full_name(name);
        let view = self
            .tensors
            .tensor(&full)
            .map_err(|_| WeightError::MissingTensor {
                name: full.clone(),
                path: self.path.clone(),
            })?;
        if view.shape() != expected {
            return Err(WeightError::ShapeMismatch {
                name: full,
                path: self.path.clone(),
                expected: expected.to_vec(),
                found: view.shape().to_vec(),
            });
        }
        let bytes = view.data();
        let values: Vec<f32> = match view.dtype() {
            Dtype::F32 => bytes
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect(),
            Dtype::BF16 => bytes
                .chunks_exact(2)
                .map(|b| f32::from_bits((u16::from_le_bytes([b[0], b[1]]) as u32) << 16))
                .collect(),
            Dtype::F16 => bytes
                .chunks_exact(2)
                .map(|b| f16_to_f32(u16::from_le_bytes([b[0], b[1]])))
                .collect(),
            other => {
                return Err(WeightError::UnsupportedDtype {
                    name: full,
                    path: self.path.clone(),
                    dtype: format!("{other:?}"),
                });
            }
        };
        self.used.insert(full);
        Ok(Tensor::from_data(
            TensorData::new(values, expected),
            self.device,
        ))
    }

    /// Fails on tensors under the prefix that were not read, except `ignored` (names relative
    /// to the prefix).
    ///
    /// # Errors
    /// [`WeightError::UnexpectedTensors`] listing them, sorted, with the file.
    pub fn check_unused(&self, ignored: &[&str]) -> Result<(), WeightError> {
        let ignored: Vec<String> = ignored.iter().map(|n| self.full_name(n)).collect();
        let mut names: Vec<String> = self
            .tensors
            .names()
            .into_iter()
            .filter(|n| n.starts_with(self.prefix))
            .filter(|n| !self.used.contains(*n) && !ignored.iter().any(|i| i == n))
            .map(str::to_owned)
            .collect();
        if names.is_empty() {
            Ok(())
        } else {
            names.sort();
            Err(WeightError::UnexpectedTensors {
                path: self.path.clone(),
                names,
            })
        }
    }
}

/// IEEE 754 half precision → single precision.
fn f16_to_f32(h: u16) -> f32 {
    let sign = ((h >> 15) as u32) << 31;
    let exp = ((h >> 10) & 0x1f) as u32;
    let mant = (h & 0x3ff) as u32;
    let bits = match (exp, mant) {
        (0, 0) => sign,
        (0, m) => {
            // Subnormal: value = m · 2^-24.
            let value = m as f32 * f32::powi(2.0, -24);
            return if sign != 0 { -value } else { value };
        }
        (0x1f, m) => sign | 0x7f80_0000 | (m << 13),
        (e, m) => sign | ((e + 112) << 23) | (m << 13),
    };
    f32::from_bits(bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f16_conversion() {
        assert_eq!(f16_to_f32(0x3c00), 1.0);
        assert_eq!(f16_to_f32(0xc000), -2.0);
        assert_eq!(f16_to_f32(0x3555), 0.333_251_95);
        assert_eq!(f16_to_f32(0x0001), 5.960_464_5e-8);
        assert!(f16_to_f32(0x7c00).is_infinite());
    }
}
