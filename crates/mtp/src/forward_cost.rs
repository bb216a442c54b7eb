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
/// The prompt of the timing helpers and the filler codes of a `context`-token context. An
/// aligned model continues no acoustic prompt: its prompt is 8 phones whose durations cover
/// `context + extra` positions, and the filler is fed after it as one block; a plain model
/// takes the filler as its acoustic prompt.
fn bench_prompt<M: LanguageModel<Prompt = TtsPrompt>>(
    model: &M,
    aligned: bool,
    context: usize,
    extra: usize,
) -> (TtsPrompt, Vec<u32>) {
    // The codes: every output but EOS.
    let codebook = model.vocab_size() as u32 - 1;
    let filler: Vec<u32> = (0..context.saturating_sub(9) as u32)
        .map(|i| i % codebook)
        .collect();
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
    (prompt, filler)
}

fn prefilled<M: LanguageModel<Prompt = TtsPrompt>>(
    model: &M,
    aligned: bool,
    context: usize,
    extra: usize,
) -> Result<(M::Cache, usize)> {
    let (prompt, filler) = bench_prompt(model, aligned, context, extra);
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

/// A model whose prefill calls are timed: what [`decode_ms_per_token`] leaves out. Every
/// other call goes to the inner model unchanged.
pub struct PrefillTimed<'a, M> {
    inner: &'a M,
    prefill: std::cell::Cell<std::time::Duration>,
}

impl<'a, M> PrefillTimed<'a, M> {
    /// Wraps `inner` with a zero prefill time.
    pub fn new(inner: &'a M) -> Self {
        Self {
            inner,
            prefill: std::cell::Cell::new(std::time::Duration::ZERO),
        }
    }

    /// Wall time spent in prefill calls since the last [`reset`](Self::reset).
    pub fn prefill_time(&self) -> std::time::Duration {
        self.prefill.get()
    }

    /// Sets the prefill time back to zero.
    pub fn reset(&self) {
        self.prefill.set(std::time::Duration::ZERO);
    }
}

impl<M: LanguageModel> LanguageModel for PrefillTimed<'_, M> {
    type Prompt = M::Prompt;
    type Cache = M::Cache;

    fn vocab_size(&self) -> usize {
        self.inner.vocab_size()
    }

    fn n_heads(&self) -> usize {
        self.inner.n_heads()
    }

    fn eos_token(&self) -> Option<u32> {
        self.inner.eos_token()
    }

    fn prompt_len(&self, prompt: &Self::Prompt) -> usize {
        self.inner.prompt_len(prompt)
    }

    fn new_cache(&self, batch: usize, capacity: usize) -> Result<Self::Cache> {
        self.inner.new_cache(batch, capacity)
    }

    fn prefill(
        &self,
        cache: &mut Self::Cache,
        prompts: &[Self::Prompt],
        request: LogitsRequest,
    ) -> Result<voxspec_infer::Logits> {
        let t = Instant::now();
        let logits = self.inner.prefill(cache, prompts, request);
        self.prefill.set(self.prefill.get() + t.elapsed());
        logits
    }

    fn extend(
        &self,
        cache: &mut Self::Cache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<voxspec_infer::Logits> {
        self.inner.extend(cache, blocks, request)
    }

    fn cache_len(&self, cache: &Self::Cache, b: usize) -> usize {
        self.inner.cache_len(cache, b)
    }

    fn truncate(&self, cache: &mut Self::Cache, b: usize, len: usize) -> Result<()> {
        self.inner.truncate(cache, b, len)
    }
}

/// Median wall time per generated token (ms) of `decoder` producing exactly `tokens` tokens
/// (end of speech masked until then) after a `context`-token prompt, prefill excluded, over
/// `repeat` timed runs after one warm-up: the decoding speed of a real decoder (AR, MTP with
/// Viterbi, speculative) on a model of this shape, whatever its weights. Sampling as
/// `sampler` says. An aligned model's prompt is 8 text tokens whose durations cover the
/// tokens asked for, so it decodes after those 8 positions, not after `context`.
///
/// # Errors
/// [`InferError::InvalidSetting`] for a zero `tokens` or `repeat`; the decoder's and the
/// model's errors.
pub fn decode_ms_per_token<M, D>(
    model: &M,
    decoder: &mut D,
    aligned: bool,
    context: usize,
    tokens: usize,
    repeat: usize,
    sampler: &voxspec_infer::SamplerConfig,
) -> Result<f64>
where
    M: LanguageModel<Prompt = TtsPrompt>,
    D: for<'a> voxspec_infer::Decoder<PrefillTimed<'a, M>> + ?Sized,
{
    if tokens == 0 || repeat == 0 {
        return Err(InferError::InvalidSetting {
            name: "tokens and repeat",
            value: format!("{tokens} and {repeat}"),
            expected: "at least 1 each".into(),
        });
    }
    let (prompt, _) = bench_prompt(model, aligned, context, tokens);
    let request = voxspec_infer::Request {
        prompt,
        limits: voxspec_infer::Limits {
            min_tokens: tokens,
            max_tokens: tokens,
        },
        seed: 0,
    };
    let timed = PrefillTimed::new(model);
    let mut times = Vec::with_capacity(repeat);
    for rep in 0..=repeat {
        timed.reset();
        let t = Instant::now();
        let out = decoder.generate(&timed, std::slice::from_ref(&request), sampler)?;
        let elapsed = t.elapsed().saturating_sub(timed.prefill_time());
        let produced = out.first().map_or(0, |g| g.tokens.len());
        if produced != tokens {
            return Err(InferError::Model(format!(
                "the decoder produced {produced} tokens, {tokens} were asked for"
            )));
        }
        if rep > 0 {
            times.push(elapsed.as_secs_f64() * 1e3 / tokens as f64);
        }
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
