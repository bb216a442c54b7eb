//! [`TableLm`]: a deterministic toy [`LanguageModel`] for tests and for measuring decoder
//! overhead without a network.
//!
//! Its scores are a seeded pseudo-random table indexed by the last one or two tokens of the
//! sequence, computed on demand by hashing (so the vocabulary can be large without storing
//! `V^3` numbers). Head 0 scores the next token; head `i` models the token `i` steps ahead: it
//! follows the greedy chain of head 0 for `i` steps from the current context and returns head
//! 0's scores there, plus per-head noise (`head_noise`), so extra heads agree with the model
//! often but not always — as trained MTP heads do.
//!
//! ```text
//! context (p2, p1) ──head 0──▶ row r0 = table(p2, p1)            (+ eos_bias on EOS)
//!                   greedy a1 = argmax r0 ──▶ r1 = table(p1, a1)   head 1 = r1 + noise_1
//!                   greedy a2 = argmax r1 ──▶ r2 = table(a1, a2)   head 2 = r2 + noise_2
//! ```
//!
//! The cache is each sequence's token history (prompt included); truncation shrinks it. The
//! model counts its forward calls, so tests can check decoders' statistics.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::error::{InferError, Result};
use crate::lm::{LanguageModel, Logits, LogitsRequest, check_blocks};
use crate::sampler::argmax;

/// Context token used before the start of a sequence (outside every vocabulary).
const START: u32 = u32::MAX;

/// Settings of a [`TableLm`].
#[derive(Debug, Clone, PartialEq)]
pub struct TableLmConfig {
    /// Output vocabulary size, end-of-sequence included.
    pub vocab_size: usize,
    /// Prediction heads (1 for a plain LM).
    pub n_heads: usize,
    /// Tokens of context the table is indexed by: 1 (bigram) or 2 (trigram).
    pub context: usize,
    /// End-of-sequence token, if any.
    pub eos: Option<u32>,
    /// Added to the end-of-sequence score; negative values make sequences longer.
    pub eos_bias: f32,
    /// Scores are uniform in `[-sharpness, sharpness)`: larger is more deterministic.
    pub sharpness: f32,
    /// Amplitude of the uniform noise added to heads 1 and beyond; 0 makes them exact greedy
    /// look-ahead.
    pub head_noise: f32,
    /// Seed of the table.
    pub seed: u64,
}

impl Default for TableLmConfig {
    fn default() -> Self {
        Self::new(64, 4)
    }
}

impl TableLmConfig {
    /// A trigram table over `vocab_size` tokens with `n_heads` heads; the last token is
    /// end-of-sequence (biased down by 2), sharpness 4, head noise 1, seed 0.
    pub fn new(vocab_size: usize, n_heads: usize) -> Self {
        Self {
            vocab_size,
            n_heads,
            context: 2,
            eos: vocab_size.checked_sub(1).map(|t| t as u32),
            eos_bias: -2.0,
            sharpness: 4.0,
            head_noise: 1.0,
            seed: 0,
        }
    }

    /// Sets `context`.
    pub fn with_context(mut self, context: usize) -> Self {
        self.context = context;
        self
    }

    /// Sets `eos`.
    pub fn with_eos(mut self, eos: Option<u32>) -> Self {
        self.eos = eos;
        self
    }

    /// Sets `eos_bias`.
    pub fn with_eos_bias(mut self, eos_bias: f32) -> Self {
        self.eos_bias = eos_bias;
        self
    }

    /// Sets `sharpness`.
    pub fn with_sharpness(mut self, sharpness: f32) -> Self {
        self.sharpness = sharpness;
        self
    }

    /// Sets `head_noise`.
    pub fn with_head_noise(mut self, head_noise: f32) -> Self {
        self.head_noise = head_noise;
        self
    }

    /// Sets `seed`.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Checks every field.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] naming the field.
    pub fn validate(&self) -> Result<()> {
        let bad = |name, value: String, expected: &str| {
            Err(InferError::InvalidSetting {
                name,
                value,
                expected: expected.into(),
            })
        };
        if self.vocab_size < 2 || self.vocab_size >= START as usize {
            return bad(
                "vocab_size",
                self.vocab_size.to_string(),
                "at least 2 and below u32::MAX",
            );
        }
        if self.n_heads == 0 {
            return bad("n_heads", "0".into(), "at least 1");
        }
        if !(1..=2).contains(&self.context) {
            return bad("context", self.context.to_string(), "1 or 2");
        }
        if let Some(eos) = self.eos
            && eos as usize >= self.vocab_size
        {
            return bad(
                "eos",
                eos.to_string(),
                &format!("below vocab_size = {}", self.vocab_size),
            );
        }
        for (name, value) in [
            ("eos_bias", self.eos_bias),
            ("sharpness", self.sharpness),
            ("head_noise", self.head_noise),
        ] {
            if !value.is_finite() {
                return bad(name, value.to_string(), "finite");
            }
        }
        if self.sharpness < 0.0 || self.head_noise < 0.0 {
            return bad(
                "sharpness/head_noise",
                format!("{} / {}", self.sharpness, self.head_noise),
                ">= 0",
            );
        }
        Ok(())
    }

    /// Builds the model.
    ///
    /// # Errors
    /// [`InferError::InvalidSetting`] when [`validate`](Self::validate) fails.
    pub fn init(&self) -> Result<TableLm> {
        self.validate()?;
        Ok(TableLm {
            config: self.clone(),
            forward_calls: AtomicUsize::new(0),
        })
    }
}

/// The decoding state of a [`TableLm`]: each sequence's tokens, prompt included.
#[derive(Debug, Clone, PartialEq)]
pub struct TableCache {
    histories: Vec<Vec<u32>>,
    capacity: usize,
}

impl TableCache {
    /// The tokens held for sequence `b` (prompt included).
    pub fn history(&self, b: usize) -> Option<&[u32]> {
        self.histories.get(b).map(Vec::as_slice)
    }

    /// Positions each sequence can hold.
    pub fn capacity(&self) -> usize {
        self.capacity
    }
}

/// A deterministic toy language model with `n_heads` heads (see the module doc).
#[derive(Debug)]
pub struct TableLm {
    config: TableLmConfig,
    forward_calls: AtomicUsize,
}

impl TableLm {
    /// The settings the model was built from.
    pub fn config(&self) -> &TableLmConfig {
        &self.config
    }

    /// Calls of [`prefill`](LanguageModel::prefill) and [`extend`](LanguageModel::extend) so
    /// far.
    pub fn forward_calls(&self) -> usize {
        self.forward_calls.load(Ordering::Relaxed)
    }

    /// Scores of the first `heads` heads after `history` (the whole sequence so far), computed
    /// from scratch: the reference the cached path is checked against.
    ///
    /// # Shapes
    /// - output: `[heads, vocab]` row-major
    pub fn scores_after(&self, history: &[u32], heads: usize) -> Vec<f32> {
        let vocab = self.config.vocab_size;
        let mut out = vec![0.0; heads * vocab];
        self.write_scores(history, &mut out);
        out
    }

    /// Writes `out.len() / vocab` heads of scores after `history` into `out`.
    fn write_scores(&self, history: &[u32], out: &mut [f32]) {
        let vocab = self.config.vocab_size;
        let (mut p2, mut p1) = self.context_of(history);
        let position_key = self.context_key(p2, p1);
        for (head, row) in out.chunks_exact_mut(vocab).enumerate() {
            self.table_row(p2, p1, row);
            // The greedy step of head 0 from this context moves the chain one token ahead.
            let next = argmax(row);
            if head > 0 && self.config.head_noise > 0.0 {
                let noise_key = mix(position_key ^ mix(0x6e6f_6973_6500 + head as u64));
                for (v, score) in row.iter_mut().enumerate() {
                    *score += self.config.head_noise * uniform(noise_key, v);
                }
            }
            (p2, p1) = (if self.config.context == 2 { p1 } else { START }, next);
        }
    }

    /// The (two-token) context the table is indexed by at the end of `history`.
    fn context_of(&self, history: &[u32]) -> (u32, u32) {
        let p1 = history.last().copied().unwrap_or(START);
        let p2 = if self.config.context == 2 && history.len() >= 2 {
            history[history.len() - 2]
        } else {
            START
        };
        (p2, p1)
    }

    fn context_key(&self, p2: u32, p1: u32) -> u64 {
        mix(self
            .config
            .seed
            .wrapping_add(mix((u64::from(p2) << 32) | u64::from(p1))))
    }

    /// Head-0 scores of the context `(p2, p1)`.
    fn table_row(&self, p2: u32, p1: u32, row: &mut [f32]) {
        let key = self.context_key(p2, p1);
        for (v, score) in row.iter_mut().enumerate() {
            *score = self.config.sharpness * uniform(key, v);
        }
        if let Some(eos) = self.config.eos {
            row[eos as usize] += self.config.eos_bias;
        }
    }

    fn check_cache(&self, cache: &TableCache, b: usize) -> Result<()> {
        if b >= cache.histories.len() {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "sequence {b} of a cache of {} sequences",
                    cache.histories.len()
                ),
            });
        }
        Ok(())
    }
}

impl LanguageModel for TableLm {
    type Prompt = Vec<u32>;
    type Cache = TableCache;

    fn vocab_size(&self) -> usize {
        self.config.vocab_size
    }

    fn n_heads(&self) -> usize {
        self.config.n_heads
    }

    fn eos_token(&self) -> Option<u32> {
        self.config.eos
    }

    fn prompt_len(&self, prompt: &Vec<u32>) -> usize {
        prompt.len()
    }

    fn new_cache(&self, batch: usize, capacity: usize) -> Result<TableCache> {
        if batch == 0 {
            return Err(InferError::InvalidRequest {
                detail: "a cache of 0 sequences".into(),
            });
        }
        Ok(TableCache {
            histories: vec![Vec::new(); batch],
            capacity,
        })
    }

    fn prefill(
        &self,
        cache: &mut TableCache,
        prompts: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits> {
        request.check(self.config.n_heads)?;
        if prompts.len() != cache.histories.len() {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "{} prompts for a cache of {} sequences",
                    prompts.len(),
                    cache.histories.len()
                ),
            });
        }
        if let Some(b) = cache.histories.iter().position(|h| !h.is_empty()) {
            return Err(InferError::InvalidRequest {
                detail: format!("prefill on a cache whose sequence {b} is not empty"),
            });
        }
        let vocab = self.config.vocab_size;
        for (b, prompt) in prompts.iter().enumerate() {
            if prompt.len() > cache.capacity {
                return Err(InferError::InvalidRequest {
                    detail: format!(
                        "prompt {b} of {} tokens exceeds the cache capacity {}",
                        prompt.len(),
                        cache.capacity
                    ),
                });
            }
        }
        for (b, prompt) in prompts.iter().enumerate() {
            if let Some(&t) = prompt.iter().find(|&&t| t as usize >= vocab) {
                return Err(InferError::InvalidRequest {
                    detail: format!("token {t} of prompt {b} is outside the vocabulary of {vocab}"),
                });
            }
        }
        self.forward_calls.fetch_add(1, Ordering::Relaxed);
        let row = request.heads * vocab;
        let mut data = vec![0.0; prompts.len() * row];
        for (b, prompt) in prompts.iter().enumerate() {
            cache.histories[b].clone_from(prompt);
            self.write_scores(prompt, &mut data[b * row..(b + 1) * row]);
        }
        Logits::new(data, [prompts.len(), 1, request.heads, vocab])
    }

    fn extend(
        &self,
        cache: &mut TableCache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits> {
        request.check(self.config.n_heads)?;
        let vocab = self.config.vocab_size;
        let longest = check_blocks(blocks, cache.histories.len(), vocab)?;
        // Like the TTS models (whose EOS is an output class without an input embedding), the
        // toy refuses end-of-sequence as input: decoders must never feed it back.
        if let Some(eos) = self.config.eos
            && let Some(b) = blocks.iter().position(|block| block.contains(&eos))
        {
            return Err(InferError::InvalidRequest {
                detail: format!("block {b} feeds end-of-sequence ({eos}) back as input"),
            });
        }
        for (b, block) in blocks.iter().enumerate() {
            let len = cache.histories[b].len() + block.len();
            if len > cache.capacity {
                return Err(InferError::InvalidRequest {
                    detail: format!(
                        "sequence {b} would hold {len} positions, past the cache capacity {}",
                        cache.capacity
                    ),
                });
            }
        }
        self.forward_calls.fetch_add(1, Ordering::Relaxed);
        let positions = if request.last_only { 1 } else { longest };
        let row = request.heads * vocab;
        let mut data = vec![0.0; blocks.len() * positions * row];
        for (b, block) in blocks.iter().enumerate() {
            let history = &mut cache.histories[b];
            let out = &mut data[b * positions * row..(b + 1) * positions * row];
            if request.last_only {
                history.extend_from_slice(block);
                if !block.is_empty() {
                    self.write_scores(history, &mut out[..row]);
                }
            } else {
                for (pos, &token) in block.iter().enumerate() {
                    history.push(token);
                    self.write_scores(history, &mut out[pos * row..(pos + 1) * row]);
                }
            }
        }
        Logits::new(data, [blocks.len(), positions, request.heads, vocab])
    }

    fn cache_len(&self, cache: &TableCache, b: usize) -> usize {
        cache.histories.get(b).map_or(0, Vec::len)
    }

    fn truncate(&self, cache: &mut TableCache, b: usize, len: usize) -> Result<()> {
        self.check_cache(cache, b)?;
        let history = &mut cache.histories[b];
        if len > history.len() {
            return Err(InferError::InvalidRequest {
                detail: format!(
                    "truncate sequence {b} to {len} positions, but it holds {}",
                    history.len()
                ),
            });
        }
        history.truncate(len);
        Ok(())
    }
}

/// SplitMix64's finaliser: a bijective 64-bit mix.
pub(crate) fn mix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A uniform value in `[-1, 1)` for entry `v` of the row keyed by `key`.
pub(crate) fn uniform(key: u64, v: usize) -> f32 {
    let bits = mix(key ^ (v as u64).wrapping_mul(0xd6e8_feb8_6659_fd93)) >> 40;
    (bits as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(heads: usize, noise: f32) -> TableLm {
        TableLmConfig::new(16, heads)
            .with_head_noise(noise)
            .with_seed(3)
            .init()
            .unwrap()
    }

    #[test]
    fn scores_depend_on_the_last_two_tokens_only() {
        let m = model(1, 1.0);
        assert_eq!(m.scores_after(&[1, 2, 3], 1), m.scores_after(&[9, 2, 3], 1));
        assert_ne!(m.scores_after(&[1, 2, 3], 1), m.scores_after(&[1, 4, 3], 1));
        let bigram = TableLmConfig::new(16, 1).with_context(1).init().unwrap();
        assert_eq!(
            bigram.scores_after(&[4, 3], 1),
            bigram.scores_after(&[5, 3], 1)
        );
        let other_seed = TableLmConfig::new(16, 1).with_seed(4).init().unwrap();
        assert_ne!(
            m.scores_after(&[2, 3], 1),
            other_seed.scores_after(&[2, 3], 1)
        );
    }

    #[test]
    fn noiseless_heads_follow_the_greedy_chain() {
        let m = model(3, 0.0);
        let history = vec![5, 7];
        let all = m.scores_after(&history, 3);
        let mut chain = history.clone();
        for head in 0..3 {
            let expected = m.scores_after(&chain, 1);
            assert_eq!(&all[head * 16..(head + 1) * 16], expected.as_slice());
            chain.push(argmax(&expected));
        }
        // With noise, heads 1.. differ from the chain but head 0 does not.
        let noisy = model(3, 1.0).scores_after(&history, 3);
        assert_eq!(noisy[..16], all[..16]);
        assert_ne!(noisy[16..], all[16..]);
    }

    #[test]
    fn cached_extend_equals_scores_from_scratch() {
        let m = model(2, 1.0);
        let mut cache = m.new_cache(2, 10).unwrap();
        let prompts = vec![vec![1, 2], vec![3]];
        let first = m
            .prefill(&mut cache, &prompts, LogitsRequest::heads_at_last(2))
            .unwrap();
        assert_eq!(first.shape(), [2, 1, 2, 16]);
        assert_eq!(first.row(1, 0, 1), &m.scores_after(&[3], 2)[16..]);
        let blocks = vec![vec![4, 5, 6], vec![]];
        let out = m
            .extend(&mut cache, &blocks, LogitsRequest::next_token())
            .unwrap();
        assert_eq!(out.shape(), [2, 3, 1, 16]);
        assert_eq!(
            out.row(0, 1, 0),
            m.scores_after(&[1, 2, 4, 5], 1).as_slice()
        );
        assert_eq!((m.cache_len(&cache, 0), m.cache_len(&cache, 1)), (5, 1));
        m.truncate(&mut cache, 0, 3).unwrap();
        assert_eq!(cache.history(0), Some(&[1, 2, 4][..]));
        assert_eq!(m.forward_calls(), 2);
    }

    #[test]
    fn bad_calls_are_refused() {
        let m = model(2, 1.0);
        let mut cache = m.new_cache(1, 4).unwrap();
        let req = LogitsRequest::heads_at_last(3);
        assert!(m.prefill(&mut cache, &[vec![1]], req).is_err());
        let req = LogitsRequest::heads_at_last(1);
        assert!(m.prefill(&mut cache, &[vec![16]], req).is_err());
        m.prefill(&mut cache, &[vec![1, 2]], req).unwrap();
        assert!(m.prefill(&mut cache, &[vec![1]], req).is_err());
        assert!(m.extend(&mut cache, &[vec![]], req).is_err());
        assert!(m.extend(&mut cache, &[vec![1, 2, 3]], req).is_err());
        assert!(m.truncate(&mut cache, 0, 3).is_err());
        assert!(m.truncate(&mut cache, 1, 0).is_err());
        assert!(TableLmConfig::new(16, 1).with_eos(Some(16)).init().is_err());
    }
}
