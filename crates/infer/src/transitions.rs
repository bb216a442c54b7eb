//! [`Transitions`]: the stream-0 token transition matrix `Q(a, b) = P(next = b | current = a)`
//! that Viterbi path selection scores neighbouring MTP tokens with (Nguyen et al. 2025, "Accelerating Codec-based Speech Synthesis with
//! Multi-Token Prediction and Speculative Decoding", §III-C: "the
//! transition matrix derived from the dataset").
//!
//! Built from training code sequences by counting adjacent pairs with add-α smoothing:
//!
//! ```text
//! Q(a, b) = (c(a, b) + α) / (c(a) + α · V)        c(a) = Σ_b c(a, b); unseen rows are uniform
//! ```
//!
//! Two layouts, chosen by the vocabulary size:
//! - **dense** (`V ≤ dense_max_vocab`): `log Q` as `[V, V]` f32 (1024 codes: 4 MiB);
//! - **sparse** (larger `V`): per row the `top_k` most frequent successors with their exact
//!   smoothed `log Q`, and one floor value for every other successor, set so that the row still
//!   sums to 1: `floor(a) = log((1 − Σ kept Q(a, ·)) / (V − kept))`. When a row has at most
//!   `top_k` seen successors the floor is exactly the smoothed value of an unseen pair.
//!
//! Tokens outside `0..V` (end-of-sequence, padding) have no statistics: every transition into or
//! out of them scores `log(1/V)`, the uniform value.
//!
//! Stored as safetensors with header metadata `format=voxspec-transitions, version=1, layout,
//! vocab_size, alpha, top_k, sequences, pairs`:
//!
//! ```text
//! dense:  log_q   F32 [V, V]
//! sparse: offsets I64 [V + 1]   row a's entries are offsets[a]..offsets[a + 1]
//!         columns U32 [nnz]     successors, ascending within a row
//!         log_q   F32 [nnz]
//!         floor   F32 [V]
//! ```

use std::collections::HashMap;
use std::path::Path;

use safetensors::tensor::{Dtype, SafeTensors, TensorView};

use crate::error::{InferError, Result};

const FORMAT: &str = "voxspec-transitions";
const VERSION: &str = "1";

/// How [`Transitions`] are estimated and stored.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TransitionsConfig {
    /// Add-α smoothing pseudo-count on every pair (> 0, so no transition is impossible).
    pub alpha: f32,
    /// Largest vocabulary stored dense; larger ones keep `top_k` entries per row.
    pub dense_max_vocab: usize,
    /// Successors kept per row in the sparse layout.
    pub top_k: usize,
}

impl Default for TransitionsConfig {
    fn default() -> Self {
        Self {
            alpha: 1.0,
            dense_max_vocab: 2048,
            top_k: 64,
        }
    }
}

impl TransitionsConfig {
    /// Checks `alpha > 0` (finite) and `top_k ≥ 1`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming the field.
    pub fn validate(&self) -> Result<()> {
        if !(self.alpha.is_finite() && self.alpha > 0.0) {
            return Err(InferError::InvalidSetting {
                name: "alpha",
                value: self.alpha.to_string(),
                expected: "finite and > 0".into(),
            });
        }
        if self.top_k == 0 {
            return Err(InferError::InvalidSetting {
                name: "top_k",
                value: "0".into(),
                expected: "at least 1".into(),
            });
        }
        Ok(())
    }
}

/// Pair counts accumulated over code sequences (dense or per-row maps, by vocabulary size).
#[derive(Debug, Clone)]
pub struct TransitionCounts {
    vocab: usize,
    dense: Option<Vec<u32>>,
    sparse: Vec<HashMap<u32, u32>>,
    sequences: u64,
    pairs: u64,
}

impl TransitionCounts {
    /// Empty counts over `vocab` tokens, dense when `vocab ≤ config.dense_max_vocab`.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for a vocabulary of 0 or one above `u32::MAX`.
    pub fn new(vocab: usize, config: &TransitionsConfig) -> Result<Self> {
        if vocab == 0 || vocab > u32::MAX as usize {
            return Err(InferError::InvalidSetting {
                name: "vocab_size",
                value: vocab.to_string(),
                expected: "1 ..= u32::MAX".into(),
            });
        }
        let dense = (vocab <= config.dense_max_vocab).then(|| vec![0; vocab * vocab]);
        let sparse = if dense.is_some() {
            Vec::new()
        } else {
            vec![HashMap::new(); vocab]
        };
        Ok(Self {
            vocab,
            dense,
            sparse,
            sequences: 0,
            pairs: 0,
        })
    }

    /// Counts the adjacent pairs of one sequence.
    ///
    /// # Errors
    /// [`InferError::InvalidRequest`] naming the position of a token outside the vocabulary
    /// (nothing of that sequence is counted then).
    pub fn add(&mut self, sequence: &[u32]) -> Result<()> {
        if let Some(pos) = sequence.iter().position(|&t| t as usize >= self.vocab) {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "token {} at position {pos} is outside the vocabulary of {}",
                    sequence[pos], self.vocab
                ),
            });
        }
        for pair in sequence.windows(2) {
            let (a, b) = (pair[0] as usize, pair[1]);
            match &mut self.dense {
                Some(dense) => {
                    let c = &mut dense[a * self.vocab + b as usize];
                    *c = c.saturating_add(1);
                }
                None => {
                    let c = self.sparse[a].entry(b).or_insert(0);
                    *c = c.saturating_add(1);
                }
            }
        }
        self.sequences += 1;
        self.pairs += sequence.len().saturating_sub(1) as u64;
        Ok(())
    }

    /// The count of the pair `a → b`.
    pub fn count(&self, a: u32, b: u32) -> u32 {
        let (a, b) = (a as usize, b as usize);
        if a >= self.vocab || b >= self.vocab {
            return 0;
        }
        match &self.dense {
            Some(dense) => dense[a * self.vocab + b],
            None => self.sparse[a].get(&(b as u32)).copied().unwrap_or(0),
        }
    }

    /// Row `a`'s seen successors and counts, successors ascending.
    fn row(&self, a: usize) -> Vec<(u32, u32)> {
        match &self.dense {
            Some(dense) => dense[a * self.vocab..(a + 1) * self.vocab]
                .iter()
                .enumerate()
                .filter(|(_, c)| **c > 0)
                .map(|(b, &c)| (b as u32, c))
                .collect(),
            None => {
                let mut row: Vec<(u32, u32)> =
                    self.sparse[a].iter().map(|(&b, &c)| (b, c)).collect();
                row.sort_unstable();
                row
            }
        }
    }
}

/// Storage of `log Q`.
#[derive(Debug, Clone, PartialEq)]
enum Rows {
    /// `[V, V]` row-major.
    Dense(Vec<f32>),
    /// Kept entries per row (CSR) and a floor for the others.
    Sparse {
        offsets: Vec<usize>,
        columns: Vec<u32>,
        log_q: Vec<f32>,
        floor: Vec<f32>,
    },
}

/// The transition matrix `log Q` of stream-0 tokens (see the module doc).
#[derive(Debug, Clone, PartialEq)]
pub struct Transitions {
    vocab: usize,
    alpha: f32,
    top_k: usize,
    sequences: u64,
    pairs: u64,
    rows: Rows,
    /// [`Transitions::with_weight`]'s factor, applied to the stored rows already; kept for the
    /// uniform value of out-of-range tokens.
    weight: f32,
}

impl Transitions {
    /// Counts the pairs of `sequences` (stream-0 codes of the training set) and estimates `Q`:
    /// the one call the `voxspec stats transitions` command needs, with [`save`](Self::save).
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for a bad config or vocabulary;
    /// [`InferError::InvalidRequest`] naming the sequence and position of a token `≥ vocab`.
    pub fn from_sequences<'a, I>(
        sequences: I,
        vocab: usize,
        config: &TransitionsConfig,
    ) -> Result<Self>
    where
        I: IntoIterator<Item = &'a [u32]>,
    {
        config.validate()?;
        let mut counts = TransitionCounts::new(vocab, config)?;
        for (n, sequence) in sequences.into_iter().enumerate() {
            counts
                .add(sequence)
                .map_err(|e| InferError::InvalidRequest {
                    detail: format!("sequence {n}: {e}"),
                })?;
        }
        Self::from_counts(&counts, config)
    }

    /// Estimates `Q` from accumulated counts; the layout follows the counts' (dense or sparse).
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for a bad config.
    pub fn from_counts(counts: &TransitionCounts, config: &TransitionsConfig) -> Result<Self> {
        config.validate()?;
        let vocab = counts.vocab;
        let alpha = f64::from(config.alpha);
        let smoothed_total = alpha * vocab as f64;
        let rows = if counts.dense.is_some() {
            let mut log_q = Vec::with_capacity(vocab * vocab);
            for a in 0..vocab {
                let row = counts.row(a);
                let total: f64 =
                    row.iter().map(|&(_, c)| f64::from(c)).sum::<f64>() + smoothed_total;
                let unseen = (alpha / total).ln() as f32;
                let start = log_q.len();
                log_q.resize(start + vocab, unseen);
                for (b, c) in row {
                    log_q[start + b as usize] = ((f64::from(c) + alpha) / total).ln() as f32;
                }
            }
            Rows::Dense(log_q)
        } else {
            let (mut offsets, mut columns, mut log_q, mut floor) =
                (vec![0], Vec::new(), Vec::new(), Vec::with_capacity(vocab));
            for a in 0..vocab {
                let mut row = counts.row(a);
                let total: f64 =
                    row.iter().map(|&(_, c)| f64::from(c)).sum::<f64>() + smoothed_total;
                // The top_k most frequent successors (ties: lower token), stored ascending.
                row.sort_unstable_by(|x, y| y.1.cmp(&x.1).then(x.0.cmp(&y.0)));
                row.truncate(config.top_k);
                row.sort_unstable();
                let kept_mass: f64 = row
                    .iter()
                    .map(|&(_, c)| (f64::from(c) + alpha) / total)
                    .sum();
                let rest = vocab - row.len();
                let floor_q = if rest > 0 {
                    ((1.0 - kept_mass).max(0.0) / rest as f64).max(f64::MIN_POSITIVE)
                } else {
                    alpha / total
                };
                floor.push(floor_q.ln() as f32);
                for (b, c) in row {
                    columns.push(b);
                    log_q.push(((f64::from(c) + alpha) / total).ln() as f32);
                }
                offsets.push(columns.len());
            }
            Rows::Sparse {
                offsets,
                columns,
                log_q,
                floor,
            }
        };
        tracing::debug!(
            vocab,
            sequences = counts.sequences,
            pairs = counts.pairs,
            dense = counts.dense.is_some(),
            "estimated transitions"
        );
        Ok(Self {
            vocab,
            alpha: config.alpha,
            top_k: if counts.dense.is_some() {
                0
            } else {
                config.top_k
            },
            sequences: counts.sequences,
            pairs: counts.pairs,
            rows,
            weight: 1.0,
        })
    }

    /// Number of tokens `V` with statistics.
    pub fn vocab_size(&self) -> usize {
        self.vocab
    }

    /// Whether `Q` is stored dense.
    pub fn is_dense(&self) -> bool {
        matches!(self.rows, Rows::Dense(_))
    }

    /// The smoothing pseudo-count it was estimated with.
    pub fn alpha(&self) -> f32 {
        self.alpha
    }

    /// Sequences and pairs it was estimated from.
    pub fn counted(&self) -> (u64, u64) {
        (self.sequences, self.pairs)
    }

    /// The matrix with every `log Q` multiplied by `weight` (`Q^w`, not renormalised): the
    /// weight of the transitions against the heads' own scores in Viterbi path selection, as a
    /// language-model weight in speech recognition. 1 is the MTP paper's; 0 leaves each head
    /// its own best candidate.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] for a negative or non-finite weight.
    pub fn with_weight(mut self, weight: f32) -> Result<Self> {
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(InferError::InvalidSetting {
                name: "transition_weight",
                value: weight.to_string(),
                expected: "a finite weight ≥ 0".into(),
            });
        }
        if weight != 1.0 {
            self.weight *= weight;
            match &mut self.rows {
                Rows::Dense(log_q) => log_q.iter_mut().for_each(|v| *v *= weight),
                Rows::Sparse { log_q, floor, .. } => {
                    log_q.iter_mut().for_each(|v| *v *= weight);
                    floor.iter_mut().for_each(|v| *v *= weight);
                }
            }
        }
        Ok(self)
    }

    /// `log Q(a → b)`; `log(1/V)` when either token is outside `0..V` (times the weight).
    pub fn log_q(&self, a: u32, b: u32) -> f32 {
        let (ai, bi) = (a as usize, b as usize);
        if ai >= self.vocab || bi >= self.vocab {
            return -(self.vocab as f32).ln() * self.weight;
        }
        match &self.rows {
            Rows::Dense(log_q) => log_q[ai * self.vocab + bi],
            Rows::Sparse {
                offsets,
                columns,
                log_q,
                floor,
            } => {
                let (start, end) = (offsets[ai], offsets[ai + 1]);
                match columns[start..end].binary_search(&b) {
                    Ok(k) => log_q[start + k],
                    Err(_) => floor[ai],
                }
            }
        }
    }

    /// The `m × m` block of `log Q` between `candidates`, written to `out` (row `i` = from
    /// `candidates[i]`).
    ///
    /// # Shapes
    /// - `candidates`: `[m]`
    /// - `out`: resized to `[m, m]` row-major
    pub fn block(&self, candidates: &[u32], out: &mut Vec<f32>) {
        out.clear();
        for &a in candidates {
            out.extend(candidates.iter().map(|&b| self.log_q(a, b)));
        }
    }

    /// Writes the safetensors file (to a temporary sibling, then renamed into place).
    ///
    /// # Errors
    /// [`InferError::File`] naming the path.
    pub fn save(&self, path: &Path) -> Result<()> {
        let file_err = |detail: String| InferError::File {
            path: path.display().to_string(),
            detail,
        };
        let f32_bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let mut buffers: Vec<(&str, Dtype, Vec<usize>, Vec<u8>)> = Vec::new();
        let layout = match &self.rows {
            Rows::Dense(log_q) => {
                buffers.push((
                    "log_q",
                    Dtype::F32,
                    vec![self.vocab, self.vocab],
                    f32_bytes(log_q),
                ));
                "dense"
            }
            Rows::Sparse {
                offsets,
                columns,
                log_q,
                floor,
            } => {
                let offsets: Vec<u8> = offsets
                    .iter()
                    .flat_map(|&o| (o as i64).to_le_bytes())
                    .collect();
                let cols: Vec<u8> = columns.iter().flat_map(|c| c.to_le_bytes()).collect();
                buffers.push(("offsets", Dtype::I64, vec![self.vocab + 1], offsets));
                buffers.push(("columns", Dtype::U32, vec![columns.len()], cols));
                buffers.push(("log_q", Dtype::F32, vec![log_q.len()], f32_bytes(log_q)));
                buffers.push(("floor", Dtype::F32, vec![self.vocab], f32_bytes(floor)));
                "sparse"
            }
        };
        let mut views = Vec::with_capacity(buffers.len());
        for (name, dtype, shape, bytes) in &buffers {
            let view = TensorView::new(*dtype, shape.clone(), bytes)
                .map_err(|e| file_err(format!("tensor {name}: {e}")))?;
            views.push((*name, view));
        }
        let metadata = HashMap::from([
            ("format".to_string(), FORMAT.to_string()),
            ("version".to_string(), VERSION.to_string()),
            ("layout".to_string(), layout.to_string()),
            ("vocab_size".to_string(), self.vocab.to_string()),
            ("alpha".to_string(), self.alpha.to_string()),
            ("top_k".to_string(), self.top_k.to_string()),
            ("sequences".to_string(), self.sequences.to_string()),
            ("pairs".to_string(), self.pairs.to_string()),
        ]);
        let bytes =
            safetensors::serialize(views, Some(metadata)).map_err(|e| file_err(e.to_string()))?;
        let name = path
            .file_name()
            .ok_or_else(|| file_err("not a file path".into()))?
            .to_string_lossy();
        let tmp = path.with_file_name(format!(".{name}.tmp"));
        std::fs::write(&tmp, &bytes).map_err(|e| file_err(format!("cannot write: {e}")))?;
        std::fs::rename(&tmp, path)
            .map_err(|e| file_err(format!("cannot rename into place: {e}")))?;
        Ok(())
    }

    /// Reads a file written by [`save`](Self::save), checking every tensor's dtype, shape and
    /// values.
    ///
    /// # Errors
    /// [`InferError::File`] naming the path and the field, tensor or value at fault.
    pub fn load(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| InferError::File {
            path: path.display().to_string(),
            detail: format!("cannot read: {e}"),
        })?;
        Self::from_bytes(&bytes).map_err(|detail| InferError::File {
            path: path.display().to_string(),
            detail,
        })
    }

    /// Parses the bytes of a transitions file; the error names what is wrong.
    fn from_bytes(bytes: &[u8]) -> std::result::Result<Self, String> {
        let (_, header) = SafeTensors::read_metadata(bytes)
            .map_err(|e| format!("not a safetensors file: {e}"))?;
        let tensors =
            SafeTensors::deserialize(bytes).map_err(|e| format!("not a safetensors file: {e}"))?;
        let empty = HashMap::new();
        let meta = header.metadata().as_ref().unwrap_or(&empty);
        let field = |key: &str| {
            meta.get(key)
                .map(String::as_str)
                .ok_or_else(|| format!("metadata has no {key:?} (not a {FORMAT} file?)"))
        };
        if field("format")? != FORMAT {
            return Err(format!(
                "metadata format is {:?}, not {FORMAT:?}",
                field("format")?
            ));
        }
        if field("version")? != VERSION {
            return Err(format!(
                "unsupported {FORMAT} version {:?}",
                field("version")?
            ));
        }
        let number = |key: &str| {
            field(key)?
                .parse::<u64>()
                .map_err(|e| format!("metadata {key}: {e}"))
        };
        let vocab = number("vocab_size")? as usize;
        if vocab == 0 {
            return Err("metadata vocab_size is 0".into());
        }
        let alpha: f32 = field("alpha")?
            .parse()
            .map_err(|e| format!("metadata alpha: {e}"))?;
        let read = |name: &str, dtype: Dtype, len: usize| {
            let view = tensors
                .tensor(name)
                .map_err(|_| format!("no tensor {name:?}"))?;
            if view.dtype() != dtype {
                return Err(format!(
                    "tensor {name} has dtype {:?}, want {dtype:?}",
                    view.dtype()
                ));
            }
            let elements: usize = view.shape().iter().product();
            if elements != len {
                return Err(format!(
                    "tensor {name} has shape {:?}, want {len} values",
                    view.shape()
                ));
            }
            Ok(view
                .data()
                .chunks_exact(dtype.bitsize() / 8)
                .map(<[u8]>::to_vec)
                .collect::<Vec<_>>())
        };
        let f32s = |name: &str, len: usize| -> std::result::Result<Vec<f32>, String> {
            let values: Vec<f32> = read(name, Dtype::F32, len)?
                .iter()
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            match values.iter().position(|v| !(v.is_finite() && *v <= 1e-4)) {
                Some(i) => Err(format!(
                    "tensor {name}[{i}] = {} is not a log-probability",
                    values[i]
                )),
                None => Ok(values),
            }
        };
        let rows = match field("layout")? {
            "dense" => Rows::Dense(f32s("log_q", vocab * vocab)?),
            "sparse" => {
                let offsets = read("offsets", Dtype::I64, vocab + 1)?
                    .iter()
                    .map(|b| {
                        let o =
                            i64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]);
                        usize::try_from(o).map_err(|_| format!("tensor offsets holds {o}"))
                    })
                    .collect::<std::result::Result<Vec<usize>, String>>()?;
                let nnz = offsets[vocab];
                if offsets[0] != 0 || offsets.windows(2).any(|w| w[0] > w[1]) {
                    return Err("tensor offsets is not a non-decreasing list from 0".into());
                }
                let columns: Vec<u32> = read("columns", Dtype::U32, nnz)?
                    .iter()
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                    .collect();
                for a in 0..vocab {
                    let row = &columns[offsets[a]..offsets[a + 1]];
                    if row.windows(2).any(|w| w[0] >= w[1])
                        || row.last().is_some_and(|&c| c as usize >= vocab)
                    {
                        return Err(format!(
                            "row {a} of tensor columns is unsorted or out of range"
                        ));
                    }
                }
                Rows::Sparse {
                    offsets,
                    columns,
                    log_q: f32s("log_q", nnz)?,
                    floor: f32s("floor", vocab)?,
                }
            }
            other => {
                return Err(format!(
                    "metadata layout {other:?} is neither \"dense\" nor \"sparse\""
                ));
            }
        };
        Ok(Self {
            vocab,
            alpha,
            top_k: number("top_k")? as usize,
            sequences: number("sequences")?,
            pairs: number("pairs")?,
            rows,
            weight: 1.0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row_sum(t: &Transitions, a: u32) -> f64 {
        (0..t.vocab_size() as u32)
            .map(|b| f64::from(t.log_q(a, b)).exp())
            .sum()
    }

    #[test]
    fn dense_counts_with_smoothing() {
        let seqs: Vec<Vec<u32>> = vec![vec![0, 1, 1, 2], vec![1, 2]];
        let t = Transitions::from_sequences(
            seqs.iter().map(Vec::as_slice),
            3,
            &TransitionsConfig::default(),
        )
        .unwrap();
        assert!(t.is_dense());
        assert_eq!(t.counted(), (2, 4));
        // Row 1: counts 1→1 once, 1→2 twice; total 3 + 3α.
        assert!((t.log_q(1, 2) - (3.0f32 / 6.0).ln()).abs() < 1e-6);
        assert!((t.log_q(1, 0) - (1.0f32 / 6.0).ln()).abs() < 1e-6);
        // Row 2 has no successors: uniform.
        assert!((t.log_q(2, 0) - (1.0f32 / 3.0).ln()).abs() < 1e-6);
        assert!((t.log_q(7, 0) - (1.0f32 / 3.0).ln()).abs() < 1e-6);
        for a in 0..3 {
            assert!((row_sum(&t, a) - 1.0).abs() < 1e-5);
        }
        let mut block = Vec::new();
        t.block(&[2, 1], &mut block);
        assert_eq!(
            block,
            vec![t.log_q(2, 2), t.log_q(2, 1), t.log_q(1, 2), t.log_q(1, 1)]
        );
    }

    #[test]
    fn out_of_range_tokens_are_named() {
        let err = Transitions::from_sequences([&[0u32, 5][..]], 3, &TransitionsConfig::default())
            .unwrap_err();
        assert!(err.to_string().contains("token 5 at position 1"), "{err}");
    }

    #[test]
    fn a_weight_scales_every_log_probability() {
        let seqs: Vec<Vec<u32>> = vec![vec![0, 1, 1, 2, 0, 3, 3, 3], vec![1, 2, 2, 0]];
        for dense_max_vocab in [16, 2] {
            let config = TransitionsConfig {
                dense_max_vocab,
                top_k: 2,
                ..TransitionsConfig::default()
            };
            let t =
                Transitions::from_sequences(seqs.iter().map(Vec::as_slice), 4, &config).unwrap();
            let half = t.clone().with_weight(0.5).unwrap();
            let zero = t.clone().with_weight(0.0).unwrap();
            for a in 0..5 {
                for b in 0..5 {
                    assert!((half.log_q(a, b) - 0.5 * t.log_q(a, b)).abs() < 1e-6);
                    assert_eq!(zero.log_q(a, b), 0.0);
                }
            }
            assert_eq!(t.clone().with_weight(1.0).unwrap(), t);
        }
        let t = Transitions::from_sequences([&[0u32, 1][..]], 2, &TransitionsConfig::default())
            .unwrap();
        for bad in [-0.5, f32::NAN, f32::INFINITY] {
            let err = t.clone().with_weight(bad).unwrap_err().to_string();
            assert!(err.contains("transition_weight"), "{err}");
        }
    }
}
