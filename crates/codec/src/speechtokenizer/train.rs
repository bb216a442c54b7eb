//! Training a [`SpeechTokenizer`] with the shared loop (`voxspec-train`): the data plan
//! ([`CodecData`]), the objective ([`CodecTrainTask`]) and the EMA codebook hook.
//!
//! ```text
//! batch: wave segments [B, 1, segment] (+ teacher features [B, frames, semantic_dim])
//!        (+ given codes [n_q, B, frames] for a decoder-only run on another model's codes)
//! loss = Σ λ_i mel_i + λ_rec · L1(wave) + λ_commit · commitment + λ_distill · d-axis distillation
//! after each optimizer step: EMA update of every codebook on the step's batches
//!   (k-means on the first batch), randomness from the loop's per-step seed
//! ```
//!
//! Default weights are SpeechTokenizer's (mel [45, 1, 1, 1], reconstruction 500, commitment
//! 10, distillation 120). With `adversarial` set, the model carries MPD + MSD discriminators
//! and each step runs two phases (two optimizers): `generator` (the loss above plus the
//! LSGAN generator term and feature matching) and `discriminator` (LSGAN on real vs.
//! detached reconstructions). Without it (the CPU default) the discriminators are absent
//! and one phase trains the generator objective alone.

use burn::config::Config;
use burn::module::Module;
use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_train::{BatchSource, Losses, Phase, TrainError, TrainTask};

use super::discriminators::{Discriminators, DiscriminatorsConfig};
use super::{SpeechTokenizer, SpeechTokenizerConfig};
use crate::losses::{MelLossConfig, MultiResolutionMelLoss, d_axis_distill_loss, waveform_l1};
use crate::quant::SplitMix64;

/// Loss weights and data settings of codec training.
#[derive(Config, Debug)]
pub struct CodecTrainConfig {
    /// The model.
    #[config(default = "SpeechTokenizerConfig::small()")]
    pub model: SpeechTokenizerConfig,
    /// Multi-resolution mel loss (its `lambdas` weight the resolutions).
    #[config(default = "MelLossConfig::new()")]
    pub mel: MelLossConfig,
    /// Weight of the waveform L1 loss.
    #[config(default = 500.0)]
    pub recon_weight: f64,
    /// Weight of the commitment loss.
    #[config(default = 10.0)]
    pub commitment_weight: f64,
    /// Weight of the semantic distillation loss (used when batches carry teacher features).
    #[config(default = 120.0)]
    pub distill_weight: f64,
    /// Samples per training segment (SpeechTokenizer: 48000, 3 s at 16 kHz).
    #[config(default = 48000)]
    pub segment_samples: usize,
    /// Segments per batch.
    #[config(default = 6)]
    pub batch_size: usize,
    /// Seed of the data plan (order and crops).
    #[config(default = 0)]
    pub data_seed: u64,
    /// Discriminators for adversarial training (`None`: reconstruction losses only).
    #[config(default = "None")]
    pub adversarial: Option<DiscriminatorsConfig>,
    /// Weight of the LSGAN generator term.
    #[config(default = 1.0)]
    pub adversarial_weight: f64,
    /// Weight of the feature-matching term.
    #[config(default = 1.0)]
    pub feature_weight: f64,
    /// Train the decoder only: the encoder, the semantic projection and the codebooks stay as
    /// they start (pass [`CodecTrainTask::freeze_patterns`] to the loop; the codebooks' EMA
    /// update is skipped), so every code the codec has ever produced keeps its meaning and the
    /// language models trained on them stay valid. Meant with a warm start
    /// ([`CodecTrainTask::with_init`]).
    #[config(default = false)]
    pub decoder_only: bool,
}

/// The trained model: the codec and, for adversarial training, its discriminators.
#[derive(Module, Debug)]
pub struct CodecGan {
    /// The codec.
    pub generator: SpeechTokenizer,
    /// MPD + MSD (absent without adversarial training).
    pub discriminator: Option<Discriminators>,
}

/// One training batch.
#[derive(Debug, Clone)]
pub struct CodecBatch {
    /// Waveform segments `[batch, 1, segment]`.
    pub wave: Tensor<3>,
    /// Teacher features at the codec frame rate `[batch, frames, semantic_dim]`.
    pub teacher: Option<Tensor<3>>,
    /// Codes the decoder renders instead of the codec's own `[n_q, batch, frames]`
    /// ([`CodecUtterance::codes`]).
    pub codes: Option<Tensor<3, Int>>,
}

/// One utterance: mono samples at the codec's rate and, optionally, teacher features already
/// at the codec frame rate (`frames × dim`, row-major; see [`crate::losses::resample_frames`]).
#[derive(Debug, Clone)]
pub struct CodecUtterance {
    /// Samples.
    pub samples: Vec<f32>,
    /// Teacher features `(values, frames, dim)`.
    pub teacher: Option<(Vec<f32>, usize, usize)>,
    /// Codes for the decoder to render in place of the codec's own encoding of `samples`:
    /// `(values, frames)`, `[n_q, frames]` stream-major at the codec's frame rate — e.g. the
    /// recording's RVQ-1 with the layers above filled in by a NAR model, so a decoder-only run
    /// ([`CodecTrainConfig::decoder_only`]) fits the decoder to the codes synthesis gives it.
    /// Frames past the given ones repeat the last.
    pub codes: Option<(Vec<u32>, usize)>,
}

/// A deterministic batch plan over in-memory utterances: epoch `e` visits the utterances in a
/// seeded order; each is cropped to `segment` samples at a seeded, frame-aligned offset
/// (zero-padded when shorter), so batch `(e, i)` is always the same.
#[derive(Debug, Clone)]
pub struct CodecData {
    utterances: Vec<CodecUtterance>,
    segment: usize,
    batch_size: usize,
    hop: usize,
    seed: u64,
}

impl CodecData {
    /// A plan over `utterances`.
    ///
    /// # Errors
    /// When there are no utterances, the segment or batch size is 0, or the segment is not a
    /// multiple of `hop`.
    pub fn new(
        utterances: Vec<CodecUtterance>,
        segment: usize,
        batch_size: usize,
        hop: usize,
        seed: u64,
    ) -> Result<Self, TrainError> {
        if utterances.is_empty() || segment == 0 || batch_size == 0 || hop == 0 {
            return Err(TrainError::task(crate::CodecError::InvalidConfig {
                field: "segment_samples",
                reason: "codec data needs utterances and positive segment and batch sizes".into(),
            }));
        }
        if !segment.is_multiple_of(hop) {
            return Err(TrainError::task(crate::CodecError::InvalidConfig {
                field: "segment_samples",
                reason: format!("{segment} is not a multiple of the hop {hop}"),
            }));
        }
        Ok(Self {
            utterances,
            segment,
            batch_size,
            hop,
            seed,
        })
    }

    fn order(&self, epoch: usize) -> Vec<usize> {
        SplitMix64::epoch_order(self.utterances.len(), self.seed, epoch)
    }
}

impl BatchSource<CodecBatch> for CodecData {
    fn batches_in_epoch(&self, _epoch: usize) -> usize {
        self.utterances.len().div_ceil(self.batch_size)
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<CodecBatch> {
        let order = self.order(epoch);
        let start = index * self.batch_size;
        let picks: Vec<usize> = (0..self.batch_size)
            .map(|k| order[(start + k) % order.len()])
            .collect();
        let frames = self.segment / self.hop;
        let mut wave = vec![0.0f32; self.batch_size * self.segment];
        let with_teacher = picks.iter().all(|&u| self.utterances[u].teacher.is_some());
        let dim = self.utterances[picks[0]]
            .teacher
            .as_ref()
            .map_or(0, |t| t.2);
        let mut teacher = vec![0.0f32; self.batch_size * frames * dim];
        let with_codes = picks.iter().all(|&u| self.utterances[u].codes.is_some());
        let n_q = self.utterances[picks[0]]
            .codes
            .as_ref()
            .map_or(0, |(values, f)| values.len() / (*f).max(1));
        let mut codes = vec![0i64; n_q * self.batch_size * frames];
        for (b, &u) in picks.iter().enumerate() {
            let utt = &self.utterances[u];
            let avail_frames = utt.samples.len() / self.hop;
            let mut rng = SplitMix64::new(
                self.seed ^ ((epoch * 1_000_003 + u) as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F),
            );
            let first = if avail_frames > frames {
                rng.below(avail_frames - frames + 1)
            } else {
                0
            };
            let s0 = first * self.hop;
            let n = self.segment.min(utt.samples.len().saturating_sub(s0));
            wave[b * self.segment..b * self.segment + n].copy_from_slice(&utt.samples[s0..s0 + n]);
            if let (true, Some((values, t_frames, d))) = (with_teacher, &utt.teacher) {
                if *d != dim {
                    return Err(TrainError::task(crate::CodecError::QuantizerShape {
                        what: "teacher features [frames, dim]",
                        expected: vec![*t_frames, dim],
                        found: vec![*t_frames, *d],
                    }));
                }
                let m = frames.min(t_frames.saturating_sub(first));
                let src = &values[first * d..(first + m) * d];
                let dst = b * frames * dim;
                teacher[dst..dst + m * d].copy_from_slice(src);
            }
            if let (true, Some((values, c_frames))) = (with_codes, &utt.codes) {
                if *c_frames == 0 || values.len() != n_q * c_frames {
                    return Err(TrainError::task(crate::CodecError::QuantizerShape {
                        what: "given codes [n_q, frames]",
                        expected: vec![n_q, *c_frames],
                        found: vec![values.len() / (*c_frames).max(1), *c_frames],
                    }));
                }
                for q in 0..n_q {
                    let row = &values[q * c_frames..(q + 1) * c_frames];
                    let dst = (q * self.batch_size + b) * frames;
                    for t in 0..frames {
                        codes[dst + t] = i64::from(row[(first + t).min(c_frames - 1)]);
                    }
                }
            }
        }
        Ok(CodecBatch {
            wave: Tensor::from_data(
                TensorData::new(wave, [self.batch_size, 1, self.segment]),
                device,
            ),
            teacher: (with_teacher && dim > 0).then(|| {
                Tensor::from_data(
                    TensorData::new(teacher, [self.batch_size, frames, dim]),
                    device,
                )
            }),
            codes: (with_codes && n_q > 0).then(|| {
                Tensor::from_data(
                    TensorData::new(codes, [n_q, self.batch_size, frames]),
                    device,
                )
            }),
        })
    }
}

/// The codec's training task (see the module documentation).
pub struct CodecTrainTask {
    config: CodecTrainConfig,
    train: CodecData,
    valid: Option<CodecData>,
    mel: MultiResolutionMelLoss,
    init: Option<std::path::PathBuf>,
}

impl CodecTrainTask {
    /// A task training `config.model` on `train` (and validating on `valid`); the mel loss
    /// constants are built on `device` (the training device, autodiff or not).
    ///
    /// # Errors
    /// When the model or mel config is invalid.
    pub fn new(
        config: CodecTrainConfig,
        train: CodecData,
        valid: Option<CodecData>,
        device: &Device,
    ) -> Result<Self, TrainError> {
        config.model.validate().map_err(TrainError::task)?;
        let mel = config
            .mel
            .clone()
            .with_sample_rate(config.model.sample_rate)
            .init(device)
            .map_err(TrainError::task)?;
        Ok(Self {
            config,
            train,
            valid,
            mel,
            init: None,
        })
    }

    /// Starts training from the weights of a trained codec (`model.safetensors` of a
    /// [`crate::save_codec`] directory built from the task's model config): a warm start, e.g.
    /// fine-tuning on a new voice. The discriminators, if any, still start fresh; the weights
    /// are read (and checked against the config) when the trainer builds the model.
    #[must_use]
    pub fn with_init(mut self, weights: std::path::PathBuf) -> Self {
        self.init = Some(weights);
        self
    }

    /// Parameter patterns for [`voxspec_train::TrainConfig::freeze`]: with
    /// [`CodecTrainConfig::decoder_only`], everything of the codec but its decoder; otherwise
    /// none.
    pub fn freeze_patterns(&self) -> Vec<String> {
        if !self.config.decoder_only {
            return Vec::new();
        }
        ["encoder", "transform", "quantizer"]
            .iter()
            .map(|m| format!(r"^generator\.{m}\."))
            .collect()
    }
}

impl TrainTask for CodecTrainTask {
    type Model = CodecGan;
    type Batch = CodecBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<CodecGan> {
        Ok(CodecGan {
            generator: {
                let fresh = self.config.model.init(device).map_err(TrainError::task)?;
                match &self.init {
                    Some(weights) => voxspec_train::load_weights(fresh, weights)?,
                    None => fresh,
                }
            },
            discriminator: self.config.adversarial.as_ref().map(|d| d.init(device)),
        })
    }

    fn phases(&self) -> Vec<Phase> {
        crate::losses::gan_phases(self.config.adversarial.is_some())
    }

    fn train_data(&self) -> &dyn BatchSource<CodecBatch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<CodecBatch>> {
        self.valid
            .as_ref()
            .map(|v| v as &dyn BatchSource<CodecBatch>)
    }

    fn batch_items(&self, batch: &CodecBatch) -> usize {
        batch.wave.dims()[0]
    }

    fn loss(
        &self,
        model: &CodecGan,
        batch: &CodecBatch,
        phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let c = &self.config;
        let codec = &model.generator;
        let (audio, out) = match &batch.codes {
            Some(codes) if c.decoder_only => {
                let audio = codec.decode(codes.clone()).map_err(TrainError::task)?;
                (audio, None)
            }
            Some(_) => {
                return Err(TrainError::task(crate::CodecError::InvalidConfig {
                    field: "decoder_only",
                    reason: "given codes train the decoder alone; set decoder_only".into(),
                }));
            }
            None => {
                let out = codec
                    .forward(batch.wave.clone(), codec.n_q())
                    .map_err(TrainError::task)?;
                (out.audio.clone(), Some(out))
            }
        };
        let [b, _, s] = batch.wave.dims();
        let [_, _, s_hat] = audio.dims();
        let n = s.min(s_hat);
        let real = batch.wave.clone().narrow(2, 0, n); // [batch, 1, n]
        let fake = audio.clone().narrow(2, 0, n); // [batch, 1, n]
        if phase == 1 {
            let Some(disc) = &model.discriminator else {
                return Err(TrainError::task(crate::CodecError::InvalidConfig {
                    field: "adversarial",
                    reason: "discriminator phase without discriminators".into(),
                }));
            };
            let loss = disc.discriminator_loss(real, fake);
            return Ok(Losses {
                total: loss.clone(),
                terms: vec![("disc".to_string(), loss)],
            });
        }
        let x = batch.wave.clone().reshape([b, s]); // [batch, samples]
        let x_hat = audio.reshape([b, s_hat]); // [batch, samples']
        let mel = self.mel.forward(x.clone(), x_hat.clone());
        let recon = waveform_l1(x, x_hat);
        let mut total = mel.clone() + recon.clone().mul_scalar(c.recon_weight);
        let mut terms = vec![("mel".to_string(), mel), ("recon".to_string(), recon)];
        if let Some(out) = &out {
            let commit = out.quant.commitment_loss.clone();
            total = total + commit.clone().mul_scalar(c.commitment_weight);
            terms.push(("commitment".to_string(), commit));
            if let Some(teacher) = &batch.teacher {
                let distill = d_axis_distill_loss(out.semantic.clone(), teacher.clone());
                total = total + distill.clone().mul_scalar(c.distill_weight);
                terms.push(("distill".to_string(), distill));
            }
        }
        if let Some(disc) = &model.discriminator {
            let (adv, fm) = disc.generator_losses(real, fake);
            total = total
                + adv.clone().mul_scalar(c.adversarial_weight)
                + fm.clone().mul_scalar(c.feature_weight);
            terms.push(("adversarial".to_string(), adv));
            terms.push(("feature".to_string(), fm));
        }
        if let Some(m) = out.as_ref().and_then(|o| o.quant.metrics.first()) {
            terms.push(("rvq1_perplexity".to_string(), m.perplexity.clone()));
            terms.push(("rvq1_usage".to_string(), m.usage.clone()));
        }
        Ok(Losses { total, terms })
    }

    fn after_step(
        &self,
        mut model: CodecGan,
        batches: &[CodecBatch],
        step: usize,
        seed: u64,
    ) -> voxspec_train::Result<CodecGan> {
        if self.config.decoder_only {
            return Ok(model);
        }
        let mut rng = SplitMix64::new(seed);
        for batch in batches {
            let (updated, reports) = model
                .generator
                .ema_update(batch.wave.clone(), &mut rng)
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
