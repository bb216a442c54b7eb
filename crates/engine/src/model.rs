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

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::{Device, Tensor};
use voxspec_mtp::{FrameTrack, MtpConfig, MtpModel, TrackLayout, load_mtp};
use voxspec_nn::{MlpKind, Norm, Positions};

use crate::attention::{HeadLayout, attend};
use crate::cache::{NativeCache, ensure};
use crate::error::{EngineError, Result};
use crate::matmul::PackedLinear;
use crate::ops::{NormWeights, RopeTables, gelu, swiglu};

/// The phone-track embedding of an aligned model.
#[derive(Debug, Clone)]
struct TrackTable {
    /// `[rows, d]`.
    table: Vec<f32>,
    layout: TrackLayout,
    /// `1 / √slots`, as `PhoneTrack::forward` scales the sum.
    scale: f32,
}

#[derive(Debug, Clone)]
enum PositionTables {
    Rotary(RopeTables),
    /// `[max_seq_len, d]`, added to the input.
    Learned(Vec<f32>),
}

#[derive(Debug, Clone)]
struct Layer {
    attention_norm: NormWeights,
    /// `d → 3·d`: queries, keys, values, head-major.
    qkv: PackedLinear,
    /// `d → d`.
    out: PackedLinear,
    mlp_norm: NormWeights,
    /// `d → 2·d_ff` (`[gate | up]`, SwiGLU) or `d → d_ff` (GELU).
    gate_up: PackedLinear,
    /// `d_ff → d`.
    down: PackedLinear,
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
    pub(crate) d: usize,
    pub(crate) n_heads: usize,
    pub(crate) head_dim: usize,
    d_ff: usize,
    pub(crate) max_seq_len: usize,
    swiglu: bool,
    /// `[input_vocab, d]`.
    embedding: Vec<f32>,
    track: Option<TrackTable>,
    positions: PositionTables,
    layers: Vec<Layer>,
    norm: NormWeights,
    pub(crate) heads: Vec<Head>,
}

fn read<const D: usize>(t: Tensor<D>, name: &str) -> Result<Vec<f32>> {
    t.into_data()
        .try_into_vec::<f32>()
        .map_err(|e| EngineError::Parameter {
            name: name.into(),
            detail: format!("{e:?}"),
        })
}

fn read_param<const D: usize>(p: &Param<Tensor<D>>, name: &str) -> Result<Vec<f32>> {
    read(p.val(), name)
}

fn linear(l: &Linear, name: &str) -> Result<PackedLinear> {
    let [k, n] = l.weight.val().dims();
    let w = read_param(&l.weight, name)?;
    let bias = match &l.bias {
        Some(b) => Some(read_param(b, name)?),
        None => None,
    };
    PackedLinear::new(&w, k, n, bias)
}

/// SwiGLU's gate and up projections as one `[d, 2·d_ff]` product, `[gate | up]` per row.
fn gate_up(gate: &Linear, up: &Linear, name: &str) -> Result<PackedLinear> {
    let [k, n] = up.weight.val().dims();
    let (g, u) = (
        read_param(&gate.weight, name)?,
        read_param(&up.weight, name)?,
    );
    if g.len() != u.len() {
        return Err(EngineError::Model {
            detail: format!("{name}: gate and up differ in shape"),
        });
    }
    let mut w = Vec::with_capacity(2 * k * n);
    for row in 0..k {
        w.extend_from_slice(&g[row * n..(row + 1) * n]);
        w.extend_from_slice(&u[row * n..(row + 1) * n]);
    }
    let bias = match (&gate.bias, &up.bias) {
        (Some(gb), Some(ub)) => {
            let mut b = read_param(gb, name)?;
            b.extend(read_param(ub, name)?);
            Some(b)
        }
        (None, None) => None,
        _ => {
            return Err(EngineError::Model {
                detail: format!("{name}: only one of gate and up has a bias"),
            });
        }
    };
    PackedLinear::new(&w, k, 2 * n, bias)
}

fn norm(n: &Norm, eps: f64, name: &str) -> Result<NormWeights> {
    Ok(match n {
        Norm::Rms(n) => NormWeights::Rms {
            gamma: read_param(&n.gamma, name)?,
            eps: n.epsilon as f32,
        },
        Norm::Layer(n) => {
            let gamma = read_param(&n.gamma, name)?;
            let beta = match &n.beta {
                Some(b) => read_param(b, name)?,
                None => vec![0.0; gamma.len()],
            };
            NormWeights::Layer {
                gamma,
                beta,
                eps: eps as f32,
            }
        }
    })
}

impl NativeMtp {
    /// Copies the parameters of `model` (built from `config`) into the engine. `config`
    /// supplies what the module does not keep (the rotary base, LayerNorm's epsilon).
    ///
    /// # Errors
    /// [`EngineError::Model`] when `config` does not describe `model`;
    /// [`EngineError::Parameter`] when a tensor cannot be read as f32.
    pub fn from_burn(model: &MtpModel, config: &MtpConfig) -> Result<Self> {
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
        let d = t.d_model();
        let eps = tc.norm_eps;
        let positions = match &t.positions {
            Positions::Rotary(_) => PositionTables::Rotary(RopeTables::new(
                t.max_seq_len(),
                t.head_dim(),
                tc.rope_theta,
            )),
            Positions::Learned(table) => {
                PositionTables::Learned(read_param(&table.weight, "transformer.positions")?)
            }
        };
        let mut layers = Vec::with_capacity(t.n_layers());
        let mut d_ff = 0;
        let mut swiglu = tc.mlp == MlpKind::SwiGlu;
        for (i, block) in t.blocks.iter().enumerate() {
            let name = |part: &str| format!("transformer.blocks.{i}.{part}");
            let mlp = &block.mlp;
            d_ff = mlp.up.weight.val().dims()[1];
            swiglu = mlp.gate.is_some();
            layers.push(Layer {
                attention_norm: norm(&block.attention_norm, eps, &name("attention_norm"))?,
                qkv: linear(&block.attention.qkv, &name("attention.qkv"))?,
                out: linear(&block.attention.out, &name("attention.out"))?,
                mlp_norm: norm(&block.mlp_norm, eps, &name("mlp_norm"))?,
                gate_up: match &mlp.gate {
                    Some(gate) => gate_up(gate, &mlp.up, &name("mlp"))?,
                    None => linear(&mlp.up, &name("mlp.up"))?,
                },
                down: linear(&mlp.down, &name("mlp.down"))?,
            });
        }
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
                        Some(r) => Some(linear(r, &format!("heads.{i}.residual"))?),
                        None => None,
                    },
                    out: linear(&h.out, &format!("heads.{i}.out"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Self {
            burn: model.clone(),
            d,
            n_heads: t.n_heads(),
            head_dim: t.head_dim(),
            d_ff,
            max_seq_len: t.max_seq_len(),
            swiglu,
            embedding: read_param(&model.embedding.weight, "embedding")?,
            track,
            positions,
            layers,
            norm: norm(&t.norm, eps, "transformer.norm")?,
            heads,
        })
    }

    /// Loads an AR (or draft) model directory through `voxspec_mtp::load_mtp` on the CPU and
    /// builds the engine from it.
    ///
    /// # Errors
    /// [`EngineError::Load`] naming the directory; as [`from_burn`](Self::from_burn).
    pub fn load(dir: &Path) -> Result<Self> {
        let (file, model) = load_mtp(dir, &Device::flex()).map_err(|e| EngineError::Load {
            path: dir.display().to_string(),
            detail: e.to_string(),
        })?;
        Self::from_burn(&model, &file.model)
    }

    /// The Burn model the engine was built from.
    pub fn burn(&self) -> &MtpModel {
        &self.burn
    }

    /// Parameters of the transformer, embeddings and heads the engine reads (the duration
    /// predictor excluded).
    pub fn num_params(&self) -> usize {
        self.weight_bytes() / 4
    }

    /// Bytes of weights one step over one token reads: every linear layer and the heads (a
    /// step reads one embedding row, not the table).
    pub fn weight_bytes(&self) -> usize {
        let layers: usize = self
            .layers
            .iter()
            .map(|l| {
                l.qkv.weight_bytes()
                    + l.out.weight_bytes()
                    + l.gate_up.weight_bytes()
                    + l.down.weight_bytes()
            })
            .sum();
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
        if capacity > self.max_seq_len {
            return Err(EngineError::CapacityTooLarge {
                capacity,
                max_seq_len: self.max_seq_len,
            });
        }
        Ok(NativeCache::new(
            self.layers.len(),
            self.n_heads,
            self.head_dim,
            batch,
            capacity,
        ))
    }

    /// Runs `ids[b]` (input ids: text, SEP, codes) after each sequence's cached positions,
    /// writes their keys and values into the cache and advances it. Each sequence runs its own
    /// block (no padding); all rows share each weight pass.
    ///
    /// Leaves the final hidden states in the cache's scratch `h`, `[rows, d]`, rows in
    /// sequence order, and `(sequence, position)` per row in the scratch `rows`.
    ///
    /// # Errors
    /// [`EngineError::CacheMismatch`] for a cache of another layout or batch,
    /// [`EngineError::CacheOverflow`] past its capacity, [`EngineError::Model`] for an id
    /// outside the embedding or a missing phone track. On error the cache is unchanged.
    pub(crate) fn forward_ids(&self, cache: &mut NativeCache, ids: &[Vec<u32>]) -> Result<()> {
        let (d, hd, heads) = (self.d, self.head_dim, self.n_heads);
        if cache.k.len() != self.layers.len()
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
                    self.layers.len()
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

        let NativeCache {
            k: k_cache,
            v: v_cache,
            lengths,
            capacity,
            tracks,
            scratch: s,
            ..
        } = cache;
        let capacity = *capacity;
        s.rows.clear();
        for (b, row) in ids.iter().enumerate() {
            s.rows.extend((0..row.len()).map(|i| (b, lengths[b] + i)));
        }
        let m = s.rows.len();
        let ff_width = if self.swiglu {
            2 * self.d_ff
        } else {
            self.d_ff
        };
        ensure(&mut s.x, m * d);
        ensure(&mut s.h, m * d);
        ensure(&mut s.qkv, m * 3 * d);
        ensure(&mut s.ctx, m * d);
        ensure(&mut s.heads_ctx, m * d);
        ensure(&mut s.gate_up, m * ff_width);
        ensure(&mut s.act, m * self.d_ff);
        let score_rows = ids
            .iter()
            .zip(lengths.iter())
            .map(|(row, &len)| row.len() * (len + row.len()))
            .max()
            .unwrap_or(0);
        ensure(&mut s.scores, heads * score_rows);

        // Input embeddings: [m, d].
        for (r, &id) in ids.iter().flatten().enumerate() {
            let x = &mut s.x[r * d..(r + 1) * d];
            x.copy_from_slice(&self.embedding[id as usize * d..(id as usize + 1) * d]);
            let (b, pos) = s.rows[r];
            if let (Some(track), Some((text_len, frames))) = (&self.track, &tracks[b]) {
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
            if let PositionTables::Learned(table) = &self.positions {
                for (xv, &pv) in x.iter_mut().zip(&table[pos * d..(pos + 1) * d]) {
                    *xv += pv;
                }
            }
        }

        let layout = HeadLayout {
            heads,
            head_dim: hd,
            capacity,
        };
        let seq_size = heads * capacity * hd;
        for (l, layer) in self.layers.iter().enumerate() {
            // Attention sub-layer.
            layer
                .attention_norm
                .forward(&s.x[..m * d], &mut s.h[..m * d]);
            layer.qkv.forward(&s.h, m, &mut s.qkv);
            let (kl, vl) = (&mut k_cache[l], &mut v_cache[l]);
            for (r, &(b, pos)) in s.rows.iter().enumerate() {
                let row = &mut s.qkv[r * 3 * d..(r + 1) * 3 * d];
                if let PositionTables::Rotary(rope) = &self.positions {
                    // Queries and keys: [0, 2d).
                    rope.apply(&mut row[..2 * d], pos);
                }
                for h in 0..heads {
                    // Keys transposed: [b, h, head_dim, capacity].
                    let kt = (b * heads + h) * hd * capacity + pos;
                    for (dd, &kv) in row[d + h * hd..d + (h + 1) * hd].iter().enumerate() {
                        kl[kt + dd * capacity] = kv;
                    }
                    let at = ((b * heads + h) * capacity + pos) * hd;
                    vl[at..at + hd].copy_from_slice(&row[2 * d + h * hd..2 * d + (h + 1) * hd]);
                }
            }
            let mut r0 = 0;
            for (b, row) in ids.iter().enumerate() {
                let new = row.len();
                if new == 0 {
                    continue;
                }
                attend(
                    layout,
                    &s.qkv[r0 * 3 * d..],
                    3 * d,
                    &kl[b * seq_size..(b + 1) * seq_size],
                    &vl[b * seq_size..(b + 1) * seq_size],
                    lengths[b],
                    new,
                    &mut s.scores,
                    &mut s.heads_ctx,
                    &mut s.ctx[r0 * d..(r0 + new) * d],
                );
                r0 += new;
            }
            layer.out.forward(&s.ctx, m, &mut s.h);
            for (xv, &hv) in s.x[..m * d].iter_mut().zip(&s.h[..m * d]) {
                *xv += hv;
            }

            // MLP sub-layer.
            layer.mlp_norm.forward(&s.x[..m * d], &mut s.h[..m * d]);
            layer.gate_up.forward(&s.h, m, &mut s.gate_up);
            let act = &mut s.act[..m * self.d_ff];
            if self.swiglu {
                swiglu(&s.gate_up[..m * ff_width], self.d_ff, act);
            } else {
                for (a, &u) in act.iter_mut().zip(&s.gate_up[..m * self.d_ff]) {
                    *a = gelu(u);
                }
            }
            layer.down.forward(&s.act, m, &mut s.h);
            for (xv, &hv) in s.x[..m * d].iter_mut().zip(&s.h[..m * d]) {
                *xv += hv;
            }
        }
        self.norm.forward(&s.x[..m * d], &mut s.h[..m * d]);
        for (length, row) in lengths.iter_mut().zip(ids) {
            *length += row.len();
        }
        Ok(())
    }
}
