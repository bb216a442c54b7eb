//! The benchmark of the delayed multi-stream LM's frame decoders on a split's sentences in one
//! run — LM real-time factor, time per frame, frames per target forward, acceptance — and the
//! quality of the audio by the CTC teacher (CER, forced-choice sentence identification) and,
//! when it is set up, the independent recogniser (WER, forced choice); optionally the
//! single-stream AR model of the main job on the same sentences in the same run, so the LM
//! real-time factors compare.
//!
//! Utterances are the outer loop and decoders the inner one; every decoder sees the same seed
//! per utterance.

use std::path::{Path, PathBuf};
use std::time::Instant;

use burn::tensor::Device;
use serde::Serialize;
use voxspec_data::{Progress, Utterance};
use voxspec_infer::{AcceptanceRule, SamplerConfig, SpeculativeConfig};
use voxspec_teacher::CtcTeacher;
use voxspec_teacher::ErrorCounts;
use voxspec_tts::{
    AsrScore, BenchSettings, DecoderParts, DecoderSpec, EngineKind, Judge, Lengths, ModelPaths,
    MultiStreamDecoder, MultiStreamDraft, MultiStreamPaths, MultiStreamPipeline, Pipeline,
    load_multistream_draft, row_dir_name, run_decode_bench,
};

use crate::error::{EvalError, Result};
use crate::judge::{AsrJudge, write_candidates, write_clip};
use crate::split::write_report_sorted;

/// The `system` of the multi-stream LM's rows.
const MULTISTREAM: &str = "multistream";

/// The decoders of a benchmark: AR, speculative rows over γ and β (with a draft), PCG rows,
/// and multi-token rows (independent and Viterbi) per head count.
#[derive(Debug, Clone, PartialEq)]
pub struct MultiStreamGrid {
    /// Draft lengths γ of the speculative rows.
    pub gammas: Vec<usize>,
    /// Acceptance tolerances of the speculative rows (0: exact speculative sampling, > 0: SSD).
    pub betas: Vec<f32>,
    /// PCG rows too (with a draft): group acceptance with each stream's own similarity groups,
    /// one row per γ.
    pub pcg: bool,
    /// Steps per forward of the MTP rows; empty: all the model's heads, none with one head.
    pub heads: Vec<usize>,
    /// Candidates per head of the MTP Viterbi rows.
    pub top_k: usize,
}

impl MultiStreamGrid {
    /// The rows' decoders on `pipeline`, AR first; the speculative rows need `draft`.
    ///
    /// # Errors
    /// [`EvalError::Infer`] for a bad γ or β; [`EvalError::Tts`] when the groups or the MTP
    /// decoders cannot be built.
    pub fn decoders<'a>(
        &self,
        pipeline: &MultiStreamPipeline,
        draft: Option<&'a MultiStreamDraft>,
    ) -> Result<Vec<MultiStreamDecoder<'a>>> {
        let pcg_rules = if self.pcg && draft.is_some() {
            pipeline.stream_groups(None)?
        } else {
            Vec::new()
        };
        let mut decoders = vec![MultiStreamDecoder::Ar];
        if let Some(d) = draft {
            for &gamma in &self.gammas {
                for &beta in &self.betas {
                    let rule = if beta == 0.0 {
                        AcceptanceRule::Exact
                    } else {
                        AcceptanceRule::Tolerance { beta }
                    };
                    let config = SpeculativeConfig::new(gamma, rule);
                    config.validate()?;
                    decoders.push(MultiStreamDecoder::Speculative {
                        draft: d,
                        config,
                        stream_rules: None,
                    });
                }
                if self.pcg {
                    decoders.push(MultiStreamDecoder::Speculative {
                        draft: d,
                        config: SpeculativeConfig::new(gamma, AcceptanceRule::Exact),
                        stream_rules: Some(pcg_rules.clone()),
                    });
                }
            }
        }
        let heads = if self.heads.is_empty() {
            let n = pipeline.config().n_heads();
            if n > 1 { vec![n] } else { Vec::new() }
        } else {
            self.heads.clone()
        };
        for &h in &heads {
            decoders.push(MultiStreamDecoder::Mtp(pipeline.mtp(h, None)?));
            decoders.push(MultiStreamDecoder::Mtp(pipeline.mtp(h, Some(self.top_k))?));
        }
        Ok(decoders)
    }
}

/// One decoder's totals.
#[derive(Debug, Default, Clone, Serialize)]
pub struct MultiStreamRow {
    /// `multistream`, or the single-stream AR model's experiment.
    pub system: String,
    /// The decoder's label.
    pub decoder: String,
    /// Utterances decoded.
    pub utterances: usize,
    /// Frames generated.
    pub frames: usize,
    /// Wall time of the LM stage (the duration predictor included).
    pub lm_seconds: f64,
    /// Duration of the audio.
    pub audio_seconds: f64,
    /// `lm_seconds / audio_seconds`.
    pub lm_rtf: f64,
    /// LM time per frame, ms.
    pub ms_per_frame: f64,
    /// Frames generated per target forward (prefill excluded).
    pub frames_per_forward: f64,
    /// Forwards of the target.
    pub target_forwards: usize,
    /// Forwards of the draft.
    pub draft_forwards: usize,
    /// Accepted / drafted positions of the speculative rows.
    pub acceptance: Option<f64>,
    /// The multi-stream AR row's time per frame over this row's.
    pub speedup_vs_frame_ar: f64,
    /// Character error rate of the CTC teacher's transcripts.
    pub cer: Option<f64>,
    /// Forced-choice accuracy by the CTC teacher.
    pub forced_choice: Option<f64>,
    /// The independent recogniser on the same clips.
    pub asr: Option<AsrScore>,
    #[serde(skip)]
    drafted: usize,
    #[serde(skip)]
    accepted: usize,
    #[serde(skip)]
    errors: ErrorCounts,
    #[serde(skip)]
    identified: usize,
}

/// What every decoder of a run shares.
#[derive(Debug, Clone)]
pub struct MultiStreamSettings {
    /// The sampler.
    pub sampler: SamplerConfig,
    /// Seed of the first utterance (utterance i uses seed + i).
    pub seed: u64,
    /// Keep the clips for the independent recogniser: `<dir>/<row>/<id>.wav` with the
    /// transcript in `<id>.txt`, `<row>` from [`row_dir_name`].
    pub audio_dir: Option<PathBuf>,
}

/// Runs every decoder on `utterances` (their transcripts as text) with the voice vector
/// `voice`, scoring the audio with `judge`; `progress` sees one unit per utterance and
/// decoder. Rows come in the order of `decoders`, the first (AR) the reference of the
/// speedups.
///
/// # Errors
/// [`EvalError::Utterance`] naming a transcript the LM cannot read; the pipeline's, the
/// judge's, and writing the clips.
pub fn run_multistream_bench(
    pipeline: &MultiStreamPipeline,
    decoders: &[MultiStreamDecoder<'_>],
    voice: &[f32],
    utterances: &[Utterance],
    judge: &Judge<'_>,
    settings: &MultiStreamSettings,
    progress: &dyn Progress,
) -> Result<Vec<MultiStreamRow>> {
    let mut rows: Vec<MultiStreamRow> = decoders
        .iter()
        .map(|d| MultiStreamRow {
            system: MULTISTREAM.into(),
            decoder: d.label(),
            ..MultiStreamRow::default()
        })
        .collect();
    let rate = pipeline.sample_rate();
    let row_dirs: Vec<Option<PathBuf>> = rows
        .iter()
        .map(|r| {
            let dir = settings.audio_dir.as_ref()?.join(row_dir_name(&r.decoder));
            Some(
                std::fs::create_dir_all(&dir)
                    .map(|()| dir.clone())
                    .map_err(|e| EvalError::io("creating", dir, e)),
            )
        })
        .map(Option::transpose)
        .collect::<Result<_>>()?;
    progress.start(
        (utterances.len() * decoders.len()) as u64,
        "utterances × decoders",
    );
    for (i, u) in utterances.iter().enumerate() {
        let text = pipeline
            .text_ids(&u.text)
            .map_err(|e| EvalError::from(e).of(&u.id))?;
        // The duration predictor is part of the LM stage: its time counts in every row.
        let start = Instant::now();
        let (durations, max_frames) = pipeline.plan(&text, 1.0)?;
        let plan_seconds = start.elapsed().as_secs_f64();
        for ((row, decoder), dir) in rows.iter_mut().zip(decoders).zip(&row_dirs) {
            let start = Instant::now();
            let g = pipeline.generate(
                decoder,
                &text,
                voice,
                durations.as_deref(),
                max_frames,
                settings.seed + i as u64,
                &settings.sampler,
            )?;
            row.lm_seconds += plan_seconds + start.elapsed().as_secs_f64();
            let samples = pipeline.render(&g.frames, voice)?;
            row.audio_seconds += samples.len() as f64 / f64::from(rate);
            row.utterances += 1;
            row.frames += g.frames.first().map_or(0, Vec::len);
            row.target_forwards += g.stats.target_forwards;
            row.draft_forwards += g.stats.draft_forwards;
            row.drafted += g.stats.drafted.iter().sum::<usize>();
            row.accepted += g.stats.accepted.iter().sum::<usize>();
            let (errors, identified) = judge.judge(&u.text, &samples, rate, 1)?;
            row.errors += errors;
            row.identified += usize::from(identified);
            if let Some(dir) = dir {
                let audio = voxspec_audio::Audio::new(samples, rate);
                write_clip(dir, &u.id, &audio, &u.text)?;
            }
            progress.inc(1);
        }
    }
    progress.finish();
    let ar_ms = rows
        .first()
        .map_or(0.0, |r| r.lm_seconds / r.frames.max(1) as f64);
    for row in &mut rows {
        row.lm_rtf = row.lm_seconds / row.audio_seconds.max(1e-9);
        row.ms_per_frame = 1e3 * row.lm_seconds / row.frames.max(1) as f64;
        // Each utterance's prefill is a forward that generates no frame.
        let forwards = row.target_forwards.saturating_sub(row.utterances).max(1);
        row.frames_per_forward = row.frames as f64 / forwards as f64;
        row.acceptance = (row.drafted > 0).then(|| row.accepted as f64 / row.drafted as f64);
        row.speedup_vs_frame_ar = ar_ms / (row.ms_per_frame / 1e3).max(1e-12);
        row.cer = Some(row.errors.rate());
        row.forced_choice = Some(row.identified as f64 / row.utterances.max(1) as f64);
    }
    Ok(rows)
}

/// The single-stream AR model of the experiment `exp` (its AR model `model`, by default
/// `<exp>/ar`, on the native engine) on the same sentences, as a row: AR decoding with the
/// default length bounds, `sampler` without its repetition penalty, clips kept in
/// `audio_dir/ar` when given.
///
/// # Errors
/// The pipeline's and the judge's; [`EvalError::Input`] when the benchmark returns no row.
#[allow(clippy::too_many_arguments)]
fn single_stream_row(
    exp: &Path,
    model: Option<&Path>,
    utterances: &[Utterance],
    judge: &Judge<'_>,
    sampler: &SamplerConfig,
    seed: u64,
    audio_dir: Option<PathBuf>,
    device: &Device,
    progress: &dyn Progress,
) -> Result<MultiStreamRow> {
    let defaults = ModelPaths::experiment(exp);
    let paths = ModelPaths {
        ar: model.map_or(defaults.ar.clone(), Path::to_path_buf),
        engine: EngineKind::Native,
        ..defaults
    };
    let pipeline = Pipeline::load(&paths, device)?;
    let settings = BenchSettings {
        sampler: SamplerConfig {
            repetition_penalty: 1.0,
            ..*sampler
        },
        lengths: Lengths::default(),
        seed,
        audio_dir,
    };
    let report = run_decode_bench(
        &pipeline,
        &[DecoderSpec::Ar],
        &DecoderParts::default(),
        utterances,
        Some(judge),
        None,
        &settings,
        progress,
    )?;
    let r = report
        .rows
        .first()
        .ok_or_else(|| EvalError::input("the baseline benchmark returned no row"))?;
    let frame_rate =
        f64::from(pipeline.sample_rate()) / pipeline.codec_config.hop_length().max(1) as f64;
    let audio_seconds = r.tokens as f64 / frame_rate;
    Ok(MultiStreamRow {
        system: format!("single-stream AR ({})", exp.display()),
        decoder: r.label.clone(),
        utterances: r.utterances,
        frames: r.tokens,
        lm_seconds: r.lm_rtf * audio_seconds,
        audio_seconds,
        lm_rtf: r.lm_rtf,
        ms_per_frame: r.tpt_ms,
        frames_per_forward: r.tokens_per_forward,
        target_forwards: r.target_forwards,
        cer: r.cer,
        forced_choice: r.forced_choice,
        ..MultiStreamRow::default()
    })
}

/// Scores every row with the independent recogniser: the clips kept in `audio_dir/<row>`
/// (`audio_dir/baseline/<row>` for the single-stream row) against `candidates` (written to
/// `audio_dir/candidates.txt`), each row's report beside its folder as `<row>.asr.json`.
/// `on_row` is told each row's index (from 0), the row count and label before it is scored.
///
/// # Errors
/// [`EvalError::Judge`] when the recogniser cannot run or its report is unreadable; as
/// [`write_candidates`].
fn score_multistream_rows<'a>(
    asr: &AsrJudge,
    rows: &mut [MultiStreamRow],
    audio_dir: &Path,
    candidates: impl IntoIterator<Item = &'a str>,
    jobs: usize,
    on_row: &mut dyn FnMut(usize, usize, &str),
) -> Result<()> {
    let candidates_path = audio_dir.join("candidates.txt");
    write_candidates(&candidates_path, candidates)?;
    let total = rows.len();
    for (i, row) in rows.iter_mut().enumerate() {
        let mut name = row_dir_name(&row.decoder);
        if row.system != MULTISTREAM {
            name = format!("baseline/{name}");
        }
        on_row(i, total, &row.decoder);
        row.asr = Some(asr.score_dir(
            &audio_dir.join(&name),
            &candidates_path,
            &audio_dir.join(format!("{name}.asr.json")),
            jobs,
        )?);
    }
    Ok(())
}

/// The single-stream AR model run beside the multi-stream LM.
#[derive(Debug, Clone)]
pub struct SingleStreamBaseline {
    /// Its experiment directory (`recipes/libritts/train_mtp.sh` layout).
    pub exp: PathBuf,
    /// Its AR model directory (default `<exp>/ar`).
    pub model: Option<PathBuf>,
}

/// Everything a multi-stream benchmark runs with.
#[derive(Debug, Clone)]
pub struct MultiStreamBenchSetup<'a> {
    /// The LM, its codec and vocoder, and the engine.
    pub paths: MultiStreamPaths,
    /// The draft of the speculative rows.
    pub draft: Option<PathBuf>,
    /// The recording whose voice every sentence is spoken with.
    pub reference: PathBuf,
    /// The decoders.
    pub grid: MultiStreamGrid,
    /// The split's name.
    pub split: &'a str,
    /// Its manifest, for messages.
    pub manifest: &'a Path,
    /// Every utterance of the split: the first `max_utterances` are spoken, every transcript is
    /// a forced-choice candidate.
    pub split_utterances: &'a [Utterance],
    /// Utterances spoken.
    pub max_utterances: usize,
    /// The CTC teacher of the CER and forced-choice columns.
    pub teacher: &'a CtcTeacher,
    /// The independent recogniser (it needs the clips: they are kept under `audio_dir`).
    pub asr: Option<&'a AsrJudge>,
    /// The sampler.
    pub sampler: SamplerConfig,
    /// Seed of the first utterance.
    pub seed: u64,
    /// The single-stream AR model, when it runs too (a last row).
    pub baseline: Option<SingleStreamBaseline>,
    /// Where the clips go for the independent recogniser.
    pub audio_dir: PathBuf,
}

/// What a run reports while it works.
pub struct MultiStreamBenchHooks<'a> {
    /// One unit per utterance and decoder of the multi-stream LM.
    pub progress: &'a dyn Progress,
    /// One unit per utterance of the single-stream AR model.
    pub baseline_progress: &'a dyn Progress,
    /// Told each row's index (from 0), the row count and label before the independent
    /// recogniser scores it.
    pub on_row: &'a mut dyn FnMut(usize, usize, &str),
}

/// Runs the benchmark of `setup` on `device`.
///
/// # Errors
/// [`EvalError::Context`] naming the candidate sentences at fault; the pipeline's, the
/// decoders', the teacher's and the independent recogniser's errors.
pub fn run_multistream_benchmark(
    setup: &MultiStreamBenchSetup<'_>,
    device: &Device,
    hooks: MultiStreamBenchHooks<'_>,
) -> Result<MultiStreamBenchReport> {
    let pipeline = MultiStreamPipeline::load(&setup.paths, device)?;
    let voice = pipeline.voice(&setup.reference)?;
    let utterances: Vec<Utterance> = setup
        .split_utterances
        .iter()
        .take(setup.max_utterances)
        .cloned()
        .collect();
    let candidates = || setup.split_utterances.iter().map(|u| u.text.as_str());
    let judge = Judge::new(setup.teacher, candidates()).map_err(|e| {
        EvalError::from(e).context(format!(
            "the candidate sentences of {}",
            setup.manifest.display()
        ))
    })?;
    let draft = match &setup.draft {
        Some(dir) => Some(load_multistream_draft(dir, &pipeline, device)?),
        None => None,
    };
    let decoders = setup.grid.decoders(&pipeline, draft.as_ref())?;
    let settings = MultiStreamSettings {
        sampler: setup.sampler,
        seed: setup.seed,
        audio_dir: setup.asr.map(|_| setup.audio_dir.clone()),
    };
    let mut rows = run_multistream_bench(
        &pipeline,
        &decoders,
        &voice,
        &utterances,
        &judge,
        &settings,
        hooks.progress,
    )?;
    if let Some(b) = &setup.baseline {
        // Its own folder: its decoder is called "ar" like the multi-stream AR row.
        rows.push(single_stream_row(
            &b.exp,
            b.model.as_deref(),
            &utterances,
            &judge,
            &setup.sampler,
            setup.seed,
            setup.asr.map(|_| setup.audio_dir.join("baseline")),
            device,
            hooks.baseline_progress,
        )?);
    }
    if let Some(asr) = setup.asr {
        let jobs = rayon::current_num_threads();
        let dir = &setup.audio_dir;
        score_multistream_rows(asr, &mut rows, dir, candidates(), jobs, hooks.on_row)?;
    }
    Ok(MultiStreamBenchReport {
        benchmark: "multistream",
        model: setup.paths.model.clone(),
        draft: setup.draft.clone(),
        engine: setup.paths.engine,
        reference: setup.reference.clone(),
        split: setup.split.to_string(),
        threads: rayon::current_num_threads(),
        sampler: (&setup.sampler).into(),
        forced_choice: CandidateCount {
            candidates: judge.candidates(),
            chance: judge.chance(),
        },
        rows,
    })
}

/// The sampler of a multi-stream benchmark, as its report gives it.
#[derive(Debug, Clone, Serialize)]
pub struct MultiStreamSampler {
    /// Sampling temperature.
    pub temperature: f32,
    /// Candidates sampled among (0: all).
    pub top_k: usize,
    /// Nucleus mass.
    pub top_p: f32,
    /// Repetition penalty.
    pub repetition_penalty: f32,
}

impl From<&SamplerConfig> for MultiStreamSampler {
    fn from(s: &SamplerConfig) -> Self {
        Self {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
            repetition_penalty: s.repetition_penalty,
        }
    }
}

/// The forced-choice candidates of the CTC teacher's columns.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateCount {
    /// Candidate sentences.
    pub candidates: usize,
    /// 1 / candidates.
    pub chance: f64,
}

/// The JSON report of `voxspec bench multistream` ([`write_multistream_bench`] writes it with
/// its keys in alphabetical order).
#[derive(Debug, Clone, Serialize)]
pub struct MultiStreamBenchReport {
    /// `"multistream"`.
    pub benchmark: &'static str,
    /// The multi-stream LM's directory.
    pub model: PathBuf,
    /// The draft's directory, when the speculative rows had one.
    pub draft: Option<PathBuf>,
    /// The engine the LM ran on.
    pub engine: EngineKind,
    /// The recording whose voice every sentence was spoken with.
    pub reference: PathBuf,
    /// The split whose sentences were spoken.
    pub split: String,
    /// Worker threads.
    pub threads: usize,
    /// The sampler of the multi-stream rows.
    pub sampler: MultiStreamSampler,
    /// The CTC teacher's candidates.
    pub forced_choice: CandidateCount,
    /// One row per decoder, the single-stream AR row last.
    pub rows: Vec<MultiStreamRow>,
}

impl MultiStreamBenchReport {
    /// The markdown table of the rows with the forced-choice chance line.
    pub fn markdown(&self) -> String {
        let dash = || "—".to_string();
        let mut md = String::from(
            "| system | decoder | LM RTF | ms/frame | speedup | frames/forward | acceptance | \
             CER (%) | ID (%) | WER, ASR (%) | ID, ASR (%) |\n\
             |---|---|---|---|---|---|---|---|---|---|---|\n",
        );
        for r in &self.rows {
            md.push_str(&format!(
                "| {} | {} | {:.3} | {:.2} | {} | {:.2} | {} | {} | {} | {} | {} |\n",
                r.system,
                r.decoder,
                r.lm_rtf,
                r.ms_per_frame,
                if r.system == MULTISTREAM {
                    format!("{:.2}x", r.speedup_vs_frame_ar)
                } else {
                    dash()
                },
                r.frames_per_forward,
                r.acceptance.map_or_else(dash, |a| format!("{a:.2}")),
                r.cer.map_or_else(dash, |c| format!("{:.1}", 100.0 * c)),
                r.forced_choice
                    .map_or_else(dash, |c| format!("{:.1}", 100.0 * c)),
                r.asr.as_ref().map_or_else(dash, |a| a.wer_text()),
                r.asr.as_ref().map_or_else(dash, |a| format!(
                    "{:.1} ± {:.1}",
                    100.0 * a.forced_choice,
                    100.0 * a.forced_choice_se
                )),
            ));
        }
        md.push_str(&format!(
            "\nforced choice among {} sentences (chance {:.1} %)\n",
            self.forced_choice.candidates,
            100.0 * self.forced_choice.chance
        ));
        md
    }
}

/// Writes `report` into `dir` (created when missing) as `bench-multistream.json` and the
/// markdown table `bench-multistream.md`; returns their paths and the table.
///
/// # Errors
/// [`EvalError::Io`], [`EvalError::Json`] or [`EvalError::Data`] naming the file.
pub fn write_multistream_bench(
    dir: &Path,
    report: &MultiStreamBenchReport,
) -> Result<(PathBuf, PathBuf, String)> {
    std::fs::create_dir_all(dir).map_err(|e| EvalError::io("creating", dir, e))?;
    let json = dir.join("bench-multistream.json");
    write_report_sorted(&json, report)?;
    let md = report.markdown();
    let md_path = dir.join("bench-multistream.md");
    voxspec_data::write_atomic(&md_path, md.as_bytes())?;
    Ok((json, md_path, md))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_multistream_rows_show_a_speedup() {
        let row = |system: &str| MultiStreamRow {
            system: system.into(),
            decoder: "ar".into(),
            lm_rtf: 0.5,
            ms_per_frame: 2.0,
            speedup_vs_frame_ar: 1.0,
            frames_per_forward: 1.0,
            cer: Some(0.1),
            forced_choice: Some(0.5),
            ..MultiStreamRow::default()
        };
        let report = MultiStreamBenchReport {
            benchmark: "multistream",
            model: PathBuf::from("m"),
            draft: None,
            engine: EngineKind::Native,
            reference: PathBuf::from("r.wav"),
            split: "test".into(),
            threads: 1,
            sampler: (&SamplerConfig::default()).into(),
            forced_choice: CandidateCount {
                candidates: 4,
                chance: 0.25,
            },
            rows: vec![row(MULTISTREAM), row("single-stream AR (exp)")],
        };
        let md = report.markdown();
        let lines: Vec<&str> = md.lines().collect();
        assert_eq!(
            lines[2],
            "| multistream | ar | 0.500 | 2.00 | 1.00x | 1.00 | — | 10.0 | 50.0 | — | — |"
        );
        assert_eq!(
            lines[3],
            "| single-stream AR (exp) | ar | 0.500 | 2.00 | — | 1.00 | — | 10.0 | 50.0 | — | — |"
        );
        assert!(
            md.ends_with("forced choice among 4 sentences (chance 25.0 %)\n"),
            "{md}"
        );
    }
}
