//! [`ArDecoder`]: the autoregressive baseline, one token per forward pass of the target model.
//!
//! ```text
//! prefill(prompts) ─▶ logits of head 0 at each prompt's end
//! loop: draw one token per active sequence (EOS masked below min_tokens)
//!       EOS or max_tokens ─▶ that sequence stops (its block is empty from then on)
//!       extend(active sequences by their token) ─▶ next logits
//! ```
//!
//! Every sequence has its own random stream (`seeded_rng(request.seed)`) and the model's scores
//! of one sequence do not depend on the others, so a batch yields exactly what decoding each
//! request alone yields. Every other decoder is judged against this one: MTP with one head and
//! speculative decoders at temperature 0 must reproduce it token for token.

use std::time::Instant;

use crate::decoder::{
    Decoder, Generation, ModelCall, Request, Sequence, cache_capacity, check_batch, timed_call,
};
use crate::error::Result;
use crate::lm::{LanguageModel, LogitsRequest};
use crate::sampler::SamplerConfig;

/// The autoregressive baseline: head 0 only, one token per sequence per forward.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArDecoder;

impl ArDecoder {
    /// The decoder (it has no settings).
    pub fn new() -> Self {
        Self
    }
}

impl<M: LanguageModel> Decoder<M> for ArDecoder {
    fn name(&self) -> String {
        "ar".into()
    }

    fn generate(
        &mut self,
        model: &M,
        requests: &[Request<M::Prompt>],
        sampler: &SamplerConfig,
    ) -> Result<Vec<Generation>> {
        check_batch(requests, sampler)?;
        let request = LogitsRequest::heads_at_last(1);
        let mut sequences = Sequence::for_batch(requests, model.eos_token());
        let mut cache = model.new_cache(requests.len(), cache_capacity(model, requests, 0))?;
        let prompts: Vec<M::Prompt> = requests.iter().map(|r| r.prompt.clone()).collect();
        let all = vec![true; requests.len()];
        let (batch, vocab) = (requests.len(), model.vocab_size());
        let mut logits = timed_call(&mut sequences, &all, ModelCall::Target, || {
            model.prefill(&mut cache, &prompts, request)
        })?;
        logits.check(batch, 1, 1, vocab)?;
        loop {
            let mut blocks = vec![Vec::new(); sequences.len()];
            for (b, seq) in sequences.iter_mut().enumerate() {
                if !seq.is_active() {
                    continue;
                }
                let start = Instant::now();
                let banned = seq.banned(0);
                let token = sampler.draw(logits.row(b, 0, 0), &seq.tokens, banned, &mut seq.rng);
                if seq.push(token) && seq.is_active() {
                    blocks[b].push(token);
                }
                seq.stats.decoder_time += start.elapsed();
            }
            let takes_part: Vec<bool> = blocks.iter().map(|b| !b.is_empty()).collect();
            if !takes_part.contains(&true) {
                break;
            }
            logits = timed_call(&mut sequences, &takes_part, ModelCall::Target, || {
                model.extend(&mut cache, &blocks, request)
            })?;
            logits.check(batch, 1, 1, vocab)?;
        }
        tracing::debug!(batch = requests.len(), "ar decoding finished");
        Ok(sequences.into_iter().map(Sequence::finish).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decoder::{Limits, StopReason};
    use crate::toy::TableLmConfig;

    fn request(prompt: Vec<u32>, min: usize, max: usize, seed: u64) -> Request<Vec<u32>> {
        Request {
            prompt,
            limits: Limits {
                min_tokens: min,
                max_tokens: max,
            },
            seed,
        }
    }

    #[test]
    fn greedy_follows_the_argmax_chain() {
        let model = TableLmConfig::new(32, 1).with_eos(None).init().unwrap();
        let out = ArDecoder
            .generate(
                &model,
                &[request(vec![3, 4], 0, 12, 0)],
                &SamplerConfig::greedy(),
            )
            .unwrap();
        let mut history = vec![3, 4];
        for &token in &out[0].tokens {
            let scores = model.scores_after(&history, 1);
            assert_eq!(token, crate::sampler::argmax(&scores));
            history.push(token);
        }
        assert_eq!(out[0].tokens.len(), 12);
        assert_eq!(out[0].stop, StopReason::MaxTokens);
        // prefill + 11 extends: the 12th token is never fed back.
        assert_eq!(out[0].stats.target_forwards, 12);
        assert_eq!(model.forward_calls(), 12);
    }

    #[test]
    fn eos_respects_min_tokens_and_ends_sequences() {
        // A strong EOS bias: EOS is the argmax everywhere, so greedy stops at min_tokens.
        let model = TableLmConfig::new(16, 1)
            .with_eos_bias(100.0)
            .init()
            .unwrap();
        let reqs = [request(vec![1], 0, 8, 0), request(vec![2], 5, 8, 0)];
        let out = ArDecoder
            .generate(&model, &reqs, &SamplerConfig::greedy())
            .unwrap();
        assert_eq!(out[0].tokens.len(), 0);
        assert_eq!(out[0].stop, StopReason::Eos);
        assert_eq!(out[1].tokens.len(), 5);
        assert_eq!(out[1].stop, StopReason::Eos);
        assert!(out[1].tokens.iter().all(|&t| t != 15));
        assert_eq!(out[0].stats.target_forwards, 1);
        assert_eq!(out[1].stats.target_forwards, 6);
    }

    #[test]
    fn bad_batches_are_refused() {
        let model = TableLmConfig::new(16, 1).init().unwrap();
        let greedy = SamplerConfig::greedy();
        assert!(ArDecoder.generate(&model, &[], &greedy).is_err());
        let err = ArDecoder
            .generate(&model, &[request(vec![1], 3, 2, 0)], &greedy)
            .unwrap_err();
        assert!(err.to_string().contains("min_tokens"), "{err}");
    }
}
