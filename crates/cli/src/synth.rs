//! `voxspec synthesize`: its flags (`crate::synth_args`) to a `voxspec_tts::Pipeline` and a
//! decoder, and the report; a multi-stream LM goes to `crate::synth_multistream`.

use std::path::Path;

use anyhow::{Context, bail};
use serde::Serialize;
use voxspec_audio::{Audio, WavFormat, write_wav};
use voxspec_data::sentences::split_sentences;
use voxspec_infer::{Decoder, SamplerConfig, StopReason};
use voxspec_tts::{
    ArEngine, DecoderParts, DecoderSpec, GroupsAt, Lengths, LongForm, ModelKind, PartSources,
    Pipeline, PreparedDecoder, SpeechItem, VoicePrompt,
};

use crate::synth_args::{SynthesizeArgs, sentences};

/// One line of the manifest `synthesize --text-file` writes.
#[derive(Debug, Serialize)]
struct SynthesizedLine {
    index: usize,
    text: String,
    wav: String,
    codes: usize,
    seconds: f64,
    stop: &'static str,
    /// Wall seconds of the synthesis (AR, NAR, codec).
    wall_seconds: f64,
    /// With --stream: wall seconds to the first chunk.
    #[serde(skip_serializing_if = "Option::is_none")]
    first_audio_seconds: Option<f64>,
}

pub fn synthesize(args: SynthesizeArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.models.model
        && ModelKind::of_model_dir(dir) == ModelKind::MultiStream
    {
        anyhow::ensure!(
            !args.join,
            "--join speaks a long text with a single-stream model; {} is a multi-stream LM",
            dir.display()
        );
        return crate::synth_multistream::synthesize(&args);
    }
    anyhow::ensure!(
        !args.join || args.text_file.is_some(),
        "--join speaks a --text-file into one WAV; give --text-file"
    );
    let device = voxspec_train::device::single()?;
    let sampler = args.sampling.config(0.0)?;
    let spec = args
        .decoder
        .spec(args.heads, args.top_k, args.gamma, args.beta)?;
    if args.draft.is_some() && !matches!(spec, DecoderSpec::Speculative { .. }) {
        bail!("--draft is used by --decoder sd, ssd or pcg only");
    }
    let paths = args.models.paths();
    let pipeline = Pipeline::load(&paths, &device)?;
    if let DecoderSpec::Speculative { rule, .. } = &spec {
        anyhow::ensure!(
            args.draft.is_some(),
            "--decoder {} needs a draft model (--draft DIR)",
            rule.name()
        );
    }
    let sources = PartSources {
        paths: &paths,
        transition_weight: args.models.transition_weight,
        draft: args.draft.as_deref(),
        groups: match args.theta {
            Some(theta) => GroupsAt::Theta(theta),
            None => GroupsAt::MeanSize(4.5),
        },
    };
    let PreparedDecoder {
        spec,
        parts,
        groups,
    } = DecoderParts::prepare(spec, &pipeline, &sources, &device)?;
    if let Some(groups) = &groups {
        crate::groups::report(groups);
    }
    let mut decoder = parts.build(&spec, &pipeline.lm)?;
    let prompt = match &args.prompt {
        Some(p) => Some(pipeline.encode_prompt(p, args.prompt_text.as_deref())?),
        None => None,
    };
    let long_text = match (&args.text, &args.text_file) {
        (None, Some(file)) if args.join => Some(
            std::fs::read_to_string(file)
                .with_context(|| format!("reading the text file {}", file.display()))?,
        ),
        (Some(text), _) if split_sentences(text).len() > 1 => Some(text.clone()),
        _ => None,
    };
    if let Some(text) = long_text {
        let request = LongRequest {
            prompt: prompt.as_ref(),
            lengths: args.lengths.lengths(),
            sampler: &sampler,
            seed: args.seed,
        };
        return speak_long(&pipeline, decoder.as_mut(), &text, &request, &args.out);
    }
    let lines = sentences(&args)?;
    let stream = args.streaming.config()?;
    let mut manifest = Vec::new();
    for (index, line) in lines.iter().enumerate() {
        let text = pipeline
            .text_ids(line)
            .with_context(|| format!("line {} ({line:?})", index + 1))?;
        let seed = args.seed + index as u64;
        let request = pipeline.request(&text, prompt.as_ref(), &args.lengths.lengths(), seed)?;
        let start = std::time::Instant::now();
        let (out, first_audio) = if args.stream {
            let item = SpeechItem {
                request: request.clone(),
                text: text.clone(),
                prompt: prompt.as_ref(),
            };
            let streamed = pipeline.synthesize_stream(
                decoder.as_mut(),
                &item,
                &sampler,
                stream,
                &mut |_| Ok(()),
            )?;
            (
                streamed.synthesis,
                Some((streamed.first_audio_seconds, streamed.chunks)),
            )
        } else {
            let out = pipeline.synthesize(
                decoder.as_mut(),
                &request,
                &text,
                prompt.as_ref(),
                &sampler,
            )?;
            (out, None)
        };
        let wall_seconds = start.elapsed().as_secs_f64();
        let g = &out.generation;
        if g.tokens.is_empty() {
            bail!(
                "the AR model ended speech before the first code ({}, {line:?}); try another \
                 --seed or a lower --temperature",
                spec.label()
            );
        }
        let wav = if args.text_file.is_some() {
            args.out.join(format!("{:04}.wav", index + 1))
        } else {
            args.out.clone()
        };
        let seconds = out.samples.len() as f64 / f64::from(pipeline.sample_rate());
        write_wav(
            &wav,
            &Audio::new(out.samples, pipeline.sample_rate()),
            WavFormat::Pcm16,
        )?;
        let stop = match g.stop {
            StopReason::Eos => "end of speech",
            StopReason::MaxTokens => "the length limit",
        };
        let forwards = g.stats.target_forwards.max(1);
        println!(
            "{}: {} codes ({seconds:.2} s of audio, stopped at {stop}) → {}",
            spec.label(),
            g.tokens.len(),
            wav.display()
        );
        println!(
            "AR: TPT {:.2} ms/token, LM RTF {:.3}, {:.3} forward passes per token ({} forwards); \
             {} {:.2} s",
            1e3 * out.ar_seconds / g.tokens.len() as f64,
            out.ar_seconds / seconds.max(1e-9),
            forwards as f64 / g.tokens.len() as f64,
            forwards,
            if pipeline.mel.is_some() && pipeline.synthesis_layers() <= 1 {
                pipeline.renderer_name()
            } else {
                format!("NAR + {}", pipeline.renderer_name())
            },
            out.rest_seconds
        );
        if let Some((first, chunks)) = first_audio {
            println!(
                "streamed: first audio after {first:.3} s of {wall_seconds:.3} s ({chunks} chunks, \
                 AR {:.3} s)",
                out.ar_seconds
            );
        }
        if args.text_file.is_some() {
            // The transcript beside the clip: `voxspec eval intelligibility --dir` reads it.
            let txt = wav.with_extension("txt");
            std::fs::write(&txt, format!("{line}\n"))
                .with_context(|| format!("writing {}", txt.display()))?;
        }
        manifest.push(SynthesizedLine {
            index: index + 1,
            text: line.clone(),
            wav: wav
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            codes: g.tokens.len(),
            seconds,
            stop,
            wall_seconds,
            first_audio_seconds: first_audio.map(|(f, _)| f),
        });
    }
    if args.text_file.is_some() {
        let mut jsonl = String::new();
        for line in &manifest {
            jsonl.push_str(&serde_json::to_string(line)?);
            jsonl.push('\n');
        }
        let path = args.out.join("manifest.jsonl");
        voxspec_data::write_atomic(&path, jsonl.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
        println!("{} sentences → {}", manifest.len(), path.display());
    }
    Ok(())
}

/// What a long text is spoken with besides the decoder.
struct LongRequest<'a> {
    prompt: Option<&'a VoicePrompt>,
    lengths: Lengths,
    sampler: &'a SamplerConfig,
    seed: u64,
}

/// Speaks a long text sentence by sentence into one WAV file and reports each piece.
fn speak_long(
    pipeline: &Pipeline,
    decoder: &mut dyn Decoder<ArEngine>,
    text: &str,
    request: &LongRequest<'_>,
    out: &Path,
) -> anyhow::Result<()> {
    let config = LongForm::default();
    let started = std::time::Instant::now();
    let mut first_audio = None;
    let mut on_piece = |_: &[f32]| {
        first_audio.get_or_insert_with(|| started.elapsed().as_secs_f64());
        Ok(())
    };
    let spoken = pipeline.synthesize_text(
        decoder,
        text,
        request.prompt,
        &request.lengths,
        request.sampler,
        request.seed,
        &config,
        &mut on_piece,
    )?;
    let wall = started.elapsed().as_secs_f64();
    let rate = f64::from(pipeline.sample_rate());
    for (i, piece) in spoken.pieces.iter().enumerate() {
        if piece.codes == 0 {
            bail!(
                "the AR model ended speech before the first code of piece {} ({:?}); try \
                 another --seed or a lower --temperature",
                i + 1,
                piece.text
            );
        }
        let stop = match piece.stop {
            StopReason::Eos => "end of speech",
            StopReason::MaxTokens => "the length limit",
        };
        println!(
            "{:>3}. {:.2} s at {:.2} s, {} codes ({stop}): {}",
            i + 1,
            piece.len as f64 / rate,
            piece.start as f64 / rate,
            piece.codes,
            piece.text
        );
    }
    let seconds = spoken.samples.len() as f64 / rate;
    write_wav(
        out,
        &Audio::new(spoken.samples, pipeline.sample_rate()),
        WavFormat::Pcm16,
    )?;
    let ar: f64 = spoken.pieces.iter().map(|p| p.ar_seconds).sum();
    let rest: f64 = spoken.pieces.iter().map(|p| p.rest_seconds).sum();
    println!(
        "{} pieces, {seconds:.2} s of audio in {wall:.2} s (AR {ar:.2} s, codes to audio {rest:.2} s; \
         first piece after {:.2} s) → {}",
        spoken.pieces.len(),
        first_audio.unwrap_or(wall),
        out.display()
    );
    Ok(())
}
