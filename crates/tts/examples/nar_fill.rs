//! Codes as the synthesis pipeline hands them to the codec decoder: for every utterance of a
//! split, the recording's RVQ-1 codes with layers 2..N filled in by the experiment's NAR model
//! (greedy, told the recording's phone durations when it is aligned). The result is a token
//! store beside the recordings' own, for `voxspec codec train --decoder-only --decoder-codes`,
//! which fits the codec decoder to the codes it is given at synthesis time.
//!
//! ```text
//! cargo run --release -p voxspec-tts --example nar_fill -- EXP OUT [SPLIT ...]
//! ```
//! `EXP` is a main-job experiment (`<exp>/data/<split>.jsonl`, `<exp>/tokens`, the models);
//! the splits default to `train dev`.

use std::path::PathBuf;

use burn::data::dataset::Dataset;
use burn::tensor::Device;
use voxspec_data::{Codes, MissingCodes, TokenStore, TokenStoreWriter, TtsDataset, read_manifest};
use voxspec_mtp::FrameTrack;
use voxspec_tts::{ModelPaths, Pipeline};

type Result<T> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 3 {
        return Err("usage: nar_fill EXP OUT [SPLIT ...]".into());
    }
    let exp = PathBuf::from(&args[1]);
    let out = PathBuf::from(&args[2]);
    let splits: Vec<String> = if args.len() > 3 {
        args[3..].to_vec()
    } else {
        vec!["train".into(), "dev".into()]
    };
    let pipeline = Pipeline::load(&ModelPaths::experiment(&exp), &Device::flex())?;
    let n_q = pipeline.nar.n_q();
    for split in &splits {
        let utterances = read_manifest(&exp.join(format!("data/{split}.jsonl")))?;
        let store = TokenStore::open(&exp.join("tokens"), split)?;
        let meta = store.meta();
        let items = TtsDataset::new(&utterances, &pipeline.tokenizer, &store, MissingCodes::Skip)?;
        let mut writer = TokenStoreWriter::new(&out, split, meta, 200_000)?;
        let (mut equal, mut frames) = (vec![0usize; n_q], 0usize);
        for i in 0..items.len() {
            let item = items.get(i)?;
            let codes: Vec<Vec<u32>> = (0..n_q).map(|q| item.codes.stream(q).to_vec()).collect();
            let track = match (pipeline.nar.track_layout(), item.durations.as_deref()) {
                (Some(layout), Some(d)) => {
                    Some(FrameTrack::new(&item.text, d).ids(&layout, 0, codes[0].len()))
                }
                _ => None,
            };
            let empty = vec![Vec::new(); n_q];
            let filled = pipeline
                .nar
                .generate(&item.text, &empty, &codes[0], track.as_deref())?;
            for q in 0..n_q {
                equal[q] += filled[q]
                    .iter()
                    .zip(&codes[q])
                    .filter(|(a, b)| a == b)
                    .count();
            }
            let n = codes[0].len();
            frames += n;
            writer.push(&item.id, Codes::new(n_q, n, filled.concat())?)?;
            if (i + 1) % 100 == 0 {
                eprintln!("{split}: {}/{}", i + 1, items.len());
            }
        }
        writer.finish()?;
        let shares: Vec<String> = equal
            .iter()
            .map(|&e| format!("{:.3}", e as f64 / frames.max(1) as f64))
            .collect();
        println!(
            "{split}: {} utterances; NAR code equal to the recording's, per layer: {}",
            items.len(),
            shares.join(" ")
        );
    }
    Ok(())
}
