//! Training the vocoder through the shared loop (`voxspec_train::Trainer`): the multi-resolution
//! STFT loss of Parallel WaveGAN (Yamamoto et al. 2020, §2.3) plus the mel L1 loss of HiFi-GAN /
//! Vocos, and optionally HiFi-GAN's adversaries.
//!
//! ```text
//! L_rec = stft_weight · mean_r [ SC_r + logmag_r ] + mel_weight · ‖log mel(ŷ) − log mel(y)‖₁ / n
//! SC_r     = ‖|STFT_r y| − |STFT_r ŷ|‖_F / ‖|STFT_r y|‖_F
//! logmag_r = mean |log |STFT_r y| − log |STFT_r ŷ||
//! ```
//!
//! With `adversarial` set (HiFi-GAN, Kong et al. 2020, §2.3–2.4) the model carries the
//! multi-period and multi-scale discriminators of [`crate::speechtokenizer::Discriminators`] and
//! each step runs two phases with two optimizers:
//!
//! ```text
//! generator:      L_rec + λ_adv · Σ_k (1 − D_k(ŷ))² + λ_fm · feature matching
//! discriminator:  Σ_k (1 − D_k(y))² + D_k(ŷ)²        (ŷ detached)
//! ```
//!
//! The periodic structure the MPD sees is where frame-rate buzz and wrong pitch harmonics show.
//!
//! Data: waveforms cut into segments of `segment_frames · hop` samples; the input is the
//! segment's log-mel from `voxspec_audio::LogMel` (its last frame, centred past the end, is
//! dropped), so `segment_frames` mel frames map to exactly the segment's samples.

use std::path::Path;
use std::sync::OnceLock;

use burn::module::Module;
use burn::tensor::{Device, Tensor, TensorData};
use serde::{Deserialize, Serialize};
use voxspec_audio::{LogMel, StftConfig};
use voxspec_train::{
    BatchSource, Losses, Phase, TrainError, TrainTask, load_weights, read_model_config,
    save_weights, write_model_config,
};

use crate::error::VocoderError;
use crate::losses::gan_phases;
use crate::speechtokenizer::{Discriminators, DiscriminatorsConfig};
use crate::vocoder::model::{Vocos, VocosConfig};
use crate::vocoder::stft::TensorStft;

/// The `kind` written to a vocoder's `config.json`.
pub const VOCODER_KIND: &str = "vocoder";

/// The kind earlier builds wrote; still read.
const LEGACY_VOCODER_KIND: &str = "vocos";

/// Loss weights and STFT resolutions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct VocoderLossConfig {
    /// `(n_fft, hop, win_length)` of each STFT resolution.
    pub stft_resolutions: Vec<(usize, usize, usize)>,
    /// Weight of the multi-resolution STFT loss.
    pub stft_weight: f32,
    /// Weight of the mel L1 loss (HiFi-GAN and Vocos use 45).
    pub mel_weight: f32,
    /// Added to squared magnitudes before the square root and the log.
    pub eps: f64,
    /// Multi-period and multi-scale discriminators (`None`: reconstruction losses only).
    pub adversarial: Option<DiscriminatorsConfig>,
    /// Weight of the LSGAN generator term (HiFi-GAN: 1).
    pub adversarial_weight: f32,
    /// Weight of feature matching (whose own factor is HiFi-GAN's 2).
    pub feature_weight: f32,
    /// Weight of the anti-wrapping phase losses against the recording's phase at the
    /// vocoder's own STFT ([`phase_loss`]; APNet, Ai & Ling 2023); 0: none.
    pub phase_weight: f32,
}

impl Default for VocoderLossConfig {
    /// Parallel WaveGAN's resolutions (1024/120/600, 2048/240/1200, 512/50/240), weights 1 and 45.
    fn default() -> Self {
        Self {
            stft_resolutions: vec![(1024, 120, 600), (2048, 240, 1200), (512, 50, 240)],
            stft_weight: 1.0,
            mel_weight: 45.0,
            eps: 1e-7,
            adversarial: None,
            adversarial_weight: 1.0,
            feature_weight: 1.0,
            phase_weight: 0.0,
        }
    }
}

impl VocoderLossConfig {
    /// Small resolutions for tiny test signals (256/64/256, 128/32/128, 64/16/64).
    pub fn tiny() -> Self {
        Self {
            stft_resolutions: vec![(256, 64, 256), (128, 32, 128), (64, 16, 64)],
            ..Self::default()
        }
    }
}

/// Multi-resolution STFT magnitude loss.
#[derive(Debug, Clone)]
pub struct MultiResolutionStftLoss {
    stfts: Vec<TensorStft>,
    eps: f64,
}

impl MultiResolutionStftLoss {
    /// Plans the STFTs on `device`.
    ///
    /// # Errors
    /// [`VocoderError::Audio`] naming a bad resolution field.
    pub fn new(
        resolutions: &[(usize, usize, usize)],
        eps: f64,
        device: &Device,
    ) -> Result<Self, VocoderError> {
        let stfts = resolutions
            .iter()
            .map(|&(n_fft, hop_length, win_length)| {
                TensorStft::new(
                    StftConfig {
                        n_fft,
                        hop_length,
                        win_length,
                        center: true,
                    },
                    device,
                )
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { stfts, eps })
    }

    /// Mean over resolutions of spectral convergence and log-magnitude L1.
    ///
    /// # Shapes
    /// - `pred`, `target`: `[batch, samples]`
    /// - output: `(spectral convergence [1], log-magnitude L1 [1])`
    pub fn forward(&self, pred: Tensor<2>, target: Tensor<2>) -> (Tensor<1>, Tensor<1>) {
        let n = self.stfts.len().max(1) as f64;
        let device = pred.device();
        let mut sc = Tensor::<1>::zeros([1], &device);
        let mut mag = Tensor::<1>::zeros([1], &device);
        for stft in &self.stfts {
            let p = stft.magnitude(pred.clone(), self.eps); // [batch, n_bins, frames]
            let t = stft.magnitude(target.clone(), self.eps);
            let diff = (t.clone() - p.clone()).powi_scalar(2).sum().sqrt();
            let norm = t.clone().powi_scalar(2).sum().sqrt().add_scalar(1e-9);
            sc = sc + diff / norm;
            mag = mag + (t.log() - p.log()).abs().mean();
        }
        (sc.div_scalar(n), mag.div_scalar(n))
    }
}

/// Log-mel of a waveform batch in tensor ops, matching `voxspec_audio::LogMel` (magnitude mel,
/// Slaney filterbank, natural log of `max(mel, floor)`), and the mel L1 loss.
#[derive(Debug, Clone)]
pub struct MelLoss {
    stft: TensorStft,
    /// `[n_mels, n_bins]`.
    filters: Tensor<2>,
    floor: f64,
}

impl MelLoss {
    /// Builds the front end of `config` on `device`.
    ///
    /// # Errors
    /// As [`VocosConfig::validate`].
    pub fn new(config: &VocosConfig, device: &Device) -> Result<Self, VocoderError> {
        let front = LogMel::new(config.mel_config())?;
        let n_bins = config.n_fft / 2 + 1;
        let filters = Tensor::from_data(
            TensorData::new(front.filterbank().to_vec(), [config.n_mels, n_bins]),
            device,
        );
        Ok(Self {
            stft: TensorStft::new(config.stft_config(), device)?,
            filters,
            floor: f64::from(config.log_floor),
        })
    }

    /// Log-mel spectrogram.
    ///
    /// # Shapes
    /// - `x`: `[batch, samples]`
    /// - output: `[batch, n_mels, 1 + samples / hop]`
    pub fn log_mel(&self, x: Tensor<2>) -> Tensor<3> {
        let mag = self.stft.magnitude(x, 0.0); // [batch, n_bins, frames]
        let [batch, _, _] = mag.dims();
        let [n_mels, n_bins] = self.filters.dims();
        let filters = self
            .filters
            .clone()
            .unsqueeze_dim::<3>(0)
            .expand([batch, n_mels, n_bins]);
        filters.matmul(mag).clamp_min(self.floor).log() // [batch, n_mels, frames]
    }

    /// Mean absolute difference of the log-mels.
    ///
    /// # Shapes
    /// - `pred`, `target`: `[batch, samples]`
    /// - output: `[1]`
    pub fn forward(&self, pred: Tensor<2>, target: Tensor<2>) -> Tensor<1> {
        (self.log_mel(pred) - self.log_mel(target)).abs().mean()
    }
}

/// A batch: host log-mel inputs and the waveform segments they came from.
#[derive(Debug, Clone)]
pub struct VocoderBatch {
    /// `[batch, n_mels, frames]`.
    pub log_mel: Tensor<3>,
    /// `[batch, frames · hop]`.
    pub wave: Tensor<2>,
}

/// Fixed-length segments of waveforms, batched deterministically per (epoch, index).
#[derive(Debug, Clone)]
pub struct WaveSegments {
    segments: Vec<Vec<f32>>,
    front: LogMel,
    segment_frames: usize,
    batch_size: usize,
    seed: u64,
}

impl WaveSegments {
    /// Cuts every wave into non-overlapping segments of `segment_frames · hop` samples (a shorter
    /// remainder is dropped).
    ///
    /// # Errors
    /// [`VocoderError::InvalidConfig`] when no segment fits or a size is zero;
    /// [`VocoderError::Audio`] for a bad mel config.
    pub fn new(
        config: &VocosConfig,
        waves: &[Vec<f32>],
        segment_frames: usize,
        batch_size: usize,
        seed: u64,
    ) -> Result<Self, VocoderError> {
        if segment_frames == 0 || batch_size == 0 {
            return Err(VocoderError::InvalidConfig {
                field: "segment_frames/batch_size",
                reason: "must be positive".into(),
            });
        }
        let len = segment_frames * config.hop_length;
        let segments: Vec<Vec<f32>> = waves
            .iter()
            .flat_map(|w| w.chunks_exact(len).map(<[f32]>::to_vec))
            .collect();
        if segments.is_empty() {
            return Err(VocoderError::InvalidConfig {
                field: "segment_frames",
                reason: format!("no wave holds one segment of {len} samples"),
            });
        }
        Ok(Self {
            segments,
            front: LogMel::new(config.mel_config())?,
            segment_frames,
            batch_size,
            seed,
        })
    }

    /// Number of segments.
    pub fn len(&self) -> usize {
        self.segments.len()
    }

    /// Whether there are no segments (never true for a constructed value).
    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    /// Segment order of `epoch`: a Fisher-Yates shuffle seeded by `seed` and `epoch`.
    fn order(&self, epoch: usize) -> Vec<usize> {
        let mut order: Vec<usize> = (0..self.segments.len()).collect();
        let mut s = self.seed ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        for i in (1..order.len()).rev() {
            s = s
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            order.swap(i, ((s >> 33) as usize) % (i + 1));
        }
        order
    }
}

impl BatchSource<VocoderBatch> for WaveSegments {
    fn batches_in_epoch(&self, _epoch: usize) -> usize {
        self.segments.len().div_ceil(self.batch_size)
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<VocoderBatch> {
        let order = self.order(epoch);
        let start = index * self.batch_size;
        let chosen = order.get(start..(start + self.batch_size).min(order.len()));
        let chosen = chosen.filter(|c| !c.is_empty()).ok_or_else(|| {
            TrainError::task(VocoderError::InvalidConfig {
                field: "batch index",
                reason: format!("batch {index} of epoch {epoch} does not exist"),
            })
        })?;
        let (frames, n_mels) = (self.segment_frames, self.front.n_mels());
        let len = self.segments[0].len();
        let mut mel = Vec::with_capacity(chosen.len() * n_mels * frames);
        let mut wave = Vec::with_capacity(chosen.len() * len);
        for &i in chosen {
            let seg = &self.segments[i];
            let m = self.front.compute(seg); // [frames + 1, n_mels]
            for b in 0..n_mels {
                mel.extend((0..frames).map(|t| m[t * n_mels + b])); // [n_mels, frames]
            }
            wave.extend_from_slice(seg);
        }
        let batch = chosen.len();
        Ok(VocoderBatch {
            log_mel: Tensor::from_data(TensorData::new(mel, [batch, n_mels, frames]), device),
            wave: Tensor::from_data(TensorData::new(wave, [batch, len]), device),
        })
    }
}

/// The trained model: the vocoder and, for adversarial training, its discriminators.
#[derive(Module, Debug)]
pub struct VocoderGan {
    /// The vocoder.
    pub generator: Vocos,
    /// MPD + MSD (absent without adversarial training).
    pub discriminator: Option<Discriminators>,
}

/// Loss kernels, built once on the training device.
#[derive(Debug)]
struct LossKernels {
    istft: TensorStft,
    stft: MultiResolutionStftLoss,
    mel: MelLoss,
}

/// The vocoder's training task: multi-resolution STFT + mel L1, and with
/// [`VocoderLossConfig::adversarial`] a generator and a discriminator phase.
#[derive(Debug)]
pub struct VocoderTask {
    /// Model configuration.
    pub model: VocosConfig,
    /// Loss configuration.
    pub loss: VocoderLossConfig,
    train: WaveSegments,
    valid: Option<WaveSegments>,
    init: Option<std::path::PathBuf>,
    kernels: OnceLock<LossKernels>,
}

impl VocoderTask {
    /// A task training a `model` on `train`.
    pub fn new(model: VocosConfig, loss: VocoderLossConfig, train: WaveSegments) -> Self {
        Self {
            model,
            loss,
            train,
            valid: None,
            init: None,
            kernels: OnceLock::new(),
        }
    }

    /// Starts the vocoder from the weights of a trained one (`model.safetensors` of a
    /// [`save_vocoder`] directory of the same config), e.g. to fine-tune it adversarially; the
    /// discriminators still start fresh. Read when the trainer builds the model.
    #[must_use]
    pub fn with_init(mut self, weights: std::path::PathBuf) -> Self {
        self.init = Some(weights);
        self
    }

    /// Validates on `valid` (the same losses, epoch 0 of its batches).
    pub fn with_valid(mut self, valid: WaveSegments) -> Self {
        self.valid = Some(valid);
        self
    }

    fn kernels(&self, device: &Device) -> Result<&LossKernels, VocoderError> {
        if let Some(k) = self.kernels.get() {
            return Ok(k);
        }
        let built = LossKernels {
            istft: Vocos::istft(&self.model, device)?,
            stft: MultiResolutionStftLoss::new(&self.loss.stft_resolutions, self.loss.eps, device)?,
            mel: MelLoss::new(&self.model, device)?,
        };
        Ok(self.kernels.get_or_init(|| built))
    }

    /// Losses of a batch: `(total, stft_sc, stft_logmag, mel_l1)`, each `[1]`.
    ///
    /// # Errors
    /// As [`Vocos::forward`].
    pub fn losses(
        &self,
        model: &Vocos,
        batch: &VocoderBatch,
    ) -> Result<(Tensor<1>, Tensor<1>, Tensor<1>, Tensor<1>), VocoderError> {
        let (losses, _, _) = self.reconstruction(model, batch)?;
        Ok(losses)
    }

    /// [`VocoderTask::losses`] (their total with the phase loss when it is weighted), the phase
    /// loss, and the resynthesis `[batch, samples]` they were computed on.
    #[allow(clippy::type_complexity)]
    fn reconstruction(
        &self,
        model: &Vocos,
        batch: &VocoderBatch,
    ) -> Result<
        (
            (Tensor<1>, Tensor<1>, Tensor<1>, Tensor<1>),
            Option<Tensor<1>>,
            Tensor<2>,
        ),
        VocoderError,
    > {
        let k = self.kernels(&batch.wave.device())?;
        let (pred, phase) = model.forward_with_phase(batch.log_mel.clone(), &k.istft)?;
        let (sc, logmag) = k.stft.forward(pred.clone(), batch.wave.clone());
        let mel = k.mel.forward(pred.clone(), batch.wave.clone());
        let mut total = (sc.clone() + logmag.clone()).mul_scalar(f64::from(self.loss.stft_weight))
            + mel.clone().mul_scalar(f64::from(self.loss.mel_weight));
        let phase = (self.loss.phase_weight > 0.0).then(|| {
            let loss = phase_loss(phase, recording_phase(&k.istft, batch.wave.clone()));
            total = total.clone() + loss.clone().mul_scalar(f64::from(self.loss.phase_weight));
            loss
        });
        Ok(((total, sc, logmag, mel), phase, pred))
    }
}

/// `|x − 2π · round(x / 2π)|`: the distance of a phase difference from the nearest multiple of
/// 2π, so that phases equal up to whole turns cost nothing.
fn anti_wrap(x: Tensor<3>) -> Tensor<3> {
    let turn = 2.0 * std::f64::consts::PI;
    let turns = x.clone().div_scalar(turn).round().mul_scalar(turn);
    (x - turns).abs()
}

/// APNet's anti-wrapping phase losses (Ai & Ling 2023, Eq. 5–9): the mean wrapped error of the
/// instantaneous phase, of the group delay (its difference across frequency bins) and of the
/// instantaneous angular frequency (its difference across frames). A constant offset of the
/// phase costs only the first; a frame-to-frame jump, the periodic buzz of a vocoder that
/// predicts each frame's phase alone, costs the last.
///
/// # Shapes
/// - `pred`, `target`: `[batch, n_bins, frames]` (radians); output: `[1]`
pub fn phase_loss(pred: Tensor<3>, target: Tensor<3>) -> Tensor<1> {
    let [_, bins, frames] = pred.dims();
    let diff = |x: Tensor<3>, dim: usize| -> Tensor<3> {
        let n = x.dims()[dim];
        x.clone().narrow(dim, 1, n - 1) - x.narrow(dim, 0, n - 1)
    };
    let mut loss = anti_wrap(pred.clone() - target.clone()).mean();
    if bins > 1 {
        loss = loss + anti_wrap(diff(pred.clone(), 1) - diff(target.clone(), 1)).mean();
    }
    if frames > 1 {
        loss = loss + anti_wrap(diff(pred, 2) - diff(target, 2)).mean();
    }
    loss
}

/// The recording's phase at the vocoder's own STFT, frame for frame with its prediction.
///
/// # Shapes
/// - `wave`: `[batch, frames · hop]`; output `[batch, n_bins, frames]`
fn recording_phase(istft: &TensorStft, wave: Tensor<2>) -> Tensor<3> {
    let [batch, samples] = wave.dims();
    let n_bins = istft.n_bins();
    let frames = samples / istft.config().hop_length;
    let spec = istft.forward(wave).detach(); // [batch, 2 · n_bins, frames + 1]
    let re = spec.clone().slice([0..batch, 0..n_bins, 0..frames]);
    let im = spec.slice([0..batch, n_bins..2 * n_bins, 0..frames]);
    im.atan2(re)
}

/// `[batch, samples]` → `[batch, 1, samples]`, the discriminators' input.
fn channel(x: Tensor<2>) -> Tensor<3> {
    x.unsqueeze_dim(1)
}

impl TrainTask for VocoderTask {
    type Model = VocoderGan;
    type Batch = VocoderBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<VocoderGan> {
        let fresh = self.model.init(device).map_err(TrainError::task)?;
        let generator = match &self.init {
            Some(weights) => load_weights(fresh, weights)?,
            None => fresh,
        };
        Ok(VocoderGan {
            generator,
            discriminator: self.loss.adversarial.as_ref().map(|d| d.init(device)),
        })
    }

    fn phases(&self) -> Vec<Phase> {
        gan_phases(self.loss.adversarial.is_some())
    }

    fn train_data(&self) -> &dyn BatchSource<VocoderBatch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<VocoderBatch>> {
        self.valid
            .as_ref()
            .map(|v| v as &dyn BatchSource<VocoderBatch>)
    }

    fn batch_items(&self, batch: &VocoderBatch) -> usize {
        batch.wave.dims()[0]
    }

    fn loss(
        &self,
        model: &VocoderGan,
        batch: &VocoderBatch,
        phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let real = channel(batch.wave.clone()); // [batch, 1, samples]
        if phase == 1 {
            let Some(disc) = &model.discriminator else {
                return Err(TrainError::task(VocoderError::InvalidConfig {
                    field: "adversarial",
                    reason: "discriminator phase without discriminators".into(),
                }));
            };
            // The discriminators' phase needs the resynthesis only, not its losses.
            let k = self
                .kernels(&batch.wave.device())
                .map_err(TrainError::task)?;
            let fake = model
                .generator
                .forward(batch.log_mel.clone(), &k.istft)
                .map_err(TrainError::task)?;
            let loss = disc.discriminator_loss(real, channel(fake));
            return Ok(Losses {
                total: loss.clone(),
                terms: vec![("disc".into(), loss)],
            });
        }
        let ((mut total, sc, logmag, mel), phase, pred) = self
            .reconstruction(&model.generator, batch)
            .map_err(TrainError::task)?;
        let fake = channel(pred); // [batch, 1, samples]
        let mut terms = vec![
            ("stft_sc".into(), sc),
            ("stft_logmag".into(), logmag),
            ("mel_l1".into(), mel),
        ];
        if let Some(phase) = phase {
            terms.push(("phase".into(), phase));
        }
        if let Some(disc) = &model.discriminator {
            let (adv, fm) = disc.generator_losses(real, fake);
            total = total
                + adv
                    .clone()
                    .mul_scalar(f64::from(self.loss.adversarial_weight))
                + fm.clone().mul_scalar(f64::from(self.loss.feature_weight));
            terms.push(("adversarial".into(), adv));
            terms.push(("feature".into(), fm));
        }
        Ok(Losses { total, terms })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": VOCODER_KIND,
            "model": serde_json::to_value(&self.model).unwrap_or(serde_json::Value::Null),
            "loss": serde_json::to_value(&self.loss).unwrap_or(serde_json::Value::Null),
        })
    }
}

/// Writes `<dir>/config.json` (kind [`VOCODER_KIND`]) and `<dir>/model.safetensors`.
///
/// # Errors
/// The training crate's errors, naming the file.
pub fn save_vocoder(dir: &Path, config: &VocosConfig, model: &Vocos) -> voxspec_train::Result<()> {
    write_model_config(dir, VOCODER_KIND, config)?;
    save_weights(model, &dir.join(voxspec_train::weights::WEIGHTS_FILE))
}

/// Reads a vocoder written by [`save_vocoder`] onto `device`, strictly (every tensor present,
/// none extra, shapes equal).
///
/// # Errors
/// The training crate's errors, naming the file and each mismatching tensor.
pub fn load_vocoder(dir: &Path, device: &Device) -> voxspec_train::Result<(VocosConfig, Vocos)> {
    let (_, config): (String, VocosConfig) =
        read_model_config(dir, &[VOCODER_KIND, LEGACY_VOCODER_KIND])?;
    let model = config.init(device).map_err(TrainError::task)?;
    let model = load_weights(model, &dir.join(voxspec_train::weights::WEIGHTS_FILE))?;
    Ok((config, model))
}
