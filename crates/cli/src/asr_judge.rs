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

use anyhow::{Context, bail};
use voxspec_tts::AsrScore;

/// The flags of every command that runs the judge.
#[derive(Debug, Clone, clap::Args)]
pub struct AsrArgs {
    /// Python of the independent recogniser (`tools/asr_judge.py`, pocketsphinx), which scores
    /// the same clips beside the CTC teacher [default: $VOXSPEC_ASR_PYTHON, else
    /// .venv-judge/bin/python from tools/setup_judge.sh when present; else not run]
    #[arg(long, value_name = "PYTHON")]
    pub asr_python: Option<PathBuf>,
    /// Do not run the independent recogniser even when it is set up.
    #[arg(long)]
    pub no_asr: bool,
}

impl AsrArgs {
    /// The judge these flags ask for (`None`: off or not set up).
    pub fn judge(&self) -> anyhow::Result<Option<AsrJudge>> {
        if self.no_asr {
            return Ok(None);
        }
        AsrJudge::find(self.asr_python.as_deref())
    }
}

/// The judge's interpreter and script.
#[derive(Debug, Clone)]
pub struct AsrJudge {
    python: PathBuf,
    script: PathBuf,
}

/// The working directory and its parents.
fn ancestors() -> Vec<PathBuf> {
    std::env::current_dir()
        .map(|d| d.ancestors().map(Path::to_path_buf).collect())
        .unwrap_or_default()
}

impl AsrJudge {
    /// Finds the judge (see the module documentation); `None` when it is not set up. An
    /// explicitly named interpreter that does not exist is an error.
    pub fn find(python: Option<&Path>) -> anyhow::Result<Option<Self>> {
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
                bail!(
                    "the independent judge's Python {} does not exist (make it with \
                     tools/setup_judge.sh)",
                    py.display()
                );
            }
            let Some(script) = script else {
                bail!("tools/asr_judge.py not found in the working directory or its parents");
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
    pub fn score_dir(
        &self,
        dir: &Path,
        candidates: &Path,
        report: &Path,
        jobs: usize,
    ) -> anyhow::Result<AsrScore> {
        self.score(
            &["--dir".as_ref(), dir.as_os_str()],
            candidates,
            report,
            jobs,
        )
    }

    /// Scores the clips of a manifest (`id`, `path`, `text` per line).
    pub fn score_manifest(
        &self,
        manifest: &Path,
        candidates: &Path,
        report: &Path,
        jobs: usize,
    ) -> anyhow::Result<AsrScore> {
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
    ) -> anyhow::Result<AsrScore> {
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
            .with_context(|| format!("running {}", self.describe()))?;
        if !output.status.success() {
            bail!(
                "{} failed: {}",
                self.script.display(),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        let text = std::fs::read_to_string(report)
            .with_context(|| format!("reading the judge's report {}", report.display()))?;
        let json: serde_json::Value = serde_json::from_str(&text)
            .with_context(|| format!("the judge's report {} is not JSON", report.display()))?;
        let s = &json["summary"];
        let num = |k: &str| {
            s[k].as_f64().with_context(|| {
                format!("the judge's report {} has no summary.{k}", report.display())
            })
        };
        Ok(AsrScore {
            clips: num("clips")? as usize,
            wer: num("wer")?,
            cer: num("cer")?,
            forced_choice: num("accuracy")?,
            forced_choice_se: num("accuracy_se")?,
        })
    }
}

/// Writes `sentences` one per line to `path` (the judge's candidates).
pub fn write_candidates<'a>(
    path: &Path,
    sentences: impl IntoIterator<Item = &'a str>,
) -> anyhow::Result<()> {
    let mut text = String::new();
    for s in sentences {
        text.push_str(&s.replace('\n', " "));
        text.push('\n');
    }
    voxspec_data::write_atomic(path, text.as_bytes())
        .with_context(|| format!("writing {}", path.display()))
}
