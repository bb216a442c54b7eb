//! `voxspec bench pipeline`: the whole request, text to audio, stage by stage
//! (`voxspec_tts::run_pipeline_bench`), for short sentences and paragraphs in one run.

use std::path::PathBuf;

use clap::Args;
use voxspec_data::Progress;
use voxspec_tts::{
    DecoderParts, GroupsAt, LongForm, PartSources, Pipeline, PipelineReport, PreparedDecoder,
    run_pipeline_bench,
};

use crate::progress::Bar;
use crate::synth_args::{DecoderKind, ModelArgs, SamplingArgs, SplitArgs, StreamArgs};

/// Times what a user waits for: each text through the text front end (sentence split, G2P,
/// durations), the AR stage, the NAR and the codec decoder, once whole (each stage's share of
/// the wall time, real-time factor) and once streamed (time to the first audio, p50/p95).
/// Two cases in one run: the first --sentences transcripts of the split one by one, and
/// paragraphs of --paragraph-sentences transcripts each (or those of --paragraphs-file).
#[derive(Debug, Args)]
pub struct PipelineBenchArgs {
    #[command(flatten)]
    pub models: ModelArgs,
    #[command(flatten)]
    pub split: SplitArgs,
    /// Short sentences: the first this many transcripts of the split.
    #[arg(long, default_value_t = 20)]
    pub sentences: usize,
    /// Paragraphs made of the split's transcripts (after the short sentences').
    #[arg(long, default_value_t = 4)]
    pub paragraphs: usize,
    /// Transcripts per paragraph.
    #[arg(long, default_value_t = 6)]
    pub paragraph_sentences: usize,
    /// Paragraphs from a text file instead (separated by blank lines).
    #[arg(long, value_name = "FILE")]
    pub paragraphs_file: Option<PathBuf>,
    /// Decoding strategy of the AR stage (ar, mtp or mtp-viterbi).
    #[arg(long, value_enum, default_value_t = DecoderKind::Mtp)]
    pub decoder: DecoderKind,
    /// Heads of the MTP decoders.
    #[arg(long, default_value_t = 4)]
    pub heads: usize,
    /// Candidates per head of MTP + Viterbi.
    #[arg(long, default_value_t = 3)]
    pub top_k: usize,
    #[command(flatten)]
    pub sampling: SamplingArgs,
    #[command(flatten)]
    pub streaming: StreamArgs,
    /// Seed of text i is seed + i.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Where to write the JSON report.
    #[arg(long, value_name = "FILE", default_value = "bench-pipeline.json")]
    pub out: PathBuf,
}

fn paragraphs(args: &PipelineBenchArgs, transcripts: &[String]) -> anyhow::Result<Vec<String>> {
    if let Some(file) = &args.paragraphs_file {
        let text = std::fs::read_to_string(file)
            .map_err(|e| anyhow::anyhow!("reading --paragraphs-file {}: {e}", file.display()))?;
        let out: Vec<String> = text
            .split("\n\n")
            .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|p| !p.is_empty())
            .collect();
        anyhow::ensure!(!out.is_empty(), "{} has no paragraphs", file.display());
        return Ok(out);
    }
    anyhow::ensure!(
        args.paragraph_sentences >= 1,
        "--paragraph-sentences must be at least 1"
    );
    Ok((0..args.paragraphs)
        .map(|p| {
            (0..args.paragraph_sentences)
                .map(|k| {
                    let i = args.sentences + p * args.paragraph_sentences + k;
                    transcripts[i % transcripts.len()].clone()
                })
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect())
}

pub fn run(args: PipelineBenchArgs) -> anyhow::Result<()> {
    anyhow::ensure!(args.sentences >= 1, "--sentences must be at least 1");
    let spec = match args.decoder {
        kind @ (DecoderKind::Ar | DecoderKind::Mtp | DecoderKind::MtpViterbi) => {
            kind.spec(args.heads, args.top_k, 1, 0.0)?
        }
        other => anyhow::bail!(
            "--decoder {other:?}: the pipeline benchmark runs ar, mtp or mtp-viterbi \
             (`bench decode` compares the speculative decoders)"
        ),
    };
    let (_, utterances) = args.split.read(&args.models.exp)?;
    let transcripts: Vec<String> = utterances.into_iter().map(|u| u.text).collect();
    let sentences: Vec<String> = transcripts.iter().take(args.sentences).cloned().collect();
    let paragraphs = paragraphs(&args, &transcripts)?;
    let device = voxspec_train::device::single()?;
    let sampler = args.sampling.config(0.0)?;
    let stream = args.streaming.config()?;
    let paths = args.models.paths();
    let pipeline = Pipeline::load(&paths, &device)?;
    let sources = PartSources {
        paths: &paths,
        transition_weight: args.models.transition_weight,
        draft: None,
        groups: GroupsAt::MeanSize(4.5),
    };
    let PreparedDecoder { spec, parts, .. } =
        DecoderParts::prepare(spec, &pipeline, &sources, &device)?;
    let mut decoder = parts.build(&spec, &pipeline.lm)?;
    let mut cases = vec![("sentences".to_string(), sentences)];
    if !paragraphs.is_empty() {
        cases.push(("paragraphs".to_string(), paragraphs));
    }
    let total: usize = cases.iter().map(|(_, t)| t.len()).sum();
    let bar = Bar::with_len(total as u64, "texts");
    let report = run_pipeline_bench(
        &pipeline,
        decoder.as_mut(),
        &cases,
        &sampler,
        &LongForm::default(),
        stream,
        args.seed,
        rayon::current_num_threads(),
        &mut |_, _| bar.inc(1),
    )?;
    bar.finish();
    print_report(&report);
    voxspec_data::write_atomic(&args.out, &serde_json::to_vec_pretty(&report)?)?;
    println!("report: {}", args.out.display());
    Ok(())
}

fn print_report(r: &PipelineReport) {
    println!(
        "{} ({} threads), decoder {} on {}, rendered by {}, whole passes; first audio streamed",
        r.cpu, r.threads, r.decoder, r.engine, r.renderer
    );
    println!(
        "| case | texts | pieces | chars/text | audio (s) | RTF | front end | AR | NAR | render | \
         first audio p50 (ms) | p95 (ms) |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for c in &r.cases {
        let [f, a, n, k] = c.shares.map(|s| format!("{:.0} %", 100.0 * s));
        println!(
            "| {} | {} | {} | {:.0} | {:.1} | {:.4} | {f} | {a} | {n} | {k} | {:.0} | {:.0} |",
            c.label,
            c.texts,
            c.pieces,
            c.mean_chars,
            c.audio_seconds,
            c.rtf,
            1e3 * c.first_audio_p50,
            1e3 * c.first_audio_p95
        );
    }
}
