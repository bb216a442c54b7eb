//! Training runs of the AR and NAR models on loaded (text, codes) pairs: the model sizes
//! ([`Preset`]), whether a model trains aligned ([`AlignmentMode`], [`choose_alignment`]),
//! the run settings saved for a resume ([`MtpSettings`], [`NarSettings`]) and the tasks built
//! from them.

use serde::{Deserialize, Serialize};
use voxspec_data::{BucketConfig, TrainingPairs};
use voxspec_nn::Preset;

use crate::error::{MtpError, Result};
use crate::model::MtpConfig;
use crate::nar::{NarConfig, NarTrackConfig};
use crate::nar_train::{NarData, NarTask, NarTaskConfig};
use crate::track::AlignConfig;
use crate::train::{MtpData, MtpTask, MtpTaskConfig};

impl MtpConfig {
    /// The AR model of `size` reading `text_vocab` text tokens and `codebook_size` codes: tiny
    /// width 32, 2 layers; small width 256, 4 layers; base width 1024, 12 layers (the paper's).
    pub fn preset(size: Preset, text_vocab: usize, codebook_size: usize) -> Self {
        match size {
            Preset::Tiny => Self::tiny(text_vocab, codebook_size),
            Preset::Small => Self::small(text_vocab, codebook_size),
            Preset::Base => Self::base(text_vocab, codebook_size),
        }
    }
}

impl NarConfig {
    /// The NAR model of `size` for `n_q` RVQ layers.
    pub fn preset(size: Preset, text_vocab: usize, codebook_size: usize, n_q: usize) -> Self {
        match size {
            Preset::Tiny => Self::tiny(text_vocab, codebook_size, n_q),
            Preset::Small => Self::small(text_vocab, codebook_size, n_q),
            Preset::Base => Self::base(text_vocab, codebook_size, n_q),
        }
    }
}

/// Whether a model is trained aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AlignmentMode {
    /// Aligned when most training utterances have durations.
    Auto,
    /// Aligned; an error when some training utterance has no durations.
    On,
    /// Plain VALL-E style model (the alignment is left to attention).
    Off,
}

/// What [`choose_alignment`] decided, with the counts it decided on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AlignmentChoice {
    /// Whether the model trains aligned.
    pub aligned: bool,
    /// Training utterances with durations.
    pub with_durations: usize,
    /// Training utterances before any were left out.
    pub train: usize,
}

impl AlignmentChoice {
    /// Training utterances left out for having no durations (only an aligned model leaves any).
    pub fn left_out(&self) -> usize {
        if self.aligned {
            self.train - self.with_durations
        } else {
            0
        }
    }
}

/// Whether a model trains aligned under `mode`; an aligned model keeps only the utterances of
/// `pairs` with durations. `Auto` trains aligned when most utterances have them (a real
/// corpus's aligner leaves some out).
///
/// # Errors
/// [`MtpError::Unaligned`] for `On` when some training utterance has no durations.
pub fn choose_alignment(mode: AlignmentMode, pairs: &mut TrainingPairs) -> Result<AlignmentChoice> {
    let with_durations = pairs.with_durations();
    let train = pairs.train.len();
    let aligned = match mode {
        AlignmentMode::Off => false,
        AlignmentMode::Auto => pairs.mostly_aligned(),
        AlignmentMode::On => {
            if with_durations != train {
                return Err(MtpError::Unaligned {
                    missing: train - with_durations,
                    total: train,
                });
            }
            true
        }
    };
    if aligned {
        pairs.keep_aligned();
    }
    Ok(AlignmentChoice {
        aligned,
        with_durations,
        train,
    })
}

/// The loss weight of each of `heads` heads: all 1 when `weights` is empty.
///
/// # Errors
/// [`MtpError::HeadWeightCount`] when there are not `heads` weights,
/// [`MtpError::HeadWeightValue`] when one is negative or not finite.
pub fn head_weights(weights: &[f32], heads: usize) -> Result<Vec<f32>> {
    if weights.is_empty() {
        return Ok(vec![1.0; heads]);
    }
    if weights.len() != heads {
        return Err(MtpError::HeadWeightCount {
            given: weights.len(),
            heads,
        });
    }
    if !weights.iter().all(|w| w.is_finite() && *w >= 0.0) {
        return Err(MtpError::HeadWeightValue);
    }
    Ok(weights.to_vec())
}

/// What an AR training run is asked for, before the data is read.
#[derive(Debug, Clone, PartialEq)]
pub struct MtpRunOptions {
    /// Model size.
    pub size: Preset,
    /// Prediction heads (1 = a plain AR model).
    pub heads: usize,
    /// Loss weight of each head (empty: all 1).
    pub head_weights: Vec<f32>,
    /// Share of the input codes replaced by random ones in training.
    pub code_noise: f32,
}

impl MtpRunOptions {
    /// Checks the head count and the code noise.
    ///
    /// # Errors
    /// [`MtpError::Option`] naming the value out of range.
    pub fn validate(&self) -> Result<()> {
        if self.heads < 1 {
            return Err(MtpError::Option {
                detail: "--heads must be at least 1".into(),
            });
        }
        if !(0.0..1.0).contains(&self.code_noise) {
            return Err(MtpError::Option {
                detail: format!("--code-noise {} must lie in [0, 1)", self.code_noise),
            });
        }
        Ok(())
    }
}

/// The settings of an AR training run (its `run.json`, read back on resume).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MtpSettings {
    /// The model.
    pub model: MtpConfig,
    /// The task.
    pub task: MtpTaskConfig,
}

impl MtpSettings {
    /// The model `options` ask for, sized to `pairs` (aligned with a look-ahead of at least
    /// 4 frames when `aligned`), trained in batches of `bucket`.
    ///
    /// # Errors
    /// Those of [`head_weights`].
    pub fn new(
        options: &MtpRunOptions,
        pairs: &TrainingPairs,
        aligned: bool,
        bucket: BucketConfig,
    ) -> Result<Self> {
        let mut model =
            MtpConfig::preset(options.size, pairs.tokenizer.vocab_size(), pairs.codebook)
                .with_n_heads(options.heads);
        if aligned {
            model.alignment = Some(AlignConfig::new().with_lookahead(options.heads.max(4)));
        }
        model.transformer.max_seq_len = pairs.seq_capacity(model.transformer.max_seq_len);
        Ok(Self {
            task: MtpTaskConfig {
                head_weights: head_weights(&options.head_weights, options.heads)?,
                bucket,
                code_noise: options.code_noise,
            },
            model,
        })
    }

    /// The training task on `pairs`: the train split with code noise, the dev split (if any)
    /// unshuffled and with shuffled texts for validation.
    pub fn task(&self, pairs: &TrainingPairs) -> MtpTask {
        let valid_bucket = BucketConfig {
            shuffle: false,
            ..self.task.bucket.clone()
        };
        MtpTask {
            model: self.model.clone(),
            task: self.task.clone(),
            train: MtpData::new(&pairs.train, &self.model, self.task.bucket.clone())
                .with_code_noise(self.task.code_noise),
            valid: (!pairs.dev.is_empty())
                .then(|| MtpData::new(&pairs.dev, &self.model, valid_bucket).with_shuffled_text()),
        }
    }
}

/// The settings of a NAR training run (its `run.json`, read back on resume).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NarSettings {
    /// The model.
    pub model: NarConfig,
    /// The task.
    pub task: NarTaskConfig,
}

impl NarSettings {
    /// The NAR model of `size` for `n_q` RVQ layers (default: all of `pairs`), sized to
    /// `pairs` (with a phone track when `aligned`), trained in batches of `bucket` with prompts
    /// of a quarter to half of each utterance.
    ///
    /// # Errors
    /// [`MtpError::NarLayers`] when `n_q` is below 2 or above the token store's layers.
    pub fn new(
        size: Preset,
        n_q: Option<usize>,
        pairs: &TrainingPairs,
        aligned: bool,
        bucket: BucketConfig,
    ) -> Result<Self> {
        let n_q = n_q.unwrap_or(pairs.n_q);
        if !(2..=pairs.n_q).contains(&n_q) {
            return Err(MtpError::NarLayers {
                n_q,
                layers: pairs.n_q,
            });
        }
        let mut model = NarConfig::preset(size, pairs.tokenizer.vocab_size(), pairs.codebook, n_q);
        if aligned {
            model.track = Some(NarTrackConfig::new());
        }
        model.transformer.max_seq_len = pairs.seq_capacity(model.transformer.max_seq_len);
        Ok(Self {
            model,
            task: NarTaskConfig {
                bucket,
                prompt_fraction: (0.25, 0.5),
            },
        })
    }

    /// The training task on `pairs` (the dev split, if any, unshuffled for validation).
    ///
    /// # Errors
    /// Those of [`NarData::new`].
    pub fn task(&self, pairs: &TrainingPairs) -> Result<NarTask> {
        let valid_config = NarTaskConfig {
            bucket: BucketConfig {
                shuffle: false,
                ..self.task.bucket.clone()
            },
            ..self.task.clone()
        };
        let layout = self.model.track_layout();
        let train = NarData::new(&pairs.train, self.model.n_q, layout, self.task.clone())?;
        let valid = if pairs.dev.is_empty() {
            None
        } else {
            Some(NarData::new(
                &pairs.dev,
                self.model.n_q,
                layout,
                valid_config,
            )?)
        };
        Ok(NarTask {
            model: self.model.clone(),
            task: self.task.clone(),
            train,
            valid,
        })
    }
}
