//! A vocoder training run: the model sizes ([`VocosConfig::preset`]), the discriminator widths of
//! adversarial training ([`DiscriminatorSize`]) and the settings saved for a resume
//! ([`VocoderRunSettings`]).

use serde::{Deserialize, Serialize};
use voxspec_nn::Preset;

use crate::error::VocoderError;
use crate::speechtokenizer::DiscriminatorsConfig;
use crate::vocoder::model::VocosConfig;
use crate::vocoder::train::{VocoderLossConfig, WaveSegments};

impl VocosConfig {
    /// The vocoder of `preset`'s size: [`tiny`](Self::tiny); small [`hop160`](Self::hop160)
    /// (16 kHz at 100 frames/s, the mel rate of the mel decoder and SoCodec; about 1.2 M
    /// parameters); base Vocos' published 24 kHz size ([`base`](Self::base)).
    pub fn preset(preset: Preset) -> Self {
        match preset {
            Preset::Tiny => Self::tiny(),
            Preset::Small => Self::hop160(),
            Preset::Base => Self::base(),
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
    pub preset: Preset,
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
        preset: Preset,
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
