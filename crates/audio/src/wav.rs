//! Writing mono WAV files atomically with hound.
//!
//! The file is encoded in memory, written to a hidden temporary sibling, flushed to disk, then
//! renamed over the destination, so a reader never sees a half-written file and a crash leaves
//! the previous file (if any) intact.

use std::fs::{self, File};
use std::io::{self, Cursor, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::decode::Audio;
use crate::error::AudioError;

/// Sample encoding of a written WAV file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WavFormat {
    /// 16-bit signed PCM. Samples are clamped to `[-1, 1]` and scaled by 32768 with rounding to
    /// nearest (`1.0` saturates to 32767); values on the `k / 32768` grid round-trip exactly.
    #[default]
    Pcm16,
    /// 32-bit IEEE float, written bit-exactly (no clamping).
    Float32,
}

/// Convert one sample to 16-bit PCM (see [`WavFormat::Pcm16`]); NaN becomes 0.
pub fn f32_to_i16(x: f32) -> i16 {
    // `as` saturates and maps NaN to 0.
    (x.clamp(-1.0, 1.0) * 32768.0).round() as i16
}

/// Write `audio` as a mono WAV file at `path`, atomically (temporary sibling, fsync, rename).
///
/// # Errors
/// [`AudioError::InvalidConfig`] for a zero sample rate; [`AudioError::Write`] naming `path` for
/// any I/O failure (the temporary file is removed).
pub fn write_wav(path: &Path, audio: &Audio, format: WavFormat) -> Result<(), AudioError> {
    if audio.sample_rate == 0 {
        return Err(AudioError::invalid(
            "sample_rate",
            "must be positive to write a WAV file",
        ));
    }
    let bytes = wav_bytes(audio, format).map_err(|source| AudioError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    let tmp = temp_sibling(path);
    let result = write_and_rename(&tmp, path, &bytes);
    if result.is_err() {
        // Best effort: the temporary may not exist if creating it failed.
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(|source| AudioError::Write {
        path: path.to_path_buf(),
        source,
    })?;
    tracing::debug!(path = %path.display(), samples = audio.len(), ?format, "wrote wav");
    Ok(())
}

/// `audio` as the bytes of a mono WAV file (what [`write_wav`] writes), e.g. for an HTTP
/// response.
///
/// # Errors
/// The encoder's, for a zero sample rate or more samples than a WAV file can hold.
pub fn wav_bytes(audio: &Audio, format: WavFormat) -> io::Result<Vec<u8>> {
    let (bits_per_sample, sample_format) = match format {
        WavFormat::Pcm16 => (16, hound::SampleFormat::Int),
        WavFormat::Float32 => (32, hound::SampleFormat::Float),
    };
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: audio.sample_rate,
        bits_per_sample,
        sample_format,
    };
    let mut cursor = Cursor::new(Vec::with_capacity(
        44 + audio.len() * bits_per_sample as usize / 8,
    ));
    let mut writer = hound::WavWriter::new(&mut cursor, spec).map_err(hound_to_io)?;
    match format {
        WavFormat::Pcm16 => {
            for &x in &audio.samples {
                writer.write_sample(f32_to_i16(x)).map_err(hound_to_io)?;
            }
        }
        WavFormat::Float32 => {
            for &x in &audio.samples {
                writer.write_sample(x).map_err(hound_to_io)?;
            }
        }
    }
    writer.finalize().map_err(hound_to_io)?;
    Ok(cursor.into_inner())
}

fn hound_to_io(e: hound::Error) -> io::Error {
    match e {
        hound::Error::IoError(e) => e,
        other => io::Error::other(other),
    }
}

/// A hidden, unique temporary path in the same directory as `path` (same file system, so the
/// rename is atomic).
fn temp_sibling(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "audio.wav".into(), |n| n.to_string_lossy());
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    path.with_file_name(format!(".{name}.{}.{nanos}.tmp", std::process::id()))
}

fn write_and_rename(tmp: &Path, path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut file = File::create(tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    fs::rename(tmp, path)?;
    // Persist the rename itself; not all platforms can open a directory, so ignore failure.
    let parent = path.parent().filter(|d| !d.as_os_str().is_empty());
    if let Some(dir) = parent.and_then(|d| File::open(d).ok()) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decode::{load, load_with_info};

    #[test]
    fn pcm16_round_trips_bit_exactly_on_the_int16_grid() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grid.wav");
        // Every int16 value once, as k / 32768.
        let samples: Vec<f32> = (i16::MIN..=i16::MAX)
            .map(|k| f32::from(k) / 32768.0)
            .collect();
        let audio = Audio::new(samples, 16000);
        write_wav(&path, &audio, WavFormat::Pcm16).unwrap();
        let (info, back) = load_with_info(&path).unwrap();
        assert_eq!(info.codec, "pcm_s16le");
        assert_eq!(info.channels, 1);
        assert_eq!(back.sample_rate, 16000);
        assert_eq!(back.samples.len(), audio.samples.len());
        for (a, b) in audio.samples.iter().zip(&back.samples) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    #[test]
    fn float32_round_trips_bit_exactly() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("float.wav");
        // Awkward values: tiny, denormal, near-one, out of range, negative zero.
        let mut samples = vec![
            1e-30f32,
            f32::MIN_POSITIVE / 3.0,
            0.999_999_9,
            -1.5,
            2.0,
            -0.0,
        ];
        samples.extend((0..1000).map(|i| ((i as f32) * 0.137).sin() * 0.9));
        let audio = Audio::new(samples, 22050);
        write_wav(&path, &audio, WavFormat::Float32).unwrap();
        let (info, back) = load_with_info(&path).unwrap();
        assert_eq!(info.codec, "pcm_f32le");
        assert_eq!(back.sample_rate, 22050);
        assert_eq!(back.samples.len(), audio.samples.len());
        for (a, b) in audio.samples.iter().zip(&back.samples) {
            assert_eq!(a.to_bits(), b.to_bits());
        }
    }

    #[test]
    fn pcm16_clamps_and_rounds() {
        assert_eq!(f32_to_i16(1.0), 32767);
        assert_eq!(f32_to_i16(2.0), 32767);
        assert_eq!(f32_to_i16(-1.0), -32768);
        assert_eq!(f32_to_i16(-3.0), -32768);
        assert_eq!(f32_to_i16(f32::NAN), 0);
        assert_eq!(f32_to_i16(0.4 / 32768.0), 0);
        assert_eq!(f32_to_i16(0.6 / 32768.0), 1);
    }

    #[test]
    fn write_replaces_atomically_and_leaves_no_temporaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.wav");
        write_wav(&path, &Audio::new(vec![0.5; 10], 8000), WavFormat::Pcm16).unwrap();
        write_wav(&path, &Audio::new(vec![0.25; 20], 8000), WavFormat::Pcm16).unwrap();
        assert_eq!(load(&path).unwrap().samples, vec![0.25f32; 20]);
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("out.wav")]);
    }

    #[test]
    fn write_errors_name_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("no_such_dir").join("out.wav");
        let e = write_wav(&path, &Audio::new(vec![0.0; 4], 8000), WavFormat::Pcm16).unwrap_err();
        assert!(matches!(e, AudioError::Write { .. }), "{e}");
        assert!(e.to_string().contains(&path.display().to_string()), "{e}");
        let e = write_wav(
            &dir.path().join("x.wav"),
            &Audio::new(vec![0.0], 0),
            WavFormat::Pcm16,
        )
        .unwrap_err();
        assert!(
            matches!(
                e,
                AudioError::InvalidConfig {
                    field: "sample_rate",
                    ..
                }
            ),
            "{e}"
        );
    }
}
