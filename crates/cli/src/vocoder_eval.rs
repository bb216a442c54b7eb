//! `voxspec vocoder eval`: analysis–resynthesis quality of a vocoder on a split of a prepared
//! corpus against Griffin-Lim on the same log-mel — mel-cepstral distortion (all and voiced
//! frames), F0 and voicing errors, the CTC teacher's character error rate and forced-choice
//! sentence identification, the independent recogniser's WER and forced choice, real-time
//! factors, and optionally the three sets of clips as directories `voxspec eval
//! intelligibility --dir` reads.

use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use voxspec_audio::{Audio, PitchConfig, WavFormat};
use voxspec_codec::{McdConfig, VocosConfig, VoicedMetrics, VoicedScore};
use voxspec_data::{Progress, Utterance, read_manifest};
use voxspec_teacher::ctc::{CtcTeacher, ForcedChoice, LengthNorm};
use voxspec_teacher::{ErrorCounts, SemanticTeacher};
use voxspec_tts::AsrScore;

use crate::codec_cmd::read_audio;
use crate::codec_eval::{MCD_DEFINITION, at_rate};
use crate::eval_cmd::DEFAULT_TEACHER;
use crate::progress::Bar;
use crate::teacher_cmd::load_ctc_teacher;
use crate::vocoder_cmd::{load_vocoder, resynthesize};

/// The three versions of each utterance, in report order.
const SYSTEMS: [&str; 3] = ["original", "vocoder", "griffin_lim"];

/// Resynthesis quality of a vocoder on one split of a prepared corpus, against Griffin-Lim.
///
/// Every utterance of <DATA>/<SPLIT>.jsonl (at most --limit) is read at the vocoder's rate, its
/// log-mel (the vocoder's mel settings) is turned back into a waveform by the vocoder and by
/// 32 iterations of fast Griffin-Lim on the pseudo-inverted mel, both trimmed to the input
/// length. Reported: the mean mel-cepstral distortion (the MFCC-based MCD of `codec eval`:
/// c1..c13 of an 80-band log mel, 25 ms window, 10 ms hop, frames paired by index) of both
/// against the original; the CTC teacher's corpus CER and its forced-choice accuracy (the
/// own transcript must score highest among all transcripts of the split; chance = 1 / split
/// size) on original, vocoder and Griffin-Lim audio; on frames voiced in the original (YIN),
/// the MCD, the RMS F0 error in cents and the voicing error (where frame-rate buzz and wrong
/// harmonics show); the independent recogniser's WER and forced choice when it is set up
/// (tools/setup_judge.sh); and each method's real-time factor.
/// Prints a markdown table, writes a JSON report with per-utterance scores and, with
/// --audio-dir, <AUDIO_DIR>/{original,vocoder,griffin_lim}/<ID>.wav with <ID>.txt transcripts
/// beside them (the layout `voxspec eval intelligibility --dir` reads).
#[derive(Debug, Args)]
pub struct EvalArgs {
    /// Vocoder model directory (`voxspec vocoder train` output).
    #[arg(long, value_name = "DIR")]
    vocoder: PathBuf,
    /// Prepared data directory (`voxspec prepare` output).
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Split whose manifest <DATA>/<SPLIT>.jsonl is evaluated.
    #[arg(long, default_value = "test")]
    split: String,
    /// Evaluate at most this many utterances (the first of the manifest).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// CTC teacher directory (`voxspec train ctc` output) for CER and forced choice.
    #[arg(long, value_name = "DIR", default_value = DEFAULT_TEACHER)]
    teacher: PathBuf,
    /// Where to write the JSON report.
    #[arg(long, short, value_name = "FILE", default_value = "vocoder-eval.json")]
    out: PathBuf,
    /// Write every clip (16-bit WAV at the vocoder's rate, plus its transcript) into
    /// <AUDIO_DIR>/original, <AUDIO_DIR>/vocoder and <AUDIO_DIR>/griffin_lim.
    #[arg(long, value_name = "DIR")]
    audio_dir: Option<PathBuf>,
    #[command(flatten)]
    asr: crate::asr_judge::AsrArgs,
}

/// Scores of one utterance.
#[derive(Debug, Serialize)]
struct UtteranceScore {
    id: String,
    seconds: f64,
    mcd_vocoder_db: f64,
    mcd_griffin_lim_db: f64,
    /// Voiced-frame scores of the vocoder and Griffin-Lim audio.
    voiced: [VoicedScore; 2],
    reference: String,
    /// Teacher transcripts of original, vocoder and Griffin-Lim audio.
    hypotheses: [String; 3],
    /// CERs of original, vocoder and Griffin-Lim audio.
    cer: [f64; 3],
    /// Forced-choice rank of the own transcript (1 = identified) for each.
    rank: [usize; 3],
}

/// Results of one system over the split.
#[derive(Debug, Serialize)]
struct SystemReport {
    /// Mean over utterances of the mean per-frame MCD (dB); `None` for the original.
    mcd_db: Option<f64>,
    /// Corpus CER (total edits / total reference characters).
    cer: f64,
    /// Forced-choice accuracy: identified utterances / utterances.
    forced_choice: f64,
    /// Seconds of computation per second of audio; `None` for the original.
    real_time_factor: Option<f64>,
    /// Frames voiced in the original, pooled over utterances; `None` for the original.
    voiced: Option<VoicedScore>,
    /// The independent recogniser's scores (when it ran).
    asr: Option<AsrScore>,
}

/// The JSON report.
#[derive(Debug, Serialize)]
struct EvalReport {
    vocoder: PathBuf,
    vocoder_config: VocosConfig,
    teacher: PathBuf,
    manifest: PathBuf,
    split: String,
    utterances: usize,
    audio_seconds: f64,
    sample_rate: u32,
    griffin_lim: &'static str,
    mcd_definition: &'static str,
    mcd_config: McdConfig,
    reference_chars: usize,
    forced_choice_candidates: usize,
    forced_choice_chance: f64,
    original: SystemReport,
    vocoder_resynthesis: SystemReport,
    griffin_lim_resynthesis: SystemReport,
    per_utterance: Vec<UtteranceScore>,
}

/// Teacher verdicts of the three versions: transcripts, character errors, ranks, identified.
type Verdicts = ([String; 3], [ErrorCounts; 3], [usize; 3], [bool; 3]);

fn judge(
    teacher: &CtcTeacher,
    set: &ForcedChoice,
    own: usize,
    versions: &[Audio; 3],
) -> anyhow::Result<Verdicts> {
    let rate = teacher.sample_rate();
    let waves = versions
        .iter()
        .map(|a| at_rate(a, rate))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
    let verdicts = teacher.forced_choice(set, &refs, &[own; 3])?;
    let [a, b, c]: [_; 3] = verdicts
        .try_into()
        .map_err(|v: Vec<_>| anyhow::anyhow!("{} verdicts for 3 waveforms", v.len()))?;
    let v = [a, b, c];
    Ok((
        v.clone().map(|v| v.hypothesis),
        v.clone().map(|v| v.errors),
        v.clone().map(|v| v.choice.rank),
        v.map(|v| v.choice.identified),
    ))
}

/// Writes `<dir>/<system>/<id>.wav` and `<id>.txt` for the three versions.
fn save(dir: &Path, u: &Utterance, versions: &[Audio; 3]) -> anyhow::Result<()> {
    for (system, audio) in SYSTEMS.iter().zip(versions) {
        let sub = dir.join(system);
        std::fs::create_dir_all(&sub).with_context(|| format!("creating {}", sub.display()))?;
        voxspec_audio::write_wav(&sub.join(format!("{}.wav", u.id)), audio, WavFormat::Pcm16)?;
        let txt = sub.join(format!("{}.txt", u.id));
        std::fs::write(&txt, format!("{}\n", u.text))
            .with_context(|| format!("writing {}", txt.display()))?;
    }
    Ok(())
}

pub fn run(args: EvalArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.limit != Some(0), "--limit must be at least 1");
    let device = crate::device::single()?;
    let vocoder = load_vocoder(&args.vocoder)?;
    let teacher = load_ctc_teacher(&args.teacher, &device)?;
    let manifest = args.data.join(format!("{}.jsonl", args.split));
    let mut utterances =
        read_manifest(&manifest).with_context(|| format!("reading the {} manifest", args.split))?;
    // Forced choice among every transcript of the split, before --limit cuts it.
    let set = ForcedChoice::new(
        teacher.tokenizer(),
        utterances.iter().map(|u| u.text.as_str()),
        LengthNorm::default(),
    )
    .with_context(|| format!("the candidate sentences of {}", manifest.display()))?;
    // The independent recogniser chooses among the same transcripts.
    let all_texts: Vec<String> = utterances.iter().map(|u| u.text.clone()).collect();
    if let Some(n) = args.limit {
        utterances.truncate(n);
    }
    anyhow::ensure!(
        !utterances.is_empty(),
        "{} has no utterances",
        manifest.display()
    );
    let config = vocoder.config().clone();
    let rate = config.sample_rate;
    let mcd_config = McdConfig::new();
    let mcd = mcd_config.init(rate)?;
    let voiced = VoicedMetrics::new(mcd.clone(), PitchConfig::default())?;
    let asr_judge = args.asr.judge()?;
    // The judge reads the clips from folders: --audio-dir, or a temporary one.
    let scratch = match (&asr_judge, &args.audio_dir) {
        (Some(_), None) => Some(tempfile::tempdir().context("making a temporary folder")?),
        _ => None,
    };
    let audio_dir: Option<PathBuf> = args
        .audio_dir
        .clone()
        .or_else(|| scratch.as_ref().map(|d| d.path().to_path_buf()));
    println!(
        "vocoder {}: {} mels, hop {} at {rate} Hz; teacher {} at {} Hz; {} {} utterances",
        args.vocoder.display(),
        config.n_mels,
        config.hop_length,
        args.teacher.display(),
        teacher.sample_rate(),
        utterances.len(),
        args.split
    );

    let bar = Bar::with_len(utterances.len() as u64, "vocoder eval");
    let mut scores = Vec::with_capacity(utterances.len());
    let mut totals = [ErrorCounts::default(); 3];
    let mut identified = [0usize; 3];
    let mut compute = [0.0f64; 2]; // vocoder, Griffin-Lim seconds
    for u in &utterances {
        let samples =
            read_audio(Path::new(&u.path), rate).with_context(|| format!("utterance {}", u.id))?;
        anyhow::ensure!(!samples.is_empty(), "utterance {} has no samples", u.id);
        let mut outs = Vec::with_capacity(2);
        for (i, gl) in [false, true].into_iter().enumerate() {
            let started = Instant::now();
            outs.push(
                resynthesize(&vocoder, gl, &samples)
                    .with_context(|| format!("resynthesising utterance {}", u.id))?,
            );
            compute[i] += started.elapsed().as_secs_f64();
        }
        let (Some(gl), Some(voc)) = (outs.pop(), outs.pop()) else {
            anyhow::bail!("resynthesis returned nothing for utterance {}", u.id);
        };
        let versions = [
            Audio::new(samples, rate),
            Audio::new(voc, rate),
            Audio::new(gl, rate),
        ];
        let mcd_voc = mcd.distortion(&versions[0], &versions[1])?.db;
        let mcd_gl = mcd.distortion(&versions[0], &versions[2])?.db;
        let voiced_scores = [
            voiced.score(&versions[0], &versions[1])?,
            voiced.score(&versions[0], &versions[2])?,
        ];
        let own = set
            .position(teacher.tokenizer(), &u.text)?
            .with_context(|| format!("utterance {} is not a candidate", u.id))?;
        let (hypotheses, counts, rank, hits) = judge(&teacher, &set, own, &versions)
            .with_context(|| format!("scoring utterance {}", u.id))?;
        if let Some(dir) = &audio_dir {
            save(dir, u, &versions)?;
        }
        for i in 0..3 {
            totals[i] += counts[i];
            identified[i] += usize::from(hits[i]);
        }
        scores.push(UtteranceScore {
            id: u.id.clone(),
            seconds: versions[0].duration_secs(),
            mcd_vocoder_db: mcd_voc,
            mcd_griffin_lim_db: mcd_gl,
            voiced: voiced_scores,
            reference: teacher.normalize(&u.text)?,
            hypotheses,
            cer: counts.map(|c| c.rate()),
            rank,
        });
        bar.inc(1);
    }
    bar.finish();

    let n = scores.len() as f64;
    let audio_seconds: f64 = scores.iter().map(|s| s.seconds).sum();
    let mut asr: [Option<AsrScore>; 3] = [None, None, None];
    if let (Some(asr_judge), Some(dir)) = (&asr_judge, &audio_dir) {
        println!("independent recogniser: {}", asr_judge.describe());
        let candidates = dir.join("candidates.txt");
        crate::asr_judge::write_candidates(&candidates, all_texts.iter().map(String::as_str))?;
        for (slot, system) in asr.iter_mut().zip(SYSTEMS) {
            *slot = Some(asr_judge.score_dir(
                &dir.join(system),
                &candidates,
                &dir.join(format!("{system}.asr.json")),
                rayon::current_num_threads(),
            )?);
        }
    }
    let [asr_original, asr_vocoder, asr_griffin_lim] = asr;
    let pooled =
        |i: usize| VoicedScore::pool(&scores.iter().map(|s| s.voiced[i]).collect::<Vec<_>>());
    let system = |i: usize,
                  mcd: Option<f64>,
                  rtf: Option<f64>,
                  voiced: Option<VoicedScore>,
                  asr: Option<AsrScore>| SystemReport {
        mcd_db: mcd,
        cer: totals[i].rate(),
        forced_choice: identified[i] as f64 / n,
        real_time_factor: rtf,
        voiced,
        asr,
    };
    let report = EvalReport {
        vocoder: args.vocoder.clone(),
        vocoder_config: config,
        teacher: args.teacher.clone(),
        manifest,
        split: args.split.clone(),
        utterances: scores.len(),
        audio_seconds,
        sample_rate: rate,
        griffin_lim: "32 iterations of fast Griffin-Lim (momentum 0.99, zero initial phase) on \
            the pseudo-inverse of the vocoder's mel filterbank",
        mcd_definition: MCD_DEFINITION,
        mcd_config,
        reference_chars: totals[0].reference_len,
        forced_choice_candidates: set.len(),
        forced_choice_chance: set.chance(),
        original: system(0, None, None, None, asr_original),
        vocoder_resynthesis: system(
            1,
            Some(scores.iter().map(|s| s.mcd_vocoder_db).sum::<f64>() / n),
            Some(compute[0] / audio_seconds),
            Some(pooled(0)),
            asr_vocoder,
        ),
        griffin_lim_resynthesis: system(
            2,
            Some(scores.iter().map(|s| s.mcd_griffin_lim_db).sum::<f64>() / n),
            Some(compute[1] / audio_seconds),
            Some(pooled(1)),
            asr_griffin_lim,
        ),
        per_utterance: scores,
    };
    println!(
        "\n{} utterances, {:.1} s of audio\n",
        report.utterances, report.audio_seconds
    );
    println!(
        "| audio | MCD (dB) | MCD voiced (dB) | F0 RMSE (cents) | V/UV error (%) | CER, CTC (%) \
         | ID, CTC (%) | WER, ASR (%) | ID, ASR (%) | RTF |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (name, s) in [
        ("original", &report.original),
        ("vocoder resynthesis", &report.vocoder_resynthesis),
        ("Griffin-Lim resynthesis", &report.griffin_lim_resynthesis),
    ] {
        let opt = |v: Option<f64>, digits: usize| {
            v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
        };
        let voiced = s.voiced.as_ref().map_or_else(
            || "– | – | –".to_string(),
            |v| {
                format!(
                    "{:.2} | {:.0} | {:.1}",
                    v.mcd_db,
                    v.f0_rmse_cents,
                    100.0 * v.vuv_error
                )
            },
        );
        let asr = s.asr.as_ref().map_or_else(
            || "– | –".to_string(),
            |a| {
                format!(
                    "{:.1} | {:.1} ± {:.1}",
                    100.0 * a.wer,
                    100.0 * a.forced_choice,
                    100.0 * a.forced_choice_se
                )
            },
        );
        println!(
            "| {name} | {} | {voiced} | {:.2} | {:.1} | {asr} | {} |",
            opt(s.mcd_db, 2),
            100.0 * s.cer,
            100.0 * s.forced_choice,
            opt(s.real_time_factor, 3)
        );
    }
    println!(
        "\nID: forced-choice sentence identification among all {} transcripts of the split; \
         chance = {:.1} %. RTF: seconds of computation per second of audio.",
        report.forced_choice_candidates,
        100.0 * report.forced_choice_chance
    );
    voxspec_data::write_atomic(&args.out, &serde_json::to_vec_pretty(&report)?)?;
    if let Some(dir) = &args.audio_dir {
        println!(
            "\naudio: {}/{{original,vocoder,griffin_lim}} (score with `voxspec eval \
             intelligibility --dir <DIR> --candidates {}`)",
            dir.display(),
            report.manifest.display()
        );
    }
    println!("\nreport: {}", args.out.display());
    Ok(())
}
