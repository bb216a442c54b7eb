//! [`NativeMtp`]: voxspec's AR model (`voxspec_mtp::MtpModel`) in plain f32 buffers, run by
//! the engine's own kernels. It is built from a loaded Burn model — the parameters are copied
//! out once, the linear weights packed for the small-M kernels — so it reads the same model
//! directories and its parity with Burn is a test away.
//!
//! ```text
//! input id (text, SEP, code) ─▶ embedding (+ phone track of an aligned model) (+ learned positions)
//! └─ n_layers × { x += out(attention(rope(qkv(norm(x)))))      over the KV cache
//!                 x += down(swiglu | gelu(up(norm(x)))) }
//! └─ norm ─▶ hidden ─▶ head 0: out(h);  head i ≥ 1: out(h + silu(residual(h)))
//! ```

use std::path::Path;

use burn::tensor::Device;
use voxspec_mtp::{FrameTrack, MtpConfig, MtpModel, TrackLayout, load_mtp};

use crate::cache::{NativeCache, ensure};
use crate::error::{EngineError, Result};
use crate::matmul::{PackedLinear, WeightFormat};
use crate::stack::{Stack, linear, read_param};

/// The phone-track embedding of an aligned model.
#[derive(Debug, Clone)]
struct TrackTable {
    /// `[rows, d]`.
    table: Vec<f32>,
    layout: TrackLayout,
    /// `1 / √slots`, as `PhoneTrack::forward` scales the sum.
    scale: f32,
}

/// One MTP head: `out(h)` or, for heads ≥ 1, `out(h + silu(residual(h)))`.
#[derive(Debug, Clone)]
pub(crate) struct Head {
    pub(crate) residual: Option<PackedLinear>,
    pub(crate) out: PackedLinear,
}

/// The AR model with MTP heads on the native engine. Keeps the Burn model for what runs once
/// per utterance (the duration predictor of an aligned model, prompt validation).
#[derive(Debug, Clone)]
pub struct NativeMtp {
    pub(crate) burn: MtpModel,
    /// Model width.
    pub(crate) d: usize,
    pub(crate) stack: Stack,
    /// `[input_vocab, d]`.
    embedding: Vec<f32>,
    track: Option<TrackTable>,
    pub(crate) heads: Vec<Head>,
}

impl NativeMtp {
    /// Copies the parameters of `model` (built from `config`) into the engine. `config`
    /// supplies what the module does not keep (the rotary base, LayerNorm's epsilon).
    ///
    /// # Errors
    /// [`EngineError::Model`] when `config` does not describe `model`;
    /// [`EngineError::Parameter`] when a tensor cannot be read as f32.
    pub fn from_burn(model: &MtpModel, config: &MtpConfig) -> Result<Self> {
        Self::from_burn_with(model, config, WeightFormat::F32)
    }

    /// [`from_burn`](Self::from_burn) with the linear weights (every transformer layer's and
    /// the MTP heads') stored as `weights`; the embedding tables, norms and biases stay f32.
    ///
    /// # Errors
    /// As [`from_burn`](Self::from_burn).
    pub fn from_burn_with(
        model: &MtpModel,
        config: &MtpConfig,
        weights: WeightFormat,
    ) -> Result<Self> {
        let t = &model.transformer;
        let tc = &config.transformer;
        if (t.d_model(), t.n_heads(), t.n_layers(), t.max_seq_len())
            != (tc.d_model, tc.n_heads, tc.n_layers, tc.max_seq_len)
            || (model.text_vocab(), model.codebook_size())
                != (config.text_vocab, config.codebook_size)
        {
            return Err(EngineError::Model {
                detail: format!(
                    "the config (d_model {}, {} heads, {} layers, max_seq_len {}, text_vocab {}, \
                     codebook {}) does not describe the model (d_model {}, {} heads, {} layers, \
                     max_seq_len {}, text_vocab {}, codebook {})",
                    tc.d_model,
                    tc.n_heads,
                    tc.n_layers,
                    tc.max_seq_len,
                    config.text_vocab,
                    config.codebook_size,
                    t.d_model(),
                    t.n_heads(),
                    t.n_layers(),
                    t.max_seq_len(),
                    model.text_vocab(),
                    model.codebook_size()
                ),
            });
        }
        let stack = Stack::from_burn(t, tc)?.into_format(weights);
        let track = match &model.track {
            Some(track) => Some(TrackTable {
                table: read_param(&track.embedding.weight, "track.embedding")?,
                layout: track.layout(),
                scale: (1.0 / (track.slots() as f64).sqrt()) as f32,
            }),
            None => None,
        };
        let heads = model
            .heads
            .iter()
            .enumerate()
            .map(|(i, h)| {
                Ok(Head {
                    residual: match &h.residual {
                        Some(r) => {
                            Some(linear(r, &format!("heads.{i}.residual"))?.into_format(weights))
                        }
                        None => None,
                    },
                    out: linear(&h.out, &format!("heads.{i}.out"))?.into_format(weights),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            burn: model.clone(),
            d: stack.d,
            stack,
            embedding: read_param(&model.embedding.weight, "embedding")?,
            track,
            heads,
        })
    }

    /// Loads an AR (or draft) model directory through `voxspec_mtp::load_mtp` on the CPU and
    /// builds the engine from it.
    ///
    /// # Errors
    /// [`EngineError::Load`] naming the directory; as [`from_burn`](Self::from_burn).
    pub fn load(dir: &Path) -> Result<Self> {
        Self::load_with(dir, WeightFormat::F32)
    }

    /// [`load`](Self::load) with the linear weights stored as `weights`.
    ///
    /// # Errors
    /// As [`load`](Self::load).
    pub fn load_with(dir: &Path, weights: WeightFormat) -> Result<Self> {
        let (file, model) = load_mtp(dir, &Device::flex()).map_err(|e| EngineError::Load {
            path: dir.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::from_burn_with(&model, &file.model, weights)
    }

    /// How the linear weights are stored.
    pub fn weight_format(&self) -> WeightFormat {
        self.stack.format()
    }

    /// The engine with its linear weights (transformer layers and MTP heads) stored as
    /// `format`. f32 → bf16 rounds to nearest even; bf16 → f32 keeps the rounded values.
    pub fn into_weight_format(self, format: WeightFormat) -> Self {
        let heads = self
            .heads
            .into_iter()
            .map(|h| Head {
                residual: h.residual.map(|r| r.into_format(format)),
                out: h.out.into_format(format),
            })
            .collect();
        Self {
            stack: self.stack.into_format(format),
            heads,
            ..self
        }
    }

    /// The Burn model the engine was built from.
    pub fn burn(&self) -> &MtpModel {
        &self.burn
    }

    /// Parameters of the linear layers and heads one step reads (the embedding tables and
    /// the duration predictor excluded).
    pub fn num_params(&self) -> usize {
        let layers: usize = self.stack.layers.iter().map(|l| l.num_params()).sum();
        let heads: usize = self
            .heads
            .iter()
            .map(|h| h.out.num_params() + h.residual.as_ref().map_or(0, |r| r.num_params()))
            .sum();
        layers + heads
    }

    /// Bytes of weights one step over one token reads: every linear layer and the heads, in
    /// their [`WeightFormat`], with their f32 biases (a step reads one embedding row, not the
    /// table).
    pub fn weight_bytes(&self) -> usize {
        let layers = self.stack.weight_bytes();
        let heads: usize = self
            .heads
            .iter()
            .map(|h| h.out.weight_bytes() + h.residual.as_ref().map_or(0, |r| r.weight_bytes()))
            .sum();
        layers + heads
    }

    /// An empty cache for `batch` sequences of `capacity` positions.
    ///
    /// # Errors
    /// [`EngineError::CapacityTooLarge`] past the model's `max_seq_len`.
    pub fn new_native_cache(&self, batch: usize, capacity: usize) -> Result<NativeCache> {
        self.stack.new_cache(batch, capacity)
    }

    /// Runs `ids[b]` (input ids: text, SEP, codes) after each sequence's cached positions,
    /// writes their keys and values into the cache and advances it. Each sequence runs its own
    /// block (no padding); all rows share each weight pass.
    ///
    /// Leaves the final hidden states in the cache's scratch `h`, `[rows, d]`, rows in
    /// sequence order, and `(sequence, position)` per row in the scratch `rows`; with
    /// `last_only`, only each sequence's last row (the stack's last layer skips the others'
    /// attention and MLP).
    ///
    /// # Errors
    /// [`EngineError::CacheMismatch`] for a cache of another layout or batch,
    /// [`EngineError::CacheOverflow`] past its capacity, [`EngineError::Model`] for an id
    /// outside the embedding or a missing phone track. On error the cache is unchanged.
    pub(crate) fn forward_ids(
        &self,
        cache: &mut NativeCache,
        ids: &[Vec<u32>],
        last_only: bool,
    ) -> Result<()> {
        let (d, hd, heads) = (self.d, self.stack.head_dim, self.stack.n_heads);
        if cache.k.len() != self.stack.layers.len()
            || cache.heads != heads
            || cache.head_dim != hd
            || ids.len() != cache.lengths.len()
        {
            return Err(EngineError::CacheMismatch {
                detail: format!(
                    "{} blocks for a cache of {} sequences, {} layers, {} heads of {}; the \
                     model has {} layers, {heads} heads of {hd}",
                    ids.len(),
                    cache.lengths.len(),
                    cache.k.len(),
                    cache.heads,
                    cache.head_dim,
                    self.stack.layers.len()
                ),
            });
        }
        for (b, (row, &length)) in ids.iter().zip(&cache.lengths).enumerate() {
            if length + row.len() > cache.capacity {
                return Err(EngineError::CacheOverflow {
                    sequence: b,
                    length,
                    new: row.len(),
                    capacity: cache.capacity,
                });
            }
        }
        let vocab = self.embedding.len() / d;
        if let Some(&id) = ids.iter().flatten().find(|&&id| id as usize >= vocab) {
            return Err(EngineError::Model {
                detail: format!("input id {id} outside the embedding of {vocab} rows"),
            });
        }
        if self.track.is_some()
            && let Some(b) =
                (0..ids.len()).find(|&b| !ids[b].is_empty() && cache.tracks[b].is_none())
        {
            return Err(EngineError::Model {
                detail: format!("sequence {b} has no phone track (prefill first)"),
            });
        }

        let s = &mut cache.scratch;
        s.rows.clear();
        for (b, row) in ids.iter().enumerate() {
            s.rows
                .extend((0..row.len()).map(|i| (b, cache.lengths[b] + i)));
        }
        let m = s.rows.len();
        ensure(&mut s.x, m * d);
        ensure(&mut s.h, m * d);

        // Input embeddings (+ phone track): [m, d].
        for (r, &id) in ids.iter().flatten().enumerate() {
            let x = &mut s.x[r * d..(r + 1) * d];
            x.copy_from_slice(&self.embedding[id as usize * d..(id as usize + 1) * d]);
            let (b, pos) = s.rows[r];
            if let (Some(track), Some((text_len, frames))) = (&self.track, &cache.tracks[b]) {
                s.track_ids.clear();
                match pos.checked_sub(*text_len) {
                    Some(frame) => frames.push_ids(frame, &track.layout, &mut s.track_ids),
                    None => FrameTrack::push_none(1, &track.layout, &mut s.track_ids),
                }
                let h = &mut s.h[..d];
                h.fill(0.0);
                for &t in &s.track_ids {
                    for (hv, &tv) in h.iter_mut().zip(&track.table[t as usize * d..]) {
                        *hv += tv;
                    }
                }
                for (xv, &hv) in x.iter_mut().zip(h.iter()) {
                    *xv += hv * track.scale;
                }
            }
        }
        let new: Vec<usize> = ids.iter().map(Vec::len).collect();
        self.stack.forward(cache, &new, last_only);
        Ok(())
    }
}
