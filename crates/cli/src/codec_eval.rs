//! `voxspec codec eval`: resynthesis quality of a codec on a split of a prepared corpus —
//! mel-cepstral distortion of the full and the RVQ-1-only reconstruction, and the CTC
//! teacher's character error rate and forced-choice sentence identification (among every
//! transcript of the split) on the original and both reconstructions.

use std::path::{Path, PathBuf};

use anyhow::Context;
use burn::tensor::Device;
use clap::Args;
use serde::Serialize;
use voxspec_audio::{Audio, PitchConfig, WavFormat};
use voxspec_codec::{McdConfig, MelCepstralDistortion, VoicedMetrics, VoicedScore};
use voxspec_data::{Progress, Utterance, read_manifest};
use voxspec_teacher::ctc::{CtcTeacher, ForcedChoice, LengthNorm};
use voxspec_teacher::{ErrorCounts, SemanticTeacher};
use voxspec_tts::AsrScore;

use crate::asr_judge::AsrJudge;
use crate::codec_cmd::{load_codec, read_audio};
use crate::progress::Bar;
use crate::teacher_cmd::load_ctc_teacher;

/// One-line definition of the MCD written into the report.
pub(crate) const MCD_DEFINITION: &str = "MFCC-based MCD (not SPTK mcep): orthonormal DCT-II of natural-log \
    mel magnitude frames (25 ms Hann, 10 ms hop, 80 Slaney bands), c0 dropped, c1..=cK kept; \
    per frame (10/ln10)*sqrt(2*sum_k (c_ref-c_syn)^2) dB, averaged over index-aligned frames \
    (shorter signal), then over utterances";

/// Resynthesis quality of a codec on one split of a prepared corpus.
///
/// Every utterance of <DATA>/<SPLIT>.jsonl (at most --max-utts) is read at the codec's rate,
/// encoded with all RVQ layers and decoded twice: with all layers ("full") and with the first
/// quantizer's code vectors alone ("RVQ-1"). Reported: the mean mel-cepstral distortion (an
/// MFCC-based MCD, not SPTK's mcep: DCT-II of the log mel spectrogram, 25 ms window, 10 ms
/// hop, 80 bands, c1..c13, frames paired by index, mean over frames and then over utterances)
/// of both reconstructions against the original, and the CTC teacher's corpus character error
/// rate (total edits / total reference characters) on the original audio and on both
/// reconstructions, each resampled to the teacher's rate, and its forced-choice accuracy:
/// the fraction of utterances whose own transcript has the highest CTC likelihood among all
/// transcripts of the split (chance = 1 / split size; see `voxspec eval intelligibility`).
/// Prints a markdown table and writes a JSON report with per-utterance scores.
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Codec model directory (`voxspec codec train` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) codec: PathBuf,
    /// CTC teacher directory (`voxspec train ctc` output) that transcribes for the CER.
    #[arg(long, value_name = "DIR")]
    pub(crate) teacher: PathBuf,
    /// Prepared data directory (`voxspec prepare` output).
    #[arg(long, value_name = "DIR")]
    pub(crate) data: PathBuf,
    /// Split whose manifest <DATA>/<SPLIT>.jsonl is evaluated.
    #[arg(long, default_value = "test")]
    pub(crate) split: String,
    /// Evaluate at most this many utterances (the first of the manifest).
    #[arg(long, value_name = "N")]
    pub(crate) max_utts: Option<usize>,
    /// Where to write the JSON report.
    #[arg(long, short, value_name = "FILE", default_value = "codec-eval.json")]
    pub(crate) out: PathBuf,
    /// Also write WAVs (<ID>.reference.wav, <ID>.full.wav, <ID>.rvq1.wav, at the codec's
    /// rate) of the first --save-count utterances into this directory.
    #[arg(long, value_name = "DIR")]
    pub(crate) save_audio: Option<PathBuf>,
    /// Utterances whose audio --save-audio writes.
    #[arg(long, default_value_t = 3)]
    pub(crate) save_count: usize,
    /// SoCodec: the vocoder that renders the log-mel.
    #[arg(long, value_name = "DIR", default_value = crate::codec_cmd::DEFAULT_VOCODER)]
    pub(crate) vocoder: PathBuf,
    /// SoCodec: render with Griffin-Lim instead of the vocoder.
    #[arg(long)]
    pub(crate) griffin_lim: bool,
    #[command(flatten)]
    pub(crate) asr: crate::asr_judge::AsrArgs,
}

/// Scores of one utterance.
#[derive(Debug, Serialize)]
struct UtteranceScore {
    id: String,
    seconds: f64,
    mcd_full_db: f64,
    mcd_rvq1_db: f64,
    voiced_full: VoicedScore,
    voiced_rvq1: VoicedScore,
    reference: String,
    hypothesis_original: String,
    hypothesis_full: String,
    hypothesis_rvq1: String,
    cer_original: f64,
    cer_full: f64,
    cer_rvq1: f64,
    /// Forced-choice rank of the own transcript (1 = identified).
    rank_original: usize,
    rank_full: usize,
    rank_rvq1: usize,
}

/// The JSON report.
#[derive(Debug, Serialize)]
struct EvalReport {
    codec: PathBuf,
    teacher: PathBuf,
    manifest: PathBuf,
    split: String,
    utterances: usize,
    audio_seconds: f64,
    sample_rate: u32,
    teacher_sample_rate: u32,
    n_q: usize,
    frame_rate: f32,
    mcd_definition: &'static str,
    mcd_config: McdConfig,
    /// Mean over utterances of each utterance's mean per-frame MCD (dB).
    mcd_full_db: f64,
    mcd_rvq1_db: f64,
    /// Voiced frames (YIN on the original): MCD, F0 error, voicing error, pooled over frames.
    voiced_full: VoicedScore,
    voiced_rvq1: VoicedScore,
    /// Characters in the normalised references.
    reference_chars: usize,
    /// Corpus CERs (total edits / total reference characters).
    cer_original: f64,
    cer_full: f64,
    cer_rvq1: f64,
    /// Forced-choice candidates (every transcript of the split) and chance (1 / that).
    forced_choice_candidates: usize,
    forced_choice_chance: f64,
    /// Forced-choice accuracy: identified utterances / utterances.
    forced_choice_original: f64,
    forced_choice_full: f64,
    forced_choice_rvq1: f64,
    /// The independent recogniser (`tools/asr_judge.py`) on the original and both
    /// reconstructions, forced choice among the same candidates; absent when not set up.
    asr: Option<AsrRows>,
    per_utterance: Vec<UtteranceScore>,
}

/// The independent recogniser's scores of the three renderings.
#[derive(Debug, Serialize)]
struct AsrRows {
    original: AsrScore,
    full: AsrScore,
    rvq1: AsrScore,
}

/// One utterance's original and reconstructions at the codec's rate.
struct Resynthesis {
    reference: Audio,
    full: Audio,
    rvq1: Audio,
}

/// Encodes `samples` with every RVQ layer and decodes with all of them and with RVQ-1 alone,
/// both trimmed to the input length.
fn resynthesise(
    model: &voxspec_codec::SpeechTokenizer,
    samples: Vec<f32>,
    rate: u32,
    device: &Device,
) -> anyhow::Result<Resynthesis> {
    anyhow::ensure!(!samples.is_empty(), "the audio is empty");
    let mut outs = model.resynthesize(&samples, &[model.n_q(), 1], device)?;
    let (rvq1, full) = (outs.pop(), outs.pop());
    let (Some(full), Some(rvq1)) = (full, rvq1) else {
        anyhow::bail!("the codec returned fewer resyntheses than asked for");
    };
    Ok(Resynthesis {
        reference: Audio::new(samples, rate),
        full: Audio::new(full, rate),
        rvq1: Audio::new(rvq1, rate),
    })
}

/// `audio` at `rate` (unchanged when it already is).
pub(crate) fn at_rate(audio: &Audio, rate: u32) -> anyhow::Result<Vec<f32>> {
    if audio.sample_rate == rate {
        return Ok(audio.samples.clone());
    }
    voxspec_audio::resample(&audio.samples, audio.sample_rate, rate)
        .with_context(|| format!("resampling {} Hz to {rate} Hz", audio.sample_rate))
}

/// Scores one utterance: MCD of both reconstructions, teacher transcripts and forced choice
/// (own transcript = candidate `own` of `set`) of all three. Returns the scores, the character
/// errors and whether each was identified.
fn score(
    u: &Utterance,
    r: &Resynthesis,
    (mcd, voiced): (&MelCepstralDistortion, &VoicedMetrics),
    teacher: &CtcTeacher,
    (set, own): (&ForcedChoice, usize),
) -> anyhow::Result<(UtteranceScore, [ErrorCounts; 3], [bool; 3])> {
    let mcd_full = mcd.distortion(&r.reference, &r.full)?;
    let mcd_rvq1 = mcd.distortion(&r.reference, &r.rvq1)?;
    let rate = teacher.sample_rate();
    let original = voxspec_audio::load_resampled(Path::new(&u.path), rate)
        .with_context(|| format!("{} is not readable audio", u.path))?
        .samples;
    let full = at_rate(&r.full, rate)?;
    let rvq1 = at_rate(&r.rvq1, rate)?;
    let verdicts = teacher.forced_choice(set, &[&original, &full, &rvq1], &[own; 3])?;
    let [v_original, v_full, v_rvq1]: [_; 3] = verdicts
        .try_into()
        .map_err(|v: Vec<_>| anyhow::anyhow!("{} verdicts for 3 waveforms", v.len()))?;
    let reference = teacher.normalize(&u.text)?;
    let counts = [v_original.errors, v_full.errors, v_rvq1.errors];
    let identified = [&v_original, &v_full, &v_rvq1].map(|v| v.choice.identified);
    let ranks = [&v_original, &v_full, &v_rvq1].map(|v| v.choice.rank);
    let (hyp_original, hyp_full, hyp_rvq1) =
        (v_original.hypothesis, v_full.hypothesis, v_rvq1.hypothesis);
    Ok((
        UtteranceScore {
            id: u.id.clone(),
            seconds: r.reference.duration_secs(),
            mcd_full_db: mcd_full.db,
            mcd_rvq1_db: mcd_rvq1.db,
            voiced_full: voiced.score(&r.reference, &r.full)?,
            voiced_rvq1: voiced.score(&r.reference, &r.rvq1)?,
            reference,
            hypothesis_original: hyp_original,
            hypothesis_full: hyp_full,
            hypothesis_rvq1: hyp_rvq1,
            cer_original: counts[0].rate(),
            cer_full: counts[1].rate(),
            cer_rvq1: counts[2].rate(),
            rank_original: ranks[0],
            rank_full: ranks[1],
            rank_rvq1: ranks[2],
        },
        counts,
        identified,
    ))
}

/// Writes the three renderings of one utterance as `<dir>/{original,full,rvq1}/<id>.wav` with
/// the transcript in `<id>.txt` beside each: the independent judge's input.
fn save_for_judge(dir: &Path, u: &Utterance, r: &Resynthesis) -> anyhow::Result<()> {
    for (name, audio) in [
        ("original", &r.reference),
        ("full", &r.full),
        ("rvq1", &r.rvq1),
    ] {
        let sub = dir.join(name);
        std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
        voxspec_audio::write_wav(&sub.join(format!("{}.wav", u.id)), audio, WavFormat::Pcm16)?;
        voxspec_data::write_atomic(&sub.join(format!("{}.txt", u.id)), u.text.as_bytes())?;
    }
    Ok(())
}

/// Runs the independent judge on the three folders `save_for_judge` filled.
fn judge_renderings(judge: &AsrJudge, dir: &Path, texts: &[&str]) -> anyhow::Result<AsrRows> {
    let candidates = dir.join("candidates.txt");
    crate::asr_judge::write_candidates(&candidates, texts.iter().copied())?;
    let jobs = rayon::current_num_threads();
    let one = |name: &str| {
        judge.score_dir(
            &dir.join(name),
            &candidates,
            &dir.join(format!("{name}.asr.json")),
            jobs,
        )
    };
    Ok(AsrRows {
        original: one("original")?,
        full: one("full")?,
        rvq1: one("rvq1")?,
    })
}

fn save(dir: &Path, id: &str, r: &Resynthesis) -> anyhow::Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    for (name, audio) in [
        ("reference", &r.reference),
        ("full", &r.full),
        ("rvq1", &r.rvq1),
    ] {
        voxspec_audio::write_wav(
            &dir.join(format!("{id}.{name}.wav")),
            audio,
            WavFormat::Pcm16,
        )?;
    }
    Ok(())
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    if crate::socodec_cmd::is_socodec(&args.codec) {
        return crate::socodec_cmd::eval(&args, &args.vocoder, args.griffin_lim);
    }
    anyhow::ensure!(args.max_utts != Some(0), "--max-utts must be at least 1");
    let device = crate::device::single()?;
    let (config, model) = load_codec(&args.codec, &device)?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    let manifest = args.data.join(format!("{}.jsonl", args.split));
    let mut utterances =
        read_manifest(&manifest).with_context(|| format!("reading the {} manifest", args.split))?;
    // Forced choice among every transcript of the split, before --max-utts cuts it.
    let set = ForcedChoice::new(
        teacher.tokenizer(),
        utterances.iter().map(|u| u.text.as_str()),
        LengthNorm::default(),
    )
    .with_context(|| format!("the candidate sentences of {}", manifest.display()))?;
    let all_texts: Vec<String> = utterances.iter().map(|u| u.text.clone()).collect();
    if let Some(n) = args.max_utts {
        utterances.truncate(n);
    }
    anyhow::ensure!(
        !utterances.is_empty(),
        "{} has no utterances",
        manifest.display()
    );
    let rate = config.sample_rate;
    let mcd_config = McdConfig::new();
    let mcd = mcd_config.init(rate)?;
    let voiced = VoicedMetrics::new(mcd.clone(), PitchConfig::default())?;
    let judge = args.asr.judge()?;
    let judge_dir = match &judge {
        Some(_) => Some(tempfile::tempdir().context("making a temporary folder")?),
        None => None,
    };
    println!(
        "codec {}: {} × {} codes at {} Hz ({rate} Hz); teacher {} at {} Hz; {} {} utterances",
        args.codec.display(),
        model.n_q(),
        config.codebook_size,
        config.frame_rate(),
        args.teacher.display(),
        teacher.sample_rate(),
        utterances.len(),
        args.split
    );

    let bar = Bar::with_len(utterances.len() as u64, "codec eval");
    let mut scores = Vec::with_capacity(utterances.len());
    let mut totals = [ErrorCounts::default(); 3];
    let mut identified = [0usize; 3];
    for (i, u) in utterances.iter().enumerate() {
        let samples =
            read_audio(Path::new(&u.path), rate).with_context(|| format!("utterance {}", u.id))?;
        let r = resynthesise(&model, samples, rate, &device)
            .with_context(|| format!("resynthesising utterance {}", u.id))?;
        let own = set
            .position(teacher.tokenizer(), &u.text)?
            .with_context(|| format!("utterance {} is not a candidate", u.id))?;
        if let Some(dir) = &judge_dir {
            save_for_judge(dir.path(), u, &r)?;
        }
        let (s, counts, hits) = score(u, &r, (&mcd, &voiced), &teacher, (&set, own))
            .with_context(|| format!("scoring utterance {}", u.id))?;
        for (n, hit) in identified.iter_mut().zip(hits) {
            *n += usize::from(hit);
        }
        if let Some(dir) = &args.save_audio
            && i < args.save_count
        {
            save(dir, &u.id, &r)?;
        }
        for (t, c) in totals.iter_mut().zip(counts) {
            *t += c;
        }
        scores.push(s);
        bar.inc(1);
    }
    bar.finish();

    let n = scores.len() as f64;
    let asr = match (&judge, &judge_dir) {
        (Some(judge), Some(dir)) => {
            println!("independent recogniser: {}", judge.describe());
            let texts: Vec<&str> = all_texts.iter().map(String::as_str).collect();
            Some(judge_renderings(judge, dir.path(), &texts)?)
        }
        _ => None,
    };
    let pool = |f: fn(&UtteranceScore) -> VoicedScore| {
        VoicedScore::pool(&scores.iter().map(f).collect::<Vec<_>>())
    };
    let report = EvalReport {
        codec: args.codec.clone(),
        teacher: args.teacher.clone(),
        manifest,
        split: args.split.clone(),
        utterances: scores.len(),
        audio_seconds: scores.iter().map(|s| s.seconds).sum(),
        sample_rate: rate,
        teacher_sample_rate: teacher.sample_rate(),
        n_q: model.n_q(),
        frame_rate: config.frame_rate(),
        mcd_definition: MCD_DEFINITION,
        mcd_config,
        mcd_full_db: scores.iter().map(|s| s.mcd_full_db).sum::<f64>() / n,
        mcd_rvq1_db: scores.iter().map(|s| s.mcd_rvq1_db).sum::<f64>() / n,
        voiced_full: pool(|s| s.voiced_full),
        voiced_rvq1: pool(|s| s.voiced_rvq1),
        reference_chars: totals[0].reference_len,
        cer_original: totals[0].rate(),
        cer_full: totals[1].rate(),
        cer_rvq1: totals[2].rate(),
        forced_choice_candidates: set.len(),
        forced_choice_chance: set.chance(),
        forced_choice_original: identified[0] as f64 / n,
        forced_choice_full: identified[1] as f64 / n,
        forced_choice_rvq1: identified[2] as f64 / n,
        asr,
        per_utterance: scores,
    };
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
    voxspec_data::write_atomic(&args.out, &serde_json::to_vec_pretty(&report)?)?;
    if let Some(dir) = &args.save_audio {
        println!("\naudio: {}", dir.display());
    }
    println!("\nreport: {}", args.out.display());
    Ok(())
}
