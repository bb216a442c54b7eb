//! A SoCodec-style codec (Guo et al., "SoCodec: A Semantic-Ordered Multi-Stream Speech Codec for
//! Efficient Language Model Based Text-to-Speech Synthesis"): frozen semantic features in,
//! a few ordered token streams at a long frame shift, an utterance-level global vector for
//! the voice, and a log-mel out (turned into a waveform by the vocoder).
//!
//! ```text
//! features [B, F, T]  (teacher frames, 20 ms; standardised with the config's mean/std)
//!   → conv k3 → DownStage × (factors of frame_ms / 20: 120 ms → [2, 3], 240 ms → [2, 2, 3])
//!   → conv k3 → latents [B, D, T/r] → quantizer (OPQ | PQ | RQ) → q [B, D, T/r]
//! reference log-mel [B, n_mels, R] → GlobalEncoder → g [B, D]   (Clip&Shuffle in training)
//! decoder 1: q + g → conv k3 → UpStage × (the factors reversed) → h [B, C, T]
//!            → conv k3 → features [B, F, T]
//! decoder 2: h + W·g → UpStage × (20 ms / mel hop) → conv k3 → log-mel [B, n_mels, 2T]
//! ```
//!
//! | file | what |
//! |---|---|
//! | `blocks` | residual blocks, down/up stages |
//! | `global` | [`GlobalEncoder`] (ECAPA-TDNN-style) and [`clip_and_shuffle`] |
//! | `train` | [`SoCodecData`], [`SoCodecTask`]: losses of the paper's Eq. 1–2 through `voxspec-train` |
//! | `infer` | host-side encode/decode, [`MelToWave`] (vocoder, Griffin-Lim fallback) |
//! | `files` | [`save_socodec`], [`load_socodec`] (`config.json` kind `"socodec"`) |
//! | `prepare` | training data from teacher feature stores and audio; token extraction on phase-shifted grids |
//! | `run` | [`SoCodecRun`]: a training run's settings and task |
//! | `presets` | [`SoCodecConfig::tiny`], [`SoCodecConfig::small`], [`SoCodecConfig::base`] |
//! | `encode` | the feature teacher and its features ([`teacher_features`]), codes-file metadata |

mod blocks;
mod encode;
mod files;
mod global;
mod infer;
pub mod prepare;
mod presets;
pub mod run;
pub mod train;

pub use blocks::{DownStage, ResBlock, UpStage};
pub use encode::{check_feature_teacher, codes_meta, teacher_features};
pub use files::{SOCODEC_KIND, load_socodec, save_socodec};
pub use global::{GlobalEncoder, SeResBlock, clip_and_shuffle};
pub use infer::MelToWave;
pub use run::{SoCodecPrepared, SoCodecRun, SoCodecRunFile, SoCodecRunOptions, open_feature_store};
pub use train::{
    MelDiscriminator, SoCodecBatch, SoCodecData, SoCodecGan, SoCodecTask, SoCodecTrainConfig,
    SoCodecUtterance,
};

use burn::config::Config;
use burn::module::Module;
use burn::nn::conv::Conv1d;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::gelu;
use burn::tensor::{Device, Int, Tensor};
use serde::{Deserialize, Serialize};
use voxspec_audio::{LogMel, MelConfig};

use self::blocks::conv;
use crate::error::CodecError;
use crate::quant::{
    CodebookUpdate, EuclideanCodebookConfig, OrderedProductQuantizer,
    OrderedProductQuantizerConfig, QuantizerOutput, ResidualVectorQuantizer,
    ResidualVectorQuantizerConfig, SplitMix64, VectorQuantizerConfig,
};
use crate::vocoder::VocosConfig;

/// Which quantizer sits between encoder and decoders (the paper's Fig. 4 comparison).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantizerKind {
    /// Ordered product quantization: paired sub-codebooks as streams, nested dropout in training.
    Opq,
    /// The same streams without nested dropout (plain product quantization, unordered).
    Pq,
    /// Residual vector quantization, one codebook of `K²` entries per stream (the same bits
    /// per stream as OPQ).
    Rq,
}

/// Configuration of a [`SoCodec`].
#[derive(Config, Debug)]
pub struct SoCodecConfig {
    /// Width `F` of the input features (the CTC teacher's hidden states: 144; HuBERT: 768/1024).
    #[config(default = 144)]
    pub feature_dim: usize,
    /// Frame shift of the input features in ms.
    #[config(default = 20)]
    pub feature_ms: usize,
    /// Frame shift of the tokens in ms (a multiple of `feature_ms`): 120 with 4 streams, 240
    /// with 8, 40 for one stream in the paper.
    #[config(default = 120)]
    pub frame_ms: usize,
    /// Channels `C` of the convolution stacks.
    #[config(default = 192)]
    pub channels: usize,
    /// Residual blocks per stage.
    #[config(default = 1)]
    pub blocks: usize,
    /// Latent dimension `D` (a multiple of `2 · streams`).
    #[config(default = 128)]
    pub latent_dim: usize,
    /// Token streams `S`.
    #[config(default = 4)]
    pub streams: usize,
    /// Entries `K` of each sub-codebook (a stream has `K²` tokens).
    #[config(default = 128)]
    pub sub_codebook_size: usize,
    /// The quantizer.
    #[config(default = "QuantizerKind::Opq")]
    pub quantizer: QuantizerKind,
    /// Codebook dimension of the RQ variant (`None`: `D`, no projection; a smaller value
    /// projects, which diverged here: commitment loss in the thousands within 200 steps).
    #[config(default = "None")]
    pub rq_codebook_dim: Option<usize>,
    /// Lloyd iterations of the codebooks' k-means initialisation.
    #[config(default = 20)]
    pub kmeans_iters: usize,
    /// Channels of the global encoder.
    #[config(default = 128)]
    pub global_channels: usize,
    /// The log-mel the decoder predicts and the global encoder reads: the vocoder's input.
    #[config(default = "VocosConfig::hop160().mel_config()")]
    pub mel: MelConfig,
    /// Clip&Shuffle slice length in mel frames (1 s); also the shortest reference accepted.
    #[config(default = 100)]
    pub clip_frames: usize,
    /// Per-dimension mean of the input features (empty: no standardisation).
    #[config(default = "Vec::new()")]
    pub feature_mean: Vec<f32>,
    /// Per-dimension standard deviation of the input features (empty: none).
    #[config(default = "Vec::new()")]
    pub feature_std: Vec<f32>,
    /// Per-band mean of the log-mel (empty: none); the decoder predicts, and the global
    /// encoder reads, log-mel standardised with it.
    #[config(default = "Vec::new()")]
    pub mel_mean: Vec<f32>,
    /// Per-band standard deviation of the log-mel (empty: none).
    #[config(default = "Vec::new()")]
    pub mel_std: Vec<f32>,
}

impl SoCodecConfig {
    /// Feature frames per token frame, `frame_ms / feature_ms`.
    pub fn ratio(&self) -> usize {
        self.frame_ms / self.feature_ms.max(1)
    }

    /// The downsampling factors (prime factors of [`Self::ratio`], small first).
    pub fn factors(&self) -> Vec<usize> {
        let mut r = self.ratio();
        let mut out = Vec::new();
        let mut p = 2;
        while r > 1 && p <= r {
            while r.is_multiple_of(p) {
                out.push(p);
                r /= p;
            }
            p += 1;
        }
        out
    }

    /// Mel frames per feature frame (`feature_ms` over the mel hop).
    pub fn mel_per_feature(&self) -> usize {
        let hop_ms_x1000 = self.mel.hop_length * 1_000_000 / self.mel.sample_rate.max(1) as usize;
        (self.feature_ms * 1000) / hop_ms_x1000.max(1)
    }

    /// Tokens per stream, `K²`.
    pub fn stream_vocab(&self) -> usize {
        self.sub_codebook_size * self.sub_codebook_size
    }

    /// Checks the fields.
    ///
    /// # Errors
    /// [`CodecError::InvalidConfig`] naming the first bad field.
    pub fn validate(&self) -> Result<(), CodecError> {
        let bad = |field, reason: String| Err(CodecError::InvalidConfig { field, reason });
        if self.feature_dim == 0 || self.feature_ms == 0 || self.channels == 0 {
            return bad(
                "feature_dim",
                "feature_dim, feature_ms and channels must be positive".into(),
            );
        }
        if self.frame_ms < self.feature_ms || !self.frame_ms.is_multiple_of(self.feature_ms) {
            return bad(
                "frame_ms",
                format!(
                    "{} ms is not a multiple of the {} ms feature frames",
                    self.frame_ms, self.feature_ms
                ),
            );
        }
        if self.streams == 0 || !self.latent_dim.is_multiple_of(2 * self.streams) {
            return bad(
                "streams",
                format!(
                    "{} streams need a latent_dim divisible by {}",
                    self.streams,
                    2 * self.streams
                ),
            );
        }
        if self.sub_codebook_size < 2 || self.stream_vocab() > usize::from(u16::MAX) + 1 {
            return bad(
                "sub_codebook_size",
                format!(
                    "{} gives {} tokens per stream; 2..=256 keeps them in u16",
                    self.sub_codebook_size,
                    self.stream_vocab()
                ),
            );
        }
        let exact = self.mel_per_feature() * self.mel.hop_length * 1000
            == self.feature_ms * self.mel.sample_rate as usize;
        if self.mel_per_feature() == 0 || !exact {
            return bad(
                "mel",
                format!(
                    "the mel hop ({} samples at {} Hz) must divide the {} ms feature frame",
                    self.mel.hop_length, self.mel.sample_rate, self.feature_ms
                ),
            );
        }
        self.mel.validate().map_err(|e| CodecError::InvalidConfig {
            field: "mel",
            reason: e.to_string(),
        })?;
        let n = self.feature_dim;
        if !(self.feature_mean.is_empty() && self.feature_std.is_empty())
            && (self.feature_mean.len() != n || self.feature_std.len() != n)
        {
            return bad(
                "feature_mean",
                format!(
                    "feature_mean and feature_std need {n} values each, found {} and {}",
                    self.feature_mean.len(),
                    self.feature_std.len()
                ),
            );
        }
        let b = self.mel.n_mels;
        if !(self.mel_mean.is_empty() && self.mel_std.is_empty())
            && (self.mel_mean.len() != b || self.mel_std.len() != b)
        {
            return bad(
                "mel_mean",
                format!(
                    "mel_mean and mel_std need {b} values each, found {} and {}",
                    self.mel_mean.len(),
                    self.mel_std.len()
                ),
            );
        }
        if self.global_channels < 2 || self.clip_frames == 0 {
            return bad(
                "global_channels",
                "global_channels ≥ 2 and clip_frames ≥ 1".into(),
            );
        }
        Ok(())
    }

    /// Standardises features in place with the config's mean and std (no-op when empty).
    ///
    /// # Shapes
    /// - `values`: `[frames, feature_dim]` row-major
    pub fn normalize(&self, values: &mut [f32]) {
        standardize(values, &self.feature_mean, &self.feature_std);
    }

    /// Standardises log-mel frames in place with the config's band statistics (no-op when
    /// empty).
    ///
    /// # Shapes
    /// - `values`: `[frames, n_mels]` row-major
    pub fn normalize_mel(&self, values: &mut [f32]) {
        standardize(values, &self.mel_mean, &self.mel_std);
    }

    /// Undoes [`Self::normalize_mel`].
    ///
    /// # Shapes
    /// - `values`: `[frames, n_mels]` row-major
    pub fn denormalize_mel(&self, values: &mut [f32]) {
        if self.mel_mean.is_empty() {
            return;
        }
        for row in values.chunks_mut(self.mel_mean.len()) {
            for ((v, m), s) in row.iter_mut().zip(&self.mel_mean).zip(&self.mel_std) {
                *v = *v * s.max(1e-5) + m;
            }
        }
    }

    /// The log-mel front end of [`Self::mel`].
    ///
    /// # Errors
    /// When the mel settings are invalid.
    pub fn log_mel(&self) -> Result<LogMel, CodecError> {
        LogMel::new(self.mel).map_err(|e| CodecError::InvalidConfig {
            field: "mel",
            reason: e.to_string(),
        })
    }

    /// Builds the codec with fresh weights.
    ///
    /// # Errors
    /// As [`Self::validate`].
    pub fn init(&self, device: &Device) -> Result<SoCodec, CodecError> {
        self.validate()?;
        let (c, d) = (self.channels, self.latent_dim);
        let factors = self.factors();
        let codebook = EuclideanCodebookConfig::new()
            .with_codebook_size(self.sub_codebook_size)
            .with_kmeans_iters(self.kmeans_iters);
        let (opq, rq) = match self.quantizer {
            QuantizerKind::Opq | QuantizerKind::Pq => (
                Some(
                    OrderedProductQuantizerConfig::new(d, self.streams)
                        .with_codebook(codebook)
                        .init(device)?,
                ),
                None,
            ),
            QuantizerKind::Rq => (
                None,
                Some(
                    ResidualVectorQuantizerConfig::new()
                        .with_n_q(self.streams)
                        .with_layer(
                            VectorQuantizerConfig::new()
                                .with_dim(d)
                                .with_codebook_dim(self.rq_codebook_dim)
                                .with_codebook(codebook.with_codebook_size(self.stream_vocab())),
                        )
                        .init(device),
                ),
            ),
        };
        Ok(SoCodec {
            input: conv(self.feature_dim, c, 3, device),
            down: factors
                .iter()
                .map(|&f| DownStage::new(c, self.blocks, f, device))
                .collect(),
            to_latent: conv(c, d, 3, device),
            opq,
            rq,
            global: GlobalEncoder::new(self.mel.n_mels, self.global_channels, d, device),
            from_latent: conv(d, c, 3, device),
            up: factors
                .iter()
                .rev()
                .map(|&f| UpStage::new(c, self.blocks, f, device))
                .collect(),
            feature_head: conv(c, self.feature_dim, 3, device),
            global_to_mel: LinearConfig::new(d, c).init(device),
            mel_up: UpStage::new(c, self.blocks, self.mel_per_feature(), device),
            mel_head: conv(c, self.mel.n_mels, 3, device),
            nested_dropout: self.quantizer == QuantizerKind::Opq,
            ratio: self.ratio(),
            clip_frames: self.clip_frames,
        })
    }
}

/// `(v − mean) / std` per column of rows as wide as `mean` (no-op for empty statistics).
fn standardize(values: &mut [f32], mean: &[f32], std: &[f32]) {
    if mean.is_empty() {
        return;
    }
    for row in values.chunks_mut(mean.len()) {
        for ((v, m), s) in row.iter_mut().zip(mean).zip(std) {
            *v = (*v - m) / s.max(1e-5);
        }
    }
}

/// Per-column mean and standard deviation of rows `[n, width]` (row-major, over all rows of
/// all sequences): the statistics [`SoCodecConfig::normalize`] and
/// [`SoCodecConfig::normalize_mel`] use.
pub fn column_stats<'a>(
    rows: impl IntoIterator<Item = &'a [f32]>,
    width: usize,
) -> (Vec<f32>, Vec<f32>) {
    let mut sum = vec![0.0f64; width];
    let mut sq = vec![0.0f64; width];
    let mut n = 0usize;
    for seq in rows {
        for row in seq.chunks_exact(width) {
            for (c, &v) in row.iter().enumerate() {
                sum[c] += f64::from(v);
                sq[c] += f64::from(v) * f64::from(v);
            }
            n += 1;
        }
    }
    let n = n.max(1) as f64;
    let mean = sum.iter().map(|s| (s / n) as f32).collect();
    let std = sq
        .iter()
        .zip(&sum)
        .map(|(q, s)| (q / n - (s / n).powi(2)).max(1e-10).sqrt() as f32)
        .collect();
    (mean, std)
}

/// The codec (see the module documentation).
#[derive(Module, Debug)]
pub struct SoCodec {
    /// Features → channels.
    pub input: Conv1d,
    /// Downsampling stages.
    pub down: Vec<DownStage>,
    /// Channels → latents.
    pub to_latent: Conv1d,
    /// The OPQ / PQ quantizer.
    pub opq: Option<OrderedProductQuantizer>,
    /// The RQ quantizer.
    pub rq: Option<ResidualVectorQuantizer>,
    /// The global (voice) encoder.
    pub global: GlobalEncoder,
    /// Latents → channels.
    pub from_latent: Conv1d,
    /// Upsampling stages back to the feature rate.
    pub up: Vec<UpStage>,
    /// Channels → features.
    pub feature_head: Conv1d,
    /// Global vector → channels of decoder 2.
    pub global_to_mel: Linear,
    /// Feature rate → mel rate.
    pub mel_up: UpStage,
    /// Channels → log-mel.
    pub mel_head: Conv1d,
    nested_dropout: bool,
    ratio: usize,
    clip_frames: usize,
}

/// What [`SoCodec::forward`] returns.
#[derive(Debug, Clone)]
pub struct SoCodecOutput {
    /// Reconstructed (standardised) features `[batch, feature_dim, frames]`.
    pub features: Tensor<3>,
    /// Predicted log-mel `[batch, n_mels, frames · mel_per_feature]`.
    pub log_mel: Tensor<3>,
    /// The quantizer's output (codes `[streams, batch, frames / ratio]`).
    pub quant: QuantizerOutput,
    /// Streams kept per utterance by nested dropout (`None` without it).
    pub kept: Option<Vec<usize>>,
}

impl SoCodec {
    /// Token streams `S`.
    pub fn n_streams(&self) -> usize {
        match (&self.opq, &self.rq) {
            (Some(q), _) => q.n_streams(),
            (_, Some(q)) => q.n_q(),
            _ => 0,
        }
    }

    /// Tokens per stream.
    pub fn stream_vocab(&self) -> usize {
        match (&self.opq, &self.rq) {
            (Some(q), _) => q.stream_vocab(),
            (_, Some(q)) => q.codebook_size(),
            _ => 0,
        }
    }

    /// Feature frames per token frame.
    pub fn ratio(&self) -> usize {
        self.ratio
    }

    /// Whether training applies stream-wise nested dropout (OPQ only).
    pub fn nested_dropout(&self) -> bool {
        self.nested_dropout
    }

    /// Encoder latents.
    ///
    /// # Shapes
    /// - `features`: `[batch, feature_dim, frames]`, `frames` a multiple of [`Self::ratio`] →
    ///   `[batch, D, frames / ratio]`
    ///
    /// # Errors
    /// [`CodecError::QuantizerShape`] for a wrong width or a length that is not a multiple.
    pub fn latents(&self, features: Tensor<3>) -> Result<Tensor<3>, CodecError> {
        let [b, f, t] = features.dims();
        let width = self.input.weight.dims()[1];
        if f != width || t == 0 || !t.is_multiple_of(self.ratio) {
            return Err(CodecError::QuantizerShape {
                what: "SoCodec features [batch, feature_dim, frames (a positive multiple of the frame ratio)]",
                expected: vec![b, width, t.div_ceil(self.ratio).max(1) * self.ratio],
                found: vec![b, f, t],
            });
        }
        let h = self.input.forward(features);
        let h = self.down.iter().fold(h, |h, s| s.forward(h));
        Ok(self.to_latent.forward(gelu(h)))
    }

    /// Quantizes latents with every stream; with `nested` (OPQ in training) utterance `i`
    /// keeps streams `0..kept[i]`, `kept[i]` uniform in `1..=S`.
    ///
    /// # Shapes
    /// - `latents`: `[batch, D, frames]`; see [`QuantizerOutput`]
    ///
    /// # Errors
    /// The quantizer's errors.
    pub fn quantize(
        &self,
        latents: Tensor<3>,
        nested: Option<&mut SplitMix64>,
    ) -> Result<(QuantizerOutput, Option<Vec<usize>>), CodecError> {
        let s = self.n_streams();
        match (&self.opq, &self.rq, nested) {
            (Some(q), _, Some(rng)) if self.nested_dropout => {
                let (out, kept) = q.forward_nested(latents, rng)?;
                Ok((out, Some(kept)))
            }
            (Some(q), _, _) => Ok((q.forward(latents, s)?, None)),
            (_, Some(q), _) => Ok((q.forward(latents, s)?, None)),
            _ => Err(self.no_quantizer()),
        }
    }

    fn no_quantizer(&self) -> CodecError {
        CodecError::InvalidConfig {
            field: "quantizer",
            reason: "the codec holds no quantizer".into(),
        }
    }

    /// The voice vector of a reference log-mel.
    ///
    /// # Shapes
    /// - `log_mel`: `[batch, n_mels, frames]` → `[batch, D]`
    ///
    /// # Errors
    /// [`CodecError::QuantizerShape`] for another band count or a reference shorter than one
    /// Clip&Shuffle slice (`clip_frames`).
    pub fn global_vector(&self, log_mel: Tensor<3>) -> Result<Tensor<2>, CodecError> {
        let [b, n, t] = log_mel.dims();
        let bands = self.global.input.weight.dims()[1];
        if n != bands || t < self.clip_frames {
            return Err(CodecError::QuantizerShape {
                what: "reference log-mel [batch, n_mels, frames ≥ the clip window]",
                expected: vec![b, bands, self.clip_frames.max(t)],
                found: vec![b, n, t],
            });
        }
        Ok(self.global.forward(log_mel))
    }

    /// Decodes quantized latents with a voice vector.
    ///
    /// # Shapes
    /// - `quantized`: `[batch, D, frames]`, `global`: `[batch, D]` → features
    ///   `[batch, feature_dim, frames · ratio]`, log-mel `[batch, n_mels, frames · ratio · m]`
    pub fn decode_latents(
        &self,
        quantized: Tensor<3>,
        global: Tensor<2>,
    ) -> (Tensor<3>, Tensor<3>) {
        let [b, d] = global.dims();
        let h = self
            .from_latent
            .forward(quantized + global.clone().reshape([b, d, 1]));
        let h = self.up.iter().fold(h, |h, s| s.forward(h));
        let features = self.feature_head.forward(gelu(h.clone()));
        let c = h.dims()[1];
        let m = h + self.global_to_mel.forward(global).reshape([b, c, 1]);
        let m = self.mel_up.forward(m);
        (features, self.mel_head.forward(gelu(m)))
    }

    /// Training/evaluation forward: encode, quantize (nested dropout with `nested`), voice
    /// vector of `reference`, decode.
    ///
    /// # Shapes
    /// - `features`: `[batch, feature_dim, frames]`, `reference`: `[batch, n_mels, R]`; see
    ///   [`SoCodecOutput`]
    ///
    /// # Errors
    /// As [`Self::latents`], [`Self::quantize`].
    pub fn forward(
        &self,
        features: Tensor<3>,
        reference: Tensor<3>,
        nested: Option<&mut SplitMix64>,
    ) -> Result<SoCodecOutput, CodecError> {
        let latents = self.latents(features)?;
        let (quant, kept) = self.quantize(latents, nested)?;
        let global = self.global.forward(reference);
        let (features, log_mel) = self.decode_latents(quant.quantized.clone(), global);
        Ok(SoCodecOutput {
            features,
            log_mel,
            quant,
            kept,
        })
    }

    /// Stream tokens of features.
    ///
    /// # Shapes
    /// - `features`: as [`Self::latents`] → `[streams, batch, frames / ratio]`
    ///
    /// # Errors
    /// As [`Self::latents`].
    pub fn encode(&self, features: Tensor<3>) -> Result<Tensor<3, Int>, CodecError> {
        let latents = self.latents(features)?;
        let s = self.n_streams();
        match (&self.opq, &self.rq) {
            (Some(q), _) => q.encode(latents, s),
            (_, Some(q)) => q.encode(latents, s),
            _ => Err(self.no_quantizer()),
        }
    }

    /// Log-mel from the first `b` streams' tokens (the others zero) and a voice vector.
    ///
    /// # Shapes
    /// - `tokens`: `[b, batch, frames]`, `1 ≤ b ≤ S`, every token below [`Self::stream_vocab`];
    ///   `global`: `[batch, D]` → `[batch, n_mels, frames · ratio · m]`
    ///
    /// # Errors
    /// [`CodecError::QuantizerLayers`] for a bad `b`, [`CodecError::InvalidConfig`] for a token
    /// out of range (read back to check).
    pub fn decode(
        &self,
        tokens: Tensor<3, Int>,
        global: Tensor<2>,
    ) -> Result<Tensor<3>, CodecError> {
        let [m, _, _] = tokens.dims();
        crate::quant::check_streams(0, m, self.n_streams())?;
        let vocab = self.stream_vocab() as i64;
        let lo = tokens.clone().min().into_scalar::<i64>();
        let hi = tokens.clone().max().into_scalar::<i64>();
        if lo < 0 || hi >= vocab {
            return Err(CodecError::InvalidConfig {
                field: "tokens",
                reason: format!("tokens span {lo}..={hi}; a stream of this codec holds 0..{vocab}"),
            });
        }
        let q = match (&self.opq, &self.rq) {
            (Some(q), _) => q.decode(tokens)?,
            (_, Some(q)) => q.decode(tokens)?,
            _ => return Err(self.no_quantizer()),
        };
        Ok(self.decode_latents(q, global).1)
    }

    /// EMA update of the codebooks on the latents of `features` (k-means on the first call).
    ///
    /// # Shapes
    /// - `features`: as [`Self::latents`]
    ///
    /// # Errors
    /// As [`Self::latents`] and the quantizer's update.
    pub fn ema_update(
        mut self,
        features: Tensor<3>,
        rng: &mut SplitMix64,
    ) -> Result<(Self, Vec<CodebookUpdate>), CodecError> {
        let latents = self.latents(features)?.detach();
        let mut reports = Vec::new();
        if let Some(q) = self.opq.take() {
            let (q, r) = q.ema_update(latents, rng)?;
            self.opq = Some(q);
            reports = r;
        } else if let Some(q) = self.rq.take() {
            let (q, r) = q.ema_update(latents, rng)?;
            self.rq = Some(q);
            reports = r;
        }
        Ok((self, reports))
    }
}

#[cfg(test)]
mod tests;
