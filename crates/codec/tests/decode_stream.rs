//! Streaming decode equals one decode of all the codes, whatever the chunking, on a tiny random
//! codec and on the shipped one; with too little context it does not (the negative control).

use std::path::Path;

use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_codec::speechtokenizer::SeanetConfig;
use voxspec_codec::{CodecError, SpeechTokenizer, SpeechTokenizerConfig, load_codec};

/// Largest sample difference allowed between streamed and one-shot audio (float rounding of
/// the same operations on windows of different length).
const TOLERANCE: f32 = 1e-5;

fn tiny(device: &Device) -> SpeechTokenizer {
    SpeechTokenizerConfig::new()
        .with_seanet(
            SeanetConfig::new()
                .with_n_filters(4)
                .with_dimension(8)
                .with_strides(vec![4, 2])
                .with_lstm_layers(1),
        )
        .with_semantic_dimension(6)
        .with_n_q(3)
        .with_codebook_size(16)
        .init(device)
        .unwrap()
}

/// Pseudo-random codes `[n_q][frames]` below `size`.
fn codes(n_q: usize, frames: usize, size: u32, seed: u64) -> Vec<Vec<u32>> {
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (0..n_q)
        .map(|_| {
            (0..frames)
                .map(|_| {
                    state = state
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((state >> 33) % u64::from(size)) as u32
                })
                .collect()
        })
        .collect()
}

fn tensor(codes: &[Vec<u32>], from: usize, to: usize, device: &Device) -> Tensor<3, Int> {
    let flat: Vec<i64> = codes
        .iter()
        .flat_map(|l| l[from..to].iter().map(|&c| i64::from(c)))
        .collect();
    Tensor::from_data(TensorData::new(flat, [codes.len(), 1, to - from]), device)
}

fn one_shot(codec: &SpeechTokenizer, codes: &[Vec<u32>], device: &Device) -> Vec<f32> {
    let frames = codes[0].len();
    codec
        .decode(tensor(codes, 0, frames, device))
        .unwrap()
        .into_data()
        .try_into_vec::<f32>()
        .unwrap()
}

fn streamed(
    codec: &SpeechTokenizer,
    codes: &[Vec<u32>],
    chunks: &[usize],
    context: Option<usize>,
    device: &Device,
) -> Vec<f32> {
    let mut stream = codec.decode_stream().unwrap();
    if let Some(c) = context {
        stream = stream.with_context(c);
    }
    let frames = codes[0].len();
    let mut out = Vec::new();
    let mut at = 0;
    for &n in chunks.iter().cycle() {
        if at >= frames {
            break;
        }
        let to = (at + n).min(frames);
        let audio = stream.push(tensor(codes, at, to, device)).unwrap();
        at = to;
        // Everything but the lookahead is out after each push.
        assert!(
            stream.frames_released() + stream.lookahead() >= at,
            "released {} of {at} frames with lookahead {}",
            stream.frames_released(),
            stream.lookahead()
        );
        out.extend(audio);
    }
    out.extend(stream.finish().unwrap());
    out
}

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len(), "streamed and one-shot lengths differ");
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn tiny_codec_streams_exactly_under_any_chunking() {
    let device = Device::flex();
    let codec = tiny(&device);
    let codes = codes(3, 37, 16, 7);
    let reference = one_shot(&codec, &codes, &device);
    let scale = reference.iter().fold(0.0f32, |m, x| m.max(x.abs()));
    assert!(scale > 1e-3, "the decoder's output is flat ({scale})");
    for chunks in [vec![1], vec![2, 5, 3], vec![7], vec![37], vec![16, 1]] {
        let out = streamed(&codec, &codes, &chunks, None, &device);
        let d = max_diff(&out, &reference);
        assert!(d <= TOLERANCE, "chunks {chunks:?}: max difference {d}");
    }
}

#[test]
fn shipped_codec_streams_exactly_and_too_little_context_does_not() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/codec-minitts");
    let device = Device::flex();
    let (config, codec) = load_codec(&dir, &device).unwrap();
    let codes = codes(config.n_q, 60, config.codebook_size as u32, 3);
    let reference = one_shot(&codec, &codes, &device);
    let stream = codec.decode_stream().unwrap();
    assert!(stream.context() >= 1 && stream.lookahead() <= 12);
    for chunks in [vec![5], vec![13, 4, 25]] {
        let out = streamed(&codec, &codes, &chunks, None, &device);
        let d = max_diff(&out, &reference);
        assert!(d <= TOLERANCE, "chunks {chunks:?}: max difference {d}");
    }
    // The negative control: without context the chunk joins differ from the one-shot decode.
    let out = streamed(&codec, &codes, &[5], Some(0), &device);
    let d = max_diff(&out, &reference);
    assert!(d > 100.0 * TOLERANCE, "no context gave max difference {d}");
}

#[test]
fn misuse_is_an_error() {
    let device = Device::flex();
    let codec = tiny(&device);
    let codes = codes(3, 10, 16, 1);
    let mut stream = codec.decode_stream().unwrap();
    let two: Tensor<3, Int> = Tensor::zeros([3, 2, 4], &device);
    assert!(matches!(stream.push(two), Err(CodecError::Streaming(_))));
    stream.push(tensor(&codes, 0, 10, &device)).unwrap();
    stream.finish().unwrap();
    let err = stream.push(tensor(&codes, 0, 2, &device)).unwrap_err();
    assert!(
        err.to_string().contains("after the stream was finished"),
        "{err}"
    );
}
