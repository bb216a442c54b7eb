//! The aligner's acoustic model: two convolutions and a bidirectional transformer over log-mel
//! frames at 100 Hz (no subsampling: boundaries are placed to 10 ms), and a classifier over the
//! phone set, silence included.
//!
//! ```text
//! log-mel [B, T, 80] @100 Hz (the CTC teacher's front end: CMVN per utterance)
//! └─ conv1d(80→d, k) ─ GELU
//! └─ (conv_layers − 1) × { zero padded frames ─ x + GELU(conv1d(d→d, k)) } ─ dropout
//! └─ optional: n_layers × pre-norm bidirectional block (padding mask) ─ final norm
//! └─ linear(d → 40)                                   logits [B, T, 40], class 0 = SIL
//! ```
//!
//! The default is two convolutions of kernel 3: a frame's class then depends on ±2 frames
//! (±20 ms) of audio around it and nothing else. A model that sees the whole utterance can learn
//! where in it the current alignment puts each phone and keep reproducing that; one that sees
//! only the sound around a frame has to move boundaries to where the sounds are.

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig1d};
use burn::tensor::{Bool, Device, Tensor, TensorData};
use voxspec_nn::activation::gelu;
use voxspec_nn::{MlpKind, NormKind, PositionKind, Transformer, TransformerConfig};

use crate::error::AlignError;
use crate::topology::N_CLASSES;

/// Configuration of an [`AlignerModel`].
#[derive(Config, Debug)]
pub struct AlignerModelConfig {
    /// Input features per frame (mel bands).
    #[config(default = 80)]
    pub n_mels: usize,
    /// Output classes (the phone set with silence).
    #[config(default = 40)]
    pub classes: usize,
    /// Kernel of the convolutions (odd).
    #[config(default = 3)]
    pub conv_kernel: usize,
    /// Width of the convolutions (and of the transformer when there is one).
    #[config(default = 192)]
    pub width: usize,
    /// Convolutions (at least 1).
    #[config(default = 2)]
    pub conv_layers: usize,
    /// Dropout after the convolutions.
    #[config(default = 0.1)]
    pub input_dropout: f64,
    /// An optional bidirectional transformer after the convolutions (its `d_model` must equal
    /// `width`).
    #[config(default = "None")]
    pub encoder: Option<TransformerConfig>,
}

impl AlignerModelConfig {
    /// The default: 2 convolutions of width 192, kernel 3 (±20 ms of context; ≈ 0.16 M
    /// parameters). On the bundled corpus more context placed boundaries worse (measured from
    /// ±20 ms to ±120 ms and with a transformer over the whole utterance; docs/alignment.md).
    pub fn small() -> Self {
        Self::new()
    }

    /// Wider (256) for large corpora, with the same ±20 ms of context.
    pub fn base() -> Self {
        Self::new().with_width(256)
    }

    /// For tests: 2 convolutions of width 32, no dropout.
    pub fn tiny() -> Self {
        Self::new()
            .with_width(32)
            .with_conv_layers(2)
            .with_input_dropout(0.0)
    }

    /// A bidirectional transformer of width `d` and `layers` layers: rotary positions, RMSNorm,
    /// SwiGLU (2.5 d), 6000 positions (60 s).
    pub fn bidirectional(d: usize, layers: usize) -> TransformerConfig {
        TransformerConfig::new()
            .with_causal(false)
            .with_d_model(d)
            .with_n_heads(4)
            .with_n_layers(layers)
            .with_d_ff(d * 5 / 2)
            .with_positions(PositionKind::Rotary)
            .with_norm(NormKind::Rms)
            .with_mlp(MlpKind::SwiGlu)
            .with_max_seq_len(6000)
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`AlignError::InvalidConfig`] naming the field.
    pub fn validate(&self) -> Result<(), AlignError> {
        let bad =
            |field: &'static str, reason: String| Err(AlignError::InvalidConfig { field, reason });
        if self.n_mels == 0 {
            return bad("n_mels", "must be at least 1".into());
        }
        if self.classes != N_CLASSES {
            return bad(
                "classes",
                format!("{} but the phone set has {N_CLASSES}", self.classes),
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
        if self.width == 0 || self.conv_layers == 0 {
            return bad(
                "width/conv_layers",
                format!(
                    "need at least 1, got {} and {}",
                    self.width, self.conv_layers
                ),
            );
        }
        if let Some(encoder) = &self.encoder {
            if encoder.causal {
                return bad(
                    "encoder.causal",
                    "the aligner's encoder is bidirectional".into(),
                );
            }
            if encoder.d_model != self.width {
                return bad(
                    "encoder.d_model",
                    format!(
                        "{} but the convolutions are {} wide",
                        encoder.d_model, self.width
                    ),
                );
            }
            encoder.validate()?;
        }
        Ok(())
    }

    /// Builds the model with fresh weights.
    ///
    /// # Errors
    /// [`AlignError::InvalidConfig`] or [`AlignError::Nn`] when the config is invalid.
    pub fn init(&self, device: &Device) -> Result<AlignerModel, AlignError> {
        self.validate()?;
        let d = self.width;
        let pad = PaddingConfig1d::Explicit(self.conv_kernel / 2, self.conv_kernel / 2);
        Ok(AlignerModel {
            conv_in: Conv1dConfig::new(self.n_mels, d, self.conv_kernel)
                .with_padding(pad.clone())
                .init(device),
            convs: (1..self.conv_layers)
                .map(|_| {
                    Conv1dConfig::new(d, d, self.conv_kernel)
                        .with_padding(pad.clone())
                        .init(device)
                })
                .collect(),
            dropout: DropoutConfig::new(self.input_dropout).init(),
            encoder: match &self.encoder {
                Some(e) => Some(e.init(device)?),
                None => None,
            },
            head: LinearConfig::new(d, self.classes).init(device),
        })
    }
}

/// The aligner's acoustic model (see the module documentation).
#[derive(Module, Debug)]
pub struct AlignerModel {
    /// `n_mels → d`.
    pub conv_in: Conv1d,
    /// `d → d`, residual.
    pub convs: Vec<Conv1d>,
    /// After the convolutions.
    pub dropout: Dropout,
    /// Optional bidirectional transformer.
    pub encoder: Option<Transformer>,
    /// `d → classes`.
    pub head: Linear,
}

impl AlignerModel {
    /// Logits over the phone classes, one row per input frame.
    ///
    /// # Shapes
    /// - `features`: `[batch, frames, n_mels]`, zero-padded past each utterance's length
    /// - `lengths`: `[batch]` valid frames, each `1..=frames`
    /// - returns: logits `[batch, frames, classes]`; rows past `lengths[b]` are padding
    ///
    /// # Errors
    /// [`AlignError::InvalidInput`] on inconsistent lengths; [`AlignError::Nn`] when the
    /// sequence is longer than the transformer's `max_seq_len`.
    pub fn forward(&self, features: Tensor<3>, lengths: &[usize]) -> Result<Tensor<3>, AlignError> {
        let [batch, frames, _] = features.dims();
        if lengths.len() != batch || lengths.iter().any(|&l| l == 0 || l > frames) {
            return Err(AlignError::input(
                "aligner lengths",
                format!("{lengths:?} for a batch of {batch} × {frames} frames"),
            ));
        }
        let device = features.device();
        let keep: Vec<f32> = lengths
            .iter()
            .flat_map(|&l| (0..frames).map(move |t| if t < l { 1.0 } else { 0.0 }))
            .collect();
        let keep = Tensor::<3>::from_data(TensorData::new(keep, [batch, 1, frames]), &device);
        // [batch, d, frames]; padded frames zeroed before the second convolution so a batch
        // gives what each utterance alone would.
        let mut x = gelu(self.conv_in.forward(features.swap_dims(1, 2)));
        for conv in &self.convs {
            x = x.clone() + gelu(conv.forward(x * keep.clone()));
        }
        let x = self.dropout.forward(x.swap_dims(1, 2)); // [batch, frames, d]
        let hidden = match &self.encoder {
            Some(encoder) => {
                let mask: Vec<bool> = lengths
                    .iter()
                    .flat_map(|&l| (0..frames).map(move |t| t < l))
                    .collect();
                let mask =
                    Tensor::<2, Bool>::from_data(TensorData::new(mask, [batch, frames]), &device);
                encoder.forward(x, Some(mask))?
            }
            None => x,
        };
        Ok(self.head.forward(hidden))
    }
}
