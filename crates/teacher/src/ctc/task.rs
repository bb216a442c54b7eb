//! Training the CTC teacher through the one training loop (`voxspec_train::TrainTask`):
//! CTC loss on training batches; on validation batches also greedy decoding and the character
//! error rate (`cer`, the mean over validation batches of each batch's total edits over its
//! total reference characters).

use std::sync::Arc;

use burn::config::Config;
use burn::tensor::activation::log_softmax;
use burn::tensor::{Device, Tensor};
use voxspec_data::{BucketConfig, Progress, TextTokenizer, Utterance};
use voxspec_train::{BatchSource, Losses, TrainError, TrainTask};

use super::cer::ErrorCounts;
use super::data::{CorpusReport, CtcBatch, CtcBatches, CtcCorpus, SpecAugmentConfig};
use super::decode::greedy_decode;
use super::frontend::FrontendConfig;
use super::loss::ctc_loss;
use super::model::{BLANK, CtcModel, CtcModelConfig};
use crate::error::TeacherError;

/// Everything the CTC task needs besides the data; saved in every checkpoint's `config.json`.
#[derive(Config, Debug)]
pub struct CtcTaskConfig {
    /// The model.
    pub model: CtcModelConfig,
    /// The front end.
    #[config(default = "FrontendConfig::new()")]
    pub frontend: FrontendConfig,
    /// SpecAugment on training batches (None: off).
    #[config(default = "Some(SpecAugmentConfig::new())")]
    pub spec_augment: Option<SpecAugmentConfig>,
    /// At most this many utterances per batch.
    #[config(default = 16)]
    pub batch_size: usize,
    /// At most this many padded feature frames (100 Hz) per batch: items × longest.
    #[config(default = 24000)]
    pub max_batch_frames: usize,
    /// Seed of the batch plan and of SpecAugment.
    #[config(default = 0)]
    pub seed: u64,
    /// Keep a split's features in memory if they need at most this many MiB.
    #[config(default = 4096)]
    pub cache_mib: usize,
}

/// The CTC training task.
#[derive(Debug)]
pub struct CtcTask {
    config: CtcTaskConfig,
    tokenizer: TextTokenizer,
    train: CtcBatches,
    valid: Option<CtcBatches>,
}

impl CtcTask {
    /// Builds the task: the features of `train` (and `dev`, if given) are computed now.
    /// Returns the task and a report per split (train, then dev).
    ///
    /// # Errors
    /// [`TeacherError::InvalidConfig`] for a model whose vocabulary differs from the tokenizer's
    /// or an empty training split; data, audio and front-end errors.
    pub fn new(
        config: CtcTaskConfig,
        tokenizer: TextTokenizer,
        train: &[Utterance],
        dev: Option<&[Utterance]>,
        progress: &dyn Progress,
    ) -> Result<(Self, Vec<CorpusReport>), TeacherError> {
        config.model.validate()?;
        if config.model.vocab_size != tokenizer.vocab_size() {
            return Err(TeacherError::InvalidConfig {
                field: "model.vocab_size",
                reason: format!(
                    "{} classes but the tokenizer has {} tokens",
                    config.model.vocab_size,
                    tokenizer.vocab_size()
                ),
            });
        }
        let frontend = config.frontend.init()?;
        let cache = config.cache_mib.saturating_mul(1 << 20);
        let bucket = |shuffle| BucketConfig {
            max_items: config.batch_size,
            max_padded_len: config.max_batch_frames,
            shuffle,
            seed: config.seed,
        };
        let (train_corpus, train_report) =
            CtcCorpus::build(train, &tokenizer, &frontend, &config.model, cache, progress)?;
        if train_corpus.is_empty() {
            return Err(TeacherError::InvalidConfig {
                field: "train",
                reason: "no training utterance left".into(),
            });
        }
        let mut reports = vec![train_report];
        let train = CtcBatches::new(
            Arc::new(train_corpus),
            bucket(true),
            config.spec_augment.clone(),
        );
        let valid = match dev {
            Some(dev) if !dev.is_empty() => {
                let (corpus, report) =
                    CtcCorpus::build(dev, &tokenizer, &frontend, &config.model, cache, progress)?;
                reports.push(report);
                Some(CtcBatches::new(Arc::new(corpus), bucket(false), None))
            }
            _ => None,
        };
        Ok((
            Self {
                config,
                tokenizer,
                train,
                valid,
            },
            reports,
        ))
    }

    /// The task config.
    pub fn task_config(&self) -> &CtcTaskConfig {
        &self.config
    }

    /// The character vocabulary.
    pub fn tokenizer(&self) -> &TextTokenizer {
        &self.tokenizer
    }

    /// The training batches.
    pub fn train_batches(&self) -> &CtcBatches {
        &self.train
    }

    /// The validation batches, if a dev split was given.
    pub fn valid_batches(&self) -> Option<&CtcBatches> {
        self.valid.as_ref()
    }

    /// CTC loss of a batch, and the decoding error counts when `decode` is set.
    ///
    /// # Errors
    /// Model and loss errors.
    pub fn evaluate(
        &self,
        model: &CtcModel,
        batch: &CtcBatch,
        decode: bool,
    ) -> Result<(Tensor<1>, Option<ErrorCounts>), TeacherError> {
        let out = model.forward(batch.features.clone(), &batch.lengths)?;
        let log_probs = log_softmax(out.logits, 2);
        let loss = ctc_loss(log_probs.clone(), &batch.targets, &out.lengths, BLANK)?;
        if loss.infinite > 0 {
            tracing::warn!(
                utterances = loss.infinite,
                "CTC target unreachable for some utterances of the batch"
            );
        }
        if !decode {
            return Ok((loss.loss, None));
        }
        let hyps = greedy_decode(log_probs, &out.lengths, BLANK)?;
        let mut counts = ErrorCounts::default();
        for (ids, reference) in hyps.iter().zip(&batch.references) {
            counts += ErrorCounts::between(&self.tokenizer.decode(ids)?, reference);
        }
        Ok((loss.loss, Some(counts)))
    }
}

impl TrainTask for CtcTask {
    type Model = CtcModel;
    type Batch = CtcBatch;

    fn init_model(&self, device: &Device) -> voxspec_train::Result<CtcModel> {
        self.config.model.init(device).map_err(TrainError::task)
    }

    fn train_data(&self) -> &dyn BatchSource<CtcBatch> {
        &self.train
    }

    fn valid_data(&self) -> Option<&dyn BatchSource<CtcBatch>> {
        self.valid.as_ref().map(|v| v as &dyn BatchSource<CtcBatch>)
    }

    fn batch_items(&self, batch: &CtcBatch) -> usize {
        batch.ids.len()
    }

    fn loss(
        &self,
        model: &CtcModel,
        batch: &CtcBatch,
        _phase: usize,
    ) -> voxspec_train::Result<Losses> {
        // Validation runs without autodiff: decode and score there only.
        let validating = !batch.features.device().is_autodiff();
        let (loss, counts) = self
            .evaluate(model, batch, validating)
            .map_err(TrainError::task)?;
        let mut terms = Vec::new();
        if let Some(counts) = counts {
            let device = batch.features.device();
            terms.push((
                "cer".to_string(),
                Tensor::<1>::from_floats([counts.rate() as f32], &device),
            ));
        }
        Ok(Losses { total: loss, terms })
    }

    fn config(&self) -> serde_json::Value {
        serde_json::to_value(&self.config).unwrap_or(serde_json::Value::Null)
    }
}
