//! Feature stores: a semantic teacher's frame features of a corpus, kept in safetensors shards
//! (the offline distillation target of a codec's first quantizer).
//!
//! ```text
//! <dir>/<split>-00000.safetensors   one F32 tensor per utterance, named by its id,
//! <dir>/<split>-00001.safetensors   shape [T, D] (frames × feature dimension)
//! ...
//! header metadata (every shard): format = "voxspec-features", version = "1",
//!   dim, frame_rate (Hz), sample_rate (Hz of the audio the teacher read),
//!   teacher (kind: "ctc", "hubert", ...), layer ("4", "mean", ...)
//! ```
//! Shards are written atomically and never rewritten. An interrupted extraction resumes by
//! opening the writer again: finished shards are kept, [`FeatureStoreWriter::contains`] tells
//! which ids are done, and new shards are appended. A writer refuses a directory whose shards
//! were made with other settings (another teacher, layer, dimension or rate). Only headers are
//! read to index a store; a shard's data is read when one of its utterances is asked for.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::io::Read;
use std::path::{Path, PathBuf};

use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use serde::{Deserialize, Serialize};
use voxspec_nn::weights::{WeightError, read_bytes};

use crate::error::TeacherError;

/// The `format` metadata value of a feature-store shard.
pub const FORMAT: &str = "voxspec-features";
/// The `version` metadata value written by this crate.
pub const VERSION: &str = "1";

/// What every shard of a store agrees on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeatureStoreMeta {
    /// Feature dimension `D`.
    pub dim: usize,
    /// Frames per second.
    pub frame_rate: f32,
    /// Sample rate of the audio the teacher read.
    pub sample_rate: u32,
    /// Teacher kind (`ctc`, `hubert`, ...).
    pub teacher: String,
    /// Which hidden state(s): an index, or `mean`.
    pub layer: String,
}

impl FeatureStoreMeta {
    fn to_map(&self) -> HashMap<String, String> {
        HashMap::from([
            ("format".into(), FORMAT.into()),
            ("version".into(), VERSION.into()),
            ("dim".into(), self.dim.to_string()),
            ("frame_rate".into(), self.frame_rate.to_string()),
            ("sample_rate".into(), self.sample_rate.to_string()),
            ("teacher".into(), self.teacher.clone()),
            ("layer".into(), self.layer.clone()),
        ])
    }

    fn from_map(path: &Path, map: &HashMap<String, String>) -> Result<Self, TeacherError> {
        let get = |key: &str| {
            map.get(key)
                .ok_or_else(|| store_err(path, format!("metadata field {key:?} is missing")))
        };
        if get("format")? != FORMAT {
            return Err(store_err(
                path,
                format!(
                    "metadata format is {:?}, expected {FORMAT:?}",
                    get("format")?
                ),
            ));
        }
        if get("version")? != VERSION {
            return Err(store_err(
                path,
                format!(
                    "unsupported version {:?} (this build reads {VERSION:?})",
                    get("version")?
                ),
            ));
        }
        let parse_err = |key: &str, v: &str| {
            store_err(path, format!("metadata {key:?} = {v:?} is not a number"))
        };
        let dim = get("dim")?;
        let frame_rate = get("frame_rate")?;
        let sample_rate = get("sample_rate")?;
        Ok(Self {
            dim: dim.parse().map_err(|_| parse_err("dim", dim))?,
            frame_rate: frame_rate
                .parse()
                .map_err(|_| parse_err("frame_rate", frame_rate))?,
            sample_rate: sample_rate
                .parse()
                .map_err(|_| parse_err("sample_rate", sample_rate))?,
            teacher: get("teacher")?.clone(),
            layer: get("layer")?.clone(),
        })
    }
}

/// The features of one utterance, `[frames, dim]` row-major.
#[derive(Debug, Clone, PartialEq)]
pub struct Features {
    /// Number of frames.
    pub frames: usize,
    /// Feature dimension.
    pub dim: usize,
    /// `frames * dim` values, frame after frame.
    pub data: Vec<f32>,
}

fn store_err(path: &Path, reason: impl Into<String>) -> TeacherError {
    TeacherError::FeatureStore {
        path: path.to_path_buf(),
        reason: reason.into(),
    }
}

fn shard_path(dir: &Path, split: &str, index: usize) -> PathBuf {
    dir.join(format!("{split}-{index:05}.safetensors"))
}

/// Shards of `split` in `dir`, in order.
fn list_shards(dir: &Path, split: &str) -> Result<Vec<PathBuf>, TeacherError> {
    if !dir.is_dir() {
        return Ok(Vec::new());
    }
    let io = |source| WeightError::Io {
        path: dir.to_path_buf(),
        source,
    };
    let prefix = format!("{split}-");
    let mut shards = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let path = entry.map_err(io)?.path();
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

/// The header of a safetensors file, read without its data: metadata and tensor names.
fn read_header(path: &Path) -> Result<(FeatureStoreMeta, Vec<String>), TeacherError> {
    let io = |source| WeightError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = std::fs::File::open(path).map_err(io)?;
    let mut len = [0u8; 8];
    file.read_exact(&mut len).map_err(io)?;
    let len = u64::from_le_bytes(len);
    if len > 100 << 20 {
        return Err(store_err(
            path,
            format!("header of {len} bytes is not plausible"),
        ));
    }
    let mut header = vec![0u8; len as usize];
    file.read_exact(&mut header).map_err(io)?;
    let header: BTreeMap<String, serde_json::Value> = serde_json::from_slice(&header)
        .map_err(|e| store_err(path, format!("header is not valid JSON: {e}")))?;
    let meta: HashMap<String, String> = header
        .get("__metadata__")
        .and_then(|m| serde_json::from_value(m.clone()).ok())
        .ok_or_else(|| {
            store_err(
                path,
                "header has no metadata (not a voxspec feature store?)",
            )
        })?;
    let meta = FeatureStoreMeta::from_map(path, &meta)?;
    let ids = header
        .keys()
        .filter(|k| k.as_str() != "__metadata__")
        .cloned()
        .collect();
    Ok((meta, ids))
}

/// Shards in order, each with the ids it holds.
type ShardIndex = Vec<(PathBuf, Vec<String>)>;

/// Checks that the shards of `split` agree with each other (and with `expected`, if given);
/// returns the shards with their ids, and the store's metadata.
fn index(
    dir: &Path,
    split: &str,
    expected: Option<&FeatureStoreMeta>,
) -> Result<(Option<FeatureStoreMeta>, ShardIndex), TeacherError> {
    let mut meta: Option<FeatureStoreMeta> = expected.cloned();
    let mut shards = Vec::new();
    let mut seen = HashSet::new();
    for shard in list_shards(dir, split)? {
        let (m, ids) = read_header(&shard)?;
        match &meta {
            Some(first) if *first != m => {
                return Err(store_err(
                    &shard,
                    format!("metadata {m:?} disagrees with the store's {first:?}"),
                ));
            }
            Some(_) => {}
            None => meta = Some(m),
        }
        for id in &ids {
            if !seen.insert(id.clone()) {
                return Err(store_err(
                    &shard,
                    format!("utterance {id:?} is stored twice"),
                ));
            }
        }
        shards.push((shard, ids));
    }
    Ok((meta, shards))
}

/// Reads the features of a store on demand.
#[derive(Debug, Clone)]
pub struct FeatureStoreReader {
    meta: FeatureStoreMeta,
    location: HashMap<String, PathBuf>,
}

impl FeatureStoreReader {
    /// Indexes the shards of `split` in `dir` (headers only). A store with no shard is an error.
    ///
    /// # Errors
    /// [`TeacherError::FeatureStore`] naming the shard that is malformed or disagrees.
    pub fn open(dir: &Path, split: &str) -> Result<Self, TeacherError> {
        let (meta, shards) = index(dir, split, None)?;
        let meta = meta
            .ok_or_else(|| store_err(dir, format!("no shards named {split}-NNNNN.safetensors")))?;
        let location = shards
            .into_iter()
            .flat_map(|(path, ids)| ids.into_iter().map(move |id| (id, path.clone())))
            .collect();
        Ok(Self { meta, location })
    }

    /// The store's settings.
    pub fn meta(&self) -> &FeatureStoreMeta {
        &self.meta
    }

    /// Number of utterances.
    pub fn len(&self) -> usize {
        self.location.len()
    }

    /// Whether the store is empty.
    pub fn is_empty(&self) -> bool {
        self.location.is_empty()
    }

    /// All ids, sorted.
    pub fn ids(&self) -> Vec<&str> {
        let mut ids: Vec<&str> = self.location.keys().map(String::as_str).collect();
        ids.sort_unstable();
        ids
    }

    /// The features of `id` (reads its shard), or `None` if it is not stored.
    ///
    /// # Errors
    /// [`TeacherError::FeatureStore`] when the tensor is not F32 `[T, dim]`.
    pub fn get(&self, id: &str) -> Result<Option<Features>, TeacherError> {
        let Some(path) = self.location.get(id) else {
            return Ok(None);
        };
        let bytes = read_bytes(path)?;
        let st = SafeTensors::deserialize(&bytes)
            .map_err(|e| store_err(path, format!("not a safetensors file: {e}")))?;
        let view = st
            .tensor(id)
            .map_err(|e| store_err(path, format!("tensor {id:?}: {e}")))?;
        let shape = view.shape();
        if view.dtype() != Dtype::F32 || shape.len() != 2 || shape[1] != self.meta.dim {
            return Err(store_err(
                path,
                format!(
                    "tensor {id:?} is {:?} {shape:?}; expected F32 [T, {}]",
                    view.dtype(),
                    self.meta.dim
                ),
            ));
        }
        let data = view
            .data()
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Some(Features {
            frames: shape[0],
            dim: shape[1],
            data,
        }))
    }
}

/// Writes a feature store shard by shard; call [`FeatureStoreWriter::finish`] at the end.
#[derive(Debug)]
pub struct FeatureStoreWriter {
    dir: PathBuf,
    split: String,
    meta: FeatureStoreMeta,
    max_frames_per_shard: usize,
    next_shard: usize,
    done: HashSet<String>,
    pending: Vec<(String, Features)>,
    pending_frames: usize,
}

impl FeatureStoreWriter {
    /// Starts (or resumes) writing shards of `split` into `dir`: shards already there are kept
    /// and their ids reported by [`FeatureStoreWriter::contains`]; a shard is flushed once it
    /// holds `max_frames_per_shard` frames.
    ///
    /// # Errors
    /// [`TeacherError::FeatureStore`] when existing shards were written with other settings.
    pub fn new(
        dir: &Path,
        split: &str,
        meta: FeatureStoreMeta,
        max_frames_per_shard: usize,
    ) -> Result<Self, TeacherError> {
        if meta.dim == 0 || !(meta.frame_rate.is_finite() && meta.frame_rate > 0.0) {
            return Err(store_err(
                dir,
                format!("dim and frame_rate must be positive: {meta:?}"),
            ));
        }
        std::fs::create_dir_all(dir).map_err(|source| WeightError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let (_, shards) = index(dir, split, Some(&meta))?;
        Ok(Self {
            dir: dir.to_path_buf(),
            split: split.into(),
            meta,
            max_frames_per_shard: max_frames_per_shard.max(1),
            next_shard: shards.len(),
            done: shards.into_iter().flat_map(|(_, ids)| ids).collect(),
            pending: Vec::new(),
            pending_frames: 0,
        })
    }

    /// Whether `id` is already stored (in a finished shard) or pending.
    pub fn contains(&self, id: &str) -> bool {
        self.done.contains(id)
    }

    /// Utterances stored or pending.
    pub fn len(&self) -> usize {
        self.done.len()
    }

    /// Whether nothing is stored or pending.
    pub fn is_empty(&self) -> bool {
        self.done.is_empty()
    }

    /// Adds one utterance.
    ///
    /// # Errors
    /// [`TeacherError::FeatureStore`] for an empty or duplicate id, or features of another
    /// dimension; I/O errors when a full shard is written.
    pub fn push(&mut self, id: &str, features: Features) -> Result<(), TeacherError> {
        let path = shard_path(&self.dir, &self.split, self.next_shard);
        if id.is_empty() || id == "__metadata__" {
            return Err(store_err(&path, format!("invalid utterance id {id:?}")));
        }
        if self.done.contains(id) {
            return Err(store_err(
                &path,
                format!("utterance {id:?} is already stored"),
            ));
        }
        if features.dim != self.meta.dim || features.data.len() != features.frames * features.dim {
            return Err(store_err(
                &path,
                format!(
                    "{id:?} has {} values as [{}, {}]; the store has dim {}",
                    features.data.len(),
                    features.frames,
                    features.dim,
                    self.meta.dim
                ),
            ));
        }
        self.done.insert(id.to_string());
        self.pending_frames += features.frames;
        self.pending.push((id.to_string(), features));
        if self.pending_frames >= self.max_frames_per_shard {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TeacherError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let path = shard_path(&self.dir, &self.split, self.next_shard);
        let buffers: Vec<(String, Vec<usize>, Vec<u8>)> = self
            .pending
            .drain(..)
            .map(|(id, f)| {
                let bytes = f.data.iter().flat_map(|v| v.to_le_bytes()).collect();
                (id, vec![f.frames, f.dim], bytes)
            })
            .collect();
        let mut views = Vec::with_capacity(buffers.len());
        for (id, shape, bytes) in &buffers {
            let view = TensorView::new(Dtype::F32, shape.clone(), bytes)
                .map_err(|e| store_err(&path, format!("tensor {id:?}: {e}")))?;
            views.push((id.as_str(), view));
        }
        let bytes = safetensors::serialize(views, Some(self.meta.to_map()))
            .map_err(|e| store_err(&path, e.to_string()))?;
        voxspec_data::write_atomic(&path, &bytes)?;
        tracing::debug!(path = %path.display(), "wrote feature shard");
        self.next_shard += 1;
        self.pending_frames = 0;
        Ok(())
    }

    /// Writes the last, partly filled shard.
    ///
    /// # Errors
    /// I/O errors naming the shard.
    pub fn finish(mut self) -> Result<(), TeacherError> {
        self.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> FeatureStoreMeta {
        FeatureStoreMeta {
            dim: 3,
            frame_rate: 50.0,
            sample_rate: 16000,
            teacher: "ctc".into(),
            layer: "2".into(),
        }
    }

    fn feats(frames: usize, seed: f32) -> Features {
        Features {
            frames,
            dim: 3,
            data: (0..frames * 3).map(|i| seed + i as f32 * 0.5).collect(),
        }
    }

    #[test]
    fn write_read_roundtrip_across_shards_and_resume() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = FeatureStoreWriter::new(dir.path(), "train", meta(), 10).unwrap();
        w.push("a", feats(6, 0.0)).unwrap();
        w.push("b", feats(6, 1.0)).unwrap(); // 12 frames: shard 0 flushed
        w.push("c", feats(2, 2.0)).unwrap(); // pending, lost if not finished
        drop(w);
        let mut w = FeatureStoreWriter::new(dir.path(), "train", meta(), 10).unwrap();
        assert!(w.contains("a") && w.contains("b") && !w.contains("c"));
        w.push("c", feats(2, 2.0)).unwrap();
        w.finish().unwrap();
        let r = FeatureStoreReader::open(dir.path(), "train").unwrap();
        assert_eq!(r.ids(), vec!["a", "b", "c"]);
        assert_eq!(r.meta(), &meta());
        assert_eq!(r.get("b").unwrap().unwrap(), feats(6, 1.0));
        assert_eq!(r.get("c").unwrap().unwrap(), feats(2, 2.0));
        assert!(r.get("zzz").unwrap().is_none());
        assert!(list_shards(dir.path(), "train").unwrap().len() == 2);
    }

    #[test]
    fn other_settings_and_bad_input_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let mut w = FeatureStoreWriter::new(dir.path(), "dev", meta(), 1).unwrap();
        w.push("a", feats(1, 0.0)).unwrap();
        assert!(w.push("a", feats(1, 0.0)).is_err());
        let wrong = Features {
            frames: 1,
            dim: 4,
            data: vec![0.0; 4],
        };
        assert!(w.push("b", wrong).is_err());
        w.finish().unwrap();
        let other = FeatureStoreMeta {
            layer: "mean".into(),
            ..meta()
        };
        let err = FeatureStoreWriter::new(dir.path(), "dev", other, 1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("dev-00000.safetensors") && err.contains("mean"),
            "{err}"
        );
        assert!(FeatureStoreReader::open(dir.path(), "test").is_err());
    }
}
