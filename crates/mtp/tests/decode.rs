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
