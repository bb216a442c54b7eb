//! Audio I/O and features for voxspec: decoding (symphonia), resampling (rubato), WAV writing
//! (hound), STFT/iSTFT, a librosa-compatible log-mel front-end (rustfft) and YIN pitch (F0).
//!
//! Everything works on mono `f32` audio in `[-1, 1]`. Library code reports through `tracing`
//! and returns [`AudioError`], whose messages name the file concerned.
//!
//! | module | what |
//! |---|---|
//! | `decode` | [`load`], [`load_resampled`], [`probe`], [`load_with_info`] |
//! | `resample` | [`resample`] (rubato FFT or sinc, delay removed, exact length) |
//! | `wav` | [`write_wav`] (atomic) |
//! | `stft` | [`Stft`], [`Spectrogram`] (`librosa.stft` / `istft` conventions) |
//! | `mel` | [`mel_filterbank`], [`LogMel`] (`librosa.feature.melspectrogram` parity) |
//! | `pitch` | [`pitch_track`], [`median_f0`], [`voiced_fraction`]: YIN F0 with a voicing decision |

mod decode;
mod error;
mod mel;
mod pitch;
mod resample;
mod signal;
mod stft;
mod wav;

pub use decode::{Audio, AudioInfo, load, load_bytes, load_resampled, load_with_info, probe};
pub use error::AudioError;
pub use mel::{LogMel, MelConfig, hz_to_mel, mel_filterbank, mel_to_hz};
pub use pitch::{PitchConfig, median_f0, pitch_track, voiced_fraction};
pub use resample::{
    FFT_MAX_BLOCK, FFT_TARGET_BLOCK, ResampleMethod, SINC_LEN, SINC_OVERSAMPLING, resample,
    resample_with, resampled_len,
};
pub use rustfft::num_complex::Complex;
pub use signal::sine;
pub use stft::{Spectrogram, Stft, StftConfig, hann_window};
pub use wav::{WavFormat, f32_to_i16, wav_bytes, write_wav};

#[cfg(test)]
mod tests {
    /// The front-end is shared across data-loader threads and errors cross `anyhow`.
    #[test]
    fn public_types_are_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::LogMel>();
        check::<super::Stft>();
        check::<super::AudioError>();
        check::<super::Audio>();
    }
}
