//! Metrics: one JSON line per logged step in `metrics.jsonl`, and TensorBoard scalars.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tensorboard_proto::event::{Event, SessionLog, SessionLog_SessionStatus};
use tensorboard_rs::summary::scalar;
use tensorboard_rs::summary_writer::FileWriter;

use crate::error::{Result, TrainError};

/// One line of `metrics.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MetricsRecord {
    /// Steps done when the values were taken.
    pub step: usize,
    /// `train` or `valid`.
    pub split: String,
    /// Loss terms (`loss`, `<term>`, `<phase>/<term>`), `lr`, `grad_norm`, `items_per_sec`, ...
    pub values: BTreeMap<String, f64>,
}

/// Appends metrics to `metrics.jsonl` and (optionally) TensorBoard event files in the run dir.
pub(crate) struct MetricsLog {
    path: PathBuf,
    file: File,
    tensorboard: Option<FileWriter>,
}

impl MetricsLog {
    /// Opens the log in `run_dir`, first dropping lines past `resume_step` (a killed run may
    /// have logged steps that the resumed run will log again).
    pub fn open(run_dir: &Path, resume_step: usize, tensorboard: bool) -> Result<Self> {
        let path = run_dir.join("metrics.jsonl");
        if path.exists() {
            let reader = File::open(&path).map_err(|e| TrainError::io(&path, e))?;
            let mut kept = String::new();
            for line in BufReader::new(reader).lines() {
                let line = line.map_err(|e| TrainError::io(&path, e))?;
                let record: Option<MetricsRecord> = serde_json::from_str(&line).ok();
                if record.is_some_and(|r| r.step <= resume_step) {
                    kept.push_str(&line);
                    kept.push('\n');
                }
            }
            fs::write(&path, kept).map_err(|e| TrainError::io(&path, e))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| TrainError::io(&path, e))?;
        // Resumed runs add a new event file; TensorBoard merges the files of a directory. Its
        // first event, a SessionLog START at the first step to come, makes TensorBoard purge
        // what earlier files hold from that step on (steps a killed run logged after its last
        // checkpoint, which this run logs again).
        let tensorboard = tensorboard.then(|| {
            let mut writer = FileWriter::new(run_dir);
            if resume_step > 0 {
                let mut log = SessionLog::new();
                log.set_status(SessionLog_SessionStatus::START);
                let mut event = Event::new();
                event.set_session_log(log);
                writer.add_event(&event, resume_step + 1);
                writer.flush();
            }
            writer
        });
        Ok(Self {
            path,
            file,
            tensorboard,
        })
    }

    /// Writes one record (and its scalars as `<split>/<key>` to TensorBoard).
    pub fn write(&mut self, record: &MetricsRecord) -> Result<()> {
        let line = serde_json::to_string(record).map_err(|source| TrainError::Json {
            path: self.path.clone(),
            source,
        })?;
        writeln!(self.file, "{line}").map_err(|e| TrainError::io(&self.path, e))?;
        if let Some(tb) = self.tensorboard.as_mut() {
            for (key, value) in &record.values {
                tb.add_summary(
                    scalar(&format!("{}/{key}", record.split), *value as f32),
                    record.step,
                );
            }
            tb.flush();
        }
        Ok(())
    }
}

/// Reads all records of a `metrics.jsonl`.
pub fn read_metrics(path: &Path) -> Result<Vec<MetricsRecord>> {
    let text = fs::read_to_string(path).map_err(|e| TrainError::io(path, e))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            serde_json::from_str(l).map_err(|source| TrainError::Json {
                path: path.to_path_buf(),
                source,
            })
        })
        .collect()
}
