//! Pre-norm transformer stack (Vaswani et al. 2017, §3.1; pre-norm placement as in GPT-2,
//! Radford et al. 2019, §2.3, and Xiong et al. 2020): causal (decoder-only) or bidirectional,
//! with a final norm, and an incremental forward over an external [`KvCache`].
//!
//! ```text
//! x (+ learned positions)
//! └─ n_layers × { x = x + dropout(attention(norm(x)))   rotary on q, k; causal or padding mask
//!                 x = x + dropout(mlp(norm(x))) }       GELU or SwiGLU
//! └─ norm ─▶ hidden states
//! ```

use burn::config::Config;
use burn::module::Module;
use burn::nn::{Dropout, DropoutConfig};
use burn::tensor::{Bool, Device, Tensor};

use crate::attention::{SelfAttention, block_mask};
use crate::error::{NnError, Result as NnResult};
use crate::kv_cache::{KvCache, LayerKv};
use crate::mlp::{Mlp, MlpKind};
use crate::norm::{Norm, NormKind};
use crate::positions::{PositionKind, Positions, RotaryAngles, Span};

/// Configuration of a [`Transformer`]. The defaults describe a LLaMA-style causal stack
/// (RMSNorm, rotary positions, SwiGLU); presets such as [`tiny`](Self::tiny) change a few fields.
#[derive(Config, Debug)]
pub struct TransformerConfig {
    /// Model width.
    #[config(default = 512)]
    pub d_model: usize,
    /// Attention heads; must divide `d_model`.
    #[config(default = 8)]
    pub n_heads: usize,
    /// Transformer layers.
    #[config(default = 6)]
    pub n_layers: usize,
    /// Hidden width of the MLP.
    #[config(default = 2048)]
    pub d_ff: usize,
    /// Normalisation before each sub-layer and at the end of the stack.
    #[config(default = "NormKind::Rms")]
    pub norm: NormKind,
    /// How positions enter the stack.
    #[config(default = "PositionKind::Rotary")]
    pub positions: PositionKind,
    /// Feed-forward block.
    #[config(default = "MlpKind::SwiGlu")]
    pub mlp: MlpKind,
    /// Causal (decoder-only) attention; false for a bidirectional encoder.
    #[config(default = true)]
    pub causal: bool,
    /// Longest sequence (and largest KV cache) the position tables cover.
    #[config(default = 2048)]
    pub max_seq_len: usize,
    /// Epsilon of the norms.
    #[config(default = 1e-5)]
    pub norm_eps: f64,
    /// Dropout on the output of each sub-layer, active only on an autodiff device.
    #[config(default = 0.1)]
    pub dropout: f64,
    /// Base of the rotary frequencies.
    #[config(default = 10000.0)]
    pub rope_theta: f64,
    /// Biases on the linear layers (GPT-2 style); LayerNorm keeps its own bias regardless.
    #[config(default = false)]
    pub bias: bool,
}

impl TransformerConfig {
    /// A tiny stack for tests: width 32, 4 heads, 2 layers, MLP width 64, 64 positions.
    pub fn tiny() -> Self {
        Self::new()
            .with_d_model(32)
            .with_n_heads(4)
            .with_n_layers(2)
            .with_d_ff(64)
            .with_max_seq_len(64)
    }

    /// Width of one attention head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads.max(1)
    }

    /// Checks that the fields describe a buildable model.
    ///
    /// # Errors
    /// [`NnError::InvalidConfig`] naming the first field at fault and its value.
    pub fn validate(&self) -> NnResult<()> {
        let fail = |detail: String| Err(NnError::InvalidConfig { detail });
        for (name, value) in [
            ("d_model", self.d_model),
            ("n_heads", self.n_heads),
            ("n_layers", self.n_layers),
            ("d_ff", self.d_ff),
            ("max_seq_len", self.max_seq_len),
        ] {
            if value == 0 {
                return fail(format!("{name} must be at least 1"));
            }
        }
        if !self.d_model.is_multiple_of(self.n_heads) {
            return fail(format!(
                "d_model {} is not divisible by n_heads {}",
                self.d_model, self.n_heads
            ));
        }
        if self.positions == PositionKind::Rotary {
            if !self.head_dim().is_multiple_of(2) {
                return fail(format!(
                    "rotary positions need an even head_dim, got {}",
                    self.head_dim()
                ));
            }
            if !(self.rope_theta.is_finite() && self.rope_theta > 0.0) {
                return fail(format!(
                    "rope_theta must be positive, got {}",
                    self.rope_theta
                ));
            }
        }
        if !(self.norm_eps.is_finite() && self.norm_eps > 0.0) {
            return fail(format!("norm_eps must be positive, got {}", self.norm_eps));
        }
        if !(self.dropout.is_finite() && (0.0..1.0).contains(&self.dropout)) {
            return fail(format!("dropout must lie in [0, 1), got {}", self.dropout));
        }
        Ok(())
    }

    /// Builds the stack with freshly initialised weights on `device`.
    ///
    /// # Errors
    /// [`NnError::InvalidConfig`] when [`validate`](Self::validate) fails.
    pub fn init(&self, device: &Device) -> NnResult<Transformer> {
        self.validate()?;
        let head_dim = self.head_dim();
        let norm = |device| self.norm.init(self.d_model, self.norm_eps, device);
        let blocks = (0..self.n_layers)
            .map(|_| Block {
                attention_norm: norm(device),
                attention: SelfAttention::new(self.n_heads, head_dim, self.bias, device),
                mlp_norm: norm(device),
                mlp: self.mlp.init(self.d_model, self.d_ff, self.bias, device),
                dropout: DropoutConfig::new(self.dropout).init(),
                norm_eps: self.norm_eps,
            })
            .collect();
        Ok(Transformer {
            positions: Positions::new(
                self.positions,
                self.max_seq_len,
                self.d_model,
                head_dim,
                self.rope_theta,
                device,
            ),
            blocks,
            norm: norm(device),
            d_model: self.d_model,
            n_heads: self.n_heads,
            max_seq_len: self.max_seq_len,
            causal: self.causal,
            norm_eps: self.norm_eps,
        })
    }
}

/// One pre-norm layer: `x + attention(norm(x))`, then `x + mlp(norm(x))`.
#[derive(Module, Debug)]
pub struct Block {
    /// Norm before attention.
    pub attention_norm: Norm,
    /// Self-attention.
    pub attention: SelfAttention,
    /// Norm before the MLP.
    pub mlp_norm: Norm,
    /// Feed-forward block.
    pub mlp: Mlp,
    /// Dropout on both sub-layer outputs.
    pub dropout: Dropout,
    /// ε of the norms (given to the fused LayerNorm, whose module keeps its own private).
    norm_eps: f64,
}

impl Block {
    fn forward(
        &self,
        x: Tensor<3>,
        rope: Option<&RotaryAngles>,
        mask: Option<Tensor<4, Bool>>,
        causal: bool,
    ) -> Tensor<3> {
        let h = self
            .attention_norm
            .forward_with(x.clone(), Some(self.norm_eps));
        let x = x + self
            .dropout
            .forward(self.attention.forward(h, rope, mask, causal));
        self.mlp_residual(x)
    }

    fn forward_cached(
        &self,
        x: Tensor<3>,
        rope: Option<&RotaryAngles>,
        cache: &mut LayerKv,
        span: &Span,
        attend_len: usize,
        mask: Option<Tensor<4, Bool>>,
    ) -> Tensor<3> {
        let h = self
            .attention_norm
            .forward_with(x.clone(), Some(self.norm_eps));
        let h = self
            .attention
            .forward_cached(h, rope, cache, span, attend_len, mask);
        self.mlp_residual(x + self.dropout.forward(h))
    }

    fn mlp_residual(&self, x: Tensor<3>) -> Tensor<3> {
        let h = self
            .mlp
            .forward(self.mlp_norm.forward_with(x.clone(), Some(self.norm_eps)));
        x + self.dropout.forward(h)
    }
}

/// A stack of pre-norm transformer layers with a final norm. Returns hidden states; heads and
/// embeddings of tokens belong to the models built on it.
#[derive(Module, Debug)]
pub struct Transformer {
    /// Rotary tables or the learned position table.
    pub positions: Positions,
    /// The layers, input to output.
    pub blocks: Vec<Block>,
    /// Final norm.
    pub norm: Norm,
    d_model: usize,
    n_heads: usize,
    max_seq_len: usize,
    causal: bool,
    norm_eps: f64,
}

impl Transformer {
    /// Model width.
    pub fn d_model(&self) -> usize {
        self.d_model
    }

    /// Attention heads per layer.
    pub fn n_heads(&self) -> usize {
        self.n_heads
    }

    /// Width of one head.
    pub fn head_dim(&self) -> usize {
        self.d_model / self.n_heads
    }

    /// Number of layers.
    pub fn n_layers(&self) -> usize {
        self.blocks.len()
    }

    /// Longest sequence the position tables cover.
    pub fn max_seq_len(&self) -> usize {
        self.max_seq_len
    }

    /// Whether attention is causal.
    pub fn is_causal(&self) -> bool {
        self.causal
    }

    /// An empty KV cache for this stack: `batch` sequences of up to `capacity` positions,
    /// allocated once on `device`.
    ///
    /// # Errors
    /// [`NnError::CapacityTooLarge`] when `capacity > max_seq_len`.
    pub fn new_cache(&self, batch: usize, capacity: usize, device: &Device) -> NnResult<KvCache> {
        if capacity > self.max_seq_len {
            return Err(NnError::CapacityTooLarge {
                capacity,
                max_seq_len: self.max_seq_len,
            });
        }
        Ok(KvCache::with_layout(
            self.n_layers(),
            self.n_heads,
            self.head_dim(),
            batch,
            capacity,
            device,
        ))
    }

    /// A stack made of the layers `layers` of this one (in that order), sharing their
    /// parameters, with the same positions and final norm: e.g. a draft model from a target's
    /// first and last layers.
    ///
    /// # Errors
    /// [`NnError::InvalidConfig`] when `layers` is empty or names a layer that does not exist.
    pub fn select_layers(&self, layers: &[usize]) -> NnResult<Transformer> {
        if layers.is_empty() {
            return Err(NnError::InvalidConfig {
                detail: "select_layers needs at least one layer".into(),
            });
        }
        let blocks = layers
            .iter()
            .map(|&i| {
                self.blocks.get(i).cloned().ok_or(NnError::InvalidConfig {
                    detail: format!("layer {i} does not exist in a stack of {}", self.n_layers()),
                })
            })
            .collect::<NnResult<Vec<_>>>()?;
        Ok(Transformer {
            positions: self.positions.clone(),
            blocks,
            norm: self.norm.clone(),
            ..*self
        })
    }

    /// Full-sequence forward pass (training, scoring, encoding). Causal stacks mask future
    /// positions; in every stack, keys at padded positions are masked out. Outputs at padded
    /// positions are unspecified.
    ///
    /// # Shapes
    /// - `x`: `[batch, time, d_model]`, `time ≤ max_seq_len`
    /// - `padding_mask`: `[batch, time]`, true at real positions
    /// - output: `[batch, time, d_model]`
    ///
    /// # Errors
    /// [`NnError::InputShape`], [`NnError::MaskShape`], [`NnError::SequenceTooLong`].
    pub fn forward(
        &self,
        x: Tensor<3>,
        padding_mask: Option<Tensor<2, Bool>>,
    ) -> NnResult<Tensor<3>> {
        let [batch, time, _] = self.check_input(&x)?;
        if time > self.max_seq_len {
            return Err(NnError::SequenceTooLong {
                time,
                max_seq_len: self.max_seq_len,
            });
        }
        let mask = match padding_mask {
            Some(mask) => {
                let dims = mask.dims();
                if dims != [batch, time] {
                    return Err(NnError::MaskShape {
                        mask: dims,
                        batch,
                        time,
                    });
                }
                // true = excluded key: [batch, 1 head, 1 query, time]
                Some(mask.bool_not().reshape([batch, 1, 1, time]))
            }
            None => None,
        };
        let (mut x, rope) = self.positions.prepare(
            x,
            &Span::Uniform {
                start: 0,
                len: time,
            },
        );
        for block in &self.blocks {
            x = block.forward(x, rope.as_ref(), mask.clone(), self.causal);
        }
        Ok(self.norm.forward_with(x, Some(self.norm_eps)))
    }

    /// Incremental forward pass of a causal stack over a block of `new ≥ 1` positions per
    /// sequence, continuing each sequence from its cached length. The block attends causally to
    /// itself and to every cached position of its own sequence; its keys and values are appended
    /// to `cache`. Sequences may have different cached lengths (after
    /// [`KvCache::truncate_seq`]). Cost: the new positions only, with attention over
    /// `max(lengths) + new` positions.
    ///
    /// Equal to the matching positions of [`forward`](Self::forward) over the whole sequence.
    ///
    /// # Shapes
    /// - `x`: `[batch, new, d_model]`, `batch` the cache's
    /// - output: `[batch, new, d_model]`
    ///
    /// # Errors
    /// [`NnError::NotCausal`], [`NnError::InputShape`], [`NnError::BatchMismatch`],
    /// [`NnError::CacheLayout`], [`NnError::CapacityTooLarge`], and [`NnError::CacheOverflow`]
    /// when a sequence would pass the cache capacity. On error the cache is unchanged.
    pub fn forward_cached(&self, x: Tensor<3>, cache: &mut KvCache) -> NnResult<Tensor<3>> {
        if !self.causal {
            return Err(NnError::NotCausal);
        }
        let [batch, new, _] = self.check_input(&x)?;
        self.check_cache(cache, batch)?;
        cache.check_room(new)?;

        let span = cache.span(new);
        let attend_len = cache.len() + new;
        let mask = match &span {
            Span::Uniform { .. } if new == 1 => None,
            // [1, 1, new, attend_len]
            Span::Uniform { start, .. } => {
                Some(block_mask(&[*start], new, attend_len, &x.device()))
            }
            // [batch, 1, new, attend_len]
            Span::PerSequence { starts, .. } => {
                Some(block_mask(starts, new, attend_len, &x.device()))
            }
        };
        let (mut x, rope) = self.positions.prepare(x, &span);
        for (block, layer) in self.blocks.iter().zip(cache.layers_mut()) {
            x = block.forward_cached(x, rope.as_ref(), layer, &span, attend_len, mask.clone());
        }
        cache.advance(new);
        Ok(self.norm.forward_with(x, Some(self.norm_eps)))
    }

    /// Checks `x` is `[batch ≥ 1, time ≥ 1, d_model]` and returns its dims.
    /// [`forward_cached`](Self::forward_cached) over a ragged block: sequence `b` appends only
    /// the first `lens[b]` positions of its row (0: a finished sequence, left as it is); the
    /// rest of the row is padding whose outputs are unspecified and whose keys and values are
    /// not kept. Only the real positions need room in the cache, so a sequence at the end of
    /// its capacity can sit in a batch with a wider block. The real positions equal running
    /// each sequence alone.
    ///
    /// # Shapes
    /// - `x`: `[batch, width, d_model]`, `batch` the cache's, `width ≥ max(lens)`
    /// - `lens`: `[batch]`
    /// - output: `[batch, width, d_model]`
    ///
    /// # Errors
    /// As [`forward_cached`](Self::forward_cached), and [`NnError::RowLengths`] when `lens`
    /// does not give one length (at most `width`) per sequence. On error the cache is unchanged.
    pub fn forward_cached_ragged(
        &self,
        x: Tensor<3>,
        lens: &[usize],
        cache: &mut KvCache,
    ) -> NnResult<Tensor<3>> {
        if !self.causal {
            return Err(NnError::NotCausal);
        }
        let [batch, width, _] = self.check_input(&x)?;
        self.check_cache(cache, batch)?;
        if lens.len() != batch || lens.iter().any(|&l| l > width) {
            return Err(NnError::RowLengths {
                batch,
                width,
                lens: lens.to_vec(),
            });
        }
        cache.check_room_ragged(lens)?;
        let uniform = lens.iter().all(|&l| l == width);
        if uniform {
            return self.forward_cached(x, cache);
        }
        let starts = cache.lengths().to_vec();
        let attend_len = (cache.len() + width).min(cache.capacity());
        // [batch, 1, width, attend_len]
        let mask = block_mask(&starts, width, attend_len, &x.device());
        let span = Span::PerSequence {
            starts,
            len: width,
            limit: cache.capacity(),
        };
        let (mut x, rope) = self.positions.prepare(x, &span);
        for (block, layer) in self.blocks.iter().zip(cache.layers_mut()) {
            x = block.forward_cached(
                x,
                rope.as_ref(),
                layer,
                &span,
                attend_len,
                Some(mask.clone()),
            );
        }
        cache.advance_ragged(lens);
        Ok(self.norm.forward_with(x, Some(self.norm_eps)))
    }

    fn check_input(&self, x: &Tensor<3>) -> NnResult<[usize; 3]> {
        let shape = x.dims();
        let [batch, time, d_model] = shape;
        if batch == 0 || time == 0 || d_model != self.d_model {
            return Err(NnError::InputShape {
                shape,
                d_model: self.d_model,
            });
        }
        Ok(shape)
    }

    fn check_cache(&self, cache: &KvCache, batch: usize) -> NnResult<()> {
        if (cache.n_layers(), cache.n_heads(), cache.head_dim())
            != (self.n_layers(), self.n_heads, self.head_dim())
        {
            return Err(NnError::CacheLayout {
                cache_layers: cache.n_layers(),
                cache_heads: cache.n_heads(),
                cache_head_dim: cache.head_dim(),
                layers: self.n_layers(),
                heads: self.n_heads,
                head_dim: self.head_dim(),
            });
        }
        if cache.batch_size() != batch {
            return Err(NnError::BatchMismatch {
                input: batch,
                cache: cache.batch_size(),
            });
        }
        if cache.capacity() > self.max_seq_len {
            return Err(NnError::CapacityTooLarge {
                capacity: cache.capacity(),
                max_seq_len: self.max_seq_len,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::tensor::TensorData;

    const TOL: f32 = 1e-4;

    /// Standard-normal inputs from a fixed seed, generated on the host so that tests running in
    /// parallel (which share the backend's global RNG) stay reproducible.
    fn randn(shape: [usize; 3], seed: u64, device: &Device) -> Tensor<3> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut uniform = || {
            // xorshift64*
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            ((state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
        };
        let n = shape.iter().product::<usize>();
        let values: Vec<f32> = (0..n)
            .map(|_| {
                let (u1, u2) = (uniform(), uniform());
                ((-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()) as f32
            })
            .collect();
        Tensor::from_data(TensorData::new(values, shape), device)
    }

    fn max_diff(a: &Tensor<3>, b: &Tensor<3>) -> f32 {
        assert_eq!(a.dims(), b.dims());
        (a.clone() - b.clone()).abs().max().into_scalar()
    }

    fn build(config: &TransformerConfig) -> (Transformer, Device) {
        let device = Device::flex();
        device.seed(7);
        let model = config.init(&device).expect("valid config");
        (model, device)
    }

    /// Every combination of positions, norm and MLP appears at least once.
    fn variants() -> Vec<TransformerConfig> {
        use {MlpKind::*, NormKind::*, PositionKind::*};
        [
            (Rotary, Rms, SwiGlu),
            (Rotary, Layer, Gelu),
            (Learned, Layer, Gelu),
            (Learned, Rms, SwiGlu),
        ]
        .into_iter()
        .map(|(p, n, m)| {
            TransformerConfig::tiny()
                .with_positions(p)
                .with_norm(n)
                .with_mlp(m)
        })
        .collect()
    }

    fn fmt(diffs: &[f32]) -> String {
        let parts: Vec<String> = diffs.iter().map(|d| format!("{d:.2e}")).collect();
        parts.join(", ")
    }

    fn name(c: &TransformerConfig) -> String {
        format!("{:?}/{:?}/{:?}", c.positions, c.norm, c.mlp)
    }

    /// Feeds `x` to the cache in blocks of the given sizes and concatenates the outputs.
    fn run_blocks(
        model: &Transformer,
        x: &Tensor<3>,
        sizes: &[usize],
        cache: &mut KvCache,
    ) -> Tensor<3> {
        let mut start = 0;
        let mut outs = Vec::new();
        for &n in sizes {
            let block = x.clone().narrow(1, start, n);
            outs.push(
                model
                    .forward_cached(block, cache)
                    .expect("fits in the cache"),
            );
            start += n;
        }
        Tensor::cat(outs, 1)
    }

    #[test]
    fn cached_steps_equal_full_causal_forward() {
        for config in variants() {
            let (model, device) = build(&config);
            let x = randn([2, 12, 32], 1, &device);
            let full = model.forward(x.clone(), None).expect("forward");
            let mut cache = model.new_cache(2, 16, &device).expect("cache");
            let steps = run_blocks(&model, &x, &[1; 12], &mut cache);
            let diff = max_diff(&full, &steps);
            eprintln!("step-by-step vs full [{}]: {diff:.2e}", name(&config));
            assert!(diff <= TOL, "{}: {diff}", name(&config));
            assert_eq!(cache.lengths(), &[12, 12]);
        }
    }

    #[test]
    fn cached_blocks_equal_full_causal_forward() {
        for config in variants() {
            let (model, device) = build(&config);
            let x = randn([1, 8, 32], 2, &device);
            let full = model.forward(x.clone(), None).expect("forward");
            let mut cache = model.new_cache(1, 8, &device).expect("cache");
            let blocks = run_blocks(&model, &x, &[3, 4, 1], &mut cache);
            let diff = max_diff(&full, &blocks);
            eprintln!("blocks 3+4+1 vs full [{}]: {diff:.2e}", name(&config));
            assert!(diff <= TOL, "{}: {diff}", name(&config));
        }
    }

    #[test]
    fn truncate_then_extend_equals_never_adding_the_junk() {
        for config in variants() {
            let (model, device) = build(&config);
            let prefix = randn([1, 5, 32], 3, &device);
            let junk = randn([1, 6, 32], 4, &device);
            let cont = randn([1, 3, 32], 5, &device);
            let last = randn([1, 1, 32], 6, &device);

            let mut clean = model.new_cache(1, 16, &device).expect("cache");
            model
                .forward_cached(prefix.clone(), &mut clean)
                .expect("prefix");
            let want_cont = model
                .forward_cached(cont.clone(), &mut clean)
                .expect("cont");
            let want_last = model
                .forward_cached(last.clone(), &mut clean)
                .expect("last");

            let mut rolled = model.new_cache(1, 16, &device).expect("cache");
            model
                .forward_cached(prefix.clone(), &mut rolled)
                .expect("prefix");
            model.forward_cached(junk, &mut rolled).expect("junk");
            rolled.truncate(5);
            assert_eq!(rolled.lengths(), &[5]);
            let got_cont = model
                .forward_cached(cont.clone(), &mut rolled)
                .expect("cont");
            let got_last = model
                .forward_cached(last.clone(), &mut rolled)
                .expect("last");

            let full = model
                .forward(Tensor::cat(vec![prefix, cont, last], 1), None)
                .expect("forward");
            let diffs = [
                max_diff(&want_cont, &got_cont),
                max_diff(&want_last, &got_last),
                max_diff(&full.clone().narrow(1, 5, 3), &got_cont),
                max_diff(&full.narrow(1, 8, 1), &got_last),
            ];
            eprintln!("truncate-then-extend [{}]: {}", name(&config), fmt(&diffs));
            assert!(
                diffs.iter().all(|&d| d <= TOL),
                "{}: {diffs:?}",
                name(&config)
            );
        }
    }

    /// Sequence 1 is rolled back further than sequence 0; stale junk stays in its cache rows
    /// inside the attended range and must be masked.
    #[test]
    fn batch_with_different_lengths_equals_sequences_alone() {
        for config in variants() {
            let (model, device) = build(&config);
            let x0 = randn([1, 10, 32], 7, &device);
            let x1 = randn([1, 6, 32], 8, &device);
            let junk = randn([1, 4, 32], 9, &device);

            let mut cache = model.new_cache(2, 16, &device).expect("cache");
            let first = Tensor::cat(
                vec![
                    x0.clone().narrow(1, 0, 6),
                    Tensor::cat(vec![x1.clone().narrow(1, 0, 2), junk], 1),
                ],
                0,
            );
            model
                .forward_cached(first, &mut cache)
                .expect("first block");
            cache.truncate_seq(1, 2).expect("sequence 1 exists");
            assert_eq!(cache.lengths(), &[6, 2]);

            let second = Tensor::cat(
                vec![x0.clone().narrow(1, 6, 3), x1.clone().narrow(1, 2, 3)],
                0,
            );
            let out_second = model
                .forward_cached(second, &mut cache)
                .expect("second block");
            assert_eq!(cache.lengths(), &[9, 5]);
            let third = Tensor::cat(
                vec![x0.clone().narrow(1, 9, 1), x1.clone().narrow(1, 5, 1)],
                0,
            );
            let out_third = model
                .forward_cached(third, &mut cache)
                .expect("third block");
            assert_eq!(cache.lengths(), &[10, 6]);

            let alone0 = model.forward(x0.clone(), None).expect("forward x0");
            let alone1 = model.forward(x1.clone(), None).expect("forward x1");
            // Batch-1 cached run of sequence 1 with its own rollback.
            let mut single = model.new_cache(1, 16, &device).expect("cache");
            run_blocks(&model, &x1, &[2], &mut single);
            let cached1 = run_blocks(&model, &x1.clone().narrow(1, 2, 4), &[3, 1], &mut single);

            let row = |t: &Tensor<3>, b: usize| t.clone().narrow(0, b, 1);
            let diffs = [
                max_diff(&row(&out_second, 0), &alone0.clone().narrow(1, 6, 3)),
                max_diff(&row(&out_second, 1), &alone1.clone().narrow(1, 2, 3)),
                max_diff(&row(&out_third, 0), &alone0.narrow(1, 9, 1)),
                max_diff(&row(&out_third, 1), &alone1.narrow(1, 5, 1)),
                max_diff(
                    &Tensor::cat(vec![row(&out_second, 1), row(&out_third, 1)], 1),
                    &cached1,
                ),
            ];
            eprintln!("ragged batch vs alone [{}]: {}", name(&config), fmt(&diffs));
            assert!(
                diffs.iter().all(|&d| d <= TOL),
                "{}: {diffs:?}",
                name(&config)
            );
        }
    }

    #[test]
    fn bidirectional_forward_ignores_padded_inputs() {
        for config in variants() {
            let config = config.with_causal(false);
            let (model, device) = build(&config);
            let x = randn([2, 8, 32], 10, &device);
            let mask = Tensor::<2, Bool>::from_data(
                TensorData::new(
                    [
                        [true; 8],
                        [true, true, true, true, true, false, false, false],
                    ]
                    .concat(),
                    [2, 8],
                ),
                &device,
            );
            let out = model
                .forward(x.clone(), Some(mask.clone()))
                .expect("forward");

            // New values at the padded positions of sequence 1.
            let x_pad = x
                .clone()
                .slice_assign([1..2, 5..8, 0..32], randn([1, 3, 32], 11, &device));
            let out_pad = model.forward(x_pad, Some(mask.clone())).expect("forward");
            let padded = max_diff(
                &out.clone().narrow(0, 0, 1),
                &out_pad.clone().narrow(0, 0, 1),
            )
            .max(max_diff(
                &out.clone().slice([1..2, 0..5]),
                &out_pad.slice([1..2, 0..5]),
            ));

            // The real part of sequence 1 alone, unpadded.
            let alone = model
                .forward(x.clone().slice([1..2, 0..5]), None)
                .expect("forward alone");
            let vs_alone = max_diff(&out.clone().slice([1..2, 0..5]), &alone);

            // Bidirectional: a change at the last real position moves the first output.
            let x_late = x
                .clone()
                .slice_assign([0..1, 7..8, 0..32], randn([1, 1, 32], 12, &device));
            let out_late = model.forward(x_late, Some(mask)).expect("forward");
            let first_moves = max_diff(&out.narrow(1, 0, 1), &out_late.narrow(1, 0, 1));

            eprintln!(
                "bidirectional padding [{}]: padded-change {padded:.2e}, vs alone {vs_alone:.2e}, \
                 late-change moves t=0 by {first_moves:.2e}",
                name(&config)
            );
            assert!(padded <= 1e-5, "{}: {padded}", name(&config));
            assert!(vs_alone <= TOL, "{}: {vs_alone}", name(&config));
            assert!(first_moves > 1e-3, "{}: {first_moves}", name(&config));
        }
    }

    #[test]
    fn causal_forward_does_not_look_ahead() {
        for config in variants() {
            let (model, device) = build(&config);
            let x = randn([1, 10, 32], 13, &device);
            let out = model.forward(x.clone(), None).expect("forward");
            let x_late = x.slice_assign([0..1, 6..10, 0..32], randn([1, 4, 32], 14, &device));
            let out_late = model.forward(x_late, None).expect("forward");
            let before = max_diff(
                &out.clone().narrow(1, 0, 6),
                &out_late.clone().narrow(1, 0, 6),
            );
            let after = max_diff(&out.narrow(1, 6, 4), &out_late.narrow(1, 6, 4));
            eprintln!(
                "causal look-ahead [{}]: t<6 moved {before:.2e}, t>=6 moved {after:.2e}",
                name(&config)
            );
            assert!(before <= 1e-6, "{}: {before}", name(&config));
            assert!(after > 1e-3, "{}: {after}", name(&config));
        }
    }

    #[test]
    fn causal_padded_batch_equals_unpadded_sequences() {
        let (model, device) = build(&TransformerConfig::tiny());
        let x = randn([2, 7, 32], 15, &device);
        let mask = Tensor::<2, Bool>::from_data(
            TensorData::new(
                [[true; 7], [true, true, true, true, false, false, false]].concat(),
                [2, 7],
            ),
            &device,
        );
        let out = model.forward(x.clone(), Some(mask)).expect("forward");
        let alone = model.forward(x.slice([1..2, 0..4]), None).expect("forward");
        let diff = max_diff(&out.slice([1..2, 0..4]), &alone);
        eprintln!("causal right-padding vs alone: {diff:.2e}");
        assert!(diff <= TOL, "{diff}");
    }

    #[test]
    fn capacity_overflow_is_an_error() {
        let config = TransformerConfig::tiny();
        let (model, device) = build(&config);
        let x = randn([1, 7, 32], 16, &device);
        let mut cache = model.new_cache(1, 6, &device).expect("cache");
        model
            .forward_cached(x.clone().narrow(1, 0, 4), &mut cache)
            .expect("fits");
        let err = model
            .forward_cached(x.clone().narrow(1, 4, 3), &mut cache)
            .expect_err("4 + 3 > 6");
        assert_eq!(
            err,
            NnError::CacheOverflow {
                sequence: 0,
                length: 4,
                new: 3,
                capacity: 6
            }
        );
        assert_eq!(
            cache.lengths(),
            &[4],
            "a failed call leaves the cache as it was"
        );
        model
            .forward_cached(x.clone().narrow(1, 4, 2), &mut cache)
            .expect("exactly full");
        assert!(
            model
                .forward_cached(x.clone().narrow(1, 6, 1), &mut cache)
                .is_err()
        );

        assert_eq!(
            model
                .new_cache(1, 65, &device)
                .expect_err("past max_seq_len"),
            NnError::CapacityTooLarge {
                capacity: 65,
                max_seq_len: 64
            }
        );
        assert_eq!(
            KvCache::new(&config, 1, 65, &device).expect_err("past max_seq_len"),
            NnError::CapacityTooLarge {
                capacity: 65,
                max_seq_len: 64
            }
        );
        assert_eq!(
            model
                .forward(randn([1, 65, 32], 17, &device), None)
                .expect_err("too long"),
            NnError::SequenceTooLong {
                time: 65,
                max_seq_len: 64
            }
        );
    }

    #[test]
    fn misuse_is_reported_not_panicked() {
        let (model, device) = build(&TransformerConfig::tiny());
        let mut cache = model.new_cache(2, 8, &device).expect("cache");
        assert_eq!(
            model
                .forward_cached(randn([1, 1, 32], 18, &device), &mut cache)
                .map(|_| ()),
            Err(NnError::BatchMismatch { input: 1, cache: 2 })
        );
        assert!(matches!(
            model.forward_cached(randn([2, 1, 16], 19, &device), &mut cache),
            Err(NnError::InputShape { .. })
        ));
        let mask = Tensor::<2, Bool>::from_data(TensorData::new(vec![true; 3], [1, 3]), &device);
        assert_eq!(
            model
                .forward(randn([1, 4, 32], 20, &device), Some(mask))
                .map(|_| ()),
            Err(NnError::MaskShape {
                mask: [1, 3],
                batch: 1,
                time: 4
            })
        );
        let other = TransformerConfig::tiny().with_n_layers(3);
        let mut wrong = KvCache::new(&other, 2, 8, &device).expect("cache");
        assert!(matches!(
            model.forward_cached(randn([2, 1, 32], 21, &device), &mut wrong),
            Err(NnError::CacheLayout { .. })
        ));
        let (encoder, _) = build(&TransformerConfig::tiny().with_causal(false));
        assert_eq!(
            encoder
                .forward_cached(randn([2, 1, 32], 22, &device), &mut cache)
                .map(|_| ()),
            Err(NnError::NotCausal)
        );
        assert_eq!(cache.lengths(), &[0, 0]);
    }

    #[test]
    fn invalid_configs_are_rejected() {
        let device = Device::flex();
        let bad = [
            TransformerConfig::tiny().with_n_heads(5),
            TransformerConfig::tiny()
                .with_d_model(36)
                .with_n_heads(4)
                .with_n_layers(0),
            TransformerConfig::tiny().with_d_model(12).with_n_heads(4),
            TransformerConfig::tiny().with_dropout(1.0),
            TransformerConfig::tiny().with_norm_eps(0.0),
        ];
        for config in bad {
            let err = config.init(&device).map(|_| ()).expect_err("invalid");
            assert!(matches!(err, NnError::InvalidConfig { .. }), "{err}");
        }
        // An odd head width is fine without rotary positions.
        TransformerConfig::tiny()
            .with_d_model(12)
            .with_n_heads(4)
            .with_positions(PositionKind::Learned)
            .init(&device)
            .expect("valid");
    }

    #[test]
    fn selected_layers_share_parameters_and_run() {
        let (model, device) = build(&TransformerConfig::tiny().with_n_layers(4));
        let draft = model.select_layers(&[0, 3]).expect("layers exist");
        assert_eq!(draft.n_layers(), 2);
        assert_eq!(
            draft.blocks[1].attention.qkv.weight.id,
            model.blocks[3].attention.qkv.weight.id
        );
        let mut cache = draft.new_cache(1, 4, &device).expect("cache");
        let x = randn([1, 3, 32], 23, &device);
        let full = draft.forward(x.clone(), None).expect("forward");
        let cached = draft.forward_cached(x, &mut cache).expect("cached");
        assert!(max_diff(&full, &cached) <= TOL);
        assert!(model.select_layers(&[4]).is_err());
        assert!(model.select_layers(&[]).is_err());
    }

    #[test]
    fn trains_on_an_autodiff_device() {
        for config in variants() {
            let device = Device::flex().autodiff();
            let model = config.clone().init(&device).expect("valid config");
            let x = randn([2, 5, 32], 24, &device);
            let mask = Tensor::<2, Bool>::from_data(
                TensorData::new(
                    [[true; 5], [true, true, true, false, false]].concat(),
                    [2, 5],
                ),
                &device,
            );
            let out = model.forward(x, Some(mask)).expect("forward");
            let grads = out.square().mean().backward();
            let grad = model.blocks[0]
                .attention
                .qkv
                .weight
                .grad(&grads)
                .expect("qkv weight has a gradient");
            let norm: f32 = grad.abs().sum().into_scalar();
            assert!(norm.is_finite() && norm > 0.0, "{}: {norm}", name(&config));
        }
    }
}
