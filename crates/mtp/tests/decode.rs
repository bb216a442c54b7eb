//! The MTP model under the decoders of voxspec-infer: every decoder runs on the real model with
//! its KV cache, MTP with one head is AR token for token, and a batch decodes each sequence as
//! it would alone (ragged prompts, sequences finishing at different times).

use std::sync::{Arc, Mutex};

use burn::tensor::Device;
use voxspec_infer::{
    ArDecoder, Decoder, Limits, MtpDecoder, Request, SamplerConfig, Transitions, TransitionsConfig,
    ViterbiConfig,
};
use voxspec_mtp::{MtpConfig, MtpModel, TtsPrompt};

/// Flex's RNG is process-global and Burn initialises parameters lazily (on first use): the
/// tests of this file run one at a time so each sees the same weights every run.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn model() -> MtpModel {
    let device = Device::flex();
    device.seed(21);
    MtpConfig::tiny(10, 8).init(&device).expect("model")
}

fn requests() -> Vec<Request<TtsPrompt>> {
    vec![
        Request {
            prompt: TtsPrompt {
                text: vec![1, 2, 3],
                codes: vec![4, 5],
                durations: None,
            },
            limits: Limits {
                min_tokens: 2,
                max_tokens: 12,
            },
            seed: 1,
        },
        Request {
            prompt: TtsPrompt {
                text: vec![7],
                codes: vec![],
                durations: None,
            },
            limits: Limits {
                min_tokens: 1,
                max_tokens: 5,
            },
            seed: 2,
        },
        Request {
            prompt: TtsPrompt {
                text: vec![2, 2, 9, 9, 1],
                codes: vec![0, 1, 2, 3, 4, 5],
                durations: None,
            },
            limits: Limits {
                min_tokens: 3,
                max_tokens: 9,
            },
            seed: 3,
        },
    ]
}

fn tokens<D: Decoder<MtpModel>>(
    decoder: &mut D,
    model: &MtpModel,
    requests: &[Request<TtsPrompt>],
    sampler: &SamplerConfig,
) -> Vec<Vec<u32>> {
    decoder
        .generate(model, requests, sampler)
        .expect("generate")
        .into_iter()
        .map(|g| g.tokens)
        .collect()
}

#[test]
fn mtp_with_one_head_is_ar_on_the_real_model() {
    let _serial = serial();
    let model = model();
    let requests = requests();
    for sampler in [
        SamplerConfig::greedy(),
        SamplerConfig {
            temperature: 0.9,
            top_k: 5,
            ..SamplerConfig::default()
        },
    ] {
        let ar = tokens(&mut ArDecoder::new(), &model, &requests, &sampler);
        let mtp = tokens(
            &mut MtpDecoder::new(1).expect("mtp"),
            &model,
            &requests,
            &sampler,
        );
        assert_eq!(ar, mtp, "sampler {sampler:?}");
        // Every request has min_tokens ≥ 1: end-of-speech cannot come first.
        assert!(ar.iter().all(|t| !t.is_empty()), "{ar:?}");
    }
}

#[test]
fn a_batch_decodes_each_sequence_as_alone() {
    let _serial = serial();
    let model = model();
    let requests = requests();
    let sampler = SamplerConfig {
        temperature: 1.0,
        ..SamplerConfig::default()
    };
    let transitions = Arc::new(
        Transitions::from_sequences(
            [[0u32, 1, 2, 3, 4, 5, 6, 7].as_slice(), &[7, 6, 5, 4]],
            model.codebook_size() + 1,
            &TransitionsConfig::default(),
        )
        .expect("transitions"),
    );
    let mut decoders: Vec<Box<dyn Decoder<MtpModel>>> = vec![
        Box::new(ArDecoder::new()),
        Box::new(MtpDecoder::new(3).expect("mtp")),
        Box::new(MtpDecoder::with_viterbi(4, ViterbiConfig::new(3), transitions).expect("viterbi")),
    ];
    for decoder in decoders.iter_mut() {
        let batched: Vec<Vec<u32>> = decoder
            .generate(&model, &requests, &sampler)
            .expect("batch")
            .into_iter()
            .map(|g| g.tokens)
            .collect();
        for (request, batch_tokens) in requests.iter().zip(&batched) {
            let alone = decoder
                .generate(&model, std::slice::from_ref(request), &sampler)
                .expect("alone");
            assert_eq!(&alone[0].tokens, batch_tokens, "decoder {}", decoder.name());
            assert!(batch_tokens.len() <= request.limits.max_tokens);
        }
    }
}

/// A cache sized exactly (no slack): a sequence that has reached its capacity shares a batch
/// with a wider block of another; only real positions are stored, and each sequence's logits
/// equal running it alone.
#[test]
fn a_full_sequence_and_a_wider_block_share_an_exact_cache() {
    use voxspec_infer::{LanguageModel, LogitsRequest};
    let _serial = serial();
    let model = model();
    let prompts = [
        TtsPrompt::new(vec![1, 2, 3], vec![4]),
        TtsPrompt::new(vec![5], vec![]),
    ];
    let heads = LogitsRequest {
        heads: model.n_heads(),
        last_only: false,
    };
    let lens: Vec<usize> = prompts.iter().map(|p| model.prompt_len(p)).collect();
    // Sequence 0 gets 2 more positions, sequence 1 gets 1 + 4: capacity = the longest need.
    let capacity = (lens[0] + 2).max(lens[1] + 5);
    assert_eq!(capacity, lens[0] + 2, "sequence 0 fills the cache");
    let mut batch = model.new_cache(2, capacity).expect("cache");
    model.prefill(&mut batch, &prompts, heads).expect("prefill");
    model
        .extend(&mut batch, &[vec![1, 2], vec![3]], heads)
        .expect("ragged extend");
    assert_eq!(model.cache_len(&batch, 0), capacity);
    // Sequence 0 is full and finished; sequence 1 extends by 4 (padding 0 by 4 would overflow).
    let logits = model
        .extend(&mut batch, &[vec![], vec![6, 0, 7, 1]], heads)
        .expect("a full sequence next to a wider block");
    assert_eq!(model.cache_len(&batch, 0), capacity);
    assert_eq!(model.cache_len(&batch, 1), lens[1] + 5);

    let mut alone = model.new_cache(1, capacity).expect("cache");
    model
        .prefill(&mut alone, &prompts[1..], heads)
        .expect("prefill");
    model.extend(&mut alone, &[vec![3]], heads).expect("extend");
    let want = model
        .extend(&mut alone, &[vec![6, 0, 7, 1]], heads)
        .expect("extend");
    let vocab = model.vocab_size();
    for pos in 0..4 {
        for head in 0..model.n_heads() {
            let (a, b) = (logits.row(1, pos, head), want.row(0, pos, head));
            let diff = a
                .iter()
                .zip(b)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            assert!(
                diff < 1e-4,
                "position {pos} head {head}: {diff} over {vocab}"
            );
        }
    }
    // Sequence 0 continues after a rollback as if the wide block had never been there.
    model
        .truncate(&mut batch, 0, capacity - 1)
        .expect("truncate");
    let again = model
        .extend(&mut batch, &[vec![2], vec![]], heads)
        .expect("extend");
    let mut zero = model.new_cache(1, capacity).expect("cache");
    model
        .prefill(&mut zero, &prompts[..1], heads)
        .expect("prefill");
    let want = model
        .extend(&mut zero, &[vec![1, 2]], heads)
        .expect("extend");
    let diff = again
        .row(0, 0, 0)
        .iter()
        .zip(want.row(0, 1, 0))
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(diff < 1e-4, "{diff}");
}

/// Batched MTP decoding on the real model with ragged lengths that run to `max_tokens`
/// (no end-of-speech before it): the caches the decoders size carry no slack.
#[test]
fn batched_mtp_runs_to_max_tokens_with_ragged_lengths() {
    let _serial = serial();
    let model = model();
    let request = |text: Vec<u32>, codes: Vec<u32>, n: usize, seed| Request {
        prompt: TtsPrompt::new(text, codes),
        limits: Limits {
            min_tokens: n,
            max_tokens: n,
        },
        seed,
    };
    let requests = vec![
        request(vec![1, 2, 3, 4, 5, 6], vec![1, 2, 3], 7, 1),
        request(vec![3], vec![], 16, 2),
        request(vec![2, 2], vec![5], 3, 3),
    ];
    let sampler = SamplerConfig::greedy();
    for heads in [2, 4] {
        let mut decoder = MtpDecoder::new(heads).expect("mtp");
        let batched = tokens(&mut decoder, &model, &requests, &sampler);
        for (request, got) in requests.iter().zip(&batched) {
            assert_eq!(got.len(), request.limits.max_tokens, "heads {heads}");
            let alone = tokens(
                &mut decoder,
                &model,
                std::slice::from_ref(request),
                &sampler,
            );
            assert_eq!(&alone[0], got, "heads {heads}");
        }
    }
}
