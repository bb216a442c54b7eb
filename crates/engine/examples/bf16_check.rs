//! bf16 against f32 weights on a trained AR model directory: the largest logit difference over
//! prefill and one cached step of every head, and greedy AR / MTP decoding agreement.
//!
//! `cargo run --release -p voxspec-engine --example bf16_check -- <AR model dir> [sentences]`

use std::path::PathBuf;

use voxspec_engine::{NativeMtp, WeightFormat};
use voxspec_infer::{
    ArDecoder, Decoder, LanguageModel, Limits, LogitsRequest, MtpDecoder, Request, SamplerConfig,
};
use voxspec_mtp::TtsPrompt;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: bf16_check <AR model dir> [sentences]")?,
    );
    let sentences: usize = args.next().map_or(Ok(8), |s| s.parse())?;
    let f32e = NativeMtp::load(&dir)?;
    let bf16e = f32e.clone().into_weight_format(WeightFormat::Bf16);
    let text_vocab = f32e.burn().text_vocab() as u32;
    // Pseudo-random "sentences" of 12-30 text tokens (ids past the specials).
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = |n: u32| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % u64::from(n)) as u32
    };
    let prompts: Vec<TtsPrompt> = (0..sentences)
        .map(|_| {
            let len = 12 + next(19) as usize;
            TtsPrompt::new((0..len).map(|_| 4 + next(text_vocab - 4)).collect(), vec![])
        })
        .collect();
    let all = LogitsRequest {
        heads: f32e.n_heads(),
        last_only: false,
    };
    let mut worst = 0.0f32;
    for p in &prompts {
        let one = std::slice::from_ref(p);
        let mut a = f32e.new_cache(1, 64 + p.text.len())?;
        let mut b = bf16e.new_cache(1, 64 + p.text.len())?;
        let la = f32e.prefill(&mut a, one, all)?;
        let lb = bf16e.prefill(&mut b, one, all)?;
        let sa = f32e.extend(&mut a, &[vec![1, 2, 3]], all)?;
        let sb = bf16e.extend(&mut b, &[vec![1, 2, 3]], all)?;
        for (x, y) in [(&la, &lb), (&sa, &sb)] {
            let [_, positions, heads, _] = x.shape();
            for pos in 0..positions.min(if std::ptr::eq(x, &la) { 1 } else { 3 }) {
                for h in 0..heads {
                    for (u, v) in x.row(0, pos, h).iter().zip(y.row(0, pos, h)) {
                        worst = worst.max((u - v).abs());
                    }
                }
            }
        }
    }
    println!("{}: max |Δlogit| bf16 vs f32 {worst:.3e}", dir.display());
    let reqs: Vec<Request<TtsPrompt>> = prompts
        .into_iter()
        .enumerate()
        .map(|(i, prompt)| Request {
            prompt,
            limits: Limits {
                min_tokens: 1,
                max_tokens: 400,
            },
            seed: i as u64,
        })
        .collect();
    let greedy = SamplerConfig::greedy();
    for heads in [1usize, 4] {
        let run = |m: &NativeMtp| -> Result<Vec<Vec<u32>>, Box<dyn std::error::Error>> {
            let out = if heads == 1 {
                ArDecoder::new().generate(m, &reqs, &greedy)?
            } else {
                MtpDecoder::new(heads)?.generate(m, &reqs, &greedy)?
            };
            Ok(out.into_iter().map(|g| g.tokens).collect())
        };
        let (want, got) = (run(&f32e)?, run(&bf16e)?);
        let equal = want.iter().zip(&got).filter(|(w, g)| w == g).count();
        let (mut prefix, mut total) = (0usize, 0usize);
        for (w, g) in want.iter().zip(&got) {
            prefix += w.iter().zip(g).take_while(|(a, b)| a == b).count();
            total += w.len();
        }
        println!(
            "greedy {}: {equal} of {} sequences equal; {prefix} of {total} tokens before the \
             first difference",
            if heads == 1 {
                "AR".to_string()
            } else {
                format!("MTP({heads})")
            },
            want.len()
        );
    }
    Ok(())
}
