//! One cached forward of a trained multi-stream LM over k = 1, 2, 4, 8 new columns after ~100
//! cached positions: the Burn adapter (`MsFrameLm`) against the native engine (f32 and bf16
//! weights), ms per forward (median), with the largest logit difference to Burn; then greedy
//! AR and MTP decoding of a few random sentences on each, columns compared with Burn's and
//! wall time per utterance.
//!
//! `cargo run --release -p voxspec-engine --example ms_forward -- <multistream dir> [repeats] [sentences]`

use std::path::PathBuf;
use std::time::Instant;

use burn::tensor::Device;
use voxspec_engine::{NativeMultiStream, WeightFormat};
use voxspec_infer::{
    FrameArDecoder, FrameDecoder, FrameGeneration, FrameLogits, FrameModel, FrameMtpDecoder,
    FrameRequest, SamplerConfig,
};
use voxspec_multistream::{MsFrameLm, MsPrompt, load_multistream};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

fn max_diff(a: &FrameLogits, b: &FrameLogits) -> f32 {
    a.as_slice()
        .iter()
        .zip(b.as_slice())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Median ms of `repeats` forwards over `k` columns after the prefilled cache, each rolled
/// back; and the logits of the last.
fn time_forward<M: FrameModel<Prompt = MsPrompt>>(
    model: &M,
    prompt: &MsPrompt,
    lead: &[Vec<u32>],
    k: usize,
    repeats: usize,
) -> BoxResult<(f64, FrameLogits)> {
    let mut cache = model.new_cache(prompt, lead.len() + 16)?;
    model.prefill(&mut cache, prompt, lead)?;
    let held = model.steps(&cache);
    let columns: Vec<Vec<u32>> = (0..k)
        .map(|i| {
            (0..model.streams())
                .map(|j| ((i * 37 + j * 11) % (model.vocab() - 1)) as u32)
                .collect()
        })
        .collect();
    let mut times = Vec::with_capacity(repeats);
    let mut last = None;
    for _ in 0..repeats + 3 {
        let t = Instant::now();
        let logits = model.extend(&mut cache, &columns)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        model.truncate(&mut cache, held)?;
        last = Some(logits);
    }
    let mut times = times.split_off(3);
    times.sort_by(f64::total_cmp);
    let logits = last.ok_or("no repeat")?;
    Ok((times[times.len() / 2], logits))
}

fn decode<M: FrameModel<Prompt = MsPrompt>, D: FrameDecoder<M>>(
    decoder: &D,
    model: &M,
    requests: &[FrameRequest<MsPrompt>],
) -> BoxResult<(Vec<FrameGeneration>, f64)> {
    let t = Instant::now();
    let out = requests
        .iter()
        .map(|r| decoder.generate(model, r, &SamplerConfig::greedy()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((out, t.elapsed().as_secs_f64() * 1e3))
}

fn main() -> BoxResult<()> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: ms_forward <multistream dir> [repeats] [sentences]")?,
    );
    let repeats: usize = args.next().map_or(Ok(30), |s| s.parse())?;
    let sentences: usize = args.next().map_or(Ok(4), |s| s.parse())?;
    let device = Device::flex();
    let (file, model) = load_multistream(&dir, &device)?;
    let config = &file.model;
    let burn = MsFrameLm {
        model: &model,
        config,
    };
    let f32e = NativeMultiStream::from_burn(&model, config)?;
    let bf16e = NativeMultiStream::from_burn_with(&model, config, WeightFormat::Bf16)?;
    println!(
        "{}: {} streams, codebook {}, d {}, {} layers, {} heads per position; {} linear \
         params, {:.1} MB f32 / {:.1} MB bf16 per step (all heads); rayon threads {}",
        dir.display(),
        config.streams,
        config.codebook_size,
        config.transformer.d_model,
        config.transformer.n_layers,
        burn.heads(),
        f32e.num_params(),
        f32e.weight_bytes() as f64 / 1e6,
        bf16e.weight_bytes() as f64 / 1e6,
        rayon::current_num_threads()
    );

    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: u64| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state % n
    };
    let vocab = config.text_vocab as u64;
    let mut make_prompt = |len: usize| -> BoxResult<MsPrompt> {
        let text: Vec<u32> = (0..len).map(|_| 4 + next(vocab - 4) as u32).collect();
        let voice: Option<Vec<f32>> = (config.global_dim > 0).then(|| {
            (0..config.global_dim)
                .map(|_| (next(2001) as f32 - 1000.0) / 1000.0)
                .collect()
        });
        Ok(MsPrompt::new(
            &model,
            config,
            &text,
            voice.as_deref(),
            None,
        )?)
    };

    // ~100 cached positions: voice + 20 text tokens + 79 columns.
    let prompt = make_prompt(20)?;
    let s = config.special();
    let lead: Vec<Vec<u32>> = (0..79)
        .map(|i| {
            if i == 0 {
                vec![s; config.streams]
            } else {
                (0..config.streams)
                    .map(|j| ((i * 13 + j * 7) % config.codebook_size) as u32)
                    .collect()
            }
        })
        .collect();
    println!(
        "\nms per cached forward over k new columns after {} cached positions (median of {repeats})",
        usize::from(prompt.voice.is_some()) + prompt.text.len() + lead.len()
    );
    println!(
        "| engine | k = 1 | k = 2 | k = 4 | k = 8 | cost(4)/cost(1) | largest Δlogit vs Burn |"
    );
    println!("|---|---|---|---|---|---|---|");
    let mut rows: Vec<(&str, Vec<f64>, f32)> = Vec::new();
    let mut burn_logits = Vec::new();
    let ks = [1usize, 2, 4, 8];
    {
        let mut times = Vec::new();
        for &k in &ks {
            let (ms, logits) = time_forward(&burn, &prompt, &lead, k, repeats)?;
            times.push(ms);
            burn_logits.push(logits);
        }
        rows.push(("Burn", times, 0.0));
    }
    for (name, engine) in [("native f32", &f32e), ("native bf16", &bf16e)] {
        let mut times = Vec::new();
        let mut worst = 0.0f32;
        for (i, &k) in ks.iter().enumerate() {
            let (ms, logits) = time_forward(engine, &prompt, &lead, k, repeats)?;
            times.push(ms);
            worst = worst.max(max_diff(&burn_logits[i], &logits));
        }
        rows.push((name, times, worst));
    }
    for (name, t, worst) in &rows {
        println!(
            "| {name} | {:.3} | {:.3} | {:.3} | {:.3} | {:.2} | {worst:.2e} |",
            t[0],
            t[1],
            t[2],
            t[3],
            t[2] / t[0]
        );
    }

    // Sentence lengths from their own generator (the other feeds `make_prompt`).
    let mut lens = 0x2545_F491_4F6C_DD1Du64;
    let state_len = |s: &mut u64| {
        *s ^= *s << 13;
        *s ^= *s >> 7;
        *s ^= *s << 17;
        (*s % 1_000_003) as usize
    };
    // Greedy decoding of random sentences (durations from the model's predictor).
    let requests: Vec<FrameRequest<MsPrompt>> = (0..sentences)
        .map(|_| {
            let len = 12 + (state_len(&mut lens) % 19);
            Ok(FrameRequest::new(make_prompt(len)?, 400, 0))
        })
        .collect::<BoxResult<_>>()?;
    let heads = burn.heads();
    println!(
        "\ngreedy decoding, {sentences} random sentences: ms per utterance, columns equal to Burn's"
    );
    println!("| decoder | engine | ms / utterance | frames | forwards | equal to Burn |");
    println!("|---|---|---|---|---|---|");
    let ar = FrameArDecoder::new();
    let mtp = FrameMtpDecoder::new(heads)?;
    let report =
        |dec: &str, eng: &str, out: &[FrameGeneration], ms: f64, base: &[FrameGeneration]| {
            let frames: usize = out
                .iter()
                .map(|g| g.frames.first().map_or(0, Vec::len))
                .sum();
            let forwards: usize = out.iter().map(|g| g.stats.target_forwards).sum();
            let equal = out
                .iter()
                .zip(base)
                .filter(|(a, b)| a.columns == b.columns)
                .count();
            println!(
                "| {dec} | {eng} | {:.1} | {frames} | {forwards} | {equal} of {} |",
                ms / out.len() as f64,
                out.len()
            );
        };
    let (base_ar, ms) = decode(&ar, &burn, &requests)?;
    report("AR", "Burn", &base_ar, ms, &base_ar);
    let (out, ms) = decode(&ar, &f32e, &requests)?;
    report("AR", "native f32", &out, ms, &base_ar);
    let (out, ms) = decode(&ar, &bf16e, &requests)?;
    report("AR", "native bf16", &out, ms, &base_ar);
    let (base_mtp, ms) = decode(&mtp, &burn, &requests)?;
    report(&format!("MTP({heads})"), "Burn", &base_mtp, ms, &base_mtp);
    let (out, ms) = decode(&mtp, &f32e, &requests)?;
    report(&format!("MTP({heads})"), "native f32", &out, ms, &base_mtp);
    let (out, ms) = decode(&mtp, &bf16e, &requests)?;
    report(&format!("MTP({heads})"), "native bf16", &out, ms, &base_mtp);
    Ok(())
}
