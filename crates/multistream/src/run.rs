//! Training runs of the multi-stream LM: the settings each kind of run keeps in `run.json` for
//! a resumed run, its task, and the model directory it ends with. Three kinds:
//!
//! - a new LM ([`MultiStreamSettings`], kind `multistream`): a preset sized for the items, with
//!   optional extra heads and step track;
//! - a draft for speculative decoding ([`DraftSettings`], kind `multistream-draft`): layers cut
//!   from a trained target, the lower ones and the heads trained, the rest frozen;
//! - extra heads on a trained LM ([`HeadsSettings`], kind `multistream`): the LM frozen, only
//!   the new heads trained (Medusa-1).

use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_data::{BucketConfig, TrainingPairs};
use voxspec_draft::DraftSpec;

use crate::align::MsAlignConfig;
use crate::draft::{cut_draft, draft_freeze_patterns};
use crate::error::{MultiStreamError, Result};
use crate::files::{MsFile, load_multistream, save_multistream, save_stream_transitions};
use crate::model::{MultiStreamConfig, MultiStreamModel};
use crate::mtp::{MsMtpConfig, base_freeze_patterns, with_fresh_heads};
use crate::prepare::{positions_needed, stream_transitions, units_per_frame};
use crate::train::{MsItem, MultiStreamData, MultiStreamTask, MultiStreamTaskConfig};

/// What a new LM is built with besides its preset.
#[derive(Debug, Clone, PartialEq)]
pub struct MsModelOptions {
    /// Delay step `d`: stream `j` is delayed by `d · j` steps.
    pub delay: usize,
    /// Width of the voice vectors.
    pub global_dim: usize,
    /// Dropout of the transformer (`None`: the preset's).
    pub dropout: Option<f64>,
    /// Extra multi-token heads (`None`: the plain LM).
    pub mtp: Option<MsMtpConfig>,
    /// Codec frames per second, when the model is aligned (a step track of the phones of the
    /// frames ahead and a duration predictor); `None`: alignment left to attention.
    pub aligned_frame_rate: Option<f32>,
}

impl MultiStreamConfig {
    /// This preset with `options`, its positions covering `items` (a prompt and a target as
    /// long as the longest).
    pub fn for_items<'a>(
        mut self,
        options: &MsModelOptions,
        items: impl IntoIterator<Item = &'a MsItem>,
    ) -> Self {
        self = self
            .with_delay(options.delay)
            .with_global_dim(options.global_dim);
        if let Some(p) = options.dropout {
            self.transformer.dropout = p;
        }
        if let Some(mtp) = &options.mtp {
            self.mtp = Some(mtp.clone());
        }
        if let Some(frame_rate) = options.aligned_frame_rate {
            // Every stream sees the phones of the frame it predicts (stream j is d·j steps late).
            self.align = Some(
                MsAlignConfig::new()
                    .with_units_per_frame(units_per_frame(frame_rate))
                    .with_frames_behind(options.delay * (self.streams - 1)),
            );
        }
        self.transformer.max_seq_len =
            self.transformer
                .max_seq_len
                .max(positions_needed(items, options.delay, self.streams));
        self
    }
}

/// The validation batches of `bucket`: the same sizes, in order.
fn in_order(bucket: &BucketConfig) -> BucketConfig {
    BucketConfig {
        shuffle: false,
        ..bucket.clone()
    }
}

/// Validation data over `dev` (none when empty).
fn valid_data(
    dev: Vec<MsItem>,
    config: &MultiStreamConfig,
    bucket: &BucketConfig,
) -> Result<Option<MultiStreamData>> {
    if dev.is_empty() {
        return Ok(None);
    }
    MultiStreamData::new(dev, config, in_order(bucket)).map(Some)
}

/// Writes the model directory of a finished run into `out`: the model, with extra heads one
/// transition matrix per stream from `pairs`' training codes, and `pairs`' tokenizer.
///
/// # Errors
/// The files' errors, naming the file.
pub fn save_run(
    out: &Path,
    file: &MsFile,
    model: &MultiStreamModel,
    pairs: &TrainingPairs,
) -> Result<()> {
    save_multistream(out, file, model)?;
    if file.model.mtp.is_some() {
        save_stream_transitions(
            out,
            &stream_transitions(&pairs.train, file.model.streams, pairs.codebook)?,
        )?;
    }
    pairs.tokenizer.save(&out.join("tokenizer.json"))?;
    Ok(())
}

/// The settings of a new LM's run.
#[derive(Debug, Serialize, Deserialize)]
pub struct MultiStreamSettings {
    /// The model.
    pub model: MultiStreamConfig,
    /// Batching.
    pub task: MultiStreamTaskConfig,
    /// The codec that made the tokens (its directory as given).
    pub codec: String,
    /// Probability of replacing each input code by the special token in training.
    #[serde(default)]
    pub code_dropout: f32,
}

impl MultiStreamSettings {
    /// The training task over `train`, validated on `dev` with the shuffled-text check.
    ///
    /// # Errors
    /// As [`MultiStreamData::new`].
    pub fn task(&self, train: Vec<MsItem>, dev: Vec<MsItem>) -> Result<MultiStreamTask> {
        Ok(MultiStreamTask {
            model: self.model.clone(),
            task: self.task.clone(),
            train: MultiStreamData::new(train, &self.model, self.task.bucket.clone())?
                .with_code_dropout(self.code_dropout),
            valid: valid_data(dev, &self.model, &self.task.bucket)?
                .map(MultiStreamData::with_shuffled_text),
            init: None,
        })
    }

    /// The model file of the trained LM.
    pub fn file(&self) -> MsFile {
        MsFile {
            model: self.model.clone(),
            codec: Some(self.codec.clone()),
            draft: None,
        }
    }
}

/// A trained LM, frozen: the target of a draft or the base of extra heads.
pub struct FrozenLm {
    /// Its run directory, as given.
    pub dir: PathBuf,
    /// Its model file.
    pub file: MsFile,
    /// Its weights.
    pub model: MultiStreamModel,
}

impl FrozenLm {
    /// Loads the LM in `dir` onto `device` as the target (`draft`) or base of a run on
    /// `pairs` and `train` (checked: not a draft, the same text tokens and codes, and
    /// alignments for an aligned LM).
    ///
    /// # Errors
    /// [`MultiStreamError::Load`], [`MultiStreamError::DraftAsTarget`] /
    /// [`MultiStreamError::DraftAsBase`], [`MultiStreamError::DataMismatch`] and
    /// [`MultiStreamError::NeedsAlignments`].
    pub fn load(
        dir: &Path,
        draft: bool,
        (pairs, train): (&TrainingPairs, &[MsItem]),
        device: &Device,
    ) -> Result<Self> {
        let role = if draft { "target" } else { "base LM" };
        let (file, model) = load_multistream(dir, device).map_err(|e| MultiStreamError::Load {
            what: role,
            dir: dir.to_path_buf(),
            source: Box::new(e),
        })?;
        let dir = dir.to_path_buf();
        if file.draft.is_some() {
            return Err(if draft {
                MultiStreamError::DraftAsTarget { dir }
            } else {
                MultiStreamError::DraftAsBase { dir }
            });
        }
        let m = &file.model;
        if m.text_vocab != pairs.tokenizer.vocab_size() || m.codebook_size != pairs.codebook {
            return Err(MultiStreamError::DataMismatch {
                role,
                text_vocab: m.text_vocab,
                codebook: m.codebook_size,
                data_text_vocab: pairs.tokenizer.vocab_size(),
                data_codebook: pairs.codebook,
            });
        }
        if m.align.is_some() && train.iter().any(|i| i.durations.is_none()) {
            return Err(MultiStreamError::NeedsAlignments { role });
        }
        Ok(Self { dir, file, model })
    }
}

/// The settings of a draft's run.
#[derive(Debug, Serialize, Deserialize)]
pub struct DraftSettings {
    /// The target's run directory.
    pub target: PathBuf,
    /// The target layers kept.
    pub spec: DraftSpec,
    /// Batching.
    pub bucket: BucketConfig,
}

/// A draft's training: its task, freeze list and model file.
pub struct DraftRun {
    /// The task, starting from the layers cut from the target.
    pub task: MultiStreamTask,
    /// Parameter-path regexes of what stays frozen.
    pub freeze: Vec<String>,
    /// The draft's model file.
    pub file: MsFile,
    /// The target layers kept.
    pub layers: Vec<usize>,
}

impl DraftSettings {
    /// The draft of these settings cut from `target`, trained on `train` (validated on `dev`).
    ///
    /// # Errors
    /// [`MultiStreamError::InvalidConfig`] for a bad layer selection; as
    /// [`MultiStreamData::new`].
    pub fn run(
        &self,
        target: FrozenLm,
        (train, dev): (Vec<MsItem>, Vec<MsItem>),
    ) -> Result<DraftRun> {
        let t = &target.file.model;
        // The target's weights are constants; the loop's freeze list decides what trains.
        let (config, model) = cut_draft(&target.model.no_grad(), t, &self.spec)?;
        let layers = self.spec.resolve(t.transformer.n_layers).map_err(|e| {
            MultiStreamError::InvalidConfig {
                detail: e.to_string(),
            }
        })?;
        let task = MultiStreamTask {
            model: config.clone(),
            task: MultiStreamTaskConfig {
                bucket: self.bucket.clone(),
            },
            train: MultiStreamData::new(train, &config, self.bucket.clone())?,
            valid: valid_data(dev, &config, &self.bucket)?,
            init: Some(model),
        };
        let file = MsFile {
            model: config,
            codec: target.file.codec.clone(),
            draft: Some(serde_json::json!({
                "target": target.dir.display().to_string(),
                "layers": layers,
                "target_n_layers": t.transformer.n_layers,
                "spec": self.spec,
            })),
        };
        Ok(DraftRun {
            task,
            freeze: draft_freeze_patterns(&self.spec)?,
            file,
            layers,
        })
    }
}

/// The settings of a run training extra heads on a frozen LM.
#[derive(Debug, Serialize, Deserialize)]
pub struct HeadsSettings {
    /// The base LM's run directory.
    pub base: PathBuf,
    /// The heads.
    pub mtp: MsMtpConfig,
    /// Batching.
    pub bucket: BucketConfig,
    /// Probability of replacing each input code by the special token in training.
    pub code_dropout: f32,
}

/// The training of extra heads: the task, freeze list and model file.
pub struct HeadsRun {
    /// The task, starting from the base with fresh heads.
    pub task: MultiStreamTask,
    /// Parameter-path regexes of what stays frozen (all but the new heads).
    pub freeze: Vec<String>,
    /// The model file of the base with its heads.
    pub file: MsFile,
}

impl HeadsSettings {
    /// The heads of these settings on `base` (on `device`), trained on `train` (validated on
    /// `dev`).
    ///
    /// # Errors
    /// As [`MultiStreamData::new`].
    pub fn run(
        &self,
        base: FrozenLm,
        (train, dev): (Vec<MsItem>, Vec<MsItem>),
        device: &Device,
    ) -> Result<HeadsRun> {
        let config = MultiStreamConfig {
            mtp: Some(self.mtp.clone()),
            ..base.file.model.clone()
        };
        // The base's weights are constants; only the new heads are trainable.
        let model = with_fresh_heads(base.model, &config, self.mtp.heads, device);
        let task = MultiStreamTask {
            model: config.clone(),
            task: MultiStreamTaskConfig {
                bucket: self.bucket.clone(),
            },
            train: MultiStreamData::new(train, &config, self.bucket.clone())?
                .with_code_dropout(self.code_dropout),
            valid: valid_data(dev, &config, &self.bucket)?,
            init: Some(model),
        };
        Ok(HeadsRun {
            task,
            freeze: base_freeze_patterns(),
            file: MsFile {
                model: config,
                codec: base.file.codec,
                draft: None,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use voxspec_data::Codes;

    use super::*;

    #[test]
    fn a_new_model_covers_its_items_and_sees_the_phones_of_its_frames() {
        let item = MsItem {
            id: "u".into(),
            text: vec![1; 300],
            codes: Codes::new(4, 200, vec![0; 800]).unwrap(),
            global: None,
            durations: None,
        };
        let plain = MsModelOptions {
            delay: 2,
            global_dim: 16,
            dropout: None,
            mtp: None,
            aligned_frame_rate: None,
        };
        let preset = MultiStreamConfig::tiny(10, 32, 4);
        let config = preset.clone().for_items(&plain, [&item]);
        assert_eq!((config.delay, config.global_dim), (2, 16));
        assert_eq!(config.transformer.dropout, preset.transformer.dropout);
        assert!(config.align.is_none() && config.mtp.is_none());
        assert_eq!(
            config.transformer.max_seq_len,
            preset
                .transformer
                .max_seq_len
                .max(positions_needed([&item], 2, 4))
        );

        let aligned = MsModelOptions {
            dropout: Some(0.3),
            mtp: Some(MsMtpConfig::new(3)),
            aligned_frame_rate: Some(1000.0 / 120.0),
            ..plain
        };
        let config = preset.for_items(&aligned, [&item]);
        assert_eq!(config.transformer.dropout, 0.3);
        assert_eq!(config.mtp.map(|m| m.heads), Some(3));
        let align = config.align.unwrap();
        assert_eq!((align.units_per_frame, align.frames_behind), (6, 6));
    }
}
