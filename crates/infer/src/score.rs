//! Scoring generated sequences under a model: the negative log-likelihood a target model gives
//! the tokens a decoder emitted, the quality proxy the benchmark reports next to speed (a
//! decoder that drifts from the target's distribution raises it).

use crate::error::{InferError, Result};
use crate::lm::{LanguageModel, LogitsRequest};
use crate::sampler::log_softmax;

/// Total negative log-likelihood (nats) of a scored sequence and the tokens it covers.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct SequenceNll {
    /// `−Σ log p(token | prefix)` at temperature 1 under head 0.
    pub total: f64,
    /// Tokens scored (end-of-sequence included when it was scored).
    pub tokens: usize,
}

impl SequenceNll {
    /// Mean NLL per token (`None` for an empty sequence).
    pub fn mean(&self) -> Option<f64> {
        (self.tokens > 0).then(|| self.total / self.tokens as f64)
    }

    /// Adds another sequence's totals.
    pub fn merge(&mut self, other: SequenceNll) {
        self.total += other.total;
        self.tokens += other.tokens;
    }
}

/// Teacher-forced NLL of `tokens` after `prompt` under `model`'s next-token head, with
/// end-of-sequence scored after the last token when `with_eos` (a generation that stopped at
/// EOS) and the model has one. One prefill and one extend.
///
/// # Errors
/// [`InferError::InvalidRequest`] for a token outside the vocabulary, and model errors.
pub fn sequence_nll<M: LanguageModel>(
    model: &M,
    prompt: &M::Prompt,
    tokens: &[u32],
    with_eos: bool,
) -> Result<SequenceNll> {
    let vocab = model.vocab_size();
    let mut targets = tokens.to_vec();
    if with_eos && let Some(eos) = model.eos_token() {
        targets.push(eos);
    }
    if let Some(&bad) = targets.iter().find(|&&t| t as usize >= vocab) {
        return Err(InferError::InvalidRequest {
            detail: format!("token {bad} is outside the vocabulary of {vocab}"),
        });
    }
    if targets.is_empty() {
        return Ok(SequenceNll::default());
    }
    let capacity = model.prompt_len(prompt) + targets.len() + 1;
    let mut cache = model.new_cache(1, capacity)?;
    let first = model.prefill(
        &mut cache,
        std::slice::from_ref(prompt),
        LogitsRequest::next_token(),
    )?;
    let mut total = -f64::from(log_softmax(first.row(0, 0, 0), 1.0)[targets[0] as usize]);
    // Position j of the extend predicts targets[j + 1]; the last target is never fed back.
    let fed = &targets[..targets.len() - 1];
    if !fed.is_empty() {
        let logits = model.extend(&mut cache, &[fed.to_vec()], LogitsRequest::next_token())?;
        for (j, &t) in targets[1..].iter().enumerate() {
            total -= f64::from(log_softmax(logits.row(0, j, 0), 1.0)[t as usize]);
        }
    }
    Ok(SequenceNll {
        total,
        tokens: targets.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::toy::TableLmConfig;

    #[test]
    fn nll_is_the_sum_of_per_step_log_probabilities() {
        let model = TableLmConfig::new(16, 1)
            .with_eos(Some(15))
            .with_seed(3)
            .init()
            .unwrap();
        let prompt = vec![2, 7];
        let tokens = [4, 9, 1, 12];
        let nll = sequence_nll(&model, &prompt, &tokens, true).unwrap();
        let mut history = prompt.clone();
        let mut expected = 0.0f64;
        for &t in tokens.iter().chain([15].iter()) {
            let lp = log_softmax(&model.scores_after(&history, 1), 1.0);
            expected -= f64::from(lp[t as usize]);
            history.push(t);
        }
        assert_eq!(nll.tokens, 5);
        assert!(
            (nll.total - expected).abs() < 1e-4,
            "{} vs {expected}",
            nll.total
        );
        let without = sequence_nll(&model, &prompt, &tokens, false).unwrap();
        assert_eq!(without.tokens, 4);
        assert!(without.total < nll.total);
    }

    #[test]
    fn empty_and_out_of_vocabulary_sequences() {
        let model = TableLmConfig::new(8, 1).with_eos(None).init().unwrap();
        let nll = sequence_nll(&model, &vec![1], &[], true).unwrap();
        assert_eq!(nll.mean(), None);
        let err = sequence_nll(&model, &vec![1], &[3, 8], false).unwrap_err();
        assert!(err.to_string().contains("token 8"), "{err}");
    }
}
