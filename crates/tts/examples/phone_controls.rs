//! What does a mel decoder with a phone input take from the AR model's codes, and what from the
//! phones? Speaks the first `N` test sentences from their transcripts (G2P, predicted
//! durations, greedy AR) and renders each four ways:
//!
//! - `both/`: the AR codes with their phones (what synthesis does);
//! - `codes-only/`: the AR codes, every frame told "no phone";
//! - `phones-only/`: the phones, every frame's code replaced by the sentence's most frequent
//!   AR code (the codes carry nothing);
//! - `other-codes/`: the phones with the AR codes of the next sentence (cut or repeated to the
//!   length).
//!
//! Each folder gets `<id>.wav` and `<id>.txt`, ready for `tools/asr_judge.py --dir`.
//!
//! ```text
//! cargo run --release -p voxspec-tts --example phone_controls -- MODELS MEL_DECODER DATA OUT [N]
//! ```
//! `MODELS` holds `ar/`, `nar/`, `codec/` and `vocoder/` (e.g. `checkpoints/kathleen`);
//! `MEL_DECODER` reads phones; `DATA` has `test.jsonl`.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use voxspec_audio::{Audio, WavFormat, write_wav};
use voxspec_data::read_manifest;
use voxspec_infer::SamplerConfig;
use voxspec_tts::{DecoderParts, DecoderSpec, Lengths, ModelPaths, Pipeline};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn write(out: &Path, dir: &str, id: &str, text: &str, samples: Vec<f32>, rate: u32) -> Result<()> {
    let dir = out.join(dir);
    std::fs::create_dir_all(&dir)?;
    write_wav(
        &dir.join(format!("{id}.wav")),
        &Audio::new(samples, rate),
        WavFormat::Pcm16,
    )?;
    std::fs::write(dir.join(format!("{id}.txt")), text)?;
    Ok(())
}

/// The most frequent code of `codes`.
fn mode(codes: &[u32]) -> u32 {
    let mut counts = std::collections::HashMap::new();
    for &c in codes {
        *counts.entry(c).or_insert(0usize) += 1;
    }
    counts
        .into_iter()
        .max_by_key(|&(c, n)| (n, std::cmp::Reverse(c)))
        .map_or(0, |(c, _)| c)
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 5 {
        return Err("usage: phone_controls MODELS MEL_DECODER DATA OUT [N]".into());
    }
    let mut paths = ModelPaths::experiment(&args[1]);
    paths.mel_decoder = Some(PathBuf::from(&args[2]));
    let out = PathBuf::from(&args[4]);
    let n: usize = args.get(5).map_or(Ok(100), |s| s.parse())?;
    let pipeline = Pipeline::load(&paths, &Device::flex())?;
    let mel = pipeline.mel.as_ref().filter(|m| m.phones() > 0).ok_or(
        "the mel decoder reads no phones: the controls compare what it takes from each input",
    )?;
    let utterances = read_manifest(&Path::new(&args[3]).join("test.jsonl"))?;
    let utterances = &utterances[..n.min(utterances.len())];
    let mut decoder = DecoderParts::default().build(&DecoderSpec::Ar, &pipeline.lm)?;
    let sampler = SamplerConfig {
        temperature: 0.0,
        ..SamplerConfig::default()
    };
    // Every sentence's greedy AR codes and the phones its durations place.
    let mut spoken = Vec::with_capacity(utterances.len());
    for (i, u) in utterances.iter().enumerate() {
        let ids = pipeline.text_ids(&u.text)?;
        let request = pipeline.request(&ids, None, &Lengths::default(), i as u64)?;
        let durations = request
            .prompt
            .durations
            .clone()
            .ok_or("the AR model is not aligned")?;
        let s = pipeline.synthesize(decoder.as_mut(), &request, &ids, None, &sampler)?;
        let codes = s.generation.tokens;
        let phones = mel.frame_phones(&ids, &durations, codes.len());
        spoken.push((codes, phones));
        eprintln!("{}/{} {}", i + 1, utterances.len(), u.id);
    }
    let rate = pipeline.sample_rate();
    let none = mel.phones() as u32;
    for (i, u) in utterances.iter().enumerate() {
        let (codes, phones) = &spoken[i];
        let frames = codes.len();
        let render =
            |c: Vec<u32>, p: &[u32]| pipeline.decode_codes(&[c], Some(p)).map_err(|e| e.into());
        let both: Result<Vec<f32>> = render(codes.clone(), phones);
        write(&out, "both", &u.id, &u.text, both?, rate)?;
        let untold = vec![none; frames];
        write(
            &out,
            "codes-only",
            &u.id,
            &u.text,
            render(codes.clone(), &untold)?,
            rate,
        )?;
        let flat = vec![mode(codes); frames];
        write(
            &out,
            "phones-only",
            &u.id,
            &u.text,
            render(flat, phones)?,
            rate,
        )?;
        let other = &spoken[(i + 1) % spoken.len()].0;
        let moved: Vec<u32> = (0..frames).map(|t| other[t % other.len()]).collect();
        write(
            &out,
            "other-codes",
            &u.id,
            &u.text,
            render(moved, phones)?,
            rate,
        )?;
    }
    Ok(())
}
