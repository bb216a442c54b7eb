//! The native renderer (mel decoder + Vocos vocoder) against the Burn `MelSpeech` it was built
//! from: the log-mel and the samples within tolerance for decoders with and without a phone
//! input, even and odd upsampling; bf16 weights within a looser one; spans equal the whole
//! render's; bad input an error naming it; Griffin-Lim refused.

use burn::module::Param;
use burn::nn::LayerNorm;
use burn::tensor::{Device, Distribution, Tensor};
use voxspec_codec::mel_decoder::MelRenderer;
use voxspec_codec::vocoder::{ConvNextBlock, GriffinLimConfig, Vocoder, VocosConfig};
use voxspec_codec::{MelDecoderConfig, MelSpeech};
use voxspec_engine::{EngineError, NativeMelSpeech, WeightFormat};

use crate::support::draw;

/// Random scales and shifts (LayerNorm starts at γ = 1, β = 0, which hides a dropped β).
fn randomise(norm: &mut LayerNorm, device: &Device) {
    let d = norm.gamma.val().dims()[0];
    norm.gamma = Param::from_tensor(Tensor::random([d], Distribution::Uniform(0.5, 1.5), device));
    norm.beta = Some(Param::from_tensor(Tensor::random(
        [d],
        Distribution::Normal(0.0, 0.3),
        device,
    )));
}

fn randomise_blocks(blocks: &mut [ConvNextBlock], device: &Device) {
    for b in blocks {
        randomise(&mut b.norm, device);
        let d = b.gamma.val().dims()[0];
        b.gamma = Param::from_tensor(Tensor::random([d], Distribution::Uniform(0.2, 0.6), device));
    }
}

fn speech(upsample: usize, phones: Option<usize>) -> (MelSpeech, MelDecoderConfig) {
    let device = Device::flex();
    let vconf = VocosConfig::tiny();
    let mut vocos = vconf.init(&device).unwrap();
    randomise(&mut vocos.norm, &device);
    randomise(&mut vocos.final_norm, &device);
    randomise_blocks(&mut vocos.blocks, &device);
    let vocoder = Vocoder::new(vconf.clone(), vocos, &device).unwrap();
    let config = MelDecoderConfig::for_vocoder(2, 16, upsample * vconf.hop_length, &vconf)
        .with_dim(32)
        .with_intermediate_dim(96)
        .with_n_code_blocks(2)
        .with_n_mel_blocks(1)
        .with_phones(phones);
    let mut model = config.init(&device).unwrap();
    randomise(&mut model.norm, &device);
    randomise(&mut model.final_norm, &device);
    randomise_blocks(&mut model.code_blocks, &device);
    randomise_blocks(&mut model.mel_blocks, &device);
    let mel = MelSpeech::new(
        config.clone(),
        model,
        MelRenderer::Vocoder(Box::new(vocoder)),
        &device,
    )
    .unwrap();
    (mel, config)
}

/// Largest difference over the reference's RMS.
fn relative(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let rms = (b.iter().map(|v| v * v).sum::<f32>() / b.len() as f32).sqrt();
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max);
    diff / rms.max(1e-12)
}

fn inputs(
    config: &MelDecoderConfig,
    frames: usize,
    seed: u64,
) -> (Vec<Vec<u32>>, Option<Vec<u32>>) {
    let codes = (0..config.n_q as u64 + 1)
        .map(|q| draw(frames, config.codebook_size as u32, seed + q))
        .collect();
    let phones = (config.phone_vocab() > 0)
        .then(|| draw(frames, config.phone_vocab() as u32 + 1, seed + 99));
    (codes, phones)
}

#[test]
fn native_renderer_matches_burn() {
    for (upsample, phones) in [(2, Some(7)), (2, None), (3, Some(5))] {
        let (mel, config) = speech(upsample, phones);
        let native = NativeMelSpeech::from_burn(&mel, WeightFormat::F32).unwrap();
        for (frames, seed) in [(1, 3), (9, 5), (40, 11)] {
            let (codes, phones) = inputs(&config, frames, seed);
            let what = format!("upsample {upsample}, phones {phones:?}, {frames} frames");
            let (want_mel, want_frames) = mel.log_mel(&codes, phones.as_deref()).unwrap();
            let (got_mel, got_frames) =
                native.decoder().log_mel(&codes, phones.as_deref()).unwrap();
            assert_eq!(got_frames, want_frames, "{what}");
            let e = relative(&got_mel, &want_mel);
            assert!(e < 1e-4, "{what}: log-mel differs by {e} of its RMS");
            let want = mel.synthesize(&codes, phones.as_deref()).unwrap();
            let got = native.synthesize(&codes, phones.as_deref()).unwrap();
            assert_eq!(got.len(), frames * config.codec_hop, "{what}");
            let e = relative(&got, &want);
            assert!(e < 1e-3, "{what}: samples differ by {e} of their RMS");
        }
    }
}

#[test]
fn the_phones_change_the_native_render() {
    let (mel, config) = speech(2, Some(7));
    let native = NativeMelSpeech::from_burn(&mel, WeightFormat::F32).unwrap();
    let (codes, phones) = inputs(&config, 12, 21);
    let mut other = phones.clone().unwrap();
    other[5] = (other[5] + 1) % 8;
    let a = native.synthesize(&codes, phones.as_deref()).unwrap();
    let b = native.synthesize(&codes, Some(&other)).unwrap();
    assert!(relative(&a, &b) > 1e-3, "one phone changed nothing");
}

#[test]
fn bf16_weights_stay_near_f32() {
    let (mel, config) = speech(2, Some(7));
    let f32s = NativeMelSpeech::from_burn(&mel, WeightFormat::F32).unwrap();
    let bf16 = NativeMelSpeech::from_burn(&mel, WeightFormat::Bf16).unwrap();
    assert_eq!(bf16.weight_format(), WeightFormat::Bf16);
    let (codes, phones) = inputs(&config, 30, 7);
    let (a, _) = f32s.decoder().log_mel(&codes, phones.as_deref()).unwrap();
    let (b, _) = bf16.decoder().log_mel(&codes, phones.as_deref()).unwrap();
    let e = relative(&b, &a);
    assert!(e < 0.05, "bf16 log-mel differs by {e} of its RMS");
    assert!(e > 0.0, "bf16 weights changed nothing: not stored as bf16");
}

#[test]
fn a_span_is_the_whole_renders_slice() {
    let (mel, config) = speech(2, Some(7));
    let native = NativeMelSpeech::from_burn(&mel, WeightFormat::F32).unwrap();
    let (codes, phones) = inputs(&config, 20, 9);
    let whole = native.synthesize(&codes, phones.as_deref()).unwrap();
    let hop = config.codec_hop;
    let span = native
        .synthesize_span(&codes, phones.as_deref(), 4, 11)
        .unwrap();
    assert_eq!(span, whole[4 * hop..11 * hop]);
    assert!(
        native
            .synthesize_span(&codes, phones.as_deref(), 4, 4)
            .unwrap()
            .is_empty()
    );
    assert!(matches!(
        native.synthesize_span(&codes, phones.as_deref(), 12, 21),
        Err(EngineError::Input { .. })
    ));
}

#[test]
fn bad_input_is_an_error_naming_it() {
    let (mel, config) = speech(2, Some(7));
    let native = NativeMelSpeech::from_burn(&mel, WeightFormat::F32).unwrap();
    let (mut codes, phones) = inputs(&config, 10, 1);
    let message = |r: voxspec_engine::Result<Vec<f32>>| r.unwrap_err().to_string();
    let e = message(native.synthesize(&codes, None));
    assert!(e.contains("phones"), "{e}");
    let e = message(native.synthesize(&codes, Some(&[1, 2])));
    assert!(e.contains("expected 10"), "{e}");
    let e = message(native.synthesize(&codes, Some(&[8; 10])));
    assert!(e.contains("id 8"), "{e}");
    let e = message(native.synthesize(&codes[..1], phones.as_deref()));
    assert!(e.contains("at least 2 layers"), "{e}");
    codes[1][3] = 16;
    let e = message(native.synthesize(&codes, phones.as_deref()));
    assert!(e.contains("code 16 in layer 1"), "{e}");
    let e = message(native.synthesize(&[vec![], vec![]], Some(&[])));
    assert!(e.contains("mel decoder codes"), "{e}");
}

#[test]
fn griffin_lim_is_refused() {
    let device = Device::flex();
    let (mel, config) = speech(2, None);
    let gl = MelSpeech::new(
        config,
        mel.model().clone(),
        MelRenderer::GriffinLim(GriffinLimConfig::default()),
        &device,
    )
    .unwrap();
    let e = NativeMelSpeech::from_burn(&gl, WeightFormat::F32).unwrap_err();
    assert!(e.to_string().contains("Griffin-Lim"), "{e}");
}

#[test]
fn the_shipped_renderer_runs_natively_as_on_burn() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/kathleen");
    let device = Device::flex();
    let mel = MelSpeech::load(
        &root.join("mel_decoder"),
        Some(&root.join("vocoder")),
        &device,
    )
    .unwrap();
    let config = mel.config().clone();
    let (codes, phones) = inputs(&config, 60, 17);
    let want = mel.synthesize(&codes, phones.as_deref()).unwrap();
    for (format, tol) in [(WeightFormat::F32, 1e-3), (WeightFormat::Bf16, 0.01)] {
        let native = NativeMelSpeech::from_burn(&mel, format).unwrap();
        let got = native.synthesize(&codes, phones.as_deref()).unwrap();
        let e = relative(&got, &want);
        assert!(e < tol, "{format}: samples differ by {e} of their RMS");
    }
}
