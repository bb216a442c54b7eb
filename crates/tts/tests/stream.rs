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
        .stream(&text, None, &one_shot.generation.tokens, None, narrow)
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
        pipeline.stream(&text, None, &one_shot.generation.tokens, None, bad),
        Err(TtsError::Config(_))
    ));
}

/// An aligned NAR gets the phone track from the request's durations: one-shot and streamed
/// audio (whole, and sliding windows that cut the track with the codes) agree, and the
/// durations change what it renders.
#[test]
fn an_aligned_nar_is_told_the_durations_in_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let codec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/codec-minitts");
    let device = Device::flex();
    device.seed(7);
    let paths = write_untrained_experiment(dir.path(), &codec, &device).unwrap();
    // Replace the NAR with an aligned one whose track embedding is far from zero.
    let plain = Pipeline::load(&paths, &device).unwrap();
    let config = voxspec_mtp::NarConfig::tiny(
        plain.tokenizer.vocab_size(),
        plain.codec_config.codebook_size,
        plain.nar.n_q(),
    )
    .with_track(Some(voxspec_mtp::NarTrackConfig::new()));
    let mut nar = config.init(&device).unwrap();
    if let Some(track) = nar.track.as_mut() {
        let dims = track.embedding.weight.val().dims();
        track.embedding.weight = burn::module::Param::from_tensor(burn::tensor::Tensor::random(
            dims,
            burn::tensor::Distribution::Normal(0.0, 3.0),
            &device,
        ));
    }
    voxspec_mtp::save_nar(&paths.nar, &config, &nar).unwrap();
    let pipeline = Pipeline::load(&paths, &device).unwrap();
    let text = pipeline.text_ids("Hi.").unwrap();
    let frames = 40;
    let first: Vec<u32> = (0..frames as u32).map(|i| (i * 7) % 16).collect();
    // Unequal durations (so rotating them moves the phones), adding up to the frames.
    let mut durations: Vec<u32> = (0..text.len() as u32).map(|i| 2 + 3 * i).collect();
    durations[0] += frames as u32 - durations.iter().sum::<u32>();
    let one_shot = pipeline
        .vocode(&text, None, &first, Some(&durations))
        .unwrap();
    for nar in [NarWindow::Whole, NarWindow::Sliding { context: frames }] {
        let config = StreamConfig {
            first_frames: 12,
            chunk_frames: 11,
            nar,
        };
        let mut stream = pipeline
            .stream(&text, None, &first, Some(&durations), config)
            .unwrap();
        let mut samples = Vec::new();
        while let Some(chunk) = stream.next_chunk().unwrap() {
            samples.extend(chunk);
        }
        let d = max_diff(&samples, &one_shot);
        assert!(d <= TOLERANCE, "{nar:?}: max difference {d}");
    }
    // Narrow windows cut the track with the codes: the length holds.
    let narrow = StreamConfig {
        first_frames: 10,
        chunk_frames: 10,
        nar: NarWindow::Sliding { context: 5 },
    };
    let mut stream = pipeline
        .stream(&text, None, &first, Some(&durations), narrow)
        .unwrap();
    let mut total = 0;
    while let Some(chunk) = stream.next_chunk().unwrap() {
        total += chunk.len();
    }
    assert_eq!(total, one_shot.len());
    let untold = pipeline.vocode(&text, None, &first, None).unwrap();
    let mut other = durations.clone();
    other.rotate_left(1);
    let moved = pipeline.vocode(&text, None, &first, Some(&other)).unwrap();
    assert!(
        max_diff(&untold, &one_shot) > 1e-3,
        "the track changed nothing"
    );
    assert!(
        max_diff(&moved, &one_shot) > 1e-3,
        "other durations changed nothing"
    );
}

/// A mel decoder with a vocoder streams chunk by chunk (each from a window with the context it
/// depends on) and its chunks join into the one-shot render; the first chunk is the first
/// `first_frames` frames, with no lookahead held back.
#[test]
fn a_mel_decoder_with_a_vocoder_streams_chunks_that_join_into_the_one_shot_audio() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    device.seed(3);
    let pipeline = mel_vocoder_pipeline(dir.path(), None, &device);
    let codec_config = pipeline.codec_config.clone();
    let context = pipeline
        .mel
        .as_ref()
        .and_then(|m| m.context_frames())
        .unwrap();
    let text = pipeline.text_ids("Hi.").unwrap();
    // As long as the untrained NAR's 64 positions allow, with chunks whose windows are cut
    // on both sides.
    let frames = 55;
    // The third chunk, frames 23..34, is rendered from a window cut on both sides.
    assert!(23 > context && 34 + context < frames, "context {context}");
    let first: Vec<u32> = (0..frames as u32).map(|i| (i * 7 + i * i) % 16).collect();
    let one_shot = pipeline.vocode(&text, None, &first, None).unwrap();
    let hop = codec_config.hop_length();
    assert_eq!(one_shot.len(), frames * hop);
    let scale = one_shot.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.0);
    let config = StreamConfig {
        first_frames: 12,
        chunk_frames: 11,
        nar: NarWindow::Whole,
    };
    let mut stream = pipeline.stream(&text, None, &first, None, config).unwrap();
    let mut sizes = Vec::new();
    let mut samples = Vec::new();
    while let Some(chunk) = stream.next_chunk().unwrap() {
        sizes.push(chunk.len());
        samples.extend(chunk);
    }
    let d = max_diff(&samples, &one_shot) / scale;
    assert!(d <= 1e-4, "relative max difference {d}");
    assert_eq!(sizes[0], 12 * hop);
    assert!(sizes.len() >= frames / 11, "{} chunks", sizes.len());
    // Narrow NAR windows: the codes may differ, the length may not.
    let narrow = StreamConfig {
        first_frames: 10,
        chunk_frames: 10,
        nar: NarWindow::Sliding { context: 5 },
    };
    let mut stream = pipeline.stream(&text, None, &first, None, narrow).unwrap();
    let mut total = 0;
    while let Some(chunk) = stream.next_chunk().unwrap() {
        total += chunk.len();
    }
    assert_eq!(total, frames * hop);
}

/// A mel decoder that reads fewer RVQ layers than the NAR predicts makes the NAR stop at them:
/// the audio equals the render of the NAR's every layer (which the decoder ignores past its
/// own), for decoders of RVQ-1 alone (no NAR stage runs) and of two layers (one stage).
#[test]
fn the_nar_fills_only_the_layers_the_mel_decoder_reads() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    let first: Vec<u32> = (0..20u32).map(|i| (i * 5 + i * i) % 16).collect();
    for layers in [1, 2] {
        device.seed(5);
        let pipeline =
            mel_vocoder_pipeline(&dir.path().join(layers.to_string()), Some(layers), &device);
        assert_eq!(pipeline.synthesis_layers(), layers);
        assert!(pipeline.nar.n_q() > layers);
        let text = pipeline.text_ids("Hi.").unwrap();
        let audio = pipeline.vocode(&text, None, &first, None).unwrap();
        let all = pipeline
            .nar
            .generate(&text, &vec![Vec::new(); pipeline.nar.n_q()], &first, None)
            .unwrap();
        assert_eq!(all.len(), pipeline.nar.n_q());
        let rendered = pipeline.decode_codes(&all, None).unwrap();
        assert_eq!(audio.len(), rendered.len());
        let scale = rendered.iter().fold(0f32, |m, v| m.max(v.abs()));
        assert!(scale > 0.0);
        let d = max_diff(&audio, &rendered) / scale;
        assert!(d <= 1e-4, "{layers} layers: relative max difference {d}");
    }
}

/// An untrained experiment in `dir` (on the minitts codec) rendering through an untrained small
/// vocoder and mel decoder of the codec's first `layers` RVQ layers (all for `None`).
fn mel_vocoder_pipeline(dir: &Path, layers: Option<usize>, device: &Device) -> Pipeline {
    Pipeline::load(&mel_vocoder_paths(dir, layers, false, device), device).unwrap()
}

/// The paths of [`mel_vocoder_pipeline`]'s experiment; with `phones`, the mel decoder reads
/// each frame's phone (ids of the AR model's tokenizer).
fn mel_vocoder_paths(
    dir: &Path,
    layers: Option<usize>,
    phones: bool,
    device: &Device,
) -> voxspec_tts::ModelPaths {
    let codec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/codec-minitts");
    let mut paths = write_untrained_experiment(dir, &codec, device).unwrap();
    let plain = Pipeline::load(&paths, device).unwrap();
    let codec_config = plain.codec_config;
    let vocoder = voxspec_codec::VocosConfig::hop160()
        .with_dim(32)
        .with_intermediate_dim(64)
        .with_n_layers(2);
    let vocoder_dir = dir.join("vocoder");
    voxspec_codec::vocoder::save_vocoder(&vocoder_dir, &vocoder, &vocoder.init(device).unwrap())
        .unwrap();
    let mel = voxspec_codec::MelDecoderConfig::for_vocoder(
        layers.unwrap_or(codec_config.n_q),
        codec_config.codebook_size,
        codec_config.hop_length(),
        &vocoder,
    )
    .with_phones(phones.then(|| plain.tokenizer.vocab_size()))
    .with_dim(32)
    .with_intermediate_dim(64)
    .with_n_code_blocks(2)
    .with_n_mel_blocks(1);
    let mel_dir = dir.join("mel_decoder");
    let mut model = mel.init(device).unwrap();
    if let Some(table) = model.phone_embedding.as_mut() {
        // Far from zero, so that the phones move the audio of an untrained decoder.
        let dims = table.weight.val().dims();
        table.weight = burn::module::Param::from_tensor(burn::tensor::Tensor::random(
            dims,
            burn::tensor::Distribution::Normal(0.0, 3.0),
            device,
        ));
    }
    voxspec_codec::mel_decoder::save_mel_decoder(&mel_dir, &mel, &model).unwrap();
    paths.mel_decoder = Some(mel_dir);
    paths.vocoder = Some(vocoder_dir);
    paths
}

/// A mel decoder that reads the phones gets them from the durations in every path (one shot,
/// streamed), where they move the audio; without durations it refuses, naming them; and it
/// loads only beside an aligned AR model.
#[test]
fn a_mel_decoder_that_reads_phones_is_told_them_from_the_durations() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    device.seed(11);
    let paths = mel_vocoder_paths(dir.path(), Some(1), true, &device);
    let refused = Pipeline::load(&paths, &device)
        .err()
        .expect("a plain AR model");
    assert!(refused.to_string().contains("not aligned"), "{refused}");
    // Make the AR model aligned.
    let plain = voxspec_mtp::load_mtp(&paths.ar, &device).unwrap().0;
    let aligned = plain
        .model
        .clone()
        .with_alignment(Some(voxspec_mtp::AlignConfig::new()));
    let file = voxspec_mtp::MtpFile {
        model: aligned.clone(),
        draft: None,
    };
    voxspec_mtp::save_mtp(&paths.ar, &file, &aligned.init(&device).unwrap()).unwrap();
    let pipeline = Pipeline::load(&paths, &device).unwrap();
    assert_eq!(pipeline.synthesis_layers(), 1);
    let text = pipeline.text_ids("Hi there.").unwrap();
    let frames = 50;
    let first: Vec<u32> = (0..frames as u32).map(|i| (i * 7) % 16).collect();
    let mut durations: Vec<u32> = (0..text.len() as u32).map(|i| 2 + 3 * (i % 4)).collect();
    let sum: u32 = durations.iter().sum();
    assert!(sum < frames as u32, "{sum}");
    durations[0] += frames as u32 - sum;
    let one_shot = pipeline
        .vocode(&text, None, &first, Some(&durations))
        .unwrap();
    let scale = one_shot.iter().fold(0f32, |m, v| m.max(v.abs()));
    assert!(scale > 0.0);
    let config = StreamConfig {
        first_frames: 12,
        chunk_frames: 11,
        nar: NarWindow::Whole,
    };
    let mut stream = pipeline
        .stream(&text, None, &first, Some(&durations), config)
        .unwrap();
    let mut samples = Vec::new();
    while let Some(chunk) = stream.next_chunk().unwrap() {
        samples.extend(chunk);
    }
    let d = max_diff(&samples, &one_shot) / scale;
    assert!(d <= 1e-4, "relative max difference {d}");
    let mut other = durations.clone();
    other.rotate_left(1);
    let moved = pipeline.vocode(&text, None, &first, Some(&other)).unwrap();
    assert!(
        max_diff(&moved, &one_shot) > 1e-3 * scale,
        "other durations changed nothing"
    );
    let untold = pipeline.vocode(&text, None, &first, None).unwrap_err();
    assert!(untold.to_string().contains("phone durations"), "{untold}");
}
