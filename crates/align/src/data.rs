//! The aligner's data: utterances of a prepared manifest as normalised log-mel features (the
//! CTC teacher's front end, 100 Hz) and the state [`Topology`] of their transcript, and a
//! deterministic batch plan over them (batch `index` of `epoch` is a pure function of the seed,
//! so a resumed run sees the batches an uninterrupted one would).
//!
//! Features are computed once, in parallel, and kept in memory (an hour of speech: ≈ 115 MB).
//! An utterance whose transcript has more required phones than its audio has frames is left
//! out with a warning.

use std::path::Path;
use std::sync::{Arc, Mutex};

use burn::tensor::{Device, Tensor, TensorData};
use rayon::prelude::*;
use voxspec_data::{
    BucketConfig, Progress, TextTokenizer, TokenizerKind, Utterance, bucket_batches,
};
use voxspec_teacher::ctc::Frontend;
use voxspec_train::{BatchSource, TrainError};

use crate::error::AlignError;
use crate::topology::Topology;

/// One utterance ready for alignment.
#[derive(Debug, Clone)]
pub struct AlignUtterance {
    /// The manifest entry.
    pub utterance: Utterance,
    /// Feature frames (100 Hz).
    pub frames: usize,
    /// Normalised features `[frames, n_mels]`.
    pub features: Arc<Vec<f32>>,
    /// Level of every frame in dB before normalisation (for the silence gate).
    pub levels: Arc<Vec<f32>>,
    /// States of the transcript.
    pub topology: Topology,
}

/// The utterances of a corpus.
#[derive(Debug)]
pub struct AlignCorpus {
    utterances: Vec<AlignUtterance>,
    n_mels: usize,
    /// Ids left out (transcript longer than the audio allows), with the reason.
    pub left_out: Vec<(String, String)>,
}

/// The normaliser that precedes G2P (the phoneme tokenizer's).
pub fn text_normalizer() -> Result<TextTokenizer, AlignError> {
    Ok(TextTokenizer::train(
        std::iter::empty::<&str>(),
        TokenizerKind::Phoneme,
        &voxspec_data::Normalization::default(),
    )?)
}

/// The topology of a transcript as written (normalised, then pronounced).
///
/// # Errors
/// [`AlignError`] when the text has nothing to pronounce.
pub fn transcript_topology(normalizer: &TextTokenizer, text: &str) -> Result<Topology, AlignError> {
    Topology::from_text(&normalizer.normalize(text)?)
}

impl AlignCorpus {
    /// Decodes, featurises and pronounces every utterance (in parallel).
    ///
    /// # Errors
    /// [`AlignError::Utterance`] naming the first utterance whose audio cannot be decoded or
    /// whose transcript has nothing to pronounce.
    pub fn build(
        utterances: &[Utterance],
        frontend: &Frontend,
        progress: &dyn Progress,
    ) -> Result<Self, AlignError> {
        let normalizer = text_normalizer()?;
        progress.start(utterances.len() as u64, "features");
        let built = utterances
            .par_iter()
            .map(|u| {
                let r = (|| {
                    let topology = transcript_topology(&normalizer, &u.text)?;
                    let (features, levels) = load_features(Path::new(&u.path), frontend)?;
                    Ok::<_, AlignError>((topology, features, levels))
                })()
                .map_err(|e| e.for_utterance(&u.id));
                progress.inc(1);
                r.map(|(topology, features, levels)| AlignUtterance {
                    utterance: u.clone(),
                    frames: features.len() / frontend.n_mels(),
                    features: Arc::new(features),
                    levels: Arc::new(levels),
                    topology,
                })
            })
            .collect::<Result<Vec<_>, AlignError>>();
        progress.finish();
        let mut left_out = Vec::new();
        let kept = built?
            .into_iter()
            .filter(|u| {
                let fits = u.frames >= u.topology.min_frames();
                if !fits {
                    tracing::warn!(id = %u.utterance.id, frames = u.frames,
                        phones = u.topology.min_frames(), "transcript too long for the audio: left out");
                    left_out.push((
                        u.utterance.id.clone(),
                        format!(
                            "{} frames for {} phones",
                            u.frames,
                            u.topology.min_frames()
                        ),
                    ));
                }
                fits
            })
            .collect();
        Ok(Self {
            utterances: kept,
            n_mels: frontend.n_mels(),
            left_out,
        })
    }

    /// A corpus from utterances already featurised (features `[frames, n_mels]` each).
    ///
    /// # Errors
    /// [`AlignError::InvalidInput`] naming an utterance whose features are not `frames × n_mels`
    /// or that has fewer frames than required phones.
    pub fn from_utterances(
        utterances: Vec<AlignUtterance>,
        n_mels: usize,
    ) -> Result<Self, AlignError> {
        for u in &utterances {
            if n_mels == 0 || u.features.len() != u.frames * n_mels || u.levels.len() != u.frames {
                return Err(AlignError::input(
                    "features",
                    format!(
                        "{}: {} values and {} levels for {} frames × {n_mels} bands",
                        u.utterance.id,
                        u.features.len(),
                        u.levels.len(),
                        u.frames
                    ),
                ));
            }
            if u.frames < u.topology.min_frames() {
                return Err(AlignError::TooShort {
                    frames: u.frames,
                    needed: u.topology.min_frames(),
                }
                .for_utterance(&u.utterance.id));
            }
        }
        Ok(Self {
            utterances,
            n_mels,
            left_out: Vec::new(),
        })
    }

    /// The utterances.
    pub fn utterances(&self) -> &[AlignUtterance] {
        &self.utterances
    }

    /// Number of utterances.
    pub fn len(&self) -> usize {
        self.utterances.len()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.utterances.is_empty()
    }

    /// Mel bands per frame.
    pub fn n_mels(&self) -> usize {
        self.n_mels
    }

    /// Total frames (10 ms each).
    pub fn total_frames(&self) -> usize {
        self.utterances.iter().map(|u| u.frames).sum()
    }

    /// A padded batch of the utterances at `items` on `device`.
    pub fn batch(&self, items: &[usize], device: &Device) -> AlignBatch {
        let n_mels = self.n_mels;
        let lengths: Vec<usize> = items.iter().map(|&i| self.utterances[i].frames).collect();
        let frames = lengths.iter().copied().max().unwrap_or(1).max(1);
        let mut data = vec![0.0f32; items.len() * frames * n_mels];
        for (b, &i) in items.iter().enumerate() {
            let f = &self.utterances[i].features;
            data[b * frames * n_mels..b * frames * n_mels + f.len()].copy_from_slice(f);
        }
        AlignBatch {
            items: items.to_vec(),
            features: Tensor::from_data(
                TensorData::new(data, [items.len(), frames, n_mels]),
                device,
            ),
            lengths,
            topologies: items
                .iter()
                .map(|&i| self.utterances[i].topology.clone())
                .collect(),
            levels: items
                .iter()
                .map(|&i| self.utterances[i].levels.clone())
                .collect(),
        }
    }
}

/// Decodes, resamples and featurises one file: features and frame levels.
pub(crate) fn load_features(
    path: &Path,
    frontend: &Frontend,
) -> Result<(Vec<f32>, Vec<f32>), AlignError> {
    let audio = voxspec_audio::load_resampled(path, frontend.config().sample_rate)?;
    Ok(frontend.features_and_levels(&audio.samples))
}

/// A padded batch.
#[derive(Debug, Clone)]
pub struct AlignBatch {
    /// Indices of the utterances in their corpus.
    pub items: Vec<usize>,
    /// `[batch, frames, n_mels]`, zero past each length.
    pub features: Tensor<3>,
    /// Valid frames per utterance.
    pub lengths: Vec<usize>,
    /// The transcripts' states.
    pub topologies: Vec<Topology>,
    /// Frame levels (dB) of every utterance.
    pub levels: Vec<Arc<Vec<f32>>>,
}

/// An epoch and its batches.
type EpochPlan = (usize, Arc<Vec<Vec<usize>>>);

/// The batch plan over a corpus (length-bucketed, shuffled per epoch).
#[derive(Debug)]
pub struct AlignBatches {
    corpus: Arc<AlignCorpus>,
    bucket: BucketConfig,
    plan: Mutex<Option<EpochPlan>>,
}

impl AlignBatches {
    /// A plan over `corpus`.
    pub fn new(corpus: Arc<AlignCorpus>, bucket: BucketConfig) -> Self {
        Self {
            corpus,
            bucket,
            plan: Mutex::new(None),
        }
    }

    /// The corpus.
    pub fn corpus(&self) -> &AlignCorpus {
        &self.corpus
    }

    fn plan(&self, epoch: usize) -> Result<Arc<Vec<Vec<usize>>>, AlignError> {
        let mut cached = self.plan.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((e, plan)) = cached.as_ref()
            && *e == epoch
        {
            return Ok(plan.clone());
        }
        let lengths: Vec<usize> = self.corpus.utterances.iter().map(|u| u.frames).collect();
        let plan = Arc::new(bucket_batches(&lengths, &self.bucket, epoch as u64)?);
        *cached = Some((epoch, plan.clone()));
        Ok(plan)
    }
}

impl BatchSource<AlignBatch> for AlignBatches {
    fn batches_in_epoch(&self, epoch: usize) -> usize {
        self.plan(epoch).map_or(0, |p| p.len())
    }

    fn batch(
        &self,
        epoch: usize,
        index: usize,
        device: &Device,
    ) -> voxspec_train::Result<AlignBatch> {
        let plan = self.plan(epoch).map_err(TrainError::task)?;
        let items = plan.get(index).ok_or_else(|| {
            TrainError::task(AlignError::input(
                "aligner batch index",
                format!(
                    "epoch {epoch} has {} batches, asked for {index}",
                    plan.len()
                ),
            ))
        })?;
        Ok(self.corpus.batch(items, device))
    }
}
