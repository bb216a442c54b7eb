//! [`TableFrameLm`]: a deterministic toy [`FrameModel`] for tests.
//!
//! Head `j`'s scores after a prefix of columns are a seeded pseudo-random table indexed by the
//! conditioning, the step, the last two columns and `j`, computed on demand by hashing; so
//! every distribution depends on the prefix. Head 0's end-of-sequence score gets
//! `eos_bias + eos_slope · step`, so utterances end. A *draft* variant adds `noise` times a
//! second table (seeded by `noise_seed`): it agrees with the target often but not always.
//!
//! ```text
//! key_j = hash(seed, prompt, step, c_{s−1}, c_s, j)
//! scores_j[v] = sharpness · U(key_j, v) + noise · U(hash(noise_seed, key_j), v)
//!             (+ eos_bias + eos_slope · s on head 0's EOS class)
//! ```
//!
//! The cache is the list of columns fed (and the conditioning's hash); truncation shrinks it.
//! The model counts its forward calls.

use std::sync::atomic::{AtomicUsize, Ordering};

use super::model::{FrameLogits, FrameModel, check_columns};
use crate::error::{InferError, Result};
use crate::toy::{mix, uniform};

/// Settings of a [`TableFrameLm`].
#[derive(Debug, Clone, PartialEq)]
pub struct TableFrameLmConfig {
    /// Streams `K`.
    pub streams: usize,
    /// Codes per stream; the special token / EOS class is `codebook_size`.
    pub codebook_size: usize,
    /// Delay of each stream (`K` values, non-decreasing).
    pub delays: Vec<usize>,
    /// Scores are uniform in `[-sharpness, sharpness)`: larger is more deterministic.
    pub sharpness: f32,
    /// Added to head 0's end-of-sequence score.
    pub eos_bias: f32,
    /// Added to head 0's end-of-sequence score per step, so that utterances end.
    pub eos_slope: f32,
    /// Amplitude of the second table (0 for a target; > 0 makes a draft that differs).
    pub noise: f32,
    /// Seed of the second table.
    pub noise_seed: u64,
    /// Seed of the table.
    pub seed: u64,
}

impl TableFrameLmConfig {
    /// `streams` streams of `codebook_size` codes with delays `d · j`; sharpness 2, EOS bias
    /// −2 and slope 0.3, no noise, seed 0.
    pub fn new(streams: usize, codebook_size: usize, d: usize) -> Self {
        Self {
            streams,
            codebook_size,
            delays: (0..streams).map(|j| d * j).collect(),
            sharpness: 2.0,
            eos_bias: -2.0,
            eos_slope: 0.3,
            noise: 0.0,
            noise_seed: 0,
            seed: 0,
        }
    }

    /// Sets explicit delays.
    pub fn with_delays(mut self, delays: Vec<usize>) -> Self {
        self.delays = delays;
        self
    }

    /// Sets `sharpness`.
    pub fn with_sharpness(mut self, sharpness: f32) -> Self {
        self.sharpness = sharpness;
        self
    }

    /// Sets `eos_bias` and `eos_slope`.
    pub fn with_eos(mut self, bias: f32, slope: f32) -> Self {
        self.eos_bias = bias;
        self.eos_slope = slope;
        self
    }

    /// Sets `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The draft variant of this config: the same table plus `noise` times a second one
    /// seeded by `noise_seed`.
    pub fn draft(&self, noise: f32, noise_seed: u64) -> Self {
        Self {
            noise,
            noise_seed,
            ..self.clone()
        }
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, value: String, expected: &str| {
            Err(InferError::InvalidSetting {
                name,
                value,
                expected: expected.into(),
            })
        };
        if self.streams == 0 {
            return bad("streams", "0".into(), "at least 1");
        }
        if self.codebook_size == 0 || self.codebook_size >= u32::MAX as usize {
            return bad(
                "codebook_size",
                self.codebook_size.to_string(),
                "at least 1 and below u32::MAX",
            );
        }
        if self.delays.len() != self.streams {
            return bad(
                "delays",
                format!("{:?}", self.delays),
                "one delay per stream",
            );
        }
        for (name, value) in [
            ("sharpness", self.sharpness),
            ("eos_bias", self.eos_bias),
            ("eos_slope", self.eos_slope),
            ("noise", self.noise),
        ] {
            if !value.is_finite() {
                return bad(name, value.to_string(), "finite");
            }
        }
        Ok(())
    }

    /// Builds the model.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] when [`validate`](Self::validate) fails.
    pub fn init(&self) -> Result<TableFrameLm> {
        self.validate()?;
        Ok(TableFrameLm {
            config: self.clone(),
            forward_calls: AtomicUsize::new(0),
        })
    }
}

/// The decoding state of a [`TableFrameLm`]: the columns fed and the conditioning's hash.
#[derive(Debug, Clone, PartialEq)]
pub struct TableFrameCache {
    columns: Vec<Vec<u32>>,
    prompt_key: u64,
    capacity: usize,
}

impl TableFrameCache {
    /// The columns fed so far.
    pub fn columns(&self) -> &[Vec<u32>] {
        &self.columns
    }
}

/// A deterministic toy delayed multi-stream model (see the module doc).
#[derive(Debug)]
pub struct TableFrameLm {
    config: TableFrameLmConfig,
    forward_calls: AtomicUsize,
}

impl TableFrameLm {
    /// The settings the model was built from.
    pub fn config(&self) -> &TableFrameLmConfig {
        &self.config
    }

    /// Calls of [`prefill`](FrameModel::prefill) and [`extend`](FrameModel::extend) so far.
    pub fn forward_calls(&self) -> usize {
        self.forward_calls.load(Ordering::Relaxed)
    }

    /// The scores after `columns` (the whole prefix, from step 0) of an utterance conditioned
    /// on `prompt`, computed from scratch: the reference for the cached path and for tests
    /// that enumerate distributions.
    ///
    /// # Shapes
    /// - output: `[K][vocab]` row-major
    pub fn scores_after(&self, prompt: &[u32], columns: &[Vec<u32>]) -> Vec<f32> {
        let mut out = vec![0.0; self.config.streams * self.vocab()];
        self.write_scores(prompt_key(prompt), columns, &mut out);
        out
    }

    fn write_scores(&self, prompt_key: u64, columns: &[Vec<u32>], out: &mut [f32]) {
        let c = &self.config;
        let step = columns.len().saturating_sub(1);
        let hash_column = |col: Option<&Vec<u32>>| {
            col.map_or(0x5741_5254, |col| {
                col.iter()
                    .fold(0x636f_6c75_6d6e_u64, |h, &id| mix(h ^ u64::from(id)))
            })
        };
        let last = hash_column(columns.last());
        let before = hash_column(columns.len().checked_sub(2).and_then(|i| columns.get(i)));
        let base = mix(c.seed ^ mix(prompt_key ^ mix(step as u64 ^ mix(last ^ mix(before)))));
        let vocab = self.vocab();
        for (j, row) in out.chunks_exact_mut(vocab).enumerate() {
            let key = mix(base ^ (j as u64).wrapping_mul(0x9e37_79b9));
            let noise_key = mix(key ^ mix(c.noise_seed ^ 0x006e_6f69_7365));
            for (v, score) in row.iter_mut().enumerate() {
                *score = c.sharpness * uniform(key, v);
                if c.noise != 0.0 {
                    *score += c.noise * uniform(noise_key, v);
                }
            }
            if j == 0 {
                row[c.codebook_size] += c.eos_bias + c.eos_slope * step as f32;
            }
        }
    }
}

fn prompt_key(prompt: &[u32]) -> u64 {
    prompt
        .iter()
        .fold(0x7072_6f6d_7074_u64, |h, &t| mix(h ^ u64::from(t)))
}

impl FrameModel for TableFrameLm {
    type Prompt = Vec<u32>;
    type Cache = TableFrameCache;

    fn streams(&self) -> usize {
        self.config.streams
    }

    fn vocab(&self) -> usize {
        self.config.codebook_size + 1
    }

    fn delays(&self) -> Vec<usize> {
        self.config.delays.clone()
    }

    fn new_cache(&self, prompt: &Vec<u32>, capacity_steps: usize) -> Result<TableFrameCache> {
        Ok(TableFrameCache {
            columns: Vec::with_capacity(capacity_steps),
            prompt_key: prompt_key(prompt),
            capacity: capacity_steps,
        })
    }

    fn prefill(
        &self,
        cache: &mut TableFrameCache,
        prompt: &Vec<u32>,
        columns: &[Vec<u32>],
    ) -> Result<FrameLogits> {
        if !cache.columns.is_empty() {
            return Err(InferError::InvalidRequest {
                detail: format!("prefill on a cache holding {} steps", cache.columns.len()),
            });
        }
        cache.prompt_key = prompt_key(prompt);
        let logits = self.extend(cache, columns)?;
        let (k, vocab) = (self.config.streams, self.vocab());
        let last = logits.as_slice()[(logits.steps() - 1) * k * vocab..].to_vec();
        FrameLogits::new(last, 1, k, vocab)
    }

    fn extend(&self, cache: &mut TableFrameCache, columns: &[Vec<u32>]) -> Result<FrameLogits> {
        let (k, vocab) = (self.config.streams, self.vocab());
        check_columns(columns, k, vocab)?;
        let len = cache.columns.len() + columns.len();
        if len > cache.capacity {
            return Err(InferError::InvalidRequest {
                detail: format!("{len} steps past the cache capacity of {}", cache.capacity),
            });
        }
        self.forward_calls.fetch_add(1, Ordering::Relaxed);
        let row = k * vocab;
        let mut data = vec![0.0; columns.len() * row];
        for (i, column) in columns.iter().enumerate() {
            cache.columns.push(column.clone());
            self.write_scores(
                cache.prompt_key,
                &cache.columns,
                &mut data[i * row..(i + 1) * row],
            );
        }
        FrameLogits::new(data, columns.len(), k, vocab)
    }

    fn steps(&self, cache: &TableFrameCache) -> usize {
        cache.columns.len()
    }

    fn truncate(&self, cache: &mut TableFrameCache, steps: usize) -> Result<()> {
        if steps > cache.columns.len() {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "truncate to {steps} steps, but the cache holds {}",
                    cache.columns.len()
                ),
            });
        }
        cache.columns.truncate(steps);
        Ok(())
    }
}
