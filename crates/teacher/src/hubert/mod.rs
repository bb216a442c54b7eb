//! HuBERT (Hsu et al. 2021, "HuBERT: Self-Supervised Speech Representation Learning by Masked
//! Prediction of Hidden Units", arXiv:2106.07447), a wav2vec 2.0 architecture (Baevski et al.
//! 2020, arXiv:2006.11477, §2): a 7-layer convolutional feature encoder (hop 320 at 16 kHz,
//! 50 Hz frames), a feature projection, a convolutional positional embedding and a BERT-style
//! transformer encoder.
//!
//! The module layout and parameter names follow Hugging Face's `HubertModel`, so the weights of
//! `facebook/hubert-base-ls960` load one to one (see [`Hubert::load`] and the key table in
//! `loader.rs`). Only inference is implemented: dropout, layer drop and SpecAugment masking are
//! training-time features and are absent.
//!
//! ```text
//! wave [B, S] ─ conv ×7 (GroupNorm on the first, GELU) ─ [B, C, T] ─ transpose ─ LayerNorm
//!   ─ Linear ─ x [B, T, H] ─ x + GELU(SamePad(WeightNormConv1d_k128_g16(x))) ─ LayerNorm
//!   ─ hidden_states[0] ─ layer 1 ─ hidden_states[1] ─ … ─ layer L ─ hidden_states[L]
//! ```

mod loader;

pub use loader::{CONFIG_FILE, IGNORED, KEY_MAP, PREPROCESSOR_FILE, WEIGHTS_FILE};

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{
    GroupNorm, GroupNormConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig, PaddingConfig1d,
};
use burn::tensor::activation::{gelu, gelu_approximate, relu, silu, softmax};
use burn::tensor::{Device, Tensor, TensorData};

use crate::error::TeacherError;
use crate::teacher::{LayerSelection, SemanticTeacher};

/// Epsilon of the `torch.nn.GroupNorm` / `LayerNorm` inside the feature encoder (PyTorch's
/// default; the config's `layer_norm_eps` applies to the other norms only).
const CONV_NORM_EPS: f64 = 1e-5;

/// Epsilon of the per-utterance waveform normalisation of `Wav2Vec2FeatureExtractor`.
const WAVE_NORM_EPS: f32 = 1e-7;

/// Normalisation after the first convolution of the feature encoder (`feat_extract_norm`).
#[derive(Config, Debug, Copy)]
pub enum FeatExtractNorm {
    /// `"group"`: GroupNorm with one group per channel after the first convolution only
    /// (HuBERT base, wav2vec 2.0 base).
    Group,
    /// `"layer"`: LayerNorm over channels after every convolution (HuBERT large/xlarge).
    Layer,
}

/// Activation function (`hidden_act`, `feat_extract_activation`).
#[derive(Config, Debug, Copy)]
pub enum HiddenAct {
    /// `"gelu"`: exact, erf-based GELU.
    Gelu,
    /// `"gelu_new"` / `"gelu_pytorch_tanh"`: tanh approximation of GELU.
    GeluTanh,
    /// `"relu"`.
    Relu,
    /// `"silu"` / `"swish"`.
    Silu,
}

impl HiddenAct {
    fn apply<const D: usize>(self, x: Tensor<D>) -> Tensor<D> {
        match self {
            Self::Gelu => gelu(x),
            Self::GeluTanh => gelu_approximate(x),
            Self::Relu => relu(x),
            Self::Silu => silu(x),
        }
    }
}

/// Configuration of a HuBERT / wav2vec 2.0 encoder. Field names are those of Hugging Face's
/// `HubertConfig`; read one from a `config.json` with [`HubertConfig::from_hf_json`]. Defaults
/// are `facebook/hubert-base-ls960`'s.
#[derive(Config, Debug)]
pub struct HubertConfig {
    /// Transformer width `H`.
    #[config(default = 768)]
    pub hidden_size: usize,
    /// Number of transformer layers `L`.
    #[config(default = 12)]
    pub num_hidden_layers: usize,
    /// Attention heads per layer (must divide `hidden_size`).
    #[config(default = 12)]
    pub num_attention_heads: usize,
    /// Width of the feed-forward block.
    #[config(default = 3072)]
    pub intermediate_size: usize,
    /// Output channels of each feature-encoder convolution.
    #[config(default = "vec![512; 7]")]
    pub conv_dim: Vec<usize>,
    /// Kernel size of each feature-encoder convolution.
    #[config(default = "vec![10, 3, 3, 3, 3, 2, 2]")]
    pub conv_kernel: Vec<usize>,
    /// Stride of each feature-encoder convolution (their product is the hop size).
    #[config(default = "vec![5, 2, 2, 2, 2, 2, 2]")]
    pub conv_stride: Vec<usize>,
    /// Whether the feature-encoder convolutions have a bias.
    #[config(default = false)]
    pub conv_bias: bool,
    /// Normalisation inside the feature encoder.
    #[config(default = "FeatExtractNorm::Group")]
    pub feat_extract_norm: FeatExtractNorm,
    /// Activation of the feature encoder and of the positional convolution.
    #[config(default = "HiddenAct::Gelu")]
    pub feat_extract_activation: HiddenAct,
    /// Whether the feature projection starts with a LayerNorm.
    #[config(default = true)]
    pub feat_proj_layer_norm: bool,
    /// Kernel size of the positional convolution.
    #[config(default = 128)]
    pub num_conv_pos_embeddings: usize,
    /// Groups of the positional convolution.
    #[config(default = 16)]
    pub num_conv_pos_embedding_groups: usize,
    /// Epsilon of the transformer and feature-projection layer norms.
    #[config(default = 1e-5)]
    pub layer_norm_eps: f64,
    /// Pre-norm transformer layers (large models) instead of post-norm (base).
    #[config(default = false)]
    pub do_stable_layer_norm: bool,
    /// Activation of the feed-forward block.
    #[config(default = "HiddenAct::Gelu")]
    pub hidden_act: HiddenAct,
    /// Sample rate the model was trained at (`sampling_rate` of `preprocessor_config.json`).
    #[config(default = 16000)]
    pub sampling_rate: u32,
    /// Whether inputs are normalised to zero mean and unit variance per utterance
    /// (`do_normalize` of `preprocessor_config.json`). Applied by [`HubertTeacher`], not by
    /// [`Hubert::forward`], which (like `HubertModel`) takes prepared `input_values`.
    #[config(default = false)]
    pub do_normalize: bool,
}

impl HubertConfig {
    /// `facebook/hubert-base-ls960`: 12 layers, width 768, 12 heads, 50 Hz at 16 kHz.
    pub fn hubert_base() -> Self {
        Self::new()
    }

    /// Hop size in samples: the product of the convolution strides (320 for HuBERT).
    pub fn hop_length(&self) -> usize {
        self.conv_stride.iter().product()
    }

    /// Samples needed to produce one frame (400 for HuBERT).
    pub fn receptive_field(&self) -> usize {
        self.conv_kernel
            .iter()
            .zip(&self.conv_stride)
            .rev()
            .fold(1, |field, (&k, &s)| (field - 1) * s + k)
    }

    /// Frames produced for `samples` input samples (valid convolutions, no padding).
    pub fn num_frames(&self, samples: usize) -> usize {
        self.conv_kernel
            .iter()
            .zip(&self.conv_stride)
            .fold(
                samples,
                |len, (&k, &s)| if len < k { 0 } else { (len - k) / s + 1 },
            )
    }

    /// Checks the consistency of the fields.
    ///
    /// # Errors
    /// [`TeacherError::InvalidConfig`] naming the offending field.
    pub fn validate(&self) -> Result<(), TeacherError> {
        let invalid = |field, reason: String| Err(TeacherError::InvalidConfig { field, reason });
        let n = self.conv_dim.len();
        if n == 0 || self.conv_kernel.len() != n || self.conv_stride.len() != n {
            return invalid(
                "conv_dim",
                format!(
                    "conv_dim, conv_kernel and conv_stride must have the same non-zero length, \
                     got {}, {} and {}",
                    n,
                    self.conv_kernel.len(),
                    self.conv_stride.len()
                ),
            );
        }
        if self.conv_kernel.contains(&0) || self.conv_stride.contains(&0) {
            return invalid("conv_kernel", "kernels and strides must be positive".into());
        }
        if self.num_attention_heads == 0
            || !self.hidden_size.is_multiple_of(self.num_attention_heads)
        {
            return invalid(
                "num_attention_heads",
                format!(
                    "{} heads do not divide hidden_size {}",
                    self.num_attention_heads, self.hidden_size
                ),
            );
        }
        let groups = self.num_conv_pos_embedding_groups;
        if groups == 0 || !self.hidden_size.is_multiple_of(groups) {
            return invalid(
                "num_conv_pos_embedding_groups",
                format!(
                    "{groups} groups do not divide hidden_size {}",
                    self.hidden_size
                ),
            );
        }
        if self.num_conv_pos_embeddings == 0 {
            return invalid("num_conv_pos_embeddings", "must be positive".into());
        }
        Ok(())
    }

    /// Builds a randomly initialised model (use [`Hubert::load`] for pretrained weights).
    ///
    /// # Panics
    /// If the config is inconsistent (see [`HubertConfig::validate`]).
    pub fn init(&self, device: &Device) -> Hubert {
        if let Err(e) = self.validate() {
            panic!("{e}");
        }
        let conv_layers = (0..self.conv_dim.len())
            .map(|i| {
                let c_in = if i == 0 { 1 } else { self.conv_dim[i - 1] };
                let c_out = self.conv_dim[i];
                let conv = Conv1dConfig::new(c_in, c_out, self.conv_kernel[i])
                    .with_stride(self.conv_stride[i])
                    .with_bias(self.conv_bias)
                    .init(device);
                let (group_norm, layer_norm) = match self.feat_extract_norm {
                    FeatExtractNorm::Group if i == 0 => (
                        Some(
                            GroupNormConfig::new(c_out, c_out)
                                .with_epsilon(CONV_NORM_EPS)
                                .init(device),
                        ),
                        None,
                    ),
                    FeatExtractNorm::Group => (None, None),
                    FeatExtractNorm::Layer => (
                        None,
                        Some(
                            LayerNormConfig::new(c_out)
                                .with_epsilon(CONV_NORM_EPS)
                                .init(device),
                        ),
                    ),
                };
                FeatureConvLayer {
                    conv,
                    group_norm,
                    layer_norm,
                    act: self.feat_extract_activation,
                }
            })
            .collect();
        let c_last = *self.conv_dim.last().unwrap_or(&self.hidden_size);
        let h = self.hidden_size;
        let k = self.num_conv_pos_embeddings;
        let layer_norm = || {
            LayerNormConfig::new(h)
                .with_epsilon(self.layer_norm_eps)
                .init(device)
        };
        let layers = (0..self.num_hidden_layers)
            .map(|_| EncoderLayer {
                attention: SelfAttention {
                    q_proj: LinearConfig::new(h, h).init(device),
                    k_proj: LinearConfig::new(h, h).init(device),
                    v_proj: LinearConfig::new(h, h).init(device),
                    out_proj: LinearConfig::new(h, h).init(device),
                    num_heads: self.num_attention_heads,
                },
                layer_norm: layer_norm(),
                feed_forward: FeedForward {
                    intermediate_dense: LinearConfig::new(h, self.intermediate_size).init(device),
                    output_dense: LinearConfig::new(self.intermediate_size, h).init(device),
                    act: self.hidden_act,
                },
                final_layer_norm: layer_norm(),
                pre_norm: self.do_stable_layer_norm,
            })
            .collect();
        Hubert {
            feature_extractor: FeatureEncoder { conv_layers },
            feature_projection: FeatureProjection {
                layer_norm: self.feat_proj_layer_norm.then(|| {
                    LayerNormConfig::new(c_last)
                        .with_epsilon(self.layer_norm_eps)
                        .init(device)
                }),
                projection: LinearConfig::new(c_last, h).init(device),
            },
            encoder: Encoder {
                pos_conv_embed: PosConvEmbedding {
                    conv: Conv1dConfig::new(h, h, k)
                        .with_groups(self.num_conv_pos_embedding_groups)
                        .with_padding(PaddingConfig1d::Explicit(k / 2, k / 2))
                        .init(device),
                    drop_last: k.is_multiple_of(2),
                    act: self.feat_extract_activation,
                },
                layer_norm: layer_norm(),
                layers,
                pre_norm: self.do_stable_layer_norm,
            },
            config: self.clone(),
        }
    }
}

/// One convolution of the feature encoder (`HubertGroupNormConvLayer`,
/// `HubertNoLayerNormConvLayer` or `HubertLayerNormConvLayer`).
#[derive(Module, Debug)]
struct FeatureConvLayer {
    conv: Conv1d,
    /// HF `layer_norm` of the first layer in "group" mode.
    group_norm: Option<GroupNorm>,
    /// HF `layer_norm` of every layer in "layer" mode.
    layer_norm: Option<LayerNorm>,
    #[module(skip)]
    act: HiddenAct,
}

impl FeatureConvLayer {
    /// `[batch, c_in, time]` → `[batch, c_out, time']`.
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let mut x = self.conv.forward(x);
        if let Some(norm) = &self.group_norm {
            x = norm.forward(x);
        }
        if let Some(norm) = &self.layer_norm {
            x = norm.forward(x.swap_dims(1, 2)).swap_dims(1, 2);
        }
        self.act.apply(x)
    }
}

#[derive(Module, Debug)]
struct FeatureEncoder {
    conv_layers: Vec<FeatureConvLayer>,
}

impl FeatureEncoder {
    /// `[batch, samples]` → `[batch, frames, conv_dim[-1]]`.
    fn forward(&self, wave: Tensor<2>) -> Tensor<3> {
        let x = wave.unsqueeze_dim::<3>(1); // [batch, 1, samples]
        let x = self.conv_layers.iter().fold(x, |x, layer| layer.forward(x)); // [batch, channels, frames]
        x.swap_dims(1, 2)
    }
}

#[derive(Module, Debug)]
struct FeatureProjection {
    layer_norm: Option<LayerNorm>,
    projection: Linear,
}

impl FeatureProjection {
    /// `[batch, frames, conv_dim[-1]]` → `[batch, frames, hidden]`.
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let x = match &self.layer_norm {
            Some(norm) => norm.forward(x),
            None => x,
        };
        self.projection.forward(x)
    }
}

/// Grouped convolution over time with "same" padding (the weight-normalised weight of the
/// checkpoint is folded into `conv.weight` at load time).
#[derive(Module, Debug)]
struct PosConvEmbedding {
    conv: Conv1d,
    /// `HubertSamePadLayer`: an even kernel with padding k/2 on both sides yields one extra
    /// frame, which is dropped.
    drop_last: bool,
    #[module(skip)]
    act: HiddenAct,
}

impl PosConvEmbedding {
    /// `[batch, frames, hidden]` → `[batch, frames, hidden]`.
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let frames = x.dims()[1];
        let y = self.conv.forward(x.swap_dims(1, 2)); // [batch, hidden, frames (+1)]
        let y = if self.drop_last {
            y.narrow(2, 0, frames)
        } else {
            y
        };
        self.act.apply(y).swap_dims(1, 2)
    }
}

#[derive(Module, Debug)]
struct SelfAttention {
    q_proj: Linear,
    k_proj: Linear,
    v_proj: Linear,
    out_proj: Linear,
    num_heads: usize,
}

impl SelfAttention {
    /// Bidirectional multi-head attention, `[batch, frames, hidden]` → same.
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let [batch, frames, hidden] = x.dims();
        let head_dim = hidden / self.num_heads;
        let split = |y: Tensor<3>| {
            y.reshape([batch, frames, self.num_heads, head_dim])
                .swap_dims(1, 2) // [batch, heads, frames, head_dim]
        };
        let q = split(self.q_proj.forward(x.clone()));
        let k = split(self.k_proj.forward(x.clone()));
        let v = split(self.v_proj.forward(x));
        let scale = (head_dim as f64).powf(-0.5);
        let scores = q.matmul(k.swap_dims(2, 3)).mul_scalar(scale); // [batch, heads, frames, frames]
        let out = softmax(scores, 3).matmul(v); // [batch, heads, frames, head_dim]
        let out = out.swap_dims(1, 2).reshape([batch, frames, hidden]);
        self.out_proj.forward(out)
    }
}

#[derive(Module, Debug)]
struct FeedForward {
    intermediate_dense: Linear,
    output_dense: Linear,
    #[module(skip)]
    act: HiddenAct,
}

impl FeedForward {
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let x = self.act.apply(self.intermediate_dense.forward(x));
        self.output_dense.forward(x)
    }
}

#[derive(Module, Debug)]
struct EncoderLayer {
    attention: SelfAttention,
    layer_norm: LayerNorm,
    feed_forward: FeedForward,
    final_layer_norm: LayerNorm,
    /// `do_stable_layer_norm`: norms before the blocks instead of after the residuals.
    pre_norm: bool,
}

impl EncoderLayer {
    /// `[batch, frames, hidden]` → same.
    fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        if self.pre_norm {
            let x = x.clone() + self.attention.forward(self.layer_norm.forward(x));
            x.clone() + self.feed_forward.forward(self.final_layer_norm.forward(x))
        } else {
            let x = self
                .layer_norm
                .forward(x.clone() + self.attention.forward(x));
            self.final_layer_norm
                .forward(x.clone() + self.feed_forward.forward(x))
        }
    }
}

#[derive(Module, Debug)]
struct Encoder {
    pos_conv_embed: PosConvEmbedding,
    layer_norm: LayerNorm,
    layers: Vec<EncoderLayer>,
    pre_norm: bool,
}

/// Output of [`Hubert::forward`].
#[derive(Debug, Clone)]
pub struct HubertOutput {
    /// `num_hidden_layers + 1` tensors `[batch, frames, hidden]`, as Hugging Face's
    /// `output_hidden_states=True` (transformers 5): the transformer input, then the output of
    /// every layer. For pre-norm models the last entry precedes the final layer norm.
    pub hidden_states: Vec<Tensor<3>>,
    /// `[batch, frames, hidden]`: the encoder output (`last_hidden_state`); equal to the last
    /// hidden state for post-norm models, after the final layer norm for pre-norm ones.
    pub last_hidden_state: Tensor<3>,
}

/// HuBERT / wav2vec 2.0 encoder with Hugging Face's `HubertModel` parameter layout.
#[derive(Module, Debug)]
pub struct Hubert {
    feature_extractor: FeatureEncoder,
    feature_projection: FeatureProjection,
    encoder: Encoder,
    #[module(skip)]
    config: HubertConfig,
}

impl Hubert {
    /// The configuration the model was built from.
    pub fn config(&self) -> &HubertConfig {
        &self.config
    }

    /// Device holding the parameters.
    pub fn device(&self) -> Device {
        self.feature_projection.projection.weight.val().device()
    }

    /// Runs the encoder on a batch of equal-length waveforms (`input_values`; no padding mask).
    ///
    /// # Shapes
    /// - `wave`: `[batch, samples]`, `samples ≥ config.receptive_field()` (400 for HuBERT)
    /// - `hidden_states[i]`, `last_hidden_state`: `[batch, frames, hidden_size]` with
    ///   `frames = config.num_frames(samples)` (⌊(samples − 80) / 320⌋ for HuBERT, 50 Hz)
    ///
    /// # Panics
    /// If the waveform is shorter than the receptive field (the convolutions would be empty).
    pub fn forward(&self, wave: Tensor<2>) -> HubertOutput {
        let features = self.feature_extractor.forward(wave); // [batch, frames, conv_dim[-1]]
        let x = self.feature_projection.forward(features); // [batch, frames, hidden]
        let encoder = &self.encoder;
        let x = x.clone() + encoder.pos_conv_embed.forward(x);
        let x = if encoder.pre_norm {
            x
        } else {
            encoder.layer_norm.forward(x)
        };
        let mut hidden_states = Vec::with_capacity(encoder.layers.len() + 1);
        hidden_states.push(x.clone());
        let mut x = x;
        for layer in &encoder.layers {
            x = layer.forward(x);
            hidden_states.push(x.clone());
        }
        let last_hidden_state = if encoder.pre_norm {
            encoder.layer_norm.forward(x)
        } else {
            x
        };
        HubertOutput {
            hidden_states,
            last_hidden_state,
        }
    }
}

/// HuBERT as a [`SemanticTeacher`]: one hidden state, or the mean of all of them.
#[derive(Debug, Clone)]
pub struct HubertTeacher {
    model: Hubert,
    layer: LayerSelection,
}

impl HubertTeacher {
    /// Wraps a loaded model.
    ///
    /// # Errors
    /// [`TeacherError::LayerOutOfRange`] if `layer` is an index above `num_hidden_layers`.
    pub fn new(model: Hubert, layer: LayerSelection) -> Result<Self, TeacherError> {
        let available = model.config.num_hidden_layers + 1;
        if let LayerSelection::Index(i) = layer
            && i >= available
        {
            return Err(TeacherError::LayerOutOfRange {
                layer: i,
                available,
            });
        }
        Ok(Self { model, layer })
    }

    /// The wrapped model.
    pub fn model(&self) -> &Hubert {
        &self.model
    }

    /// The layer selection.
    pub fn layer(&self) -> LayerSelection {
        self.layer
    }
}

impl SemanticTeacher for HubertTeacher {
    fn sample_rate(&self) -> u32 {
        self.model.config.sampling_rate
    }

    fn frame_rate(&self) -> f32 {
        self.model.config.sampling_rate as f32 / self.model.config.hop_length() as f32
    }

    fn dim(&self) -> usize {
        self.model.config.hidden_size
    }

    fn num_frames(&self, samples: usize) -> usize {
        self.model.config.num_frames(samples)
    }

    fn features(&self, wave: &[f32]) -> Result<Tensor<2>, TeacherError> {
        let min = self.model.config.receptive_field();
        if wave.len() < min {
            return Err(TeacherError::WaveTooShort {
                samples: wave.len(),
                min,
            });
        }
        let mut input = wave.to_vec();
        if self.model.config.do_normalize {
            normalize(&mut input);
        }
        let device = self.model.device();
        let wave = Tensor::<2>::from_data(TensorData::new(input, [1, wave.len()]), &device);
        let out = self.model.forward(wave);
        let count = out.hidden_states.len();
        let features = match self.layer {
            LayerSelection::Index(i) => {
                out.hidden_states
                    .into_iter()
                    .nth(i)
                    .ok_or(TeacherError::LayerOutOfRange {
                        layer: i,
                        available: count,
                    })?
            }
            LayerSelection::MeanOfAll => out
                .hidden_states
                .into_iter()
                .reduce(|acc, h| acc + h)
                .ok_or(TeacherError::LayerOutOfRange {
                    layer: 0,
                    available: 0,
                })?
                .div_scalar(count as f64),
        };
        Ok(features.squeeze_dim::<2>(0)) // [frames, hidden]
    }
}

/// Zero mean, unit variance over the utterance (`Wav2Vec2FeatureExtractor` with
/// `do_normalize=True`).
fn normalize(wave: &mut [f32]) {
    let n = wave.len().max(1) as f64;
    let mean = wave.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = wave.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / n;
    let scale = 1.0 / (var as f32 + WAVE_NORM_EPS).sqrt();
    for x in wave.iter_mut() {
        *x = (*x - mean as f32) * scale;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_frame_arithmetic() {
        let config = HubertConfig::hubert_base();
        assert_eq!(config.hop_length(), 320);
        assert_eq!(config.receptive_field(), 400);
        assert_eq!(config.num_frames(16000), 49);
        assert_eq!(config.num_frames(400), 1);
        assert_eq!(config.num_frames(399), 0);
        assert_eq!(config.num_frames(8000), 24);
    }

    #[test]
    fn validate_rejects_bad_heads() {
        let config = HubertConfig::hubert_base().with_num_attention_heads(7);
        let err = config.validate().unwrap_err().to_string();
        assert!(err.contains("num_attention_heads"), "{err}");
    }

    #[test]
    fn normalize_gives_zero_mean_unit_variance() {
        let mut wave: Vec<f32> = (0..1000)
            .map(|i| (i as f32 * 0.1).sin() * 3.0 + 1.0)
            .collect();
        normalize(&mut wave);
        let mean = wave.iter().sum::<f32>() / 1000.0;
        let var = wave.iter().map(|x| (x - mean).powi(2)).sum::<f32>() / 1000.0;
        assert!(mean.abs() < 1e-4, "{mean}");
        assert!((var - 1.0).abs() < 1e-3, "{var}");
    }
}
