//! `voxspec align`: train the aligner on a prepared corpus and write its phone alignments as
//! TextGrids.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::{Args, ValueEnum};
use voxspec_align::{
    AlignCorpus, AlignReport, AlignTaskConfig, AlignTraining, AlignTrainingObserver, Aligner,
    AlignerModelConfig, Objective, Scoring, SilenceGate, compare_with_references, textgrid_path,
    train_aligner,
};
use voxspec_data::corpus::SPLITS;
use voxspec_data::{Progress, Utterance};
use voxspec_train::TrainObserver;

use crate::progress::Bar;
use crate::train_loop::{LoopArgs, StepBar};

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
    preset: voxspec_nn::Preset,
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
    let device = voxspec_train::device::training()[0].clone();

    let (aligner, corpus, train_seconds) = match &args.aligner {
        Some(dir) => {
            let mut aligner = Aligner::load(dir, &device)
                .with_context(|| format!("loading the aligner {}", dir.display()))?;
            if let Some(n) = args.min_phone_frames {
                aligner.set_min_phone_frames(n as usize);
            }
            let corpus = AlignCorpus::build(&utterances, aligner.frontend(), &Bar::new())?;
            (aligner, Arc::new(corpus), None)
        }
        None => {
            let started = Instant::now();
            let stop = voxspec_train::stop_on_ctrl_c()?;
            let devices = voxspec_train::device::training();
            let mut bars = PhaseBars {
                features: Bar::new(),
                steps: None,
            };
            let (aligner, corpus) = train_aligner(
                &training(&args)?,
                &args.out,
                &utterances,
                (&devices, &stop),
                &mut bars,
            )?;
            (aligner, corpus, Some(started.elapsed().as_secs_f64()))
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
    let references = compare_with_references(
        &aligner,
        &corpus,
        &aligned,
        args.max_frames,
        &device,
        &Bar::new(),
    )?;
    let report = AlignReport::new(
        (&args.data, utterances.len()),
        &corpus,
        (&aligned, &failed),
        (train_seconds, align_seconds),
        references,
    );
    voxspec_data::write_atomic(
        &args.out.join("report.json"),
        serde_json::to_string_pretty(&report)?.as_bytes(),
    )?;
    let written_to = if args.beside_audio {
        "the audio folders".to_string()
    } else {
        args.out.display().to_string()
    };
    println!("{}", report.summary(&written_to));
    println!("report: {}", args.out.join("report.json").display());
    anyhow::ensure!(
        !aligned.is_empty(),
        "no utterance could be aligned (see the messages above)"
    );
    Ok(())
}

/// The aligner's training as the arguments ask: the flat start's loop is the main loop's
/// settings with --flat-steps steps and at most half of them warming up.
fn training(args: &AlignArgs) -> anyhow::Result<AlignTraining> {
    let mut model = AlignerModelConfig::preset(args.preset);
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
    let task = AlignTaskConfig::new(model)
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
    let flat_loop = (args.flat_steps > 0).then(|| {
        let mut flat = args.train.clone();
        flat.steps = args.flat_steps;
        flat.warmup = flat.warmup.min(args.flat_steps / 2);
        flat.config(5.0)
    });
    Ok(AlignTraining {
        preset: args.preset,
        task,
        objective: match args.objective {
            ObjectiveArg::Viterbi => Objective::Viterbi,
            ObjectiveArg::ForwardSum => Objective::ForwardSum,
        },
        flat_loop,
        main_loop: args.train.config(5.0),
        resume: args.train.resume,
    })
}

/// The progress of the aligner's training: a feature bar, then a step bar per phase.
struct PhaseBars {
    features: Bar,
    steps: Option<StepBar>,
}

impl AlignTrainingObserver for PhaseBars {
    fn features(&self) -> &dyn Progress {
        &self.features
    }

    fn corpus_ready(&mut self, utterances: usize, minutes: f64) {
        println!("aligner: {utterances} utterances, {minutes:.1} minutes of audio");
    }

    fn phase_started(&mut self, steps: usize) -> &mut dyn TrainObserver {
        self.steps.insert(StepBar::new(steps))
    }

    fn phase_ended(&mut self) {
        if let Some(b) = self.steps.take() {
            b.bar.finish_and_clear();
        }
    }

    fn phase_trained(&mut self, what: &str, steps: usize, seconds: f64) {
        println!("aligner, {what}: {steps} steps in {seconds:.0} s");
    }
}
