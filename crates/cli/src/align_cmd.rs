//! `voxspec align`: train the aligner on a prepared corpus and write its phone alignments as
//! TextGrids.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use burn::module::Module;
use clap::{Args, ValueEnum};
use serde::{Deserialize, Serialize};
use voxspec_align::{
    AlignCorpus, AlignReport, AlignTask, AlignTaskConfig, Aligner, AlignerModelConfig, Objective,
    Scoring, SilenceGate, compare_with_references, inner_pauses, mean_score, textgrid_path,
};
use voxspec_data::Utterance;
use voxspec_data::corpus::SPLITS;

use crate::progress::Bar;
use crate::train_loop::{LoopArgs, StepBar};

/// Model sizes of the aligner.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Preset {
    /// Width 32: tests and smoke runs.
    Tiny,
    /// 2 convolutions of width 192, kernel 3 (±20 ms of context).
    Small,
    /// The same, width 256.
    Base,
}

/// Phone alignments from voxspec alone: trains an acoustic model over the phone set on the
/// corpus's own audio and transcripts (forward-sum over every monotonic path through each
/// transcript's G2P phones, pauses between words optional), then writes the Viterbi path of
/// every utterance as a TextGrid.
///
/// Reads <DATA>/{train,dev,test}.jsonl (`voxspec prepare` output; every split present is
/// aligned and used for training). Writes <OUT>/<speaker>/<chapter>/<id>.TextGrid (the layout
/// `voxspec prepare --alignments <OUT>` reads; with --beside-audio next to each audio file
/// instead), <OUT>/aligner/ (the model run: checkpoints, metrics, model.safetensors) and
/// <OUT>/report.json. When the manifests already carry alignments (a corpus with known phone
/// timings, e.g. datasets/minitts), they are only used to measure the new ones: mean absolute
/// boundary error and the share within 20 ms, for the transcripts' own phones and for the
/// reference phone sequences aligned by the same model.
///
/// With --aligner DIR an already trained aligner is used and nothing is trained. Ctrl-C during
/// training checkpoints; --resume continues.
#[derive(Debug, Args)]
#[command(mut_arg("steps", |a| a.default_value("800")))]
#[command(mut_arg("lr", |a| a.default_value("2e-3")))]
#[command(mut_arg("warmup", |a| a.default_value("100")))]
#[command(mut_arg("valid_every", |a| a.default_value("0")))]
pub struct AlignArgs {
    /// Prepared data directory.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Output directory.
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    /// Use this trained aligner (an <OUT>/aligner of an earlier run) instead of training one.
    #[arg(long, value_name = "DIR")]
    aligner: Option<PathBuf>,
    /// Write each TextGrid next to its audio file (for bundling a corpus with its alignments).
    #[arg(long)]
    beside_audio: bool,
    /// Model size.
    #[arg(long, value_enum, default_value = "small")]
    preset: Preset,
    /// Convolutions of the acoustic model [default: the preset's].
    #[arg(long, value_name = "N")]
    conv_layers: Option<usize>,
    /// Kernel of the convolutions (odd) [default: the preset's].
    #[arg(long, value_name = "K")]
    kernel: Option<usize>,
    /// Width of the convolutions [default: the preset's].
    #[arg(long, value_name = "D")]
    width: Option<usize>,
    /// Hop between feature frames in samples at 16 kHz (160: 10 ms); boundaries are placed to
    /// one hop.
    #[arg(long, default_value_t = 160)]
    hop: usize,
    /// At most this many padded 100 Hz frames per batch (items × longest).
    #[arg(long, default_value_t = 8000)]
    max_frames: usize,
    /// Flat-start steps before --steps of forward-sum training: cross-entropy against each
    /// transcript's phones spread evenly over its frames.
    #[arg(long, default_value_t = 200)]
    flat_steps: usize,
    /// What follows the flat start: `viterbi` (cross-entropy against the model's own best
    /// path, re-found at every step) or `forward-sum` (every path, weighted).
    #[arg(long, value_enum, default_value = "viterbi")]
    objective: ObjectiveArg,
    /// Weight of the class prior subtracted from the log-posteriors when paths are scored
    /// (scaled likelihoods of hybrid HMM systems; 0: the posteriors themselves, which lets the
    /// most frequent phone take over).
    #[arg(long, default_value_t = 1.0)]
    prior_scale: f64,
    /// Silence costs --silence-penalty nats on frames within this many dB of the utterance's
    /// speech level (0: silence may stand anywhere, which lets training collapse onto it).
    #[arg(long, default_value_t = 30.0)]
    silence_gate_db: f32,
    /// See --silence-gate-db.
    #[arg(long, default_value_t = 10.0)]
    silence_penalty: f32,
    /// Frames every phone (not silence) holds at least, in training and when aligning
    /// [default: 3, 30 ms at the 10 ms hop; with --aligner, the aligner's own].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20))]
    min_phone_frames: Option<u32>,
    #[command(flatten, next_help_heading = "Training loop")]
    train: LoopArgs,
}

/// `--objective` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ObjectiveArg {
    Viterbi,
    ForwardSum,
}

/// What `--resume` needs besides the checkpoint.
#[derive(Debug, Serialize, Deserialize)]
struct RunFile {
    preset: Preset,
    task: AlignTaskConfig,
}

pub fn run(args: AlignArgs) -> anyhow::Result<()> {
    let mut utterances: Vec<Utterance> = Vec::new();
    for split in SPLITS {
        utterances.extend(voxspec_data::read_split_if_present(&args.data, split)?);
    }
    anyhow::ensure!(
        !utterances.is_empty(),
        "{} has no manifest with utterances (run `voxspec prepare` first)",
        args.data.display()
    );
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let device = crate::device::training()[0].clone();

    let (aligner, corpus, train_seconds) = match &args.aligner {
        Some(dir) => {
            let mut aligner = Aligner::load(dir, &device)
                .with_context(|| format!("loading the aligner {}", dir.display()))?;
            if let Some(n) = args.min_phone_frames {
                aligner.set_min_phone_frames(n as usize);
            }
            let frontend = aligner.file().frontend.init()?;
            let corpus = AlignCorpus::build(&utterances, &frontend, &Bar::new())?;
            (aligner, Arc::new(corpus), None)
        }
        None => {
            let (aligner, corpus, seconds) = train(&args, &utterances)?;
            (aligner, corpus, Some(seconds))
        }
    };
    for (id, why) in &corpus.left_out {
        eprintln!("left out {id}: {why}");
    }

    let started = Instant::now();
    let (aligned, failed) =
        aligner.align_corpus(&corpus, &|_| None, args.max_frames, &device, &Bar::new())?;
    let align_seconds = started.elapsed().as_secs_f64();
    for (id, e) in &failed {
        eprintln!("not aligned {id}: {e}");
    }
    let by_id: std::collections::HashMap<&str, &Utterance> =
        utterances.iter().map(|u| (u.id.as_str(), u)).collect();
    for a in &aligned {
        let u = by_id[a.id.as_str()];
        let path = textgrid_path(&args.out, args.beside_audio, u);
        voxspec_data::write_textgrid(&path, &a.alignment)
            .with_context(|| format!("writing the alignment of {}", u.id))?;
    }
    let inner_pauses = inner_pauses(&aligned);
    let mean_score = mean_score(&aligned);

    let (reference_transcript, reference_phones) = compare_with_references(
        &aligner,
        &corpus,
        &aligned,
        args.max_frames,
        &device,
        &Bar::new(),
    )?;

    let report = AlignReport {
        data: args.data.clone(),
        utterances: utterances.len(),
        aligned: aligned.len(),
        failed: failed
            .iter()
            .map(|(id, e)| (id.clone(), e.to_string()))
            .collect(),
        left_out: corpus.left_out.clone(),
        train_seconds,
        align_seconds,
        mean_score,
        inner_pauses,
        reference_transcript,
        reference_phones,
    };
    voxspec_data::write_atomic(
        &args.out.join("report.json"),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    println!(
        "aligned {} of {} utterances in {:.1} s ({} inner pauses; mean log-probability per \
         frame {:.3}); TextGrids in {}",
        report.aligned,
        report.utterances,
        align_seconds,
        inner_pauses,
        mean_score,
        if args.beside_audio {
            "the audio folders".to_string()
        } else {
            args.out.display().to_string()
        }
    );
    for (what, r) in [
        ("transcripts' phones", &report.reference_transcript),
        ("reference phones   ", &report.reference_phones),
    ] {
        if let Some(r) = r {
            println!(
                "against the corpus's own alignments, {what}: {} utterances ({} with other \
                 phones skipped), {} boundaries: mean |error| {:.1} ms, within 10 ms {:.1} %, \
                 20 ms {:.1} %, 50 ms {:.1} %",
                r.utterances,
                r.mismatched,
                r.boundaries,
                r.mean_abs_error_ms,
                100.0 * r.within_10ms,
                100.0 * r.within_20ms,
                100.0 * r.within_50ms
            );
        }
    }
    println!("report: {}", args.out.join("report.json").display());
    anyhow::ensure!(
        !aligned.is_empty(),
        "no utterance could be aligned (see the messages above)"
    );
    Ok(())
}

/// Trains the aligner: the flat start into `<out>/aligner-flat`, then forward-sum into
/// `<out>/aligner`. Returns it with the corpus and the seconds spent.
fn train(
    args: &AlignArgs,
    utterances: &[Utterance],
) -> anyhow::Result<(Aligner, Arc<AlignCorpus>, f64)> {
    let started = Instant::now();
    let stop = voxspec_train::stop_on_ctrl_c()?;
    let flat_dir = args.out.join("aligner-flat");
    let flat_weights = flat_dir.join(voxspec_train::weights::WEIGHTS_FILE);
    let mut model = match args.preset {
        Preset::Tiny => AlignerModelConfig::tiny(),
        Preset::Small => AlignerModelConfig::small(),
        Preset::Base => AlignerModelConfig::base(),
    };
    if let Some(n) = args.conv_layers {
        model.conv_layers = n;
    }
    if let Some(k) = args.kernel {
        model.conv_kernel = k;
    }
    if let Some(d) = args.width {
        model.width = d;
    }
    anyhow::ensure!(
        (40..=400).contains(&args.hop),
        "--hop {} must lie in 40..=400 samples (2.5–25 ms at 16 kHz)",
        args.hop
    );
    let base = AlignTaskConfig::new(model)
        .with_frontend(voxspec_teacher::ctc::FrontendConfig::new().with_hop_length(args.hop))
        .with_batch_size(args.train.batch)
        .with_max_batch_frames(args.max_frames)
        .with_seed(args.train.seed)
        .with_scoring(
            Scoring::new()
                .with_prior_scale(args.prior_scale)
                .with_silence_gate((args.silence_gate_db > 0.0).then(|| {
                    SilenceGate::new()
                        .with_below_peak_db(args.silence_gate_db)
                        .with_penalty(args.silence_penalty)
                }))
                .with_min_phone_frames(args.min_phone_frames.map(|n| n as usize)),
        );
    let mut corpus = None;
    if args.flat_steps > 0 {
        let flat = base.clone().with_objective(Objective::Uniform);
        let mut loop_args = args.train.clone();
        loop_args.steps = args.flat_steps;
        loop_args.warmup = loop_args.warmup.min(args.flat_steps / 2);
        let (_, c) = run_phase(
            args,
            &loop_args,
            &flat_dir,
            flat,
            (utterances, None),
            &stop,
            "flat start",
        )?;
        corpus = Some(c);
    }
    let main = base
        .with_objective(match args.objective {
            ObjectiveArg::Viterbi => Objective::Viterbi,
            ObjectiveArg::ForwardSum => Objective::ForwardSum,
        })
        .with_init_weights((args.flat_steps > 0).then(|| flat_weights.clone()));
    let run_dir = args.out.join("aligner");
    let (aligner, corpus) = run_phase(
        args,
        &args.train,
        &run_dir,
        main,
        (utterances, corpus),
        &stop,
        "forward-sum",
    )?;
    aligner.save(&run_dir)?;
    Ok((aligner, corpus, started.elapsed().as_secs_f64()))
}

/// One training run of the aligner in `run_dir` (resumed with --resume); its model is saved
/// there as model.safetensors + config.json.
fn run_phase(
    args: &AlignArgs,
    loop_args: &LoopArgs,
    run_dir: &Path,
    task: AlignTaskConfig,
    (utterances, corpus): (&[Utterance], Option<Arc<AlignCorpus>>),
    stop: &Arc<AtomicBool>,
    what: &str,
) -> anyhow::Result<(Aligner, Arc<AlignCorpus>)> {
    std::fs::create_dir_all(run_dir).with_context(|| format!("creating {}", run_dir.display()))?;
    let run = voxspec_train::resume_or_start(run_dir, "aligner", args.train.resume, || {
        anyhow::Ok(RunFile {
            preset: args.preset,
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
            let (task, c) = AlignTask::new(run.task, utterances, &Bar::new())?;
            let hop_s = frontend.hop_length as f64 / f64::from(frontend.sample_rate);
            println!(
                "aligner: {} utterances, {:.1} minutes of audio",
                c.len(),
                c.total_frames() as f64 * hop_s / 60.0
            );
            (task, c)
        }
    };
    let devices = crate::device::training();
    let trainer = voxspec_train::Trainer::new(loop_args.config(5.0), task, run_dir, &devices[0])
        .with_devices(&devices)
        .with_stop_flag(stop.clone());
    let mut observer = StepBar::new(loop_args.steps);
    let finished = trainer.run_timed(&mut observer)?;
    observer.bar.finish_and_clear();
    let outcome = finished.outcome;
    anyhow::ensure!(
        !outcome.stopped,
        "stopped at step {}; the checkpoint is in {}; continue with --resume",
        outcome.step,
        run_dir.display()
    );
    println!(
        "aligner, {what}: {} steps in {:.0} s",
        outcome.step, finished.seconds
    );
    let aligner = Aligner::new(outcome.model.valid(), model_config, frontend, scoring)?;
    aligner.save(run_dir)?;
    Ok((aligner, corpus))
}
