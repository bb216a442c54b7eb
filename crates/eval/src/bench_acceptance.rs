//! Offline acceptance rate α of speculative decoding and the expected tokens per target
//! forward, (1 − α^(γ+1)) / (1 − α), from teacher-forced logits on a split's real code
//! sequences — no decoding, one prefill and one extend per model and utterance.
//!
//! The drafter is a draft model, or (self-speculation) each of the target's extra MTP heads
//! drafting for its next-token head. Rules: exact (sd), the SSD tolerance of each β above 0,
//! and PCG when similarity groups are given.

use std::path::Path;
use std::sync::Arc;

use burn::data::dataset::Dataset;
use serde::Serialize;
use voxspec_data::{MissingCodes, TextTokenizer, TokenStore, TtsDataset};
use voxspec_infer::acceptance::{
    ForcedSequence, OfflineAcceptance, teacher_forced, teacher_forced_head,
};
use voxspec_infer::verify::AcceptanceRule;
use voxspec_infer::{SamplerConfig, SimilarityGroups};
use voxspec_mtp::{MtpModel, TtsPrompt};

use crate::error::{EvalError, Result};

/// The rules and draft lengths of one measurement.
#[derive(Debug, Clone)]
pub struct AcceptanceSettings {
    /// Sampling temperature both distributions are taken at (> 0).
    pub temperature: f32,
    /// SSD tolerances, one rule each; 0 is the exact rule.
    pub betas: Vec<f32>,
    /// PCG similarity groups: one more rule when given.
    pub groups: Option<Arc<SimilarityGroups>>,
    /// Draft lengths γ for the expected tokens per step.
    pub gammas: Vec<usize>,
}

/// One drafter under one rule.
#[derive(Debug, Clone, Serialize)]
pub struct AcceptanceRow {
    /// `draft`, or `head<i>` for the target's own head `i`.
    pub drafter: String,
    /// The rule's name.
    pub rule: String,
    /// The rule's tolerance (`None` for PCG).
    pub beta: Option<f32>,
    /// Positions scored.
    pub positions: usize,
    /// Mean acceptance probability.
    pub alpha: f64,
    /// Its standard deviation over positions.
    pub alpha_std: f64,
    /// `(γ, expected tokens per target forward)`.
    pub tokens_per_step: Vec<(usize, f64)>,
}

/// The JSON report of `voxspec bench acceptance` (written with
/// [`crate::write_report_sorted`]).
#[derive(Debug, Clone, Serialize)]
pub struct AcceptanceReport {
    /// `"acceptance"`.
    pub benchmark: &'static str,
    /// The split scored.
    pub split: String,
    /// Utterances scored.
    pub utterances: usize,
    /// The sampling temperature.
    pub temperature: f32,
    /// One row per drafter and rule.
    pub rows: Vec<AcceptanceRow>,
}

/// The teacher-forced sequences of the `split` of the prepared corpus `data` with its codes in
/// the token store `tokens`, the text encoded with the tokenizer of the AR model directory
/// `model` ([`forced_sequences`]; utterances without codes are left out).
///
/// # Errors
/// [`EvalError::Data`] when the tokenizer, the manifest or the codes cannot be read;
/// [`EvalError::Context`] naming the token store that cannot be opened; as
/// [`forced_sequences`].
pub fn split_sequences(
    model: &Path,
    data: &Path,
    tokens: &Path,
    split: &str,
    aligned: bool,
    max: usize,
) -> Result<Vec<ForcedSequence<TtsPrompt>>> {
    let tokenizer = TextTokenizer::load(&model.join("tokenizer.json"))?;
    let utterances = voxspec_data::read_split(data, split)?;
    let store = TokenStore::open(tokens, split)
        .map_err(|e| EvalError::from(e).context(format!("opening the {split} token store")))?;
    let dataset = TtsDataset::new(&utterances, &tokenizer, &store, MissingCodes::Skip)?;
    forced_sequences(&dataset, aligned, max, split)
}

/// The teacher-forced sequences of `dataset` (at most `max`): each utterance's text and its
/// first code stream. A target that is `aligned` takes each utterance's forced-alignment
/// durations, and utterances without one are left out.
///
/// # Errors
/// [`EvalError::Input`] when no utterance of the split (named `split`) is left;
/// [`EvalError::Data`] when an item cannot be read.
pub fn forced_sequences(
    dataset: &TtsDataset,
    aligned: bool,
    max: usize,
    split: &str,
) -> Result<Vec<ForcedSequence<TtsPrompt>>> {
    let mut sequences = Vec::new();
    for i in 0..dataset.len() {
        if sequences.len() >= max {
            break;
        }
        let item = dataset.get(i)?;
        let durations = match (aligned, item.durations) {
            (true, None) => continue,
            (true, d) => d,
            (false, _) => None,
        };
        sequences.push(ForcedSequence {
            prompt: TtsPrompt {
                text: item.text,
                codes: Vec::new(),
                durations,
            },
            tokens: item.codes.stream(0).to_vec(),
        });
    }
    if sequences.is_empty() {
        return Err(EvalError::input(format!(
            "no utterance of the {split} split has codes"
        )));
    }
    Ok(sequences)
}

/// One accumulator per rule of `settings`: the β rules in order, then PCG.
fn rules(settings: &AcceptanceSettings) -> Result<Vec<OfflineAcceptance>> {
    let mut rules = Vec::new();
    for &beta in &settings.betas {
        let rule = if beta == 0.0 {
            AcceptanceRule::Exact
        } else {
            AcceptanceRule::Tolerance { beta }
        };
        rules.push(OfflineAcceptance::new(rule)?);
    }
    if let Some(g) = &settings.groups {
        rules.push(OfflineAcceptance::new(AcceptanceRule::Groups(g.clone()))?);
    }
    Ok(rules)
}

/// Measures α per rule of `settings` on `sequences`: of `draft` for `target` when given, else
/// of each extra head of `target` (self-speculation; it needs more than one head).
///
/// # Errors
/// [`EvalError::Input`] for self-speculation on a one-head target; [`EvalError::Infer`] for
/// a bad setting or a failing model.
pub fn measure_acceptance(
    target: &MtpModel,
    draft: Option<&MtpModel>,
    sequences: &[ForcedSequence<TtsPrompt>],
    settings: &AcceptanceSettings,
) -> Result<Vec<AcceptanceRow>> {
    let sampler = SamplerConfig {
        temperature: settings.temperature,
        ..SamplerConfig::default()
    };
    let mut runs: Vec<(String, Vec<OfflineAcceptance>)> = Vec::new();
    match draft {
        Some(draft) => {
            let mut accs = rules(settings)?;
            teacher_forced(target, draft, sequences, &sampler, &mut accs)?;
            runs.push(("draft".into(), accs));
        }
        None => {
            if target.n_heads() <= 1 {
                return Err(EvalError::input(
                    "the target has one head: self-speculation needs a model trained with more",
                ));
            }
            for head in 1..target.n_heads() {
                let mut accs = rules(settings)?;
                teacher_forced_head(target, head, sequences, &sampler, &mut accs)?;
                runs.push((format!("head{head}"), accs));
            }
        }
    }
    // `betas[i]` labels rule i (None for PCG).
    let mut betas: Vec<Option<f32>> = settings.betas.iter().map(|&b| Some(b)).collect();
    if settings.groups.is_some() {
        betas.push(None);
    }
    let mut rows = Vec::new();
    for (drafter, accs) in runs {
        for (&beta, acc) in betas.iter().zip(accs) {
            rows.push(AcceptanceRow {
                drafter: drafter.clone(),
                rule: acc.rule().name().to_string(),
                beta,
                positions: acc.positions(),
                alpha: acc.mean_alpha().unwrap_or(0.0),
                alpha_std: acc.std_alpha().unwrap_or(0.0),
                tokens_per_step: settings
                    .gammas
                    .iter()
                    .map(|&g| (g, acc.expected_tokens_per_step(g).unwrap_or(1.0)))
                    .collect(),
            });
        }
    }
    Ok(rows)
}

/// The markdown table of `rows`: α and the expected tokens per step at each γ of `gammas`.
pub fn acceptance_markdown(rows: &[AcceptanceRow], gammas: &[usize]) -> String {
    let heads: Vec<String> = gammas.iter().map(|g| format!("E[tokens] γ={g}")).collect();
    let mut s = format!("| drafter | rule | β | α | {} |\n", heads.join(" | "));
    s.push_str(&format!(
        "|---|---|---|---|{}\n",
        "---|".repeat(heads.len())
    ));
    for r in rows {
        let t: Vec<String> = r
            .tokens_per_step
            .iter()
            .map(|(_, t)| format!("{t:.2}"))
            .collect();
        s.push_str(&format!(
            "| {} | {} | {} | {:.3} | {} |\n",
            r.drafter,
            r.rule,
            r.beta.map_or("-".into(), |b| b.to_string()),
            r.alpha,
            t.join(" | ")
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_has_a_column_per_draft_length() {
        let row = AcceptanceRow {
            drafter: "head1".into(),
            rule: "ssd".into(),
            beta: Some(0.2),
            positions: 10,
            alpha: 0.5,
            alpha_std: 0.1,
            tokens_per_step: vec![(2, 1.75), (3, 1.875)],
        };
        let pcg = AcceptanceRow {
            beta: None,
            ..row.clone()
        };
        let table = acceptance_markdown(&[row, pcg], &[2, 3]);
        assert_eq!(
            table,
            "| drafter | rule | β | α | E[tokens] γ=2 | E[tokens] γ=3 |\n\
             |---|---|---|---|---|---|\n\
             | head1 | ssd | 0.2 | 0.500 | 1.75 | 1.88 |\n\
             | head1 | ssd | - | 0.500 | 1.75 | 1.88 |\n"
        );
    }
}
