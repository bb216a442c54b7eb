//! Training data of the CTC teacher: utterances from a prepared manifest turned into
//! normalised log-mel features and character targets, and a deterministic batch plan over them.
//!
//! - Features are computed once per run (in parallel) and kept in memory when they fit the
//!   cache budget (the bundled corpus: ≈ 40 MB), otherwise recomputed from the audio for every
//!   batch.
//! - An utterance whose transcript needs more CTC frames than the model outputs for its audio
//!   (`min_frames(target) > ⌈frames / 2⌉`) is left out with a warning.
//! - Batch `index` of `epoch` is a pure function of (seed, epoch, index): length bucketing
//!   (`voxspec_data::bucket_batches`, the epoch mixed into the shuffle) and SpecAugment masks
//!   (Park et al. 2019, §2: `F`-wide frequency masks and `T`-wide time masks, here set to the
//!   normalised mean, 0) drawn from an RNG seeded by (seed, epoch, index). A resumed run
//!   therefore sees exactly the batches an uninterrupted one would.

use std::borrow::Cow;
use std::path::Path;
use std::sync::{Arc, Mutex};

use burn::config::Config;
use burn::tensor::{Device, Tensor, TensorData};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rayon::prelude::*;
use voxspec_data::{BucketConfig, Progress, TextTokenizer, Utterance, bucket_batches};
use voxspec_train::{BatchSource, TrainError};

use super::frontend::Frontend;
use super::loss::min_frames;
use super::model::CtcModelConfig;
use crate::error::TeacherError;

/// SpecAugment settings (frame counts at the front end's 100 Hz).
#[derive(Config, Debug, PartialEq)]
pub struct SpecAugmentConfig {
    /// Frequency masks per utterance.
    #[config(default = 2)]
    pub freq_masks: usize,
    /// Widest frequency mask, in bands.
    #[config(default = 15)]
    pub freq_width: usize,
    /// Time masks per utterance.
    #[config(default = 2)]
    pub time_masks: usize,
    /// Widest time mask, in frames.
    #[config(default = 25)]
    pub time_width: usize,
    /// A time mask covers at most this fraction of the utterance.
    #[config(default = 0.1)]
    pub max_time_fraction: f64,
}

/// One utterance ready for training.
#[derive(Debug, Clone)]
pub struct CtcUtterance {
    /// Utterance id.
    pub id: String,
    /// Audio file (read again when features are not cached).
    pub path: String,
    /// Feature frames.
    pub frames: usize,
    /// Normalised features `[frames, n_mels]`, when cached.
    pub features: Option<Arc<Vec<f32>>>,
    /// Character ids (no blank).
    pub target: Vec<u32>,
    /// The normalised transcript (the CER reference).
    pub reference: String,
}

/// The utterances of one split.
#[derive(Debug)]
pub struct CtcCorpus {
    utterances: Vec<CtcUtterance>,
    frontend: Frontend,
}

/// Why utterances were left out of a split.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CorpusReport {
    /// Utterances kept.
    pub kept: usize,
    /// Ids whose transcript is too long for their audio.
    pub too_short: Vec<String>,
    /// Whether features are cached in memory.
    pub cached: bool,
}

impl CtcCorpus {
    /// Builds a split from manifest entries: tokenises every transcript, decodes every file and
    /// computes its features (in parallel); features are kept if the whole split needs at most
    /// `cache_bytes`.
    ///
    /// # Errors
    /// [`TeacherError::Data`] for a transcript the tokenizer cannot encode; [`TeacherError::Audio`]
    /// for a file that cannot be decoded.
    pub fn build(
        utterances: &[Utterance],
        tokenizer: &TextTokenizer,
        frontend: &Frontend,
        model: &CtcModelConfig,
        cache_bytes: usize,
        progress: &dyn Progress,
    ) -> Result<(Self, CorpusReport), TeacherError> {
        let rate = frontend.config().sample_rate;
        let estimate: usize = utterances
            .iter()
            .map(|u| frontend.num_frames((u.duration * f64::from(rate)) as usize))
            .sum::<usize>()
            * frontend.n_mels()
            * 4;
        let cache = estimate <= cache_bytes;
        progress.start(utterances.len() as u64, "features");
        let built = utterances
            .par_iter()
            .map(|u| {
                let target = tokenizer.encode(&u.text)?;
                let reference = tokenizer.normalize(&u.text)?;
                let (frames, features) = if cache {
                    let feats = load_features(Path::new(&u.path), frontend)?;
                    (feats.len() / frontend.n_mels(), Some(Arc::new(feats)))
                } else {
                    let samples = (u.duration * f64::from(rate)).round() as usize;
                    (frontend.num_frames(samples), None)
                };
                progress.inc(1);
                Ok(CtcUtterance {
                    id: u.id.clone(),
                    path: u.path.clone(),
                    frames,
                    features,
                    target,
                    reference,
                })
            })
            .collect::<Result<Vec<_>, TeacherError>>();
        progress.finish();
        let mut report = CorpusReport {
            cached: cache,
            ..CorpusReport::default()
        };
        let kept: Vec<CtcUtterance> = built?
            .into_iter()
            .filter(|u| {
                let fits = model.output_frames(u.frames) >= min_frames(&u.target).max(1);
                if !fits {
                    tracing::warn!(
                        id = %u.id,
                        frames = u.frames,
                        chars = u.target.len(),
                        "transcript too long for the audio: utterance left out"
                    );
                    report.too_short.push(u.id.clone());
                }
                fits
            })
            .collect();
        report.kept = kept.len();
        Ok((
            Self {
                utterances: kept,
                frontend: frontend.clone(),
            },
            report,
        ))
    }

    /// The utterances.
    pub fn utterances(&self) -> &[CtcUtterance] {
        &self.utterances
    }

    /// Number of utterances.
    pub fn len(&self) -> usize {
        self.utterances.len()
    }

    /// Whether the split is empty.
    pub fn is_empty(&self) -> bool {
        self.utterances.is_empty()
    }

    /// Feature frames of every utterance (what batches are bucketed on).
    pub fn lengths(&self) -> Vec<usize> {
        self.utterances.iter().map(|u| u.frames).collect()
    }

    /// Features `[frames, n_mels]` of utterance `index`.
    fn features(&self, index: usize) -> Result<Cow<'_, [f32]>, TeacherError> {
        let u = &self.utterances[index];
        match &u.features {
            Some(f) => Ok(Cow::Borrowed(f.as_slice())),
            None => Ok(Cow::Owned(load_features(
                Path::new(&u.path),
                &self.frontend,
            )?)),
        }
    }
}

/// Decodes, resamples and featurises one file.
fn load_features(path: &Path, frontend: &Frontend) -> Result<Vec<f32>, TeacherError> {
    let audio = voxspec_audio::load_resampled(path, frontend.config().sample_rate)?;
    Ok(frontend.features(&audio.samples))
}

/// A padded batch.
#[derive(Debug, Clone)]
pub struct CtcBatch {
    /// Utterance ids.
    pub ids: Vec<String>,
    /// `[batch, frames, n_mels]`, zero past each length.
    pub features: Tensor<3>,
    /// Valid feature frames per utterance.
    pub lengths: Vec<usize>,
    /// Character targets.
    pub targets: Vec<Vec<u32>>,
    /// Normalised transcripts.
    pub references: Vec<String>,
}

/// An epoch and its batches (lists of utterance indices).
type EpochPlan = (usize, Arc<Vec<Vec<usize>>>);

/// The batch plan of a split (see the module documentation).
#[derive(Debug)]
pub struct CtcBatches {
    corpus: Arc<CtcCorpus>,
    bucket: BucketConfig,
    spec_augment: Option<SpecAugmentConfig>,
    /// The plan of the epoch asked for last.
    plan: Mutex<Option<EpochPlan>>,
}

impl CtcBatches {
    /// A plan over `corpus`; `spec_augment` only for training.
    pub fn new(
        corpus: Arc<CtcCorpus>,
        bucket: BucketConfig,
        spec_augment: Option<SpecAugmentConfig>,
    ) -> Self {
        Self {
            corpus,
            bucket,
            spec_augment,
            plan: Mutex::new(None),
        }
    }

    /// The corpus.
    pub fn corpus(&self) -> &CtcCorpus {
        &self.corpus
    }

    /// Batches (lists of utterance indices) of `epoch`.
    ///
    /// # Errors
    /// [`TeacherError::Data`] for an invalid bucketing config.
    pub fn plan(&self, epoch: usize) -> Result<Arc<Vec<Vec<usize>>>, TeacherError> {
        let mut cached = self.plan.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((e, plan)) = cached.as_ref()
            && *e == epoch
        {
            return Ok(plan.clone());
        }
        let plan = Arc::new(bucket_batches(
            &self.corpus.lengths(),
            &self.bucket,
            epoch as u64,
        )?);
        *cached = Some((epoch, plan.clone()));
        Ok(plan)
    }

    /// Assembles batch `index` of `epoch` on `device`.
    ///
    /// # Errors
    /// [`TeacherError::InvalidInput`] for an index past the epoch, and feature errors.
    pub fn make_batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> Result<CtcBatch, TeacherError> {
        let plan = self.plan(epoch)?;
        let items = plan.get(index).ok_or_else(|| TeacherError::InvalidInput {
            what: "ctc batch index",
            reason: format!(
                "epoch {epoch} has {} batches, asked for {index}",
                plan.len()
            ),
        })?;
        let corpus = &self.corpus;
        let n_mels = corpus.frontend.n_mels();
        let lengths: Vec<usize> = items.iter().map(|&i| corpus.utterances[i].frames).collect();
        let frames = lengths.iter().copied().max().unwrap_or(1).max(1);
        let mut data = vec![0.0f32; items.len() * frames * n_mels];
        let mut rng = StdRng::seed_from_u64(batch_seed(self.bucket.seed, epoch, index));
        for (b, &i) in items.iter().enumerate() {
            let feats = corpus.features(i)?;
            let dst = &mut data[b * frames * n_mels..b * frames * n_mels + feats.len()];
            dst.copy_from_slice(&feats);
            if let Some(aug) = &self.spec_augment {
                spec_augment(dst, n_mels, aug, &mut rng);
            }
        }
        let utts = items.iter().map(|&i| &corpus.utterances[i]);
        Ok(CtcBatch {
            ids: utts.clone().map(|u| u.id.clone()).collect(),
            features: Tensor::from_data(
                TensorData::new(data, [items.len(), frames, n_mels]),
                device,
            ),
            lengths,
            targets: utts.clone().map(|u| u.target.clone()).collect(),
            references: utts.map(|u| u.reference.clone()).collect(),
        })
    }
}

impl BatchSource<CtcBatch> for CtcBatches {
    fn batches_in_epoch(&self, epoch: usize) -> usize {
        self.plan(epoch).map_or(0, |p| p.len())
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<CtcBatch> {
        self.make_batch(epoch, index, device)
            .map_err(TrainError::task)
    }
}

/// RNG seed of one batch (splitmix64 over the coordinates).
fn batch_seed(seed: u64, epoch: usize, index: usize) -> u64 {
    let mut z = seed
        ^ (epoch as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (index as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
        ^ 0x5bd1_e995;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Masks bands and frames of one utterance's `[frames, bands]` features in place (to 0, the
/// normalised mean).
pub fn spec_augment(feats: &mut [f32], bands: usize, config: &SpecAugmentConfig, rng: &mut StdRng) {
    let frames = feats.len() / bands.max(1);
    if frames == 0 {
        return;
    }
    for _ in 0..config.freq_masks {
        let width = rng.random_range(0..=config.freq_width.min(bands));
        let start = rng.random_range(0..=bands - width);
        for row in feats.chunks_exact_mut(bands) {
            row[start..start + width].fill(0.0);
        }
    }
    let cap = ((frames as f64 * config.max_time_fraction) as usize).min(config.time_width);
    for _ in 0..config.time_masks {
        let width = rng.random_range(0..=cap);
        let start = rng.random_range(0..=frames - width);
        feats[start * bands..(start + width) * bands].fill(0.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_augment_masks_within_limits_and_is_reproducible() {
        let (frames, bands) = (200, 80);
        let config = SpecAugmentConfig::new();
        let run = |seed| {
            let mut feats = vec![1.0f32; frames * bands];
            spec_augment(&mut feats, bands, &config, &mut StdRng::seed_from_u64(seed));
            feats
        };
        let a = run(3);
        assert_eq!(a, run(3));
        assert_ne!(a, run(4));
        let masked = a.iter().filter(|&&v| v == 0.0).count();
        // At most 2 × 15 bands over all frames plus 2 × 20 frames over all bands.
        assert!(masked <= 2 * 15 * frames + 2 * 20 * bands, "{masked}");
        assert!(masked > 0);
    }

    #[test]
    fn batch_seeds_differ_by_coordinate() {
        assert_ne!(batch_seed(1, 0, 1), batch_seed(1, 1, 0));
        assert_ne!(batch_seed(1, 0, 0), batch_seed(2, 0, 0));
        assert_eq!(batch_seed(5, 3, 7), batch_seed(5, 3, 7));
    }
}
