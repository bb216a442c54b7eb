//! Resynthesis quality of a SoCodec on a split, stream by stream: each utterance is encoded
//! (features from the CTC teacher run on its audio) and decoded from the first b streams for
//! b = 1..S with the utterance's own voice; rows for the original and for the vocoder on the
//! original mel (the renderer's ceiling). MCD against the original, CTC-teacher CER and forced
//! choice, and the independent recogniser's WER and forced choice when it is set up.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use serde::Serialize;
use voxspec_audio::Audio;
use voxspec_codec::socodec::MelToWave;
use voxspec_codec::{McdConfig, QuantizerKind, SoCodec, SoCodecConfig};
use voxspec_data::Progress;
use voxspec_teacher::ctc::CtcTeacher;
use voxspec_teacher::{ErrorCounts, SemanticTeacher};
use voxspec_tts::AsrScore;

use crate::error::{EvalError, Result};
use crate::judge::AsrJudge;
use crate::split::EvalSplit;

/// What [`evaluate_socodec`] is given besides the models.
#[derive(Debug, Clone, Copy)]
pub struct SoCodecEvalSettings<'a> {
    /// The codec's model directory (for the report).
    pub codec_dir: &'a Path,
    /// The vocoder's model directory (for the report; `None` for Griffin-Lim).
    pub vocoder_dir: Option<&'a Path>,
    /// The teacher's model directory (for the report).
    pub teacher_dir: &'a Path,
    /// Write every row's clips as `<dir>/<row folder>/<ID>.wav` here (needed with a judge).
    pub audio_dir: Option<&'a Path>,
    /// The independent recogniser, when it runs (on the clips of `audio_dir`).
    pub judge: Option<&'a AsrJudge>,
}

/// Scores of one row (original, vocoder on the original mel, or the first b streams).
#[derive(Debug, Default, Clone, Serialize)]
pub struct RowScore {
    pub name: String,
    pub streams: Option<usize>,
    pub mcd_db: f64,
    pub cer: f64,
    pub forced_choice: f64,
    /// The independent recogniser (`tools/asr_judge.py`) on the same audio, when set up.
    pub asr: Option<AsrScore>,
    #[serde(skip)]
    errors: ErrorCounts,
    #[serde(skip)]
    identified: usize,
    #[serde(skip)]
    mcd_sum: f64,
}

impl RowScore {
    /// The folder of this row's audio under the audio directory (and the judge's).
    pub fn folder(&self) -> String {
        self.streams.map_or_else(
            || self.name.replace(['(', ')', ' '], "_"),
            |b| format!("b{b}"),
        )
    }
}

/// The report of [`evaluate_socodec`] (written as JSON by `voxspec codec eval`).
#[derive(Debug, Serialize)]
pub struct SoCodecEvalReport {
    pub codec: PathBuf,
    pub vocoder: Option<PathBuf>,
    pub teacher: PathBuf,
    pub split: String,
    pub utterances: usize,
    pub audio_seconds: f64,
    pub streams: usize,
    pub frame_ms: usize,
    pub quantizer: QuantizerKind,
    pub forced_choice_candidates: usize,
    pub forced_choice_chance: f64,
    pub rows: Vec<RowScore>,
}

/// Evaluates `model` on `split` (see the module docs), rendering mels with `render`.
///
/// # Errors
/// [`EvalError::Input`] when the teacher and the codec's mel differ in rate;
/// [`EvalError::Utterance`] naming the utterance that could not be read or scored; the
/// independent recogniser's errors.
#[allow(clippy::too_many_arguments)]
pub fn evaluate_socodec(
    model: &SoCodec,
    config: &SoCodecConfig,
    teacher: &CtcTeacher,
    render: &MelToWave,
    split: &EvalSplit,
    settings: &SoCodecEvalSettings,
    progress: &dyn Progress,
    device: &Device,
) -> Result<SoCodecEvalReport> {
    let rate = config.mel.sample_rate;
    if teacher.sample_rate() != rate {
        return Err(EvalError::input(format!(
            "the teacher reads {} Hz audio, the codec's mel is at {rate} Hz",
            teacher.sample_rate()
        )));
    }
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
    progress.start(split.utterances.len() as u64, "SoCodec eval");
    let mut seconds = 0.0;
    for u in &split.utterances {
        let one = |rows: &mut [RowScore]| -> Result<f64> {
            let original = voxspec_audio::load_resampled(Path::new(&u.path), rate)?.samples;
            let original_audio = Audio::new(original.clone(), rate);
            let f = teacher.features(&original)?; // [frames, dim]
            let features = f
                .into_data()
                .try_into_vec::<f32>()
                .map_err(|e| EvalError::input(format!("reading the teacher features: {e:?}")))?;
            let tokens = model.encode_features(config, &features, device)?;
            let voice = model.voice(config, &original, device)?;
            let mel = front.compute(&original);
            let mut waves = vec![
                original.clone(),
                render.render(&mel, mel.len() / config.mel.n_mels)?,
            ];
            for b in 1..=s {
                let (m, frames) =
                    model.decode_tokens(config, &tokens[..b], voice.clone(), device)?;
                let mut w = render.render(&m, frames)?;
                w.truncate(original.len());
                waves.push(w);
            }
            if let Some(dir) = settings.audio_dir {
                for (row, w) in rows.iter().zip(&waves) {
                    let sub = dir.join(row.folder());
                    std::fs::create_dir_all(&sub)
                        .map_err(|e| EvalError::io("creating", &sub, e))?;
                    voxspec_audio::write_wav(
                        &sub.join(format!("{}.wav", u.id)),
                        &Audio::new(w.clone(), rate),
                        voxspec_audio::WavFormat::Pcm16,
                    )?;
                    if settings.judge.is_some() {
                        voxspec_data::write_atomic(
                            &sub.join(format!("{}.txt", u.id)),
                            u.text.as_bytes(),
                        )?;
                    }
                }
            }
            let own = split.own(teacher, u)?;
            let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
            let verdicts =
                teacher.forced_choice(&split.candidates, &refs, &vec![own; refs.len()])?;
            for (i, (row, v)) in rows.iter_mut().zip(verdicts).enumerate() {
                row.errors += v.errors;
                row.identified += usize::from(v.choice.identified);
                if i > 0 {
                    row.mcd_sum += mcd
                        .distortion(&original_audio, &Audio::new(waves[i].clone(), rate))?
                        .db;
                }
            }
            Ok(original.len() as f64 / f64::from(rate))
        };
        seconds += one(&mut rows).map_err(|e| e.of(&u.id))?;
        progress.inc(1);
    }
    progress.finish();
    if let (Some(judge), Some(dir)) = (settings.judge, settings.audio_dir) {
        let candidates = split.write_candidates(dir)?;
        for row in &mut rows {
            let name = row.folder();
            tracing::info!("independent recogniser: {}", row.name);
            row.asr = Some(judge.score_dir(
                &dir.join(&name),
                &candidates,
                &dir.join(format!("{name}.asr.json")),
                rayon::current_num_threads(),
            )?);
        }
    }
    let n = split.utterances.len() as f64;
    for row in &mut rows {
        row.cer = row.errors.rate();
        row.forced_choice = row.identified as f64 / n;
        row.mcd_db = row.mcd_sum / n;
    }
    Ok(SoCodecEvalReport {
        codec: settings.codec_dir.to_path_buf(),
        vocoder: settings.vocoder_dir.map(Path::to_path_buf),
        teacher: settings.teacher_dir.to_path_buf(),
        split: split.name.clone(),
        utterances: split.utterances.len(),
        audio_seconds: seconds,
        streams: s,
        frame_ms: config.frame_ms,
        quantizer: config.quantizer,
        forced_choice_candidates: split.candidates.len(),
        forced_choice_chance: split.candidates.chance(),
        rows,
    })
}
