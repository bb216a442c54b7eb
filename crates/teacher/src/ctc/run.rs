//! A CTC teacher training run: the settings it keeps for a resumed run (`run.json`, kind
//! `ctc`) and its character tokenizer (`tokenizer.json`), trained on the training transcripts
//! when the run starts and read back when it resumes.

use std::path::Path;

use serde::{Deserialize, Serialize};
use voxspec_data::{Normalization, TextTokenizer, TokenizerKind, Utterance};
use voxspec_nn::Preset;

use super::{CtcModelConfig, CtcTaskConfig, SpecAugmentConfig};
use crate::error::TeacherError;

/// The run directory's tokenizer file.
pub const TOKENIZER_FILE: &str = "tokenizer.json";

/// What a new run is asked for.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CtcRunOptions {
    /// Model size.
    pub preset: Preset,
    /// At most this many utterances per batch.
    pub batch_size: usize,
    /// At most this many padded 100 Hz feature frames per batch.
    pub max_batch_frames: usize,
    /// Seed of the batch plan and augmentation.
    pub seed: u64,
    /// SpecAugment on the training features.
    pub spec_augment: bool,
}

/// What a CTC training run keeps for a resumed run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CtcRunFile {
    /// The model size asked for.
    pub preset: Preset,
    /// The task.
    pub task: CtcTaskConfig,
}

impl CtcRunFile {
    /// A new run in `out`: the character tokenizer trained on `train`'s transcripts and saved
    /// there, and the task over its vocabulary.
    ///
    /// # Errors
    /// When the tokenizer cannot be trained or written.
    pub fn new(
        out: &Path,
        train: &[Utterance],
        options: &CtcRunOptions,
    ) -> Result<(Self, TextTokenizer), TeacherError> {
        let tokenizer = TextTokenizer::train(
            train.iter().map(|u| u.text.as_str()),
            TokenizerKind::Char,
            &Normalization::default(),
        )?;
        tokenizer.save(&out.join(TOKENIZER_FILE))?;
        let model = CtcModelConfig::preset(options.preset, tokenizer.vocab_size());
        let task = CtcTaskConfig::new(model)
            .with_batch_size(options.batch_size)
            .with_max_batch_frames(options.max_batch_frames)
            .with_seed(options.seed)
            .with_spec_augment(options.spec_augment.then(SpecAugmentConfig::new));
        let file = Self {
            preset: options.preset,
            task,
        };
        Ok((file, tokenizer))
    }

    /// The tokenizer a run in `out` trained when it started.
    ///
    /// # Errors
    /// When `<out>/tokenizer.json` cannot be read.
    pub fn tokenizer(out: &Path) -> Result<TextTokenizer, TeacherError> {
        Ok(TextTokenizer::load(&out.join(TOKENIZER_FILE))?)
    }
}
