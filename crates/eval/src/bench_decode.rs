//! The decode benchmark as one call: loads the models (and AR on a baseline engine), builds the
//! decoders of a [`DecoderGrid`], runs them on a split's sentences
//! ([`voxspec_tts::run_decode_bench`]), scores the rows with the independent recogniser when
//! one is given, and returns the report ([`DecodeBenchReport`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use burn::tensor::Device;
use voxspec_data::{Progress, Utterance};
use voxspec_infer::{SamplerConfig, SimilarityGroups};
use voxspec_teacher::CtcTeacher;
use voxspec_tts::{
    Baseline, BenchSettings, DecoderGrid, DecoderParts, EngineKind, Judge, Lengths, ModelPaths,
    Pipeline, load_draft, run_decode_bench,
};

use crate::decode_report::{
    AsrJudgeInfo, DecodeBaseline, DecodeBenchReport, DecodeModels, ForwardCost, score_decode_rows,
};
use crate::error::{EvalError, Result};
use crate::judge::AsrJudge;

/// Everything a decode benchmark runs with.
#[derive(Debug, Clone)]
pub struct DecodeBenchSetup<'a> {
    /// The decoders.
    pub grid: DecoderGrid,
    /// The models; the rows run on its engine.
    pub paths: ModelPaths,
    /// Weight of the transition matrix in Viterbi decoding.
    pub transition_weight: f32,
    /// The draft model of the speculative rows.
    pub draft: Option<PathBuf>,
    /// Also AR on this engine, right before the decoders on every sentence.
    pub baseline_engine: Option<EngineKind>,
    /// The split's name.
    pub split: &'a str,
    /// Its manifest, for messages.
    pub manifest: &'a Path,
    /// Every utterance of the split: the first `max_utterances` are spoken, every transcript is
    /// a forced-choice candidate.
    pub split_utterances: &'a [Utterance],
    /// Utterances spoken.
    pub max_utterances: usize,
    /// The CTC teacher of the CER and forced-choice columns (none: no such columns).
    pub teacher: Option<&'a CtcTeacher>,
    /// The independent recogniser (it needs the clips: they are kept).
    pub asr: Option<&'a AsrJudge>,
    /// The sampler of every row.
    pub sampler: SamplerConfig,
    /// Length bounds of every request.
    pub lengths: Lengths,
    /// Seed of the first utterance.
    pub seed: u64,
    /// Where the clips go (`<dir>/<row>/`) when kept.
    pub audio_dir: PathBuf,
    /// Keep the clips even without the independent recogniser.
    pub keep_audio: bool,
}

/// What a run reports while it works.
pub struct DecodeBenchHooks<'a> {
    /// One unit per utterance and decoder.
    pub progress: &'a dyn Progress,
    /// Told each set of PCG similarity groups built.
    pub on_groups: &'a mut dyn FnMut(&SimilarityGroups),
    /// Told each row's index (from 0), the row count and label before the independent
    /// recogniser scores it.
    pub on_row: &'a mut dyn FnMut(usize, usize, &str),
}

/// Runs the benchmark of `setup` on `device`.
///
/// # Errors
/// [`EvalError::Input`] when no utterance is left; [`EvalError::Context`] naming the baseline
/// engine or the candidate sentences at fault; the pipeline's, the decoders', the teacher's
/// and the independent recogniser's errors.
pub fn run_decode_benchmark(
    setup: &DecodeBenchSetup<'_>,
    device: &Device,
    hooks: DecodeBenchHooks<'_>,
) -> Result<DecodeBenchReport> {
    let paths = &setup.paths;
    let pipeline = Pipeline::load(paths, device)?;
    let baseline_pipeline = match setup.baseline_engine {
        Some(engine) => {
            let on_engine = ModelPaths {
                engine,
                ..paths.clone()
            };
            let loaded = Pipeline::load(&on_engine, device).map_err(|e| {
                EvalError::from(e).context(format!(
                    "loading the models on the baseline engine {}",
                    engine.name()
                ))
            })?;
            Some((loaded, engine))
        }
        None => None,
    };
    let utterances: Vec<Utterance> = setup
        .split_utterances
        .iter()
        .take(setup.max_utterances)
        .cloned()
        .collect();
    if utterances.is_empty() {
        return Err(EvalError::input(format!(
            "{} has no utterances",
            setup.manifest.display()
        )));
    }
    let candidates = || setup.split_utterances.iter().map(|u| u.text.as_str());
    // Forced choice among every transcript of the split, not only the synthesised ones.
    let judge = match setup.teacher {
        Some(t) => Some(Judge::new(t, candidates()).map_err(|e| {
            EvalError::from(e).context(format!(
                "the candidate sentences of {}",
                setup.manifest.display()
            ))
        })?),
        None => None,
    };

    let mut parts = DecoderParts::default();
    if setup.grid.needs_transitions() {
        parts.load_transitions(&paths.transitions, setup.transition_weight)?;
    }
    if let Some(dir) = &setup.draft {
        parts.draft = Some(load_draft(dir, &pipeline.ar, paths.engine, device)?);
    }
    let (specs, groups): (_, Vec<Arc<SimilarityGroups>>) =
        setup.grid.specs(&pipeline.ar, &mut parts)?;
    for g in &groups {
        (hooks.on_groups)(g);
    }
    let settings = BenchSettings {
        sampler: setup.sampler,
        lengths: setup.lengths,
        seed: setup.seed,
        audio_dir: (setup.asr.is_some() || setup.keep_audio).then(|| setup.audio_dir.clone()),
    };
    let baseline = baseline_pipeline
        .as_ref()
        .map(|(pipeline, engine)| Baseline {
            pipeline,
            engine: engine.name(),
        });
    let mut run = run_decode_bench(
        &pipeline,
        &specs,
        &parts,
        &utterances,
        judge.as_ref(),
        baseline,
        &settings,
        hooks.progress,
    )?;
    if let Some(asr) = setup.asr {
        score_decode_rows(
            asr,
            &mut run,
            &setup.audio_dir,
            candidates(),
            rayon::current_num_threads(),
            hooks.on_row,
        )?;
    }
    Ok(DecodeBenchReport {
        benchmark: "decode",
        split: setup.split.to_string(),
        utterances: utterances.len(),
        threads: rayon::current_num_threads(),
        cpu: voxspec_tts::cpu_model(),
        kernel: voxspec_engine::Kernel::detect().name(),
        engine: paths.engine,
        sampler: (&setup.sampler).into(),
        models: DecodeModels {
            ar: paths.ar.clone(),
            nar: paths.nar.clone(),
            codec: paths.codec.clone(),
            mel_decoder: paths.mel_decoder.clone(),
            vocoder: paths.vocoder.clone(),
            draft: setup.draft.clone(),
        },
        forward_cost: ForwardCost::of(&run.forward_costs),
        forced_choice: judge.as_ref().map(Into::into),
        asr_judge: setup
            .asr
            .map(|a| AsrJudgeInfo::new(a, setup.split_utterances.len())),
        rows: run.rows,
        baseline: run
            .baseline
            .map(|row| DecodeBaseline::new(row, setup.baseline_engine)),
    })
}
