//! Position information for the transformer stack: rotary embeddings (Su et al. 2021,
//! "RoFormer", §3.4.2, in the half-split "rotate_half" layout of GPT-NeoX/LLaMA) applied to
//! queries and keys, or learned absolute embeddings (Radford et al. 2019, GPT-2) added to the
//! input.
//!
//! Each forward call covers a [`Span`] of positions per sequence: `start..start + len` for the
//! whole batch (full forward, or a cache whose sequences all have the same length) or a start per
//! sequence (a cache whose sequences were rolled back by different amounts).

use burn::config::Config;
use burn::module::{Initializer, Module};
use burn::nn::{Embedding, EmbeddingConfig};
use burn::tensor::{Device, Int, Tensor, TensorData};

/// How positions enter the stack.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub enum PositionKind {
    /// Rotary embeddings on queries and keys of every layer.
    Rotary,
    /// A learned table `[max_seq_len, d_model]` added to the input.
    Learned,
}

/// The positions one forward call writes, per sequence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Span {
    /// Every sequence covers `start..start + len`.
    Uniform {
        /// First position.
        start: usize,
        /// Positions in the block.
        len: usize,
    },
    /// Sequence `b` covers `starts[b]..starts[b] + len`; positions from `limit` on (the cache
    /// capacity) are padding of a ragged block: they take position `limit − 1` and are never
    /// stored.
    PerSequence {
        /// First position of each sequence.
        starts: Vec<usize>,
        /// Positions in the block.
        len: usize,
        /// First position that is not stored.
        limit: usize,
    },
}

impl Span {
    /// Positions of the block as a flat `[batch * len]` index tensor, sequence-major, each
    /// at most `limit − 1`.
    fn indices(starts: &[usize], len: usize, limit: usize, device: &Device) -> Tensor<1, Int> {
        let last = limit.saturating_sub(1);
        let idx: Vec<i64> = starts
            .iter()
            .flat_map(|&s| (s..s + len).map(|p| p.min(last) as i64))
            .collect();
        let n = idx.len();
        Tensor::from_data(TensorData::new(idx, [n]), device)
    }
}

/// Precomputed rotary tables. The tables are constants rebuilt from the config, not weights:
/// they are not saved with the model.
#[derive(Module, Debug)]
pub struct Rotary {
    /// `cos(p·θ_i)` for both halves: `[max_seq_len, head_dim]`.
    cos: Tensor<2>,
    /// `-sin(p·θ_i)` for the first half, `sin(p·θ_i)` for the second: `[max_seq_len, head_dim]`.
    sin: Tensor<2>,
}

impl Rotary {
    /// Tables for positions `0..max_seq_len`, with `θ_i = theta^(-2i/head_dim)`.
    ///
    /// `head_dim` must be even (checked by the config).
    pub(crate) fn new(max_seq_len: usize, head_dim: usize, theta: f64, device: &Device) -> Self {
        let half = head_dim / 2;
        let mut cos = Vec::with_capacity(max_seq_len * head_dim);
        let mut sin = Vec::with_capacity(max_seq_len * head_dim);
        for p in 0..max_seq_len {
            let angles: Vec<f64> = (0..half)
                .map(|i| p as f64 * theta.powf(-2.0 * i as f64 / head_dim as f64))
                .collect();
            for _ in 0..2 {
                cos.extend(angles.iter().map(|a| a.cos() as f32));
            }
            sin.extend(angles.iter().map(|a| -a.sin() as f32));
            sin.extend(angles.iter().map(|a| a.sin() as f32));
        }
        Self {
            cos: Tensor::from_data(TensorData::new(cos, [max_seq_len, head_dim]), device),
            sin: Tensor::from_data(TensorData::new(sin, [max_seq_len, head_dim]), device),
        }
    }

    /// The rotations of `span`, ready to apply to `[batch, heads, len, head_dim]` tensors.
    fn angles(&self, span: &Span) -> RotaryAngles {
        let [_, head_dim] = self.cos.dims();
        match span {
            Span::Uniform { start, len } => RotaryAngles {
                // [len, head_dim] -> [1, 1, len, head_dim]
                cos: self.cos.clone().narrow(0, *start, *len).unsqueeze(),
                sin: self.sin.clone().narrow(0, *start, *len).unsqueeze(),
            },
            Span::PerSequence { starts, len, limit } => {
                let idx = Span::indices(starts, *len, *limit, &self.cos.device());
                let shape = [starts.len(), 1, *len, head_dim];
                RotaryAngles {
                    // [batch * len, head_dim] -> [batch, 1, len, head_dim]
                    cos: self.cos.clone().select(0, idx.clone()).reshape(shape),
                    sin: self.sin.clone().select(0, idx).reshape(shape),
                }
            }
        }
    }
}

/// Rotations for the positions of one forward call.
#[derive(Debug, Clone)]
pub(crate) struct RotaryAngles {
    /// `[1 | batch, 1, len, head_dim]`.
    cos: Tensor<4>,
    /// `[1 | batch, 1, len, head_dim]`, sign folded in.
    sin: Tensor<4>,
}

impl RotaryAngles {
    /// Rotates each pair `(x_i, x_{i + head_dim/2})` by its position's angle.
    ///
    /// # Shapes
    /// - `x`: `[batch, heads, len, head_dim]`
    /// - output: `[batch, heads, len, head_dim]`
    pub(crate) fn apply(&self, x: Tensor<4>) -> Tensor<4> {
        let [_, _, _, head_dim] = x.dims();
        let half = head_dim / 2;
        // (x1, x2) -> (x2, x1); the signs live in `sin`.
        let swapped = Tensor::cat(
            vec![
                x.clone().narrow(3, half, half),
                x.clone().narrow(3, 0, half),
            ],
            3,
        );
        x * self.cos.clone() + swapped * self.sin.clone()
    }
}

/// Position information of a stack; the variant is fixed by [`PositionKind`].
// One per model: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
#[derive(Module, Debug)]
pub enum Positions {
    /// Rotary embeddings on queries and keys.
    Rotary(Rotary),
    /// Learned absolute embeddings added to the input.
    Learned(Embedding),
}

impl Positions {
    /// Builds the position information for `max_seq_len` positions.
    pub(crate) fn new(
        kind: PositionKind,
        max_seq_len: usize,
        d_model: usize,
        head_dim: usize,
        rope_theta: f64,
        device: &Device,
    ) -> Self {
        match kind {
            PositionKind::Rotary => {
                Positions::Rotary(Rotary::new(max_seq_len, head_dim, rope_theta, device))
            }
            PositionKind::Learned => Positions::Learned(
                EmbeddingConfig::new(max_seq_len, d_model)
                    .with_initializer(Initializer::Normal {
                        mean: 0.0,
                        std: 0.02,
                    })
                    .init(device),
            ),
        }
    }

    /// Adds learned positions to `x`, or returns the rotations the attention layers apply.
    ///
    /// # Shapes
    /// - `x`: `[batch, len, d_model]`, `len` equal to the span's
    /// - output: `[batch, len, d_model]`
    pub(crate) fn prepare(&self, x: Tensor<3>, span: &Span) -> (Tensor<3>, Option<RotaryAngles>) {
        match self {
            Positions::Rotary(rotary) => (x, Some(rotary.angles(span))),
            Positions::Learned(table) => {
                let [batch, len, d_model] = x.dims();
                let weight = table.weight.val();
                let pos = match span {
                    // [len, d_model] -> [1, len, d_model]
                    Span::Uniform { start, .. } => weight.narrow(0, *start, len).unsqueeze(),
                    Span::PerSequence { starts, limit, .. } => {
                        let idx = Span::indices(starts, len, *limit, &weight.device());
                        // [batch * len, d_model] -> [batch, len, d_model]
                        weight.select(0, idx).reshape([batch, len, d_model])
                    }
                };
                (x + pos, None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rotating a query and a key by their positions makes their dot product depend only on the
    /// distance between them (RoFormer eq. 16).
    #[test]
    fn rotary_scores_depend_on_relative_position_only() {
        let device = Device::flex();
        let rotary = Rotary::new(16, 8, 10_000.0, &device);
        let q = Tensor::<4>::from_floats([[[[0.3, -1.0, 0.5, 2.0, 0.1, 0.7, -0.2, 1.5]]]], &device);
        let k =
            Tensor::<4>::from_floats([[[[1.1, 0.4, -0.6, 0.2, 0.9, -1.3, 0.8, 0.05]]]], &device);
        let score = |pq: usize, pk: usize| -> f32 {
            let at = |p| Span::Uniform { start: p, len: 1 };
            let q = rotary.angles(&at(pq)).apply(q.clone());
            let k = rotary.angles(&at(pk)).apply(k.clone());
            (q * k).sum().into_scalar()
        };
        let (a, b) = (score(3, 1), score(9, 7));
        assert!((a - b).abs() < 1e-4, "{a} vs {b}");
        let c = score(9, 1);
        assert!((a - c).abs() > 1e-3, "distance should matter: {a} vs {c}");
        // Position 0 is the identity.
        let q0 = rotary
            .angles(&Span::Uniform { start: 0, len: 1 })
            .apply(q.clone());
        let diff: f32 = (q0 - q).abs().max().into_scalar();
        assert!(diff < 1e-7);
    }

    #[test]
    fn per_sequence_span_matches_uniform_spans() {
        let device = Device::flex();
        let rotary = Rotary::new(16, 4, 10_000.0, &device);
        let per = rotary.angles(&Span::PerSequence {
            starts: vec![2, 5],
            len: 3,
            limit: 16,
        });
        for (b, start) in [(0usize, 2usize), (1, 5)] {
            let one = rotary.angles(&Span::Uniform { start, len: 3 });
            let diff: f32 = (per.cos.clone().narrow(0, b, 1) - one.cos)
                .abs()
                .max()
                .into_scalar();
            assert!(diff < 1e-7, "sequence {b}: {diff}");
        }
    }
}
