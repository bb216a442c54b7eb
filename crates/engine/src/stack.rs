//! The transformer stack shared by the engine's models ([`crate::NativeMtp`],
//! [`crate::NativeNar`]): pre-norm blocks of attention over a KV cache and an MLP, then the final
//! norm, as `voxspec_nn::Transformer` computes them; causal for the AR model, bidirectional for
//! the NAR. Also the readers that copy Burn parameters into the engine's buffers.
//!
//! ```text
//! x (input embeddings, [rows, d]) (+ learned positions)
//! └─ n_layers × { x += out(attention(rope(qkv(norm(x)))))      over the KV cache
//!                 x += down(swiglu | gelu(up(norm(x)))) }
//! └─ norm ─▶ hidden [rows, d]
//! ```

use burn::module::Param;
use burn::nn::Linear;
use burn::tensor::Tensor;
use voxspec_nn::{MlpKind, Norm, Positions, Transformer, TransformerConfig};

use crate::attention::{HeadLayout, attend};
use crate::cache::{NativeCache, ensure};
use crate::error::{EngineError, Result};
use crate::matmul::{NR, PackedLinear, WeightFormat};
use crate::ops::{NormWeights, RopeTables, gelu, swiglu};

#[derive(Debug, Clone)]
pub(crate) enum PositionTables {
    Rotary(RopeTables),
    /// `[max_seq_len, d]`, added to the input.
    Learned(Vec<f32>),
}

#[derive(Debug, Clone)]
pub(crate) struct Layer {
    attention_norm: NormWeights,
    /// `d → 3·d`: queries, keys, values, head-major.
    qkv: PackedLinear,
    /// `d → d`.
    out: PackedLinear,
    mlp_norm: NormWeights,
    /// `d → 2·d_ff` (SwiGLU: gate and up interleaved by 32-column panel when `d_ff` is a
    /// multiple of 32, else `[gate | up]`; see [`gate_up`]) or `d → d_ff` (GELU).
    gate_up: PackedLinear,
    /// `d_ff → d`.
    down: PackedLinear,
}

impl Layer {
    /// Weights and biases of the linear layers.
    pub(crate) fn num_params(&self) -> usize {
        self.qkv.num_params()
            + self.out.num_params()
            + self.gate_up.num_params()
            + self.down.num_params()
    }
}

/// A transformer stack on the engine.
#[derive(Debug, Clone)]
pub(crate) struct Stack {
    pub(crate) d: usize,
    pub(crate) n_heads: usize,
    pub(crate) head_dim: usize,
    pub(crate) d_ff: usize,
    pub(crate) max_seq_len: usize,
    swiglu: bool,
    /// SwiGLU with gate and up interleaved by panel: each task of the product finishes its
    /// own columns ([`PackedLinear::forward_swiglu`]).
    interleaved: bool,
    causal: bool,
    positions: PositionTables,
    pub(crate) layers: Vec<Layer>,
    norm: NormWeights,
}

impl Stack {
    /// Copies the stack of `t`; `tc` supplies what the module does not keep (the rotary base,
    /// LayerNorm's epsilon).
    ///
    /// # Errors
    /// [`EngineError::Parameter`] when a tensor cannot be read as f32.
    pub(crate) fn from_burn(t: &Transformer, tc: &TransformerConfig) -> Result<Self> {
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
                    Some(gate) => gate_up(gate, &mlp.up, &name("mlp"), interleave(d_ff))?,
                    None => linear(&mlp.up, &name("mlp.up"))?,
                },
                down: linear(&mlp.down, &name("mlp.down"))?,
            });
        }
        Ok(Self {
            d: t.d_model(),
            n_heads: t.n_heads(),
            head_dim: t.head_dim(),
            d_ff,
            max_seq_len: t.max_seq_len(),
            swiglu,
            interleaved: swiglu && interleave(d_ff),
            causal: t.is_causal(),
            positions,
            layers,
            norm: norm(&t.norm, eps, "transformer.norm")?,
        })
    }

    /// The stack with its linear weights stored as `format` (norms and position tables stay
    /// f32).
    pub(crate) fn into_format(mut self, format: WeightFormat) -> Self {
        self.layers = self
            .layers
            .into_iter()
            .map(|l| Layer {
                qkv: l.qkv.into_format(format),
                out: l.out.into_format(format),
                gate_up: l.gate_up.into_format(format),
                down: l.down.into_format(format),
                ..l
            })
            .collect();
        self
    }

    /// How the linear weights are stored.
    pub(crate) fn format(&self) -> WeightFormat {
        self.layers
            .first()
            .map_or(WeightFormat::F32, |l| l.qkv.format())
    }

    /// Bytes of the linear weights one pass reads.
    pub(crate) fn weight_bytes(&self) -> usize {
        self.layers
            .iter()
            .map(|l| {
                l.qkv.weight_bytes()
                    + l.out.weight_bytes()
                    + l.gate_up.weight_bytes()
                    + l.down.weight_bytes()
            })
            .sum()
    }

    /// An empty cache for `batch` sequences of `capacity` positions.
    ///
    /// # Errors
    /// [`EngineError::CapacityTooLarge`] past the stack's `max_seq_len`.
    pub(crate) fn new_cache(&self, batch: usize, capacity: usize) -> Result<NativeCache> {
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

    /// Runs the rows the caller put in the cache's scratch — input embeddings in `x`,
    /// `[rows, d]`, and `(sequence, position)` per row in `rows`, `new[b]` rows for sequence b,
    /// in sequence order — after each sequence's cached positions; writes their keys and values
    /// into the cache, advances it, and leaves the final hidden states in the scratch `h`,
    /// `[rows, d]`. The caller has checked the capacity.
    ///
    /// With `last_only`, only each sequence's last new row leaves the stack: the last layer
    /// still writes every row's keys and values, but runs attention, the output projection and
    /// the MLP for those rows alone (the rest of that layer's work would only feed logits that
    /// nobody asked for), and `rows` and `h` are compacted to one row per sequence with new
    /// rows, `[sequences, d]`.
    pub(crate) fn forward(&self, cache: &mut NativeCache, new: &[usize], last_only: bool) {
        let (d, hd, heads) = (self.d, self.head_dim, self.n_heads);
        let NativeCache {
            k: k_cache,
            v: v_cache,
            lengths,
            capacity,
            scratch: s,
            ..
        } = cache;
        let capacity = *capacity;
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
        let score_rows = new
            .iter()
            .zip(lengths.iter())
            .map(|(&n, &len)| n * (len + n))
            .max()
            .unwrap_or(0);
        ensure(&mut s.scores, heads * score_rows);
        if let PositionTables::Learned(table) = &self.positions {
            for (r, &(_, pos)) in s.rows.iter().enumerate() {
                for (xv, &pv) in s.x[r * d..(r + 1) * d]
                    .iter_mut()
                    .zip(&table[pos * d..(pos + 1) * d])
                {
                    *xv += pv;
                }
            }
        }

        let layout = HeadLayout {
            heads,
            head_dim: hd,
            capacity,
            causal: self.causal,
        };
        let seq_size = heads * capacity * hd;
        let mut m = m;
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
            let last_layer = l + 1 == self.layers.len();
            if last_only && last_layer {
                // Keep each sequence's last row: its query, residual stream and position.
                let mut kept = 0;
                let mut r0 = 0;
                for &n in new {
                    if n == 0 {
                        continue;
                    }
                    let last = r0 + n - 1;
                    s.qkv
                        .copy_within(last * 3 * d..(last + 1) * 3 * d, kept * 3 * d);
                    s.x.copy_within(last * d..(last + 1) * d, kept * d);
                    s.rows[kept] = s.rows[last];
                    kept += 1;
                    r0 += n;
                }
                s.rows.truncate(kept);
                m = kept;
            }
            let mut r0 = 0;
            for (b, &all) in new.iter().enumerate() {
                if all == 0 {
                    continue;
                }
                let n = if last_only && last_layer { 1 } else { all };
                // The block's queries are the last `n` of the sequence's `new[b]` positions.
                let start = lengths[b] + all - n;
                attend(
                    layout,
                    &s.qkv[r0 * 3 * d..],
                    3 * d,
                    &kl[b * seq_size..(b + 1) * seq_size],
                    &vl[b * seq_size..(b + 1) * seq_size],
                    start,
                    n,
                    &mut s.scores,
                    &mut s.heads_ctx,
                    &mut s.ctx[r0 * d..(r0 + n) * d],
                );
                r0 += n;
            }
            layer.out.forward(&s.ctx, m, &mut s.h);
            for (xv, &hv) in s.x[..m * d].iter_mut().zip(&s.h[..m * d]) {
                *xv += hv;
            }

            // MLP sub-layer.
            layer.mlp_norm.forward(&s.x[..m * d], &mut s.h[..m * d]);
            let act = &mut s.act[..m * self.d_ff];
            if self.interleaved {
                layer.gate_up.forward_swiglu(&s.h, m, &mut s.gate_up, act);
            } else if self.swiglu {
                layer.gate_up.forward(&s.h, m, &mut s.gate_up);
                swiglu(&s.gate_up[..m * ff_width], self.d_ff, act);
            } else {
                layer.gate_up.forward(&s.h, m, &mut s.gate_up);
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
        for (length, &n) in lengths.iter_mut().zip(new) {
            *length += n;
        }
    }
}

pub(crate) fn read<const D: usize>(t: Tensor<D>, name: &str) -> Result<Vec<f32>> {
    t.into_data()
        .try_into_vec::<f32>()
        .map_err(|e| EngineError::Parameter {
            name: name.into(),
            detail: format!("{e:?}"),
        })
}

pub(crate) fn read_param<const D: usize>(p: &Param<Tensor<D>>, name: &str) -> Result<Vec<f32>> {
    read(p.val(), name)
}

pub(crate) fn linear(l: &Linear, name: &str) -> Result<PackedLinear> {
    let [k, n] = l.weight.val().dims();
    let w = read_param(&l.weight, name)?;
    let bias = match &l.bias {
        Some(b) => Some(read_param(b, name)?),
        None => None,
    };
    PackedLinear::new(&w, k, n, bias)
}

/// Whether a SwiGLU layer of width `d_ff` packs gate and up interleaved by panel.
fn interleave(d_ff: usize) -> bool {
    d_ff.is_multiple_of(NR)
}

/// SwiGLU's gate and up projections as one `[d, 2·d_ff]` product: with `interleaved` the
/// columns alternate in blocks of 32 (`[g₀ | u₀ | g₁ | u₁ | …]`, so a product split by panel
/// pairs holds both halves of its SwiGLU outputs; `d_ff` a multiple of 32), else `[gate | up]`.
pub(crate) fn gate_up(
    gate: &Linear,
    up: &Linear,
    name: &str,
    interleaved: bool,
) -> Result<PackedLinear> {
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
    if interleaved && !n.is_multiple_of(NR) {
        return Err(EngineError::Model {
            detail: format!("{name}: an MLP width of {n} cannot interleave by {NR} columns"),
        });
    }
    // One row of the packed weight (or the bias) from the gate's and up's rows.
    let join = |g: &[f32], u: &[f32], out: &mut Vec<f32>| {
        if interleaved {
            for (gb, ub) in g.chunks_exact(NR).zip(u.chunks_exact(NR)) {
                out.extend_from_slice(gb);
                out.extend_from_slice(ub);
            }
        } else {
            out.extend_from_slice(g);
            out.extend_from_slice(u);
        }
    };
    let mut w = Vec::with_capacity(2 * k * n);
    for row in 0..k {
        join(
            &g[row * n..(row + 1) * n],
            &u[row * n..(row + 1) * n],
            &mut w,
        );
    }
    let bias = match (&gate.bias, &up.bias) {
        (Some(gb), Some(ub)) => {
            let mut b = Vec::with_capacity(2 * n);
            join(&read_param(gb, name)?, &read_param(ub, name)?, &mut b);
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

pub(crate) fn norm(n: &Norm, eps: f64, name: &str) -> Result<NormWeights> {
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
