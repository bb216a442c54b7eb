//! The native engine against the Burn model it was built from, through the `LanguageModel`
//! trait on both: logits within 1e-4 for prefill, single-token and ragged multi-token steps,
//! steps after truncation, empty blocks and `last_only`; greedy AR and MTP decoding token for
//! token. For a plain model (RMSNorm, rotary, SwiGLU), an aligned one (phone track) and a
//! GPT-2-style one (LayerNorm, learned positions, GELU, biases).

use std::sync::Mutex;

use burn::module::Param;
use burn::tensor::{Device, Distribution, Tensor};
use voxspec_engine::{EngineError, NativeMtp};
use voxspec_infer::{
    ArDecoder, Decoder, LanguageModel, Limits, Logits, LogitsRequest, MtpDecoder, Request,
    SamplerConfig,
};
use voxspec_mtp::{AlignConfig, MtpConfig, MtpFile, MtpModel, TtsPrompt, save_mtp};
use voxspec_nn::{MlpKind, NormKind, PositionKind, TransformerConfig};

const TOL: f32 = 1e-4;

/// Flex's RNG is process-global and Burn initialises parameters lazily: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

struct Case {
    name: &'static str,
    config: MtpConfig,
    aligned: bool,
}

fn cases() -> Vec<Case> {
    let gpt2 = TransformerConfig::tiny()
        .with_dropout(0.0)
        .with_norm(NormKind::Layer)
        .with_positions(PositionKind::Learned)
        .with_mlp(MlpKind::Gelu)
        .with_bias(true);
    vec![
        Case {
            name: "plain",
            config: MtpConfig::tiny(10, 8),
            aligned: false,
        },
        Case {
            name: "aligned",
            config: MtpConfig::tiny(12, 10)
                .with_alignment(Some(AlignConfig::new().with_lookahead(4).with_progress(4))),
            aligned: true,
        },
        Case {
            name: "gpt2-style",
            config: MtpConfig::new(10, 8, gpt2).with_n_heads(3),
            aligned: false,
        },
        // An MLP width that is not a multiple of 32: SwiGLU's gate and up stay `[gate | up]`
        // and SwiGLU runs after the product (the other SwiGLU cases interleave them).
        Case {
            name: "swiglu-width-40",
            config: MtpConfig::new(
                10,
                8,
                TransformerConfig::tiny().with_dropout(0.0).with_d_ff(40),
            ),
            aligned: false,
        },
    ]
}

/// The Burn model of `case`, with random (not zero) Medusa residual weights so the heads'
/// residual branch is exercised, and the engine built from it.
fn build(case: &Case, seed: u64) -> (MtpModel, NativeMtp) {
    let device = Device::flex();
    device.seed(seed);
    let mut model = case.config.init(&device).expect("valid config");
    let d = case.config.transformer.d_model;
    for head in model.heads.iter_mut() {
        if let Some(residual) = head.residual.as_mut() {
            residual.weight = Param::from_tensor(Tensor::random(
                [d, d],
                Distribution::Normal(0.0, 0.2),
                &device,
            ));
        }
    }
    let native = NativeMtp::from_burn(&model, &case.config).expect("engine");
    (model, native)
}

fn prompts(case: &Case) -> Vec<TtsPrompt> {
    if case.aligned {
        vec![
            TtsPrompt {
                text: vec![1, 2, 3, 11],
                codes: vec![],
                durations: Some(vec![2, 0, 3, 1]),
            },
            TtsPrompt {
                text: vec![5, 6],
                codes: vec![],
                durations: Some(vec![4, 3]),
            },
        ]
    } else {
        vec![
            TtsPrompt::new(vec![1, 2, 3], vec![4, 5, 0]),
            TtsPrompt::new(vec![7], vec![]),
        ]
    }
}

/// Largest difference over the rows that are specified: sequence `b`'s first `lens[b]`
/// positions, every head.
fn max_diff(a: &Logits, b: &Logits, lens: &[usize]) -> f32 {
    let [batch, _, heads, _] = a.shape();
    let mut max = 0.0f32;
    for (s, &len) in lens.iter().enumerate().take(batch) {
        for p in 0..len {
            for h in 0..heads {
                for (x, y) in a.row(s, p, h).iter().zip(b.row(s, p, h)) {
                    max = max.max((x - y).abs());
                }
            }
        }
    }
    max
}

fn check(what: &str, case: &Case, burn: &Logits, native: &Logits, lens: &[usize]) {
    assert_eq!(burn.shape()[0], native.shape()[0], "{what}");
    assert_eq!(burn.shape()[2..], native.shape()[2..], "{what}");
    let d = max_diff(burn, native, lens);
    eprintln!("[{}] {what}: max |Δlogit| {d:.2e}", case.name);
    assert!(d <= TOL, "[{}] {what}: {d}", case.name);
}

#[test]
fn logits_match_the_burn_model_step_by_step() {
    let _guard = serial();
    for case in cases() {
        let (burn, native) = build(&case, 11);
        let heads = burn.n_heads();
        let all = LogitsRequest {
            heads,
            last_only: false,
        };
        let mut bc = burn.new_cache(2, 40).expect("cache");
        let mut nc = native.new_cache(2, 40).expect("cache");
        let prompts = prompts(&case);

        let (b, n) = (
            burn.prefill(&mut bc, &prompts, all).expect("burn prefill"),
            native
                .prefill(&mut nc, &prompts, all)
                .expect("native prefill"),
        );
        check("prefill", &case, &b, &n, &[1, 1]);

        let step = |bc: &mut voxspec_mtp::MtpCache,
                    nc: &mut voxspec_engine::NativeCache,
                    blocks: Vec<Vec<u32>>,
                    request: LogitsRequest,
                    what: &str| {
            let b = burn.extend(bc, &blocks, request).expect("burn extend");
            let n = native.extend(nc, &blocks, request).expect("native extend");
            let lens: Vec<usize> = blocks
                .iter()
                .map(|bl| if request.last_only { 1 } else { bl.len() })
                .collect();
            check(what, &case, &b, &n, &lens);
        };
        step(
            &mut bc,
            &mut nc,
            vec![vec![3], vec![6]],
            all,
            "single token",
        );
        step(
            &mut bc,
            &mut nc,
            vec![vec![1, 2, 7], vec![4]],
            all,
            "ragged 3 + 1",
        );
        step(
            &mut bc,
            &mut nc,
            vec![vec![0, 0], vec![5, 1, 2, 3]],
            all,
            "ragged 2 + 4",
        );
        step(
            &mut bc,
            &mut nc,
            vec![vec![7], vec![2, 2]],
            LogitsRequest::heads_at_last(heads),
            "ragged, last position only",
        );
        step(
            &mut bc,
            &mut nc,
            vec![vec![], vec![3]],
            all,
            "an empty block",
        );

        // Roll both sequences back by different amounts: stale keys stay in the cache.
        for (b, back) in [(0usize, 4usize), (1, 2)] {
            let len = burn.cache_len(&bc, b) - back;
            assert_eq!(native.cache_len(&nc, b), burn.cache_len(&bc, b));
            burn.truncate(&mut bc, b, len).expect("burn truncate");
            native.truncate(&mut nc, b, len).expect("native truncate");
        }
        step(
            &mut bc,
            &mut nc,
            vec![vec![5, 6, 7], vec![1]],
            all,
            "after truncation, ragged",
        );
        step(
            &mut bc,
            &mut nc,
            vec![vec![4], vec![0]],
            LogitsRequest::next_token(),
            "after truncation, single token, head 0",
        );
        for b in 0..2 {
            assert_eq!(native.cache_len(&nc, b), burn.cache_len(&bc, b));
        }
    }
}

fn requests(case: &Case) -> Vec<Request<TtsPrompt>> {
    prompts(case)
        .into_iter()
        .enumerate()
        .map(|(i, mut prompt)| {
            // Aligned prompts without durations: both run the Burn duration predictor.
            if case.aligned && i == 1 {
                prompt.durations = None;
            }
            Request {
                prompt,
                limits: Limits {
                    min_tokens: 3,
                    max_tokens: 14 + 3 * i,
                },
                seed: i as u64,
            }
        })
        .collect()
}

#[test]
fn greedy_decoding_matches_the_burn_model_token_for_token() {
    let _guard = serial();
    for case in cases() {
        let (burn, native) = build(&case, 23);
        let reqs = requests(&case);
        let greedy = SamplerConfig::greedy();
        let decoders: Vec<Box<dyn Fn() -> Box<dyn DecoderPair>>> = vec![
            Box::new(|| Box::new(ArDecoder::new())),
            Box::new(|| Box::new(MtpDecoder::new(2).expect("heads"))),
        ];
        for make in &decoders {
            let mut on_burn = make();
            let mut on_native = make();
            let want = on_burn.run_burn(&burn, &reqs, &greedy);
            let got = on_native.run_native(&native, &reqs, &greedy);
            for (i, (w, g)) in want.iter().zip(&got).enumerate() {
                eprintln!(
                    "[{}] {} sequence {i}: {} tokens",
                    case.name,
                    on_burn.label(),
                    w.len()
                );
                assert!(!w.is_empty());
                assert_eq!(w, g, "[{}] {} sequence {i}", case.name, on_burn.label());
            }
        }
    }
}

/// A decoder run on either model (the `Decoder` trait is generic over the model).
trait DecoderPair {
    fn label(&self) -> String;
    fn run_burn(
        &mut self,
        m: &MtpModel,
        r: &[Request<TtsPrompt>],
        s: &SamplerConfig,
    ) -> Vec<Vec<u32>>;
    fn run_native(
        &mut self,
        m: &NativeMtp,
        r: &[Request<TtsPrompt>],
        s: &SamplerConfig,
    ) -> Vec<Vec<u32>>;
}

impl<D: Decoder<MtpModel> + Decoder<NativeMtp>> DecoderPair for D {
    fn label(&self) -> String {
        Decoder::<MtpModel>::name(self)
    }
    fn run_burn(
        &mut self,
        m: &MtpModel,
        r: &[Request<TtsPrompt>],
        s: &SamplerConfig,
    ) -> Vec<Vec<u32>> {
        let out = Decoder::<MtpModel>::generate(self, m, r, s).expect("burn decoding");
        out.into_iter().map(|g| g.tokens).collect()
    }
    fn run_native(
        &mut self,
        m: &NativeMtp,
        r: &[Request<TtsPrompt>],
        s: &SamplerConfig,
    ) -> Vec<Vec<u32>> {
        let out = Decoder::<NativeMtp>::generate(self, m, r, s).expect("native decoding");
        out.into_iter().map(|g| g.tokens).collect()
    }
}

#[test]
fn misuse_is_reported() {
    let _guard = serial();
    let cases = cases();
    let (burn, native) = build(&cases[0], 5);
    assert!(matches!(
        native.new_native_cache(1, 65),
        Err(EngineError::CapacityTooLarge {
            capacity: 65,
            max_seq_len: 64
        })
    ));
    let mut cache = native.new_cache(1, 8).expect("cache");
    let prompt = [TtsPrompt::new(vec![1, 2], vec![3])];
    native
        .prefill(&mut cache, &prompt, LogitsRequest::next_token())
        .expect("prefill");
    assert!(
        native
            .prefill(&mut cache, &prompt, LogitsRequest::next_token())
            .is_err(),
        "prefill into a full cache"
    );
    let too_long = vec![vec![1u32; 5]];
    let err = native
        .extend(&mut cache, &too_long, LogitsRequest::next_token())
        .expect_err("4 + 5 > 8");
    assert!(err.to_string().contains("capacity 8"), "{err}");
    assert_eq!(
        native.cache_len(&cache, 0),
        4,
        "a failed step changes nothing"
    );
    assert!(
        native
            .extend(&mut cache, &[vec![8]], LogitsRequest::next_token())
            .is_err(),
        "EOS is never an input"
    );
    assert!(
        native
            .extend(&mut cache, &[vec![1]], LogitsRequest::heads_at_last(9))
            .is_err(),
        "more heads than the model has"
    );
    assert!(native.truncate(&mut cache, 0, 5).is_err());
    // A config that does not describe the model.
    let other = MtpConfig::tiny(11, 8);
    assert!(NativeMtp::from_burn(&burn, &other).is_err());
}

/// `NativeMtp::load` reads a model directory written by `voxspec_mtp::save_mtp` and scores
/// exactly as the engine built from the model in memory.
#[test]
fn a_model_directory_loads_into_the_engine() {
    let _guard = serial();
    let cases = cases();
    let case = &cases[1];
    let (burn, native) = build(case, 31);
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = MtpFile {
        model: case.config.clone(),
        draft: None,
    };
    save_mtp(dir.path(), &file, &burn).expect("save");
    let loaded = NativeMtp::load(dir.path()).expect("load");
    let all = LogitsRequest {
        heads: burn.n_heads(),
        last_only: false,
    };
    let prompts = prompts(case);
    let mut a = native.new_cache(2, 16).expect("cache");
    let mut b = loaded.new_cache(2, 16).expect("cache");
    let want = native.prefill(&mut a, &prompts, all).expect("prefill");
    let got = loaded.prefill(&mut b, &prompts, all).expect("prefill");
    check(
        "loaded from a directory, prefill",
        case,
        &want,
        &got,
        &[1, 1],
    );
    let blocks = vec![vec![1, 2], vec![3]];
    let want = native.extend(&mut a, &blocks, all).expect("extend");
    let got = loaded.extend(&mut b, &blocks, all).expect("extend");
    check(
        "loaded from a directory, extend",
        case,
        &want,
        &got,
        &[2, 1],
    );
    assert!(NativeMtp::load(&dir.path().join("missing")).is_err());
}
