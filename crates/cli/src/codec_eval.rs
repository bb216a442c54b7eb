//! `voxspec codec eval`: resynthesis quality of a codec on a split of a prepared corpus
//! (computed by `voxspec_eval::codec`, and `voxspec_eval::socodec` for a SoCodec) —
//! mel-cepstral distortion of the full and the RVQ-1-only reconstruction, and the CTC
//! teacher's character error rate and forced-choice sentence identification (among every
//! transcript of the split) on the original and both reconstructions.

use voxspec_eval::{CodecEvalSettings, EvalSplit, evaluate_codec, write_report};
use voxspec_teacher::SemanticTeacher;

use crate::codec_args::EvalArgs;
use crate::common::{load_codec, load_ctc_teacher};
use crate::progress::Bar;

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.max_utterances != Some(0),
        "--max-utterances must be at least 1"
    );
    let device = voxspec_train::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    let split = EvalSplit::read(&args.data, &args.split, args.max_utterances, &teacher)?;
    let judge = args.asr.judge()?;
    let mel = match &args.mel_decoder {
        Some(dir) => Some(
            voxspec_codec::MelSpeech::load(
                dir,
                (!args.griffin_lim).then_some(args.vocoder.as_path()),
                &device,
            )
            .map_err(|e| anyhow::anyhow!("loading the mel decoder {}: {e}", dir.display()))?,
        ),
        None => None,
    };
    println!(
        "codec {}: {} × {} codes at {} Hz ({} Hz); teacher {} at {} Hz; {} {} utterances",
        args.codec.display(),
        model.n_q(),
        config.codebook_size,
        config.frame_rate(),
        config.sample_rate,
        args.teacher.display(),
        teacher.sample_rate(),
        split.utterances.len(),
        args.split
    );
    if let Some(judge) = &judge {
        println!("independent recogniser: {}", judge.describe());
    }
    let settings = CodecEvalSettings {
        codec_dir: &args.codec,
        teacher_dir: &args.teacher,
        save_audio: args.save_audio.as_deref(),
        save_count: args.save_count,
        judge: judge.as_ref(),
        mel: mel.as_ref(),
    };
    let report = evaluate_codec(
        &model,
        &config,
        &teacher,
        &split,
        &settings,
        &Bar::new(),
        &device,
    )?;
    print!("{}", report.markdown());
    write_report(&args.out, &report)?;
    if let Some(dir) = &args.save_audio {
        println!("\naudio: {}", dir.display());
    }
    println!("\nreport: {}", args.out.display());
    Ok(())
}
