//! The native multi-stream LM against the Burn adapter it mirrors (`MsFrameLm`), through the
//! `FrameModel` trait on both: logits within 1e-4 for prefill, one- and multi-column extends,
//! extends after truncation and the multi-token heads; greedy frame AR and MTP decoding column
//! for column. For a plain model, an aligned one with a voice vector and 3 heads, and a
//! GPT-2-style one (LayerNorm, learned positions, GELU, biases) with 3 heads and delay 2.
//! bf16 weights: logits within 4 % of the logits' standard deviation of the f32 engine, greedy
//! AR column for column.

use std::sync::Mutex;

use burn::module::Param;
use burn::tensor::{Device, Distribution, Tensor};
use voxspec_engine::{NativeMultiStream, WeightFormat};
use voxspec_infer::{
    FrameArDecoder, FrameDecoder, FrameLogits, FrameModel, FrameMtpDecoder, FrameRequest,
    FrameStats, SamplerConfig,
};
use voxspec_multistream::{
    MsAlignConfig, MsFrameLm, MsMtpConfig, MsPrompt, MultiStreamConfig, MultiStreamModel,
};
use voxspec_nn::{MlpKind, NormKind, PositionKind, TransformerConfig};

const TOL: f32 = 1e-4;
/// bf16 against f32 weights: largest |Δlogit| as a fraction of the logits' standard deviation.
const BF16_REL_TOL: f32 = 0.04;
const TEXT_VOCAB: usize = 12;
const CODEBOOK: usize = 16;

/// Flex's RNG is process-global and Burn initialises parameters lazily: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

struct Case {
    name: &'static str,
    config: MultiStreamConfig,
}

fn cases() -> Vec<Case> {
    let mut aligned = MultiStreamConfig::tiny(TEXT_VOCAB, CODEBOOK, 3)
        .with_global_dim(8)
        .with_align(Some(
            MsAlignConfig::new()
                .with_units_per_frame(2)
                .with_phones_per_frame(2)
                .with_frames_ahead(2)
                .with_frames_behind(1)
                .with_duration_layers(1),
        ))
        .with_mtp(Some(MsMtpConfig::new(3)));
    aligned.transformer = TransformerConfig::tiny()
        .with_d_model(48)
        .with_n_heads(4)
        .with_d_ff(96)
        .with_dropout(0.0);
    let gpt2 = TransformerConfig::tiny()
        .with_dropout(0.0)
        .with_norm(NormKind::Layer)
        .with_positions(PositionKind::Learned)
        .with_mlp(MlpKind::Gelu)
        .with_bias(true);
    vec![
        Case {
            name: "plain",
            config: MultiStreamConfig::tiny(TEXT_VOCAB, CODEBOOK, 2),
        },
        Case {
            name: "aligned+voice+mtp",
            config: aligned,
        },
        Case {
            name: "gpt2-style+mtp",
            config: MultiStreamConfig::new(TEXT_VOCAB, CODEBOOK, 3, gpt2)
                .with_delay(2)
                .with_mtp(Some(MsMtpConfig::new(3))),
        },
    ]
}

/// The Burn model of `case` with random (not zero) Medusa residual weights.
fn burn_model(case: &Case, seed: u64) -> MultiStreamModel {
    let device = Device::flex();
    device.seed(seed);
    let mut model = case.config.init(&device).expect("valid config");
    let d = case.config.transformer.d_model;
    for head in &mut model.ahead {
        head.residual.weight = Param::from_tensor(Tensor::random(
            [d, d],
            Distribution::Normal(0.0, 0.2),
            &device,
        ));
    }
    model
}

fn prompt(case: &Case, model: &MultiStreamModel, text: &[u32]) -> MsPrompt {
    let voice: Option<Vec<f32>> = (case.config.global_dim > 0).then(|| {
        (0..case.config.global_dim)
            .map(|i| ((i * 7 + text.len()) % 5) as f32 * 0.4 - 0.8)
            .collect()
    });
    let durations: Vec<u32> = text.iter().map(|&t| 1 + t % 3).collect();
    MsPrompt::new(
        model,
        &case.config,
        text,
        voice.as_deref(),
        Some(&durations),
    )
    .expect("prompt")
}

fn max_diff(a: &FrameLogits, b: &FrameLogits) -> f32 {
    assert_eq!(a.shape(), b.shape());
    a.as_slice()
        .iter()
        .zip(b.as_slice())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn check(case: &Case, what: &str, burn: &FrameLogits, native: &FrameLogits) {
    let d = max_diff(burn, native);
    eprintln!("[{}] {what}: max |Δlogit| {d:.2e}", case.name);
    assert!(d <= TOL, "[{}] {what}: {d}", case.name);
}

/// A column of codes and `S` at step `s` (deterministic, varied).
fn column(streams: usize, s: usize) -> Vec<u32> {
    (0..streams)
        .map(|j| {
            let v = (s * 5 + j * 3 + (s * s) % 7) % (CODEBOOK + 3);
            v.min(CODEBOOK) as u32
        })
        .collect()
}

#[test]
fn logits_and_heads_match_the_burn_adapter() {
    let _guard = serial();
    for case in cases() {
        let model = burn_model(&case, 21);
        let native = NativeMultiStream::from_burn(&model, &case.config).expect("engine");
        let lm = MsFrameLm {
            model: &model,
            config: &case.config,
        };
        assert_eq!(native.heads(), lm.heads(), "[{}]", case.name);
        assert_eq!(native.delays(), lm.delays());
        assert_eq!(
            (native.streams(), native.vocab()),
            (lm.streams(), lm.vocab())
        );
        let k = case.config.streams;
        let heads = lm.heads();
        let p = prompt(&case, &model, &[1, 4, 2, 11, 7]);
        let mut bc = lm.new_cache(&p, 30).expect("burn cache");
        let mut nc = native.new_cache(&p, 30).expect("native cache");
        let s = CODEBOOK as u32;
        let lead = vec![vec![s; k], {
            let mut c = vec![s; k];
            c[0] = 3;
            c
        }];
        let (b, n) = (
            lm.prefill(&mut bc, &p, &lead).expect("burn prefill"),
            native.prefill(&mut nc, &p, &lead).expect("native prefill"),
        );
        assert_eq!(n.shape(), [1, k, CODEBOOK + 1]);
        check(&case, "prefill (voice, text, 2 columns)", &b, &n);
        if heads > 1 {
            let (b, n) = (
                lm.head_logits(&bc, heads).expect("burn heads"),
                native.head_logits(&nc, heads).expect("native heads"),
            );
            check(&case, "heads after prefill", &b, &n);
        }

        let mut step = 2;
        for (width, what) in [
            (1, "extend 1"),
            (2, "extend 2"),
            (4, "extend 4"),
            (1, "extend 1 again"),
        ] {
            let cols: Vec<Vec<u32>> = (step..step + width).map(|t| column(k, t)).collect();
            let (b, n) = (
                lm.extend(&mut bc, &cols).expect("burn extend"),
                native.extend(&mut nc, &cols).expect("native extend"),
            );
            assert_eq!(n.shape(), [width, k, CODEBOOK + 1]);
            check(&case, what, &b, &n);
            step += width;
            if heads > 1 {
                let (b, n) = (
                    lm.head_logits(&bc, heads).expect("burn heads"),
                    native.head_logits(&nc, heads).expect("native heads"),
                );
                check(&case, &format!("heads after {what}"), &b, &n);
                let one = native.head_logits(&nc, 1).expect("head 0");
                assert_eq!(one.as_slice(), &n.as_slice()[..k * (CODEBOOK + 1)]);
            }
        }
        assert_eq!(native.steps(&nc), step);
        assert_eq!(lm.steps(&bc), step);

        // Roll back 3 steps: the heads are gone until a step is fed, stale keys are not read.
        lm.truncate(&mut bc, step - 3).expect("burn truncate");
        native.truncate(&mut nc, step - 3).expect("native truncate");
        step -= 3;
        assert_eq!(native.steps(&nc), step);
        assert!(native.head_logits(&nc, 1).is_err());
        if heads > 1 {
            assert!(lm.head_logits(&bc, 1).is_err());
        }
        assert!(native.truncate(&mut nc, step + 1).is_err());
        let cols: Vec<Vec<u32>> = (0..3).map(|t| column(k, 40 + t)).collect();
        let (b, n) = (
            lm.extend(&mut bc, &cols).expect("burn extend"),
            native.extend(&mut nc, &cols).expect("native extend"),
        );
        check(&case, "extend 3 after truncate", &b, &n);
        // Truncating to the steps held keeps the heads (as MsFrameLm does).
        step += 3;
        native.truncate(&mut nc, step).expect("no-op truncate");
        lm.truncate(&mut bc, step).expect("no-op truncate");
        if heads > 1 {
            let (b, n) = (
                lm.head_logits(&bc, heads).expect("burn heads"),
                native.head_logits(&nc, heads).expect("native heads"),
            );
            check(&case, "heads after truncate + extend", &b, &n);
        }
        assert!(native.head_logits(&nc, heads + 1).is_err());
        assert!(native.head_logits(&nc, 0).is_err());

        // A second utterance, no leading column but step 0, in a fresh cache.
        let p2 = prompt(&case, &model, &[3]);
        let mut bc = lm.new_cache(&p2, 8).expect("burn cache");
        let mut nc = native.new_cache(&p2, 8).expect("native cache");
        let (b, n) = (
            lm.prefill(&mut bc, &p2, &lead[..1]).expect("burn prefill"),
            native
                .prefill(&mut nc, &p2, &lead[..1])
                .expect("native prefill"),
        );
        check(&case, "short prefill", &b, &n);
        assert!(native.prefill(&mut nc, &p2, &lead[..1]).is_err());
        // Past the capacity: refused by both, the native cache unchanged.
        let many: Vec<Vec<u32>> = (0..8).map(|t| column(k, t)).collect();
        assert!(lm.extend(&mut bc, &many).is_err());
        assert!(native.extend(&mut nc, &many).is_err());
        assert_eq!(native.steps(&nc), 1);
        let (b, n) = (
            lm.extend(&mut bc, &many[..7]).expect("burn extend"),
            native.extend(&mut nc, &many[..7]).expect("native extend"),
        );
        check(&case, "extend to the capacity", &b, &n);
    }
}

#[test]
fn bad_inputs_are_refused() {
    let _guard = serial();
    let cases = cases();
    let (plain, aligned) = (&cases[0], &cases[1]);
    let model = burn_model(plain, 3);
    let native = NativeMultiStream::from_burn(&model, &plain.config).expect("engine");
    let k = plain.config.streams;
    let s = CODEBOOK as u32;
    // A voice vector for a model without global_dim; a text id past the vocabulary; a column
    // of the wrong width or with an id past S.
    let voiced = MsPrompt {
        text: vec![1],
        voice: Some(vec![0.0; 4]),
        track: None,
    };
    let mut c = native.new_cache(&voiced, 8).expect("cache");
    assert!(native.prefill(&mut c, &voiced, &[vec![s; k]]).is_err());
    let bad_text = MsPrompt {
        text: vec![TEXT_VOCAB as u32],
        voice: None,
        track: None,
    };
    let mut c = native.new_cache(&bad_text, 8).expect("cache");
    assert!(native.prefill(&mut c, &bad_text, &[vec![s; k]]).is_err());
    assert!(
        native
            .prefill(&mut c, &bad_text, &[vec![s; k + 1]])
            .is_err()
    );
    assert!(
        native
            .prefill(&mut c, &bad_text, &[vec![s + 1; k]])
            .is_err()
    );
    assert!(c.native().is_empty());
    // Capacity past max_seq_len.
    assert!(native.new_cache(&bad_text, 1000).is_err());
    // The config must describe the model.
    assert!(NativeMultiStream::from_burn(&model, &aligned.config).is_err());

    // An aligned model without its track.
    let model = burn_model(aligned, 3);
    let native = NativeMultiStream::from_burn(&model, &aligned.config).expect("engine");
    let lm = MsFrameLm {
        model: &model,
        config: &aligned.config,
    };
    let no_track = MsPrompt {
        text: vec![1, 2],
        voice: None,
        track: None,
    };
    let k = aligned.config.streams;
    let mut c = native.new_cache(&no_track, 8).expect("cache");
    assert!(native.prefill(&mut c, &no_track, &[vec![s; k]]).is_err());
    let mut bc = lm.new_cache(&no_track, 8).expect("cache");
    assert!(lm.prefill(&mut bc, &no_track, &[vec![s; k]]).is_err());
}

fn requests(case: &Case, model: &MultiStreamModel) -> Vec<FrameRequest<MsPrompt>> {
    let k = case.config.streams;
    let mut with_codes = FrameRequest::new(prompt(case, model, &[2, 5, 9]), 14, 0);
    with_codes.codes = (0..k)
        .map(|j| vec![(j as u32 + 1) % CODEBOOK as u32, 7])
        .collect();
    vec![
        FrameRequest::new(prompt(case, model, &[1, 4, 2, 11, 7]), 14, 0),
        with_codes,
    ]
}

#[test]
fn greedy_ar_and_mtp_decoding_match_the_burn_adapter() {
    let _guard = serial();
    for case in cases() {
        let model = burn_model(&case, 5);
        let native = NativeMultiStream::from_burn(&model, &case.config).expect("engine");
        let lm = MsFrameLm {
            model: &model,
            config: &case.config,
        };
        let greedy = SamplerConfig::greedy();
        for (r, request) in requests(&case, &model).iter().enumerate() {
            let b = FrameArDecoder::new()
                .generate(&lm, request, &greedy)
                .expect("burn ar");
            let n = FrameArDecoder::new()
                .generate(&native, request, &greedy)
                .expect("native ar");
            assert_eq!(n.columns, b.columns, "[{}] request {r}: AR", case.name);
            assert_eq!(n.frames, b.frames);
            let heads = lm.heads();
            if heads > 1 {
                let decoder = FrameMtpDecoder::new(heads).expect("decoder");
                let b = decoder.generate(&lm, request, &greedy).expect("burn mtp");
                let n = decoder
                    .generate(&native, request, &greedy)
                    .expect("native mtp");
                assert_eq!(n.columns, b.columns, "[{}] request {r}: MTP", case.name);
                // Everything but the time spent in the model.
                let untimed = |s: &FrameStats| FrameStats {
                    model_time: Default::default(),
                    ..s.clone()
                };
                assert_eq!(
                    untimed(&n.stats),
                    untimed(&b.stats),
                    "[{}] request {r}: MTP",
                    case.name
                );
                eprintln!(
                    "[{}] request {r}: {} columns, MTP stats {:?}",
                    case.name,
                    n.columns.len(),
                    n.stats
                );
            }
        }
    }
}

/// Largest |Δ| and the standard deviation of `a`.
fn compare(a: &FrameLogits, b: &FrameLogits) -> (f32, f32) {
    let v = a.as_slice();
    let mean = v.iter().sum::<f32>() / v.len() as f32;
    let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f32>() / v.len() as f32;
    (max_diff(a, b), var.sqrt())
}

#[test]
fn bf16_weights_stay_close_to_f32_and_decode_alike() {
    let _guard = serial();
    for case in cases() {
        let model = burn_model(&case, 9);
        let f32_engine = NativeMultiStream::from_burn(&model, &case.config).expect("f32");
        let bf16 = NativeMultiStream::from_burn_with(&model, &case.config, WeightFormat::Bf16)
            .expect("bf16");
        assert_eq!(bf16.weight_format(), WeightFormat::Bf16);
        assert_eq!(f32_engine.weight_format(), WeightFormat::F32);
        assert!(bf16.weight_bytes() < f32_engine.weight_bytes());
        let k = case.config.streams;
        let heads = f32_engine.heads();
        let p = prompt(&case, &model, &[1, 4, 2, 11, 7]);
        let mut fc = f32_engine.new_cache(&p, 20).expect("cache");
        let mut bc = bf16.new_cache(&p, 20).expect("cache");
        let lead = vec![vec![CODEBOOK as u32; k]];
        let mut worst = 0.0f32;
        let mut rel = 0.0f32;
        let mut note = |(d, sd): (f32, f32)| {
            worst = worst.max(d);
            rel = rel.max(d / sd);
        };
        note(compare(
            &f32_engine.prefill(&mut fc, &p, &lead).expect("prefill"),
            &bf16.prefill(&mut bc, &p, &lead).expect("prefill"),
        ));
        for (t, width) in [(1usize, 1usize), (2, 4), (6, 2)] {
            let cols: Vec<Vec<u32>> = (t..t + width).map(|s| column(k, s)).collect();
            note(compare(
                &f32_engine.extend(&mut fc, &cols).expect("extend"),
                &bf16.extend(&mut bc, &cols).expect("extend"),
            ));
            note(compare(
                &f32_engine.head_logits(&fc, heads).expect("heads"),
                &bf16.head_logits(&bc, heads).expect("heads"),
            ));
        }
        eprintln!(
            "[{}] bf16 vs f32: max |Δlogit| {worst:.2e}, {:.2} % of the logit std",
            case.name,
            100.0 * rel
        );
        assert!(rel <= BF16_REL_TOL, "[{}] bf16: {rel}", case.name);

        let greedy = SamplerConfig::greedy();
        for (r, request) in requests(&case, &model).iter().enumerate() {
            let a = FrameArDecoder::new()
                .generate(&f32_engine, request, &greedy)
                .expect("f32 ar");
            let b = FrameArDecoder::new()
                .generate(&bf16, request, &greedy)
                .expect("bf16 ar");
            assert_eq!(a.columns, b.columns, "[{}] request {r}: bf16 AR", case.name);
        }
    }
}
