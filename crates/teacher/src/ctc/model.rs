//! The CTC acoustic model: convolutional subsampling and a bidirectional transformer over
//! log-mel frames, with a linear classifier over characters and the CTC blank
//! (Graves et al. 2006; the conv-subsampled transformer encoder as in Dong et al. 2018,
//! "Speech-Transformer", §3.1, and Gulati et al. 2020, "Conformer", §2, without the
//! convolution module).
//!
//! ```text
//! log-mel [B, T, 80] @100 Hz
//! └─ conv1d(80→d, k3, s1) ─ GELU ─ zero padded frames
//! └─ conv1d(d→d, k3, s2)  ─ GELU                    [B, ⌈T/2⌉, d] @50 Hz (the codec frame rate)
//! └─ dropout ─ n_layers × pre-norm bidirectional block (padding mask) ─ final norm
//! └─ linear(d → vocab)                               logits [B, ⌈T/2⌉, vocab], class 0 = blank
//! ```
//!
//! Hidden states are numbered like Hugging Face's `output_hidden_states`: 0 is the subsampled
//! input of the transformer, `i ≥ 1` the output of layer `i`. `voxspec-nn` exposes no per-layer
//! outputs, so hidden state `i ≥ 1` is the stack of the first `i` layers followed by the
//! (shared) final norm — for `i = n_layers` exactly the input of the classifier.

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig1d};
use burn::tensor::activation::gelu;
use burn::tensor::{Bool, Device, Tensor, TensorData};
use voxspec_nn::{MlpKind, NormKind, PositionKind, Transformer, TransformerConfig};

use crate::error::TeacherError;

/// Id of the CTC blank: the tokenizer's `<pad>` token, which never occurs in a transcript.
pub const BLANK: u32 = 0;

/// Configuration of a [`CtcModel`].
#[derive(Config, Debug)]
pub struct CtcModelConfig {
    /// Input features per frame (mel bands).
    #[config(default = 80)]
    pub n_mels: usize,
    /// Output classes: the character vocabulary, blank (id 0) included.
    #[config(default = 64)]
    pub vocab_size: usize,
    /// Kernel of both subsampling convolutions (odd).
    #[config(default = 3)]
    pub conv_kernel: usize,
    /// Dropout after subsampling (inside the transformer, `encoder.dropout` applies).
    #[config(default = 0.1)]
    pub input_dropout: f64,
    /// The bidirectional transformer (its `causal` must be false).
    #[config(
        default = "TransformerConfig::new().with_causal(false).with_d_model(144).with_n_heads(4).with_n_layers(4).with_d_ff(384)"
    )]
    pub encoder: TransformerConfig,
}

impl CtcModelConfig {
    /// The teacher of `preset`'s size over `vocab_size` characters ([`tiny`](Self::tiny),
    /// [`small`](Self::small), [`base`](Self::base)).
    pub fn preset(preset: voxspec_nn::Preset, vocab_size: usize) -> Self {
        match preset {
            voxspec_nn::Preset::Tiny => Self::tiny(vocab_size),
            voxspec_nn::Preset::Small => Self::small(vocab_size),
            voxspec_nn::Preset::Base => Self::base(vocab_size),
        }
    }

    /// Sized for training on 2 CPU cores (the bundled corpus): width 144, 4 heads, 4 layers,
    /// SwiGLU width 384, rotary positions, RMSNorm (≈1.2 M parameters with a 40-class vocabulary).
    pub fn small(vocab_size: usize) -> Self {
        Self::new().with_vocab_size(vocab_size)
    }

    /// For LibriTTS-scale data: width 384, 6 heads, 12 layers, SwiGLU width 1024 (≈ 21 M).
    pub fn base(vocab_size: usize) -> Self {
        Self::small(vocab_size).with_encoder(
            Self::bidirectional()
                .with_d_model(384)
                .with_n_heads(6)
                .with_n_layers(12)
                .with_d_ff(1024),
        )
    }

    /// For tests: width 32, 4 heads, 2 layers, SwiGLU width 64, no dropout.
    pub fn tiny(vocab_size: usize) -> Self {
        Self::small(vocab_size)
            .with_input_dropout(0.0)
            .with_encoder(
                Self::bidirectional()
                    .with_d_model(32)
                    .with_n_heads(4)
                    .with_n_layers(2)
                    .with_d_ff(64)
                    .with_dropout(0.0),
            )
    }

    /// The defaults shared by the presets: bidirectional, rotary, RMSNorm, SwiGLU, 2048
    /// positions (41 s at 50 Hz).
    fn bidirectional() -> TransformerConfig {
        TransformerConfig::new()
            .with_causal(false)
            .with_positions(PositionKind::Rotary)
            .with_norm(NormKind::Rms)
            .with_mlp(MlpKind::SwiGlu)
            .with_max_seq_len(2048)
    }

    /// Output frames for `frames` input frames: `⌈frames / 2⌉` (stride-2 convolution padded by
    /// `conv_kernel / 2`).
    pub fn output_frames(&self, frames: usize) -> usize {
        subsampled_frames(frames, self.conv_kernel)
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`TeacherError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<(), TeacherError> {
        let bad = |field: &'static str, reason: String| {
            Err(TeacherError::InvalidConfig { field, reason })
        };
        if self.n_mels == 0 {
            return bad("n_mels", "must be at least 1".into());
        }
        if self.vocab_size < 2 {
            return bad(
                "vocab_size",
                format!("{} leaves no class beside the blank", self.vocab_size),
            );
        }
        if self.conv_kernel == 0 || self.conv_kernel.is_multiple_of(2) {
            return bad(
                "conv_kernel",
                format!("must be odd, got {}", self.conv_kernel),
            );
        }
        if !(0.0..1.0).contains(&self.input_dropout) {
            return bad(
                "input_dropout",
                format!("must lie in [0, 1), got {}", self.input_dropout),
            );
        }
        if self.encoder.causal {
            return bad("encoder.causal", "the CTC encoder is bidirectional".into());
        }
        self.encoder.validate()?;
        Ok(())
    }

    /// Builds the model with fresh weights.
    ///
    /// # Errors
    /// [`TeacherError::InvalidConfig`] or [`TeacherError::Nn`] when the config is invalid.
    pub fn init(&self, device: &Device) -> Result<CtcModel, TeacherError> {
        self.validate()?;
        let d = self.encoder.d_model;
        let pad = PaddingConfig1d::Explicit(self.conv_kernel / 2, self.conv_kernel / 2);
        Ok(CtcModel {
            conv_in: Conv1dConfig::new(self.n_mels, d, self.conv_kernel)
                .with_padding(pad.clone())
                .init(device),
            conv_down: Conv1dConfig::new(d, d, self.conv_kernel)
                .with_stride(2)
                .with_padding(pad)
                .init(device),
            dropout: DropoutConfig::new(self.input_dropout).init(),
            encoder: self.encoder.init(device)?,
            head: LinearConfig::new(d, self.vocab_size).init(device),
            conv_kernel: self.conv_kernel,
        })
    }
}

/// Frames after a stride-2 convolution of odd `kernel` padded by `kernel / 2` on both sides.
fn subsampled_frames(frames: usize, kernel: usize) -> usize {
    if frames == 0 {
        0
    } else {
        (frames + 2 * (kernel / 2) - kernel) / 2 + 1
    }
}

/// Logits of a batch with the valid length of each utterance.
#[derive(Debug, Clone)]
pub struct CtcOutput {
    /// `[batch, frames, vocab]` at 50 Hz; rows past `lengths[b]` are padding.
    pub logits: Tensor<3>,
    /// Valid output frames per utterance.
    pub lengths: Vec<usize>,
}

/// The CTC acoustic model (see the module documentation).
#[derive(Module, Debug)]
pub struct CtcModel {
    /// `n_mels → d`, stride 1.
    pub conv_in: Conv1d,
    /// `d → d`, stride 2.
    pub conv_down: Conv1d,
    /// After subsampling.
    pub dropout: Dropout,
    /// Bidirectional transformer.
    pub encoder: Transformer,
    /// `d → vocab`.
    pub head: Linear,
    conv_kernel: usize,
}

impl CtcModel {
    /// Number of transformer layers.
    pub fn n_layers(&self) -> usize {
        self.encoder.n_layers()
    }

    /// Width of the hidden states.
    pub fn d_model(&self) -> usize {
        self.encoder.d_model()
    }

    /// Output classes (blank included).
    pub fn vocab_size(&self) -> usize {
        self.head.weight.dims()[1]
    }

    /// Output frames for `frames` input frames (`⌈frames / 2⌉`).
    pub fn output_frames(&self, frames: usize) -> usize {
        subsampled_frames(frames, self.conv_kernel)
    }

    /// Logits over characters and blank.
    ///
    /// # Shapes
    /// - `features`: `[batch, frames, n_mels]`, zero-padded past each utterance's length
    /// - `lengths`: `[batch]` valid input frames, each `1..=frames`
    /// - returns: logits `[batch, out_frames, vocab]` with `out_frames = ⌈frames / 2⌉` and the
    ///   valid output lengths
    ///
    /// # Errors
    /// [`TeacherError::InvalidInput`] on inconsistent lengths; [`TeacherError::Nn`] when the
    /// sequence is longer than the transformer's `max_seq_len`.
    pub fn forward(
        &self,
        features: Tensor<3>,
        lengths: &[usize],
    ) -> Result<CtcOutput, TeacherError> {
        let (hidden, lengths) = self.hidden(features, lengths, self.n_layers())?;
        Ok(CtcOutput {
            logits: self.head.forward(hidden),
            lengths,
        })
    }

    /// Hidden state `layer` (0 = transformer input, `n_layers` = classifier input).
    ///
    /// # Shapes
    /// - `features`: `[batch, frames, n_mels]`, `lengths`: `[batch]`
    /// - returns: `[batch, out_frames, d_model]` and the valid output lengths
    ///
    /// # Errors
    /// As [`CtcModel::forward`], and [`TeacherError::LayerOutOfRange`] for `layer > n_layers`.
    pub fn hidden(
        &self,
        features: Tensor<3>,
        lengths: &[usize],
        layer: usize,
    ) -> Result<(Tensor<3>, Vec<usize>), TeacherError> {
        if layer > self.n_layers() {
            return Err(TeacherError::LayerOutOfRange {
                layer,
                available: self.n_layers() + 1,
            });
        }
        let (x, out_lengths, mask) = self.subsample(features, lengths)?;
        if layer == 0 {
            return Ok((x, out_lengths));
        }
        let hidden = if layer == self.n_layers() {
            self.encoder.forward(x, Some(mask))?
        } else {
            let layers: Vec<usize> = (0..layer).collect();
            self.encoder
                .select_layers(&layers)?
                .forward(x, Some(mask))?
        };
        Ok((hidden, out_lengths))
    }

    /// Convolutional subsampling: `[batch, frames, n_mels]` → `[batch, out_frames, d_model]`,
    /// the output lengths, and the output padding mask `[batch, out_frames]` (true = real).
    fn subsample(
        &self,
        features: Tensor<3>,
        lengths: &[usize],
    ) -> Result<(Tensor<3>, Vec<usize>, Tensor<2, Bool>), TeacherError> {
        let [batch, frames, _] = features.dims();
        if lengths.len() != batch || lengths.iter().any(|&l| l == 0 || l > frames) {
            return Err(TeacherError::InvalidInput {
                what: "ctc model lengths",
                reason: format!("{lengths:?} for a batch of {batch} × {frames} frames"),
            });
        }
        let device = features.device();
        // [batch, n_mels, frames]
        let x = gelu(self.conv_in.forward(features.swap_dims(1, 2)));
        // Zero the padded frames so that the strided convolution sees what it would see for
        // the utterance alone (its own zero padding): batched == one by one.
        let keep: Vec<f32> = lengths
            .iter()
            .flat_map(|&l| (0..frames).map(move |t| if t < l { 1.0 } else { 0.0 }))
            .collect();
        let keep = Tensor::<3>::from_data(TensorData::new(keep, [batch, 1, frames]), &device);
        let x = gelu(self.conv_down.forward(x * keep)); // [batch, d, out_frames]
        let x = self.dropout.forward(x.swap_dims(1, 2)); // [batch, out_frames, d]
        let out_frames = x.dims()[1];
        let out_lengths: Vec<usize> = lengths.iter().map(|&l| self.output_frames(l)).collect();
        let mask: Vec<bool> = out_lengths
            .iter()
            .flat_map(|&l| (0..out_frames).map(move |t| t < l))
            .collect();
        let mask =
            Tensor::<2, Bool>::from_data(TensorData::new(mask, [batch, out_frames]), &device);
        Ok((x, out_lengths, mask))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_frames_halve_rounding_up() {
        let config = CtcModelConfig::tiny(10);
        assert_eq!(config.output_frames(101), 51);
        assert_eq!(config.output_frames(100), 50);
        assert_eq!(config.output_frames(1), 1);
        assert_eq!(config.output_frames(0), 0);
        let model = config.init(&Device::flex()).unwrap();
        assert_eq!(model.output_frames(7), 4);
        assert_eq!(model.vocab_size(), 10);
    }

    #[test]
    fn invalid_configs_name_the_field() {
        let err = CtcModelConfig::tiny(1).validate().unwrap_err().to_string();
        assert!(err.contains("vocab_size"), "{err}");
        let mut config = CtcModelConfig::tiny(10);
        config.encoder = config.encoder.with_causal(true);
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("causal"), "{err}");
        let err = CtcModelConfig::tiny(10)
            .with_conv_kernel(4)
            .validate()
            .unwrap_err()
            .to_string();
        assert!(err.contains("conv_kernel"), "{err}");
    }
}
