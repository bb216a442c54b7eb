//! Analysis–resynthesis quality of a vocoder on a split against Griffin-Lim on the same
//! log-mel: mel-cepstral distortion (all and voiced frames), F0 and voicing errors, the CTC
//! teacher's character error rate and forced-choice sentence identification, the independent
//! recogniser's WER and forced choice, and real-time factors.

use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::Serialize;
use voxspec_audio::{Audio, PitchConfig};
use voxspec_codec::vocoder::{GriffinLimConfig, Vocoder, griffin_lim_resynthesize};
use voxspec_codec::{McdConfig, VocoderError, VocosConfig, VoicedMetrics, VoicedScore};
use voxspec_data::Progress;
use voxspec_teacher::ctc::CtcTeacher;
use voxspec_teacher::{ErrorCounts, SemanticTeacher};
use voxspec_tts::AsrScore;

use crate::error::{EvalError, Result};
use crate::judge::{AsrJudge, write_clip};
use crate::split::{EvalSplit, MCD_DEFINITION, at_rate};

/// The three versions of each utterance, in report order (also the clips' folder names).
pub const SYSTEMS: [&str; 3] = ["original", "vocoder", "griffin_lim"];

/// Resynthesis of `samples` (at the vocoder's rate) from their log-mel, by the vocoder or by
/// Griffin-Lim on the vocoder's mel settings (`griffin_lim_iterations`, see
/// [`GriffinLimConfig`]) when that is `Some`.
///
/// # Errors
/// The vocoder's errors.
pub fn resynthesize(
    vocoder: &Vocoder,
    griffin_lim_iterations: Option<usize>,
    samples: &[f32],
) -> Result<Vec<f32>, VocoderError> {
    let rate = vocoder.config().sample_rate;
    if let Some(n_iter) = griffin_lim_iterations {
        griffin_lim_resynthesize(
            vocoder.config(),
            samples,
            rate,
            &GriffinLimConfig {
                n_iter,
                ..GriffinLimConfig::default()
            },
        )
    } else {
        vocoder.resynthesize(samples, rate)
    }
}

/// What [`evaluate_vocoder`] is given besides the models.
#[derive(Debug, Clone, Copy)]
pub struct VocoderEvalSettings<'a> {
    /// The vocoder's model directory (for the report).
    pub vocoder_dir: &'a Path,
    /// The teacher's model directory (for the report).
    pub teacher_dir: &'a Path,
    /// Write every clip as `<dir>/{original,vocoder,griffin_lim}/<ID>.wav` + `<ID>.txt` here
    /// (needed with a judge).
    pub audio_dir: Option<&'a Path>,
    /// The independent recogniser, when it runs (on the clips of `audio_dir`).
    pub judge: Option<&'a AsrJudge>,
    /// Griffin-Lim iterations of the baseline (32 is the usual).
    pub griffin_lim_iterations: usize,
}

/// Scores of one utterance.
#[derive(Debug, Serialize)]
pub struct UtteranceScore {
    pub id: String,
    pub seconds: f64,
    pub mcd_vocoder_db: f64,
    pub mcd_griffin_lim_db: f64,
    /// Voiced-frame scores of the vocoder and Griffin-Lim audio.
    pub voiced: [VoicedScore; 2],
    pub reference: String,
    /// Teacher transcripts of original, vocoder and Griffin-Lim audio.
    pub hypotheses: [String; 3],
    /// CERs of original, vocoder and Griffin-Lim audio.
    pub cer: [f64; 3],
    /// Forced-choice rank of the own transcript (1 = identified) for each.
    pub rank: [usize; 3],
}

/// Results of one system over the split.
#[derive(Debug, Serialize)]
pub struct SystemReport {
    /// Mean over utterances of the mean per-frame MCD (dB); `None` for the original.
    pub mcd_db: Option<f64>,
    /// Corpus CER (total edits / total reference characters).
    pub cer: f64,
    /// Forced-choice accuracy: identified utterances / utterances.
    pub forced_choice: f64,
    /// Seconds of computation per second of audio; `None` for the original.
    pub real_time_factor: Option<f64>,
    /// Frames voiced in the original, pooled over utterances; `None` for the original.
    pub voiced: Option<VoicedScore>,
    /// The independent recogniser's scores (when it ran).
    pub asr: Option<AsrScore>,
}

/// The report of [`evaluate_vocoder`] (written as JSON by `voxspec vocoder eval`).
#[derive(Debug, Serialize)]
pub struct VocoderEvalReport {
    pub vocoder: PathBuf,
    pub vocoder_config: VocosConfig,
    pub teacher: PathBuf,
    pub manifest: PathBuf,
    pub split: String,
    pub utterances: usize,
    pub audio_seconds: f64,
    pub sample_rate: u32,
    pub griffin_lim: String,
    pub mcd_definition: &'static str,
    pub mcd_config: McdConfig,
    pub reference_chars: usize,
    pub forced_choice_candidates: usize,
    pub forced_choice_chance: f64,
    pub original: SystemReport,
    pub vocoder_resynthesis: SystemReport,
    pub griffin_lim_resynthesis: SystemReport,
    pub per_utterance: Vec<UtteranceScore>,
}

/// Teacher verdicts of the three versions: transcripts, character errors, ranks, identified.
type Verdicts = ([String; 3], [ErrorCounts; 3], [usize; 3], [bool; 3]);

fn judge(
    teacher: &CtcTeacher,
    split: &EvalSplit,
    own: usize,
    versions: &[Audio; 3],
) -> Result<Verdicts> {
    let rate = teacher.sample_rate();
    let waves = versions
        .iter()
        .map(|a| at_rate(a, rate))
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
    let verdicts = teacher.forced_choice(&split.candidates, &refs, &[own; 3])?;
    let v: [_; 3] = verdicts
        .try_into()
        .map_err(|v: Vec<_>| EvalError::input(format!("{} verdicts for 3 waveforms", v.len())))?;
    Ok((
        v.clone().map(|v| v.hypothesis),
        v.clone().map(|v| v.errors),
        v.clone().map(|v| v.choice.rank),
        v.map(|v| v.choice.identified),
    ))
}

/// Evaluates `vocoder` against Griffin-Lim on `split` (see the module docs).
///
/// # Errors
/// [`EvalError::Utterance`] naming the utterance that could not be read, resynthesised or
/// scored; the independent recogniser's errors.
pub fn evaluate_vocoder(
    vocoder: &Vocoder,
    teacher: &CtcTeacher,
    split: &EvalSplit,
    settings: &VocoderEvalSettings,
    progress: &dyn Progress,
) -> Result<VocoderEvalReport> {
    let config = vocoder.config().clone();
    let rate = config.sample_rate;
    let mcd_config = McdConfig::new();
    let mcd = mcd_config.init(rate)?;
    let voiced = VoicedMetrics::new(mcd.clone(), PitchConfig::default())?;
    progress.start(split.utterances.len() as u64, "vocoder eval");
    let mut scores = Vec::with_capacity(split.utterances.len());
    let mut totals = [ErrorCounts::default(); 3];
    let mut identified = [0usize; 3];
    let mut compute = [0.0f64; 2]; // vocoder, Griffin-Lim seconds
    for u in &split.utterances {
        let mut one = || -> Result<UtteranceScore> {
            let samples = voxspec_audio::load_resampled(Path::new(&u.path), rate)?.samples;
            if samples.is_empty() {
                return Err(EvalError::input("no samples"));
            }
            let mut outs = Vec::with_capacity(2);
            let gl_iterations = Some(settings.griffin_lim_iterations);
            for (i, gl) in [None, gl_iterations].into_iter().enumerate() {
                let started = Instant::now();
                outs.push(resynthesize(vocoder, gl, &samples)?);
                compute[i] += started.elapsed().as_secs_f64();
            }
            let (Some(gl), Some(voc)) = (outs.pop(), outs.pop()) else {
                return Err(EvalError::input("resynthesis returned nothing"));
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
            let own = split.own(teacher, u)?;
            let (hypotheses, counts, rank, hits) = judge(teacher, split, own, &versions)?;
            if let Some(dir) = settings.audio_dir {
                for (system, audio) in SYSTEMS.iter().zip(&versions) {
                    write_clip(&dir.join(system), &u.id, audio, &format!("{}\n", u.text))?;
                }
            }
            for i in 0..3 {
                totals[i] += counts[i];
                identified[i] += usize::from(hits[i]);
            }
            Ok(UtteranceScore {
                id: u.id.clone(),
                seconds: versions[0].duration_secs(),
                mcd_vocoder_db: mcd_voc,
                mcd_griffin_lim_db: mcd_gl,
                voiced: voiced_scores,
                reference: teacher.normalize(&u.text)?,
                hypotheses,
                cer: counts.map(|c| c.rate()),
                rank,
            })
        };
        scores.push(one().map_err(|e| e.of(&u.id))?);
        progress.inc(1);
    }
    progress.finish();

    let n = scores.len() as f64;
    let audio_seconds: f64 = scores.iter().map(|s| s.seconds).sum();
    let mut asr: [Option<AsrScore>; 3] = [None, None, None];
    if let (Some(asr_judge), Some(dir)) = (settings.judge, settings.audio_dir) {
        let candidates = split.write_candidates(dir)?;
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
    Ok(VocoderEvalReport {
        vocoder: settings.vocoder_dir.to_path_buf(),
        vocoder_config: config,
        teacher: settings.teacher_dir.to_path_buf(),
        manifest: split.manifest.clone(),
        split: split.name.clone(),
        utterances: scores.len(),
        audio_seconds,
        sample_rate: rate,
        griffin_lim: format!(
            "{} iterations of fast Griffin-Lim (momentum 0.99, zero initial phase) on the \
             pseudo-inverse of the vocoder's mel filterbank",
            settings.griffin_lim_iterations
        ),
        mcd_definition: MCD_DEFINITION,
        mcd_config,
        reference_chars: totals[0].reference_len,
        forced_choice_candidates: split.candidates.len(),
        forced_choice_chance: split.candidates.chance(),
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
    })
}
