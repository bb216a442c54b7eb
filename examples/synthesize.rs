//! Speak one sentence with the shipped real voice (`checkpoints/kathleen`) from Rust: load the
//! pipeline, build a decoder (MTP with four heads, greedy), synthesise, write a WAV.
//!
//! ```text
//! cargo run --release --example synthesize -- "The birch canoe slid on the smooth planks." out.wav
//! ```
//! Run it from the repository root (the checkpoints are found relative to it).

use std::path::Path;

use voxspec::audio::{Audio, WavFormat, write_wav};
use voxspec::infer::SamplerConfig;
use voxspec::tts::{DecoderParts, DecoderSpec, ModelPaths, Pipeline};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let text = args
        .next()
        .unwrap_or_else(|| "The birch canoe slid on the smooth planks.".to_string());
    let out = args
        .next()
        .unwrap_or_else(|| "synthesize-example.wav".to_string());

    let device = burn::tensor::Device::flex();
    // AR model, NAR model, codec and transition matrix of one trained experiment directory.
    let pipeline = Pipeline::load(&ModelPaths::experiment("checkpoints/kathleen"), &device)?;
    // Every decoder (AR, MTP, MTP + Viterbi, speculative, self-speculative) is built the same
    // way; DecoderParts holds what some of them need (a draft, the transition matrix, groups).
    let mut decoder =
        DecoderParts::default().build(&DecoderSpec::Mtp { heads: 4 }, &pipeline.lm)?;
    let speech = pipeline.speak(&text, decoder.as_mut(), &SamplerConfig::greedy(), 0)?;

    let rate = pipeline.sample_rate();
    let seconds = speech.samples.len() as f64 / f64::from(rate);
    write_wav(
        Path::new(&out),
        &Audio::new(speech.samples, rate),
        WavFormat::Pcm16,
    )?;
    println!(
        "{out}: {seconds:.2} s of audio; {} codes by {} in {:.3} s, NAR and codec {:.3} s",
        speech.generation.tokens.len(),
        decoder.name(),
        speech.ar_seconds,
        speech.rest_seconds
    );
    Ok(())
}
