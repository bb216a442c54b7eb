//! Where does a trained experiment lose intelligibility? Renders the first `N` test utterances
//! four ways, each stage fed the truth one step further up the pipeline:
//!
//! - `codec/`: every code layer from the recording (the codec's resynthesis);
//! - `nar/`: RVQ-1 from the recording, layers 2..N from the NAR (told the recording's phone
//!   durations when it is aligned);
//! - `ar-truedur/`: the AR model given the recording's aligned phones and their frame counts;
//! - `ar/`: the whole pipeline from the transcript (G2P, predicted durations).
//!
//! Each folder gets `<id>.wav` and `<id>.txt` (the transcript), ready for
//! `tools/asr_judge.py --dir` or `voxspec eval intelligibility`. It also prints, per RVQ layer,
//! how often the NAR's code (from the recording's RVQ-1) equals the recording's.
//!
//! ```text
//! cargo run --release -p voxspec-tts --example stage_oracles -- EXP OUT [N] [TEMPERATURE]
//! ```
//! `EXP` is a main-job experiment (`<exp>/data/test.jsonl`, `<exp>/tokens`, the models).

use std::path::{Path, PathBuf};

use burn::data::dataset::Dataset;
use burn::tensor::Device;
use voxspec_audio::{Audio, WavFormat, write_wav};
use voxspec_data::{MissingCodes, TokenStore, TtsDataset, read_manifest};
use voxspec_infer::{Limits, Request, SamplerConfig};
use voxspec_mtp::{FrameTrack, TtsPrompt};
use voxspec_tts::{DecoderParts, DecoderSpec, Lengths, ModelPaths, Pipeline};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn write(out: &Path, dir: &str, id: &str, text: &str, samples: Vec<f32>, rate: u32) -> Result<()> {
    let dir = out.join(dir);
    std::fs::create_dir_all(&dir)?;
    let audio = Audio::new(samples, rate);
    write_wav(&dir.join(format!("{id}.wav")), &audio, WavFormat::Pcm16)?;
    std::fs::write(dir.join(format!("{id}.txt")), text)?;
    Ok(())
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: stage_oracles EXP OUT [N] [TEMPERATURE]".into());
    }
    let exp = PathBuf::from(&args[1]);
    let out = PathBuf::from(&args[2]);
    let n: usize = args.get(3).map_or(Ok(40), |s| s.parse())?;
    let temperature: f32 = args.get(4).map_or(Ok(0.0), |s| s.parse())?;
    let pipeline = Pipeline::load(&ModelPaths::experiment(&exp), &Device::flex())?;
    let utterances = read_manifest(&exp.join("data/test.jsonl"))?;
    let utterances = &utterances[..n.min(utterances.len())];
    let store = TokenStore::open(&exp.join("tokens"), "test")?;
    let items = TtsDataset::new(utterances, &pipeline.tokenizer, &store, MissingCodes::Error)?;
    let sampler = SamplerConfig {
        temperature,
        ..SamplerConfig::default()
    };
    let mut decoder = DecoderParts::default().build(&DecoderSpec::Ar, &pipeline.lm)?;
    let rate = pipeline.sample_rate();
    let n_q = pipeline.nar.n_q();
    let (mut equal, mut frames) = (vec![0usize; n_q], 0usize);
    for (i, u) in utterances.iter().enumerate() {
        let item = items.get(i)?;
        let codes: Vec<Vec<u32>> = (0..n_q).map(|q| item.codes.stream(q).to_vec()).collect();
        let durations = item.durations.as_deref();
        let phones = (pipeline.mel.as_ref())
            .filter(|m| m.phones() > 0)
            .zip(durations)
            .map(|(m, d)| m.frame_phones(&item.text, d, codes[0].len()));
        write(
            &out,
            "codec",
            &u.id,
            &u.text,
            pipeline.decode_codes(&codes, phones.as_deref())?,
            rate,
        )?;
        let audio = pipeline.vocode(&item.text, None, &codes[0], durations)?;
        write(&out, "nar", &u.id, &u.text, audio, rate)?;
        let track = match (pipeline.nar.track_layout(), durations) {
            (Some(layout), Some(d)) => {
                Some(FrameTrack::new(&item.text, d).ids(&layout, 0, codes[0].len()))
            }
            _ => None,
        };
        let empty = vec![Vec::new(); n_q];
        let nar = pipeline
            .nar
            .generate(&item.text, &empty, &codes[0], track.as_deref())?;
        for q in 0..n_q {
            equal[q] += nar[q].iter().zip(&codes[q]).filter(|(a, b)| a == b).count();
        }
        frames += codes[0].len();
        let text_ids = pipeline.text_ids(&u.text)?;
        if let Some(d) = durations {
            let total: usize = d.iter().map(|&x| x as usize).sum();
            let request = Request {
                prompt: TtsPrompt {
                    text: item.text.clone(),
                    codes: Vec::new(),
                    durations: Some(d.to_vec()),
                },
                limits: Limits {
                    min_tokens: total / 2,
                    max_tokens: total + total / 4 + 8,
                },
                seed: i as u64,
            };
            let s = pipeline.synthesize(decoder.as_mut(), &request, &item.text, None, &sampler)?;
            write(&out, "ar-truedur", &u.id, &u.text, s.samples, rate)?;
        }
        let request = pipeline.request(&text_ids, None, &Lengths::default(), i as u64)?;
        let s = pipeline.synthesize(decoder.as_mut(), &request, &text_ids, None, &sampler)?;
        write(&out, "ar", &u.id, &u.text, s.samples, rate)?;
        eprintln!("{}/{} {}", i + 1, utterances.len(), u.id);
    }
    let shares: Vec<String> = equal
        .iter()
        .map(|&e| format!("{:.3}", e as f64 / frames.max(1) as f64))
        .collect();
    println!(
        "NAR code equal to the recording's, per layer: {}",
        shares.join(" ")
    );
    Ok(())
}
