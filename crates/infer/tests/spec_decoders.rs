//! The speculative decoders against the AR baseline on toy models: greedy equality token for
//! token, batch equals one by one, the sequence distribution of exact speculation equals the
//! target's, offline acceptance predicts the measured one, and bad input gets clear errors.
//!
//! The draft is a mixture: the target's scores plus weighted scores of an unrelated table, so it
//! agrees with the target often but not always (partial acceptance, also at temperature 0).

use std::sync::Arc;

use rand::Rng;
use voxspec_infer::acceptance::{
    ForcedSequence, OfflineAcceptance, teacher_forced, teacher_forced_head,
};
use voxspec_infer::ar::ArDecoder;
use voxspec_infer::sampler::seeded_rng;
use voxspec_infer::{
    AcceptanceRule, Decoder, Generation, InferError, LanguageModel, Limits, Logits, LogitsRequest,
    RasConfig, Request, SamplerConfig, SelfSpeculativeDecoder, SimilarityGroups, SpeculativeConfig,
    SpeculativeDecoder, TableCache, TableLm, TableLmConfig,
};

/// `base + weight · noise`, scores of two table models on the same tokens, plus
/// `positional · sin(0.7 · L · (v + 1))` on token `v` after a history of `L` tokens, which makes
/// the scores depend on the absolute position (so a cache rolled back to the wrong length shows).
#[derive(Debug)]
struct MixLm {
    base: TableLm,
    noise: TableLm,
    weight: f32,
    positional: f32,
}

impl MixLm {
    /// Mixes `a` and `b`; row `i` of sequence `s` follows a history of `lengths[s] + i` tokens.
    fn mix(&self, a: Logits, b: Logits, lengths: &[usize]) -> voxspec_infer::Result<Logits> {
        let [_, positions, heads, vocab] = a.shape();
        let mut data: Vec<f32> = a
            .as_slice()
            .iter()
            .zip(b.as_slice())
            .map(|(x, y)| x + self.weight * y)
            .collect();
        if self.positional != 0.0 {
            // [batch, positions, heads, vocab]
            for (i, row) in data.chunks_exact_mut(vocab).enumerate() {
                let (s, pos) = (i / (positions * heads), (i / heads) % positions);
                let len = (lengths[s] + pos) as f32;
                for (v, x) in row.iter_mut().enumerate() {
                    *x += self.positional * (0.7 * len * (v + 1) as f32).sin();
                }
            }
        }
        Logits::new(data, a.shape())
    }
}

impl LanguageModel for MixLm {
    type Prompt = Vec<u32>;
    type Cache = (TableCache, TableCache);

    fn vocab_size(&self) -> usize {
        self.base.vocab_size()
    }
    fn n_heads(&self) -> usize {
        self.base.n_heads()
    }
    fn eos_token(&self) -> Option<u32> {
        self.base.eos_token()
    }
    fn prompt_len(&self, prompt: &Vec<u32>) -> usize {
        prompt.len()
    }
    fn new_cache(&self, batch: usize, capacity: usize) -> voxspec_infer::Result<Self::Cache> {
        Ok((
            self.base.new_cache(batch, capacity)?,
            self.noise.new_cache(batch, capacity)?,
        ))
    }
    fn prefill(
        &self,
        cache: &mut Self::Cache,
        prompts: &[Vec<u32>],
        request: LogitsRequest,
    ) -> voxspec_infer::Result<Logits> {
        let a = self.base.prefill(&mut cache.0, prompts, request)?;
        let b = self.noise.prefill(&mut cache.1, prompts, request)?;
        let lengths: Vec<usize> = prompts.iter().map(Vec::len).collect();
        self.mix(a, b, &lengths)
    }
    fn extend(
        &self,
        cache: &mut Self::Cache,
        blocks: &[Vec<u32>],
        request: LogitsRequest,
    ) -> voxspec_infer::Result<Logits> {
        let lengths: Vec<usize> = blocks
            .iter()
            .enumerate()
            .map(|(s, block)| {
                let before = self.base.cache_len(&cache.0, s);
                if request.last_only {
                    before + block.len()
                } else {
                    before + 1
                }
            })
            .collect();
        let a = self.base.extend(&mut cache.0, blocks, request)?;
        let b = self.noise.extend(&mut cache.1, blocks, request)?;
        self.mix(a, b, &lengths)
    }
    fn cache_len(&self, cache: &Self::Cache, b: usize) -> usize {
        self.base.cache_len(&cache.0, b)
    }
    fn truncate(&self, cache: &mut Self::Cache, b: usize, len: usize) -> voxspec_infer::Result<()> {
        self.base.truncate(&mut cache.0, b, len)?;
        self.noise.truncate(&mut cache.1, b, len)
    }
}

const VOCAB: usize = 24;

fn target_config() -> TableLmConfig {
    TableLmConfig::new(VOCAB, 4)
        .with_seed(7)
        .with_sharpness(3.0)
}

fn target() -> TableLm {
    target_config().init().unwrap()
}

/// A draft that agrees with the target's argmax roughly two times in three.
fn draft() -> MixLm {
    draft_of(target_config(), 1.0)
}

fn draft_of(config: TableLmConfig, weight: f32) -> MixLm {
    let seed = config.seed;
    MixLm {
        base: config.clone().init().unwrap(),
        noise: config.with_seed(seed + 1000).init().unwrap(),
        weight,
        positional: 0.0,
    }
}

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

fn requests() -> Vec<Request<Vec<u32>>> {
    vec![
        request(vec![1, 2, 3], 0, 40, 1),
        request(vec![4], 10, 25, 2),
        request(vec![5, 6], 0, 1, 3),
        request(vec![7, 8, 9, 10], 3, 60, 4),
    ]
}

/// Similarity groups over a random embedding table of the target's vocabulary.
fn groups(theta: f32) -> Arc<SimilarityGroups> {
    let mut rng = seeded_rng(99);
    let emb: Vec<f32> = (0..VOCAB * 6).map(|_| rng.random::<f32>() - 0.5).collect();
    Arc::new(SimilarityGroups::from_embeddings(&emb, VOCAB, 6, theta).unwrap())
}

fn rules() -> Vec<AcceptanceRule> {
    vec![
        AcceptanceRule::Exact,
        AcceptanceRule::Tolerance { beta: 0.4 },
        AcceptanceRule::Groups(groups(0.5)),
        AcceptanceRule::Typical {
            eps: 0.09,
            delta: 0.3,
        },
    ]
}

fn configs() -> Vec<SpeculativeConfig> {
    rules()
        .into_iter()
        .flat_map(|rule| {
            [
                SpeculativeConfig::new(3, rule.clone()),
                SpeculativeConfig::new(1, rule).with_adaptive(3),
            ]
        })
        .collect()
}

fn tokens(generations: &[Generation]) -> Vec<Vec<u32>> {
    generations.iter().map(|g| g.tokens.clone()).collect()
}

#[test]
fn greedy_speculation_equals_greedy_ar_for_every_rule() {
    let target = target();
    let greedy = SamplerConfig::greedy();
    let reference = ArDecoder.generate(&target, &requests(), &greedy).unwrap();
    assert!(reference.iter().map(|g| g.tokens.len()).sum::<usize>() > 40);
    for config in configs() {
        let name = config.name();
        let mut sd = SpeculativeDecoder::new(draft(), config.clone()).unwrap();
        let out = sd.generate(&target, &requests(), &greedy).unwrap();
        assert_eq!(tokens(&out), tokens(&reference), "{name}");
        for (g, r) in out.iter().zip(&reference) {
            assert_eq!(g.stop, r.stop, "{name}");
        }
        let drafted: usize = out.iter().map(|g| g.stats.drafted).sum();
        let accepted: usize = out.iter().map(|g| g.stats.accepted).sum();
        assert!(
            accepted > 0 && accepted < drafted,
            "{name}: {accepted} of {drafted} accepted"
        );

        let mut ss = SelfSpeculativeDecoder::new(config).unwrap();
        let out = ss.generate(&target, &requests(), &greedy).unwrap();
        assert_eq!(tokens(&out), tokens(&reference), "self-{name}");
    }
}

#[test]
fn a_draft_equal_to_the_target_is_always_accepted() {
    // Scores depend on the absolute position: any misalignment of the draft's cache after a
    // rollback shows up as rejections.
    let positional = || MixLm {
        positional: 1.0,
        ..draft_of(target_config(), 0.0)
    };
    let target = positional();
    let noiseless = target_config().with_head_noise(0.0).init().unwrap();
    let sampler = SamplerConfig {
        temperature: 0.8,
        ..SamplerConfig::default()
    };
    for config in [
        SpeculativeConfig::new(3, AcceptanceRule::Exact),
        SpeculativeConfig::new(1, AcceptanceRule::Exact).with_adaptive(3),
    ] {
        let mut sd = SpeculativeDecoder::new(positional(), config.clone()).unwrap();
        for s in [SamplerConfig::greedy(), sampler] {
            for g in sd.generate(&target, &requests(), &s).unwrap() {
                assert_eq!(g.stats.accepted, g.stats.drafted, "{:?}", g.stats);
            }
        }
        let mut ss = SelfSpeculativeDecoder::new(config).unwrap();
        let out = ss
            .generate(&noiseless, &requests(), &SamplerConfig::greedy())
            .unwrap();
        for g in out {
            assert_eq!(g.stats.accepted, g.stats.drafted, "self: {:?}", g.stats);
        }
    }
}

#[test]
fn speculation_needs_fewer_target_forwards() {
    let target = target();
    let greedy = SamplerConfig::greedy();
    let reqs = [request(vec![1, 2], 0, 60, 0)];
    let ar = ArDecoder.generate(&target, &reqs, &greedy).unwrap();
    let mut sd =
        SpeculativeDecoder::new(draft(), SpeculativeConfig::new(3, AcceptanceRule::Exact)).unwrap();
    let calls_before = target.forward_calls();
    let out = sd.generate(&target, &reqs, &greedy).unwrap();
    let stats = &out[0].stats;
    assert_eq!(target.forward_calls() - calls_before, stats.target_forwards);
    // Every step after the first token drafts, verifies once and emits accepted + 1 tokens.
    let steps = stats.target_forwards - 1;
    assert_eq!(out[0].tokens.len(), 1 + steps + stats.accepted, "{stats:?}");
    assert!(stats.target_forwards < ar[0].stats.target_forwards);
    assert!(stats.draft_forwards >= stats.drafted);
    assert!(out[0].tokens_per_forward() > 1.0);
}

#[test]
fn a_batch_decodes_like_its_requests_one_by_one() {
    let target = target();
    let sampler = SamplerConfig {
        temperature: 0.9,
        top_k: 12,
        repetition_penalty: 1.2,
        ..SamplerConfig::default()
    };
    for config in configs() {
        let name = config.name();
        let mut sd = SpeculativeDecoder::new(draft(), config.clone()).unwrap();
        let mut ss = SelfSpeculativeDecoder::new(config).unwrap();
        let batch_sd = sd.generate(&target, &requests(), &sampler).unwrap();
        let batch_ss = ss.generate(&target, &requests(), &sampler).unwrap();
        for (b, r) in requests().into_iter().enumerate() {
            let alone = sd
                .generate(&target, std::slice::from_ref(&r), &sampler)
                .unwrap();
            assert_eq!(alone[0].tokens, batch_sd[b].tokens, "{name} sequence {b}");
            assert_eq!(alone[0].stats.accepted, batch_sd[b].stats.accepted);
            assert_eq!(alone[0].stats.drafted, batch_sd[b].stats.drafted);
            assert_eq!(
                alone[0].stats.target_forwards,
                batch_sd[b].stats.target_forwards
            );
            let alone = ss.generate(&target, &[r], &sampler).unwrap();
            assert_eq!(
                alone[0].tokens, batch_ss[b].tokens,
                "self-{name} sequence {b}"
            );
        }
        if name.starts_with("pcg") {
            let trials: usize = batch_sd.iter().map(|g| g.stats.thinning_trials).sum();
            assert!(trials > 0, "{name}: the residual sampler never ran");
        }
        // Limits hold: min_tokens masks EOS, max_tokens caps.
        for (g, r) in batch_sd.iter().zip(requests()) {
            assert!(g.tokens.len() <= r.limits.max_tokens);
            assert!(g.tokens.len() >= r.limits.min_tokens, "{name}");
            assert!(!g.tokens.contains(&(VOCAB as u32 - 1)));
        }
    }
}

/// Continuations scored by the sequence-law test: 4 tokens, so that after the first (from the
/// prefill) a block really drafts γ = 2 tokens and verifies them with a bonus.
const LAW_LEN: usize = 4;

/// Exact probability of each `LAW_LEN`-token continuation of `prompt` (no EOS) under `model`
/// and `sampler` (temperature, top-k, top-p), indexed in base `vocab`, first token most
/// significant.
fn sequence_law(
    model: &TableLm,
    prompt: &[u32],
    vocab: usize,
    sampler: &SamplerConfig,
) -> Vec<f64> {
    let mut law = vec![0.0; vocab.pow(LAW_LEN as u32)];
    for (index, p) in law.iter_mut().enumerate() {
        let mut history = prompt.to_vec();
        let mut generated = Vec::new();
        let mut prob = 1.0f64;
        for j in (0..LAW_LEN).rev() {
            let token = (index / vocab.pow(j as u32)) % vocab;
            let dist = sampler.distribution(&model.scores_after(&history, 1), &generated, None);
            prob *= f64::from(dist[token]);
            history.push(token as u32);
            generated.push(token as u32);
        }
        *p = prob;
    }
    law
}

/// `(tv, 3 · expected noise tv)` of 100,000 continuations from `decoder` against `law`, and the
/// most tokens any generation drafted.
fn empirical_tv<D: Decoder<TableLm>>(
    decoder: &mut D,
    model: &TableLm,
    law: &[f64],
    sampler: &SamplerConfig,
) -> (f64, f64, usize) {
    let n = 100_000;
    let vocab = model.vocab_size();
    let mut counts = vec![0usize; law.len()];
    let mut most_drafted = 0;
    for chunk in 0..n / 500 {
        let reqs: Vec<_> = (0..500)
            .map(|i| request(vec![0, 1], 0, LAW_LEN, (chunk * 500 + i) as u64))
            .collect();
        for g in decoder.generate(model, &reqs, sampler).unwrap() {
            assert_eq!(g.tokens.len(), LAW_LEN);
            most_drafted = most_drafted.max(g.stats.drafted);
            let index = g.tokens.iter().fold(0, |acc, &t| acc * vocab + t as usize);
            counts[index] += 1;
        }
    }
    let tv: f64 = counts
        .iter()
        .zip(law)
        .map(|(&c, &p)| (c as f64 / n as f64 - p).abs())
        .sum::<f64>()
        / 2.0;
    let noise: f64 = law
        .iter()
        .map(|&p| (p * (1.0 - p) / n as f64).sqrt())
        .sum::<f64>()
        * (2.0 / std::f64::consts::PI).sqrt()
        / 2.0;
    (tv, 3.0 * noise, most_drafted)
}

#[test]
fn exact_speculation_samples_the_target_sequence_law() {
    // 5 tokens, no EOS, flat enough that all 625 continuations matter.
    let config = TableLmConfig::new(5, 3)
        .with_eos(None)
        .with_sharpness(1.5)
        .with_seed(3);
    let model = config.clone().init().unwrap();
    for sampler in [
        SamplerConfig::default(),
        SamplerConfig {
            temperature: 0.9,
            top_k: 4,
            top_p: 0.9,
            ..SamplerConfig::default()
        },
    ] {
        let law = sequence_law(&model, &[0, 1], 5, &sampler);
        assert!((law.iter().sum::<f64>() - 1.0).abs() < 1e-5);
        let exact = SpeculativeConfig::new(2, AcceptanceRule::Exact);
        let mut sd = SpeculativeDecoder::new(draft_of(config.clone(), 2.0), exact.clone()).unwrap();
        let (tv, bound, drafted) = empirical_tv(&mut sd, &model, &law, &sampler);
        eprintln!("sd exact {sampler:?}: tv {tv:.4}, bound {bound:.4}");
        assert!(tv < bound, "sd exact: tv {tv:.4} >= {bound:.4}");
        assert!(drafted >= 2, "a block drafted {drafted} tokens, not γ = 2");
        let mut ss = SelfSpeculativeDecoder::new(exact).unwrap();
        let (tv, bound, drafted) = empirical_tv(&mut ss, &model, &law, &sampler);
        eprintln!("self-speculative exact: tv {tv:.4}, bound {bound:.4}");
        assert!(tv < bound, "self exact: tv {tv:.4} >= {bound:.4}");
        assert!(drafted >= 2, "a block drafted {drafted} tokens, not γ = 2");
        // Accepting every draft samples the draft's law instead, and the check sees it.
        let always = SpeculativeConfig::new(2, AcceptanceRule::Tolerance { beta: 1.0 });
        let mut broken = SpeculativeDecoder::new(draft_of(config.clone(), 2.0), always).unwrap();
        let (tv, bound, _) = empirical_tv(&mut broken, &model, &law, &sampler);
        eprintln!("sd accept-always: tv {tv:.4}, bound {bound:.4}");
        assert!(tv > bound, "accept-always passed: tv {tv:.4} < {bound:.4}");
    }
}

#[test]
fn offline_acceptance_predicts_the_measured_rate() {
    let target = target_config().with_eos(None).init().unwrap();
    let draft = draft_of(target_config().with_eos(None), 1.0);
    let sampler = SamplerConfig::default();
    // Teacher-force continuations sampled from the target itself.
    let reqs: Vec<_> = (0..40)
        .map(|i| request(vec![i % 20, 3], 0, 50, i as u64))
        .collect();
    let samples = ArDecoder.generate(&target, &reqs, &sampler).unwrap();
    let forced: Vec<_> = reqs
        .iter()
        .zip(&samples)
        .map(|(r, g)| ForcedSequence {
            prompt: r.prompt.clone(),
            tokens: g.tokens.clone(),
        })
        .collect();
    let rules = [
        AcceptanceRule::Exact,
        AcceptanceRule::Tolerance { beta: 0.3 },
    ];
    let mut accs: Vec<OfflineAcceptance> = rules
        .iter()
        .map(|r| OfflineAcceptance::new(r.clone()).unwrap())
        .collect();
    teacher_forced(&target, &draft, &forced, &sampler, &mut accs).unwrap();
    for (rule, acc) in rules.iter().zip(&accs) {
        assert_eq!(acc.positions(), 40 * 50);
        let alpha = acc.mean_alpha().unwrap();
        let mut sd = SpeculativeDecoder::new(
            draft_of(target_config().with_eos(None), 1.0),
            SpeculativeConfig::new(1, rule.clone()),
        )
        .unwrap();
        let out = sd.generate(&target, &reqs, &sampler).unwrap();
        let drafted: usize = out.iter().map(|g| g.stats.drafted).sum();
        let accepted: usize = out.iter().map(|g| g.stats.accepted).sum();
        let measured = accepted as f64 / drafted as f64;
        eprintln!(
            "{}: offline alpha {alpha:.3}, measured {measured:.3}",
            rule.name()
        );
        assert!((alpha - measured).abs() < 0.05, "{alpha} vs {measured}");
    }
    assert!(accs[1].mean_alpha() > accs[0].mean_alpha());
    let mut same = [OfflineAcceptance::new(AcceptanceRule::Exact).unwrap()];
    teacher_forced(&target, &target, &forced, &sampler, &mut same).unwrap();
    assert!((same[0].mean_alpha().unwrap() - 1.0).abs() < 1e-6);
    assert!((same[0].expected_tokens_per_step(3).unwrap() - 4.0).abs() < 1e-6);
}

#[test]
fn offline_head_acceptance_predicts_self_speculation() {
    let greedy = SamplerConfig::greedy();
    let reqs: Vec<_> = (0..30u32)
        .map(|i| request(vec![i % 20, 5], 0, 40, u64::from(i)))
        .collect();
    let forced = |model: &TableLm| -> Vec<ForcedSequence<Vec<u32>>> {
        let out = ArDecoder.generate(model, &reqs, &greedy).unwrap();
        reqs.iter()
            .zip(out)
            .map(|(r, g)| ForcedSequence {
                prompt: r.prompt.clone(),
                tokens: g.tokens,
            })
            .collect()
    };
    // Noiseless heads follow the greedy chain: at temperature 0 every draft is right.
    let exact = target_config()
        .with_eos(None)
        .with_head_noise(0.0)
        .init()
        .unwrap();
    let mut acc = [OfflineAcceptance::new(AcceptanceRule::Exact).unwrap()];
    teacher_forced_head(&exact, 2, &forced(&exact), &greedy, &mut acc).unwrap();
    assert_eq!(acc[0].positions(), 30 * 38);
    assert!((acc[0].mean_alpha().unwrap() - 1.0).abs() < 1e-9);
    // Noisy heads: head 1's offline α is what one-draft self-speculation measures.
    let noisy = target_config()
        .with_eos(None)
        .with_head_noise(3.0)
        .init()
        .unwrap();
    let mut acc = [OfflineAcceptance::new(AcceptanceRule::Exact).unwrap()];
    teacher_forced_head(&noisy, 1, &forced(&noisy), &greedy, &mut acc).unwrap();
    let alpha = acc[0].mean_alpha().unwrap();
    let mut ss =
        SelfSpeculativeDecoder::new(SpeculativeConfig::new(1, AcceptanceRule::Exact)).unwrap();
    let out = ss.generate(&noisy, &reqs, &greedy).unwrap();
    let drafted: usize = out.iter().map(|g| g.stats.drafted).sum();
    let accepted: usize = out.iter().map(|g| g.stats.accepted).sum();
    let measured = accepted as f64 / drafted as f64;
    eprintln!("head 1: offline alpha {alpha:.3}, measured {measured:.3}");
    assert!(alpha > 0.1 && alpha < 0.9, "{alpha}");
    assert!((alpha - measured).abs() < 0.1, "{alpha} vs {measured}");
    let err = teacher_forced_head(&noisy, 4, &forced(&noisy), &greedy, &mut acc).unwrap_err();
    assert!(err.to_string().contains("head"), "{err}");
}

#[test]
fn bad_input_gets_clear_errors() {
    let target = target();
    let greedy = SamplerConfig::greedy();
    // γ = 0
    let err = SpeculativeDecoder::new(draft(), SpeculativeConfig::new(0, AcceptanceRule::Exact))
        .unwrap_err();
    assert!(
        matches!(err, InferError::InvalidSetting { name: "gamma", .. }),
        "{err}"
    );
    let err =
        SelfSpeculativeDecoder::new(SpeculativeConfig::new(0, AcceptanceRule::Exact)).unwrap_err();
    assert!(err.to_string().contains("gamma"), "{err}");
    // negative β
    let err = SpeculativeDecoder::new(
        draft(),
        SpeculativeConfig::new(2, AcceptanceRule::Tolerance { beta: -1.0 }),
    )
    .unwrap_err();
    assert!(err.to_string().contains("beta"), "{err}");
    // θ outside (−1, 1)
    let err = SimilarityGroups::from_embeddings(&[1.0; 8], 4, 2, 1.2).unwrap_err();
    assert!(
        matches!(err, InferError::InvalidSetting { name: "theta", .. }),
        "{err}"
    );
    // a draft over another vocabulary
    let other = draft_of(TableLmConfig::new(VOCAB + 1, 1), 1.0);
    let mut sd =
        SpeculativeDecoder::new(other, SpeculativeConfig::new(2, AcceptanceRule::Exact)).unwrap();
    let err = sd.generate(&target, &requests(), &greedy).unwrap_err();
    assert!(matches!(err, InferError::ModelMismatch { .. }), "{err}");
    assert!(err.to_string().contains("vocabulary"), "{err}");
    // groups built for another vocabulary
    let small = Arc::new(SimilarityGroups::from_lists(4, 0.5, &[vec![0, 1, 2, 3]]).unwrap());
    let mut sd = SpeculativeDecoder::new(
        draft(),
        SpeculativeConfig::new(2, AcceptanceRule::Groups(small)),
    )
    .unwrap();
    let err = sd.generate(&target, &requests(), &greedy).unwrap_err();
    assert!(err.to_string().contains("similarity groups"), "{err}");
    // more drafts than the model has extra heads
    let mut ss =
        SelfSpeculativeDecoder::new(SpeculativeConfig::new(4, AcceptanceRule::Exact)).unwrap();
    let err = ss.generate(&target, &requests(), &greedy).unwrap_err();
    assert!(err.to_string().contains("extra heads"), "{err}");
    // repetition-aware sampling cannot be verified
    let ras = SamplerConfig {
        ras: Some(RasConfig::default()),
        ..SamplerConfig::default()
    };
    let mut sd =
        SpeculativeDecoder::new(draft(), SpeculativeConfig::new(2, AcceptanceRule::Exact)).unwrap();
    let err = sd.generate(&target, &requests(), &ras).unwrap_err();
    assert!(err.to_string().contains("ras"), "{err}");
    // a draft longer than the target at the verifier
    let p = vec![vec![0.5f32, 0.5]; 3];
    let q = vec![vec![0.5f32, 0.5]; 3];
    let err = voxspec_infer::verify(
        &AcceptanceRule::Exact,
        &[0, 1, 0],
        &p,
        &q,
        &mut seeded_rng(0),
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("draft longer than the target"),
        "{err}"
    );
    // an empty batch
    assert!(sd.generate(&target, &[], &greedy).is_err());
}
