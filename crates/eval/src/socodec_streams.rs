//! SoCodec `codec eval` reports compared stream by stream (the SoCodec paper's Fig. 4): the
//! reports read back, and line plots of MCD, CER and forced-choice accuracy of speech decoded
//! from the first b streams against b.

use std::path::{Path, PathBuf};

use serde::Deserialize;
use voxspec_codec::QuantizerKind;

use crate::error::{EvalError, Result};
use crate::plots::{DEFAULT_SIZE, LinePlot, Series, write_line_plot};

/// One row of a SoCodec report as read back.
#[derive(Debug, Clone, Deserialize)]
pub struct StreamsRow {
    /// The row's audio (original, vocoder, b streams).
    pub name: String,
    /// Streams decoded (none for the original and the vocoder rows).
    pub streams: Option<usize>,
    /// Mel cepstral distortion, dB.
    pub mcd_db: f64,
    /// CTC-teacher character error rate.
    pub cer: f64,
    /// Forced-choice accuracy.
    pub forced_choice: f64,
}

/// A SoCodec `codec eval` report as read back.
#[derive(Debug, Clone, Deserialize)]
pub struct StreamsReport {
    /// The codec's quantizer.
    pub quantizer: QuantizerKind,
    /// Its frame length, ms.
    pub frame_ms: usize,
    /// Test utterances.
    pub utterances: usize,
    /// Its rows.
    pub rows: Vec<StreamsRow>,
}

impl StreamsReport {
    /// Reads the report at `path`.
    ///
    /// # Errors
    /// [`EvalError::Io`]; [`EvalError::Input`] for a file that is not a SoCodec report.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|source| EvalError::Io {
            action: "reading",
            path: path.to_path_buf(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| EvalError::Input {
            detail: format!(
                "{} is not a SoCodec `codec eval` report: {e}",
                path.display()
            ),
        })
    }

    /// The default label: the quantizer and the frame length, e.g. `OPQ (120 ms)`.
    pub fn label(&self) -> String {
        format!(
            "{} ({} ms)",
            format!("{:?}", self.quantizer).to_uppercase(),
            self.frame_ms
        )
    }
}

/// Writes `<prefix>-mcd.png`, `<prefix>-cer.png` and `<prefix>-id.png`: each metric against
/// the streams decoded, one line per labelled report. Returns the paths written.
///
/// # Errors
/// [`EvalError::Plot`] naming a figure that cannot be drawn or written.
pub fn write_streams_plots(
    prefix: &Path,
    reports: &[(String, StreamsReport)],
) -> Result<Vec<PathBuf>> {
    let metric = |f: &dyn Fn(&StreamsRow) -> f64| -> Vec<Series> {
        reports
            .iter()
            .map(|(label, r)| Series {
                label: label.clone(),
                points: r
                    .rows
                    .iter()
                    .filter_map(|row| row.streams.map(|b| (b as f64, f(row))))
                    .collect(),
            })
            .collect()
    };
    let plots: [(&str, &str, &str, Vec<Series>); 3] = [
        (
            "mcd",
            "MCD of the resynthesis from the first b streams",
            "MCD (dB)",
            metric(&|r| r.mcd_db),
        ),
        (
            "cer",
            "CTC-teacher CER from the first b streams",
            "CER (%)",
            metric(&|r| 100.0 * r.cer),
        ),
        (
            "id",
            "Forced-choice accuracy from the first b streams",
            "ID (%)",
            metric(&|r| 100.0 * r.forced_choice),
        ),
    ];
    let stem = prefix.to_string_lossy().to_string();
    let mut written = Vec::new();
    for (suffix, title, y, series) in &plots {
        let path = PathBuf::from(format!("{stem}-{suffix}.png"));
        write_line_plot(
            &path,
            &LinePlot {
                title,
                x_label: "streams decoded (b)",
                y_label: y,
                series,
                log_y: false,
                size: DEFAULT_SIZE,
            },
        )?;
        written.push(path);
    }
    Ok(written)
}
