//! What an aligned AR model's prefill costs on the native engine: the duration predictor (run
//! on the Burn model, once per utterance) and the transformer's forward over the prompt, each
//! timed on its own.
//!
//! `cargo run --release -p voxspec-engine --example prefill -- <AR model dir> [text tokens]`;
//! with `BURN_BETWEEN=1` the duration predictor (Burn, on rayon's pool) runs before each MTP
//! decoding, as a synthesis runs Burn work (NAR, codec) between two sentences.

use std::path::PathBuf;
use std::time::Instant;

use voxspec_engine::{NativeMtp, WeightFormat};
use voxspec_infer::{
    Decoder, LanguageModel, Limits, LogitsRequest, MtpDecoder, Request, SamplerConfig,
};
use voxspec_mtp::TtsPrompt;

fn median(reps: usize, mut f: impl FnMut()) -> f64 {
    let mut v: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let dir = PathBuf::from(
        args.next()
            .ok_or("usage: prefill <AR model dir> [text tokens]")?,
    );
    let len: usize = args.next().map_or(Ok(30), |s| s.parse())?;
    let engine = NativeMtp::load_with(&dir, WeightFormat::Bf16)?;
    let vocab = engine.burn().text_vocab() as u32;
    let text: Vec<u32> = (0..len as u32).map(|i| 4 + (i * 7) % (vocab - 4)).collect();
    let reps = 40;
    let durations = engine.burn().predict_durations(&text, 1.0)?;
    let predict = median(reps, || {
        engine
            .burn()
            .predict_durations(&text, 1.0)
            .expect("durations");
    });
    let frames = durations.iter().sum::<u32>() as usize;
    let prompt = TtsPrompt {
        durations: Some(durations),
        ..TtsPrompt::new(text.clone(), vec![])
    };
    let mut cache = engine.new_cache(1, engine.prompt_len(&prompt) + frames + 8)?;
    let prefill = median(reps, || {
        engine
            .prefill(
                &mut cache,
                std::slice::from_ref(&prompt),
                LogitsRequest::heads_at_last(8),
            )
            .expect("prefill");
        engine.truncate(&mut cache, 0, 0).expect("truncate");
    });
    let block: Vec<u32> = (0..8).collect();
    engine.prefill(
        &mut cache,
        std::slice::from_ref(&prompt),
        LogitsRequest::heads_at_last(8),
    )?;
    let base = engine.prompt_len(&prompt);
    let step = median(reps, || {
        engine
            .extend(
                &mut cache,
                std::slice::from_ref(&block),
                LogitsRequest::heads_at_last(8),
            )
            .expect("extend");
        engine.truncate(&mut cache, 0, base).expect("truncate");
    });
    // The same steps inside MTP decoding (8 heads, temperature 1): model time per forward.
    let request = Request {
        prompt: prompt.clone(),
        limits: Limits {
            min_tokens: frames,
            max_tokens: frames,
        },
        seed: 7,
    };
    let sampler = SamplerConfig::default();
    let mut decoder = MtpDecoder::new(8)?;
    let (mut model, mut decoding, mut forwards) = (0.0, 0.0, 0);
    let burn_between = std::env::var_os("BURN_BETWEEN").is_some();
    for _ in 0..reps {
        if burn_between {
            // What a synthesis does between two sentences: Burn work on rayon's pool.
            engine.burn().predict_durations(&text, 1.0)?;
        }
        let g = decoder.generate(&engine, std::slice::from_ref(&request), &sampler)?;
        let st = &g[0].stats;
        model += st.model_time.as_secs_f64() * 1e3;
        decoding += st.decoder_time.as_secs_f64() * 1e3;
        forwards += st.target_forwards;
    }
    println!(
        "MTP decoding: model {:.3} ms per forward (prefill included), decoder {:.3}, {:.2} forwards per utterance",
        model / forwards as f64,
        decoding / forwards as f64,
        forwards as f64 / reps as f64
    );
    println!(
        "{len} text tokens ({frames} frames): duration predictor (Burn) {predict:.3} ms, \
         native prefill {prefill:.3} ms, an 8-token step with 8 heads {step:.3} ms (medians of {reps})"
    );
    Ok(())
}
