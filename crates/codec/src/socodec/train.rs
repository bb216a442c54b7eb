//! Training a [`SoCodec`] with the shared loop (`voxspec-train`), with the losses of the
//! paper's Eq. 1–2:
//!
//! ```text
//! L_G = λ1 · L_vq (commitment) + λ2 · MSE(features) + λ3 · MSE(log-mel) + λ4 · L_adv(mel)
//! L_D = LSGAN on real vs. generated log-mel           (second phase, its own optimizer)
//! batch: features [B, F, T] (standardised), log-mel [B, n_mels, T·m], Clip&Shuffle reference
//!        [B, n_mels, R] of the same utterance; nested dropout (OPQ) seeded per batch
//! after each optimizer step: EMA update of the codebooks (k-means on the first batch)
//! ```
//!
//! Paper weights: λ1 = 1, λ3 = 10, λ4 = 1. λ2 is 1000 there for HuBERT features; here the
//! features are standardised per dimension (unit variance), so λ2 defaults to 1.

use burn::config::Config;
use burn::module::Module;
use burn::nn::PaddingConfig1d;
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::tensor::activation::leaky_relu;
use burn::tensor::{Device, Tensor, TensorData};
use voxspec_train::{BatchSource, Losses, Phase, TrainError, TrainTask};

use super::global::clip_and_shuffle;
use super::{SoCodec, SoCodecConfig};
use crate::CodecError;
use crate::losses::{discriminator_loss, generator_adversarial_loss};
use crate::quant::SplitMix64;

/// Loss weights and data settings of SoCodec training.
#[derive(Config, Debug)]
pub struct SoCodecTrainConfig {
    /// The model.
    pub model: SoCodecConfig,
    /// λ1, the commitment (VQ) loss.
    #[config(default = 1.0)]
    pub vq_weight: f64,
    /// λ2, feature reconstruction (MSE of standardised features).
    #[config(default = 1.0)]
    pub feature_weight: f64,
    /// λ3, log-mel MSE.
    #[config(default = 10.0)]
    pub mel_weight: f64,
    /// λ4, the generator's adversarial term (with `adversarial`).
    #[config(default = 1.0)]
    pub adversarial_weight: f64,
    /// Train a mel discriminator alternately (two phases per step).
    #[config(default = true)]
    pub adversarial: bool,
    /// Channels of the mel discriminator.
    #[config(default = 64)]
    pub discriminator_channels: usize,
    /// Token frames per training segment.
    #[config(default = 16)]
    pub segment_frames: usize,
    /// Mel frames of the Clip&Shuffle reference.
    #[config(default = 200)]
    pub reference_frames: usize,
    /// Segments per batch.
    #[config(default = 8)]
    pub batch_size: usize,
    /// Seed of the data plan (order, crops, references, nested dropout).
    #[config(default = 0)]
    pub data_seed: u64,
}

/// A 1-D convolutional discriminator over log-mel frames (LSGAN logits per frame).
#[derive(Module, Debug)]
pub struct MelDiscriminator {
    /// Convolutions with leaky ReLU (the last two stride 2).
    pub convs: Vec<Conv1d>,
    /// Logits.
    pub output: Conv1d,
}

impl MelDiscriminator {
    /// A discriminator over `n_mels` bands with `channels` channels.
    pub fn new(n_mels: usize, channels: usize, device: &Device) -> Self {
        let layer = |cin, stride| {
            Conv1dConfig::new(cin, channels, 5)
                .with_stride(stride)
                .with_padding(PaddingConfig1d::Explicit(2, 2))
                .init(device)
        };
        Self {
            convs: vec![layer(n_mels, 1), layer(channels, 2), layer(channels, 2)],
            output: Conv1dConfig::new(channels, 1, 3)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .init(device),
        }
    }

    /// # Shapes
    /// - `log_mel`: `[batch, n_mels, frames]` → logits `[batch, ⌈frames / 4⌉]`
    pub fn forward(&self, log_mel: Tensor<3>) -> Tensor<2> {
        let h = self
            .convs
            .iter()
            .fold(log_mel, |h, c| leaky_relu(c.forward(h), 0.1));
        let y = self.output.forward(h); // [batch, 1, frames']
        let [b, _, t] = y.dims();
        y.reshape([b, t])
    }
}

/// The trained model: the codec and, for adversarial training, the mel discriminator.
#[derive(Module, Debug)]
pub struct SoCodecGan {
    /// The codec.
    pub generator: SoCodec,
    /// The mel discriminator (absent without adversarial training).
    pub discriminator: Option<MelDiscriminator>,
}

/// One utterance: standardised features and the log-mel, both row-major by frame.
#[derive(Debug, Clone)]
pub struct SoCodecUtterance {
    /// Features `[frames, feature_dim]`.
    pub features: Vec<f32>,
    /// Log-mel `[mel_frames, n_mels]`.
    pub log_mel: Vec<f32>,
}

/// One batch.
#[derive(Debug, Clone)]
pub struct SoCodecBatch {
    /// Features `[batch, feature_dim, frames]`.
    pub features: Tensor<3>,
    /// Target log-mel `[batch, n_mels, frames · m]`.
    pub log_mel: Tensor<3>,
    /// Clip&Shuffle references `[batch, n_mels, reference_frames]`.
    pub reference: Tensor<3>,
    /// Seed of this batch's nested dropout (`None`: no dropout, as in validation).
    pub nested_seed: Option<u64>,
}

/// A deterministic batch plan (see the module documentation): epoch `e` visits the utterances
/// in a seeded order, each cropped at a seeded token-frame-aligned offset (padded when
/// shorter: features with 0, the mean after standardisation, mel with the log floor).
/// Utterances hold standardised features and log-mel ([`SoCodecConfig::normalize`],
/// [`SoCodecConfig::normalize_mel`]).
#[derive(Debug, Clone)]
pub struct SoCodecData {
    utterances: Vec<SoCodecUtterance>,
    feature_dim: usize,
    n_mels: usize,
    ratio: usize,
    mel_per_feature: usize,
    segment_frames: usize,
    reference_frames: usize,
    clip_frames: usize,
    mel_pad: Vec<f32>,
    batch_size: usize,
    seed: u64,
    nested: bool,
}

impl SoCodecData {
    /// A plan over `utterances` for `config`; `nested` gives each batch a nested-dropout seed
    /// (training) or none (validation).
    ///
    /// # Errors
    /// When there are no utterances, a size is 0, or an utterance's features or mel are not a
    /// whole number of frames.
    pub fn new(
        utterances: Vec<SoCodecUtterance>,
        config: &SoCodecTrainConfig,
        nested: bool,
    ) -> Result<Self, TrainError> {
        let m = &config.model;
        let bad = |reason: String| {
            TrainError::task(CodecError::InvalidConfig {
                field: "segment_frames",
                reason,
            })
        };
        if utterances.is_empty() || config.segment_frames == 0 || config.batch_size == 0 {
            return Err(bad(
                "SoCodec data needs utterances and positive segment and batch sizes".into(),
            ));
        }
        for (i, u) in utterances.iter().enumerate() {
            if u.features.is_empty()
                || !u.features.len().is_multiple_of(m.feature_dim)
                || u.log_mel.is_empty()
                || !u.log_mel.len().is_multiple_of(m.mel.n_mels)
            {
                return Err(bad(format!(
                    "utterance {i}: {} feature values are not frames of {} and {} mel values not frames of {}",
                    u.features.len(),
                    m.feature_dim,
                    u.log_mel.len(),
                    m.mel.n_mels
                )));
            }
        }
        Ok(Self {
            utterances,
            feature_dim: m.feature_dim,
            n_mels: m.mel.n_mels,
            ratio: m.ratio(),
            mel_per_feature: m.mel_per_feature(),
            segment_frames: config.segment_frames,
            reference_frames: config.reference_frames.max(1),
            clip_frames: m.clip_frames,
            mel_pad: {
                let mut pad = vec![m.mel.log_floor.max(f32::MIN_POSITIVE).ln(); m.mel.n_mels];
                m.normalize_mel(&mut pad);
                pad
            },
            batch_size: config.batch_size,
            seed: config.data_seed,
            nested,
        })
    }

    fn order(&self, epoch: usize) -> Vec<usize> {
        SplitMix64::epoch_order(self.utterances.len(), self.seed, epoch)
    }
}

impl BatchSource<SoCodecBatch> for SoCodecData {
    fn batches_in_epoch(&self, _epoch: usize) -> usize {
        self.utterances.len().div_ceil(self.batch_size)
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<SoCodecBatch> {
        let order = self.order(epoch);
        let (f, n) = (self.feature_dim, self.n_mels);
        let t = self.segment_frames * self.ratio; // feature frames
        let tm = t * self.mel_per_feature; // mel frames
        let r = self.reference_frames;
        let b = self.batch_size;
        let mut feats = vec![0.0f32; b * f * t];
        let mut mels: Vec<f32> = (0..b * n)
            .flat_map(|row| std::iter::repeat_n(self.mel_pad[row % n], tm))
            .collect();
        let mut refs = vec![0.0f32; b * n * r];
        for k in 0..b {
            let u = order[(index * b + k) % order.len()];
            let utt = &self.utterances[u];
            let mut rng = SplitMix64::new(
                self.seed ^ ((epoch * 1_000_003 + u) as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F),
            );
            let frames = utt.features.len() / f;
            let tokens = frames / self.ratio;
            let first = if tokens > self.segment_frames {
                rng.below(tokens - self.segment_frames + 1) * self.ratio
            } else {
                0
            };
            // features: [b, f, t] from rows [frames, f]
            for j in 0..t.min(frames.saturating_sub(first)) {
                let row = &utt.features[(first + j) * f..(first + j + 1) * f];
                for (c, &v) in row.iter().enumerate() {
                    feats[(k * f + c) * t + j] = v;
                }
            }
            let mel_frames = utt.log_mel.len() / n;
            let m0 = first * self.mel_per_feature;
            for j in 0..tm.min(mel_frames.saturating_sub(m0)) {
                let row = &utt.log_mel[(m0 + j) * n..(m0 + j + 1) * n];
                for (c, &v) in row.iter().enumerate() {
                    mels[(k * n + c) * tm + j] = v;
                }
            }
            let reference = clip_and_shuffle(&utt.log_mel, n, self.clip_frames, r, &mut rng);
            for (j, row) in reference.chunks(n).enumerate() {
                for (c, &v) in row.iter().enumerate() {
                    refs[(k * n + c) * r + j] = v;
                }
            }
        }
        let nested_seed = self.nested.then(|| {
            self.seed ^ ((epoch as u64) << 32 | index as u64).wrapping_mul(0xD6E8_FEB8_6659_FD93)
        });
        Ok(SoCodecBatch {
            features: Tensor::from_data(TensorData::new(feats, [b, f, t]), device),
            log_mel: Tensor::from_data(TensorData::new(mels, [b, n, tm]), device),
            reference: Tensor::from_data(TensorData::new(refs, [b, n, r]), device),
            nested_seed,
        })
    }
}

/// SoCodec's training task (see the module documentation).
pub struct SoCodecTask {
    config: SoCodecTrainConfig,
    train: SoCodecData,
    valid: Option<SoCodecData>,
}

impl SoCodecTask {
    /// A task training `config.model` on `train` (validating on `valid`).
    ///
    /// # Errors
    /// When the model config is invalid.
    pub fn new(
        config: SoCodecTrainConfig,
        train: SoCodecData,
        valid: Option<SoCodecData>,
    ) -> Result<Self, TrainError> {
        config.model.validate().map_err(TrainError::task)?;
        Ok(Self {
            config,
            train,
            valid,
        })
    }
}

/// Mean squared error of two `[batch, channels, frames]` tensors over their common frames.
fn mse(a: Tensor<3>, b: Tensor<3>) -> Tensor<1> {
    let n = a.dims()[2].min(b.dims()[2]);
    (a.narrow(2, 0, n) - b.narrow(2, 0, n))
        .powi_scalar(2)
        .mean()
}

impl TrainTask for SoCodecTask {
    type Model = SoCodecGan;
    type Batch = SoCodecBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<SoCodecGan> {
        let m = &self.config.model;
        Ok(SoCodecGan {
            generator: m.init(device).map_err(TrainError::task)?,
            discriminator: self.config.adversarial.then(|| {
                MelDiscriminator::new(m.mel.n_mels, self.config.discriminator_channels, device)
            }),
        })
    }

    fn phases(&self) -> Vec<Phase> {
        crate::losses::gan_phases(self.config.adversarial)
    }

    fn train_data(&self) -> &dyn BatchSource<SoCodecBatch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<SoCodecBatch>> {
        self.valid
            .as_ref()
            .map(|v| v as &dyn BatchSource<SoCodecBatch>)
    }

    fn batch_items(&self, batch: &SoCodecBatch) -> usize {
        batch.features.dims()[0]
    }

    fn loss(
        &self,
        model: &SoCodecGan,
        batch: &SoCodecBatch,
        phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let c = &self.config;
        let mut rng = batch.nested_seed.map(SplitMix64::new);
        let out = model
            .generator
            .forward(
                batch.features.clone(),
                batch.reference.clone(),
                rng.as_mut(),
            )
            .map_err(TrainError::task)?;
        let n = batch.log_mel.dims()[2].min(out.log_mel.dims()[2]);
        let real = batch.log_mel.clone().narrow(2, 0, n);
        let fake = out.log_mel.clone().narrow(2, 0, n);
        if phase == 1 {
            let Some(disc) = &model.discriminator else {
                return Err(TrainError::task(CodecError::InvalidConfig {
                    field: "adversarial",
                    reason: "discriminator phase without a discriminator".into(),
                }));
            };
            let loss = discriminator_loss(&[disc.forward(real)], &[disc.forward(fake.detach())]);
            return Ok(Losses {
                total: loss.clone(),
                terms: vec![("disc".to_string(), loss)],
            });
        }
        let vq = out.quant.commitment_loss.clone();
        let feat = mse(out.features.clone(), batch.features.clone());
        let mel = mse(fake.clone(), real);
        let mut total = vq.clone().mul_scalar(c.vq_weight)
            + feat.clone().mul_scalar(c.feature_weight)
            + mel.clone().mul_scalar(c.mel_weight);
        let mut terms = vec![
            ("vq".to_string(), vq),
            ("feature".to_string(), feat),
            ("mel".to_string(), mel),
        ];
        if let Some(disc) = &model.discriminator {
            let adv = generator_adversarial_loss(&[disc.forward(fake)]);
            total = total + adv.clone().mul_scalar(c.adversarial_weight);
            terms.push(("adversarial".to_string(), adv));
        }
        if let (Some(first), Some(last)) = (out.quant.metrics.first(), out.quant.metrics.last()) {
            terms.push(("stream0_perplexity".to_string(), first.perplexity.clone()));
            terms.push((
                "last_stream_perplexity".to_string(),
                last.perplexity.clone(),
            ));
        }
        Ok(Losses { total, terms })
    }

    fn after_step(
        &self,
        mut model: SoCodecGan,
        batches: &[SoCodecBatch],
        step: usize,
        seed: u64,
    ) -> voxspec_train::Result<SoCodecGan> {
        let mut rng = SplitMix64::new(seed);
        for batch in batches {
            let (updated, reports) = model
                .generator
                .ema_update(batch.features.clone(), &mut rng)
                .map_err(TrainError::task)?;
            model.generator = updated;
            let restarted: usize = reports.iter().map(|r| r.restarted).sum();
            if reports.iter().any(|r| r.initialized) || restarted > 0 {
                tracing::debug!(step, restarted, "codebook update");
            }
        }
        Ok(model)
    }

    fn config(&self) -> serde_json::Value {
        serde_json::from_str(&self.config.to_string()).unwrap_or(serde_json::Value::Null)
    }
}
