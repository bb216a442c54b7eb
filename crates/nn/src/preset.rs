//! [`Preset`]: the model sizes every trainable family offers (`CtcModelConfig::preset`,
//! `SpeechTokenizerConfig::preset`, `MtpConfig::preset`, …), one type for all of them.

use serde::{Deserialize, Serialize};

/// A model size. Each model family says in its own `preset` constructor what the three sizes
/// are; across families they mean the same thing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "snake_case")]
pub enum Preset {
    /// The smallest working model: tests and smoke runs.
    Tiny,
    /// Sized to train on 2 CPU cores on the bundled corpora.
    Small,
    /// The size of the family's paper (LibriTTS, a GPU).
    Base,
}

impl Preset {
    /// Every size, smallest first.
    pub const ALL: [Self; 3] = [Self::Tiny, Self::Small, Self::Base];
}
