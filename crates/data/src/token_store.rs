//! Token stores: codec codes `[n_q, T]` per utterance, kept in safetensors shards.
//!
//! ```text
//! <dir>/<split>-00000.safetensors   one tensor per utterance, named by its id
//! <dir>/<split>-00001.safetensors   shape [n_q, T] (streams × frames), dtype U16 (U32 if the
//! ...                               codebook has more than 65,536 entries)
//! header metadata (every shard): format = "voxspec-tokens", version = "1",
//!                                n_q, codebook_size, frame_rate (Hz)
//! ```
//! Shards are written atomically and never rewritten; an interrupted extraction resumes by
//! skipping the ids already stored ([`TokenStore::open`] then [`TokenStore::contains`]) and
//! appending new shards. The reader accepts U16, U32, I32 and I64 tensors (the last two are what
//! PyTorch writes) and checks names, ranks, stream counts, dtypes and code ranges, saying which
//! shard and tensor is wrong.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::fsutil::write_atomic;

/// The `format` metadata value of a token-store shard.
pub const FORMAT: &str = "voxspec-tokens";
/// The `version` metadata value written by this crate.
pub const VERSION: &str = "1";

/// What every shard of a store agrees on.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TokenStoreMeta {
    /// Number of code streams (RVQ layers, OPQ streams).
    pub n_q: usize,
    /// Codes are in `[0, codebook_size)`.
    pub codebook_size: u32,
    /// Frames per second of audio.
    pub frame_rate: f32,
}

/// The codes of one utterance, `[n_q, n_frames]` row-major.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Codes {
    /// Number of streams.
    pub n_q: usize,
    /// Number of frames.
    pub n_frames: usize,
    /// `n_q * n_frames` codes, stream after stream.
    pub data: Vec<u32>,
}

impl Codes {
    /// Builds codes from stream-major data; fails unless `data.len() == n_q * n_frames`.
    pub fn new(n_q: usize, n_frames: usize, data: Vec<u32>) -> Result<Self> {
        if data.len() != n_q * n_frames {
            return Err(DataError::Config {
                field: "codes",
                detail: format!(
                    "{} values do not make shape [{n_q}, {n_frames}]",
                    data.len()
                ),
            });
        }
        Ok(Codes {
            n_q,
            n_frames,
            data,
        })
    }

    /// The codes of stream `q` (`[n_frames]`).
    pub fn stream(&self, q: usize) -> &[u32] {
        &self.data[q * self.n_frames..(q + 1) * self.n_frames]
    }
}

fn store_err(path: &Path, detail: impl Into<String>) -> DataError {
    DataError::TokenStore {
        path: path.to_path_buf(),
        detail: detail.into(),
    }
}

fn shard_path(dir: &Path, split: &str, index: usize) -> PathBuf {
    dir.join(format!("{split}-{index:05}.safetensors"))
}

/// Shards of `split` in `dir`, in order.
fn list_shards(dir: &Path, split: &str) -> Result<Vec<PathBuf>> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let prefix = format!("{split}-");
    let mut shards = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| DataError::io("listing", dir, e))? {
        let path = entry.map_err(|e| DataError::io("listing", dir, e))?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if let Some(rest) = name
            .strip_prefix(&prefix)
            .and_then(|r| r.strip_suffix(".safetensors"))
            && rest.len() == 5
            && rest.bytes().all(|b| b.is_ascii_digit())
        {
            shards.push(path);
        }
    }
    shards.sort();
    Ok(shards)
}

fn parse_meta(path: &Path, meta: &Option<HashMap<String, String>>) -> Result<TokenStoreMeta> {
    let meta = meta
        .as_ref()
        .ok_or_else(|| store_err(path, "header has no metadata (not a voxspec token store?)"))?;
    let get = |key: &str| {
        meta.get(key)
            .ok_or_else(|| store_err(path, format!("metadata field {key:?} is missing")))
    };
    let format = get("format")?;
    if format != FORMAT {
        return Err(store_err(
            path,
            format!("metadata format is {format:?}, expected {FORMAT:?}"),
        ));
    }
    let version = get("version")?;
    if version != VERSION {
        return Err(store_err(
            path,
            format!("unsupported version {version:?} (this build reads {VERSION:?})"),
        ));
    }
    let num = |key: &str| -> Result<f64> {
        let v = get(key)?;
        v.parse::<f64>().map_err(|_| {
            store_err(
                path,
                format!("metadata field {key:?} is not a number: {v:?}"),
            )
        })
    };
    let n_q = num("n_q")?;
    let codebook_size = num("codebook_size")?;
    let frame_rate = num("frame_rate")?;
    if n_q < 1.0 || n_q.fract() != 0.0 || codebook_size < 1.0 || codebook_size.fract() != 0.0 {
        return Err(store_err(
            path,
            format!("n_q ({n_q}) and codebook_size ({codebook_size}) must be positive integers"),
        ));
    }
    if frame_rate <= 0.0 || !frame_rate.is_finite() {
        return Err(store_err(
            path,
            format!("frame_rate must be positive, got {frame_rate}"),
        ));
    }
    Ok(TokenStoreMeta {
        n_q: n_q as usize,
        codebook_size: codebook_size as u32,
        frame_rate: frame_rate as f32,
    })
}

fn decode_codes(
    path: &Path,
    name: &str,
    view: &TensorView<'_>,
    meta: &TokenStoreMeta,
) -> Result<Codes> {
    let shape = view.shape();
    if shape.len() != 2 {
        return Err(store_err(
            path,
            format!(
                "tensor {name:?} has shape {shape:?}; expected [n_q, T] = [{}, T]",
                meta.n_q
            ),
        ));
    }
    if shape[0] != meta.n_q {
        return Err(store_err(
            path,
            format!(
                "tensor {name:?} has {} streams (shape {shape:?}) but the store has n_q = {}",
                shape[0], meta.n_q
            ),
        ));
    }
    let bytes = view.data();
    let values: Vec<i64> = match view.dtype() {
        Dtype::U16 => bytes
            .chunks_exact(2)
            .map(|c| i64::from(u16::from_le_bytes([c[0], c[1]])))
            .collect(),
        Dtype::U32 => bytes
            .chunks_exact(4)
            .map(|c| i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        Dtype::I32 => bytes
            .chunks_exact(4)
            .map(|c| i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]])))
            .collect(),
        Dtype::I64 => bytes
            .chunks_exact(8)
            .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect(),
        other => {
            return Err(store_err(
                path,
                format!("tensor {name:?} has dtype {other:?}; codes must be U16, U32, I32 or I64"),
            ));
        }
    };
    let mut data = Vec::with_capacity(values.len());
    for (i, v) in values.into_iter().enumerate() {
        if v < 0 || v >= i64::from(meta.codebook_size) {
            return Err(store_err(
                path,
                format!(
                    "tensor {name:?} holds code {v} at [{}, {}], outside [0, {})",
                    i / shape[1].max(1),
                    i % shape[1].max(1),
                    meta.codebook_size
                ),
            ));
        }
        data.push(v as u32);
    }
    Codes::new(shape[0], shape[1], data)
}

/// A token store loaded into memory.
#[derive(Debug, Clone)]
pub struct TokenStore {
    dir: PathBuf,
    meta: TokenStoreMeta,
    codes: HashMap<String, Codes>,
}

impl TokenStore {
    /// Loads and validates every shard of `split` in `dir`. A store with no shard is an error.
    pub fn open(dir: &Path, split: &str) -> Result<Self> {
        let shards = list_shards(dir, split)?;
        if shards.is_empty() {
            return Err(store_err(
                dir,
                format!("no shards named {split}-NNNNN.safetensors"),
            ));
        }
        let mut meta: Option<(TokenStoreMeta, PathBuf)> = None;
        let mut codes = HashMap::new();
        let mut origin: HashMap<String, PathBuf> = HashMap::new();
        for shard in shards {
            let bytes = std::fs::read(&shard).map_err(|e| DataError::io("reading", &shard, e))?;
            let (_, header) = SafeTensors::read_metadata(&bytes)
                .map_err(|e| store_err(&shard, format!("not a safetensors file: {e}")))?;
            let m = parse_meta(&shard, header.metadata())?;
            match &meta {
                Some((first, first_path)) if *first != m => {
                    return Err(store_err(
                        &shard,
                        format!(
                            "metadata {m:?} disagrees with {first:?} of {}",
                            first_path.display()
                        ),
                    ));
                }
                Some(_) => {}
                None => meta = Some((m, shard.clone())),
            }
            let st = SafeTensors::deserialize(&bytes)
                .map_err(|e| store_err(&shard, format!("not a safetensors file: {e}")))?;
            for (name, view) in st.tensors() {
                if name.is_empty() {
                    return Err(store_err(&shard, "a tensor has an empty name"));
                }
                let c = decode_codes(&shard, &name, &view, &m)?;
                if let Some(prev) = origin.get(&name) {
                    return Err(store_err(
                        &shard,
                        format!("utterance {name:?} is also stored in {}", prev.display()),
                    ));
                }
                origin.insert(name.clone(), shard.clone());
                codes.insert(name, c);
            }
        }
        let Some((meta, _)) = meta else {
            return Err(store_err(dir, "no shards"));
        };
        Ok(TokenStore {
            dir: dir.to_path_buf(),
            meta,
            codes,
        })
    }

    /// The store's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Stream count, codebook size and frame rate.
    pub fn meta(&self) -> TokenStoreMeta {
        self.meta
    }

    /// Number of utterances.
    pub fn len(&self) -> usize {
        self.codes.len()
    }

    /// True when the store holds no utterance.
    pub fn is_empty(&self) -> bool {
        self.codes.is_empty()
    }

    /// Whether `id` is stored.
    pub fn contains(&self, id: &str) -> bool {
        self.codes.contains_key(id)
    }

    /// The codes of `id`.
    pub fn get(&self, id: &str) -> Option<&Codes> {
        self.codes.get(id)
    }

    /// All ids, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.codes.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }
}

/// Writes a token store shard by shard. Call [`TokenStoreWriter::finish`] to flush the last one.
pub struct TokenStoreWriter {
    dir: PathBuf,
    split: String,
    meta: TokenStoreMeta,
    max_frames_per_shard: usize,
    next_shard: usize,
    pending: Vec<(String, Codes)>,
    pending_frames: usize,
}

impl TokenStoreWriter {
    /// Starts writing shards of `split` into `dir`, after any shards already there (so an
    /// interrupted run appends instead of overwriting). A shard is flushed once it holds
    /// `max_frames_per_shard` frames.
    pub fn new(
        dir: &Path,
        split: &str,
        meta: TokenStoreMeta,
        max_frames_per_shard: usize,
    ) -> Result<Self> {
        if meta.n_q == 0
            || meta.codebook_size == 0
            || !meta.frame_rate.is_finite()
            || meta.frame_rate <= 0.0
        {
            return Err(DataError::Config {
                field: "token store meta",
                detail: format!("n_q, codebook_size and frame_rate must be positive: {meta:?}"),
            });
        }
        std::fs::create_dir_all(dir).map_err(|e| DataError::io("creating directory", dir, e))?;
        let next_shard = list_shards(dir, split)?.len();
        Ok(TokenStoreWriter {
            dir: dir.to_path_buf(),
            split: split.to_string(),
            meta,
            max_frames_per_shard: max_frames_per_shard.max(1),
            next_shard,
            pending: Vec::new(),
            pending_frames: 0,
        })
    }

    /// Adds one utterance; fails if its stream count or codes do not fit the store.
    pub fn push(&mut self, id: &str, codes: Codes) -> Result<()> {
        let path = shard_path(&self.dir, &self.split, self.next_shard);
        if id.is_empty() {
            return Err(store_err(&path, "utterance id is empty"));
        }
        if codes.n_q != self.meta.n_q {
            return Err(store_err(
                &path,
                format!(
                    "{id:?} has {} streams; the store has n_q = {}",
                    codes.n_q, self.meta.n_q
                ),
            ));
        }
        if let Some(bad) = codes.data.iter().find(|&&c| c >= self.meta.codebook_size) {
            return Err(store_err(
                &path,
                format!(
                    "{id:?} holds code {bad} >= codebook_size {}",
                    self.meta.codebook_size
                ),
            ));
        }
        self.pending_frames += codes.n_frames;
        self.pending.push((id.to_string(), codes));
        if self.pending_frames >= self.max_frames_per_shard {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let path = shard_path(&self.dir, &self.split, self.next_shard);
        let wide = self.meta.codebook_size > u32::from(u16::MAX) + 1;
        let buffers: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .pending
            .drain(..)
            .map(|(id, c)| {
                let bytes: Vec<u8> = if wide {
                    c.data.iter().flat_map(|v| v.to_le_bytes()).collect()
                } else {
                    c.data
                        .iter()
                        .flat_map(|&v| (v as u16).to_le_bytes())
                        .collect()
                };
                (id, vec![c.n_q, c.n_frames], bytes)
            })
            .collect();
        let dtype = if wide { Dtype::U32 } else { Dtype::U16 };
        let mut views = Vec::with_capacity(buffers.len());
        for (id, shape, bytes) in &buffers {
            let view = TensorView::new(dtype, shape.clone(), bytes)
                .map_err(|e| store_err(&path, format!("tensor {id:?}: {e}")))?;
            views.push((id.as_str(), view));
        }
        let metadata = HashMap::from([
            ("format".to_string(), FORMAT.to_string()),
            ("version".to_string(), VERSION.to_string()),
            ("n_q".to_string(), self.meta.n_q.to_string()),
            (
                "codebook_size".to_string(),
                self.meta.codebook_size.to_string(),
            ),
            ("frame_rate".to_string(), self.meta.frame_rate.to_string()),
        ]);
        let bytes = safetensors::serialize(views, Some(metadata))
            .map_err(|e| store_err(&path, e.to_string()))?;
        write_atomic(&path, &bytes)?;
        tracing::debug!(path = %path.display(), "wrote token shard");
        self.next_shard += 1;
        self.pending_frames = 0;
        Ok(())
    }

    /// Writes the last, partly filled shard.
    pub fn finish(mut self) -> Result<()> {
        self.flush()
    }
}

/// Ids already in the token store of `split` under `dir` (none when there is no store there),
/// which must hold codes of `meta`'s kind: what a resumed extraction skips.
///
/// # Errors
/// [`DataError::TokenStore`] when the store there holds codes of another kind.
pub fn stored_ids(dir: &Path, split: &str, meta: TokenStoreMeta) -> Result<HashSet<String>> {
    match TokenStore::open(dir, split) {
        Ok(store) if store.meta() != meta => Err(DataError::TokenStore {
            path: dir.to_path_buf(),
            detail: format!(
                "the {split} store holds {:?}, this codec writes {meta:?}; use another --out",
                store.meta()
            ),
        }),
        Ok(store) => Ok(store.ids().into_iter().map(String::from).collect()),
        Err(_) => Ok(HashSet::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> TokenStoreMeta {
        TokenStoreMeta {
            n_q: 2,
            codebook_size: 1024,
            frame_rate: 50.0,
        }
    }

    fn codes(t: usize, seed: u32) -> Codes {
        Codes::new(
            2,
            t,
            (0..2 * t as u32).map(|i| (i * 37 + seed) % 1024).collect(),
        )
        .unwrap()
    }

    #[test]
    fn written_codes_read_back_across_shards_and_resume() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = TokenStoreWriter::new(dir.path(), "train", meta(), 10).unwrap();
        w.push("a", codes(7, 1)).unwrap();
        w.push("b", codes(5, 2)).unwrap(); // 12 frames ≥ 10: shard 0 flushed
        w.push("c", codes(3, 3)).unwrap();
        w.finish().unwrap();
        // An interrupted run resumes by appending a new shard.
        let mut w = TokenStoreWriter::new(dir.path(), "train", meta(), 10).unwrap();
        w.push("d", codes(4, 4)).unwrap();
        w.finish().unwrap();
        assert_eq!(list_shards(dir.path(), "train").unwrap().len(), 3);

        let store = TokenStore::open(dir.path(), "train").unwrap();
        assert_eq!(store.ids(), vec!["a", "b", "c", "d"]);
        assert_eq!(store.get("b"), Some(&codes(5, 2)));
        assert_eq!(store.get("d").unwrap().stream(1), codes(4, 4).stream(1));
        assert_eq!(store.meta(), meta());
    }

    fn write_raw(
        path: &Path,
        name: &str,
        dtype: Dtype,
        shape: Vec<usize>,
        bytes: &[u8],
        md: &[(&str, &str)],
    ) {
        let md: HashMap<String, String> = md
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let view = TensorView::new(dtype, shape, bytes).unwrap();
        let out = safetensors::serialize([(name, view)], Some(md)).unwrap();
        std::fs::write(path, out).unwrap();
    }

    const GOOD_MD: [(&str, &str); 5] = [
        ("format", FORMAT),
        ("version", VERSION),
        ("n_q", "2"),
        ("codebook_size", "1024"),
        ("frame_rate", "50"),
    ];

    fn open_err(dir: &Path) -> String {
        TokenStore::open(dir, "train").unwrap_err().to_string()
    }

    #[test]
    fn reader_names_what_is_wrong() {
        let dir = tempfile::tempdir().unwrap();
        let shard = dir.path().join("train-00000.safetensors");
        let i64s = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();

        // PyTorch-style int64 codes are accepted.
        write_raw(
            &shard,
            "u1",
            Dtype::I64,
            vec![2, 2],
            &i64s(&[1, 2, 3, 4]),
            &GOOD_MD,
        );
        assert_eq!(
            TokenStore::open(dir.path(), "train")
                .unwrap()
                .get("u1")
                .unwrap()
                .data,
            vec![1, 2, 3, 4]
        );

        write_raw(
            &shard,
            "u1",
            Dtype::I64,
            vec![3, 1],
            &i64s(&[1, 2, 3]),
            &GOOD_MD,
        );
        let e = open_err(dir.path());
        assert!(
            e.contains("train-00000.safetensors")
                && e.contains("\"u1\"")
                && e.contains("3 streams"),
            "{e}"
        );

        write_raw(
            &shard,
            "u1",
            Dtype::I64,
            vec![4],
            &i64s(&[1, 2, 3, 4]),
            &GOOD_MD,
        );
        assert!(open_err(dir.path()).contains("expected [n_q, T]"));

        write_raw(&shard, "u1", Dtype::F32, vec![2, 1], &[0u8; 8], &GOOD_MD);
        assert!(open_err(dir.path()).contains("dtype F32"));

        write_raw(
            &shard,
            "u1",
            Dtype::I64,
            vec![2, 1],
            &i64s(&[5, 1024]),
            &GOOD_MD,
        );
        assert!(open_err(dir.path()).contains("code 1024 at [1, 0]"));

        write_raw(
            &shard,
            "u1",
            Dtype::I64,
            vec![2, 1],
            &i64s(&[5, 6]),
            &GOOD_MD[1..],
        );
        assert!(open_err(dir.path()).contains("\"format\" is missing"));

        std::fs::write(&shard, b"garbage").unwrap();
        assert!(open_err(dir.path()).contains("not a safetensors file"));

        std::fs::remove_file(&shard).unwrap();
        assert!(open_err(dir.path()).contains("no shards"));
    }

    #[test]
    fn duplicates_and_mismatched_shards_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = TokenStoreWriter::new(dir.path(), "train", meta(), 1).unwrap();
        w.push("a", codes(2, 0)).unwrap();
        w.push("a", codes(2, 1)).unwrap();
        w.finish().unwrap();
        assert!(open_err(dir.path()).contains("also stored in"));

        let dir = tempfile::tempdir().unwrap();
        let mut w = TokenStoreWriter::new(dir.path(), "train", meta(), 1).unwrap();
        w.push("a", codes(2, 0)).unwrap();
        w.finish().unwrap();
        let other = TokenStoreMeta {
            codebook_size: 2048,
            ..meta()
        };
        let mut w = TokenStoreWriter::new(dir.path(), "train", other, 1).unwrap();
        w.push("b", codes(2, 0)).unwrap();
        w.finish().unwrap();
        assert!(open_err(dir.path()).contains("disagrees"));

        let mut w = TokenStoreWriter::new(dir.path(), "dev", meta(), 1).unwrap();
        assert!(w.push("x", Codes::new(1, 2, vec![0, 0]).unwrap()).is_err());
        assert!(
            w.push("x", Codes::new(2, 1, vec![0, 4096]).unwrap())
                .is_err()
        );
    }
}
