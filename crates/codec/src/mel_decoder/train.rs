//! Training the codes → log-mel decoder through `voxspec-train`: each recording's codes (the
//! codec's own, or the RVQ-1 with layers above filled in by a NAR model, `voxspec codec fill`)
//! against the recording's log-mel, L1 over the valid frames. The log-mels are computed once,
//! when the data is loaded, with the vocoder's front end. A decoder with a phone input reads
//! each frame's phone from the recording's forced alignment.

use std::path::Path;

use burn::tensor::{Device, Int, Tensor, TensorData};
use rayon::prelude::*;
use voxspec_audio::LogMel;
use voxspec_data::{Progress, TextTokenizer, TokenStore, Utterance, alignment_frames};
use voxspec_train::weights::{load_weights, read_model_config, save_weights, write_model_config};
use voxspec_train::{BatchSource, Losses, TrainError, TrainTask};

use super::model::{MelDecoder, MelDecoderConfig};
use crate::error::VocoderError;
use crate::quant::SplitMix64;

/// `"kind"` of a mel decoder's `config.json`.
pub const MEL_DECODER_KIND: &str = "mel_decoder";

/// One recording: its codes and its log-mel.
#[derive(Debug, Clone)]
pub struct MelUtterance {
    /// Codes `[n_q, frames]`, stream-major (the first `n_q` layers of the store).
    pub codes: Vec<u32>,
    /// Code frames.
    pub frames: usize,
    /// Log-mel `[mel_frames, n_mels]`, frame-major.
    pub mel: Vec<f32>,
    /// Mel frames.
    pub mel_frames: usize,
    /// The phone id of each code frame (`[frames]`), for a decoder with a phone input.
    pub phones: Option<Vec<u32>>,
}

/// Reads the codes of `utterances` from `store` (its first `config.n_q` layers) and computes
/// the log-mel of each recording with `config.mel`; for a decoder with a phone input, each
/// frame's phone from the utterance's alignment, encoded by `tokenizer` (phonemic, of
/// [`MelDecoderConfig::phone_vocab`] ids).
///
/// # Errors
/// [`VocoderError::InvalidConfig`] for a store of another codebook or frame rate, fewer layers
/// than `config.n_q`, an utterance it lacks, codes and audio whose lengths disagree by more
/// than two frames, or (phone input) no phonemic tokenizer of that many ids, an
/// utterance without an alignment or one that does not match its codes (naming the
/// utterance); [`VocoderError::Audio`] for unreadable audio.
pub fn load_mel_split(
    utterances: &[Utterance],
    store: &TokenStore,
    config: &MelDecoderConfig,
    tokenizer: Option<&TextTokenizer>,
    progress: &dyn Progress,
    what: &str,
) -> Result<Vec<MelUtterance>, VocoderError> {
    let tokenizer = match (config.phone_vocab(), tokenizer) {
        (0, _) => None,
        (n, Some(t)) if t.is_phonemic() && t.vocab_size() == n => Some(t),
        (n, t) => {
            return Err(VocoderError::InvalidConfig {
                field: "phones",
                reason: format!(
                    "the decoder reads {n} phone ids; the tokenizer given {}",
                    match t {
                        None => "is none".to_string(),
                        Some(t) if !t.is_phonemic() => "is not phonemic".to_string(),
                        Some(t) => format!("has {}", t.vocab_size()),
                    }
                ),
            });
        }
    };
    let meta = store.meta();
    let rate = config.mel.sample_rate;
    let frame_rate = rate as f32 / config.codec_hop as f32;
    if meta.n_q < config.n_q
        || meta.codebook_size as usize != config.codebook_size
        || (meta.frame_rate - frame_rate).abs() > 1e-3
    {
        return Err(VocoderError::InvalidConfig {
            field: "codes",
            reason: format!(
                "the token store {} holds {} × {} codes at {} Hz; the mel decoder reads {} × {} \
                 at {frame_rate} Hz",
                store.dir().display(),
                meta.n_q,
                meta.codebook_size,
                meta.frame_rate,
                config.n_q,
                config.codebook_size,
            ),
        });
    }
    let front = LogMel::new(config.mel)?;
    let n_mels = config.mel.n_mels;
    progress.start(utterances.len() as u64, what);
    let out = utterances
        .par_iter()
        .map(|u| {
            let codes = store
                .get(&u.id)
                .ok_or_else(|| VocoderError::InvalidConfig {
                    field: "codes",
                    reason: format!(
                        "{} has no codes for utterance {}",
                        store.dir().display(),
                        u.id
                    ),
                })?;
            let audio = voxspec_audio::load_resampled(Path::new(&u.path), rate)?;
            let expected = audio.samples.len().div_ceil(config.codec_hop);
            if codes.n_frames.abs_diff(expected) > 2 || codes.n_frames == 0 {
                return Err(VocoderError::InvalidConfig {
                    field: "codes",
                    reason: format!(
                        "utterance {}: {} frames of codes for {expected} frames of audio",
                        u.id, codes.n_frames
                    ),
                });
            }
            let phones = match tokenizer {
                None => None,
                Some(t) => {
                    let bad = |reason: String| VocoderError::InvalidConfig {
                        field: "phones",
                        reason: format!("utterance {}: {reason}", u.id),
                    };
                    let a = u.alignment.as_ref().ok_or_else(|| {
                        bad("has no phone alignment (`voxspec align` makes one)".into())
                    })?;
                    let durations =
                        alignment_frames(&a.ends, f64::from(frame_rate), codes.n_frames)
                            .map_err(bad)?;
                    let ids = t.encode_phones(&a.phones).map_err(|e| bad(e.to_string()))?;
                    Some(config.frame_phones(&ids, &durations, codes.n_frames))
                }
            };
            let mel = front.compute(&audio.samples);
            let mel_frames = mel.len() / n_mels;
            progress.inc(1);
            Ok(MelUtterance {
                codes: codes.data[..config.n_q * codes.n_frames].to_vec(),
                frames: codes.n_frames,
                mel,
                mel_frames,
                phones,
            })
        })
        .collect::<Result<Vec<_>, VocoderError>>();
    progress.finish();
    out
}

/// A batch: codes, their target log-mel and which target frames are real.
#[derive(Debug, Clone)]
pub struct MelBatch {
    /// `[n_q, batch, frames]`.
    pub codes: Tensor<3, Int>,
    /// `[batch, n_mels, frames · u]`.
    pub target: Tensor<3>,
    /// `[batch, 1, frames · u]`: 1 on frames of the recording, 0 on padding.
    pub mask: Tensor<3>,
    /// `[batch, frames]` phone ids (padding: "no phone"), for a decoder with a phone input.
    pub phones: Option<Tensor<2, Int>>,
}

/// A deterministic batch plan: epoch `e` visits the utterances in a seeded order; each is
/// cropped to `segment` code frames at a seeded offset (padded with its last code and masked
/// when shorter), so batch `(e, i)` is always the same.
#[derive(Debug, Clone)]
pub struct MelData {
    utterances: Vec<MelUtterance>,
    n_q: usize,
    phones: usize,
    n_mels: usize,
    upsample: usize,
    log_floor: f32,
    segment: usize,
    batch_size: usize,
    seed: u64,
}

impl MelData {
    /// A plan over `utterances` for a decoder of `config`, crops of `segment` code frames.
    ///
    /// # Errors
    /// [`VocoderError::InvalidConfig`] when there are no utterances, the segment or batch
    /// size is 0, or the decoder reads phones and an utterance has none.
    pub fn new(
        utterances: Vec<MelUtterance>,
        config: &MelDecoderConfig,
        segment: usize,
        batch_size: usize,
        seed: u64,
    ) -> Result<Self, VocoderError> {
        if utterances.is_empty() || segment == 0 || batch_size == 0 {
            return Err(VocoderError::InvalidConfig {
                field: "segment",
                reason: "mel decoder data needs utterances and positive segment and batch sizes"
                    .into(),
            });
        }
        if config.phone_vocab() > 0
            && let Some(u) = utterances.iter().position(|u| u.phones.is_none())
        {
            return Err(VocoderError::InvalidConfig {
                field: "phones",
                reason: format!("the decoder reads phones and utterance {u} has none"),
            });
        }
        Ok(Self {
            utterances,
            n_q: config.n_q,
            phones: config.phone_vocab(),
            n_mels: config.mel.n_mels,
            upsample: config.upsample(),
            log_floor: config.mel.log_floor.ln(),
            segment,
            batch_size,
            seed,
        })
    }

    /// Utterances in the plan.
    pub fn len(&self) -> usize {
        self.utterances.len()
    }

    /// Whether the plan is empty (never, by construction).
    pub fn is_empty(&self) -> bool {
        self.utterances.is_empty()
    }
}

impl BatchSource<MelBatch> for MelData {
    fn batches_in_epoch(&self, _epoch: usize) -> usize {
        self.utterances.len().div_ceil(self.batch_size)
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<MelBatch> {
        let order = SplitMix64::epoch_order(self.utterances.len(), self.seed, epoch);
        let (b_n, f, u, m) = (self.batch_size, self.segment, self.upsample, self.n_mels);
        let mut codes = vec![0i64; self.n_q * b_n * f];
        let mut target = vec![self.log_floor; b_n * m * f * u];
        let mut mask = vec![0.0f32; b_n * f * u];
        let mut phones = vec![self.phones as i64; b_n * f];
        for b in 0..b_n {
            let k = order[(index * b_n + b) % order.len()];
            let utt = &self.utterances[k];
            let mut rng = SplitMix64::new(
                self.seed ^ ((epoch * 1_000_003 + k) as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F),
            );
            let first = if utt.frames > f {
                rng.below(utt.frames - f + 1)
            } else {
                0
            };
            for q in 0..self.n_q {
                let row = &utt.codes[q * utt.frames..(q + 1) * utt.frames];
                let dst = (q * b_n + b) * f;
                for t in 0..f {
                    codes[dst + t] = i64::from(row[(first + t).min(utt.frames - 1)]);
                }
            }
            if let Some(p) = &utt.phones {
                for (t, &id) in p.iter().skip(first).take(f).enumerate() {
                    phones[b * f + t] = i64::from(id);
                }
            }
            let m0 = first * u;
            let valid = (f * u)
                .min(utt.mel_frames.saturating_sub(m0))
                .min(utt.frames.saturating_sub(first) * u);
            for t in 0..valid {
                let src = &utt.mel[(m0 + t) * m..(m0 + t + 1) * m];
                for (band, &v) in src.iter().enumerate() {
                    target[(b * m + band) * f * u + t] = v;
                }
                mask[b * f * u + t] = 1.0;
            }
        }
        Ok(MelBatch {
            codes: Tensor::from_data(TensorData::new(codes, [self.n_q, b_n, f]), device),
            target: Tensor::from_data(TensorData::new(target, [b_n, m, f * u]), device),
            mask: Tensor::from_data(TensorData::new(mask, [b_n, 1, f * u]), device),
            phones: (self.phones > 0)
                .then(|| Tensor::from_data(TensorData::new(phones, [b_n, f]), device)),
        })
    }
}

/// The training task: L1 between the predicted and the recording's log-mel over real frames.
#[derive(Debug)]
pub struct MelDecoderTask {
    /// Model configuration.
    pub model: MelDecoderConfig,
    train: MelData,
    valid: Option<MelData>,
    init: Option<std::path::PathBuf>,
}

impl MelDecoderTask {
    /// A task training a `model` on `train`.
    pub fn new(model: MelDecoderConfig, train: MelData) -> Self {
        Self {
            model,
            train,
            valid: None,
            init: None,
        }
    }

    /// Validates on `valid` (epoch 0 of its batches).
    #[must_use]
    pub fn with_valid(mut self, valid: MelData) -> Self {
        self.valid = Some(valid);
        self
    }

    /// Starts from the weights of a trained decoder of the same config (`model.safetensors`),
    /// e.g. one trained on the codec's own codes, then fitted to a NAR's.
    #[must_use]
    pub fn with_init(mut self, weights: std::path::PathBuf) -> Self {
        self.init = Some(weights);
        self
    }

    /// Masked mean absolute difference of the log-mels, `[1]`.
    ///
    /// # Errors
    /// As [`MelDecoder::forward`].
    pub fn l1(&self, model: &MelDecoder, batch: &MelBatch) -> Result<Tensor<1>, VocoderError> {
        // [batch, n_mels, frames · u]
        let pred = model.forward_with_phones(batch.codes.clone(), batch.phones.clone())?;
        let n_mels = pred.dims()[1] as f64;
        let diff = (pred - batch.target.clone()).abs() * batch.mask.clone();
        let count = batch.mask.clone().sum().mul_scalar(n_mels).clamp_min(1.0);
        Ok(diff.sum() / count)
    }
}

impl TrainTask for MelDecoderTask {
    type Model = MelDecoder;
    type Batch = MelBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<MelDecoder> {
        let fresh = self.model.init(device).map_err(TrainError::task)?;
        match &self.init {
            Some(weights) => load_weights(fresh, weights),
            None => Ok(fresh),
        }
    }

    fn train_data(&self) -> &dyn BatchSource<MelBatch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<MelBatch>> {
        self.valid.as_ref().map(|v| v as &dyn BatchSource<MelBatch>)
    }

    fn batch_items(&self, batch: &MelBatch) -> usize {
        batch.target.dims()[0]
    }

    fn loss(
        &self,
        model: &MelDecoder,
        batch: &MelBatch,
        _phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let l1 = self.l1(model, batch).map_err(TrainError::task)?;
        Ok(Losses {
            total: l1.clone(),
            terms: vec![("mel_l1".into(), l1)],
        })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::json!({
            "kind": MEL_DECODER_KIND,
            "model": serde_json::to_value(&self.model).unwrap_or(serde_json::Value::Null),
        })
    }
}

/// Writes `<dir>/config.json` (kind [`MEL_DECODER_KIND`]) and `<dir>/model.safetensors`.
///
/// # Errors
/// The training crate's errors, naming the file.
pub fn save_mel_decoder(
    dir: &Path,
    config: &MelDecoderConfig,
    model: &MelDecoder,
) -> voxspec_train::Result<()> {
    write_model_config(dir, MEL_DECODER_KIND, config)?;
    save_weights(model, &dir.join(voxspec_train::weights::WEIGHTS_FILE))
}

/// Reads a mel decoder written by [`save_mel_decoder`] onto `device`, strictly.
///
/// # Errors
/// The training crate's errors, naming the file and each mismatching tensor.
pub fn load_mel_decoder(
    dir: &Path,
    device: &Device,
) -> voxspec_train::Result<(MelDecoderConfig, MelDecoder)> {
    let (_, config): (String, MelDecoderConfig) = read_model_config(dir, &[MEL_DECODER_KIND])?;
    let model = config.init(device).map_err(TrainError::task)?;
    let model = load_weights(model, &dir.join(voxspec_train::weights::WEIGHTS_FILE))?;
    Ok((config, model))
}
