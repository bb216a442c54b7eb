//! `voxspec codec train | encode | decode | extract | eval` for SoCodec-kind codecs
//! (`--kind socodec` at training; the other commands read the kind from the model directory).
//!
//! The codec reads teacher features (a `voxspec teacher extract` store, or the CTC teacher run
//! on the audio), writes `[streams, frames]` tokens, and turns tokens + a reference recording
//! into a log-mel that the vocoder renders.

use std::path::{Path, PathBuf};

use anyhow::Context;
use burn::module::Module;
use burn::tensor::Device;
use voxspec_codec::socodec::prepare::{ExtractedSplit, extract_store};
use voxspec_codec::socodec::{
    MelToWave, SoCodecRun, SoCodecRunFile, SoCodecRunOptions, check_feature_teacher, codes_meta,
    teacher_features,
};
use voxspec_codec::{SoCodec, SoCodecConfig, load_socodec, save_socodec};
use voxspec_data::Codes;
use voxspec_eval::{
    EvalSplit, SoCodecEvalSettings, StreamsReport, evaluate_socodec,
    resynthesis_table::streams_markdown, write_report, write_streams_plots,
};
use voxspec_teacher::SemanticTeacher;
use voxspec_train::Trainer;

use crate::codec_args::{DecodeArgs, EncodeArgs, EvalArgs, ExtractArgs, TrainArgs};
use crate::common::{load_ctc_teacher, read_audio};
use crate::progress::Bar;
use crate::train_loop::{self, DevLines};

pub(crate) fn train(args: TrainArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.train.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(args.segment > 0.0, "--segment must be positive");
    let (train, dev) = crate::common::train_and_dev(&args.data)?;
    let model = SoCodecConfig::preset(args.preset)
        .with_streams(args.streams)
        .with_frame_ms(args.frame_ms)
        .with_quantizer(args.quantizer.into());
    let model = match args.sub_codebook {
        Some(k) => model.with_sub_codebook_size(k),
        None => model,
    };
    let options = SoCodecRunOptions {
        segment_seconds: args.segment,
        batch_size: args.train.batch,
        seed: args.train.seed,
        adversarial: args.adversarial,
    };
    // A new run's settings are saved now and again with the feature statistics.
    let run = SoCodecRun::start(&args.out, args.train.resume, || {
        let Some(features) = args.teacher_features.clone() else {
            anyhow::bail!(
                "--kind socodec needs --teacher-features (the output of `voxspec teacher extract`)"
            );
        };
        anyhow::Ok(SoCodecRunFile::new(features, model, &options)?)
    })?;
    let (meta, model) = (run.store.meta(), run.model());
    println!(
        "teacher features {}: {}-d at {} Hz ({}); {} stream(s) × {} tokens at {} ms ({:?}, factors {:?})",
        run.file.teacher_features.display(),
        meta.dim,
        meta.frame_rate,
        meta.teacher,
        model.streams,
        model.stream_vocab(),
        model.frame_ms,
        model.quantizer,
        model.factors()
    );
    let prepared = run.prepare(&args.out, (&train, &dev), (&Bar::new(), &Bar::new()))?;
    let (model, task) = (prepared.model().clone(), &prepared.file.task);
    println!(
        "train: {} utterances, dev: {}; segments of {} tokens ({} ms), batch {}, adversarial {}",
        prepared.train.len(),
        prepared.dev.len(),
        task.segment_frames,
        task.segment_frames * model.frame_ms,
        task.batch_size,
        task.adversarial
    );
    let task = prepared.task()?;
    let device = voxspec_train::device::single()?;
    let trainer = Trainer::new(args.train.config(5.0), task, &args.out, &device);
    let finished = train_loop::run(trainer, args.train.steps, DevLines::Terms)?;
    save_socodec(&args.out, &model, &finished.outcome.model.generator.valid())?;
    println!(
        "codec: {} (SoCodec, {} × {} tokens at {} ms)",
        args.out.display(),
        model.streams,
        model.stream_vocab(),
        model.frame_ms
    );
    Ok(())
}

/// Loads a SoCodec model directory.
pub(crate) fn load(dir: &Path, device: &Device) -> anyhow::Result<(SoCodecConfig, SoCodec)> {
    load_socodec(dir, device).with_context(|| format!("loading the SoCodec {}", dir.display()))
}

pub(crate) fn encode(args: EncodeArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let (config, model) = load(&args.codec, &device)?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    check_feature_teacher(&config, &teacher, &args.teacher)?;
    let samples = read_audio(&args.input, teacher.sample_rate())?;
    anyhow::ensure!(!samples.is_empty(), "{} is empty", args.input.display());
    let features = teacher_features(&teacher, &samples)?;
    let mut tokens = model
        .encode_features(&config, &features, &device)
        .with_context(|| format!("encoding {}", args.input.display()))?;
    if let Some(n) = args.n_q {
        anyhow::ensure!(
            (1..=tokens.len()).contains(&n),
            "--n-q {n}: the codec has streams 1..={}",
            tokens.len()
        );
        tokens.truncate(n);
    }
    let frames = tokens[0].len();
    let codes = Codes::new(tokens.len(), frames, tokens.concat())?;
    let meta = codes_meta(&config, teacher.sample_rate(), samples.len());
    voxspec_data::write_codes_file(&args.out, &codes, meta)?;
    println!(
        "{}: {} samples → tokens [{}, {frames}] ({} ms frames) → {}",
        args.input.display(),
        samples.len(),
        codes.n_q,
        config.frame_ms,
        args.out.display()
    );
    Ok(())
}

pub(crate) fn decode(args: DecodeArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let (config, model) = load(&args.codec, &device)?;
    let Some(reference) = &args.reference else {
        anyhow::bail!(
            "a SoCodec decodes with a voice: pass --reference <AUDIO> (at least {:.1} s)",
            config.clip_frames as f64 * config.mel.hop_length as f64
                / f64::from(config.mel.sample_rate)
        );
    };
    let file = voxspec_data::read_codes_file(&args.input)?;
    let samples = file.samples();
    let (n_q, frames, data) = (file.n_q, file.n_frames, file.data);
    let keep = args.streams.unwrap_or(n_q);
    if n_q <= model.n_streams() {
        anyhow::ensure!(
            (1..=n_q).contains(&keep),
            "--streams {keep}: the file holds streams 1..={n_q}"
        );
    }
    let tokens = model.stream_tokens(&args.input, (n_q, frames), &data, keep)?;
    let rate = config.mel.sample_rate;
    let ref_samples = read_audio(reference, rate)?;
    let voice = model
        .voice(&config, &ref_samples, &device)
        .with_context(|| format!("the reference {}", reference.display()))?;
    let vocoder = (!args.griffin_lim).then_some(args.vocoder.as_path());
    let render = MelToWave::load(vocoder, &config.mel, &device)?;
    let (mel, mel_frames) = model.decode_tokens(&config, &tokens, voice, &device)?;
    let mut wave = render.render(&mel, mel_frames)?;
    if let Some(n) = samples {
        wave.truncate(n);
    }
    let n = wave.len();
    voxspec_audio::write_wav(
        &args.out,
        &voxspec_audio::Audio::new(wave, rate),
        args.format.into(),
    )?;
    println!(
        "{}: tokens [{keep} of {n_q}, {frames}] + voice of {} → {n} samples at {rate} Hz → {}",
        args.input.display(),
        reference.display(),
        args.out.display()
    );
    Ok(())
}

pub(crate) fn extract(args: ExtractArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let (config, model) = load(&args.codec, &device)?;
    let Some(features) = &args.teacher_features else {
        anyhow::bail!("a SoCodec extracts from teacher features: pass --teacher-features <DIR>");
    };
    let n_q = args.n_q.unwrap_or(config.streams);
    anyhow::ensure!(
        (1..=config.streams).contains(&n_q),
        "--n-q {n_q}: the codec has streams 1..={}",
        config.streams
    );
    let ratio = config.ratio();
    anyhow::ensure!(
        (1..=ratio).contains(&args.phase_shifts),
        "--phase-shifts {}: a codec of {} ms frames over {} ms teacher frames has 1..={ratio} \
         token grids",
        args.phase_shifts,
        config.frame_ms,
        config.feature_ms
    );
    for crate::prepare::SplitManifest {
        name: split,
        path: _,
        utterances,
    } in crate::prepare::split_manifests(&args.data, &args.splits)?
    {
        let ExtractedSplit { written, already } = extract_store(
            &model,
            &config,
            (features, &args.out),
            (&split, &utterances),
            (n_q, args.phase_shifts, args.shard_frames),
            &Bar::new(),
            &device,
        )?;
        println!("{split}: {written} utterances written, {already} already there");
    }
    println!("tokens: {}", args.out.display());
    Ok(())
}

/// `codec eval` for a SoCodec (`voxspec_eval::socodec`): the table of MCD, CER and forced
/// choice of the original, the vocoder on the original mel, and the first b streams.
pub(crate) fn eval(args: &EvalArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let (config, model) = load(&args.codec, &device)?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    check_feature_teacher(&config, &teacher, &args.teacher)?;
    let split = EvalSplit::read(&args.data, &args.split, args.max_utterances, &teacher)?;
    let vocoder = (!args.griffin_lim).then_some(args.vocoder.as_path());
    let render = MelToWave::load(vocoder, &config.mel, &device)?;
    let asr = args.asr.judge()?;
    // The independent judge reads every clip with its transcript from a folder per row.
    let audio_dir = match &asr {
        Some(_) => Some(
            args.save_audio
                .clone()
                .unwrap_or_else(|| args.out.with_extension("audio")),
        ),
        None => args.save_audio.clone(),
    };
    let settings = SoCodecEvalSettings {
        codec_dir: &args.codec,
        vocoder_dir: vocoder,
        teacher_dir: &args.teacher,
        audio_dir: audio_dir.as_deref(),
        judge: asr.as_ref(),
    };
    let report = evaluate_socodec(
        &model,
        &config,
        &teacher,
        &render,
        &split,
        &settings,
        &Bar::new(),
        &device,
    )?;
    print!("{}", report.markdown());
    write_report(&args.out, &report)?;
    println!("report: {}", args.out.display());
    Ok(())
}

/// Compare `codec eval` reports of SoCodecs stream by stream (the paper's Fig. 4).
///
/// Reads the JSON reports `codec eval` wrote for SoCodec models (e.g. one trained with
/// --quantizer opq and one with rq), prints one markdown table (MCD, CER and forced-choice
/// accuracy of speech decoded from the first b streams, for every b and report), and writes
/// three PNG line plots against b: <OUT>-mcd.png, <OUT>-cer.png, <OUT>-id.png.
#[derive(Debug, clap::Args)]
pub struct StreamsPlotArgs {
    /// A SoCodec `codec eval` report (repeat for each model); labelled by its quantizer
    /// unless --label is given.
    #[arg(long = "report", value_name = "FILE", required = true)]
    reports: Vec<PathBuf>,
    /// Labels of the reports, in order.
    #[arg(long = "label", value_name = "NAME")]
    labels: Vec<String>,
    /// Output prefix of the PNGs.
    #[arg(long, short, value_name = "PREFIX")]
    out: PathBuf,
}

pub(crate) fn plot_streams(args: StreamsPlotArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.labels.is_empty() || args.labels.len() == args.reports.len(),
        "{} --label for {} --report",
        args.labels.len(),
        args.reports.len()
    );
    let mut reports = Vec::new();
    for (i, path) in args.reports.iter().enumerate() {
        let r = StreamsReport::read(path)?;
        let label = args.labels.get(i).cloned().unwrap_or_else(|| r.label());
        reports.push((label, r));
    }
    print!("{}", streams_markdown(&reports));
    for path in write_streams_plots(&args.out, &reports)? {
        println!("plot: {}", path.display());
    }
    Ok(())
}
