//! The cost of a KV-cached forward over `k` new tokens relative to one: what MTP and
//! speculative decoding can gain on a model and backend (they pay only if it stays far below
//! `k`). `voxspec bench forward` and `bench decode` report it.

use std::time::Instant;

use voxspec_infer::{InferError, LanguageModel, LogitsRequest, Result};

use crate::lm::TtsPrompt;

/// Median wall time (ms) of one KV-cached forward over `k` new tokens after a `context`-token
/// prompt, for `k = 1..=max_k`, with `repeat` timed runs per `k` (after two warm-up rounds).
/// The `k` values are interleaved within each round so drift in machine load hits all alike.
/// `aligned`: the model takes durations and no acoustic prompt (an aligned [`crate::MtpModel`]).
///
/// # Errors
/// [`InferError::InvalidSetting`] for a zero `max_k` or `repeat`; the model's errors.
pub fn forward_costs<M: LanguageModel<Prompt = TtsPrompt>>(
    model: &M,
    aligned: bool,
    context: usize,
    max_k: usize,
    repeat: usize,
) -> Result<Vec<f64>> {
    if max_k == 0 || repeat == 0 {
        return Err(InferError::InvalidSetting {
            name: "max_k and repeat",
            value: format!("{max_k} and {repeat}"),
            expected: "at least 1 each".into(),
        });
    }
    let codebook = model.vocab_size() as u32 - 1;
    let (mut cache, base) = prefilled(model, aligned, context, max_k)?;
    let mut times: Vec<Vec<f64>> = vec![Vec::with_capacity(repeat); max_k];
    for rep in 0..repeat + 2 {
        for k in 1..=max_k {
            let block: Vec<u32> = (0..k as u32).map(|i| (i * 7) % codebook).collect();
            let t = Instant::now();
            model.extend(&mut cache, &[block], LogitsRequest::next_token())?;
            let elapsed = t.elapsed().as_secs_f64() * 1e3;
            model.truncate(&mut cache, 0, base)?;
            if rep >= 2 {
                times[k - 1].push(elapsed);
            }
        }
    }
    Ok(times
        .into_iter()
        .map(|mut v| {
            v.sort_by(f64::total_cmp);
            v[v.len() / 2]
        })
        .collect())
}

/// A cache holding a `context`-token prompt (8 text tokens and codes) with room for `extra`
/// more positions, and its length.
fn prefilled<M: LanguageModel<Prompt = TtsPrompt>>(
    model: &M,
    aligned: bool,
    context: usize,
    extra: usize,
) -> Result<(M::Cache, usize)> {
    // The codes: every output but EOS.
    let codebook = model.vocab_size() as u32 - 1;
    let filler: Vec<u32> = (0..context.saturating_sub(9) as u32)
        .map(|i| i % codebook)
        .collect();
    // An aligned model continues no acoustic prompt: its context is 8 phones whose durations
    // cover every position, prefilled, then the codes as one block.
    let prompt = if aligned {
        let per = (context + extra + 16).div_ceil(8) as u32;
        TtsPrompt {
            text: vec![1; 8],
            codes: Vec::new(),
            durations: Some(vec![per; 8]),
        }
    } else {
        TtsPrompt::new(vec![1; 8], filler.clone())
    };
    let mut cache = model.new_cache(1, context + extra + 8)?;
    model.prefill(
        &mut cache,
        std::slice::from_ref(&prompt),
        LogitsRequest::next_token(),
    )?;
    if aligned && !filler.is_empty() {
        model.extend(&mut cache, &[filler], LogitsRequest::next_token())?;
    }
    let base = model.cache_len(&cache, 0);
    Ok((cache, base))
}

/// Median wall time (ms) per token of greedy decoding, the loop of a `generate` call: one
/// single-token cached forward, the argmax of its next-token scores over the codes (EOS never
/// ends it), fed back, `tokens` times after a `context`-token prompt; `repeat` timed runs after
/// one warm-up run. The comparable figure of transformers' greedy `generate` is what
/// `tools/bench_forward_peer.py` reports.
///
/// # Errors
/// [`InferError::InvalidSetting`] for a zero `tokens` or `repeat`; the model's errors.
pub fn greedy_ms_per_token<M: LanguageModel<Prompt = TtsPrompt>>(
    model: &M,
    aligned: bool,
    context: usize,
    tokens: usize,
    repeat: usize,
) -> Result<f64> {
    if tokens == 0 || repeat == 0 {
        return Err(InferError::InvalidSetting {
            name: "tokens and repeat",
            value: format!("{tokens} and {repeat}"),
            expected: "at least 1 each".into(),
        });
    }
    let codebook = model.vocab_size() - 1;
    let (mut cache, base) = prefilled(model, aligned, context, tokens)?;
    let mut times = Vec::with_capacity(repeat);
    for rep in 0..=repeat {
        model.truncate(&mut cache, 0, base)?;
        let mut next = 0u32;
        let t = Instant::now();
        for _ in 0..tokens {
            let logits = model.extend(&mut cache, &[vec![next]], LogitsRequest::next_token())?;
            let row = &logits.row(0, 0, 0)[..codebook];
            next = row
                .iter()
                .enumerate()
                .max_by(|a, b| a.1.total_cmp(b.1))
                .map_or(0, |(i, _)| i as u32);
        }
        if rep > 0 {
            times.push(t.elapsed().as_secs_f64() * 1e3 / tokens as f64);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
