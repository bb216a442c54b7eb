//! Streamed synthesis equals the one-shot synthesis when the NAR sees the whole utterance (one
//! pass, or windows wide enough to cover it), within float rounding; narrow NAR windows give
//! audio of the same length, and the first chunk is the configured size.

use std::path::Path;

use burn::tensor::Device;
use voxspec_infer::SamplerConfig;
use voxspec_tts::{
    DecoderParts, DecoderSpec, Lengths, NarWindow, Pipeline, SpeechItem, StreamConfig, TtsError,
    write_untrained_experiment,
};

/// Largest sample difference allowed between streamed and one-shot audio.
const TOLERANCE: f32 = 1e-5;

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "streamed and one-shot lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn streamed_audio_equals_one_shot_audio() {
    let dir = tempfile::tempdir().unwrap();
    let codec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/codec-minitts");
    let device = Device::flex();
    let paths = write_untrained_experiment(dir.path(), &codec, &device).unwrap();
    let pipeline = Pipeline::load(&paths, &device).unwrap();
    let text = pipeline.text_ids("Hi.").unwrap();
    let request = pipeline
        .request(
            &text,
            None,
            &Lengths {
                // The untrained experiment's models have 64 positions: a short text and a long
                // utterance for it, so there are several chunks.
                min_ratio: 40.0 / text.len() as f32,
                max_ratio: 40.0 / text.len() as f32,
                ..Lengths::default()
            },
            4,
        )
        .unwrap();
    let sampler = SamplerConfig::default();
    let mut decoder = DecoderParts::default()
        .build(&DecoderSpec::Ar, &pipeline.lm)
        .unwrap();
    let one_shot = pipeline
        .synthesize(decoder.as_mut(), &request, &text, None, &sampler)
        .unwrap();
    let frames = one_shot.generation.tokens.len();
    let item = SpeechItem {
        request: request.clone(),
        text: text.clone(),
        prompt: None,
    };
    assert!(
        frames >= 35,
        "the untrained model spoke only {frames} frames"
    );
    let hop = pipeline.codec_config.hop_length();
    assert_eq!(one_shot.samples.len(), frames * hop);

    let exact = [NarWindow::Whole, NarWindow::Sliding { context: frames }];
    for nar in exact {
        let config = StreamConfig {
            first_frames: 12,
            chunk_frames: 11,
            nar,
        };
        let mut sizes = Vec::new();
        let streamed = pipeline
            .synthesize_stream(decoder.as_mut(), &item, &sampler, config, &mut |chunk| {
                sizes.push(chunk.len());
                Ok(())
            })
            .unwrap();
        assert_eq!(
            streamed.synthesis.generation.tokens,
            one_shot.generation.tokens
        );
        let d = max_diff(&streamed.synthesis.samples, &one_shot.samples);
        assert!(d <= TOLERANCE, "{nar:?}: max difference {d}");
        assert!(
            streamed.chunks >= frames / 11,
            "{nar:?}: {} chunks",
            streamed.chunks
        );
        assert_eq!(sizes.iter().sum::<usize>(), frames * hop);
        // The first chunk is the first 12 frames less the codec's lookahead.
        let lookahead = pipeline.codec.decode_stream().unwrap().lookahead();
        assert!(lookahead < 12);
        assert_eq!(sizes[0], (12 - lookahead) * hop);
    }

    // Narrow windows: the NAR's codes may differ, the length may not.
    let narrow = StreamConfig {
        first_frames: 10,
        chunk_frames: 10,
        nar: NarWindow::Sliding { context: 5 },
    };
    let mut stream = pipeline
        .stream(&text, None, &one_shot.generation.tokens, narrow)
        .unwrap();
    let mut total = 0;
    while let Some(chunk) = stream.next_chunk().unwrap() {
        total += chunk.len();
    }
    assert!(stream.is_done());
    assert_eq!(total, frames * hop);

    let bad = StreamConfig {
        first_frames: 0,
        ..StreamConfig::default()
    };
    assert!(matches!(
        pipeline.stream(&text, None, &one_shot.generation.tokens, bad),
        Err(TtsError::Config(_))
    ));
}
