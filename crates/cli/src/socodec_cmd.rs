//! `voxspec codec train | encode | decode | extract | eval` for SoCodec-kind codecs
//! (`--kind socodec` at training; the other commands read the kind from the model directory).
//!
//! The codec reads teacher features (a `voxspec teacher extract` store, or the CTC teacher run
//! on the audio), writes `[streams, frames]` tokens, and turns tokens + a reference recording
//! into a log-mel that the vocoder renders.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use anyhow::Context;
use burn::module::Module;
use burn::tensor::Device;
use serde::{Deserialize, Serialize};
use voxspec_codec::socodec::prepare::{
    extract_split, load_raw_split, standardised, with_statistics,
};
use voxspec_codec::socodec::{MelToWave, SoCodecData, SoCodecTask, SoCodecTrainConfig};
use voxspec_codec::{SOCODEC_KIND, SoCodec, SoCodecConfig, load_socodec, save_socodec};
use voxspec_data::{Codes, Progress, TokenStoreMeta, TokenStoreWriter};
use voxspec_eval::{
    EvalSplit, SoCodecEvalSettings, StreamsReport, evaluate_socodec, write_report,
    write_streams_plots,
};
use voxspec_teacher::ctc::CtcTeacher;
use voxspec_teacher::{FeatureStoreReader, SemanticTeacher};
use voxspec_train::Trainer;

use crate::codec_args::{
    CodecKind, DecodeArgs, EncodeArgs, EvalArgs, ExtractArgs, Preset, TrainArgs,
};
use crate::common::{load_ctc_teacher, read_audio};
use crate::progress::Bar;
use crate::train_loop::{CodecBar, StepBar};

fn preset_config(preset: Preset) -> SoCodecConfig {
    match preset {
        Preset::Tiny => SoCodecConfig::new()
            .with_channels(16)
            .with_latent_dim(16)
            .with_sub_codebook_size(16)
            .with_global_channels(16)
            .with_kmeans_iters(4),
        Preset::Small => SoCodecConfig::new(),
        Preset::Base => SoCodecConfig::new()
            .with_channels(1024)
            .with_latent_dim(1024)
            .with_blocks(2)
            .with_global_channels(512),
    }
}

/// What `--resume` needs: the task settings of the run.
#[derive(Debug, Serialize, Deserialize)]
struct RunFile {
    kind: CodecKind,
    teacher_features: PathBuf,
    task: SoCodecTrainConfig,
}

fn open_store(dir: &Path, split: &str) -> anyhow::Result<FeatureStoreReader> {
    FeatureStoreReader::open(dir, split)
        .with_context(|| format!("opening the {split} teacher features in {}", dir.display()))
}

pub(crate) fn train(args: TrainArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.train.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(args.segment > 0.0, "--segment must be positive");
    let train = voxspec_data::read_split(&args.data, "train")?;
    anyhow::ensure!(
        !train.is_empty(),
        "{} has no utterances",
        args.data.join("train.jsonl").display()
    );
    let dev = voxspec_data::read_split_if_present(&args.data, "dev")?;
    // A new run's settings are saved now and again below with the feature statistics.
    let run = voxspec_train::resume_or_start(&args.out, "codec", args.train.resume, || {
        let Some(features) = args.teacher_features.clone() else {
            anyhow::bail!(
                "--kind socodec needs --teacher-features (the output of `voxspec teacher extract`)"
            );
        };
        let store = open_store(&features, "train")?;
        let model = preset_config(args.preset)
            .with_feature_dim(store.meta().dim)
            .with_feature_ms((1000.0 / store.meta().frame_rate).round() as usize)
            .with_streams(args.streams)
            .with_frame_ms(args.frame_ms)
            .with_quantizer(args.quantizer.into());
        let model = match args.sub_codebook {
            Some(k) => model.with_sub_codebook_size(k),
            None => model,
        };
        model.validate().context("the SoCodec settings")?;
        let segment_frames = ((args.segment * 1000.0) as usize / model.frame_ms).max(1);
        let task = SoCodecTrainConfig::new(model)
            .with_segment_frames(segment_frames)
            .with_batch_size(args.train.batch)
            .with_data_seed(args.train.seed)
            .with_adversarial(args.adversarial);
        anyhow::Ok(RunFile {
            kind: CodecKind::Socodec,
            teacher_features: features,
            task,
        })
    })?;
    let (run, resumed) = (run.settings, run.resumed);
    let store = open_store(&run.teacher_features, "train")?;
    let mut model = run.task.model.clone();
    anyhow::ensure!(
        store.meta().dim == model.feature_dim,
        "teacher features in {} are {}-d but the codec reads {}",
        run.teacher_features.display(),
        store.meta().dim,
        model.feature_dim
    );
    println!(
        "teacher features {}: {}-d at {} Hz ({}); {} stream(s) × {} tokens at {} ms ({:?}, factors {:?})",
        run.teacher_features.display(),
        store.meta().dim,
        store.meta().frame_rate,
        store.meta().teacher,
        model.streams,
        model.stream_vocab(),
        model.frame_ms,
        model.quantizer,
        model.factors()
    );
    let train_raw = load_raw_split(&train, &model, &store, &Bar::new(), "train features + mel")?;
    if !resumed {
        model = with_statistics(model, &train_raw);
    }
    let mut task_config = run.task;
    task_config.model = model.clone();
    let run = RunFile {
        kind: run.kind,
        teacher_features: run.teacher_features,
        task: task_config,
    };
    if !resumed {
        voxspec_train::save_run_settings(&args.out, "codec", &run)?;
    }
    let train_utts = standardised(&model, train_raw);
    let dev_utts = match (dev.is_empty(), open_store(&run.teacher_features, "dev")) {
        (false, Ok(dev_store)) => standardised(
            &model,
            load_raw_split(&dev, &model, &dev_store, &Bar::new(), "dev features + mel")?,
        ),
        _ => Vec::new(),
    };
    println!(
        "train: {} utterances, dev: {}; segments of {} tokens ({} ms), batch {}, adversarial {}",
        train_utts.len(),
        dev_utts.len(),
        run.task.segment_frames,
        run.task.segment_frames * model.frame_ms,
        run.task.batch_size,
        run.task.adversarial
    );
    let train_data = SoCodecData::new(train_utts, &run.task, true)?;
    let valid_data = if dev_utts.is_empty() {
        None
    } else {
        Some(SoCodecData::new(dev_utts, &run.task, false)?)
    };
    let device = crate::device::single()?;
    let task = SoCodecTask::new(run.task, train_data, valid_data)?;
    let trainer = Trainer::new(args.train.config(5.0), task, &args.out, &device)
        .with_stop_flag(voxspec_train::stop_on_ctrl_c()?);
    let mut observer = CodecBar(StepBar::new(args.train.steps));
    let finished = trainer.run_timed(&mut observer)?;
    observer.0.bar.finish_and_clear();
    let summary = finished.to_string();
    let codec = finished.outcome.model.generator.valid();
    save_socodec(&args.out, &model, &codec)?;
    println!("{summary}");
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

/// The CTC teacher whose hidden states the codec reads, checked against the codec.
fn feature_teacher(
    dir: &Path,
    config: &SoCodecConfig,
    device: &Device,
) -> anyhow::Result<CtcTeacher> {
    let teacher = load_ctc_teacher(dir, device)?;
    anyhow::ensure!(
        teacher.dim() == config.feature_dim,
        "the teacher {} gives {}-d features but the codec reads {}",
        dir.display(),
        teacher.dim(),
        config.feature_dim
    );
    Ok(teacher)
}

/// Raw teacher features `[frames, dim]` of a waveform at the teacher's rate.
fn teacher_features(teacher: &CtcTeacher, samples: &[f32]) -> anyhow::Result<Vec<f32>> {
    let f = teacher.features(samples)?; // [frames, dim]
    f.into_data()
        .try_into_vec_as::<f32>()
        .map_err(|e| anyhow::anyhow!("reading the teacher features: {e:?}"))
}

/// The vocoder (or Griffin-Lim with `griffin_lim`), checked against the codec's mel.
pub(crate) fn renderer(
    vocoder: &Path,
    griffin_lim: bool,
    config: &SoCodecConfig,
    device: &Device,
) -> anyhow::Result<MelToWave> {
    let r = if griffin_lim {
        MelToWave::GriffinLim(config.mel)
    } else {
        let v = voxspec_codec::Vocoder::load(vocoder, device).with_context(|| {
            format!(
                "loading the vocoder {} (train one with `voxspec vocoder train`, or pass \
                 --griffin-lim)",
                vocoder.display()
            )
        })?;
        MelToWave::Vocoder(Box::new(v))
    };
    r.check(&config.mel)
        .with_context(|| format!("vocoder {}", vocoder.display()))?;
    Ok(r)
}

pub(crate) fn encode(args: EncodeArgs) -> anyhow::Result<()> {
    let device = crate::device::single()?;
    let (config, model) = load(&args.codec, &device)?;
    let teacher = feature_teacher(&args.teacher, &config, &device)?;
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
    let data: Vec<u32> = tokens.concat();
    let codes = Codes::new(tokens.len(), frames, data)?;
    let meta = HashMap::from([
        ("kind".to_string(), SOCODEC_KIND.to_string()),
        ("sample_rate".to_string(), teacher.sample_rate().to_string()),
        (
            "frame_rate".to_string(),
            (1000.0 / config.frame_ms as f32).to_string(),
        ),
        (
            "codebook_size".to_string(),
            config.stream_vocab().to_string(),
        ),
        ("samples".to_string(), samples.len().to_string()),
    ]);
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
    let device = crate::device::single()?;
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
    let render = renderer(&args.vocoder, args.griffin_lim, &config, &device)?;
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
    let device = crate::device::single()?;
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
    let meta = TokenStoreMeta {
        n_q,
        codebook_size: u32::try_from(config.stream_vocab()).context("stream vocabulary")?,
        frame_rate: 1000.0 / config.frame_ms as f32,
    };
    for crate::prepare::SplitManifest {
        name: split,
        path: _,
        utterances,
    } in crate::prepare::split_manifests(&args.data, &args.splits)?
    {
        let split = split.as_str();
        let store = open_store(features, split)?;
        let done = voxspec_data::token_store::stored_ids(&args.out, split, meta)?;
        let mut writer = TokenStoreWriter::new(&args.out, split, meta, args.shard_frames)?;
        let bar = Bar::with_len(utterances.len() as u64, split);
        // Shifted grids for the training split only: dev and test keep the one grid they are
        // scored on.
        let grids = if split == "train" {
            args.phase_shifts
        } else {
            1
        };
        let written = extract_split(
            &model,
            &config,
            &store,
            &utterances,
            (n_q, grids),
            &done,
            &mut writer,
            &bar,
            &device,
        )?;
        writer.finish()?;
        bar.finish();
        println!(
            "{split}: {written} utterances written, {} already there",
            done.len()
        );
    }
    println!("tokens: {}", args.out.display());
    Ok(())
}

/// `codec eval` for a SoCodec (`voxspec_eval::socodec`): the table of MCD, CER and forced
/// choice of the original, the vocoder on the original mel, and the first b streams.
pub(crate) fn eval(args: &EvalArgs) -> anyhow::Result<()> {
    let device = crate::device::single()?;
    let (config, model) = load(&args.codec, &device)?;
    let teacher = feature_teacher(&args.teacher, &config, &device)?;
    let split = EvalSplit::read(&args.data, &args.split, args.max_utts, &teacher)?;
    let render = renderer(&args.vocoder, args.griffin_lim, &config, &device)?;
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
        vocoder_dir: (!args.griffin_lim).then_some(args.vocoder.as_path()),
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
    println!(
        "\n{} utterances, {:.1} s; SoCodec {} streams at {} ms ({:?})\n",
        report.utterances, report.audio_seconds, report.streams, report.frame_ms, report.quantizer
    );
    println!("| audio | MCD (dB) | CER (%) | ID (%) | WER, ASR (%) | ID, ASR (%) |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, row) in report.rows.iter().enumerate() {
        let mcd = if i == 0 {
            "–".to_string()
        } else {
            format!("{:.2}", row.mcd_db)
        };
        let (wer, id) = row.asr.as_ref().map_or(("–".into(), "–".into()), |a| {
            (
                format!("{:.1}", 100.0 * a.wer),
                format!(
                    "{:.1} ± {:.1}",
                    100.0 * a.forced_choice,
                    100.0 * a.forced_choice_se
                ),
            )
        });
        println!(
            "| {} | {mcd} | {:.1} | {:.1} | {wer} | {id} |",
            row.name,
            100.0 * row.cer,
            100.0 * row.forced_choice
        );
    }
    println!(
        "\nID: forced choice among all {} transcripts of the split; chance = {:.1} %.",
        report.forced_choice_candidates,
        100.0 * report.forced_choice_chance
    );
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
    println!("| model | audio | MCD (dB) | CER (%) | ID (%) |");
    println!("|---|---|---:|---:|---:|");
    for (label, r) in &reports {
        for row in &r.rows {
            println!(
                "| {label} | {} | {:.2} | {:.1} | {:.1} |",
                row.name,
                row.mcd_db,
                100.0 * row.cer,
                100.0 * row.forced_choice
            );
        }
    }
    let n: Vec<usize> = reports.iter().map(|(_, r)| r.utterances).collect();
    println!("\n(test utterances per report: {n:?})");
    for path in write_streams_plots(&args.out, &reports)? {
        println!("plot: {}", path.display());
    }
    Ok(())
}
