//! What the decoders sample, checked statistically on a model with fixed scores: AR and
//! independent MTP heads draw from their own head's distribution, and sampled Viterbi with one
//! head emits the most likely of `top_k` candidates drawn without replacement (the sharpening
//! the paper trades diversity for).

use std::sync::Arc;

use voxspec_infer::{
    ArDecoder, Decoder, InferError, LanguageModel, Limits, Logits, LogitsRequest, MtpDecoder,
    Request, SamplerConfig, Transitions, TransitionsConfig, ViterbiConfig, check_blocks,
};

/// Every call returns the same scores: head `h` has `probs[h]` as its distribution.
struct FixedLm {
    probs: Vec<Vec<f32>>,
    /// A vocabulary size to claim that differs from the rows' (a broken model).
    claimed_vocab: Option<usize>,
}

impl FixedLm {
    fn logits(&self, batch: usize, request: LogitsRequest) -> Result<Logits, InferError> {
        let row: Vec<f32> = self.probs[..request.heads]
            .iter()
            .flat_map(|p| p.iter().map(|x| x.ln()))
            .collect();
        Logits::new(
            row.repeat(batch),
            [batch, 1, request.heads, self.probs[0].len()],
        )
    }
}

impl LanguageModel for FixedLm {
    type Prompt = ();
    type Cache = Vec<usize>;

    fn vocab_size(&self) -> usize {
        self.claimed_vocab.unwrap_or(self.probs[0].len())
    }
    fn n_heads(&self) -> usize {
        self.probs.len()
    }
    fn eos_token(&self) -> Option<u32> {
        None
    }
    fn prompt_len(&self, _: &()) -> usize {
        1
    }
    fn new_cache(&self, batch: usize, _: usize) -> Result<Vec<usize>, InferError> {
        Ok(vec![0; batch])
    }
    fn prefill(
        &self,
        cache: &mut Vec<usize>,
        prompts: &[()],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        cache.iter_mut().for_each(|l| *l = 1);
        self.logits(prompts.len(), request)
    }
    fn extend(
        &self,
        cache: &mut Vec<usize>,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> Result<Logits, InferError> {
        check_blocks(blocks, cache.len(), self.vocab_size())?;
        for (len, block) in cache.iter_mut().zip(blocks) {
            *len += block.len();
        }
        // last_only is all these decoders ask for
        self.logits(blocks.len(), request)
    }
    fn cache_len(&self, cache: &Vec<usize>, b: usize) -> usize {
        cache[b]
    }
    fn truncate(&self, cache: &mut Vec<usize>, b: usize, len: usize) -> Result<(), InferError> {
        cache[b] = len;
        Ok(())
    }
}

const N: usize = 40_000;

fn requests(max_tokens: usize) -> Vec<Request<()>> {
    (0..N as u64)
        .map(|seed| Request {
            prompt: (),
            limits: Limits::max(max_tokens),
            seed,
        })
        .collect()
}

/// Frequencies of the token at `position` over all generations.
fn frequencies<D: Decoder<FixedLm>>(
    decoder: &mut D,
    model: &FixedLm,
    max_tokens: usize,
    position: usize,
) -> Vec<f64> {
    let out = decoder
        .generate(model, &requests(max_tokens), &SamplerConfig::default())
        .unwrap();
    let mut counts = vec![0.0; model.vocab_size()];
    for g in &out {
        counts[g.tokens[position] as usize] += 1.0;
    }
    counts.iter().map(|c| c / N as f64).collect()
}

fn assert_near(got: &[f64], want: &[f64]) {
    for (g, w) in got.iter().zip(want) {
        // 4 standard errors of a frequency estimated from N draws
        let tol = 4.0 * (w * (1.0 - w) / N as f64).sqrt() + 1e-9;
        assert!((g - w).abs() <= tol, "got {got:?}, want {want:?}");
    }
}

fn model() -> FixedLm {
    FixedLm {
        probs: vec![vec![0.5, 0.3, 0.2], vec![0.1, 0.2, 0.7]],
        claimed_vocab: None,
    }
}

#[test]
fn ar_and_independent_heads_draw_from_their_own_head() {
    let m = model();
    assert_near(&frequencies(&mut ArDecoder, &m, 1, 0), &[0.5, 0.3, 0.2]);
    let mut mtp = MtpDecoder::new(2).unwrap();
    assert_near(&frequencies(&mut mtp, &m, 2, 0), &[0.5, 0.3, 0.2]);
    assert_near(&frequencies(&mut mtp, &m, 2, 1), &[0.1, 0.2, 0.7]);
    // The next block comes from head 0 again.
    assert_near(&frequencies(&mut mtp, &m, 3, 2), &[0.5, 0.3, 0.2]);
}

#[test]
fn sampled_viterbi_emits_the_best_of_top_k_candidates() {
    let m = model();
    let q = Arc::new(
        Transitions::from_sequences([&[0u32, 1, 2][..]], 3, &TransitionsConfig::default()).unwrap(),
    );
    // One head: candidates {0, 1} with probability 0.5·0.3/0.5 + 0.3·0.5/0.7, {0, 2} with
    // 0.5·0.2/0.5 + 0.2·0.5/0.8, {1, 2} with 0.3·0.2/0.7 + 0.2·0.3/0.8; the best of each set is
    // emitted, so token 0 comes out with the probability of the first two sets.
    let p01 = 0.5 * 0.3 / 0.5 + 0.3 * 0.5 / 0.7;
    let p02 = 0.5 * 0.2 / 0.5 + 0.2 * 0.5 / 0.8;
    let p12 = 0.3 * 0.2 / 0.7 + 0.2 * 0.3 / 0.8;
    assert!((p01 + p02 + p12 - 1.0f64).abs() < 1e-12);
    let mut vit = MtpDecoder::with_viterbi(1, ViterbiConfig::new(2), q.clone()).unwrap();
    assert_near(&frequencies(&mut vit, &m, 1, 0), &[p01 + p02, p12, 0.0]);
    // top_k = 1: plain sampling; top_k = 3 (the whole vocabulary): always the mode.
    let mut one = MtpDecoder::with_viterbi(1, ViterbiConfig::new(1), q.clone()).unwrap();
    assert_near(&frequencies(&mut one, &m, 1, 0), &[0.5, 0.3, 0.2]);
    let mut all = MtpDecoder::with_viterbi(1, ViterbiConfig::new(3), q).unwrap();
    assert_near(&frequencies(&mut all, &m, 1, 0), &[1.0, 0.0, 0.0]);
}

#[test]
fn logits_of_the_wrong_shape_are_an_error() {
    let m = FixedLm {
        claimed_vocab: Some(4),
        ..model()
    };
    let reqs = &requests(2)[..3];
    let greedy = SamplerConfig::greedy();
    for err in [
        ArDecoder.generate(&m, reqs, &greedy).unwrap_err(),
        MtpDecoder::new(2)
            .unwrap()
            .generate(&m, reqs, &greedy)
            .unwrap_err(),
    ] {
        assert!(matches!(err, InferError::Model(_)), "{err}");
        assert!(
            err.to_string().contains("[3, 1, 1, 3]") || err.to_string().contains("[3, 1, 2, 3]"),
            "{err}"
        );
    }
}
