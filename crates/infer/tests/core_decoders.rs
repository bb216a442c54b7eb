//! Decoder equivalences on the toy table model: MTP with one head is AR token for token (greedy
//! and seeded sampling, with and without Viterbi), batches decode exactly like single requests,
//! and block emission respects end-of-sequence and the length limits.

use std::sync::Arc;

use voxspec_infer::sampler::argmax;
use voxspec_infer::{
    ArDecoder, Decoder, Generation, Limits, MtpDecoder, RasConfig, Request, SamplerConfig,
    StopReason, TableLm, TableLmConfig, Transitions, TransitionsConfig, ViterbiConfig,
};

fn model(heads: usize, seed: u64) -> TableLm {
    TableLmConfig::new(48, heads)
        .with_seed(seed)
        .with_eos_bias(-1.0)
        .init()
        .unwrap()
}

fn requests(n: usize, max_tokens: usize) -> Vec<Request<Vec<u32>>> {
    (0..n)
        .map(|i| Request {
            prompt: (0..(1 + i % 4))
                .map(|t| ((7 * i + 3 * t) % 40) as u32)
                .collect(),
            limits: Limits {
                min_tokens: i % 3,
                max_tokens: max_tokens - i % 5,
            },
            seed: 1000 + i as u64,
        })
        .collect()
}

fn samplers() -> Vec<SamplerConfig> {
    vec![
        SamplerConfig::greedy(),
        SamplerConfig::default(),
        SamplerConfig {
            temperature: 0.8,
            top_k: 10,
            top_p: 0.9,
            repetition_penalty: 1.5,
            repetition_window: 8,
            ras: Some(RasConfig::default()),
        },
    ]
}

/// Transitions from sequences the table model itself generates.
fn transitions(model: &TableLm) -> Arc<Transitions> {
    let outs = ArDecoder
        .generate(model, &requests(16, 40), &SamplerConfig::default())
        .unwrap();
    let seqs: Vec<&[u32]> = outs.iter().map(|g| g.tokens.as_slice()).collect();
    Arc::new(
        Transitions::from_sequences(
            seqs,
            model.config().vocab_size,
            &TransitionsConfig::default(),
        )
        .unwrap(),
    )
}

fn tokens(gens: &[Generation]) -> Vec<(Vec<u32>, StopReason)> {
    gens.iter().map(|g| (g.tokens.clone(), g.stop)).collect()
}

#[test]
fn mtp_with_one_head_equals_ar() {
    let m = model(4, 1);
    let reqs = requests(6, 30);
    let q = transitions(&m);
    for sampler in samplers() {
        let ar = ArDecoder.generate(&m, &reqs, &sampler).unwrap();
        let mtp = MtpDecoder::new(1)
            .unwrap()
            .generate(&m, &reqs, &sampler)
            .unwrap();
        assert_eq!(tokens(&ar), tokens(&mtp), "independent, {sampler:?}");
        for (a, b) in ar.iter().zip(&mtp) {
            assert_eq!(a.stats.target_forwards, b.stats.target_forwards);
        }
        // Greedy Viterbi over one head is the argmax whatever top_k; sampled, with top_k = 1.
        let top_k = if sampler.is_greedy() { 5 } else { 1 };
        let vit = MtpDecoder::with_viterbi(1, ViterbiConfig::new(top_k), q.clone())
            .unwrap()
            .generate(&m, &reqs, &sampler)
            .unwrap();
        assert_eq!(tokens(&ar), tokens(&vit), "viterbi, {sampler:?}");
    }
}

#[test]
fn seeds_drive_sampling() {
    let m = model(4, 6);
    let mut reqs = requests(1, 30);
    let sampler = SamplerConfig::default();
    for mut decoder in [
        Box::new(ArDecoder) as Box<dyn Decoder<TableLm>>,
        Box::new(MtpDecoder::new(3).unwrap()),
    ] {
        let a = decoder.generate(&m, &reqs, &sampler).unwrap();
        let again = decoder.generate(&m, &reqs, &sampler).unwrap();
        reqs[0].seed += 1;
        let b = decoder.generate(&m, &reqs, &sampler).unwrap();
        reqs[0].seed -= 1;
        assert_eq!(tokens(&a), tokens(&again));
        assert_ne!(tokens(&a), tokens(&b), "{}", decoder.name());
    }
}

#[test]
fn batch_equals_one_by_one() {
    let m = model(4, 2);
    let reqs = requests(7, 25);
    let q = transitions(&m);
    let mut decoders: Vec<Box<dyn Decoder<TableLm>>> = vec![
        Box::new(ArDecoder),
        Box::new(MtpDecoder::new(3).unwrap()),
        Box::new(MtpDecoder::with_viterbi(4, ViterbiConfig::new(3), q.clone()).unwrap()),
        Box::new(
            MtpDecoder::with_viterbi(3, ViterbiConfig::new(2).with_link_previous(true), q).unwrap(),
        ),
    ];
    for decoder in &mut decoders {
        for sampler in samplers() {
            let batch = decoder.generate(&m, &reqs, &sampler).unwrap();
            for (request, batched) in reqs.iter().zip(&batch) {
                let alone = decoder
                    .generate(&m, std::slice::from_ref(request), &sampler)
                    .unwrap();
                assert_eq!(
                    alone[0].tokens,
                    batched.tokens,
                    "{} {sampler:?}",
                    decoder.name()
                );
                assert_eq!(alone[0].stop, batched.stop);
                assert_eq!(
                    alone[0].stats.target_forwards,
                    batched.stats.target_forwards
                );
                assert_eq!(alone[0].stats.drafted, batched.stats.drafted);
            }
        }
    }
}

#[test]
fn noiseless_heads_make_greedy_mtp_equal_greedy_ar() {
    // Without head noise, head i is exactly the greedy look-ahead, so greedy MTP reproduces
    // greedy AR with a k-th of the forwards (when EOS never fires).
    let m = TableLmConfig::new(40, 4)
        .with_head_noise(0.0)
        .with_eos(None)
        .init()
        .unwrap();
    let reqs = requests(3, 24);
    let greedy = SamplerConfig::greedy();
    let ar = ArDecoder.generate(&m, &reqs, &greedy).unwrap();
    let mtp = MtpDecoder::new(4)
        .unwrap()
        .generate(&m, &reqs, &greedy)
        .unwrap();
    assert_eq!(tokens(&ar), tokens(&mtp));
    for (g, r) in mtp.iter().zip(&reqs) {
        let max = r.limits.max_tokens;
        // prefill + one extend per full block except the last
        assert_eq!(g.stats.target_forwards, max.div_ceil(4));
        assert!(g.tokens_per_forward() >= 4.0 - 1e-9 || max.div_ceil(4) == 1);
        assert_eq!(g.stats.drafted, g.stats.accepted);
    }
}

#[test]
fn noisy_heads_change_the_output_and_viterbi_uses_transitions() {
    // A bigram table: greedy AR's next token is a function of the last one, which transition
    // statistics of greedy AR output capture exactly. Heads 1.. are noisy, so independent MTP
    // often emits a token greedy AR would not have chosen after the one before it; Viterbi
    // over those statistics repairs most of them.
    let m = TableLmConfig::new(40, 4)
        .with_context(1)
        .with_head_noise(6.0)
        .with_eos(None)
        .init()
        .unwrap();
    let greedy = SamplerConfig::greedy();
    let starts: Vec<Request<Vec<u32>>> = (0..40)
        .map(|t| Request {
            prompt: vec![t],
            limits: Limits::max(8),
            seed: 0,
        })
        .collect();
    let ar = ArDecoder.generate(&m, &starts, &greedy).unwrap();
    let seqs: Vec<Vec<u32>> = starts
        .iter()
        .zip(&ar)
        .map(|(r, g)| [r.prompt.as_slice(), &g.tokens].concat())
        .collect();
    let config = TransitionsConfig {
        alpha: 0.01,
        ..TransitionsConfig::default()
    };
    let q =
        Arc::new(Transitions::from_sequences(seqs.iter().map(Vec::as_slice), 40, &config).unwrap());

    // Share of emitted tokens equal to greedy AR's choice after the tokens actually emitted.
    let consistency = |gens: &[Generation], reqs: &[Request<Vec<u32>>]| -> f64 {
        let (mut agree, mut total) = (0, 0);
        for (g, r) in gens.iter().zip(reqs) {
            let mut history = r.prompt.clone();
            for &t in &g.tokens {
                agree += usize::from(t == argmax(&m.scores_after(&history, 1)));
                total += 1;
                history.push(t);
            }
        }
        agree as f64 / total as f64
    };
    let reqs = requests(12, 32);
    let ar = ArDecoder.generate(&m, &reqs, &greedy).unwrap();
    assert_eq!(consistency(&ar, &reqs), 1.0);
    let mtp = MtpDecoder::new(4)
        .unwrap()
        .generate(&m, &reqs, &greedy)
        .unwrap();
    assert_ne!(tokens(&ar), tokens(&mtp));
    let vit = MtpDecoder::with_viterbi(4, ViterbiConfig::new(5), q.clone())
        .unwrap()
        .generate(&m, &reqs, &greedy)
        .unwrap();
    let linked = MtpDecoder::with_viterbi(4, ViterbiConfig::new(5).with_link_previous(true), q)
        .unwrap()
        .generate(&m, &reqs, &greedy)
        .unwrap();
    let (c_mtp, c_vit, c_linked) = (
        consistency(&mtp, &reqs),
        consistency(&vit, &reqs),
        consistency(&linked, &reqs),
    );
    eprintln!(
        "greedy-consistency: independent heads {c_mtp:.3}, viterbi {c_vit:.3}, linked {c_linked:.3}"
    );
    assert!(
        c_vit > c_mtp + 0.1,
        "viterbi {c_vit} vs independent {c_mtp}"
    );
    assert!(
        c_linked > c_mtp + 0.1,
        "linked {c_linked} vs independent {c_mtp}"
    );
}

#[test]
fn eos_inside_a_block_ends_the_sequence_there() {
    // EOS is the argmax everywhere: greedy MTP emits min_tokens tokens, then stops in the
    // block where EOS becomes allowed, without feeding the block back.
    let m = TableLmConfig::new(20, 4)
        .with_eos_bias(50.0)
        .init()
        .unwrap();
    let eos = 19;
    for min_tokens in [0, 1, 5, 6] {
        let req = Request {
            prompt: vec![1, 2],
            limits: Limits {
                min_tokens,
                max_tokens: 12,
            },
            seed: 0,
        };
        let greedy = SamplerConfig::greedy();
        let seqs: [&[u32]; 2] = [&[0, 1, 2, 3, 4, 5], &[5, 4, 3, 2, 1, 0]];
        let q =
            Arc::new(Transitions::from_sequences(seqs, 19, &TransitionsConfig::default()).unwrap());
        let viterbi = MtpDecoder::with_viterbi(4, ViterbiConfig::new(3), q).unwrap();
        for mut decoder in [MtpDecoder::new(4).unwrap(), viterbi] {
            let out = decoder
                .generate(&m, std::slice::from_ref(&req), &greedy)
                .unwrap();
            assert_eq!(out[0].tokens.len(), min_tokens);
            assert_eq!(out[0].stop, StopReason::Eos);
            assert!(!out[0].tokens.contains(&eos));
            // forwards: prefill + one per full block emitted before the EOS block
            assert_eq!(out[0].stats.target_forwards, 1 + min_tokens / 4);
        }
        let ar = ArDecoder
            .generate(&m, std::slice::from_ref(&req), &greedy)
            .unwrap();
        assert_eq!(ar[0].tokens.len(), min_tokens);
    }
}

#[test]
fn blocks_are_clipped_at_max_tokens() {
    let m = TableLmConfig::new(30, 4).with_eos(None).init().unwrap();
    for max_tokens in [1, 3, 4, 5, 10] {
        let req = Request {
            prompt: vec![3],
            limits: Limits::max(max_tokens),
            seed: 9,
        };
        let out = MtpDecoder::new(4)
            .unwrap()
            .generate(&m, &[req], &SamplerConfig::default())
            .unwrap();
        assert_eq!(out[0].tokens.len(), max_tokens);
        assert_eq!(out[0].stop, StopReason::MaxTokens);
        assert_eq!(out[0].stats.target_forwards, max_tokens.div_ceil(4));
    }
}

#[test]
fn independent_heads_sample_from_their_own_rows() {
    // Head 1's token is drawn from head 1's scores: with sharp scores, greedy MTP's second
    // token is the argmax of head 1 after the prompt.
    let m = TableLmConfig::new(32, 2)
        .with_head_noise(3.0)
        .with_eos(None)
        .init()
        .unwrap();
    let prompt = vec![4, 9];
    let out = MtpDecoder::new(2)
        .unwrap()
        .generate(
            &m,
            &[Request {
                prompt: prompt.clone(),
                limits: Limits::max(2),
                seed: 0,
            }],
            &SamplerConfig::greedy(),
        )
        .unwrap();
    let scores = m.scores_after(&prompt, 2);
    assert_eq!(
        out[0].tokens,
        vec![argmax(&scores[..32]), argmax(&scores[32..])]
    );
}

#[test]
fn too_many_heads_are_refused() {
    let m = model(2, 0);
    let err = MtpDecoder::new(3)
        .unwrap()
        .generate(&m, &requests(1, 5), &SamplerConfig::greedy())
        .unwrap_err();
    assert!(err.to_string().contains("heads"), "{err}");
    assert!(MtpDecoder::new(0).is_err());
}
