//! `voxspec synthesize` with a delayed multi-stream LM (`--model` holds one): the flags to a
//! `voxspec_tts::MultiStreamPipeline` and its frame decoder, and the report. The pipeline
//! itself (text → voice vector → LM → SoCodec decoder → vocoder) is the library's.

use anyhow::Context;
use voxspec_infer::{AcceptanceRule, SpeculativeConfig};
use voxspec_tts::{
    MultiStreamDecoder, MultiStreamDraft, MultiStreamPaths, MultiStreamPipeline,
    load_multistream_draft,
};

use crate::synth_args::{DecoderKind, SynthesizeArgs};

/// The decoder `synthesize`'s flags ask for.
pub(crate) fn decoder_from_args<'a>(
    args: &SynthesizeArgs,
    pipeline: &MultiStreamPipeline,
    draft: Option<&'a MultiStreamDraft>,
) -> anyhow::Result<MultiStreamDecoder<'a>> {
    let rule = match args.decoder {
        DecoderKind::Ar => return Ok(MultiStreamDecoder::Ar),
        DecoderKind::Mtp => return Ok(MultiStreamDecoder::Mtp(pipeline.mtp(args.heads, None)?)),
        DecoderKind::MtpViterbi => {
            return Ok(MultiStreamDecoder::Mtp(
                pipeline.mtp(args.heads, Some(args.top_k))?,
            ));
        }
        DecoderKind::Sd | DecoderKind::Pcg => AcceptanceRule::Exact,
        DecoderKind::Ssd => AcceptanceRule::Tolerance { beta: args.beta },
        other => anyhow::bail!(
            "--decoder {other:?} is not available for multi-stream LMs (ar, mtp, mtp-viterbi, sd, \
             ssd, pcg are)"
        ),
    };
    let draft = draft.context("--decoder sd/ssd/pcg needs a draft (--draft DIR)")?;
    let config = SpeculativeConfig::new(args.gamma, rule);
    config.validate()?;
    let stream_rules = match args.decoder {
        DecoderKind::Pcg => Some(pipeline.stream_groups(args.theta)?),
        _ => None,
    };
    Ok(MultiStreamDecoder::Speculative {
        draft,
        config,
        stream_rules,
    })
}

/// `voxspec synthesize` with a multi-stream LM (`--model` holds one).
pub(crate) fn synthesize(args: &SynthesizeArgs) -> anyhow::Result<()> {
    let device = voxspec_train::device::single()?;
    let model_dir = args
        .models
        .model
        .as_deref()
        .context("--model names the multi-stream LM")?;
    let reference = args.prompt.as_deref().context(
        "a multi-stream LM speaks with the voice of a reference recording: pass --prompt <WAV> \
         (or a directory of recordings of one voice)",
    )?;
    if args.draft.is_none() && matches!(args.decoder, DecoderKind::Sd | DecoderKind::Ssd) {
        anyhow::bail!("--decoder sd/ssd needs a draft (--draft DIR)");
    }
    let paths = MultiStreamPaths {
        model: model_dir.to_path_buf(),
        codec: args.models.codec.clone(),
        vocoder: args.vocoding.vocoder(),
        engine: args.models.engine.unwrap_or_default(),
    };
    let pipeline = MultiStreamPipeline::load(&paths, &device)?;
    let voice = pipeline.voice(reference)?;
    let sampler = args.sampling.config(1.0)?;
    let draft = match &args.draft {
        Some(dir) => Some(load_multistream_draft(dir, &pipeline, &device)?),
        None => None,
    };
    let decoder = decoder_from_args(args, &pipeline, draft.as_ref())?;
    let lines = crate::synth_args::sentences(args)?;
    let mut manifest = String::new();
    for (index, line) in lines.iter().enumerate() {
        let text = pipeline
            .text_ids(line)
            .with_context(|| format!("line {} ({line:?})", index + 1))?;
        let seed = args.seed + index as u64;
        let (out, stats) = pipeline.speak_with(&decoder, &text, &voice, seed, &sampler)?;
        let wav = if args.text_file.is_some() {
            args.out.join(format!("{:04}.wav", index + 1))
        } else {
            args.out.clone()
        };
        let rate = pipeline.sample_rate();
        let seconds = out.samples.len() as f64 / f64::from(rate);
        let n_frames = out.frames.first().map_or(0, Vec::len);
        voxspec_audio::write_wav(
            &wav,
            &voxspec_audio::Audio::new(out.samples, rate),
            voxspec_audio::WavFormat::Pcm16,
        )?;
        let forwards = stats.as_ref().map_or(0, |s| s.target_forwards);
        println!(
            "multistream {}: {n_frames} frames × {} streams ({seconds:.2} s) → {}; LM RTF {:.3}, \
             {forwards} target forwards, codec + vocoder {:.2} s",
            decoder.label(),
            out.frames.len(),
            wav.display(),
            out.lm_seconds / seconds.max(1e-9),
            out.rest_seconds
        );
        if args.text_file.is_some() {
            let txt = wav.with_extension("txt");
            std::fs::write(&txt, format!("{line}\n"))
                .with_context(|| format!("writing {}", txt.display()))?;
            let record = serde_json::json!({
                "index": index + 1,
                "text": line,
                "wav": wav.file_name().map(|n| n.to_string_lossy().into_owned()),
                "frames": n_frames,
                "seconds": seconds,
                "lm_seconds": out.lm_seconds,
            });
            manifest.push_str(&record.to_string());
            manifest.push('\n');
        }
    }
    if args.text_file.is_some() {
        let path = args.out.join("manifest.jsonl");
        voxspec_data::write_atomic(&path, manifest.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("{} sentences → {}", lines.len(), path.display());
    }
    Ok(())
}
