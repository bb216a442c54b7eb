//! The resumable-training wrapper every training command shares: the run's settings (saved to
//! `run.json` when a run starts, read back by `--resume`), the Ctrl-C stop flag, and the line
//! that reports how a run ended.
//!
//! ```ignore
//! let run = resume_or_start(out, "ctc", resume, || Ok::<_, TrainError>(settings))?;
//! let trainer = Trainer::new(config, task, out, &device).with_stop_flag(stop_on_ctrl_c()?);
//! let finished = trainer.run_timed(&mut progress_bar)?;
//! println!("{finished}"); // "trained 2000 steps in 812 s"
//! ```

use std::fmt;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::{Result, TrainError};
use crate::run_dir::{RunStart, open_run, save_run_settings};
use crate::task::TrainTask;
use crate::trainer::{TrainObserver, TrainOutcome, Trainer};

/// The settings a run goes with, and whether they were read back from an earlier run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunSettings<T> {
    /// The settings.
    pub settings: T,
    /// True when they are those an earlier run saved (`--resume` with checkpoints there).
    pub resumed: bool,
}

/// The settings of the `kind` run in `dir` (created if missing).
///
/// With `resume` and checkpoints in `dir`: the settings that run saved. Otherwise a new run:
/// the settings `new_settings` builds, saved to `<dir>/run.json` for a later `--resume` (with
/// a warning when `resume` found nothing to resume).
///
/// # Errors
/// Those of [`open_run`] and [`save_run_settings`], and whatever `new_settings` returns.
pub fn resume_or_start<T, E>(
    dir: &Path,
    kind: &str,
    resume: bool,
    new_settings: impl FnOnce() -> std::result::Result<T, E>,
) -> std::result::Result<RunSettings<T>, E>
where
    T: Serialize + DeserializeOwned,
    E: From<TrainError>,
{
    match open_run(dir, kind, resume)? {
        RunStart::Resume(settings) => {
            tracing::info!("resuming with the settings saved in {}", dir.display());
            Ok(RunSettings {
                settings,
                resumed: true,
            })
        }
        RunStart::New { resume_ignored } => {
            if resume_ignored {
                tracing::warn!(
                    "--resume: no checkpoint in {}, starting a new run",
                    dir.display()
                );
            }
            let settings = new_settings()?;
            save_run_settings(dir, kind, &settings)?;
            Ok(RunSettings {
                settings,
                resumed: false,
            })
        }
    }
}

/// A stop flag raised by Ctrl-C: the first raises it (the trainer checkpoints after the current
/// step and returns), a second exits the process at once (status 130, no checkpoint).
///
/// # Errors
/// [`TrainError::CtrlC`] when the handler cannot be installed (e.g. one is installed already:
/// call this once per process).
pub fn stop_on_ctrl_c() -> Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    ctrlc::set_handler(move || {
        if flag.swap(true, Ordering::SeqCst) {
            eprintln!("interrupted again: exiting without a checkpoint");
            std::process::exit(130);
        }
        eprintln!("stopping after this step (checkpoint and model will be written)...");
    })
    .map_err(|source| TrainError::CtrlC { source })?;
    Ok(stop)
}

/// How a run ended and how long it took; its `Display` is the line the commands print.
#[derive(Debug)]
pub struct Finished<M> {
    /// The trainer's outcome.
    pub outcome: TrainOutcome<M>,
    /// Wall-clock seconds of [`Trainer::run_timed`].
    pub seconds: f64,
}

impl<M> fmt::Display for Finished<M> {
    /// `trained N steps in S s`, or for a stopped run `stopped at step N after S s; checkpoint
    /// <DIR>; continue with --resume`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let o = &self.outcome;
        if o.stopped {
            write!(
                f,
                "stopped at step {} after {:.0} s; checkpoint {}; continue with --resume",
                o.step,
                self.seconds,
                o.last_checkpoint
                    .as_ref()
                    .map_or_else(|| "none".into(), |p| p.display().to_string())
            )
        } else {
            write!(f, "trained {} steps in {:.0} s", o.step, self.seconds)
        }
    }
}

impl<T: TrainTask> Trainer<T> {
    /// [`Trainer::run`], timed.
    ///
    /// # Errors
    /// Those of [`Trainer::run`].
    pub fn run_timed(&self, observer: &mut dyn TrainObserver) -> Result<Finished<T::Model>> {
        let started = Instant::now();
        let outcome = self.run(observer)?;
        Ok(Finished {
            outcome,
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_settings_are_built_and_saved_only_for_a_new_run() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run");
        let run = resume_or_start(&out, "ctc", true, || Ok::<_, TrainError>(3u32)).unwrap();
        assert_eq!(
            run,
            RunSettings {
                settings: 3,
                resumed: false
            }
        );
        std::fs::create_dir_all(out.join("checkpoint-000002")).unwrap();
        let run = resume_or_start(&out, "ctc", true, || -> Result<u32> {
            panic!("a resumed run builds no settings")
        })
        .unwrap();
        assert_eq!(
            run,
            RunSettings {
                settings: 3,
                resumed: true
            }
        );
        let err = resume_or_start(&out, "ctc", false, || Ok::<_, TrainError>(4u32)).unwrap_err();
        assert!(err.to_string().contains("--resume"), "{err}");
    }

    #[test]
    fn the_finish_line_says_how_the_run_ended() {
        let outcome = |stopped| TrainOutcome {
            model: (),
            step: 7,
            stopped,
            skipped_steps: 0,
            last_checkpoint: stopped.then(|| "run/checkpoint-000007".into()),
        };
        let done = Finished {
            outcome: outcome(false),
            seconds: 12.4,
        };
        assert_eq!(done.to_string(), "trained 7 steps in 12 s");
        let stopped = Finished {
            outcome: outcome(true),
            seconds: 3.0,
        };
        assert_eq!(
            stopped.to_string(),
            "stopped at step 7 after 3 s; checkpoint run/checkpoint-000007; continue with --resume"
        );
    }
}
