//! `voxspec codec train | encode | decode | extract | eval`: the SpeechTokenizer codec through
//! the one training loop, single-file encoding/decoding, token stores of a prepared corpus, and
//! resynthesis quality (`eval`, in `codec_eval.rs`).
//!
//! A codec model directory holds `config.json` (`"kind": "speechtokenizer"`, the model config
//! under `model`) and `model.safetensors` (tensor names = module paths), loaded strictly: a
//! config that does not match its weights fails naming every tensor and shape that differs.

use anyhow::Context;
use burn::module::Module;
use clap::Subcommand;
use voxspec_codec::SpeechTokenizer;
use voxspec_codec::speechtokenizer::prepare::{
    codes_meta, decode_codes, encode_codes, extract_codes,
};
use voxspec_codec::speechtokenizer::run::{CodecRunFile, CodecRunOptions};
use voxspec_data::{Progress, TokenStore, TokenStoreMeta, TokenStoreWriter};
use voxspec_train::Trainer;

use crate::codec_args::{CodecKind, DecodeArgs, EncodeArgs, ExtractArgs, TrainArgs};
use crate::common::{is_socodec, load_codec, read_audio};
use crate::progress::Bar;
use crate::train_loop::{self, DevLines};

/// The codec subcommands (each one's help comes from its arguments' documentation).
#[derive(Debug, Subcommand)]
pub enum CodecCommand {
    Train(TrainArgs),
    Encode(EncodeArgs),
    Decode(DecodeArgs),
    Extract(ExtractArgs),
    Fill(crate::codec_args::FillArgs),
    Eval(crate::codec_args::EvalArgs),
    TrainMel(crate::codec_mel::TrainMelArgs),
    PlotStreams(crate::socodec_cmd::StreamsPlotArgs),
}

pub fn run(cmd: CodecCommand) -> anyhow::Result<()> {
    match cmd {
        CodecCommand::Train(args) if args.kind == CodecKind::Socodec => {
            anyhow::ensure!(
                !args.decoder_only,
                "--decoder-only is for the SpeechTokenizer-style codec, not --kind socodec"
            );
            crate::socodec_cmd::train(args)
        }
        CodecCommand::Train(args) => train(args),
        CodecCommand::Encode(args) if is_socodec(&args.codec) => crate::socodec_cmd::encode(args),
        CodecCommand::Encode(args) => encode(args),
        CodecCommand::Decode(args) if is_socodec(&args.codec) => crate::socodec_cmd::decode(args),
        CodecCommand::Decode(args) => decode(args),
        CodecCommand::Extract(args) if is_socodec(&args.codec) => crate::socodec_cmd::extract(args),
        CodecCommand::Extract(args) => extract(args),
        CodecCommand::Fill(args) => fill(args),
        CodecCommand::Eval(args) if is_socodec(&args.codec) => {
            anyhow::ensure!(
                args.mel_decoder.is_none(),
                "--mel-decoder renders the RVQ codec's codes; {} is a SoCodec, whose own decoder \
                 makes the log-mel",
                args.codec.display()
            );
            crate::socodec_cmd::eval(&args)
        }
        CodecCommand::Eval(args) => crate::codec_eval::run(args),
        CodecCommand::TrainMel(args) => crate::codec_mel::train(args),
        CodecCommand::PlotStreams(args) => crate::socodec_cmd::plot_streams(args),
    }
}

fn train(args: TrainArgs) -> anyhow::Result<()> {
    let (train, dev) = crate::common::train_and_dev(&args.data)?;
    let options = CodecRunOptions {
        preset: args.preset,
        init: args.init.clone(),
        teacher_features: args.teacher_features.clone(),
        decoder_codes: args.decoder_codes.clone(),
        segment_seconds: args.segment,
        batch_size: args.train.batch,
        seed: args.train.seed,
        adversarial: args.adversarial,
        decoder_only: args.decoder_only,
    };
    let run = voxspec_train::resume_or_start(&args.out, "codec", args.train.resume, || {
        CodecRunFile::new(&options)
    })?;
    if run.resumed && run.settings.preset != args.preset {
        tracing::warn!(saved = ?run.settings.preset, given = ?args.preset,
            "--preset ignored: resuming with the run's saved model");
    }
    let run = run.settings;
    let model_config = run.task.model.clone();
    let device = voxspec_train::device::single()?;
    let task = run.task((&train, &dev), (&Bar::new(), &Bar::new()), &device)?;
    if let Some(dir) = &run.init {
        println!("starting from the codec {}", dir.display());
    }
    let mut config = args.train.config(5.0);
    config.freeze = task.freeze_patterns();
    if !config.freeze.is_empty() {
        println!("training the decoder only: the encoder and the codebooks stay frozen");
    }
    let trainer = Trainer::new(config, task, &args.out, &device);
    let finished = train_loop::run(trainer, args.train.steps, DevLines::Terms)?;
    let model = finished.outcome.model.generator.valid();
    voxspec_codec::save_codec(&args.out, &model_config, &model)?;
    println!(
        "codec: {} ({} × {} codes at {} Hz)",
        args.out.display(),
        model_config.n_q,
        model_config.codebook_size,
        model_config.frame_rate()
    );
    Ok(())
}

fn check_n_q(n_q: Option<usize>, model: &SpeechTokenizer) -> anyhow::Result<usize> {
    let all = model.n_q();
    let n = n_q.unwrap_or(all);
    anyhow::ensure!(
        (1..=all).contains(&n),
        "--n-q {n}: the codec has RVQ layers 1..={all}"
    );
    Ok(n)
}

fn encode(args: EncodeArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let n_q = check_n_q(args.n_q, &model)?;
    let samples = read_audio(&args.input, config.sample_rate)?;
    let codes = encode_codes(&model, &samples, n_q, &device)
        .with_context(|| format!("encoding {}", args.input.display()))?;
    let meta = codes_meta(&config, samples.len());
    voxspec_data::write_codes_file(&args.out, &codes, meta)?;
    println!(
        "{}: {} samples at {} Hz → codes [{}, {}] → {}",
        args.input.display(),
        samples.len(),
        config.sample_rate,
        codes.n_q,
        codes.n_frames,
        args.out.display()
    );
    Ok(())
}

fn decode(args: DecodeArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let file = voxspec_data::read_codes_file(&args.input)?;
    let samples = file.samples();
    let (n_q, frames) = (file.n_q, file.n_frames);
    let mut out = decode_codes(&model, &config, (n_q, frames, file.data), &device)
        .with_context(|| format!("decoding {}", args.input.display()))?;
    if let Some(n) = samples {
        out.truncate(n);
    }
    let n = out.len();
    let audio = voxspec_audio::Audio::new(out, config.sample_rate);
    voxspec_audio::write_wav(&args.out, &audio, args.format.into())?;
    println!(
        "{}: codes [{n_q}, {frames}] → {n} samples at {} Hz → {}",
        args.input.display(),
        config.sample_rate,
        args.out.display()
    );
    Ok(())
}

fn extract(args: ExtractArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.phase_shifts == 1,
        "--phase-shifts is for SoCodec-style codecs (frames longer than their teacher's); {} is \
         a SpeechTokenizer-style codec",
        args.codec.display()
    );
    let device = voxspec_train::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let n_q = check_n_q(args.n_q, &model)?;
    let rate = config.sample_rate;
    let hop = config.hop_length();
    let meta = TokenStoreMeta {
        n_q,
        codebook_size: u32::try_from(config.codebook_size)
            .context("the codebook size does not fit 32 bits")?,
        frame_rate: config.frame_rate(),
    };
    println!(
        "codec {}: {n_q} × {} codes at {} Hz (hop {hop} at {rate} Hz)",
        args.codec.display(),
        config.codebook_size,
        meta.frame_rate
    );
    for crate::prepare::SplitManifest {
        name: split,
        path: _,
        utterances,
    } in crate::prepare::split_manifests(&args.data, &args.splits)?
    {
        let split = split.as_str();
        let done = voxspec_data::token_store::stored_ids(&args.out, split, meta)?;
        let mut writer = TokenStoreWriter::new(&args.out, split, meta, args.shard_frames)?;
        let todo = utterances.iter().filter(|u| !done.contains(&u.id)).count();
        let bar = Bar::with_len(todo as u64, split);
        let (written, frames) = extract_codes(
            &model,
            &config,
            &utterances,
            (n_q, args.batch),
            &done,
            &mut writer,
            &bar,
            &device,
        )?;
        writer.finish()?;
        bar.finish();
        let kept = utterances.len() - written;
        println!("{split}: {written} utterances written ({frames} frames), {kept} already there");
    }
    println!("tokens: {}", args.out.display());
    Ok(())
}

fn fill(args: crate::codec_args::FillArgs) -> anyhow::Result<()> {
    let exp = &args.models.exp;
    let tokens = args.tokens.clone().unwrap_or_else(|| exp.join("tokens"));
    let data = args.data.clone().unwrap_or_else(|| exp.join("data"));
    anyhow::ensure!(!args.splits.is_empty(), "--splits names no split");
    if args.out.exists() && std::fs::read_dir(&args.out)?.next().is_some() {
        anyhow::bail!(
            "{} is not empty: fill into a new directory",
            args.out.display()
        );
    }
    let device = voxspec_train::device::single()?;
    let paths = args.models.paths();
    let pipeline = voxspec_tts::Pipeline::load(&paths, &device)?;
    println!(
        "NAR {} fills RVQ layers 2..N of the recordings' codes in {}",
        paths.nar.display(),
        tokens.display()
    );
    for split in &args.splits {
        let utterances = voxspec_data::read_split(&data, split)?;
        let store = TokenStore::open(&tokens, split)
            .with_context(|| format!("opening the {split} codes in {}", tokens.display()))?;
        let report = pipeline.fill_split(&utterances, &store, &args.out, split, &Bar::new())?;
        let equal: Vec<String> = report.equal.iter().map(|e| format!("{e:.3}")).collect();
        println!(
            "{split}: {} utterances ({} frames); code equal to the recording's, per layer: {}",
            report.utterances,
            report.frames,
            equal.join(" ")
        );
    }
    println!("tokens: {}", args.out.display());
    Ok(())
}
