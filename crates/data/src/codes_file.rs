//! The codes file: one recording's codec codes as a safetensors file, what `voxspec codec
//! encode` writes and `codec decode` reads.
//!
//! ```text
//! tensor "codes": I64 [n_q, frames], stream after stream (I32 is read too)
//! metadata:       format = "voxspec-codes", and what the codec records: sample_rate,
//!                 frame_rate, hop, codebook_size, samples (the encoded length), kind, ...
//! ```

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::TensorView;
use safetensors::{Dtype, SafeTensors};

use crate::error::{DataError, Result};
use crate::fsutil::write_atomic;
use crate::token_store::Codes;

/// The `format` metadata value of a codes file.
pub const CODES_FORMAT: &str = "voxspec-codes";
/// Name of the codes tensor.
pub const CODES_TENSOR: &str = "codes";

/// What a codes file holds. The codes are as stored: not checked against any codebook.
#[derive(Debug, Clone, PartialEq)]
pub struct CodesFile {
    /// Streams (RVQ layers).
    pub n_q: usize,
    /// Frames.
    pub n_frames: usize,
    /// `n_q * n_frames` codes, stream after stream.
    pub data: Vec<i64>,
    /// The file's metadata (`format` included).
    pub metadata: HashMap<String, String>,
}

impl CodesFile {
    /// The encoded length in samples, when the file records it (`samples`).
    pub fn samples(&self) -> Option<usize> {
        self.metadata.get("samples").and_then(|s| s.parse().ok())
    }
}

fn malformed(path: &Path, detail: impl Into<String>) -> DataError {
    DataError::CodesFile {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

/// Writes `codes` (`[n_q, frames]`) to `path` as one I64 tensor `codes` with `metadata`
/// (`format` set to [`CODES_FORMAT`]), atomically.
///
/// # Errors
/// [`DataError::CodesFile`] when the tensor cannot be serialised, [`DataError::Io`] when the
/// file cannot be written.
pub fn write_codes_file(
    path: &Path,
    codes: &Codes,
    mut metadata: HashMap<String, String>,
) -> Result<()> {
    let bytes: Vec<u8> = codes
        .data
        .iter()
        .flat_map(|&c| i64::from(c).to_le_bytes())
        .collect();
    let view = TensorView::new(Dtype::I64, vec![codes.n_q, codes.n_frames], &bytes)
        .map_err(|e| malformed(path, format!("building the codes tensor: {e}")))?;
    metadata.insert("format".to_string(), CODES_FORMAT.to_string());
    let file = safetensors::serialize([(CODES_TENSOR, view)], Some(metadata))
        .map_err(|e| malformed(path, format!("serialising the codes: {e}")))?;
    write_atomic(path, &file)
}

/// Reads a codes file.
///
/// # Errors
/// [`DataError::Io`] when it cannot be read; [`DataError::CodesFile`], naming the file, when it
/// is not a safetensors file, has no `codes` tensor, or that tensor is not a 2-d I64 or I32
/// tensor.
pub fn read_codes_file(path: &Path) -> Result<CodesFile> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io("reading", path, e))?;
    let st = SafeTensors::deserialize(&bytes)
        .map_err(|e| malformed(path, format!("not a safetensors codes file: {e}")))?;
    let (_, header) = SafeTensors::read_metadata(&bytes)
        .map_err(|e| malformed(path, format!("not a safetensors codes file: {e}")))?;
    let metadata = header.metadata().clone().unwrap_or_default();
    let t = st
        .tensor(CODES_TENSOR)
        .map_err(|_| malformed(path, format!("no tensor \"{CODES_TENSOR}\"")))?;
    let shape = t.shape();
    let [n_q, n_frames] = *shape else {
        return Err(malformed(
            path,
            format!("codes must be [n_q, frames], got {shape:?}"),
        ));
    };
    let data: Vec<i64> = match t.dtype() {
        Dtype::I64 => t
            .data()
            .chunks_exact(8)
            .map(|b| i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
            .collect(),
        Dtype::I32 => t
            .data()
            .chunks_exact(4)
            .map(|b| i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
            .collect(),
        other => {
            return Err(malformed(
                path,
                format!("codes must be I64 or I32, got {other:?}"),
            ));
        }
    };
    Ok(CodesFile {
        n_q,
        n_frames,
        data,
        metadata,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_and_metadata_survive_a_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.safetensors");
        let codes = Codes::new(2, 3, vec![0, 1, 2, 30, 31, 4_000_000_000]).unwrap();
        let meta = HashMap::from([("samples".to_string(), "950".to_string())]);
        write_codes_file(&path, &codes, meta).unwrap();
        let file = read_codes_file(&path).unwrap();
        assert_eq!((file.n_q, file.n_frames), (2, 3));
        assert_eq!(file.data, vec![0, 1, 2, 30, 31, 4_000_000_000]);
        assert_eq!(file.samples(), Some(950));
        assert_eq!(file.metadata["format"], CODES_FORMAT);
    }

    #[test]
    fn i32_codes_are_read_too() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.safetensors");
        let bytes: Vec<u8> = [5i32, -1].iter().flat_map(|c| c.to_le_bytes()).collect();
        let view = TensorView::new(Dtype::I32, vec![1, 2], &bytes).unwrap();
        std::fs::write(
            &path,
            safetensors::serialize([("codes", view)], None).unwrap(),
        )
        .unwrap();
        let file = read_codes_file(&path).unwrap();
        assert_eq!(file.data, vec![5, -1]);
        assert_eq!(file.samples(), None);
    }

    #[test]
    fn a_malformed_file_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let junk = dir.path().join("junk.safetensors");
        std::fs::write(&junk, "this is text").unwrap();
        let e = read_codes_file(&junk).unwrap_err().to_string();
        assert!(e.contains("junk.safetensors"), "{e}");
        assert!(e.contains("not a safetensors codes file"), "{e}");

        let other = dir.path().join("other.safetensors");
        let bytes = [0u8; 8];
        let view = TensorView::new(Dtype::I64, vec![1], &bytes).unwrap();
        std::fs::write(&other, safetensors::serialize([("x", view)], None).unwrap()).unwrap();
        let e = read_codes_file(&other).unwrap_err().to_string();
        assert!(
            e.contains("other.safetensors") && e.contains("no tensor"),
            "{e}"
        );

        let flat = dir.path().join("flat.safetensors");
        let view = TensorView::new(Dtype::I64, vec![1], &bytes).unwrap();
        std::fs::write(
            &flat,
            safetensors::serialize([("codes", view)], None).unwrap(),
        )
        .unwrap();
        let e = read_codes_file(&flat).unwrap_err().to_string();
        assert!(
            e.contains("flat.safetensors") && e.contains("[n_q, frames]"),
            "{e}"
        );

        let missing = dir.path().join("missing.safetensors");
        let e = read_codes_file(&missing).unwrap_err().to_string();
        assert!(e.contains("missing.safetensors"), "{e}");
    }
}
