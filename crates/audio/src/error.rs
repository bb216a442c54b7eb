//! The crate's error type.
//!
//! Every variant that concerns a file carries its path, and the `Display` message names it, so an
//! error that reaches a log line or a corpus-preparation report says which file was at fault.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong while reading, resampling, analysing or writing audio.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    /// The file does not exist.
    #[error("audio file not found: {}", path.display())]
    NotFound {
        /// The missing file.
        path: PathBuf,
    },
    /// The file exists but could not be opened or read.
    #[error("cannot read audio file {}: {source}", path.display())]
    Io {
        /// The file being read.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
    /// The file has zero bytes, or decoding it produced zero samples.
    #[error("audio file {} is empty (no bytes or no decodable samples)", path.display())]
    Empty {
        /// The empty file.
        path: PathBuf,
    },
    /// The container format or the codec is not one this crate decodes.
    #[error("unsupported audio in {}: {detail}", path.display())]
    Unsupported {
        /// The file being read.
        path: PathBuf,
        /// What was not supported.
        detail: String,
    },
    /// The file is malformed: a decode error, a truncated stream or an inconsistent header.
    #[error("corrupt audio file {}: {detail}", path.display())]
    Corrupt {
        /// The file being read.
        path: PathBuf,
        /// What was wrong.
        detail: String,
    },
    /// The stream declares zero channels.
    #[error("audio file {} declares zero channels", path.display())]
    NoChannels {
        /// The file being read.
        path: PathBuf,
    },
    /// Sample-rate conversion failed (invalid rates or a resampler error).
    #[error("cannot resample {from_hz} Hz -> {to_hz} Hz: {detail}")]
    Resample {
        /// Input rate in Hz.
        from_hz: u32,
        /// Output rate in Hz.
        to_hz: u32,
        /// What went wrong.
        detail: String,
    },
    /// A configuration field (STFT, mel, WAV spec) has an invalid value.
    #[error("invalid configuration `{field}`: {detail}")]
    InvalidConfig {
        /// The offending field.
        field: &'static str,
        /// Why it is invalid.
        detail: String,
    },
    /// Writing an output file failed.
    #[error("cannot write audio file {}: {source}", path.display())]
    Write {
        /// The file being written.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: io::Error,
    },
}

impl AudioError {
    /// The file this error concerns, where there is one.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::NotFound { path }
            | Self::Io { path, .. }
            | Self::Empty { path }
            | Self::Unsupported { path, .. }
            | Self::Corrupt { path, .. }
            | Self::NoChannels { path }
            | Self::Write { path, .. } => Some(path),
            Self::Resample { .. } | Self::InvalidConfig { .. } => None,
        }
    }

    /// Classify an error from opening or reading `path`: a missing file becomes
    /// [`AudioError::NotFound`], anything else [`AudioError::Io`].
    pub(crate) fn from_io(path: &Path, source: io::Error) -> Self {
        if source.kind() == io::ErrorKind::NotFound {
            Self::NotFound {
                path: path.to_path_buf(),
            }
        } else {
            Self::Io {
                path: path.to_path_buf(),
                source,
            }
        }
    }

    pub(crate) fn invalid(field: &'static str, detail: impl Into<String>) -> Self {
        Self::InvalidConfig {
            field,
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_the_path() {
        let p = Path::new("/some/dir/clip.wav");
        let errors = [
            AudioError::NotFound { path: p.into() },
            AudioError::from_io(p, io::Error::other("boom")),
            AudioError::Empty { path: p.into() },
            AudioError::Unsupported {
                path: p.into(),
                detail: "x".into(),
            },
            AudioError::Corrupt {
                path: p.into(),
                detail: "x".into(),
            },
            AudioError::NoChannels { path: p.into() },
            AudioError::Write {
                path: p.into(),
                source: io::Error::other("boom"),
            },
        ];
        for e in &errors {
            assert!(e.to_string().contains("/some/dir/clip.wav"), "{e}");
            assert_eq!(e.path(), Some(p));
        }
    }

    #[test]
    fn io_not_found_is_classified() {
        let p = Path::new("missing.wav");
        let e = AudioError::from_io(p, io::Error::from(io::ErrorKind::NotFound));
        assert!(matches!(e, AudioError::NotFound { .. }));
        let e = AudioError::from_io(p, io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(matches!(e, AudioError::Io { .. }));
    }
}
