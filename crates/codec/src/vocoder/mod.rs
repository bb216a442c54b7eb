//! Audio out: a Vocos-style neural vocoder (log-mel → waveform through a predicted complex
//! spectrum and a differentiable iSTFT) and Griffin-Lim as the training-free fallback.
//!
//! | file | what |
//! |---|---|
//! | `stft` | [`TensorStft`]: differentiable STFT / iSTFT from Burn tensor ops |
//! | `griffin_lim` | [`griffin_lim`], [`griffin_lim_from_log_mel`] (host-side, on `voxspec_audio::Stft`) |
//! | `model` | [`VocosConfig`] (presets `tiny`, `small`, `hop160`, `base`), [`Vocos`] |
//! | `synth` | [`Vocoder`] (a loaded model: samples → log-mel → samples), [`vocoder_log_mel`], [`Vocos::synthesize`], [`griffin_lim_resynthesize`] |
//! | `run` | [`VocoderRunSettings`] (a training run's settings), sizes ([`VocosConfig::preset`]), [`DiscriminatorSize`] |
//! | `train` | [`VocoderTask`]: multi-resolution STFT + mel L1 (+ MPD/MSD adversaries, [`VocoderGan`]) training through `voxspec-train` |

pub mod griffin_lim;
pub mod model;
pub mod run;
pub mod stft;
pub mod synth;
pub mod train;

pub use griffin_lim::{
    GriffinLimConfig, GriffinLimOutput, MelInverse, PhaseRefinement, griffin_lim,
    griffin_lim_from_log_mel, pseudo_inverse, refine_phase, spectral_convergence,
};
pub use model::{ConvNextBlock, NORM_EPSILON, Vocos, VocosConfig};
pub use run::{DiscriminatorSize, VocoderRunSettings};
pub use stft::TensorStft;
pub use synth::{Vocoder, griffin_lim_resynthesize, vocoder_log_mel};
pub use train::{
    MelLoss, MultiResolutionStftLoss, VOCODER_KIND, VocoderBatch, VocoderGan, VocoderLossConfig,
    VocoderTask, WaveSegments, load_vocoder, phase_loss, save_vocoder,
};
