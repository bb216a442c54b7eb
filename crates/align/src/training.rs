//! Training the aligner on the corpus it will align, in two phases, each a resumable run of
//! the shared loop saved as an aligner directory: the flat start ([`Objective::Uniform`]) in
//! `<out>/aligner-flat`, then the main objective from its weights in `<out>/aligner`.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use burn::module::Module;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_data::{Progress, Utterance};
use voxspec_nn::Preset;
use voxspec_train::weights::WEIGHTS_FILE;
use voxspec_train::{TrainConfig, TrainObserver, Trainer};

use crate::aligner::Aligner;
use crate::data::AlignCorpus;
use crate::error::AlignError;
use crate::model::AlignerModelConfig;
use crate::task::{AlignTask, AlignTaskConfig, Objective};

impl AlignerModelConfig {
    /// The aligner of `preset`'s size: tiny width 32; small 2 convolutions of width 192,
    /// kernel 3 (±20 ms of context); base the same at width 256.
    pub fn preset(preset: Preset) -> Self {
        match preset {
            Preset::Tiny => Self::tiny(),
            Preset::Small => Self::small(),
            Preset::Base => Self::base(),
        }
    }
}

/// What a phase's run directory keeps for a resumed run besides the checkpoint (`run.json`).
#[derive(Debug, Serialize, Deserialize)]
pub struct AlignRunFile {
    /// The model size asked for.
    pub preset: Preset,
    /// The phase's task.
    pub task: AlignTaskConfig,
}

/// How the aligner is trained.
#[derive(Debug, Clone)]
pub struct AlignTraining {
    /// The model size asked for (recorded in each phase's `run.json`).
    pub preset: Preset,
    /// The task of both phases; each sets its own objective.
    pub task: AlignTaskConfig,
    /// The objective after the flat start.
    pub objective: Objective,
    /// The loop of the flat start; `None`: no flat start.
    pub flat_loop: Option<TrainConfig>,
    /// The loop of the main phase.
    pub main_loop: TrainConfig,
    /// Continue each phase from its newest checkpoint.
    pub resume: bool,
}

/// What the aligner's training reports while it runs: the steps of each phase and what
/// happens around them.
pub trait AlignTrainingObserver {
    /// Progress of computing the corpus's features.
    fn features(&self) -> &dyn Progress;
    /// The corpus is ready: `utterances` usable utterances with `minutes` of audio.
    fn corpus_ready(&mut self, utterances: usize, minutes: f64);
    /// A phase of `steps` steps starts: the observer of its steps.
    fn phase_started(&mut self, steps: usize) -> &mut dyn TrainObserver;
    /// The phase's loop has ended, finished or stopped.
    fn phase_ended(&mut self);
    /// The phase `what` finished after `steps` steps in `seconds`.
    fn phase_trained(&mut self, what: &str, steps: usize, seconds: f64);
}

/// Trains the aligner on `utterances` in `out` on `devices` (data-parallel when there are
/// several) until `stop` is set: the flat start into `<out>/aligner-flat` (when
/// [`AlignTraining::flat_loop`] is set), then the main objective into `<out>/aligner`. Each
/// phase's aligner is saved in its directory. Returns the trained aligner and the corpus.
///
/// # Errors
/// [`AlignError::Stopped`] when `stop` ends a phase early (its checkpoint is kept);
/// [`AlignError::CreateDir`], and the task's, loop's and files' errors.
pub fn train_aligner(
    training: &AlignTraining,
    out: &Path,
    utterances: &[Utterance],
    (devices, stop): (&[Device], &Arc<AtomicBool>),
    observer: &mut dyn AlignTrainingObserver,
) -> Result<(Aligner, Arc<AlignCorpus>), AlignError> {
    let flat_dir = out.join("aligner-flat");
    let mut corpus = None;
    if let Some(flat_loop) = &training.flat_loop {
        let flat = training.task.clone().with_objective(Objective::Uniform);
        let phase = Phase {
            loop_config: flat_loop,
            run_dir: &flat_dir,
            what: "flat start",
        };
        let (_, c) = run_phase(
            training,
            phase,
            flat,
            (utterances, None),
            (devices, stop),
            observer,
        )?;
        corpus = Some(c);
    }
    let main = training
        .task
        .clone()
        .with_objective(training.objective)
        .with_init_weights(
            training
                .flat_loop
                .is_some()
                .then(|| flat_dir.join(WEIGHTS_FILE)),
        );
    let run_dir = out.join("aligner");
    let phase = Phase {
        loop_config: &training.main_loop,
        run_dir: &run_dir,
        what: "forward-sum",
    };
    run_phase(
        training,
        phase,
        main,
        (utterances, corpus),
        (devices, stop),
        observer,
    )
}

/// One phase: its loop, run directory and name.
struct Phase<'a> {
    loop_config: &'a TrainConfig,
    run_dir: &'a Path,
    what: &'a str,
}

/// One training run of the aligner in the phase's directory (resumed with
/// [`AlignTraining::resume`]); its model is saved there as `model.safetensors` + `config.json`.
fn run_phase(
    training: &AlignTraining,
    phase: Phase<'_>,
    task: AlignTaskConfig,
    (utterances, corpus): (&[Utterance], Option<Arc<AlignCorpus>>),
    (devices, stop): (&[Device], &Arc<AtomicBool>),
    observer: &mut dyn AlignTrainingObserver,
) -> Result<(Aligner, Arc<AlignCorpus>), AlignError> {
    let run_dir = phase.run_dir;
    std::fs::create_dir_all(run_dir).map_err(|source| AlignError::CreateDir {
        path: run_dir.to_path_buf(),
        source,
    })?;
    let run = voxspec_train::resume_or_start(run_dir, "aligner", training.resume, || {
        Ok::<_, AlignError>(AlignRunFile {
            preset: training.preset,
            task,
        })
    })?
    .settings;
    let model_config = run.task.model.clone();
    let frontend = run.task.frontend.clone();
    let scoring = run.task.scoring.clone();
    let (task, corpus) = match corpus {
        Some(c) => (AlignTask::with_corpus(run.task, c.clone())?, c),
        None => {
            let (task, c) = AlignTask::new(run.task, utterances, observer.features())?;
            let hop_s = frontend.hop_length as f64 / f64::from(frontend.sample_rate);
            observer.corpus_ready(c.len(), c.total_frames() as f64 * hop_s / 60.0);
            (task, c)
        }
    };
    let device = devices
        .first()
        .ok_or_else(|| AlignError::input("devices", "none to train on"))?;
    let trainer = Trainer::new(phase.loop_config.clone(), task, run_dir, device)
        .with_devices(devices)
        .with_stop_flag(stop.clone());
    let finished = trainer.run_timed(observer.phase_started(phase.loop_config.max_steps));
    observer.phase_ended();
    let finished = finished?;
    let outcome = finished.outcome;
    if outcome.stopped {
        return Err(AlignError::Stopped {
            step: outcome.step,
            run_dir: run_dir.to_path_buf(),
        });
    }
    observer.phase_trained(phase.what, outcome.step, finished.seconds);
    let aligner = Aligner::new(outcome.model.valid(), model_config, frontend, scoring)?;
    aligner.save(run_dir)?;
    Ok((aligner, corpus))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_grow_in_width_and_run_files_name_them() {
        let widths: Vec<usize> = Preset::ALL
            .map(|p| AlignerModelConfig::preset(p).width)
            .into();
        assert_eq!(widths, [32, 192, 256]);
        let file = AlignRunFile {
            preset: Preset::Tiny,
            task: AlignTaskConfig::new(AlignerModelConfig::preset(Preset::Tiny)),
        };
        let json = serde_json::to_value(&file).unwrap();
        assert_eq!(json["preset"], "tiny");
    }
}
