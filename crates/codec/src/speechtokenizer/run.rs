//! A SpeechTokenizer codec training run: the settings it keeps for a resumed run (`run.json`,
//! kind `codec`) and its task, built from a prepared corpus's audio, the teacher features RVQ-1
//! is distilled to, and, for a decoder fitted to other codes, their token store.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_data::{Progress, TokenStore, Utterance};
use voxspec_nn::Preset;
use voxspec_teacher::FeatureStoreReader;

use super::DiscriminatorsConfig;
use super::prepare::load_codec_split;
use super::train::{CodecData, CodecTrainConfig, CodecTrainTask};
use crate::error::CodecError;
use crate::socodec::open_feature_store;
use crate::{SpeechTokenizerConfig, read_codec_config};

/// What a new run is asked for, before any data is read.
#[derive(Debug, Clone, PartialEq)]
pub struct CodecRunOptions {
    /// Model size (replaced by `init`'s config when there is one).
    pub preset: Preset,
    /// A trained codec directory to start from.
    pub init: Option<PathBuf>,
    /// Teacher feature stores RVQ-1 is distilled to (`None`: no distillation).
    pub teacher_features: Option<PathBuf>,
    /// A token store whose codes the decoder learns to render instead of its encoder's.
    pub decoder_codes: Option<PathBuf>,
    /// Seconds per training segment (rounded down to whole frames, at least one).
    pub segment_seconds: f64,
    /// Segments per batch.
    pub batch_size: usize,
    /// Seed of the data plan.
    pub seed: u64,
    /// Train MPD + MSD discriminators alternately.
    pub adversarial: bool,
    /// Train the decoder alone (encoder, projection and codebooks frozen).
    pub decoder_only: bool,
}

/// What a codec training run keeps for a resumed run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CodecRunFile {
    /// The model size asked for.
    pub preset: Preset,
    /// The teacher feature stores.
    pub teacher_features: Option<PathBuf>,
    /// The codec the run started from.
    #[serde(default)]
    pub init: Option<PathBuf>,
    /// The codes the decoder renders.
    #[serde(default)]
    pub decoder_codes: Option<PathBuf>,
    /// The task.
    pub task: CodecTrainConfig,
}

impl CodecRunFile {
    /// The settings of a new run.
    ///
    /// # Errors
    /// [`CodecError::InvalidConfig`] for a batch of 0 or a segment outside (0, 60] s;
    /// [`CodecError::Weights`] when `init` has no readable config; [`CodecError::FeatureStore`]
    /// and [`CodecError::FeatureStoreDim`] when the teacher features cannot be opened or do not
    /// match `init`'s semantic width.
    pub fn new(options: &CodecRunOptions) -> Result<Self, CodecError> {
        if options.batch_size == 0 {
            return Err(CodecError::InvalidConfig {
                field: "batch_size",
                reason: "must be at least 1".into(),
            });
        }
        if !(options.segment_seconds > 0.0 && options.segment_seconds <= 60.0) {
            return Err(CodecError::InvalidConfig {
                field: "segment",
                reason: format!(
                    "{} s: a training segment is given in seconds, above 0 and at most 60 \
                     (SpeechTokenizer trains on 3 s, the bundled recipes on 1–3 s)",
                    options.segment_seconds
                ),
            });
        }
        let mut model = match &options.init {
            Some(dir) => read_codec_config(dir)?,
            None => SpeechTokenizerConfig::preset(options.preset),
        };
        if let Some(dir) = &options.teacher_features {
            let dim = open_feature_store(dir, "train")?.meta().dim;
            if options.init.is_some() && model.semantic_dimension != dim {
                return Err(CodecError::FeatureStoreDim {
                    dir: dir.clone(),
                    found: dim,
                    expected: model.semantic_dimension,
                });
            }
            model = model.with_semantic_dimension(dim);
        }
        let hop = model.hop_length();
        let frames =
            ((options.segment_seconds * f64::from(model.sample_rate)) as usize / hop).max(1);
        let task = CodecTrainConfig::new()
            .with_model(model)
            .with_segment_samples(frames * hop)
            .with_batch_size(options.batch_size)
            .with_data_seed(options.seed)
            .with_adversarial(options.adversarial.then(DiscriminatorsConfig::new))
            .with_decoder_only(options.decoder_only);
        Ok(Self {
            preset: options.preset,
            teacher_features: options.teacher_features.clone(),
            init: options.init.clone(),
            decoder_codes: options.decoder_codes.clone(),
            task,
        })
    }

    /// The run's task on the `train` and `dev` utterances (dev may be empty: no validation),
    /// their audio read at the codec's rate with a progress display each, on `device`.
    ///
    /// # Errors
    /// When a store cannot be opened or does not match the model, audio cannot be read, or a
    /// split has no usable utterance.
    pub fn task(
        &self,
        (train, dev): (&[Utterance], &[Utterance]),
        (train_progress, dev_progress): (&dyn Progress, &dyn Progress),
        device: &Device,
    ) -> Result<CodecTrainTask, CodecError> {
        let model = &self.task.model;
        let features = |split| -> Result<Option<FeatureStoreReader>, CodecError> {
            let Some(dir) = &self.teacher_features else {
                return Ok(None);
            };
            let store = open_feature_store(dir, split)?;
            if store.meta().dim != model.semantic_dimension {
                return Err(CodecError::FeatureStoreDim {
                    dir: dir.clone(),
                    found: store.meta().dim,
                    expected: model.semantic_dimension,
                });
            }
            Ok(Some(store))
        };
        let codes = |split| -> Result<Option<TokenStore>, CodecError> {
            self.decoder_codes
                .as_deref()
                .map(|dir: &Path| TokenStore::open(dir, split))
                .transpose()
                .map_err(CodecError::from)
        };
        let train_features = features("train")?;
        match (&self.teacher_features, &train_features) {
            (Some(dir), Some(store)) => tracing::info!(
                "teacher features {}: {}-d at {} Hz ({}), codec frames at {} Hz",
                dir.display(),
                store.meta().dim,
                store.meta().frame_rate,
                store.meta().teacher,
                model.frame_rate()
            ),
            _ => tracing::info!("no teacher features: training without semantic distillation"),
        }
        if let Some(dir) = &self.decoder_codes {
            tracing::info!("the decoder renders the codes of {}", dir.display());
        }
        let hop = model.hop_length();
        let (segment, batch, seed) = (
            self.task.segment_samples,
            self.task.batch_size,
            self.task.data_seed,
        );
        let train_codes = codes("train")?;
        let train_utts = load_codec_split(
            train,
            model,
            train_features.as_ref(),
            train_codes.as_ref(),
            train_progress,
            "train audio",
            device,
        )?;
        let dev_utts = if dev.is_empty() {
            Vec::new()
        } else {
            // A missing dev feature store leaves validation without distillation.
            let dev_features = features("dev").ok().flatten();
            let dev_codes = codes("dev")?;
            load_codec_split(
                dev,
                model,
                dev_features.as_ref(),
                dev_codes.as_ref(),
                dev_progress,
                "dev audio",
                device,
            )?
        };
        tracing::info!(
            "train: {} utterances, dev: {} utterances; segments of {segment} samples, batch {batch}",
            train_utts.len(),
            dev_utts.len(),
        );
        let train_data = CodecData::new(train_utts, segment, batch, hop, seed)?;
        let valid_data = if dev_utts.is_empty() {
            None
        } else {
            Some(CodecData::new(dev_utts, segment, batch, hop, seed)?)
        };
        let task = CodecTrainTask::new(self.task.clone(), train_data, valid_data, device)?;
        Ok(match &self.init {
            Some(dir) => task.with_init(dir.join(voxspec_train::weights::WEIGHTS_FILE)),
            None => task,
        })
    }
}
