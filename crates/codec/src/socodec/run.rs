//! A SoCodec training run: the settings it keeps for a resumed run (`run.json`, kind `codec`),
//! and its task built from the teacher feature stores and the audio of a prepared corpus. A
//! new run standardises features and log-mel with the training split's statistics and saves
//! them in its settings, so a resumed run reads the same numbers.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use voxspec_data::{Progress, Utterance};
use voxspec_teacher::FeatureStoreReader;
use voxspec_train::{RunSettings, TrainError};

use super::prepare::{load_raw_split, standardised, with_statistics};
use super::{SoCodecConfig, SoCodecData, SoCodecTask, SoCodecTrainConfig, SoCodecUtterance};
use crate::error::CodecError;

/// The `kind` of a codec training run's `run.json`.
const RUN_KIND: &str = "codec";

/// The codec family a run's settings record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Family {
    Socodec,
}

/// Opens the teacher feature store of `split` in `dir`.
///
/// # Errors
/// [`CodecError::FeatureStore`] naming the split and directory.
pub fn open_feature_store(dir: &Path, split: &str) -> Result<FeatureStoreReader, CodecError> {
    FeatureStoreReader::open(dir, split).map_err(|source| CodecError::FeatureStore {
        split: split.to_string(),
        dir: dir.to_path_buf(),
        source: Box::new(source),
    })
}

/// What a new run is given besides its model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SoCodecRunOptions {
    /// Seconds per training segment (rounded down to whole token frames, at least one).
    pub segment_seconds: f64,
    /// Segments per batch.
    pub batch_size: usize,
    /// Seed of the data plan.
    pub seed: u64,
    /// Train a mel discriminator alternately.
    pub adversarial: bool,
}

/// What a SoCodec training run keeps for a resumed run.
#[derive(Debug, Serialize, Deserialize)]
pub struct SoCodecRunFile {
    kind: Family,
    /// The teacher feature stores (`voxspec teacher extract` output).
    pub teacher_features: PathBuf,
    /// The task; its model holds the feature statistics once the data has been read.
    pub task: SoCodecTrainConfig,
}

impl SoCodecRunFile {
    /// The settings of a new run of `model` on the features in `teacher_features`, whose
    /// training store gives the feature width and frame shift.
    ///
    /// # Errors
    /// [`CodecError::FeatureStore`], and [`CodecError::Settings`] for a model that cannot be
    /// built.
    pub fn new(
        teacher_features: PathBuf,
        model: SoCodecConfig,
        options: &SoCodecRunOptions,
    ) -> Result<Self, CodecError> {
        let store = open_feature_store(&teacher_features, "train")?;
        let model = model
            .with_feature_dim(store.meta().dim)
            .with_feature_ms((1000.0 / store.meta().frame_rate).round() as usize);
        model.validate().map_err(|e| CodecError::Settings {
            source: Box::new(e),
        })?;
        let segment_frames = ((options.segment_seconds * 1000.0) as usize / model.frame_ms).max(1);
        let task = SoCodecTrainConfig::new(model)
            .with_segment_frames(segment_frames)
            .with_batch_size(options.batch_size)
            .with_data_seed(options.seed)
            .with_adversarial(options.adversarial);
        Ok(Self {
            kind: Family::Socodec,
            teacher_features,
            task,
        })
    }
}

/// A SoCodec training run in its directory, with its training feature store open.
pub struct SoCodecRun {
    /// The run's settings.
    pub file: SoCodecRunFile,
    /// Whether they are those of an earlier run (resumed).
    pub resumed: bool,
    /// The training split's teacher features.
    pub store: FeatureStoreReader,
}

impl SoCodecRun {
    /// The run in `out`: with `resume` and checkpoints there the settings it saved, else those
    /// `new_settings` gives (saved now); its training feature store is opened and checked
    /// against the codec.
    ///
    /// # Errors
    /// Those of `new_settings`, the run directory's, [`CodecError::FeatureStore`] and
    /// [`CodecError::FeatureStoreDim`].
    pub fn start<E>(
        out: &Path,
        resume: bool,
        new_settings: impl FnOnce() -> Result<SoCodecRunFile, E>,
    ) -> Result<Self, E>
    where
        E: From<TrainError> + From<CodecError>,
    {
        let RunSettings { settings, resumed } =
            voxspec_train::resume_or_start(out, RUN_KIND, resume, new_settings)?;
        let store = open_feature_store(&settings.teacher_features, "train")?;
        let model = &settings.task.model;
        if store.meta().dim != model.feature_dim {
            return Err(CodecError::FeatureStoreDim {
                dir: settings.teacher_features.clone(),
                found: store.meta().dim,
                expected: model.feature_dim,
            }
            .into());
        }
        Ok(Self {
            file: settings,
            resumed,
            store,
        })
    }

    /// The codec being trained.
    pub fn model(&self) -> &SoCodecConfig {
        &self.file.task.model
    }

    /// Reads the teacher features and log-mel of the `train` and `dev` utterances (dev only
    /// when its feature store opens). A new run takes the training split's statistics into its
    /// model and saves its settings with them in `out`.
    ///
    /// # Errors
    /// As [`load_raw_split`] naming the utterance; the run directory's.
    pub fn prepare(
        self,
        out: &Path,
        (train, dev): (&[Utterance], &[Utterance]),
        (train_progress, dev_progress): (&dyn Progress, &dyn Progress),
    ) -> Result<SoCodecPrepared, CodecError> {
        let mut model = self.file.task.model.clone();
        let train_raw = load_raw_split(
            train,
            &model,
            &self.store,
            train_progress,
            "train features + mel",
        )?;
        if !self.resumed {
            model = with_statistics(model, &train_raw);
        }
        let mut file = self.file;
        file.task.model = model.clone();
        if !self.resumed {
            voxspec_train::save_run_settings(out, RUN_KIND, &file)?;
        }
        let train = standardised(&model, train_raw);
        let dev = match (
            dev.is_empty(),
            open_feature_store(&file.teacher_features, "dev"),
        ) {
            (false, Ok(dev_store)) => standardised(
                &model,
                load_raw_split(dev, &model, &dev_store, dev_progress, "dev features + mel")?,
            ),
            _ => Vec::new(),
        };
        Ok(SoCodecPrepared { file, train, dev })
    }
}

/// A run's settings with its utterances read and standardised.
pub struct SoCodecPrepared {
    /// The run's settings (the model with its statistics).
    pub file: SoCodecRunFile,
    /// The training utterances.
    pub train: Vec<SoCodecUtterance>,
    /// The validation utterances (none without a dev split).
    pub dev: Vec<SoCodecUtterance>,
}

impl SoCodecPrepared {
    /// The codec being trained.
    pub fn model(&self) -> &SoCodecConfig {
        &self.file.task.model
    }

    /// The training task over the utterances (validating on the dev ones when there are any).
    ///
    /// # Errors
    /// [`CodecError::Train`] for a segment or batch the data cannot fill, or an invalid model.
    pub fn task(self) -> Result<SoCodecTask, CodecError> {
        let train = SoCodecData::new(self.train, &self.file.task, true)?;
        let valid = if self.dev.is_empty() {
            None
        } else {
            Some(SoCodecData::new(self.dev, &self.file.task, false)?)
        };
        Ok(SoCodecTask::new(self.file.task, train, valid)?)
    }
}
