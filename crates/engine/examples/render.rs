//! Where the real voice's renderer spends its time: the shipped mel decoder and vocoder
//! (`checkpoints/kathleen`) on Burn and on the engine (f32 and bf16 weights), a 5-second
//! utterance of codes and phones, milliseconds per render (median of 9) and the real-time
//! factor, the mel decoder and the vocoder apart.
//!
//! `cargo run --release -p voxspec-engine --example render [-- FRAMES]`

mod common;

use std::path::Path;

use burn::tensor::Device;
use voxspec_codec::MelSpeech;
use voxspec_engine::{NativeMelSpeech, WeightFormat};

use crate::common::{median_time, values};

fn main() {
    let frames: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(250);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/kathleen");
    let device = Device::flex();
    let mel = MelSpeech::load(
        &root.join("mel_decoder"),
        Some(&root.join("vocoder")),
        &device,
    )
    .expect("the shipped mel decoder and vocoder");
    let config = mel.config().clone();
    let codes: Vec<Vec<u32>> = vec![
        values(frames, 1)
            .iter()
            .map(|v| ((v + 0.5) * 256.0) as u32 % 256)
            .collect(),
    ];
    let phones: Vec<u32> = (0..frames as u32).map(|t| (t / 6) % 44).collect();
    let seconds = (frames * config.codec_hop) as f64 / f64::from(config.mel.sample_rate);
    println!(
        "{frames} frames ({seconds:.1} s), {} threads",
        rayon::current_num_threads()
    );
    println!("| renderer | mel decoder ms | vocoder ms | total ms | RTF |");
    println!("|---|---:|---:|---:|---:|");
    let burn_total = median_time(9, || {
        mel.synthesize(&codes, Some(&phones)).expect("render");
    });
    let burn_mel = median_time(9, || {
        mel.log_mel(&codes, Some(&phones)).expect("log-mel");
    });
    println!(
        "| Burn | {:.1} | {:.1} | {:.1} | {:.4} |",
        1e3 * burn_mel,
        1e3 * (burn_total - burn_mel),
        1e3 * burn_total,
        burn_total / seconds
    );
    for format in [WeightFormat::F32, WeightFormat::Bf16] {
        let native = NativeMelSpeech::from_burn(&mel, format).expect("native renderer");
        let (log_mel, mel_frames) = native
            .decoder()
            .log_mel(&codes, Some(&phones))
            .expect("log-mel");
        let dec = median_time(9, || {
            native
                .decoder()
                .log_mel(&codes, Some(&phones))
                .expect("log-mel");
        });
        let voc = median_time(9, || {
            native
                .vocoder()
                .synthesize(&log_mel, mel_frames)
                .expect("vocoder");
        });
        println!(
            "| engine, {format} | {:.1} | {:.1} | {:.1} | {:.4} |",
            1e3 * dec,
            1e3 * voc,
            1e3 * (dec + voc),
            (dec + voc) / seconds
        );
    }
}
