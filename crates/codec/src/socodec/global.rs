//! The global acoustic encoder: a small ECAPA-TDNN-style network (Desplanques et al. 2020) that
//! turns an 80-bin log-mel of a reference recording into one utterance vector, and
//! Clip&Shuffle, the augmentation SoCodec feeds it in training so that it cannot carry the
//! time-variant content (the words) of the clip it is paired with.
//!
//! ```text
//! log-mel [B, n_mels, T] → conv k5 → 3 × SE-Res block (1×1, dilated k3 d = 2, 3, 4, 1×1, SE)
//!   → concat → 1×1 conv → attentive statistics pooling (μ, σ per channel) → linear → [B, out]
//! ```

use burn::module::Module;
use burn::nn::PaddingConfig1d;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::{relu, sigmoid, softmax};
use burn::tensor::{Device, Tensor};

use super::blocks::conv;
use crate::quant::SplitMix64;

/// Squeeze-and-excitation residual block with a dilated convolution.
#[derive(Module, Debug)]
pub struct SeResBlock {
    /// 1×1 in.
    pub pre: Conv1d,
    /// Dilated kernel-3 convolution.
    pub dilated: Conv1d,
    /// 1×1 out.
    pub post: Conv1d,
    /// SE squeeze.
    pub se_down: Linear,
    /// SE excite.
    pub se_up: Linear,
}

impl SeResBlock {
    fn new(channels: usize, dilation: usize, device: &Device) -> Self {
        Self {
            pre: conv(channels, channels, 1, device),
            dilated: Conv1dConfig::new(channels, channels, 3)
                .with_dilation(dilation)
                .with_padding(PaddingConfig1d::Explicit(dilation, dilation))
                .init(device),
            post: conv(channels, channels, 1, device),
            se_down: LinearConfig::new(channels, (channels / 4).max(1)).init(device),
            se_up: LinearConfig::new((channels / 4).max(1), channels).init(device),
        }
    }

    /// # Shapes
    /// - `x`: `[batch, channels, time]` → same
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let h = relu(self.pre.forward(x.clone()));
        let h = relu(self.dilated.forward(h));
        let h = self.post.forward(h);
        let [b, c, _] = h.dims();
        let s = h.clone().mean_dim(2).reshape([b, c]); // [batch, channels]
        let s = sigmoid(self.se_up.forward(relu(self.se_down.forward(s)))).reshape([b, c, 1]);
        x + h * s
    }
}

/// The global encoder (see the module documentation).
#[derive(Module, Debug)]
pub struct GlobalEncoder {
    /// Kernel-5 input convolution over the mel bands.
    pub input: Conv1d,
    /// SE-Res blocks with dilations 2, 3, 4.
    pub blocks: Vec<SeResBlock>,
    /// 1×1 convolution over the concatenated block outputs.
    pub merge: Conv1d,
    /// Attention hidden layer of the statistics pooling.
    pub attention_hidden: Conv1d,
    /// Attention logits, one per channel and frame.
    pub attention: Conv1d,
    /// `[μ; σ]` → the utterance vector.
    pub output: Linear,
}

impl GlobalEncoder {
    /// An encoder of `channels` channels from `n_mels` bands to `out` dimensions.
    pub fn new(n_mels: usize, channels: usize, out: usize, device: &Device) -> Self {
        let merged = 3 * channels;
        Self {
            input: conv(n_mels, channels, 5, device),
            blocks: [2, 3, 4]
                .into_iter()
                .map(|d| SeResBlock::new(channels, d, device))
                .collect(),
            merge: conv(merged, merged, 1, device),
            attention_hidden: conv(merged, channels / 2, 1, device),
            attention: conv(channels / 2, merged, 1, device),
            output: LinearConfig::new(2 * merged, out).init(device),
        }
    }

    /// The utterance vector of a log-mel.
    ///
    /// # Shapes
    /// - `log_mel`: `[batch, n_mels, frames]` → `[batch, out]`
    pub fn forward(&self, log_mel: Tensor<3>) -> Tensor<2> {
        let mut h = relu(self.input.forward(log_mel));
        let mut outs = Vec::with_capacity(self.blocks.len());
        for block in &self.blocks {
            h = block.forward(h);
            outs.push(h.clone());
        }
        let h = relu(self.merge.forward(Tensor::cat(outs, 1))); // [batch, 3C, frames]
        let w = self
            .attention
            .forward(self.attention_hidden.forward(h.clone()).tanh());
        let w = softmax(w, 2); // over frames, per channel
        let mean = (h.clone() * w.clone()).sum_dim(2); // [batch, 3C, 1]
        let second = (h.clone() * h * w).sum_dim(2);
        let std = (second - mean.clone() * mean.clone())
            .clamp_min(1e-6)
            .sqrt();
        let [b, c, _] = mean.dims();
        let stats = Tensor::cat(vec![mean.reshape([b, c]), std.reshape([b, c])], 1);
        self.output.forward(stats)
    }
}

/// Clip&Shuffle (SoCodec §3.3): a random crop of 25–75 % of the utterance, cut into slices of
/// `slice` frames, the slices shuffled, and the result tiled (or cut) to exactly `out_frames`
/// frames.
///
/// # Shapes
/// - `log_mel`: `[frames, n_mels]` row-major → `[out_frames, n_mels]` row-major
///
/// Returns an empty vector when `log_mel` has no frames or `n_mels` is 0.
pub fn clip_and_shuffle(
    log_mel: &[f32],
    n_mels: usize,
    slice: usize,
    out_frames: usize,
    rng: &mut SplitMix64,
) -> Vec<f32> {
    let frames = log_mel.len().checked_div(n_mels).unwrap_or(0);
    if frames == 0 || slice == 0 || out_frames == 0 {
        return Vec::new();
    }
    // crop length uniform in [25 %, 75 %] of the utterance (at least one frame)
    let lo = frames.div_ceil(4).max(1);
    let hi = (3 * frames / 4).max(lo);
    let len = lo + rng.below(hi - lo + 1);
    let start = rng.below(frames - len + 1);
    let mut slices: Vec<(usize, usize)> = (0..len.div_ceil(slice))
        .map(|i| (start + i * slice, (start + ((i + 1) * slice).min(len))))
        .collect();
    for i in (1..slices.len()).rev() {
        slices.swap(i, rng.below(i + 1));
    }
    let order: Vec<usize> = slices.iter().flat_map(|&(a, b)| a..b).collect();
    (0..out_frames)
        .flat_map(|t| {
            let f = order[t % order.len()];
            log_mel[f * n_mels..(f + 1) * n_mels].iter().copied()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_encoder_gives_one_vector_per_utterance_of_any_length() {
        let device = Device::flex();
        let enc = GlobalEncoder::new(10, 16, 12, &device);
        for frames in [7, 50] {
            let x = Tensor::<3>::random(
                [3, 10, frames],
                burn::tensor::Distribution::Normal(0.0, 1.0),
                &device,
            );
            assert_eq!(enc.forward(x).dims(), [3, 12]);
        }
    }

    #[test]
    fn clip_and_shuffle_takes_whole_slices_of_one_crop_in_a_new_order() {
        // frame f holds the value f in its single band
        let mel: Vec<f32> = (0..400).map(|f| f as f32).collect();
        let mut moved = 0;
        for seed in 0..20 {
            let mut rng = SplitMix64::new(seed);
            let out = clip_and_shuffle(&mel, 1, 100, 300, &mut rng);
            assert_eq!(out.len(), 300);
            let distinct: std::collections::BTreeSet<i64> = out.iter().map(|&v| v as i64).collect();
            let (lo, hi) = (*distinct.first().unwrap(), *distinct.last().unwrap());
            // one contiguous crop of 25–75 % of the 400 frames
            assert!((100..=300).contains(&distinct.len()), "{}", distinct.len());
            assert_eq!((hi - lo + 1) as usize, distinct.len());
            // inside a slice frames stay consecutive
            let steps = out.windows(2).filter(|w| w[1] != w[0] + 1.0).count();
            assert!(steps <= 2 * (300 / 100 + 4), "{steps}");
            if out[0] as i64 != lo {
                moved += 1;
            }
        }
        assert!(
            moved > 5,
            "the slices are hardly ever shuffled ({moved} of 20)"
        );
    }
}
