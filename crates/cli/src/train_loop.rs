//! The training-loop flags every `voxspec train` command and `voxspec codec train` share
//! ([`LoopArgs`], flattened into each) and the step progress bar; the run settings, `--resume`
//! and Ctrl-C are `voxspec_train::resumable`'s.

use std::collections::BTreeMap;
use std::path::Path;

use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use voxspec_nn::linear::MatmulPrecision;
use voxspec_train::{
    LrSchedule, OptimConfig, StepReport, TrainConfig, TrainObserver, loss_text, validation_text,
};

/// The loop settings of a training run: AdamW with linear warm-up then cosine decay to 5% of the
/// peak, TensorBoard on. A command whose defaults differ overrides them with
/// `#[command(mut_arg(..))]`.
#[derive(Debug, Clone, Args)]
pub struct LoopArgs {
    /// Optimizer steps in total (a resumed run counts from its checkpoint).
    #[arg(long, default_value_t = 2000)]
    pub steps: usize,
    /// At most this many items (utterances; audio segments for the codec) per batch; with several
    /// --device entries each device takes one batch per step.
    #[arg(long, default_value_t = 16)]
    pub batch: usize,
    /// Peak learning rate (AdamW; linear warm-up, then cosine decay to 5% of it).
    #[arg(long, default_value_t = 1e-3)]
    pub lr: f64,
    /// Warm-up steps.
    #[arg(long, default_value_t = 100)]
    pub warmup: usize,
    /// Validate on the dev split every this many steps (0: never).
    #[arg(long, default_value_t = 200)]
    pub valid_every: usize,
    /// Checkpoint every this many steps (0: only at the end and on Ctrl-C).
    #[arg(long, default_value_t = 500)]
    pub checkpoint_every: usize,
    /// Write metrics every this many steps.
    #[arg(long, default_value_t = 10)]
    pub log_every: usize,
    /// Seed of initialisation, batch order and augmentation.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Continue from the newest checkpoint in --out.
    #[arg(long)]
    pub resume: bool,
    /// Time each step's phases (data, forward, backward, optimizer) into metrics.jsonl as
    /// time_data, time_forward, time_backward, time_optimizer (seconds); the device is
    /// synchronised between phases, which costs a little speed.
    #[arg(long)]
    pub time_phases: bool,
    /// Precision of the linear layers' matrix products: f32; bf16 (mixed precision: bf16
    /// operands, f32 sums, f32 weights, gradients and optimizer state; needs a CPU with AMX-BF16
    /// or AVX512-BF16, refused on others); or auto (bf16 where the CPU has AMX-BF16 tiles, f32
    /// elsewhere). The choice is recorded in run.json.
    #[arg(long, default_value_t = MatmulPrecision::F32)]
    pub matmul: MatmulPrecision,
}

impl LoopArgs {
    /// The loop's config, with global-norm clipping at `clip`.
    pub fn config(&self, clip: f64) -> TrainConfig {
        TrainConfig {
            seed: self.seed,
            max_steps: self.steps,
            optimizer: OptimConfig {
                lr: self.lr,
                warmup_steps: self.warmup,
                schedule: LrSchedule::Cosine {
                    decay_steps: self.steps.saturating_sub(self.warmup).max(1),
                    min_lr: self.lr * 0.05,
                },
                clip_grad_norm: Some(clip),
                ..OptimConfig::default()
            },
            log_every: self.log_every.max(1),
            valid_every: self.valid_every,
            checkpoint_every: self.checkpoint_every,
            tensorboard: true,
            time_phases: self.time_phases,
            matmul: self.matmul,
            ..TrainConfig::default()
        }
    }
}

/// The training progress bar: steps, ETA, the latest loss and dev CER.
pub(crate) struct StepBar {
    pub(crate) bar: ProgressBar,
    started: bool,
    valid: Option<String>,
}

impl StepBar {
    pub(crate) fn new(steps: usize) -> Self {
        let bar = ProgressBar::new(steps as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{prefix:>6} [{bar:30.cyan/blue}] {pos}/{len} ({per_sec}, eta {eta}) {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        bar.set_prefix("train");
        Self {
            bar,
            started: false,
            valid: None,
        }
    }
}

impl TrainObserver for StepBar {
    fn on_step(&mut self, report: &StepReport) {
        if !self.started {
            // Resumed runs start part-way: the ETA counts from here.
            self.bar.set_position(report.step.saturating_sub(1) as u64);
            self.bar.reset_eta();
            self.started = true;
        }
        self.bar.set_position(report.step as u64);
        let valid = self.valid.as_deref().unwrap_or("");
        let message = format!(
            "{} epoch {}{valid}",
            loss_text(&report.values),
            report.epoch
        );
        if self.bar.is_hidden() {
            // Not a terminal (a log file): a plain line now and then instead of the bar.
            if report.step.is_multiple_of(100) || report.step == report.max_steps {
                eprintln!("step {}/{}: {message}", report.step, report.max_steps);
            }
        } else {
            self.bar.set_message(message);
        }
    }

    fn on_validation(&mut self, step: usize, values: &BTreeMap<String, f64>) {
        let loss = loss_text(values);
        // CER for the CTC teacher; the other tasks' validation terms otherwise.
        let (short, detail) = validation_text(values);
        self.valid = Some(format!(" | dev {loss}{short}"));
        let line = format!("step {step}: dev {loss}{detail}");
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }

    fn on_checkpoint(&mut self, step: usize, dir: &Path) {
        tracing::debug!(step, dir = %dir.display(), "checkpoint");
    }
}

/// The step bar with codec validation lines (losses, no error rate).
pub(crate) struct CodecBar(pub(crate) StepBar);

impl TrainObserver for CodecBar {
    fn on_step(&mut self, report: &StepReport) {
        self.0.on_step(report);
    }

    fn on_validation(&mut self, step: usize, values: &BTreeMap<String, f64>) {
        let parts: Vec<String> = values.iter().map(|(k, v)| format!("{k} {v:.4}")).collect();
        let line = format!("step {step}: dev {}", parts.join(", "));
        if self.0.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.0.bar.println(line);
        }
    }

    fn on_checkpoint(&mut self, step: usize, dir: &Path) {
        self.0.on_checkpoint(step, dir);
    }
}

/// How the step bar prints a validation: the loss and error rate, or every term (codecs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DevLines {
    Loss,
    Terms,
}

/// Runs `trainer` to its last step or to Ctrl-C (which finishes the step and checkpoints) with
/// the step bar, and prints the run's summary line.
pub(crate) fn run<T: voxspec_train::TrainTask>(
    trainer: voxspec_train::Trainer<T>,
    steps: usize,
    lines: DevLines,
) -> anyhow::Result<voxspec_train::Finished<T::Model>> {
    let trainer = trainer.with_stop_flag(voxspec_train::stop_on_ctrl_c()?);
    let bar = StepBar::new(steps);
    let finished = match lines {
        DevLines::Loss => {
            let mut observer = bar;
            let finished = trainer.run_timed(&mut observer)?;
            observer.bar.finish_and_clear();
            finished
        }
        DevLines::Terms => {
            let mut observer = CodecBar(bar);
            let finished = trainer.run_timed(&mut observer)?;
            observer.0.bar.finish_and_clear();
            finished
        }
    };
    println!("{finished}");
    Ok(finished)
}
