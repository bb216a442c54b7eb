//! A vocoder training run: the model sizes ([`VocosPreset`]), the discriminator widths of
//! adversarial training ([`DiscriminatorSize`]) and the settings saved for a resume
//! ([`VocoderRunSettings`]).

use serde::{Deserialize, Serialize};

use crate::error::VocoderError;
use crate::speechtokenizer::DiscriminatorsConfig;
use crate::vocoder::model::VocosConfig;
use crate::vocoder::train::{VocoderLossConfig, WaveSegments};

/// Vocoder sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VocosPreset {
    /// 16 kHz, n_fft 256, hop 64, 20 mels, width 32, 2 blocks: for tests and smoke runs.
    Tiny,
    /// 16 kHz, n_fft 1024, hop 256, 80 mels, width 256, 4 blocks.
    Small,
    /// 16 kHz, n_fft 640, hop 160 (100 frames/s, SoCodec's mel rate), 80 mels, width 192,
    /// 4 blocks (about 1.2 M parameters).
    Hop160,
    /// Vocos' published 24 kHz size: n_fft 1024, hop 256, 100 mels, width 512, 8 blocks.
    Base,
}

impl VocosConfig {
    /// The vocoder of `preset`'s size.
    pub fn preset(preset: VocosPreset) -> Self {
        match preset {
            VocosPreset::Tiny => Self::tiny(),
            VocosPreset::Small => Self::small(),
            VocosPreset::Hop160 => Self::hop160(),
            VocosPreset::Base => Self::base(),
        }
    }
}

/// Width of the discriminators of adversarial vocoder training.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscriminatorSize {
    /// Period discriminators of base width 8, scale discriminators of 32 (a quarter of
    /// HiFi-GAN's channels).
    Small,
    /// HiFi-GAN's widths: 32 and 128.
    Full,
}

impl DiscriminatorsConfig {
    /// The multi-period and multi-scale discriminators of `size`.
    pub fn sized(size: DiscriminatorSize) -> Self {
        match size {
            DiscriminatorSize::Small => Self::new().with_period_channels(8).with_scale_channels(32),
            DiscriminatorSize::Full => Self::new(),
        }
    }
}

/// The settings of a vocoder training run (its `run.json`, read back on resume).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct VocoderRunSettings {
    /// The preset asked for (the model may come from an initial vocoder instead).
    pub preset: VocosPreset,
    /// The model.
    pub model: VocosConfig,
    /// The losses.
    pub loss: VocoderLossConfig,
    /// Mel frames per training segment.
    pub segment_frames: usize,
    /// Segments per batch.
    pub batch_size: usize,
    /// Seed of the segment order.
    pub data_seed: u64,
}

impl VocoderRunSettings {
    /// A run of `model` on segments of `segment_seconds` (rounded down to whole mel frames, at
    /// least one), against discriminators of `adversarial` when given.
    ///
    /// # Errors
    /// Those of [`VocosConfig::validate`].
    pub fn new(
        preset: VocosPreset,
        model: VocosConfig,
        segment_seconds: f64,
        adversarial: Option<DiscriminatorSize>,
        batch_size: usize,
        data_seed: u64,
    ) -> Result<Self, VocoderError> {
        model.validate()?;
        let segment_frames =
            ((segment_seconds * f64::from(model.sample_rate)) as usize / model.hop_length).max(1);
        Ok(Self {
            preset,
            model,
            loss: VocoderLossConfig {
                adversarial: adversarial.map(DiscriminatorsConfig::sized),
                ..VocoderLossConfig::default()
            },
            segment_frames,
            batch_size,
            data_seed,
        })
    }

    /// `waves` cut into this run's segments.
    ///
    /// # Errors
    /// Those of [`WaveSegments::new`].
    pub fn segments(&self, waves: &[Vec<f32>]) -> Result<WaveSegments, VocoderError> {
        WaveSegments::new(
            &self.model,
            waves,
            self.segment_frames,
            self.batch_size,
            self.data_seed,
        )
    }
}
