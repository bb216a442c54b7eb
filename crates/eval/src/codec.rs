//! Resynthesis quality of a SpeechTokenizer-style codec on a split: mel-cepstral distortion of
//! the full and the RVQ-1-only reconstruction, voiced-frame scores, and the CTC teacher's
//! character error rate and forced-choice sentence identification on the original and both
//! reconstructions (and the independent recogniser's, when it is set up).

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use serde::Serialize;
use voxspec_audio::{Audio, PitchConfig, WavFormat};
use voxspec_codec::{
    McdConfig, MelCepstralDistortion, MelSpeech, SpeechTokenizer, SpeechTokenizerConfig,
    VoicedMetrics, VoicedScore,
};
use voxspec_data::{Progress, Utterance};
use voxspec_teacher::ctc::CtcTeacher;
use voxspec_teacher::{ErrorCounts, SemanticTeacher};
use voxspec_tts::AsrScore;

use crate::error::{EvalError, Result};
use crate::judge::{AsrJudge, write_clip};
use crate::split::{EvalSplit, MCD_DEFINITION, at_rate};

/// What [`evaluate_codec`] is given besides the models.
#[derive(Debug, Clone, Copy)]
pub struct CodecEvalSettings<'a> {
    /// The codec's model directory (for the report).
    pub codec_dir: &'a Path,
    /// The teacher's model directory (for the report).
    pub teacher_dir: &'a Path,
    /// Write `<ID>.{reference,full,rvq1}.wav` of the first `save_count` utterances here.
    pub save_audio: Option<&'a Path>,
    /// Utterances whose audio `save_audio` gets.
    pub save_count: usize,
    /// The independent recogniser, when it runs.
    pub judge: Option<&'a AsrJudge>,
    /// A codes → log-mel decoder and its renderer: the first row renders the codec's codes
    /// through it, the second through the codec's own decoder (all layers).
    pub mel: Option<&'a MelSpeech>,
}

/// Scores of one utterance.
#[derive(Debug, Serialize)]
pub struct UtteranceScore {
    pub id: String,
    pub seconds: f64,
    pub mcd_full_db: f64,
    pub mcd_rvq1_db: f64,
    pub voiced_full: VoicedScore,
    pub voiced_rvq1: VoicedScore,
    pub reference: String,
    pub hypothesis_original: String,
    pub hypothesis_full: String,
    pub hypothesis_rvq1: String,
    pub cer_original: f64,
    pub cer_full: f64,
    pub cer_rvq1: f64,
    /// Forced-choice rank of the own transcript (1 = identified).
    pub rank_original: usize,
    pub rank_full: usize,
    pub rank_rvq1: usize,
}

/// The report of [`evaluate_codec`] (written as JSON by `voxspec codec eval`).
#[derive(Debug, Serialize)]
pub struct CodecEvalReport {
    pub codec: PathBuf,
    pub teacher: PathBuf,
    pub manifest: PathBuf,
    pub split: String,
    pub utterances: usize,
    pub audio_seconds: f64,
    pub sample_rate: u32,
    pub teacher_sample_rate: u32,
    pub n_q: usize,
    pub frame_rate: f32,
    /// What the two resynthesis rows (`*_full`, `*_rvq1`) are.
    pub rows: [String; 2],
    pub mcd_definition: &'static str,
    pub mcd_config: McdConfig,
    /// Mean over utterances of each utterance's mean per-frame MCD (dB).
    pub mcd_full_db: f64,
    pub mcd_rvq1_db: f64,
    /// Voiced frames (YIN on the original): MCD, F0 error, voicing error, pooled over frames.
    pub voiced_full: VoicedScore,
    pub voiced_rvq1: VoicedScore,
    /// Characters in the normalised references.
    pub reference_chars: usize,
    /// Corpus CERs (total edits / total reference characters).
    pub cer_original: f64,
    pub cer_full: f64,
    pub cer_rvq1: f64,
    /// Forced-choice candidates (every transcript of the split) and chance (1 / that).
    pub forced_choice_candidates: usize,
    pub forced_choice_chance: f64,
    /// Forced-choice accuracy: identified utterances / utterances.
    pub forced_choice_original: f64,
    pub forced_choice_full: f64,
    pub forced_choice_rvq1: f64,
    /// The independent recogniser (`tools/asr_judge.py`) on the original and both
    /// reconstructions, forced choice among the same candidates; absent when not set up.
    pub asr: Option<AsrRows>,
    pub per_utterance: Vec<UtteranceScore>,
}

/// The independent recogniser's scores of the three renderings.
#[derive(Debug, Serialize)]
pub struct AsrRows {
    pub original: AsrScore,
    pub full: AsrScore,
    pub rvq1: AsrScore,
}

/// One utterance's original and reconstructions at the codec's rate.
struct Resynthesis {
    reference: Audio,
    full: Audio,
    rvq1: Audio,
}

impl Resynthesis {
    fn named(&self) -> [(&'static str, &Audio); 3] {
        [
            ("original", &self.reference),
            ("full", &self.full),
            ("rvq1", &self.rvq1),
        ]
    }
}

/// Encodes `samples` with every RVQ layer and decodes with all of them and with RVQ-1 alone,
/// both trimmed to the input length; with `mel`, renders all layers through it and through the
/// codec's decoder instead.
fn resynthesise(
    model: &SpeechTokenizer,
    mel: Option<&MelSpeech>,
    samples: Vec<f32>,
    rate: u32,
    device: &Device,
) -> Result<Resynthesis> {
    if samples.is_empty() {
        return Err(EvalError::input("the audio is empty"));
    }
    if let Some(mel) = mel {
        // One encoding, rendered both ways.
        let n = samples.len();
        let codes = voxspec_codec::speechtokenizer::prepare::encode_codes(
            model,
            &samples,
            model.n_q(),
            device,
        )?;
        let rows: Vec<Vec<u32>> = (0..codes.n_q).map(|q| codes.stream(q).to_vec()).collect();
        let mut rendered = mel.synthesize(&rows, None)?;
        rendered.resize(n, 0.0);
        let flat: Vec<i64> = codes.data.iter().map(|&c| i64::from(c)).collect();
        let wave = model.decode(burn::tensor::Tensor::from_data(
            burn::tensor::TensorData::new(flat, [codes.n_q, 1, codes.n_frames]),
            device,
        ))?;
        let mut own = wave
            .into_data()
            .try_into_vec_as::<f32>()
            .map_err(|e| EvalError::input(format!("reading the codec's waveform: {e:?}")))?;
        own.resize(n, 0.0);
        return Ok(Resynthesis {
            reference: Audio::new(samples, rate),
            full: Audio::new(rendered, rate),
            rvq1: Audio::new(own, rate),
        });
    }
    let mut outs = model.resynthesize(&samples, &[model.n_q(), 1], device)?;
    let (rvq1, full) = (outs.pop(), outs.pop());
    let (Some(full), Some(rvq1)) = (full, rvq1) else {
        return Err(EvalError::input(
            "the codec returned fewer resyntheses than asked for",
        ));
    };
    Ok(Resynthesis {
        reference: Audio::new(samples, rate),
        full: Audio::new(full, rate),
        rvq1: Audio::new(rvq1, rate),
    })
}

/// Scores one utterance: MCD of both reconstructions, teacher transcripts and forced choice
/// (own transcript = candidate `own` of the split) of all three. Returns the scores, the
/// character errors and whether each was identified.
fn score(
    u: &Utterance,
    r: &Resynthesis,
    (mcd, voiced): (&MelCepstralDistortion, &VoicedMetrics),
    teacher: &CtcTeacher,
    (split, own): (&EvalSplit, usize),
) -> Result<(UtteranceScore, [ErrorCounts; 3], [bool; 3])> {
    let mcd_full = mcd.distortion(&r.reference, &r.full)?;
    let mcd_rvq1 = mcd.distortion(&r.reference, &r.rvq1)?;
    let rate = teacher.sample_rate();
    let original = voxspec_audio::load_resampled(Path::new(&u.path), rate)?.samples;
    let full = at_rate(&r.full, rate)?;
    let rvq1 = at_rate(&r.rvq1, rate)?;
    let verdicts =
        teacher.forced_choice(&split.candidates, &[&original, &full, &rvq1], &[own; 3])?;
    let [v_original, v_full, v_rvq1]: [_; 3] = verdicts
        .try_into()
        .map_err(|v: Vec<_>| EvalError::input(format!("{} verdicts for 3 waveforms", v.len())))?;
    let reference = teacher.normalize(&u.text)?;
    let counts = [v_original.errors, v_full.errors, v_rvq1.errors];
    let identified = [&v_original, &v_full, &v_rvq1].map(|v| v.choice.identified);
    let ranks = [&v_original, &v_full, &v_rvq1].map(|v| v.choice.rank);
    Ok((
        UtteranceScore {
            id: u.id.clone(),
            seconds: r.reference.duration_secs(),
            mcd_full_db: mcd_full.db,
            mcd_rvq1_db: mcd_rvq1.db,
            voiced_full: voiced.score(&r.reference, &r.full)?,
            voiced_rvq1: voiced.score(&r.reference, &r.rvq1)?,
            reference,
            hypothesis_original: v_original.hypothesis,
            hypothesis_full: v_full.hypothesis,
            hypothesis_rvq1: v_rvq1.hypothesis,
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

fn save(dir: &Path, id: &str, r: &Resynthesis) -> Result<()> {
    std::fs::create_dir_all(dir).map_err(|e| EvalError::io("creating", dir, e))?;
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

/// Resynthesis quality of `model` on `split` (see the module docs): every utterance is read at
/// the codec's rate, encoded with all RVQ layers and decoded with all of them and with RVQ-1
/// alone; MCD against the original, the teacher's CER and forced choice on all three.
///
/// # Errors
/// [`EvalError::Utterance`] naming the utterance that could not be read or scored; the
/// independent recogniser's errors.
pub fn evaluate_codec(
    model: &SpeechTokenizer,
    config: &SpeechTokenizerConfig,
    teacher: &CtcTeacher,
    split: &EvalSplit,
    settings: &CodecEvalSettings,
    progress: &dyn Progress,
    device: &Device,
) -> Result<CodecEvalReport> {
    let rate = config.sample_rate;
    if let Some(mel) = settings.mel
        && mel.sample_rate() != rate
    {
        return Err(EvalError::input(format!(
            "the mel decoder renders {} Hz but the codec runs at {rate} Hz",
            mel.sample_rate()
        )));
    }
    let rows = match settings.mel {
        Some(mel) => [
            format!(
                "mel decoder ({} RVQ layers) + {}",
                mel.config().n_q,
                mel.renderer().name()
            ),
            format!("codec decoder, all {} RVQ layers", model.n_q()),
        ],
        None => [
            format!("codec, all {} RVQ layers", model.n_q()),
            "codec, RVQ-1 only".to_string(),
        ],
    };
    let mcd_config = McdConfig::new();
    let mcd = mcd_config.init(rate)?;
    let voiced = VoicedMetrics::new(mcd.clone(), PitchConfig::default())?;
    // The independent judge reads the clips from a folder per rendering.
    let judge_dir =
        match settings.judge {
            Some(_) => Some(tempfile::tempdir().map_err(|e| {
                EvalError::io("making a temporary folder in", std::env::temp_dir(), e)
            })?),
            None => None,
        };
    progress.start(split.utterances.len() as u64, "codec eval");
    let mut scores = Vec::with_capacity(split.utterances.len());
    let mut totals = [ErrorCounts::default(); 3];
    let mut identified = [0usize; 3];
    for (i, u) in split.utterances.iter().enumerate() {
        let one = || -> Result<_> {
            let samples = voxspec_audio::load_resampled(Path::new(&u.path), rate)?.samples;
            let r = resynthesise(model, settings.mel, samples, rate, device)?;
            let own = split.own(teacher, u)?;
            if let Some(dir) = &judge_dir {
                for (name, audio) in r.named() {
                    write_clip(&dir.path().join(name), &u.id, audio, &u.text)?;
                }
            }
            let scored = score(u, &r, (&mcd, &voiced), teacher, (split, own))?;
            if let Some(dir) = settings.save_audio
                && i < settings.save_count
            {
                save(dir, &u.id, &r)?;
            }
            Ok(scored)
        };
        let (s, counts, hits) = one().map_err(|e| e.of(&u.id))?;
        for (n, hit) in identified.iter_mut().zip(hits) {
            *n += usize::from(hit);
        }
        for (t, c) in totals.iter_mut().zip(counts) {
            *t += c;
        }
        scores.push(s);
        progress.inc(1);
    }
    progress.finish();

    let n = scores.len() as f64;
    let asr = match (settings.judge, &judge_dir) {
        (Some(judge), Some(dir)) => {
            let dir = dir.path();
            let candidates = split.write_candidates(dir)?;
            let jobs = rayon::current_num_threads();
            let one = |name: &str| {
                judge.score_dir(
                    &dir.join(name),
                    &candidates,
                    &dir.join(format!("{name}.asr.json")),
                    jobs,
                )
            };
            Some(AsrRows {
                original: one("original")?,
                full: one("full")?,
                rvq1: one("rvq1")?,
            })
        }
        _ => None,
    };
    let pool = |f: fn(&UtteranceScore) -> VoicedScore| {
        VoicedScore::pool(&scores.iter().map(f).collect::<Vec<_>>())
    };
    Ok(CodecEvalReport {
        codec: settings.codec_dir.to_path_buf(),
        teacher: settings.teacher_dir.to_path_buf(),
        manifest: split.manifest.clone(),
        split: split.name.clone(),
        utterances: scores.len(),
        audio_seconds: scores.iter().map(|s| s.seconds).sum(),
        sample_rate: rate,
        teacher_sample_rate: teacher.sample_rate(),
        n_q: model.n_q(),
        frame_rate: config.frame_rate(),
        rows,
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
        forced_choice_candidates: split.candidates.len(),
        forced_choice_chance: split.candidates.chance(),
        forced_choice_original: identified[0] as f64 / n,
        forced_choice_full: identified[1] as f64 / n,
        forced_choice_rvq1: identified[2] as f64 / n,
        asr,
        per_utterance: scores,
    })
}
