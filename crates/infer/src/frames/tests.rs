//! Behavioural tests of the frame decoders on the toy [`TableFrameLm`].

use std::collections::HashMap;
use std::sync::Arc;

use super::layout::Layout;
use super::speculative::ColumnRule;
use super::*;
use crate::error::InferError;
use crate::groups::SimilarityGroups;
use crate::sampler::{RasConfig, argmax};
use crate::speculative::SpeculativeConfig;
use crate::verify::AcceptanceRule;

fn codes(k: usize, p: usize, codebook: usize, seed: u32) -> Vec<Vec<u32>> {
    (0..k)
        .map(|j| {
            (0..p)
                .map(|f| (seed + 3 * j as u32 + 7 * f as u32) % codebook as u32)
                .collect()
        })
        .collect()
}

fn spec(
    draft: &TableFrameLmConfig,
    gamma: usize,
    rule: AcceptanceRule,
) -> FrameSpeculativeDecoder<TableFrameLm> {
    FrameSpeculativeDecoder::new(draft.init().unwrap(), SpeculativeConfig::new(gamma, rule))
        .unwrap()
}

fn rules(vocab: usize) -> Vec<AcceptanceRule> {
    let lists: Vec<Vec<u32>> = (0..vocab as u32)
        .map(|t| vec![t, (t + 1) % vocab as u32])
        .collect();
    let groups = SimilarityGroups::from_lists(vocab, 0.5, &lists).unwrap();
    vec![
        AcceptanceRule::Exact,
        AcceptanceRule::Tolerance { beta: 0.4 },
        AcceptanceRule::Typical {
            eps: 0.09,
            delta: 0.3,
        },
        AcceptanceRule::Groups(Arc::new(groups)),
    ]
}

/// Delay sets covered: uniform d = 0, 1, 2, equal delays after stream 0, and delay_0 > 0.
fn delay_sets() -> Vec<Vec<usize>> {
    vec![
        vec![0, 0, 0],
        vec![0, 1, 2],
        vec![0, 2, 4],
        vec![0, 1, 1],
        vec![1, 1, 3],
    ]
}

#[test]
fn greedy_speculation_equals_greedy_ar() {
    let greedy = SamplerConfig::greedy();
    let (mut rejections, mut eos, mut max, mut multi) = (0, 0, 0, 0);
    for delays in delay_sets() {
        for model_seed in 0..3 {
            let target = TableFrameLmConfig::new(3, 5, 0)
                .with_delays(delays.clone())
                .with_seed(model_seed);
            let model = target.init().unwrap();
            let draft = target.draft(1.5, 11);
            for p in [0, 3] {
                let request = FrameRequest::new(vec![1, 2, 3], 12, 0).with_codes(codes(
                    3,
                    p,
                    5,
                    model_seed as u32,
                ));
                let ar = FrameArDecoder::new()
                    .generate(&model, &request, &greedy)
                    .unwrap();
                match ar.stop {
                    FrameStop::Eos => eos += 1,
                    FrameStop::MaxFrames => max += 1,
                }
                for rule in rules(6) {
                    for gamma in [1, 2, 3, 5] {
                        let name = format!("{delays:?} seed {model_seed} P {p} {rule:?} γ {gamma}");
                        let out = spec(&draft, gamma, rule.clone())
                            .generate(&model, &request, &greedy)
                            .unwrap();
                        assert_eq!(out.frames, ar.frames, "{name}");
                        assert_eq!(out.columns, ar.columns, "{name}");
                        assert_eq!(out.stop, ar.stop, "{name}");
                        let s = &out.stats;
                        rejections += usize::from(s.accepted_steps < s.drafted_steps);
                        multi += usize::from(s.steps_per_target_forward() > 1.0);
                    }
                }
            }
        }
    }
    // The cases must exercise rejections, both endings and multi-step blocks.
    assert!(
        rejections > 0 && multi > 0 && eos > 0 && max > 0,
        "{rejections} {multi} {eos} {max}"
    );
}

/// Checks a greedy generation from scratch: every free position holds the argmax of its head
/// after the prefix (codes only for j > 0, EOS banned below `min_frames` for stream 0), stream
/// 0 ends exactly where its argmax is EOS, and the frames are the delayed grid reverted.
fn check_greedy_from_scratch(
    model: &TableFrameLm,
    request: &FrameRequest<Vec<u32>>,
    out: &FrameGeneration,
) {
    let (k, cb) = (model.streams(), model.config().codebook_size);
    let delays = model.delays();
    let p = request.codes.first().map_or(0, Vec::len);
    let t = out.frames[0].len();
    let columns = &out.columns;
    assert!(columns.len() > t + delays[k - 1]);
    for (s, column) in columns.iter().enumerate().skip(1) {
        let scores = model.scores_after(&request.prompt, &columns[..s]);
        for j in 0..k {
            let head = &scores[j * (cb + 1)..(j + 1) * (cb + 1)];
            let f = (s as isize) - 1 - delays[j] as isize;
            if f < 0 || f as usize >= t {
                // Stream 0's end: its argmax is EOS right at frame T (unless max_frames).
                if j == 0 && f == t as isize && out.stop == FrameStop::Eos {
                    assert_eq!(argmax(head), cb as u32, "EOS at step {s}");
                }
                assert_eq!(column[j], cb as u32, "S at step {s} stream {j}");
                continue;
            }
            let f = f as usize;
            assert_eq!(out.frames[j][f], column[j]);
            if f < p {
                assert_eq!(column[j], request.codes[j][f], "prompt frame {f}");
                continue;
            }
            let allowed = if j == 0 && f >= request.min_frames {
                cb + 1
            } else {
                cb
            };
            assert_eq!(column[j], argmax(&head[..allowed]), "step {s} stream {j}");
            if j == 0 {
                assert_ne!(column[j], cb as u32);
            }
        }
    }
}

#[test]
fn greedy_ar_takes_the_argmax_of_every_free_position() {
    let mut ends = 0;
    for delays in delay_sets() {
        for p in [0, 2] {
            let config = TableFrameLmConfig::new(3, 5, 0).with_delays(delays.clone());
            let model = config.init().unwrap();
            let request = FrameRequest::new(vec![4], 10, 0)
                .with_codes(codes(3, p, 5, 1))
                .with_min_frames(p + 2);
            let out = FrameArDecoder::new()
                .generate(&model, &request, &SamplerConfig::greedy())
                .unwrap();
            check_greedy_from_scratch(&model, &request, &out);
            ends += usize::from(out.stop == FrameStop::Eos);
            // one forward per decided step but the last
            assert_eq!(out.stats.target_forwards, out.stats.steps);
            assert_eq!(model.forward_calls(), out.stats.target_forwards);
        }
    }
    assert!(ends > 0);
}

/// The exact law of the first `n` generated columns, by enumerating every free position's
/// distribution on the toy.
fn exact_law(
    model: &TableFrameLm,
    request: &FrameRequest<Vec<u32>>,
    sampler: &SamplerConfig,
    n: usize,
) -> HashMap<Vec<Vec<u32>>, f64> {
    let layout = Layout::new(model, request).unwrap();
    let columns = layout.known_columns();
    let known = columns.len();
    let mut law = HashMap::new();
    let history = vec![Vec::new(); layout.streams];
    let mut stack = vec![(columns, None::<usize>, history, 1.0f64)];
    while let Some((columns, end, history, prob)) = stack.pop() {
        if columns.len() == known + n || layout.done(columns.len(), end) {
            *law.entry(columns[known..].to_vec()).or_insert(0.0) += prob;
            continue;
        }
        let step = columns.len();
        let scores = model.scores_after(&request.prompt, &columns);
        let vocab = layout.vocab;
        let options: Vec<Vec<(u32, f64)>> = (0..layout.streams)
            .map(|j| match layout.slot(j, step, end) {
                layout::Slot::Forced(id) => vec![(id, 1.0)],
                layout::Slot::Free { frame } => sampler
                    .distribution(
                        &scores[j * vocab..(j + 1) * vocab],
                        &history[j],
                        layout.banned(j, frame),
                    )
                    .iter()
                    .enumerate()
                    .filter(|(_, q)| **q > 0.0)
                    .map(|(t, &q)| (t as u32, f64::from(q)))
                    .collect(),
            })
            .collect();
        let mut combos: Vec<(Vec<u32>, f64)> = vec![(Vec::new(), prob)];
        for stream in &options {
            combos = combos
                .iter()
                .flat_map(|(raw, p)| {
                    stream.iter().map(move |&(t, q)| {
                        let mut raw = raw.clone();
                        raw.push(t);
                        (raw, p * q)
                    })
                })
                .collect();
        }
        for (raw, p) in combos {
            let mut end = end;
            let column = layout.finish_column(step, &raw, &mut end);
            let mut history = history.clone();
            layout.record(step, &column, end, &mut history);
            let mut columns = columns.clone();
            columns.push(column);
            stack.push((columns, end, history, p));
        }
    }
    law
}

/// Pearson's chi-square of `counts` (over `runs` draws) against `law`, cells with an expected
/// count below 5 pooled; an outcome outside the law's support gives infinity.
fn chi_square(
    law: &HashMap<Vec<Vec<u32>>, f64>,
    counts: &HashMap<Vec<Vec<u32>>, usize>,
    runs: usize,
) -> (f64, usize) {
    if counts.keys().any(|key| !law.contains_key(key)) {
        return (f64::INFINITY, 1);
    }
    let (mut stat, mut cells) = (0.0, 0usize);
    let (mut pooled_e, mut pooled_o) = (0.0, 0.0);
    for (key, &q) in law {
        let expected = q * runs as f64;
        let observed = counts.get(key).copied().unwrap_or(0) as f64;
        if expected < 5.0 {
            pooled_e += expected;
            pooled_o += observed;
        } else {
            stat += (observed - expected).powi(2) / expected;
            cells += 1;
        }
    }
    if pooled_e > 0.0 {
        stat += (pooled_o - pooled_e).powi(2) / pooled_e.max(1.0);
        cells += 1;
    }
    (stat, cells.saturating_sub(1).max(1))
}

/// The statistic and its bound (mean + 6 standard deviations of chi-square) for `runs`
/// generations of `decoder`, keyed by their first `n` generated columns.
fn distribution_check(
    decoder: &dyn FrameDecoder<TableFrameLm>,
    model: &TableFrameLm,
    request: &FrameRequest<Vec<u32>>,
    n: usize,
    runs: usize,
) -> (f64, f64) {
    let sampler = SamplerConfig::default();
    let law = exact_law(model, request, &sampler, n);
    let total: f64 = law.values().sum();
    assert!((total - 1.0).abs() < 1e-4, "law sums to {total}");
    let mut counts = HashMap::new();
    for seed in 0..runs as u64 {
        let request = FrameRequest {
            seed,
            ..request.clone()
        };
        let out = decoder.generate(model, &request, &sampler).unwrap();
        let known = out.columns.len() - out.stats.steps;
        let key = out.columns[known..(known + n).min(out.columns.len())].to_vec();
        *counts.entry(key).or_insert(0usize) += 1;
    }
    let (stat, dof) = chi_square(&law, &counts, runs);
    (stat, dof as f64 + 6.0 * (2.0 * dof as f64).sqrt())
}

#[test]
fn exact_speculation_samples_the_targets_joint_distribution() {
    const RUNS: usize = 20_000;
    // (delays, prompt frames): d = 1 with a prompt (stream 1 starts on a prompt frame), d = 0
    // (both streams free at once; stream 0's EOS forces stream 1's same-step position to S).
    for (d, p) in [(1, 1), (0, 0)] {
        let target = TableFrameLmConfig::new(2, 3, d)
            .with_sharpness(1.5)
            .with_eos(-0.5, 0.4);
        let model = target.init().unwrap();
        let draft = target.draft(3.0, 5);
        let request = FrameRequest::new(vec![7, 8], p + 3, 0).with_codes(codes(2, p, 3, 2));
        let check = |decoder: &dyn FrameDecoder<TableFrameLm>| {
            distribution_check(decoder, &model, &request, 2, RUNS)
        };
        let (stat, bound) = check(&FrameArDecoder::new());
        assert!(stat < bound, "d {d}: AR {stat} vs {bound}");
        for gamma in [1, 3] {
            let (stat, bound) = check(&spec(&draft, gamma, AcceptanceRule::Exact));
            assert!(stat < bound, "d {d} γ {gamma}: {stat} vs {bound}");
        }
        // Negative controls: always keeping the draft (β = 1), and redrawing every stream of a
        // step with a rejection, must both fail the same check.
        let (stat, bound) = check(&spec(&draft, 3, AcceptanceRule::Tolerance { beta: 1.0 }));
        assert!(stat > bound, "d {d}: always-accept {stat} vs {bound}");
        let broken = spec(&draft, 3, AcceptanceRule::Exact)
            .with_column_rule(ColumnRule::ResampleAllOnReject);
        let (stat, bound) = check(&broken);
        assert!(stat > bound, "d {d}: resample-all {stat} vs {bound}");
    }
}

#[test]
fn prompts_shapes_and_ends_are_respected() {
    let sampler = SamplerConfig::default();
    for d in [0, 1, 2] {
        for p in [0, 2] {
            // (eos bias, slope): ends soon, ends by itself, never ends
            for (bias, slope) in [(50.0, 0.0), (-2.0, 0.5), (-50.0, 0.0)] {
                let target = TableFrameLmConfig::new(3, 4, d).with_eos(bias, slope);
                let model = target.init().unwrap();
                let prompt = codes(3, p, 4, 3);
                let decoders: Vec<Box<dyn FrameDecoder<TableFrameLm>>> = vec![
                    Box::new(FrameArDecoder::new()),
                    Box::new(spec(&target.draft(1.0, 3), 3, AcceptanceRule::Exact)),
                    Box::new(spec(
                        &target.draft(1.0, 3),
                        2,
                        AcceptanceRule::Tolerance { beta: 0.3 },
                    )),
                ];
                for decoder in &decoders {
                    for seed in 0..10 {
                        let max_frames = p + 6;
                        let request =
                            FrameRequest::new(vec![1], max_frames, seed).with_codes(prompt.clone());
                        let out = decoder.generate(&model, &request, &sampler).unwrap();
                        let name =
                            format!("{} d {d} P {p} bias {bias} seed {seed}", decoder.name());
                        let t = out.frames[0].len();
                        assert_eq!(out.frames.len(), 3, "{name}");
                        assert!(out.frames.iter().all(|row| row.len() == t), "{name}");
                        assert!(t <= max_frames && t >= p.max(1), "{name}: T = {t}");
                        assert_eq!(out.stats.frames, t - p, "{name}");
                        assert_eq!(out.prompt_frames, p);
                        for (row, prompt_row) in out.frames.iter().zip(&prompt) {
                            assert_eq!(&row[..p], prompt_row.as_slice(), "{name}");
                            assert!(row.iter().all(|&c| c < 4), "{name}: {row:?}");
                        }
                        match (bias > 0.0, bias < -10.0) {
                            (true, _) => assert_eq!(t, p.max(1), "{name}"),
                            (_, true) => assert_eq!(t, max_frames, "{name}"),
                            _ => {}
                        }
                        assert_eq!(out.stop == FrameStop::MaxFrames, t == max_frames, "{name}");
                        assert!(out.columns.len() >= 1 + t + 2 * d, "{name}");
                    }
                }
            }
        }
    }
}

#[test]
fn an_identical_draft_is_always_accepted() {
    let target = TableFrameLmConfig::new(3, 5, 1).with_eos(-50.0, 0.0);
    let model = target.init().unwrap();
    let decoder = spec(&target, 4, AcceptanceRule::Exact);
    let request = FrameRequest::new(vec![3], 40, 9).with_codes(codes(3, 2, 5, 0));
    let out = decoder
        .generate(&model, &request, &SamplerConfig::default())
        .unwrap();
    let s = &out.stats;
    for j in 0..3 {
        assert_eq!(s.acceptance_rate(j), Some(1.0), "stream {j}");
    }
    assert_eq!(s.accepted_steps, s.drafted_steps);
    // γ = 4 kept + 1 bonus per forward, but the last block
    assert!(s.steps_per_target_forward() > 4.0, "{s:?}");
    assert!(s.frames_per_target_forward() > 3.5, "{s:?}");
    // A differing draft is rejected somewhere, stream by stream.
    let decoder = spec(&target.draft(3.0, 1), 4, AcceptanceRule::Exact);
    let out = decoder
        .generate(&model, &request, &SamplerConfig::default())
        .unwrap();
    assert!((0..3).all(|j| out.stats.acceptance_rate(j).unwrap() < 1.0));
}

#[test]
fn mismatched_drafts_and_bad_requests_are_refused() {
    let target = TableFrameLmConfig::new(3, 5, 1);
    let model = target.init().unwrap();
    let sampler = SamplerConfig::default();
    let request = FrameRequest::new(vec![1], 8, 0);
    let mismatch = |draft: TableFrameLmConfig| {
        spec(&draft, 2, AcceptanceRule::Exact)
            .generate(&model, &request, &sampler)
            .unwrap_err()
    };
    for (draft, what) in [
        (TableFrameLmConfig::new(2, 5, 1), "number of streams"),
        (TableFrameLmConfig::new(3, 6, 1), "classes per head"),
        (TableFrameLmConfig::new(3, 5, 2), "stream delays"),
    ] {
        let err = mismatch(draft);
        assert!(
            matches!(&err, InferError::ModelMismatch { what: w, .. } if *w == what),
            "{err}"
        );
    }
    let ar = FrameArDecoder::new();
    let bad_request = |request: FrameRequest<Vec<u32>>| {
        let err = ar.generate(&model, &request, &sampler).unwrap_err();
        let spec_err = spec(&target, 2, AcceptanceRule::Exact)
            .generate(&model, &request, &sampler)
            .unwrap_err();
        assert_eq!(err, spec_err);
        err.to_string()
    };
    let err = bad_request(request.clone().with_codes(codes(2, 2, 5, 0)));
    assert!(err.contains("acoustic prompt of lengths"), "{err}");
    let err = bad_request(request.clone().with_codes(vec![vec![0, 5]; 3]));
    assert!(err.contains("code 5"), "{err}");
    let err = bad_request(request.clone().with_codes(codes(3, 8, 5, 0)));
    assert!(err.contains("max_frames 8"), "{err}");
    let err = bad_request(request.clone().with_min_frames(9));
    assert!(err.contains("min_frames 9"), "{err}");
    let decreasing = TableFrameLmConfig::new(2, 5, 0)
        .with_delays(vec![1, 0])
        .init()
        .unwrap();
    let err = ar.generate(&decreasing, &request, &sampler).unwrap_err();
    assert!(
        matches!(err, InferError::InvalidSetting { name: "delays", .. }),
        "{err}"
    );
    let err = FrameSpeculativeDecoder::new(
        target.init().unwrap(),
        SpeculativeConfig::new(0, AcceptanceRule::Exact),
    )
    .unwrap_err();
    assert!(matches!(
        err,
        InferError::InvalidSetting { name: "gamma", .. }
    ));
    let ras = SamplerConfig {
        ras: Some(RasConfig::default()),
        ..SamplerConfig::default()
    };
    let err = spec(&target, 2, AcceptanceRule::Exact)
        .generate(&model, &request, &ras)
        .unwrap_err();
    assert!(matches!(
        err,
        InferError::InvalidSetting { name: "ras", .. }
    ));
    // AR supports repetition-aware sampling.
    assert!(ar.generate(&model, &request, &ras).is_ok());
}

/// A model whose forwards return one step too few: decoders must report it, not panic.
struct ShortLogits(TableFrameLm);

impl FrameModel for ShortLogits {
    type Prompt = Vec<u32>;
    type Cache = TableFrameCache;

    fn streams(&self) -> usize {
        self.0.streams()
    }

    fn vocab(&self) -> usize {
        self.0.vocab()
    }

    fn delays(&self) -> Vec<usize> {
        self.0.delays()
    }

    fn new_cache(&self, prompt: &Vec<u32>, capacity: usize) -> crate::Result<TableFrameCache> {
        self.0.new_cache(prompt, capacity)
    }

    fn prefill(
        &self,
        cache: &mut TableFrameCache,
        prompt: &Vec<u32>,
        columns: &[Vec<u32>],
    ) -> crate::Result<FrameLogits> {
        self.0.prefill(cache, prompt, columns)
    }

    fn extend(
        &self,
        cache: &mut TableFrameCache,
        columns: &[Vec<u32>],
    ) -> crate::Result<FrameLogits> {
        let all = self.0.extend(cache, columns)?;
        let [steps, k, v] = all.shape();
        if steps == 1 {
            return FrameLogits::new(vec![0.0; 2 * k * v], 2, k, v);
        }
        FrameLogits::new(all.as_slice()[k * v..].to_vec(), steps - 1, k, v)
    }

    fn steps(&self, cache: &TableFrameCache) -> usize {
        self.0.steps(cache)
    }

    fn truncate(&self, cache: &mut TableFrameCache, steps: usize) -> crate::Result<()> {
        self.0.truncate(cache, steps)
    }
}

#[test]
fn wrong_logits_shapes_are_errors() {
    let config = TableFrameLmConfig::new(2, 4, 1).with_eos(-50.0, 0.0);
    let model = ShortLogits(config.init().unwrap());
    let request = FrameRequest::new(vec![1], 8, 0);
    let sampler = SamplerConfig::default();
    let err = FrameArDecoder::new()
        .generate(&model, &request, &sampler)
        .unwrap_err();
    assert!(matches!(err, InferError::Model(_)), "{err}");
    let decoder = FrameSpeculativeDecoder::new(
        config.init().unwrap(),
        SpeculativeConfig::new(3, AcceptanceRule::Exact),
    )
    .unwrap();
    let err = decoder.generate(&model, &request, &sampler).unwrap_err();
    assert!(matches!(err, InferError::Model(_)), "{err}");
}

#[test]
fn toy_cached_extend_equals_scores_from_scratch() {
    let model = TableFrameLmConfig::new(2, 4, 1).init().unwrap();
    let prompt = vec![3, 1];
    let mut cache = model.new_cache(&prompt, 5).unwrap();
    let columns = vec![vec![4, 4], vec![1, 4], vec![2, 0]];
    let first = model.prefill(&mut cache, &prompt, &columns[..1]).unwrap();
    assert_eq!(first.shape(), [1, 2, 5]);
    assert_eq!(first.as_slice(), model.scores_after(&prompt, &columns[..1]));
    let next = model.extend(&mut cache, &columns[1..]).unwrap();
    assert_eq!(next.shape(), [2, 2, 5]);
    assert_eq!(next.row(1, 1), &model.scores_after(&prompt, &columns)[5..]);
    // the prefix matters: another first column changes the scores after the third
    let other = vec![vec![4, 4], vec![3, 4], vec![2, 0]];
    assert_ne!(
        model.scores_after(&prompt, &columns),
        model.scores_after(&prompt, &other)
    );
    model.truncate(&mut cache, 1).unwrap();
    assert_eq!(model.steps(&cache), 1);
    assert!(model.truncate(&mut cache, 2).is_err());
    assert!(
        model.extend(&mut cache, &[vec![5, 0]]).is_err(),
        "id past S"
    );
    assert!(
        model.extend(&mut cache, &[vec![0]]).is_err(),
        "short column"
    );
    assert!(
        model.extend(&mut cache, &vec![vec![0, 0]; 5]).is_err(),
        "capacity"
    );
    assert_eq!(model.forward_calls(), 2);
    // the draft variant differs from the target
    let draft = model.config().draft(1.0, 2).init().unwrap();
    assert_ne!(
        draft.scores_after(&prompt, &columns),
        model.scores_after(&prompt, &columns)
    );
}

/// Per-stream rules (PCG with each stream's own groups beside exact and SSD streams) keep
/// greedy speculation equal to greedy AR; a rule count other than the streams' is refused.
#[test]
fn per_stream_rules_keep_greedy_speculation_exact_and_are_checked() {
    let greedy = SamplerConfig::greedy();
    let target = TableFrameLmConfig::new(3, 5, 1).with_seed(4);
    let model = target.init().unwrap();
    let draft = target.draft(1.5, 3);
    let groups = |shift: u32| {
        let lists: Vec<Vec<u32>> = (0..6u32).map(|t| vec![t, (t + shift) % 6]).collect();
        AcceptanceRule::Groups(Arc::new(
            SimilarityGroups::from_lists(6, 0.5, &lists).unwrap(),
        ))
    };
    let rules = vec![groups(1), AcceptanceRule::Exact, groups(2)];
    let mut rejected = 0;
    for seed in 0..4u64 {
        let request = FrameRequest::new(vec![seed as u32, 2], 12, seed);
        let ar = FrameArDecoder::new()
            .generate(&model, &request, &greedy)
            .unwrap();
        let out = spec(&draft, 3, AcceptanceRule::Exact)
            .with_stream_rules(rules.clone())
            .unwrap()
            .generate(&model, &request, &greedy)
            .unwrap();
        assert_eq!(out.columns, ar.columns, "seed {seed}");
        rejected += out.stats.drafted_steps - out.stats.accepted_steps;
    }
    assert!(rejected > 0, "rollbacks must be exercised");
    let err = spec(&draft, 3, AcceptanceRule::Exact)
        .with_stream_rules(rules[..2].to_vec())
        .unwrap()
        .generate(&model, &FrameRequest::new(vec![1], 8, 0), &greedy)
        .unwrap_err();
    assert!(err.to_string().contains("one per stream"), "{err}");
    assert!(
        spec(&draft, 3, AcceptanceRule::Exact)
            .with_stream_rules(Vec::new())
            .is_err()
    );
}
