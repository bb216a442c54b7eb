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
    // The codes: every output but EOS.
    let codebook = model.vocab_size() as u32 - 1;
    let filler: Vec<u32> = (0..context.saturating_sub(9) as u32)
        .map(|i| i % codebook)
        .collect();
    // An aligned model continues no acoustic prompt: its context is 8 phones whose durations
    // cover every position, prefilled, then the codes as one block.
    let prompt = if aligned {
        let per = (context + max_k + 16).div_ceil(8) as u32;
        TtsPrompt {
            text: vec![1; 8],
            codes: Vec::new(),
            durations: Some(vec![per; 8]),
        }
    } else {
        TtsPrompt::new(vec![1; 8], filler.clone())
    };
    let mut cache = model.new_cache(1, context + max_k + 8)?;
    model.prefill(
        &mut cache,
        std::slice::from_ref(&prompt),
        LogitsRequest::next_token(),
    )?;
    if aligned && !filler.is_empty() {
        model.extend(&mut cache, &[filler], LogitsRequest::next_token())?;
    }
    let base = model.cache_len(&cache, 0);
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
