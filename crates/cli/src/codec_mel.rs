//! `voxspec codec train-mel`: the codes → log-mel decoder (`voxspec_codec::mel_decoder`)
//! through the one training loop.

use std::path::PathBuf;

use anyhow::Context;
use burn::module::Module;
use clap::Args;
use serde::{Deserialize, Serialize};
use voxspec_codec::mel_decoder::{
    MelData, MelDecoderConfig, MelDecoderTask, load_mel_split, save_mel_decoder,
};
use voxspec_data::{TextTokenizer, TokenStore};
use voxspec_train::Trainer;

use crate::common::load_vocoder;
use crate::progress::Bar;
use crate::train_loop::{self, DevLines, LoopArgs};

/// Train a codes → log-mel decoder for the RVQ codec: its codes rendered as the vocoder's
/// log-mel, which the vocoder (or Griffin-Lim) turns into samples.
///
/// A ConvNeXt network at the code rate (one embedding table per RVQ layer, summed), a
/// transposed convolution up to the mel rate and two more blocks there predict the log-mel of
/// the recording the codes came from; the loss is the L1 distance over the recording's frames.
/// Train it on the codec's own codes (`voxspec codec extract`) for resynthesis, or on the codes
/// synthesis hands it (`voxspec codec fill`: the recordings' RVQ-1 with layers 2..N from the
/// NAR model) for text-to-speech; --init continues from a trained decoder. With --phones the
/// decoder is also told each frame's phone (from the data's alignments and tokenizer.json;
/// at synthesis from the durations the aligned AR model speaks), so that the first RVQ layer
/// alone renders intelligible speech and synthesis skips the NAR.
///
/// Reads <DATA>/train.jsonl (dev.jsonl for validation) and the code shards of the same splits
/// in --codes. Writes into <OUT>: run.json at the start; metrics.jsonl and TensorBoard events
/// while training; checkpoint-NNNNNN/ every --checkpoint-every steps; at the end (or on Ctrl-C)
/// config.json ("kind": "mel_decoder") + model.safetensors, which `codec eval --mel-decoder`,
/// `synthesize --mel-decoder` and the server load. `--resume` continues from the newest
/// checkpoint with the saved settings.
#[derive(Debug, Args)]
#[command(mut_arg("batch", |a| a.default_value("16")))]
#[command(mut_arg("lr", |a| a.default_value("0.001")))]
pub struct TrainMelArgs {
    /// Prepared data directory (train.jsonl, optional dev.jsonl).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Token store of the codes to render (train and dev shards): `codec extract` or `codec
    /// fill` output.
    #[arg(long, value_name = "DIR")]
    codes: PathBuf,
    /// The vocoder that will render the log-mel; only its mel settings are read here.
    #[arg(
        long,
        value_name = "DIR",
        default_value = "checkpoints/vocoder-minitts"
    )]
    vocoder: PathBuf,
    /// Samples per code frame of the codec [default: the store's sample rate / frame rate at
    /// the vocoder's sample rate].
    #[arg(long, value_name = "N")]
    codec_hop: Option<usize>,
    /// RVQ layers read (the first N) [default: every layer of the store].
    #[arg(long, value_name = "N")]
    layers: Option<usize>,
    /// Backbone width.
    #[arg(long, default_value_t = 256)]
    dim: usize,
    /// ConvNeXt blocks at the code rate.
    #[arg(long, default_value_t = 4)]
    code_blocks: usize,
    /// ConvNeXt blocks at the mel rate.
    #[arg(long, default_value_t = 2)]
    mel_blocks: usize,
    /// Tell the decoder each frame's phone: reads <DATA>/tokenizer.json (phonemic) and every
    /// utterance's alignment; the tokenizer is copied into <OUT>.
    #[arg(long)]
    phones: bool,
    /// Seconds of codes per training crop (rounded down to whole frames).
    #[arg(long, default_value_t = 2.0)]
    segment: f64,
    /// Start from this trained mel decoder (its settings replace the size options).
    #[arg(long, value_name = "DIR")]
    init: Option<PathBuf>,
    /// Run directory (also the model directory at the end).
    #[arg(long, short, value_name = "DIR")]
    out: PathBuf,
    #[command(flatten, next_help_heading = "Training loop")]
    pub(crate) train: LoopArgs,
}

/// What `--resume` needs besides the checkpoint.
#[derive(Debug, Serialize, Deserialize)]
struct MelRun {
    model: MelDecoderConfig,
    segment_frames: usize,
    batch_size: usize,
    data_seed: u64,
}

pub fn train(args: TrainMelArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.train.batch > 0, "--batch must be at least 1");
    anyhow::ensure!(
        args.segment.is_finite() && args.segment > 0.0,
        "--segment must be positive"
    );
    let (train, dev) = crate::common::train_and_dev(&args.data)?;
    let store = TokenStore::open(&args.codes, "train")
        .with_context(|| format!("opening the train codes in {}", args.codes.display()))?;
    let meta = store.meta();
    let run = voxspec_train::resume_or_start(&args.out, "mel_decoder", args.train.resume, || {
        let model = match &args.init {
            Some(dir) => {
                voxspec_train::weights::read_model_config::<MelDecoderConfig>(
                    dir,
                    &[voxspec_codec::mel_decoder::MEL_DECODER_KIND],
                )?
                .1
            }
            None => {
                let vocoder = load_vocoder(&args.vocoder)?;
                let v = vocoder.config();
                let hop = match args.codec_hop {
                    Some(h) => h,
                    None => (v.sample_rate as f32 / meta.frame_rate).round() as usize,
                };
                let layers = args.layers.unwrap_or(meta.n_q);
                anyhow::ensure!(
                    (1..=meta.n_q).contains(&layers),
                    "--layers {layers}: the codes in {} have {} layers",
                    args.codes.display(),
                    meta.n_q
                );
                let phones = match args.phones {
                    true => Some(read_tokenizer(&args.data)?.vocab_size()),
                    false => None,
                };
                let c = MelDecoderConfig::for_vocoder(layers, meta.codebook_size as usize, hop, v)
                    .with_phones(phones)
                    .with_dim(args.dim)
                    .with_intermediate_dim(3 * args.dim)
                    .with_n_code_blocks(args.code_blocks)
                    .with_n_mel_blocks(args.mel_blocks);
                c.validate()?;
                c
            }
        };
        let frame_rate = model.mel.sample_rate as f64 / model.codec_hop as f64;
        anyhow::Ok(MelRun {
            segment_frames: ((args.segment * frame_rate).floor() as usize).max(1),
            model,
            batch_size: args.train.batch,
            data_seed: args.train.seed,
        })
    })?;
    let run = run.settings;
    let config = run.model.clone();
    let tokenizer = match config.phone_vocab() {
        0 => None,
        _ => {
            let tokenizer = read_tokenizer(&args.data)?;
            let copy = args.out.join(TOKENIZER_FILE);
            std::fs::copy(args.data.join(TOKENIZER_FILE), &copy)
                .with_context(|| format!("copying the tokenizer to {}", copy.display()))?;
            Some(tokenizer)
        }
    };
    let utterances = load_mel_split(
        &train,
        &store,
        &config,
        tokenizer.as_ref(),
        &Bar::new(),
        "train audio",
    )?;
    let data = MelData::new(
        utterances,
        &config,
        run.segment_frames,
        run.batch_size,
        run.data_seed,
    )?;
    let n_train = data.len();
    let mut task = MelDecoderTask::new(config.clone(), data);
    if let (Some(dir), false) = (&args.init, args.train.resume) {
        task = task.with_init(dir.join(voxspec_train::weights::WEIGHTS_FILE));
    }
    let mut n_dev = 0;
    if !dev.is_empty() {
        let store = TokenStore::open(&args.codes, "dev")
            .with_context(|| format!("opening the dev codes in {}", args.codes.display()))?;
        let utterances = load_mel_split(
            &dev,
            &store,
            &config,
            tokenizer.as_ref(),
            &Bar::new(),
            "dev audio",
        )?;
        n_dev = utterances.len();
        task = task.with_valid(MelData::new(
            utterances,
            &config,
            run.segment_frames,
            run.batch_size,
            run.data_seed,
        )?);
    }
    println!(
        "mel decoder: {} RVQ layers of {} codes → {} mels ({} per code frame), width {}; \
         {} phone ids; train {n_train} utterances, dev {n_dev}; crops of {} frames, batch {}",
        config.n_q,
        config.codebook_size,
        config.mel.n_mels,
        config.upsample(),
        config.dim,
        config.phone_vocab(),
        run.segment_frames,
        run.batch_size
    );
    let device = voxspec_train::device::single()?;
    let trainer = Trainer::new(args.train.config(5.0), task, &args.out, &device);
    let finished = train_loop::run(trainer, args.train.steps, DevLines::Loss)?;
    save_mel_decoder(&args.out, &config, &finished.outcome.model.valid())?;
    println!("mel decoder: {}", args.out.display());
    Ok(())
}

/// The tokenizer a mel decoder with a phone input keeps beside its weights.
const TOKENIZER_FILE: &str = "tokenizer.json";

/// `<data>/tokenizer.json`, which must be phonemic to place phones.
fn read_tokenizer(data: &std::path::Path) -> anyhow::Result<TextTokenizer> {
    let path = data.join(TOKENIZER_FILE);
    let tokenizer =
        TextTokenizer::load(&path).with_context(|| format!("reading {}", path.display()))?;
    anyhow::ensure!(
        tokenizer.is_phonemic(),
        "--phones: {} is not a phonemic tokenizer; the phones come from the alignments",
        path.display()
    );
    Ok(tokenizer)
}
