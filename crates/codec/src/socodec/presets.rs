//! The model sizes of a SoCodec: named constructors of [`SoCodecConfig`].

use super::SoCodecConfig;

impl SoCodecConfig {
    /// The codec of `preset`'s size ([`tiny`](Self::tiny), [`small`](Self::small),
    /// [`base`](Self::base)).
    pub fn preset(preset: voxspec_nn::Preset) -> Self {
        match preset {
            voxspec_nn::Preset::Tiny => Self::tiny(),
            voxspec_nn::Preset::Small => Self::small(),
            voxspec_nn::Preset::Base => Self::base(),
        }
    }

    /// For tests and smoke runs: width 16, latent 16, sub-codebooks of 16 entries, 4 k-means
    /// iterations.
    pub fn tiny() -> Self {
        Self::new()
            .with_channels(16)
            .with_latent_dim(16)
            .with_sub_codebook_size(16)
            .with_global_channels(16)
            .with_kmeans_iters(4)
    }

    /// The defaults: width 192, latent 128, sub-codebooks of 128 entries (16,384 tokens per
    /// stream, as in the paper).
    pub fn small() -> Self {
        Self::new()
    }

    /// Width 1024, latent 1024, two residual blocks per stage, a global encoder of 512
    /// channels.
    pub fn base() -> Self {
        Self::new()
            .with_channels(1024)
            .with_latent_dim(1024)
            .with_blocks(2)
            .with_global_channels(512)
    }
}
