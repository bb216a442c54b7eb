//! A second way from the RVQ codec's codes to audio: a frame-rate network predicts the log-mel
//! spectrogram ([`MelDecoder`]), and the vocoder (or Griffin-Lim) renders it ([`MelSpeech`]).
//! It trains on L1 against the recordings' log-mel, with no phase to learn and no
//! discriminator, so it reaches a clean rendering in the time the waveform decoder of the codec
//! needs to stop sounding rough.
//!
//! | file | what |
//! |---|---|
//! | `model` | [`MelDecoderConfig`], [`MelDecoder`] |
//! | `train` | [`load_mel_split`], [`MelData`], [`MelDecoderTask`], [`save_mel_decoder`], [`load_mel_decoder`] |
//! | `render` | [`MelSpeech`], [`MelRenderer`] |

pub mod model;
pub mod render;
pub mod train;

pub use model::{MelDecoder, MelDecoderConfig};
pub use render::{MelRenderer, MelSpeech};
pub use train::{
    MEL_DECODER_KIND, MelBatch, MelData, MelDecoderTask, MelUtterance, load_mel_decoder,
    load_mel_split, save_mel_decoder,
};

#[cfg(test)]
mod tests;
