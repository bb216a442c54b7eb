//! `voxspec codec eval`: resynthesis quality of a codec on a split of a prepared corpus
//! (computed by `voxspec_eval::codec`, and `voxspec_eval::socodec` for a SoCodec) —
//! mel-cepstral distortion of the full and the RVQ-1-only reconstruction, and the CTC
//! teacher's character error rate and forced-choice sentence identification (among every
//! transcript of the split) on the original and both reconstructions.

use voxspec_codec::VoicedScore;
use voxspec_eval::codec::AsrRows;
use voxspec_eval::{CodecEvalSettings, EvalSplit, evaluate_codec, write_report};
use voxspec_teacher::SemanticTeacher;
use voxspec_tts::AsrScore;

use crate::codec_args::EvalArgs;
use crate::common::{load_codec, load_ctc_teacher};
use crate::progress::Bar;

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.max_utts != Some(0), "--max-utts must be at least 1");
    let device = crate::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    let split = EvalSplit::read(&args.data, &args.split, args.max_utts, &teacher)?;
    let judge = args.asr.judge()?;
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
    println!(
        "\n{} utterances, {:.1} s of audio\n",
        report.utterances, report.audio_seconds
    );
    let asr_cells = |pick: fn(&AsrRows) -> &AsrScore| match &report.asr {
        Some(rows) => {
            let a = pick(rows);
            format!(
                "{:.1} | {:.1} ± {:.1}",
                100.0 * a.wer,
                100.0 * a.forced_choice,
                100.0 * a.forced_choice_se
            )
        }
        None => "– | –".into(),
    };
    let voiced_cells = |v: &VoicedScore| {
        format!(
            "{:.2} | {:.0} | {:.1} | {:.1}",
            v.mcd_db,
            v.f0_rmse_cents,
            100.0 * v.gross_f0_error,
            100.0 * v.vuv_error
        )
    };
    println!(
        "| audio | MCD (dB) | MCD voiced (dB) | F0 RMSE (cents) | F0 gross (%) | V/UV error (%) \
         | CER, CTC (%) | ID, CTC (%) | WER, ASR (%) | ID, ASR (%) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    println!(
        "| original | – | – | – | – | – | {:.2} | {:.1} | {} |",
        100.0 * report.cer_original,
        100.0 * report.forced_choice_original,
        asr_cells(|r| &r.original)
    );
    println!(
        "| codec, all {} RVQ layers | {:.2} | {} | {:.2} | {:.1} | {} |",
        report.n_q,
        report.mcd_full_db,
        voiced_cells(&report.voiced_full),
        100.0 * report.cer_full,
        100.0 * report.forced_choice_full,
        asr_cells(|r| &r.full)
    );
    println!(
        "| codec, RVQ-1 only | {:.2} | {} | {:.2} | {:.1} | {} |",
        report.mcd_rvq1_db,
        voiced_cells(&report.voiced_rvq1),
        100.0 * report.cer_rvq1,
        100.0 * report.forced_choice_rvq1,
        asr_cells(|r| &r.rvq1)
    );
    println!(
        "\nID: forced-choice sentence identification among all {} transcripts of the split; \
         chance = {:.1} %.",
        report.forced_choice_candidates,
        100.0 * report.forced_choice_chance
    );
    write_report(&args.out, &report)?;
    if let Some(dir) = &args.save_audio {
        println!("\naudio: {}", dir.display());
    }
    println!("\nreport: {}", args.out.display());
    Ok(())
}
