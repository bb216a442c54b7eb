//! Training the aligner through the one training loop: the forward-sum loss (the negative log
//! of the likelihood summed over every monotonic path through the transcript's states, per
//! frame), computed on the host by [`forward_backward`] and fed back into Burn's graph as an
//! exact surrogate:
//!
//! ```text
//! total = −Σ_{b,t,k} w_b · γ_b[t,k] · log_probs[b,t,k]  +  detach(same)  +  Σ_b w_b · nll_b
//! ```
//!
//! whose value is the loss and whose gradient with respect to the log-probabilities is
//! `−w_b γ_b`, the exact gradient of `w_b · nll_b` (γ are the frame posteriors). `w_b` is
//! `1 / (utterances · frames_b)`: the mean over utterances of the per-frame loss.
//!
//! Frames are scored by [`Scoring`]: the log-posteriors, optionally less a scaled class prior,
//! with silence kept off loud frames (without that gate both objectives collapse to *peaky*
//! posteriors: silence everywhere, each phone on one frame; see `scoring`). The gradient is
//! still `−w_b γ_b`, with the posteriors of the scored paths (exact when the prior's weight is
//! 0; with a prior, the prior is held constant).
//!
//! **Flat start.** From random weights every path is about equally likely and the posteriors
//! teach the model little. Like the flat start of HMM aligners, training therefore begins with
//! [`Objective::Uniform`]: cross-entropy against each transcript's phones spread evenly over its
//! frames (optional pauses left out). That is wrong in detail but right on average, enough for
//! the model to learn what each phone sounds like; [`Objective::ForwardSum`] then moves the
//! boundaries to where the audio puts them.

use std::sync::Arc;

use burn::config::Config;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Tensor, TensorData};
use rayon::prelude::*;
use voxspec_data::{BucketConfig, Progress, Utterance};
use voxspec_teacher::ctc::FrontendConfig;
use voxspec_train::{BatchSource, Losses, TrainError, TrainTask};

use crate::data::{AlignBatch, AlignBatches, AlignCorpus};
use crate::error::AlignError;
use crate::hmm::forward_backward;
use crate::model::{AlignerModel, AlignerModelConfig};
use crate::scoring::Scoring;
use crate::topology::Topology;

/// What the aligner is trained on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Objective {
    /// Cross-entropy against an even split of the required phones over the frames.
    Uniform,
    /// The forward-sum over every path, prior-normalised.
    ForwardSum,
    /// Cross-entropy against the current model's own best path (Viterbi training, hard EM).
    Viterbi,
}

/// Everything the aligner's training needs besides the data; saved with every checkpoint.
#[derive(Config, Debug)]
pub struct AlignTaskConfig {
    /// The model.
    pub model: AlignerModelConfig,
    /// The front end (the CTC teacher's: 80-band log-mel at 100 Hz, CMVN).
    #[config(default = "FrontendConfig::new()")]
    pub frontend: FrontendConfig,
    /// At most this many utterances per batch.
    #[config(default = 16)]
    pub batch_size: usize,
    /// At most this many padded frames per batch (items × longest).
    #[config(default = 8000)]
    pub max_batch_frames: usize,
    /// Seed of the batch plan.
    #[config(default = 0)]
    pub seed: u64,
    /// How frames are scored against states (class prior, silence gate).
    #[config(default = "Scoring::new()")]
    pub scoring: Scoring,
    /// The training objective.
    #[config(default = "Objective::ForwardSum")]
    pub objective: Objective,
    /// Start from these weights (a `model.safetensors` of the same model config) instead of
    /// random ones: the flat-start run's result.
    #[config(default = "None")]
    pub init_weights: Option<std::path::PathBuf>,
}

/// The forward-sum loss of a batch.
#[derive(Debug, Clone)]
pub struct ForwardSumLoss {
    /// Mean over utterances with a path of `nll / frames`, shape `[1]`, differentiable.
    pub loss: Tensor<1>,
    /// `−log p(frames | transcript)` per utterance (`+∞` where no path fits).
    pub nll: Vec<f64>,
}

/// Checks a batch's sizes (one length, topology and level track per utterance, each level
/// track as long as its utterance, no length past the padded frames) and reads the
/// log-probabilities back to the host.
fn host_batch(
    log_probs: &Tensor<3>,
    lengths: &[usize],
    topologies: &[Topology],
    levels: &[&[f32]],
    what: &'static str,
) -> Result<Vec<f32>, AlignError> {
    let [batch, frames, classes] = log_probs.dims();
    if lengths.len() != batch
        || topologies.len() != batch
        || levels.len() != batch
        || lengths
            .iter()
            .zip(levels)
            .any(|(&l, v)| l > frames || v.len() != l)
    {
        return Err(AlignError::input(
            what,
            format!(
                "log_probs [{batch}, {frames}, {classes}], {} lengths, {} topologies, {} level \
                 tracks",
                lengths.len(),
                topologies.len(),
                levels.len()
            ),
        ));
    }
    crate::host_f32(log_probs.to_data(), "aligner log_probs")
}

/// The forward-sum loss of padded log-probabilities.
///
/// # Shapes
/// - `log_probs`: `[batch, frames, classes]`, log-softmax over classes
/// - `lengths`: `[batch]` valid frames; `topologies`, `levels` (`[frames]` dB): one per
///   utterance
/// - `scoring`: the prior's weight λ (0 for the plain forward-sum) and the silence gate
/// - returns: [`ForwardSumLoss`] with `loss` of shape `[1]`
///
/// # Errors
/// [`AlignError::InvalidInput`] on inconsistent sizes; [`AlignError::TensorRead`].
pub fn forward_sum_loss(
    log_probs: Tensor<3>,
    lengths: &[usize],
    topologies: &[Topology],
    levels: &[&[f32]],
    scoring: &Scoring,
) -> Result<ForwardSumLoss, AlignError> {
    let [batch, frames, classes] = log_probs.dims();
    let host = host_batch(&log_probs, lengths, topologies, levels, "forward-sum batch")?;
    let per_utt = frames * classes;
    let utts: Vec<&[f32]> = (0..batch)
        .map(|b| &host[b * per_utt..b * per_utt + lengths[b] * classes])
        .collect();
    let log_prior = crate::scoring::log_prior(&utts, classes);
    let posts = (0..batch)
        .into_par_iter()
        .map(|b| {
            let scores = scoring.scores(utts[b], &log_prior, levels[b]);
            forward_backward(&scores, lengths[b], classes, &topologies[b])
        })
        .collect::<Result<Vec<_>, _>>()?;
    let count = posts
        .iter()
        .filter(|p| p.log_likelihood.is_finite())
        .count();
    let mut weighted = vec![0.0f32; batch * per_utt];
    let mut value = 0.0f64;
    for (b, p) in posts.iter().enumerate() {
        if !p.log_likelihood.is_finite() {
            continue;
        }
        let w = 1.0 / (count as f64 * lengths[b] as f64);
        value -= w * p.log_likelihood;
        for (dst, g) in weighted[b * per_utt..].iter_mut().zip(&p.occupancy) {
            *dst = (-w * g) as f32;
        }
    }
    let device = log_probs.device();
    let g = Tensor::<3>::from_data(TensorData::new(weighted, [batch, frames, classes]), &device);
    let surrogate = (log_probs * g).sum();
    let loss = (surrogate.clone() - surrogate.detach()).add_scalar(value as f32);
    Ok(ForwardSumLoss {
        loss,
        nll: posts.iter().map(|p| -p.log_likelihood).collect(),
    })
}

/// Frame targets that spread the required states of `topology` evenly over `frames` frames:
/// state `i` of `n` covers frames `⌊i·frames/n⌋ .. ⌊(i+1)·frames/n⌋`.
pub fn uniform_classes(topology: &Topology, frames: usize) -> Vec<u32> {
    let required: Vec<u32> = (0..topology.len())
        .filter(|&s| !topology.optional[s])
        .map(|s| topology.classes[s])
        .collect();
    let n = required.len().max(1);
    (0..frames)
        .map(|t| required[(t * n / frames.max(1)).min(n - 1)])
        .collect()
}

/// The class of every frame on each utterance's best path (frames scored by `scoring`, with
/// the batch's prior), detached from the graph: the targets of Viterbi training.
///
/// # Shapes
/// `log_probs: [batch, frames, classes]`; returns `lengths[b]` classes per utterance.
///
/// # Errors
/// [`AlignError::TooShort`] and shape errors; [`AlignError::TensorRead`].
pub fn best_path_classes(
    log_probs: Tensor<3>,
    lengths: &[usize],
    topologies: &[Topology],
    levels: &[&[f32]],
    scoring: &Scoring,
) -> Result<Vec<Vec<u32>>, AlignError> {
    let [batch, frames, classes] = log_probs.dims();
    let host = host_batch(&log_probs, lengths, topologies, levels, "viterbi batch")?;
    let per_utt = frames * classes;
    let utts: Vec<&[f32]> = (0..batch)
        .map(|b| &host[b * per_utt..b * per_utt + lengths[b] * classes])
        .collect();
    let log_prior = crate::scoring::log_prior(&utts, classes);
    (0..batch)
        .into_par_iter()
        .map(|b| {
            let scores = scoring.scores(utts[b], &log_prior, levels[b]);
            let (segments, _) = crate::hmm::viterbi_min_frames(
                &scores,
                lengths[b],
                classes,
                &topologies[b],
                scoring.min_phone_frames(),
            )?;
            let mut out = Vec::with_capacity(lengths[b]);
            for seg in segments {
                out.extend(std::iter::repeat_n(
                    topologies[b].classes[seg.state],
                    seg.end - seg.start,
                ));
            }
            Ok(out)
        })
        .collect()
}

/// Mean over utterances of the per-frame cross-entropy against `targets`.
///
/// # Shapes
/// `log_probs: [batch, frames, classes]`; `targets[b]`: `lengths[b]` class ids.
///
/// # Errors
/// [`AlignError::InvalidInput`] on inconsistent sizes.
pub fn frame_cross_entropy(
    log_probs: Tensor<3>,
    lengths: &[usize],
    targets: &[Vec<u32>],
) -> Result<Tensor<1>, AlignError> {
    let [batch, frames, classes] = log_probs.dims();
    if lengths.len() != batch
        || targets.len() != batch
        || lengths
            .iter()
            .zip(targets)
            .any(|(&l, t)| l > frames || t.len() != l || t.iter().any(|&c| c as usize >= classes))
    {
        return Err(AlignError::input(
            "cross-entropy batch",
            format!(
                "log_probs [{batch}, {frames}, {classes}] and {} targets",
                targets.len()
            ),
        ));
    }
    let mut weights = vec![0.0f32; batch * frames * classes];
    for (b, t) in targets.iter().enumerate() {
        let w = 1.0 / (batch as f32 * t.len().max(1) as f32);
        for (i, &c) in t.iter().enumerate() {
            weights[(b * frames + i) * classes + c as usize] = -w;
        }
    }
    let device = log_probs.device();
    let w = Tensor::<3>::from_data(TensorData::new(weights, [batch, frames, classes]), &device);
    Ok((log_probs * w).sum())
}

/// The aligner's training task.
#[derive(Debug)]
pub struct AlignTask {
    config: AlignTaskConfig,
    train: AlignBatches,
}

impl AlignTask {
    /// Builds the task over `utterances` (features computed now). The aligner learns from the
    /// very utterances it will align: only their transcripts, never an alignment.
    ///
    /// # Errors
    /// [`AlignError::InvalidConfig`] for an invalid model or no usable utterance; audio and
    /// text errors naming the utterance.
    pub fn new(
        config: AlignTaskConfig,
        utterances: &[Utterance],
        progress: &dyn Progress,
    ) -> Result<(Self, Arc<AlignCorpus>), AlignError> {
        config.model.validate()?;
        if config.frontend.n_mels != config.model.n_mels {
            return Err(AlignError::InvalidConfig {
                field: "model.n_mels",
                reason: format!(
                    "{} but the front end gives {}",
                    config.model.n_mels, config.frontend.n_mels
                ),
            });
        }
        let frontend = config.frontend.init()?;
        let corpus = Arc::new(AlignCorpus::build(utterances, &frontend, progress)?);
        let task = Self::with_corpus(config, corpus.clone())?;
        Ok((task, corpus))
    }

    /// Builds the task over an already featurised corpus.
    ///
    /// # Errors
    /// [`AlignError::InvalidConfig`] for an invalid model, features of another width than the
    /// model's input, or an empty corpus.
    pub fn with_corpus(
        config: AlignTaskConfig,
        corpus: Arc<AlignCorpus>,
    ) -> Result<Self, AlignError> {
        config.model.validate()?;
        if corpus.n_mels() != config.model.n_mels {
            return Err(AlignError::InvalidConfig {
                field: "model.n_mels",
                reason: format!(
                    "{} but the corpus has {} bands per frame",
                    config.model.n_mels,
                    corpus.n_mels()
                ),
            });
        }
        if corpus.is_empty() {
            return Err(AlignError::InvalidConfig {
                field: "utterances",
                reason: "no utterance left to train on".into(),
            });
        }
        let bucket = BucketConfig {
            max_items: config.batch_size,
            max_padded_len: config.max_batch_frames,
            shuffle: true,
            seed: config.seed,
        };
        let train = AlignBatches::new(corpus, bucket);
        Ok(Self { config, train })
    }

    /// The task config.
    pub fn task_config(&self) -> &AlignTaskConfig {
        &self.config
    }
}

impl TrainTask for AlignTask {
    type Model = AlignerModel;
    type Batch = AlignBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<AlignerModel> {
        let model = self.config.model.init(device).map_err(TrainError::task)?;
        match &self.config.init_weights {
            Some(path) => voxspec_train::load_weights(model, path),
            None => Ok(model),
        }
    }

    fn train_data(&self) -> &dyn BatchSource<AlignBatch> {
        &self.train
    }

    fn batch_items(&self, batch: &AlignBatch) -> usize {
        batch.lengths.iter().sum()
    }

    fn loss(
        &self,
        model: &AlignerModel,
        batch: &AlignBatch,
        _phase: usize,
    ) -> voxspec_train::Result<Losses> {
        let logits = model
            .forward(batch.features.clone(), &batch.lengths)
            .map_err(TrainError::task)?;
        match self.config.objective {
            Objective::Uniform => {
                let targets: Vec<Vec<u32>> = batch
                    .topologies
                    .iter()
                    .zip(&batch.lengths)
                    .map(|(t, &l)| uniform_classes(t, l))
                    .collect();
                let loss = frame_cross_entropy(log_softmax(logits, 2), &batch.lengths, &targets)
                    .map_err(TrainError::task)?;
                return Ok(Losses::total(loss));
            }
            Objective::Viterbi => {
                let log_probs = log_softmax(logits, 2);
                let levels: Vec<&[f32]> = batch.levels.iter().map(|l| l.as_slice()).collect();
                let targets = best_path_classes(
                    log_probs.clone(),
                    &batch.lengths,
                    &batch.topologies,
                    &levels,
                    &self.config.scoring,
                )
                .map_err(TrainError::task)?;
                let loss = frame_cross_entropy(log_probs, &batch.lengths, &targets)
                    .map_err(TrainError::task)?;
                return Ok(Losses::total(loss));
            }
            Objective::ForwardSum => {}
        }
        let levels: Vec<&[f32]> = batch.levels.iter().map(|l| l.as_slice()).collect();
        let out = forward_sum_loss(
            log_softmax(logits, 2),
            &batch.lengths,
            &batch.topologies,
            &levels,
            &self.config.scoring,
        )
        .map_err(TrainError::task)?;
        let unreachable = out.nll.iter().filter(|n| !n.is_finite()).count();
        if unreachable > 0 {
            tracing::warn!(unreachable, "no path for some utterances of the batch");
        }
        Ok(Losses::total(out.loss))
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or(serde_json::Value::Null)
    }
}
