//! `voxspec codec train | encode | decode | extract | eval` for SoCodec-kind codecs
//! (`--kind socodec` at training; the other commands read the kind from the model directory).
//!
//! The codec reads teacher features (a `voxspec teacher extract` store, or the CTC teacher run
//! on the audio), writes `[streams, frames]` tokens, and turns tokens + a reference recording
//! into a log-mel that the vocoder renders.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

use anyhow::Context;
use burn::module::Module;
use burn::tensor::Device;
use clap::ValueEnum;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use voxspec_codec::socodec::{
    MelToWave, SoCodecData, SoCodecTask, SoCodecTrainConfig, SoCodecUtterance, column_stats,
};
use voxspec_codec::{
    McdConfig, QuantizerKind, SOCODEC_KIND, SoCodec, SoCodecConfig, load_socodec, save_socodec,
};
use voxspec_data::{Codes, Progress, TokenStoreMeta, TokenStoreWriter, Utterance, read_manifest};
use voxspec_teacher::ctc::{CtcTeacher, ForcedChoice, LengthNorm};
use voxspec_teacher::{ErrorCounts, FeatureStoreReader, SemanticTeacher};
use voxspec_train::Trainer;

use crate::codec_cmd::{DecodeArgs, EncodeArgs, ExtractArgs, Preset, TrainArgs, read_audio};
use crate::progress::Bar;
use crate::teacher_cmd::load_ctc_teacher;
use crate::train_cmd::read_split;
use crate::train_loop::{StepBar, install_ctrl_c};

/// Which codec family `codec train` builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CodecKind {
    /// SEANet + RVQ waveform codec with semantic distillation.
    Speechtokenizer,
    /// SoCodec: teacher features → ordered token streams → log-mel (+ vocoder).
    Socodec,
}

/// The quantizer of a SoCodec (`--quantizer`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum QuantizerArg {
    /// Ordered product quantization (paired sub-codebooks, nested dropout).
    Opq,
    /// Product quantization (the same streams, no nested dropout).
    Pq,
    /// Residual vector quantization (one K²-entry codebook per stream).
    Rq,
}

impl From<QuantizerArg> for QuantizerKind {
    fn from(q: QuantizerArg) -> Self {
        match q {
            QuantizerArg::Opq => QuantizerKind::Opq,
            QuantizerArg::Pq => QuantizerKind::Pq,
            QuantizerArg::Rq => QuantizerKind::Rq,
        }
    }
}

/// Whether `dir/config.json` names a SoCodec.
pub(crate) fn is_socodec(dir: &Path) -> bool {
    std::fs::read(dir.join("config.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
        .and_then(|j| {
            j.get("kind")
                .and_then(|k| k.as_str())
                .map(|k| k == SOCODEC_KIND)
        })
        .unwrap_or(false)
}

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

/// Raw features `[frames, dim]` of `id` from a store.
fn store_features(store: &FeatureStoreReader, id: &str) -> anyhow::Result<(Vec<f32>, usize)> {
    let f = store.get(id)?.with_context(|| {
        format!("no teacher features for utterance {id}; rerun `voxspec teacher extract`")
    })?;
    Ok((f.data, f.dim))
}

/// Features (raw) and log-mel of a split.
fn load_split(
    utterances: &[Utterance],
    config: &SoCodecConfig,
    store: &FeatureStoreReader,
    what: &str,
) -> anyhow::Result<Vec<(Vec<f32>, Vec<f32>)>> {
    let front = config.log_mel()?;
    let bar = Bar::with_len(utterances.len() as u64, what);
    let out = utterances
        .par_iter()
        .map(|u| {
            let (features, dim) = store_features(store, &u.id)?;
            anyhow::ensure!(
                dim == config.feature_dim,
                "utterance {}: {dim}-d teacher features, the codec reads {}",
                u.id,
                config.feature_dim
            );
            let samples = read_audio(Path::new(&u.path), config.mel.sample_rate)
                .with_context(|| format!("utterance {}", u.id))?;
            bar.inc(1);
            Ok((features, front.compute(&samples)))
        })
        .collect::<anyhow::Result<Vec<_>>>();
    bar.finish();
    out
}

fn open_store(dir: &Path, split: &str) -> anyhow::Result<FeatureStoreReader> {
    FeatureStoreReader::open(dir, split)
        .with_context(|| format!("opening the {split} teacher features in {}", dir.display()))
}

pub(crate) fn train(args: TrainArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.train.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(args.segment > 0.0, "--segment must be positive");
    let train = read_split(&args.data, "train", true)?;
    anyhow::ensure!(
        !train.is_empty(),
        "{} has no utterances",
        args.data.join("train.jsonl").display()
    );
    let dev = read_split(&args.data, "dev", false)?;
    let start = voxspec_train::open_run::<RunFile>(&args.out, "codec", args.train.resume)?;
    let (run, resumed) = if let voxspec_train::RunStart::Resume(run) = start {
        (run, true)
    } else {
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
        let run = RunFile {
            kind: CodecKind::Socodec,
            teacher_features: features,
            task,
        };
        (run, false)
    };
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
    let train_raw = load_split(&train, &model, &store, "train features + mel")?;
    if !resumed {
        let (mean, std) = column_stats(
            train_raw.iter().map(|(f, _)| f.as_slice()),
            model.feature_dim,
        );
        let (mel_mean, mel_std) = column_stats(
            train_raw.iter().map(|(_, m)| m.as_slice()),
            model.mel.n_mels,
        );
        model = model
            .with_feature_mean(mean)
            .with_feature_std(std)
            .with_mel_mean(mel_mean)
            .with_mel_std(mel_std);
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
    let to_utts = |raw: Vec<(Vec<f32>, Vec<f32>)>| -> Vec<SoCodecUtterance> {
        raw.into_iter()
            .map(|(mut features, mut log_mel)| {
                model.normalize(&mut features);
                model.normalize_mel(&mut log_mel);
                SoCodecUtterance { features, log_mel }
            })
            .collect()
    };
    let train_utts = to_utts(train_raw);
    let dev_utts = match (dev.is_empty(), open_store(&run.teacher_features, "dev")) {
        (false, Ok(dev_store)) => {
            to_utts(load_split(&dev, &model, &dev_store, "dev features + mel")?)
        }
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
    let stop = Arc::new(AtomicBool::new(false));
    install_ctrl_c(stop.clone())?;
    let trainer =
        Trainer::new(args.train.config(5.0), task, &args.out, &device).with_stop_flag(stop);
    let started = Instant::now();
    let mut observer = crate::codec_cmd::CodecBar(StepBar::new(args.train.steps));
    let outcome = trainer.run(&mut observer)?;
    observer.0.bar.finish_and_clear();
    let seconds = started.elapsed().as_secs_f64();
    let codec = outcome.model.generator.valid();
    save_socodec(&args.out, &model, &codec)?;
    if outcome.stopped {
        println!(
            "stopped at step {} after {seconds:.0} s; continue with --resume",
            outcome.step
        );
    } else {
        println!("trained {} steps in {seconds:.0} s", outcome.step);
    }
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
    crate::codec_cmd::write_codes(&args.out, &codes, meta)?;
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
    let (n_q, frames, data, samples) = crate::codec_cmd::read_codes(&args.input)?;
    anyhow::ensure!(
        (1..=model.n_streams()).contains(&n_q) && frames > 0,
        "{}: tokens [{n_q}, {frames}] do not fit the codec ({} streams)",
        args.input.display(),
        model.n_streams()
    );
    let vocab = model.stream_vocab() as i64;
    if let Some(bad) = data.iter().find(|&&c| !(0..vocab).contains(&c)) {
        anyhow::bail!(
            "{}: token {bad} is outside a stream's vocabulary [0, {vocab})",
            args.input.display()
        );
    }
    let keep = args.streams.unwrap_or(n_q);
    anyhow::ensure!(
        (1..=n_q).contains(&keep),
        "--streams {keep}: the file holds streams 1..={n_q}"
    );
    let tokens: Vec<Vec<u32>> = (0..keep)
        .map(|s| {
            data[s * frames..(s + 1) * frames]
                .iter()
                .map(|&u| u as u32)
                .collect()
        })
        .collect();
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
        let done = crate::codec_cmd::stored_ids(&args.out, split, meta)?;
        let mut writer = TokenStoreWriter::new(&args.out, split, meta, args.shard_frames)?;
        let bar = Bar::with_len(utterances.len() as u64, split);
        let mut written = 0usize;
        // Shifted grids for the training split only: dev and test keep the one grid they are
        // scored on.
        let shifts = if split == "train" {
            args.phase_shifts
        } else {
            1
        };
        for u in &utterances {
            let ids: Vec<(usize, String)> = (0..shifts)
                .map(|s| match s {
                    0 => (0, u.id.clone()),
                    s => (
                        s,
                        crate::phase_shift::shifted_id(&u.id, (s * config.feature_ms) as u32),
                    ),
                })
                .filter(|(_, id)| !done.contains(id))
                .collect();
            if ids.is_empty() {
                bar.inc(1);
                continue;
            }
            let (f, dim) = store_features(&store, &u.id)?;
            for (s, id) in ids {
                let Some(shifted) = f.get(s * dim..).filter(|x| !x.is_empty()) else {
                    continue; // shorter than the shift
                };
                let mut tokens = model
                    .encode_features(&config, shifted, &device)
                    .with_context(|| format!("encoding utterance {id}"))?;
                tokens.truncate(n_q);
                let frames = tokens[0].len();
                writer.push(&id, Codes::new(n_q, frames, tokens.concat())?)?;
                written += 1;
            }
            bar.inc(1);
        }
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

/// Scores of one row (original, vocoder on the original mel, or the first b streams).
#[derive(Debug, Default, Serialize)]
struct RowScore {
    name: String,
    streams: Option<usize>,
    mcd_db: f64,
    cer: f64,
    forced_choice: f64,
    /// The independent recogniser (`tools/asr_judge.py`) on the same audio, when set up.
    asr: Option<voxspec_tts::AsrScore>,
    #[serde(skip)]
    errors: ErrorCounts,
    #[serde(skip)]
    identified: usize,
    #[serde(skip)]
    mcd_sum: f64,
}

impl RowScore {
    /// The folder of this row's audio under --save-audio (and the judge's scratch folder).
    fn folder(&self) -> String {
        self.streams.map_or_else(
            || self.name.replace(['(', ')', ' '], "_"),
            |b| format!("b{b}"),
        )
    }
}

#[derive(Debug, Serialize)]
struct SoEvalReport {
    codec: PathBuf,
    vocoder: Option<PathBuf>,
    teacher: PathBuf,
    split: String,
    utterances: usize,
    audio_seconds: f64,
    streams: usize,
    frame_ms: usize,
    quantizer: QuantizerKind,
    forced_choice_candidates: usize,
    forced_choice_chance: f64,
    rows: Vec<RowScore>,
}

/// `codec eval` for a SoCodec: each test utterance is encoded (features from the CTC teacher
/// run on its audio), and decoded from the first b streams for b = 1..S with the utterance's
/// own voice; rows for the original and for the vocoder on the original mel (the renderer's
/// ceiling). MCD against the original, CTC-teacher CER and forced choice.
pub(crate) fn eval(
    args: &crate::codec_eval::EvalArgs,
    vocoder: &Path,
    griffin_lim: bool,
) -> anyhow::Result<()> {
    let device = crate::device::single()?;
    let (config, model) = load(&args.codec, &device)?;
    let teacher = feature_teacher(&args.teacher, &config, &device)?;
    let manifest = args.data.join(format!("{}.jsonl", args.split));
    let mut utterances =
        read_manifest(&manifest).with_context(|| format!("reading the {} manifest", args.split))?;
    let set = ForcedChoice::new(
        teacher.tokenizer(),
        utterances.iter().map(|u| u.text.as_str()),
        LengthNorm::default(),
    )
    .with_context(|| format!("the candidate sentences of {}", manifest.display()))?;
    let set_texts: Vec<String> = utterances.iter().map(|u| u.text.clone()).collect();
    if let Some(n) = args.max_utts {
        utterances.truncate(n);
    }
    anyhow::ensure!(
        !utterances.is_empty(),
        "{} has no utterances",
        manifest.display()
    );
    let rate = config.mel.sample_rate;
    anyhow::ensure!(
        teacher.sample_rate() == rate,
        "the teacher reads {} Hz audio, the codec's mel is at {rate} Hz",
        teacher.sample_rate()
    );
    let render = renderer(vocoder, griffin_lim, &config, &device)?;
    let front = config.log_mel()?;
    let mcd = McdConfig::new().init(rate)?;
    let s = config.streams;
    let mut rows: Vec<RowScore> = std::iter::once(("original".to_string(), None))
        .chain(std::iter::once(("vocoder(original mel)".to_string(), None)))
        .chain((1..=s).map(|b| (format!("first {b} stream(s)"), Some(b))))
        .map(|(name, streams)| RowScore {
            name,
            streams,
            ..Default::default()
        })
        .collect();
    let asr = args.asr.judge()?;
    // The independent judge reads every clip with its transcript from a folder per row.
    let judge_dir = asr.as_ref().map(|_| {
        args.save_audio
            .clone()
            .unwrap_or_else(|| args.out.with_extension("audio"))
    });
    let bar = Bar::with_len(utterances.len() as u64, "SoCodec eval");
    let mut seconds = 0.0;
    for u in &utterances {
        let original =
            read_audio(Path::new(&u.path), rate).with_context(|| format!("utterance {}", u.id))?;
        let original_audio = voxspec_audio::Audio::new(original.clone(), rate);
        seconds += original.len() as f64 / f64::from(rate);
        let features = teacher_features(&teacher, &original)?;
        let tokens = model.encode_features(&config, &features, &device)?;
        let voice = model
            .voice(&config, &original, &device)
            .with_context(|| format!("the voice of utterance {}", u.id))?;
        let mel = front.compute(&original);
        let mut waves = vec![
            original.clone(),
            render.render(&mel, mel.len() / config.mel.n_mels)?,
        ];
        for b in 1..=s {
            let (m, frames) = model.decode_tokens(&config, &tokens[..b], voice.clone(), &device)?;
            let mut w = render.render(&m, frames)?;
            w.truncate(original.len());
            waves.push(w);
        }
        if let Some(dir) = judge_dir.as_ref().or(args.save_audio.as_ref()) {
            for (row, w) in rows.iter().zip(&waves) {
                let sub = dir.join(row.folder());
                std::fs::create_dir_all(&sub)
                    .with_context(|| format!("creating {}", sub.display()))?;
                voxspec_audio::write_wav(
                    &sub.join(format!("{}.wav", u.id)),
                    &voxspec_audio::Audio::new(w.clone(), rate),
                    voxspec_audio::WavFormat::Pcm16,
                )?;
                if judge_dir.is_some() {
                    voxspec_data::write_atomic(
                        &sub.join(format!("{}.txt", u.id)),
                        u.text.as_bytes(),
                    )?;
                }
            }
        }
        let own = set
            .position(teacher.tokenizer(), &u.text)?
            .with_context(|| format!("utterance {} is not a candidate", u.id))?;
        let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
        let verdicts = teacher.forced_choice(&set, &refs, &vec![own; refs.len()])?;
        for (i, (row, v)) in rows.iter_mut().zip(verdicts).enumerate() {
            row.errors += v.errors;
            row.identified += usize::from(v.choice.identified);
            if i > 0 {
                row.mcd_sum += mcd
                    .distortion(
                        &original_audio,
                        &voxspec_audio::Audio::new(waves[i].clone(), rate),
                    )?
                    .db;
            }
        }
        bar.inc(1);
    }
    bar.finish();
    if let (Some(judge), Some(dir)) = (&asr, &judge_dir) {
        let candidates = dir.join("candidates.txt");
        crate::asr_judge::write_candidates(&candidates, set_texts.iter().map(String::as_str))?;
        for row in &mut rows {
            let name = row.folder();
            eprintln!("independent recogniser: {}", row.name);
            row.asr = Some(judge.score_dir(
                &dir.join(&name),
                &candidates,
                &dir.join(format!("{name}.asr.json")),
                rayon::current_num_threads(),
            )?);
        }
    }
    let n = utterances.len() as f64;
    for row in &mut rows {
        row.cer = row.errors.rate();
        row.forced_choice = row.identified as f64 / n;
        row.mcd_db = row.mcd_sum / n;
    }
    println!(
        "\n{} utterances, {seconds:.1} s; SoCodec {} streams at {} ms ({:?})\n",
        utterances.len(),
        s,
        config.frame_ms,
        config.quantizer
    );
    println!("| audio | MCD (dB) | CER (%) | ID (%) | WER, ASR (%) | ID, ASR (%) |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, row) in rows.iter().enumerate() {
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
        set.len(),
        100.0 * set.chance()
    );
    let report = SoEvalReport {
        codec: args.codec.clone(),
        vocoder: (!griffin_lim).then(|| vocoder.to_path_buf()),
        teacher: args.teacher.clone(),
        split: args.split.clone(),
        utterances: utterances.len(),
        audio_seconds: seconds,
        streams: s,
        frame_ms: config.frame_ms,
        quantizer: config.quantizer,
        forced_choice_candidates: set.len(),
        forced_choice_chance: set.chance(),
        rows,
    };
    voxspec_data::write_atomic(&args.out, &serde_json::to_vec_pretty(&report)?)?;
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

#[derive(Debug, Deserialize)]
struct ReadRow {
    name: String,
    streams: Option<usize>,
    mcd_db: f64,
    cer: f64,
    forced_choice: f64,
}

#[derive(Debug, Deserialize)]
struct ReadReport {
    quantizer: QuantizerKind,
    frame_ms: usize,
    utterances: usize,
    rows: Vec<ReadRow>,
}

pub(crate) fn plot_streams(args: StreamsPlotArgs) -> anyhow::Result<()> {
    use crate::plots::{DEFAULT_SIZE, LinePlot, Series, write_line_plot};
    anyhow::ensure!(
        args.labels.is_empty() || args.labels.len() == args.reports.len(),
        "{} --label for {} --report",
        args.labels.len(),
        args.reports.len()
    );
    let mut reports = Vec::new();
    for (i, path) in args.reports.iter().enumerate() {
        let bytes = std::fs::read(path).with_context(|| format!("reading {}", path.display()))?;
        let r: ReadReport = serde_json::from_slice(&bytes)
            .with_context(|| format!("{} is not a SoCodec `codec eval` report", path.display()))?;
        let label = args.labels.get(i).cloned().unwrap_or_else(|| {
            format!(
                "{} ({} ms)",
                format!("{:?}", r.quantizer).to_uppercase(),
                r.frame_ms
            )
        });
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
    let metric = |f: &dyn Fn(&ReadRow) -> f64| -> Vec<Series> {
        reports
            .iter()
            .map(|(label, r)| Series {
                label: label.clone(),
                points: r
                    .rows
                    .iter()
                    .filter_map(|row| row.streams.map(|b| (b as f64, f(row))))
                    .collect(),
            })
            .collect()
    };
    let plots: [(&str, &str, &str, Vec<Series>); 3] = [
        (
            "mcd",
            "MCD of the resynthesis from the first b streams",
            "MCD (dB)",
            metric(&|r| r.mcd_db),
        ),
        (
            "cer",
            "CTC-teacher CER from the first b streams",
            "CER (%)",
            metric(&|r| 100.0 * r.cer),
        ),
        (
            "id",
            "Forced-choice accuracy from the first b streams",
            "ID (%)",
            metric(&|r| 100.0 * r.forced_choice),
        ),
    ];
    let stem = args.out.to_string_lossy().to_string();
    for (suffix, title, y, series) in &plots {
        let path = PathBuf::from(format!("{stem}-{suffix}.png"));
        write_line_plot(
            &path,
            &LinePlot {
                title,
                x_label: "streams decoded (b)",
                y_label: y,
                series,
                log_y: false,
                size: DEFAULT_SIZE,
            },
        )?;
        println!("plot: {}", path.display());
    }
    Ok(())
}
