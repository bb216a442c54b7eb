//! Tests of [`FrameMtpDecoder`] on the toy [`TableFrameLm`], with heads made by rolling the
//! toy out: an *oracle* whose head `i` holds the scores greedy AR sees `i` steps later.

use std::sync::Arc;

use super::layout::{Layout, Slot};
use super::*;
use crate::error::InferError;
use crate::transitions::{Transitions, TransitionsConfig};
use crate::viterbi::ViterbiConfig;

/// The toy with `heads` heads: head `i` after a prefix holds the scores after the prefix
/// extended by `i` greedy columns (forced positions, EOS and `min_frames` as the layout of
/// `request` says); with `noise`, heads `1..` hold noise instead (wrong but well-formed).
struct OracleHeads<'a> {
    inner: &'a TableFrameLm,
    layout: Layout,
    heads: usize,
    noise: bool,
}

impl<'a> OracleHeads<'a> {
    fn new(inner: &'a TableFrameLm, request: &FrameRequest<Vec<u32>>, heads: usize) -> Self {
        Self {
            inner,
            layout: Layout::new(inner, request).unwrap(),
            heads,
            noise: false,
        }
    }
}

struct OracleCache {
    inner: TableFrameCache,
    prompt: Vec<u32>,
}

impl FrameModel for OracleHeads<'_> {
    type Prompt = Vec<u32>;
    type Cache = OracleCache;

    fn streams(&self) -> usize {
        self.inner.streams()
    }
    fn vocab(&self) -> usize {
        self.inner.vocab()
    }
    fn delays(&self) -> Vec<usize> {
        self.inner.delays()
    }
    fn new_cache(&self, prompt: &Vec<u32>, capacity: usize) -> crate::Result<OracleCache> {
        Ok(OracleCache {
            inner: self.inner.new_cache(prompt, capacity)?,
            prompt: prompt.clone(),
        })
    }
    fn prefill(
        &self,
        cache: &mut OracleCache,
        prompt: &Vec<u32>,
        columns: &[Vec<u32>],
    ) -> crate::Result<FrameLogits> {
        self.inner.prefill(&mut cache.inner, prompt, columns)
    }
    fn extend(&self, cache: &mut OracleCache, columns: &[Vec<u32>]) -> crate::Result<FrameLogits> {
        self.inner.extend(&mut cache.inner, columns)
    }
    fn steps(&self, cache: &OracleCache) -> usize {
        self.inner.steps(&cache.inner)
    }
    fn truncate(&self, cache: &mut OracleCache, steps: usize) -> crate::Result<()> {
        self.inner.truncate(&mut cache.inner, steps)
    }
    fn heads(&self) -> usize {
        self.heads
    }
    fn head_logits(&self, cache: &OracleCache, heads: usize) -> crate::Result<FrameLogits> {
        let (k, vocab, layout) = (self.streams(), self.vocab(), &self.layout);
        let greedy = SamplerConfig::greedy();
        let mut rng = crate::sampler::seeded_rng(0);
        let mut columns = cache.inner.columns().to_vec();
        let (mut end, mut history) = (None, vec![Vec::new(); k]);
        for (s, column) in columns.iter().enumerate() {
            layout.finish_column(s, column, &mut end);
            layout.record(s, column, end, &mut history);
        }
        let mut data = Vec::with_capacity(heads * k * vocab);
        for i in 0..heads {
            let scores = self.inner.scores_after(&cache.prompt, &columns);
            if self.noise && i > 0 {
                data.extend((0..k * vocab).map(|v| ((v * 7 + i * 3) % 11) as f32 * 0.3));
            } else {
                data.extend_from_slice(&scores);
            }
            let step = columns.len();
            let raw: Vec<u32> = (0..k)
                .map(|j| match layout.slot(j, step, end) {
                    Slot::Forced(id) => id,
                    Slot::Free { frame } => greedy.draw(
                        &scores[j * vocab..(j + 1) * vocab],
                        &history[j],
                        layout.banned(j, frame),
                        &mut rng,
                    ),
                })
                .collect();
            let column = layout.finish_column(step, &raw, &mut end);
            layout.record(step, &column, end, &mut history);
            columns.push(column);
        }
        FrameLogits::new(data, heads, k, vocab)
    }
}

fn delay_sets() -> Vec<Vec<usize>> {
    vec![vec![0, 0, 0], vec![0, 1, 2], vec![0, 2, 4], vec![1, 1, 3]]
}

fn prompt_codes(k: usize, p: usize, codebook: u32) -> Vec<Vec<u32>> {
    (0..k)
        .map(|j| {
            (0..p)
                .map(|f| (3 * j as u32 + 5 * f as u32) % codebook)
                .collect()
        })
        .collect()
}

/// Uniform transitions (no counts, add-1 smoothing): Viterbi then maximises each position's
/// own score, which is what AR does.
fn uniform(vocab: usize, k: usize) -> Vec<Arc<Transitions>> {
    let q = Transitions::from_sequences(
        std::iter::empty::<&[u32]>(),
        vocab,
        &TransitionsConfig::default(),
    )
    .unwrap();
    let q = Arc::new(q);
    (0..k).map(|_| Arc::clone(&q)).collect()
}

fn requests() -> Vec<FrameRequest<Vec<u32>>> {
    [0, 3]
        .into_iter()
        .flat_map(|p| {
            (0..3).map(move |seed| {
                FrameRequest::new(vec![2, 4, seed], 14, seed as u64)
                    .with_codes(prompt_codes(3, p, 6))
                    .with_min_frames(p + 2)
            })
        })
        .collect()
}

#[test]
fn one_head_is_ar_greedy_and_sampled() {
    let sampled = SamplerConfig::default();
    let penalised = SamplerConfig {
        repetition_penalty: 1.5,
        ..SamplerConfig::greedy()
    };
    for delays in delay_sets() {
        let model = TableFrameLmConfig::new(3, 6, 0)
            .with_delays(delays.clone())
            .with_sharpness(2.0)
            .init()
            .unwrap();
        for request in requests() {
            let heads = OracleHeads::new(&model, &request, 1);
            for sampler in [SamplerConfig::greedy(), penalised, sampled] {
                let ar = FrameArDecoder::new()
                    .generate(&model, &request, &sampler)
                    .unwrap();
                let mtp = FrameMtpDecoder::new(1)
                    .unwrap()
                    .generate(&heads, &request, &sampler)
                    .unwrap();
                assert_eq!(mtp.columns, ar.columns, "{delays:?} {sampler:?}");
                assert_eq!(mtp.frames, ar.frames);
                assert_eq!(mtp.stop, ar.stop);
                assert_eq!(mtp.stats.target_forwards, ar.stats.target_forwards);
            }
            let viterbi = FrameMtpDecoder::with_viterbi(1, ViterbiConfig::new(3), uniform(7, 3))
                .unwrap()
                .generate(&heads, &request, &SamplerConfig::greedy())
                .unwrap();
            let ar = FrameArDecoder::new()
                .generate(&model, &request, &SamplerConfig::greedy())
                .unwrap();
            assert_eq!(viterbi.columns, ar.columns, "viterbi {delays:?}");
        }
    }
}

/// Oracle heads make MTP reproduce greedy AR in `⌈steps / n⌉` forwards. Viterbi with uniform
/// transitions maximises each position's own score, so it does too, as long as end-of-sequence
/// is never a candidate (an EOS candidate ends the path, and the positions after it score
/// nothing: the path may end earlier than AR; see `crate::mtp`).
#[test]
fn oracle_heads_give_greedy_ar_in_fewer_forwards() {
    let (mut eos, mut max) = (0, 0);
    for delays in delay_sets() {
        for (sharp, eos_bias) in [(2.0, -2.0), (6.0, -2.0), (3.0, -100.0)] {
            let model = TableFrameLmConfig::new(3, 6, 0)
                .with_delays(delays.clone())
                .with_sharpness(sharp)
                .with_eos(eos_bias, 0.4)
                .init()
                .unwrap();
            for request in requests() {
                let ar = FrameArDecoder::new()
                    .generate(&model, &request, &SamplerConfig::greedy())
                    .unwrap();
                match ar.stop {
                    FrameStop::Eos => eos += 1,
                    FrameStop::MaxFrames => max += 1,
                }
                for n in [2, 3, 5] {
                    let heads = OracleHeads::new(&model, &request, n);
                    let name = format!("{delays:?} sharp {sharp} n {n} seed {}", request.seed);
                    let mut decoders = vec![FrameMtpDecoder::new(n).unwrap()];
                    if eos_bias < -50.0 {
                        decoders.push(
                            FrameMtpDecoder::with_viterbi(n, ViterbiConfig::new(2), uniform(7, 3))
                                .unwrap(),
                        );
                    }
                    for decoder in decoders {
                        let out = decoder
                            .generate(&heads, &request, &SamplerConfig::greedy())
                            .unwrap();
                        assert_eq!(out.columns, ar.columns, "{name} {:?}", decoder.viterbi());
                        assert_eq!(out.stop, ar.stop, "{name}");
                        // The prefill and one forward per block but the last (never fed).
                        let blocks = ar.stats.steps.div_ceil(n);
                        assert_eq!(out.stats.target_forwards, blocks, "{name}");
                        assert!(out.stats.accepted_steps <= out.stats.drafted_steps);
                    }
                }
            }
        }
    }
    assert!(eos > 0 && max > 0, "both endings: {eos} {max}");
}

#[test]
fn noisy_heads_change_the_output_but_keep_the_layout() {
    let model = TableFrameLmConfig::new(3, 6, 0)
        .with_delays(vec![0, 1, 2])
        .with_sharpness(4.0)
        .init()
        .unwrap();
    let mut differs = 0;
    for request in requests() {
        let ar = FrameArDecoder::new()
            .generate(&model, &request, &SamplerConfig::greedy())
            .unwrap();
        let mut heads = OracleHeads::new(&model, &request, 3);
        heads.noise = true;
        let out = FrameMtpDecoder::new(3)
            .unwrap()
            .generate(&heads, &request, &SamplerConfig::greedy())
            .unwrap();
        differs += usize::from(out.columns != ar.columns);
        // The prompt is kept, every stream has T frames, S fills the delayed corners.
        let p = request.codes[0].len();
        for (j, row) in out.frames.iter().enumerate() {
            assert_eq!(&row[..p], &request.codes[j][..]);
            assert_eq!(row.len(), out.frames[0].len());
            assert!(row.iter().all(|&c| c < 6));
        }
        assert_eq!(out.columns[0], vec![6, 6, 6]);
    }
    assert!(differs > 0, "noisy heads must matter");
}

#[test]
fn bad_settings_are_refused() {
    let model = TableFrameLmConfig::new(3, 6, 0).init().unwrap();
    let request = FrameRequest::new(vec![1], 8, 0);
    let err = FrameMtpDecoder::new(2)
        .unwrap()
        .generate(&model, &request, &SamplerConfig::greedy())
        .unwrap_err();
    assert!(
        matches!(err, InferError::InvalidSetting { name: "heads", .. }),
        "{err}"
    );
    assert!(FrameMtpDecoder::new(0).is_err());
    let heads = OracleHeads::new(&model, &request, 2);
    let err = FrameMtpDecoder::with_viterbi(2, ViterbiConfig::new(2), uniform(7, 2))
        .unwrap()
        .generate(&heads, &request, &SamplerConfig::greedy())
        .unwrap_err();
    assert!(err.to_string().contains("one per stream"), "{err}");
    let err = FrameMtpDecoder::with_viterbi(2, ViterbiConfig::new(2), uniform(9, 3))
        .unwrap()
        .generate(&heads, &request, &SamplerConfig::greedy())
        .unwrap_err();
    assert!(err.to_string().contains("classes"), "{err}");
}
