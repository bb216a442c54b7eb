//! The flags of the independent recogniser (`tools/asr_judge.py`, found and run by
//! `voxspec_eval::judge`).

use std::path::PathBuf;

pub use voxspec_eval::judge::AsrJudge;

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
        Ok(AsrJudge::find(self.asr_python.as_deref())?)
    }
}
