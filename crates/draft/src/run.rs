//! A draft training run (`voxspec train draft`): its settings, saved for a resume, and the task
//! they make from a loaded target and the (text, codes) pairs.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use voxspec_data::{BucketConfig, TrainingPairs};
use voxspec_mtp::{MtpConfig, MtpData, MtpModel};

use crate::build::DraftSpec;
use crate::error::{DraftError, Result};
use crate::target::{draft_config, target_info};
use crate::train::{DistillConfig, DraftTask};

impl DistillConfig {
    /// The distillation term of `weight` at `temperature`.
    ///
    /// # Errors
    /// [`DraftError::Option`] when the weight is negative or not finite, or the temperature is
    /// not positive.
    pub fn checked(weight: f32, temperature: f32) -> Result<Self> {
        if !(weight.is_finite() && weight >= 0.0) {
            return Err(DraftError::Option {
                detail: "--distill-weight must be finite and non-negative".into(),
            });
        }
        if !(temperature.is_finite() && temperature > 0.0) {
            return Err(DraftError::Option {
                detail: "--distill-temperature must be positive".into(),
            });
        }
        Ok(Self {
            weight,
            temperature,
        })
    }
}

/// The settings of a draft training run (its `run.json`, read back on resume).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct DraftSettings {
    /// The target's run directory.
    pub target: PathBuf,
    /// The target layers the draft keeps.
    pub spec: DraftSpec,
    /// The distillation term.
    pub distill: DistillConfig,
    /// Training batches.
    pub bucket: BucketConfig,
}

/// A draft's training task, with the architecture and the record of the target its model
/// directory gets.
pub struct DraftRun {
    /// The task.
    pub task: DraftTask,
    /// The draft's architecture.
    pub config: MtpConfig,
    /// The record of the target (`MtpFile::draft`).
    pub target_info: serde_json::Value,
}

impl DraftSettings {
    /// The task training a draft of `target` (loaded from `target_dir`, architecture
    /// `target_config`, `layers` its resolved kept layers) on `pairs` (the dev split, if any,
    /// unshuffled for validation).
    pub fn run(
        &self,
        target_dir: &Path,
        target: MtpModel,
        target_config: &MtpConfig,
        layers: &[usize],
        pairs: &TrainingPairs,
    ) -> DraftRun {
        let config = draft_config(target_config, layers);
        let info = target_info(target_dir, &target, layers, &self.spec);
        let task = DraftTask {
            target,
            spec: self.spec.clone(),
            distill: self.distill,
            train: MtpData::new(&pairs.train, &config, self.bucket.clone()),
            valid: (!pairs.dev.is_empty()).then(|| {
                MtpData::new(
                    &pairs.dev,
                    &config,
                    BucketConfig {
                        shuffle: false,
                        ..self.bucket.clone()
                    },
                )
            }),
            target_info: info.clone(),
        };
        DraftRun {
            task,
            config,
            target_info: info,
        }
    }
}
