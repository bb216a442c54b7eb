//! The decode benchmark: every decoder on the same sentences in one run — speed (time per token,
//! speedup over AR measured alongside, tokens per forward, acceptance) and quality proxies (CER of
//! the synthesised audio by the CTC teacher, forced-choice sentence identification among every
//! candidate transcript by the same teacher, the target's NLL of the generated codes).
//!
//! Utterances are the outer loop and decoders the inner one, so a change in machine load during
//! the run hits every decoder alike; each decoder sees the same seed per utterance. A
//! [`Baseline`] adds AR on a second engine (Burn beside the native engine, say) to the same
//! loop, so the engines are compared sentence by sentence too. This module returns rows;
//! rendering them (JSON, markdown, plots) is the caller's.

use std::sync::Arc;

use serde::Serialize;
use voxspec_data::{Progress, Utterance};
use voxspec_infer::{
    DecodeStats, Decoder, Request, SamplerConfig, SequenceNll, SimilarityGroups, StopReason,
    sequence_nll,
};
use voxspec_mtp::{MtpModel, TtsPrompt, forward_costs};
use voxspec_teacher::ctc::{ForcedChoice, LengthNorm};
use voxspec_teacher::{CtcTeacher, ErrorCounts, SemanticTeacher};

use crate::decoders::{DecoderParts, DecoderSpec, GroupsAt, RuleSpec};
use crate::engine::ArEngine;
use crate::error::{Result, TtsError};
use crate::pipeline::{Lengths, Pipeline};

/// The decoders of a benchmark: AR, MTP over head counts (with and without Viterbi), and
/// speculative rows over draft lengths and acceptance rules.
#[derive(Debug, Clone, PartialEq)]
pub struct DecoderGrid {
    /// MTP head counts k (k = 1 is the AR baseline, always the first row).
    pub heads: Vec<usize>,
    /// Viterbi candidates per head (one row per value and k ≥ 2); empty: no Viterbi rows.
    pub top_k: Vec<usize>,
    /// Draft lengths γ of the speculative rows.
    pub gammas: Vec<usize>,
    /// SSD tolerances; 0 is exact speculative sampling.
    pub betas: Vec<f32>,
    /// PCG rows at these thresholds θ.
    pub thetas: Vec<f32>,
    /// PCG rows at the θ of these mean group sizes.
    pub group_sizes: Vec<f64>,
    /// Rows with a separate draft model ([`DecoderParts::draft`] must be set).
    pub draft: bool,
    /// Self-speculative rows: the AR model's own MTP heads draft.
    pub self_spec: bool,
}

impl Default for DecoderGrid {
    fn default() -> Self {
        Self {
            heads: vec![1, 2, 4, 8],
            top_k: vec![3, 5, 9, 15],
            gammas: vec![2, 3, 4],
            betas: vec![0.0, 0.1, 0.2, 0.3, 0.4],
            thetas: Vec::new(),
            group_sizes: vec![4.5, 10.3],
            draft: false,
            self_spec: false,
        }
    }
}

impl DecoderGrid {
    /// Checks every setting, naming the one at fault.
    ///
    /// # Errors
    /// [`TtsError::Bench`] for a zero head count, top-k or γ, a θ outside (−1, 1), a negative or
    /// non-finite β, a mean group size below 1.
    pub fn validate(&self) -> Result<()> {
        let bad = |what: &str, reason: String| {
            Err(TtsError::Bench {
                what: what.into(),
                reason,
            })
        };
        if self.heads.is_empty() || self.heads.contains(&0) {
            return bad("heads", "needs values of at least 1".into());
        }
        if self.top_k.contains(&0) {
            return bad("top-k", "values must be at least 1".into());
        }
        if self.gammas.contains(&0) {
            return bad(
                "gammas",
                "values must be at least 1 (γ = 0 drafts nothing)".into(),
            );
        }
        if let Some(t) = self.thetas.iter().find(|t| !(**t > -1.0 && **t < 1.0)) {
            return bad("thetas", format!("θ = {t} is outside (−1, 1)"));
        }
        if let Some(b) = self.betas.iter().find(|b| !(b.is_finite() && **b >= 0.0)) {
            return bad("betas", format!("β = {b} must be finite and at least 0"));
        }
        if let Some(s) = self
            .group_sizes
            .iter()
            .find(|s| !(s.is_finite() && **s >= 1.0))
        {
            return bad(
                "group-sizes",
                format!("{s} is not a mean group size (at least 1)"),
            );
        }
        Ok(())
    }

    /// Whether some row decodes with Viterbi (then [`DecoderParts::transitions`] is needed).
    pub fn needs_transitions(&self) -> bool {
        self.heads.iter().any(|&k| k > 1) && !self.top_k.is_empty()
    }

    /// The rows' specifications, AR first. PCG groups are built into `parts` from `target`'s
    /// code embeddings; the groups of this grid are returned too (for reporting their sizes).
    ///
    /// # Errors
    /// The settings' ([`DecoderGrid::validate`]), the group builder's, or a missing draft.
    pub fn specs(
        &self,
        target: &MtpModel,
        parts: &mut DecoderParts,
    ) -> Result<(Vec<DecoderSpec>, Vec<Arc<SimilarityGroups>>)> {
        self.validate()?;
        let mut specs = vec![DecoderSpec::Ar];
        let multi: Vec<usize> = self.heads.iter().copied().filter(|&k| k > 1).collect();
        specs.extend(multi.iter().map(|&heads| DecoderSpec::Mtp { heads }));
        if self.needs_transitions() {
            for &heads in &multi {
                for &top_k in &self.top_k {
                    specs.push(DecoderSpec::MtpViterbi { heads, top_k });
                }
            }
        }
        let mut built = Vec::new();
        if !(self.draft || self.self_spec) {
            return Ok((specs, built));
        }
        if self.draft && parts.draft.is_none() {
            return Err(TtsError::Bench {
                what: "draft".into(),
                reason: "the grid has draft rows but no draft model was loaded".into(),
            });
        }
        let mut rules: Vec<RuleSpec> = self
            .betas
            .iter()
            .map(|&beta| {
                if beta == 0.0 {
                    RuleSpec::Sd
                } else {
                    RuleSpec::Ssd { beta }
                }
            })
            .collect();
        let at = self
            .thetas
            .iter()
            .map(|&t| GroupsAt::Theta(t))
            .chain(self.group_sizes.iter().map(|&s| GroupsAt::MeanSize(s)));
        for at in at {
            let (rule, groups) = parts.add_groups(target, at)?;
            if !rules.contains(&rule) {
                rules.push(rule);
                built.push(groups);
            }
        }
        let mut add = |make: fn(RuleSpec, usize) -> DecoderSpec| {
            for &gamma in &self.gammas {
                for rule in &rules {
                    specs.push(make(rule.clone(), gamma));
                }
            }
        };
        if self.draft {
            add(|rule, gamma| DecoderSpec::Speculative { rule, gamma });
        }
        if self.self_spec {
            add(|rule, gamma| DecoderSpec::SelfSpec { rule, gamma });
        }
        Ok((specs, built))
    }
}

/// The quality judge of a benchmark: the CTC teacher and the candidate sentences of forced
/// choice (every transcript of the split, not only the synthesised ones).
pub struct Judge<'a> {
    teacher: &'a CtcTeacher,
    set: ForcedChoice,
}

impl<'a> Judge<'a> {
    /// The judge choosing among `candidates` with `teacher`.
    ///
    /// # Errors
    /// The teacher's, for candidates its tokenizer cannot spell.
    pub fn new<'t>(
        teacher: &'a CtcTeacher,
        candidates: impl IntoIterator<Item = &'t str>,
    ) -> Result<Self> {
        let set = ForcedChoice::new(teacher.tokenizer(), candidates, LengthNorm::default())?;
        Ok(Self { teacher, set })
    }

    /// Number of candidate sentences.
    pub fn candidates(&self) -> usize {
        self.set.len()
    }

    /// Accuracy of guessing: 1 / candidates.
    pub fn chance(&self) -> f64 {
        self.set.chance()
    }

    /// How candidate likelihoods are normalised for length.
    pub fn length_norm(&self) -> LengthNorm {
        self.set.length_norm()
    }

    /// Judges one clip of `transcript` (which must be a candidate) at `rate` Hz: the
    /// teacher's character errors against it, and whether forced choice picks it out. A clip
    /// shorter than `min_samples` has nothing to hear: every character deleted, not identified.
    ///
    /// # Errors
    /// [`TtsError::Bench`] when the transcript is not a candidate; the teacher's errors.
    pub fn judge(
        &self,
        transcript: &str,
        samples: &[f32],
        rate: u32,
        min_samples: usize,
    ) -> Result<(ErrorCounts, bool)> {
        let own = self
            .set
            .position(self.teacher.tokenizer(), transcript)?
            .ok_or_else(|| TtsError::Bench {
                what: format!("{transcript:?}"),
                reason: "the transcript is not among the candidates".into(),
            })?;
        let reference = self.teacher.normalize(transcript)?;
        if samples.len() < min_samples.max(1) {
            return Ok((ErrorCounts::between("", &reference), false));
        }
        let resampled;
        let wave = if self.teacher.sample_rate() == rate {
            samples
        } else {
            resampled = voxspec_audio::resample(samples, rate, self.teacher.sample_rate())?;
            &resampled
        };
        let verdict = self
            .teacher
            .forced_choice(&self.set, &[wave], &[own])?
            .pop()
            .ok_or_else(|| TtsError::Bench {
                what: format!("{transcript:?}"),
                reason: "the teacher gave no verdict".into(),
            })?;
        Ok((verdict.errors, verdict.choice.identified))
    }
}

/// Settings of one benchmark run.
#[derive(Debug, Clone)]
pub struct BenchSettings {
    /// Sampler of every decoder.
    pub sampler: SamplerConfig,
    /// Length bounds of every request.
    pub lengths: Lengths,
    /// Seed of the first utterance (utterance i uses seed + i).
    pub seed: u64,
    /// Keep the audio: every decoder's clips go to `<dir>/<row>/<utterance id>.wav`, each
    /// with its transcript in `<utterance id>.txt` beside it (a folder `voxspec eval
    /// intelligibility --dir` and `tools/asr_judge.py --dir` read), `<row>` from
    /// [`row_dir_name`].
    pub audio_dir: Option<std::path::PathBuf>,
}

/// The folder name of a row's clips under [`BenchSettings::audio_dir`]: its label with every
/// character other than letters, digits, `.`, `_` and `-` replaced by `-` (`mtp k=8 top3` →
/// `mtp-k-8-top3`).
pub fn row_dir_name(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        let keep = c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
        let c = if keep { c } else { '-' };
        if !(c == '-' && out.ends_with('-')) {
            out.push(c);
        }
    }
    out.trim_matches('-').to_string()
}

/// One row's intelligibility by the independent recogniser (`tools/asr_judge.py`), filled in
/// by the caller after the run from the clips in [`BenchSettings::audio_dir`].
#[derive(Debug, Clone, Serialize)]
pub struct AsrScore {
    /// Clips scored.
    pub clips: usize,
    /// Open-vocabulary word error rate.
    pub wer: f64,
    /// Its standard error with the clips (sentences) as the sampled units; `None` from a judge
    /// that does not report it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wer_se: Option<f64>,
    /// Open-vocabulary character error rate.
    pub cer: f64,
    /// Share of clips whose own transcript the constrained recogniser picked among the
    /// candidates.
    pub forced_choice: f64,
    /// Its binomial standard error, `sqrt(p (1 − p) / clips)`.
    pub forced_choice_se: f64,
}

impl AsrScore {
    /// The WER in percent with its standard error when known: `54.7 ± 2.3`.
    pub fn wer_text(&self) -> String {
        match self.wer_se {
            Some(se) => format!("{:.1} ± {:.1}", 100.0 * self.wer, 100.0 * se),
            None => format!("{:.1}", 100.0 * self.wer),
        }
    }
}

/// One decoder's results over the utterances.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeRow {
    /// The decoder.
    #[serde(flatten)]
    pub spec: DecoderSpec,
    /// Its label ([`DecoderSpec::label`]).
    pub label: String,
    /// Utterances decoded.
    pub utterances: usize,
    /// Codes generated (end of speech not counted).
    pub tokens: usize,
    /// Time per token of the AR stage, ms.
    pub tpt_ms: f64,
    /// AR TPT divided by this TPT (same run).
    pub speedup: f64,
    /// The part of the TPT spent inside model calls (target and draft), ms per token.
    pub model_ms_per_token: f64,
    /// The part spent in the decoder's own work (sampling, Viterbi, verification), ms per
    /// token; the rest of the TPT is the decoder's bookkeeping between the two.
    pub decoder_ms_per_token: f64,
    /// AR-stage wall time / audio duration.
    pub lm_rtf: f64,
    /// Emitted tokens (end of speech included) per target forward (prefill included): 1 for
    /// AR.
    pub tokens_per_forward: f64,
    /// Forwards of the target model.
    pub target_forwards: usize,
    /// Forwards of the draft model.
    pub draft_forwards: usize,
    /// Accepted / drafted tokens of the speculative decoders.
    pub acceptance_rate: Option<f64>,
    /// Rejection-sampling trials of PCG's residual.
    pub thinning_trials: usize,
    /// Sequences that ended at end of speech (the rest hit the length limit).
    pub eos_stops: usize,
    /// Character error rate of the teacher's transcripts (with a judge).
    pub cer: Option<f64>,
    /// Forced-choice accuracy: the fraction of utterances whose own sentence has the highest
    /// CTC likelihood among all candidates (chance: 1 / candidates).
    pub forced_choice: Option<f64>,
    /// The independent recogniser's scores, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asr: Option<AsrScore>,
    /// Mean per-token NLL of the generated codes under the target.
    pub nll: Option<f64>,
}

/// AR decoding on a second engine, run on every sentence right before the decoders of the
/// benchmark's own pipeline: the engines' comparison measured in the same run.
#[derive(Clone, Copy)]
pub struct Baseline<'a> {
    /// The same models loaded on the other engine.
    pub pipeline: &'a Pipeline,
    /// Its engine's name, for the row's label (`ar [burn]`).
    pub engine: &'a str,
}

/// What a benchmark run measured.
#[derive(Debug, Clone)]
pub struct DecodeReport {
    /// One row per decoder, AR first.
    pub rows: Vec<DecodeRow>,
    /// AR on the [`Baseline`] engine, when one was given: its `speedup` is this run's AR TPT
    /// divided by its TPT (below 1 when the baseline is slower).
    pub baseline: Option<DecodeRow>,
    /// Median time of a forward over k = 1.. new tokens at a 96-token context, ms.
    pub forward_costs: Vec<f64>,
}

/// Totals of one decoder over the utterances.
#[derive(Debug, Default, Clone)]
struct Tally {
    utterances: usize,
    tokens: usize,
    ar_seconds: f64,
    audio_seconds: f64,
    stats: DecodeStats,
    eos_stops: usize,
    errors: ErrorCounts,
    /// Utterances whose sentence the teacher picked out of the candidates.
    identified: usize,
    nll: SequenceNll,
}

impl Tally {
    fn tpt_ms(&self) -> f64 {
        if self.tokens == 0 {
            0.0
        } else {
            1e3 * self.ar_seconds / self.tokens as f64
        }
    }
}

/// Tokens per forward the longest row needs a forward over (the forward-cost sweep's k).
fn widest_block(specs: &[DecoderSpec]) -> usize {
    specs
        .iter()
        .map(|s| match s {
            DecoderSpec::Ar => 1,
            DecoderSpec::Mtp { heads } | DecoderSpec::MtpViterbi { heads, .. } => *heads,
            DecoderSpec::Speculative { gamma, .. } | DecoderSpec::SelfSpec { gamma, .. } => {
                gamma + 1
            }
        })
        .max()
        .unwrap_or(1)
}

/// Runs every decoder of `specs` (built from `parts`) on `utterances` (their transcripts as
/// text), scoring the audio with `judge` when given, and AR on the `baseline` engine's pipeline
/// before them on each sentence when one is given; `progress` sees one unit per utterance and
/// decoder.
///
/// # Errors
/// [`TtsError::Bench`] when there are no utterances or the first row is not AR, or an
/// utterance is not among the judge's candidates; the pipeline's and the teacher's errors.
#[allow(clippy::too_many_arguments)]
pub fn run_decode_bench(
    pipeline: &Pipeline,
    specs: &[DecoderSpec],
    parts: &DecoderParts,
    utterances: &[Utterance],
    judge: Option<&Judge>,
    baseline: Option<Baseline<'_>>,
    settings: &BenchSettings,
    progress: &dyn Progress,
) -> Result<DecodeReport> {
    if utterances.is_empty() {
        return Err(TtsError::Bench {
            what: "utterances".into(),
            reason: "none to synthesise".into(),
        });
    }
    if specs.first() != Some(&DecoderSpec::Ar) {
        return Err(TtsError::Bench {
            what: "decoders".into(),
            reason: "the first row must be AR: speedups are measured against it".into(),
        });
    }
    let mut decoders = specs
        .iter()
        .map(|s| parts.build(s, &pipeline.lm))
        .collect::<Result<Vec<Box<dyn Decoder<ArEngine>>>>>()?;
    let mut baseline_decoder = match baseline {
        Some(b) => Some(DecoderParts::default().build(&DecoderSpec::Ar, &b.pipeline.lm)?),
        None => None,
    };
    // Every transcript must be a candidate: checked before any decoding.
    if let Some(j) = judge {
        for u in utterances {
            if j.set.position(j.teacher.tokenizer(), &u.text)?.is_none() {
                return Err(TtsError::Bench {
                    what: format!("utterance {}", u.id),
                    reason: "its transcript is not among the candidates".into(),
                });
            }
        }
    }
    let mut tallies = vec![Tally::default(); specs.len()];
    let mut baseline_tally = Tally::default();
    let row_dir = |label: String| {
        settings
            .audio_dir
            .as_ref()
            .map(|d| d.join(row_dir_name(&label)))
    };
    let dirs: Vec<Option<std::path::PathBuf>> = specs.iter().map(|s| row_dir(s.label())).collect();
    let baseline_dir = baseline.and_then(|b| row_dir(format!("ar [{}]", b.engine)));
    for dir in dirs.iter().chain([&baseline_dir]).flatten() {
        std::fs::create_dir_all(dir).map_err(|e| TtsError::Bench {
            what: format!("audio folder {}", dir.display()),
            reason: e.to_string(),
        })?;
    }
    progress.start(
        (utterances.len() * (specs.len() + usize::from(baseline.is_some()))) as u64,
        "decoding (utterances × decoders)",
    );
    for (i, u) in utterances.iter().enumerate() {
        let text = pipeline.text_ids(&u.text).map_err(|e| TtsError::Bench {
            what: format!("utterance {}", u.id),
            reason: e.to_string(),
        })?;
        let request = pipeline.request(&text, None, &settings.lengths, settings.seed + i as u64)?;
        let sentence = Sentence {
            id: &u.id,
            text: &text,
            transcript: &u.text,
            request: &request,
            judge,
            settings,
        };
        if let (Some(b), Some(decoder)) = (baseline, baseline_decoder.as_mut()) {
            let dir = baseline_dir.as_deref();
            sentence.run(b.pipeline, decoder.as_mut(), &mut baseline_tally, dir)?;
            progress.inc(1);
        }
        for ((tally, decoder), dir) in tallies.iter_mut().zip(decoders.iter_mut()).zip(&dirs) {
            sentence.run(pipeline, decoder.as_mut(), tally, dir.as_deref())?;
            progress.inc(1);
        }
    }
    progress.finish();

    // Cost of a forward over k new tokens relative to one, on this model.
    let forward_costs = forward_costs(
        &pipeline.lm,
        pipeline.ar.is_aligned(),
        96,
        widest_block(specs),
        10,
    )?;
    let ar_tpt = tallies[0].tpt_ms();
    let rows = specs
        .iter()
        .zip(&tallies)
        .map(|(spec, t)| t.row(spec, spec.label(), ar_tpt, judge.is_some()))
        .collect();
    let baseline = baseline.map(|b| {
        baseline_tally.row(
            &DecoderSpec::Ar,
            format!("ar [{}]", b.engine),
            ar_tpt,
            judge.is_some(),
        )
    });
    Ok(DecodeReport {
        rows,
        baseline,
        forward_costs,
    })
}

/// One sentence of the benchmark, as every decoder speaks it.
struct Sentence<'a> {
    id: &'a str,
    text: &'a [u32],
    transcript: &'a str,
    request: &'a Request<TtsPrompt>,
    judge: Option<&'a Judge<'a>>,
    settings: &'a BenchSettings,
}

impl Sentence<'_> {
    /// Synthesises the sentence with `decoder` on `pipeline` and adds the result to `tally`
    /// (the codes' NLL under the pipeline's AR model); with `audio_dir`, keeps the clip and its
    /// transcript there.
    fn run(
        &self,
        pipeline: &Pipeline,
        decoder: &mut dyn Decoder<ArEngine>,
        tally: &mut Tally,
        audio_dir: Option<&std::path::Path>,
    ) -> Result<()> {
        let out = pipeline.synthesize(
            decoder,
            self.request,
            self.text,
            None,
            &self.settings.sampler,
        )?;
        if let Some(dir) = audio_dir {
            let audio = voxspec_audio::Audio::new(out.samples.clone(), pipeline.sample_rate());
            voxspec_audio::write_wav(
                &dir.join(format!("{}.wav", self.id)),
                &audio,
                voxspec_audio::WavFormat::Pcm16,
            )?;
            let txt = dir.join(format!("{}.txt", self.id));
            std::fs::write(&txt, self.transcript).map_err(|e| TtsError::Bench {
                what: format!("transcript {}", txt.display()),
                reason: e.to_string(),
            })?;
        }
        let g = &out.generation;
        tally.utterances += 1;
        tally.tokens += g.tokens.len();
        tally.ar_seconds += out.ar_seconds;
        tally.audio_seconds += out.samples.len() as f64 / f64::from(pipeline.sample_rate());
        tally.stats.merge(&g.stats);
        let eos = g.stop == StopReason::Eos;
        tally.eos_stops += usize::from(eos);
        tally.nll.merge(sequence_nll(
            &pipeline.ar,
            &self.request.prompt,
            &g.tokens,
            eos,
        )?);
        if let Some(j) = self.judge {
            let min = pipeline.codec_config.hop_length();
            let (errors, identified) =
                j.judge(self.transcript, &out.samples, pipeline.sample_rate(), min)?;
            tally.errors += errors;
            tally.identified += usize::from(identified);
        }
        Ok(())
    }
}

impl Tally {
    /// The row of `spec` (labelled `label`) against the run's AR TPT `ar_tpt`.
    fn row(&self, spec: &DecoderSpec, label: String, ar_tpt: f64, judged: bool) -> DecodeRow {
        let tpt = self.tpt_ms();
        let tokens = self.tokens.max(1) as f64;
        DecodeRow {
            spec: spec.clone(),
            label,
            utterances: self.utterances,
            tokens: self.tokens,
            tpt_ms: tpt,
            speedup: if tpt > 0.0 { ar_tpt / tpt } else { 0.0 },
            model_ms_per_token: 1e3 * self.stats.model_time.as_secs_f64() / tokens,
            decoder_ms_per_token: 1e3 * self.stats.decoder_time.as_secs_f64() / tokens,
            lm_rtf: self.ar_seconds / self.audio_seconds.max(1e-9),
            tokens_per_forward: (self.tokens + self.eos_stops) as f64
                / self.stats.target_forwards.max(1) as f64,
            target_forwards: self.stats.target_forwards,
            draft_forwards: self.stats.draft_forwards,
            acceptance_rate: self.stats.acceptance_rate(),
            thinning_trials: self.stats.thinning_trials,
            eos_stops: self.eos_stops,
            cer: judged.then(|| self.errors.rate()),
            forced_choice: judged.then(|| self.identified as f64 / self.utterances.max(1) as f64),
            asr: None,
            nll: self.nll.mean(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn row_folders_are_plain_names() {
        assert_eq!(row_dir_name("mtp k=8 top3"), "mtp-k-8-top3");
        assert_eq!(row_dir_name("ar [burn]"), "ar-burn");
        assert_eq!(row_dir_name("self ssd β=0.4 γ=3"), "self-ssd-0.4-3");
    }

    #[test]
    fn the_widest_block_covers_heads_and_verification_blocks() {
        let specs = [
            DecoderSpec::Ar,
            DecoderSpec::Mtp { heads: 4 },
            DecoderSpec::SelfSpec {
                rule: RuleSpec::Sd,
                gamma: 5,
            },
        ];
        assert_eq!(widest_block(&specs), 6);
        assert_eq!(widest_block(&specs[..2]), 4);
        assert_eq!(widest_block(&[]), 1);
    }

    #[test]
    fn the_grid_refuses_each_bad_setting_by_name() {
        type Spoil = fn(&mut DecoderGrid);
        let cases: [(&str, Spoil); 6] = [
            ("heads", |g| g.heads = vec![0]),
            ("top-k", |g| g.top_k = vec![0]),
            ("gammas", |g| g.gammas = vec![0]),
            ("thetas", |g| g.thetas = vec![1.0]),
            ("betas", |g| g.betas = vec![-0.1]),
            ("group-sizes", |g| g.group_sizes = vec![0.5]),
        ];
        for (field, spoil) in cases {
            let mut grid = DecoderGrid::default();
            grid.validate().unwrap();
            spoil(&mut grid);
            match grid.validate() {
                Err(TtsError::Bench { what, .. }) => assert_eq!(what, field),
                other => panic!("{field}: expected a Bench error, got {other:?}"),
            }
        }
    }
}
