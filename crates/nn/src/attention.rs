//! Multi-head self-attention (Vaswani et al. 2017, "Attention Is All You Need", §3.2) with a
//! fused QKV projection, optional rotary positions, and two entry points: the full sequence
//! (training, scoring) and a block of new positions against a [`KvCache`](crate::KvCache) layer.
//!
//! The full sequence goes through Burn's fused `attention` op (on flex: one kernel per head, a
//! fully masked row gives zeros rather than NaN); under autodiff on flex, where Burn falls back
//! to separate kernels, through two matmuls around voxspec's fused masked softmax
//! ([`crate::softmax`]). The cached block attends with two matmuls over views of the cache, which flex's
//! gemm reads in place.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Bool, Device, Tensor, TensorData};

use crate::kv_cache::LayerKv;
use crate::linear::linear;
use crate::positions::{RotaryAngles, Span};

/// Self-attention over `n_heads` heads of width `head_dim`.
#[derive(Module, Debug)]
pub struct SelfAttention {
    /// `d_model → 3·d_model`: queries, keys, values, each head-major (`[head, head_dim]`).
    pub qkv: Linear,
    /// `d_model → d_model`.
    pub out: Linear,
    /// Number of heads.
    pub n_heads: usize,
    /// Width of one head.
    pub head_dim: usize,
}

impl SelfAttention {
    /// Builds the projections for `d_model = n_heads · head_dim`.
    pub(crate) fn new(n_heads: usize, head_dim: usize, bias: bool, device: &Device) -> Self {
        let d_model = n_heads * head_dim;
        Self {
            qkv: LinearConfig::new(d_model, 3 * d_model)
                .with_bias(bias)
                .init(device),
            out: LinearConfig::new(d_model, d_model)
                .with_bias(bias)
                .init(device),
            n_heads,
            head_dim,
        }
    }

    /// Projects `x` to rotated queries and keys and to values.
    ///
    /// # Shapes
    /// - `x`: `[batch, time, d_model]`
    /// - output: three `[batch, heads, time, head_dim]`
    fn project(
        &self,
        x: Tensor<3>,
        rope: Option<&RotaryAngles>,
    ) -> (Tensor<4>, Tensor<4>, Tensor<4>) {
        let [batch, time, _] = x.dims();
        let h = self.n_heads;
        let qkv = linear(&self.qkv, x)
            // [batch, time, 3 * heads, head_dim]
            .reshape([batch, time, 3 * h, self.head_dim])
            // [batch, 3 * heads, time, head_dim]
            .swap_dims(1, 2);
        // Queries and keys are rotated together: one pass over both.
        let qk = qkv.clone().narrow(1, 0, 2 * h);
        let qk = match rope {
            Some(rope) => rope.apply(qk),
            None => qk,
        };
        let q = qk.clone().narrow(1, 0, h);
        let k = qk.narrow(1, h, h);
        let v = qkv.narrow(1, 2 * h, h);
        (q, k, v)
    }

    /// Merges the heads of the attention context and projects back to `d_model`.
    fn merge(&self, context: Tensor<4>) -> Tensor<3> {
        let [batch, _, time, _] = context.dims();
        let context = context
            // [batch, time, heads, head_dim]
            .swap_dims(1, 2)
            // [batch, time, d_model]
            .reshape([batch, time, self.n_heads * self.head_dim]);
        linear(&self.out, context)
    }

    /// Attention over the whole sequence.
    ///
    /// `mask` is true at pairs to exclude (broadcast over heads and, where 1, queries);
    /// `causal` additionally excludes keys after each query.
    ///
    /// # Shapes
    /// - `x`: `[batch, time, d_model]`
    /// - `mask`: `[batch, 1, 1 | time, time]`
    /// - output: `[batch, time, d_model]`
    pub(crate) fn forward(
        &self,
        x: Tensor<3>,
        rope: Option<&RotaryAngles>,
        mask: Option<Tensor<4, Bool>>,
        causal: bool,
    ) -> Tensor<3> {
        let (q, k, v) = self.project(x, rope);
        let context = crate::softmax::attention(q, k, v, mask, causal);
        self.merge(context)
    }

    /// Attention of a block of new positions to the cached ones and, causally, to each other.
    ///
    /// The block's keys and values are written into `cache` at `span`, then the queries attend
    /// over the first `attend_len` cached positions (`max(lengths) + new`); `mask` (true =
    /// excluded, from [`block_mask`]) hides the block's future and, per sequence, the positions
    /// past its own length. A single new position of equal-length sequences needs no mask.
    ///
    /// # Shapes
    /// - `x`: `[batch, new, d_model]`
    /// - `mask`: `[batch | 1, 1, new, attend_len]`
    /// - output: `[batch, new, d_model]`
    pub(crate) fn forward_cached(
        &self,
        x: Tensor<3>,
        rope: Option<&RotaryAngles>,
        cache: &mut LayerKv,
        span: &Span,
        attend_len: usize,
        mask: Option<Tensor<4, Bool>>,
    ) -> Tensor<3> {
        let (q, k, v) = self.project(x, rope);
        cache.write(k, v, span);
        // [batch, heads, attend_len, head_dim], views into the cache
        let (k, v) = cache.prefix(attend_len);
        let context = strided_attention(q, k, v, mask);
        self.merge(context)
    }
}

/// Attention by two matmuls that read the cache views in place (flex's gemm takes strided
/// operands), for a block of `new` queries at the end of each sequence. The fused `attention` op
/// first copies strided keys and values into contiguous buffers: measured at d_model 512, 6
/// layers, batch 1, it made a decoding step 6% slower with 64 cached positions and 18% slower
/// with 2000.
///
/// # Shapes
/// - `q`: `[batch, heads, new, head_dim]`
/// - `k`, `v`: `[batch, heads, keys, head_dim]`
/// - `mask`: `[batch | 1, 1, new, keys]`, true = excluded
/// - output: `[batch, heads, new, head_dim]`
fn strided_attention(
    q: Tensor<4>,
    k: Tensor<4>,
    v: Tensor<4>,
    mask: Option<Tensor<4, Bool>>,
) -> Tensor<4> {
    let [_, _, _, head_dim] = q.dims();
    // [batch, heads, new, keys]
    let scores = q.matmul(k.swap_dims(2, 3)) * (1.0 / (head_dim as f64).sqrt());
    let scores = match mask {
        Some(mask) => scores.mask_fill(mask, f32::NEG_INFINITY),
        None => scores,
    };
    burn::tensor::activation::softmax(scores, 3).matmul(v)
}

/// Key mask for a block of `new` positions after `starts[b]` cached ones in sequence `b` (one
/// start for the whole batch when the lengths are equal): query `i` (position `starts[b] + i`)
/// may see keys `0..=starts[b] + i`; true = excluded.
///
/// # Shapes
/// - output: `[batch, 1, new, attend_len]`
pub(crate) fn block_mask(
    starts: &[usize],
    new: usize,
    attend_len: usize,
    device: &Device,
) -> Tensor<4, Bool> {
    let mut mask = Vec::with_capacity(starts.len() * new * attend_len);
    for &start in starts {
        for i in 0..new {
            mask.extend((0..attend_len).map(|j| j > start + i));
        }
    }
    Tensor::from_data(
        TensorData::new(mask, [starts.len(), 1, new, attend_len]),
        device,
    )
}
