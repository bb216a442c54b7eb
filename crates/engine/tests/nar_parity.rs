//! The native NAR against the Burn NAR it was built from: stage logits within 1e-4 with and
//! without a voice prompt, for the plain preset, a GPT-2-style stack (learned positions,
//! LayerNorm, GELU, biases) and an aligned NAR (phone track); generated codes equal; bad input
//! is an error naming it.

use burn::module::Param;
use burn::tensor::{Device, Distribution, Tensor};
use voxspec_engine::NativeNar;
use voxspec_mtp::{FrameTrack, NarConfig, NarItem, NarModel, NarTrackConfig};
use voxspec_nn::{MlpKind, NormKind, PositionKind, TransformerConfig};

use crate::support::draw;

const TOL: f32 = 1e-4;

/// A model with every parameter drawn at random (zero-initialised biases and embeddings would
/// hide mistakes).
fn model(config: &NarConfig, device: &Device) -> NarModel {
    let mut model = config.init(device).unwrap();
    let d = config.transformer.d_model;
    if let Some(track) = model.track.as_mut() {
        let rows = track.embedding.weight.val().dims()[0];
        track.embedding.weight = Param::from_tensor(Tensor::random(
            [rows, d],
            Distribution::Normal(0.0, 1.0),
            device,
        ));
    }
    model.sep = Param::from_tensor(Tensor::random(
        [1, 1, d],
        Distribution::Normal(0.0, 1.0),
        device,
    ));
    model
}

fn configs() -> Vec<(&'static str, NarConfig)> {
    let gpt2 = TransformerConfig::tiny()
        .with_causal(false)
        .with_dropout(0.0)
        .with_norm(NormKind::Layer)
        .with_positions(PositionKind::Learned)
        .with_mlp(MlpKind::Gelu)
        .with_bias(true);
    vec![
        ("plain", NarConfig::tiny(11, 16, 4)),
        ("gpt2", NarConfig::new(11, 16, 4, gpt2)),
        (
            "aligned",
            NarConfig::tiny(11, 16, 4).with_track(Some(NarTrackConfig::new().with_lookahead(2))),
        ),
    ]
}

#[test]
fn stage_logits_and_codes_match_burn() {
    let device = Device::flex();
    for (name, config) in configs() {
        let burn = model(&config, &device);
        let native = NativeNar::from_burn(&burn, &config).unwrap();
        let text = draw(7, 11, 1);
        for prompt in [0usize, 5] {
            let frames = 13;
            let codes: Vec<Vec<u32>> = (0..4)
                .map(|q| draw(prompt + frames, 16, 10 + q as u64))
                .collect();
            // The target frames speak the text's 7 phones for 2 frames each (the last is cut).
            let track = burn
                .track_layout()
                .map(|layout| FrameTrack::new(&text, &[2; 7]).ids(&layout, 0, frames));
            let all_track = burn.track_layout().map(|layout| {
                let mut ids = Vec::new();
                FrameTrack::push_none(prompt, &layout, &mut ids);
                ids.extend(track.as_deref().unwrap_or_default());
                ids
            });
            for stage in 1..4 {
                let input = burn
                    .inputs(&[NarItem {
                        track: all_track.as_deref(),
                        ..NarItem::new(&text, &codes, prompt)
                    }])
                    .unwrap();
                let want: Vec<f32> = burn
                    .forward(&input, stage)
                    .unwrap()
                    .narrow(1, prompt, frames)
                    .into_data()
                    .try_into_vec()
                    .unwrap();
                let got = native
                    .stage_logits(&text, &codes, prompt, stage, track.as_deref())
                    .unwrap();
                assert_eq!(got.len(), want.len());
                let worst = got
                    .iter()
                    .zip(&want)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f32::max);
                assert!(
                    worst < TOL,
                    "{name}, prompt {prompt}, stage {stage}: {worst}"
                );
            }
            let prompt_codes: Vec<Vec<u32>> = codes.iter().map(|l| l[..prompt].to_vec()).collect();
            let first = &codes[0][prompt..];
            let all = native
                .generate(&text, &prompt_codes, first, track.as_deref())
                .unwrap();
            assert_eq!(
                all,
                burn.generate(&text, &prompt_codes, first, track.as_deref())
                    .unwrap(),
                "{name}, prompt {prompt}"
            );
            // Stopping after fewer stages gives the same first layers.
            for layers in 1..=4 {
                let some = native
                    .generate_layers(&text, &prompt_codes, first, track.as_deref(), layers)
                    .unwrap();
                assert_eq!(
                    some,
                    all[..layers],
                    "{name}, prompt {prompt}, {layers} layers"
                );
            }
        }
    }
}

#[test]
fn bad_input_is_an_error() {
    let device = Device::flex();
    let config = NarConfig::tiny(11, 16, 4);
    let native = NativeNar::from_burn(&model(&config, &device), &config).unwrap();
    let prompt = vec![Vec::new(); 4];
    /// Text, prompt codes, first layer, and a word the error must contain.
    type Case<'a> = (&'a [u32], Vec<Vec<u32>>, Vec<u32>, &'a str);
    let cases: [Case<'_>; 4] = [
        (&[], prompt.clone(), vec![1, 2], "text token"),
        (&[99], prompt.clone(), vec![1, 2], "vocabulary"),
        (&[1], prompt.clone(), vec![1, 77], "codebook"),
        (&[1], vec![Vec::new(); 2], vec![1], "code layers"),
    ];
    for (text, prompt, first, needle) in cases {
        let err = native
            .generate(text, &prompt, &first, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains(needle), "{err:?} lacks {needle:?}");
    }
    let long = vec![1u32; 200];
    let err = native
        .generate(&[1], &prompt, &long, None)
        .unwrap_err()
        .to_string();
    assert!(err.contains("positions"), "{err}");
    let err = native
        .generate(&[1], &prompt, &[1, 2], Some(&[0, 0]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("not aligned"), "{err}");
    let aligned = NarConfig::tiny(11, 16, 4).with_track(Some(NarTrackConfig::new()));
    let native = NativeNar::from_burn(&model(&aligned, &device), &aligned).unwrap();
    let err = native
        .generate(&[1], &prompt, &[1, 2], Some(&[0, 0]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("2 track ids for 2 frames of 2 slots"), "{err}");
    let causal = NarConfig::new(11, 16, 4, TransformerConfig::tiny());
    let mut burn = model(&config, &device);
    burn.transformer = causal.transformer.init(&device).unwrap();
    assert!(NativeNar::from_burn(&burn, &causal).is_err());
}
