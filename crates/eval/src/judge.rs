//! The independent recogniser (`tools/asr_judge.py`, pocketsphinx) run on folders of clips.
//!
//! It is optional: Python is used only in evaluation. It is found as
//! 1. the Python interpreter named by `--asr-python` or `$VOXSPEC_ASR_PYTHON`, else
//! 2. `.venv-judge/bin/python` (made by `tools/setup_judge.sh`) in the working directory or a
//!    parent of it,
//!
//! and the script as `tools/asr_judge.py` beside that `.venv-judge` (or in the working directory
//! or a parent). Without them the figures are simply not reported; `VOXSPEC_NO_ASR=1` turns the
//! search off (the `--no-asr` flag of every command that runs it, for a whole session).

use std::path::{Path, PathBuf};
use std::process::Command;

use voxspec_tts::AsrScore;

use crate::error::{EvalError, Result};

/// The judge's interpreter and script.
#[derive(Debug, Clone)]
pub struct AsrJudge {
    python: PathBuf,
    script: PathBuf,
}

fn judge_err(detail: impl Into<String>) -> EvalError {
    EvalError::Judge {
        detail: detail.into(),
    }
}

/// The working directory and its parents.
fn ancestors() -> Vec<PathBuf> {
    std::env::current_dir()
        .map(|d| d.ancestors().map(Path::to_path_buf).collect())
        .unwrap_or_default()
}

impl AsrJudge {
    /// Finds the judge (see the module documentation); `None` when it is not set up.
    ///
    /// # Errors
    /// [`EvalError::Judge`] when an explicitly named interpreter does not exist or the script
    /// is not found for it.
    pub fn find(python: Option<&Path>) -> Result<Option<Self>> {
        if std::env::var_os("VOXSPEC_NO_ASR").is_some_and(|v| !v.is_empty() && v != "0") {
            return Ok(None);
        }
        let script = ancestors()
            .into_iter()
            .map(|d| d.join("tools/asr_judge.py"))
            .find(|p| p.is_file());
        let named = python
            .map(Path::to_path_buf)
            .or_else(|| std::env::var_os("VOXSPEC_ASR_PYTHON").map(PathBuf::from));
        if let Some(py) = named {
            if !py.is_file() {
                return Err(judge_err(format!(
                    "the independent judge's Python {} does not exist (make it with \
                     tools/setup_judge.sh)",
                    py.display()
                )));
            }
            let Some(script) = script else {
                return Err(judge_err(
                    "tools/asr_judge.py not found in the working directory or its parents",
                ));
            };
            return Ok(Some(Self { python: py, script }));
        }
        let found = ancestors()
            .into_iter()
            .map(|d| {
                (
                    d.join(".venv-judge/bin/python"),
                    d.join("tools/asr_judge.py"),
                )
            })
            .find(|(py, script)| py.is_file() && script.is_file());
        Ok(found.map(|(python, script)| Self { python, script }))
    }

    /// Where it was found, for the report.
    pub fn describe(&self) -> String {
        format!("{} {}", self.python.display(), self.script.display())
    }

    /// Scores the clips of `dir` (`<name>.wav` + `<name>.txt`) against `candidates` (one
    /// sentence per line), writing the judge's JSON report to `report`.
    ///
    /// # Errors
    /// [`EvalError::Judge`] when the judge cannot be run, fails, or writes no readable report.
    pub fn score_dir(
        &self,
        dir: &Path,
        candidates: &Path,
        report: &Path,
        jobs: usize,
    ) -> Result<AsrScore> {
        self.score(
            &["--dir".as_ref(), dir.as_os_str()],
            candidates,
            report,
            jobs,
        )
    }

    /// Scores the clips of a manifest (`id`, `path`, `text` per line).
    ///
    /// # Errors
    /// As [`AsrJudge::score_dir`].
    pub fn score_manifest(
        &self,
        manifest: &Path,
        candidates: &Path,
        report: &Path,
        jobs: usize,
    ) -> Result<AsrScore> {
        self.score(
            &["--manifest".as_ref(), manifest.as_os_str()],
            candidates,
            report,
            jobs,
        )
    }

    fn score(
        &self,
        input: &[&std::ffi::OsStr],
        candidates: &Path,
        report: &Path,
        jobs: usize,
    ) -> Result<AsrScore> {
        let output = Command::new(&self.python)
            .arg(&self.script)
            .args(input)
            .arg("--candidates")
            .arg(candidates)
            .arg("--jobs")
            .arg(jobs.max(1).to_string())
            .arg("--out")
            .arg(report)
            .output()
            .map_err(|e| judge_err(format!("running {}: {e}", self.describe())))?;
        if !output.status.success() {
            return Err(judge_err(format!(
                "{} failed: {}",
                self.script.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            )));
        }
        let text = std::fs::read_to_string(report).map_err(|e| {
            judge_err(format!(
                "reading the judge's report {}: {e}",
                report.display()
            ))
        })?;
        let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
            judge_err(format!(
                "the judge's report {} is not JSON: {e}",
                report.display()
            ))
        })?;
        let s = &json["summary"];
        let num = |k: &str| {
            s[k].as_f64().ok_or_else(|| {
                judge_err(format!(
                    "the judge's report {} has no summary.{k}",
                    report.display()
                ))
            })
        };
        Ok(AsrScore {
            clips: num("clips")? as usize,
            wer: num("wer")?,
            wer_se: s["wer_se"].as_f64(),
            cer: num("cer")?,
            forced_choice: num("accuracy")?,
            forced_choice_se: num("accuracy_se")?,
        })
    }
}

/// Writes `sentences` one per line to `path` (the judge's candidates).
///
/// # Errors
/// [`EvalError::Data`] naming the file when it cannot be written.
pub fn write_candidates<'a>(
    path: &Path,
    sentences: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    let mut text = String::new();
    for s in sentences {
        text.push_str(&s.replace('\n', " "));
        text.push('\n');
    }
    voxspec_data::write_atomic(path, text.as_bytes())?;
    Ok(())
}

/// Writes `samples` at `rate` as `<dir>/<id>.wav` (16-bit PCM) with the transcript `text` in
/// `<id>.txt` beside it: a clip of the folders the judge (and `voxspec eval intelligibility
/// --dir`) reads.
///
/// # Errors
/// [`EvalError::Io`] or [`EvalError::Audio`] naming the file.
pub fn write_clip(dir: &Path, id: &str, audio: &voxspec_audio::Audio, text: &str) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| EvalError::io("creating", dir, e))?;
    voxspec_audio::write_wav(
        &dir.join(format!("{id}.wav")),
        audio,
        voxspec_audio::WavFormat::Pcm16,
    )?;
    voxspec_data::write_atomic(&dir.join(format!("{id}.txt")), text.as_bytes())?;
    Ok(())
}
