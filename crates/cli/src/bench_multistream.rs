//! `voxspec bench multistream`: the delayed multi-stream LM's frame decoders on a split's
//! sentences in one run — LM real-time factor, time per frame, frames per target forward,
//! acceptance — and the quality of the audio by the CTC teacher (CER, forced-choice sentence
//! identification) and, when it is set up, the independent recogniser (WER, forced choice);
//! optionally the single-stream AR model of the main job on the same
//! sentences in the same run, so the LM real-time factors compare.

use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::Args;
use serde::Serialize;
use voxspec_infer::{AcceptanceRule, SpeculativeConfig};
use voxspec_teacher::{CtcTeacher, ErrorCounts};
use voxspec_tts::{
    AsrScore, BenchSettings, DecoderParts, DecoderSpec, EngineKind, Judge, MultiStreamDecoder,
    MultiStreamDraft, MultiStreamPaths, MultiStreamPipeline, Pipeline, load_multistream_draft,
    row_dir_name, run_decode_bench,
};

use crate::progress::Bar;
use crate::synth_args::{LengthArgs, ModelArgs, SamplingArgs, SplitArgs};

/// Multi-stream LM decoders side by side on a split's sentences (their transcripts as text).
#[derive(Debug, Args)]
pub struct MultiStreamBenchArgs {
    /// The multi-stream LM (`voxspec train multistream`).
    #[arg(long, value_name = "DIR")]
    model: PathBuf,
    /// A draft (`voxspec train multistream --target`): adds speculative rows.
    #[arg(long, value_name = "DIR")]
    draft: Option<PathBuf>,
    /// Recording whose voice every sentence is spoken with.
    #[arg(long, value_name = "WAV")]
    reference: PathBuf,
    /// The codec [default: the one the LM was trained on].
    #[arg(long, value_name = "DIR")]
    codec: Option<PathBuf>,
    #[command(flatten)]
    vocoding: crate::synth_args::VocoderArgs,
    /// Implementation that runs the LM and the draft: the native CPU engine (f32 or bf16
    /// weights) or Burn.
    #[arg(long, value_enum, default_value_t = EngineKind::Native)]
    engine: EngineKind,
    #[command(flatten)]
    sentences: SplitArgs,
    /// Use at most this many utterances.
    #[arg(long, default_value_t = 60)]
    max_utterances: usize,
    /// CTC teacher of the CER and forced-choice columns [default: checkpoints/ctc-minitts].
    #[arg(long, value_name = "DIR")]
    teacher: Option<PathBuf>,
    /// Draft lengths γ of the speculative rows.
    #[arg(long, value_delimiter = ',', default_value = "2,3")]
    gammas: Vec<usize>,
    /// Acceptance tolerances of the speculative rows (0: exact speculative sampling, > 0: SSD).
    #[arg(long, value_delimiter = ',', default_value = "0,0.4")]
    betas: Vec<f32>,
    /// Also PCG rows (with --draft): group acceptance with each stream's own similarity
    /// groups (mean size 4.5), one row per γ.
    #[arg(long)]
    pcg: bool,
    /// Steps per forward of the MTP rows (independent and Viterbi), for a model trained with
    /// `--mtp-heads` [default: all its heads; none without].
    #[arg(long, value_delimiter = ',')]
    heads: Vec<usize>,
    /// Candidates per head of the MTP Viterbi rows.
    #[arg(long, default_value_t = 5)]
    top_k: usize,
    /// Repetition penalty of the sampler (the SoCodec paper samples with 2.0).
    #[arg(long, default_value_t = 1.0)]
    repetition_penalty: f32,
    /// Also run the single-stream AR model of this train_mtp.sh experiment (its AR decoder) on
    /// the same sentences, for the LM real-time factor and quality side by side.
    #[arg(long, value_name = "DIR")]
    baseline_exp: Option<PathBuf>,
    /// The baseline's AR model directory [default: <BASELINE_EXP>/ar].
    #[arg(long, value_name = "DIR", requires = "baseline_exp")]
    baseline_model: Option<PathBuf>,
    /// Seed of the first utterance (utterance i uses seed + i).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    #[command(flatten)]
    sampling: SamplingArgs,
    #[command(flatten)]
    asr: crate::asr_judge::AsrArgs,
    /// Output directory: bench-multistream.json and bench-multistream.md (and, for the
    /// independent recogniser, the clips under audio/<row>/).
    #[arg(long, value_name = "DIR")]
    out: PathBuf,
}

/// One decoder's totals.
#[derive(Debug, Default, Serialize)]
struct MultiStreamRow {
    system: String,
    decoder: String,
    utterances: usize,
    frames: usize,
    lm_seconds: f64,
    audio_seconds: f64,
    lm_rtf: f64,
    ms_per_frame: f64,
    /// Frames generated per target forward (prefill excluded).
    frames_per_forward: f64,
    target_forwards: usize,
    draft_forwards: usize,
    acceptance: Option<f64>,
    speedup_vs_frame_ar: f64,
    cer: Option<f64>,
    forced_choice: Option<f64>,
    /// The independent recogniser on the same clips.
    asr: Option<AsrScore>,
    #[serde(skip)]
    drafted: usize,
    #[serde(skip)]
    accepted: usize,
    #[serde(skip)]
    errors: ErrorCounts,
    #[serde(skip)]
    identified: usize,
}

pub fn run(args: MultiStreamBenchArgs) -> anyhow::Result<()> {
    let device = crate::device::single()?;
    let mut sampler = args.sampling.config(1.0)?;
    sampler.repetition_penalty = args.repetition_penalty;
    sampler.validate()?;
    let pipeline = MultiStreamPipeline::load(
        &MultiStreamPaths {
            model: args.model.clone(),
            codec: args.codec.clone(),
            vocoder: args.vocoding.vocoder(),
            engine: args.engine,
        },
        &device,
    )?;
    let voice = pipeline.voice(&args.reference)?;
    let exp = args.baseline_exp.clone().unwrap_or_default();
    let (manifest, all) = args.sentences.read(&exp)?;
    let utterances: Vec<_> = all.iter().take(args.max_utterances).cloned().collect();
    let teacher_dir = args
        .teacher
        .clone()
        .unwrap_or_else(|| PathBuf::from("checkpoints/ctc-minitts"));
    let teacher = CtcTeacher::load(&teacher_dir, &device)
        .with_context(|| format!("loading the CTC teacher {}", teacher_dir.display()))?;
    let judge = Judge::new(&teacher, all.iter().map(|u| u.text.as_str()))
        .with_context(|| format!("the candidate sentences of {}", manifest.display()))?;

    let draft: Option<MultiStreamDraft> = match &args.draft {
        Some(dir) => Some(load_multistream_draft(dir, &pipeline, &device)?),
        None => None,
    };
    let pcg_rules = if args.pcg && draft.is_some() {
        pipeline.stream_groups(None)?
    } else {
        Vec::new()
    };
    let mut decoders = vec![MultiStreamDecoder::Ar];
    if let Some(d) = &draft {
        for &gamma in &args.gammas {
            for &beta in &args.betas {
                let rule = if beta == 0.0 {
                    AcceptanceRule::Exact
                } else {
                    AcceptanceRule::Tolerance { beta }
                };
                let config = SpeculativeConfig::new(gamma, rule);
                config.validate()?;
                decoders.push(MultiStreamDecoder::Speculative {
                    draft: d,
                    config,
                    stream_rules: None,
                });
            }
            if args.pcg {
                decoders.push(MultiStreamDecoder::Speculative {
                    draft: d,
                    config: SpeculativeConfig::new(gamma, AcceptanceRule::Exact),
                    stream_rules: Some(pcg_rules.clone()),
                });
            }
        }
    }
    let heads = if args.heads.is_empty() {
        let n = pipeline.config().n_heads();
        if n > 1 { vec![n] } else { Vec::new() }
    } else {
        args.heads.clone()
    };
    for &h in &heads {
        decoders.push(MultiStreamDecoder::Mtp(pipeline.mtp(h, None)?));
        decoders.push(MultiStreamDecoder::Mtp(pipeline.mtp(h, Some(args.top_k))?));
    }
    let mut rows: Vec<MultiStreamRow> = decoders
        .iter()
        .map(|d| MultiStreamRow {
            system: "multistream".into(),
            decoder: d.label(),
            ..MultiStreamRow::default()
        })
        .collect();
    let rate = pipeline.sample_rate();
    let asr = args.asr.judge()?;
    let audio_dir = args.out.join("audio");
    let row_dirs: Vec<Option<PathBuf>> = rows
        .iter()
        .map(|r| -> anyhow::Result<Option<PathBuf>> {
            if asr.is_none() {
                return Ok(None);
            }
            let dir = audio_dir.join(row_dir_name(&r.decoder));
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            Ok(Some(dir))
        })
        .collect::<anyhow::Result<_>>()?;
    let bar = Bar::with_len(
        (utterances.len() * decoders.len()) as u64,
        "utterances × decoders",
    );
    for (i, u) in utterances.iter().enumerate() {
        let text = pipeline
            .text_ids(&u.text)
            .with_context(|| format!("utterance {}", u.id))?;
        // The duration predictor is part of the LM stage: its time counts in every row.
        let start = std::time::Instant::now();
        let (durations, max_frames) = pipeline.plan(&text, 1.0)?;
        let plan_seconds = start.elapsed().as_secs_f64();
        for ((row, decoder), dir) in rows.iter_mut().zip(&decoders).zip(&row_dirs) {
            let start = std::time::Instant::now();
            let g = pipeline.generate(
                decoder,
                &text,
                &voice,
                durations.as_deref(),
                max_frames,
                args.seed + i as u64,
                &sampler,
            )?;
            row.lm_seconds += plan_seconds + start.elapsed().as_secs_f64();
            let samples = pipeline.render(&g.frames, &voice)?;
            if let Some(dir) = dir {
                save_clip(dir, &u.id, &u.text, &samples, rate)?;
            }
            row.utterances += 1;
            row.frames += g.frames.first().map_or(0, Vec::len);
            row.audio_seconds += samples.len() as f64 / f64::from(rate);
            row.target_forwards += g.stats.target_forwards;
            row.draft_forwards += g.stats.draft_forwards;
            row.drafted += g.stats.drafted.iter().sum::<usize>();
            row.accepted += g.stats.accepted.iter().sum::<usize>();
            let (errors, identified) = judge.judge(&u.text, &samples, rate, 1)?;
            row.errors += errors;
            row.identified += usize::from(identified);
            bar_inc(&bar);
        }
    }
    voxspec_data::Progress::finish(&bar);
    let ar_ms = rows
        .first()
        .map_or(0.0, |r| r.lm_seconds / r.frames.max(1) as f64);
    for row in &mut rows {
        row.lm_rtf = row.lm_seconds / row.audio_seconds.max(1e-9);
        row.ms_per_frame = 1e3 * row.lm_seconds / row.frames.max(1) as f64;
        // Each utterance's prefill is a forward that generates no frame.
        let forwards = row.target_forwards.saturating_sub(row.utterances).max(1);
        row.frames_per_forward = row.frames as f64 / forwards as f64;
        row.acceptance = (row.drafted > 0).then(|| row.accepted as f64 / row.drafted as f64);
        row.speedup_vs_frame_ar = ar_ms / (row.ms_per_frame / 1e3).max(1e-12);
        row.cer = Some(row.errors.rate());
        row.forced_choice = Some(row.identified as f64 / row.utterances.max(1) as f64);
    }
    if let Some(exp) = &args.baseline_exp {
        // Its own folder: its decoder is called "ar" like the multi-stream AR row.
        let dir = asr.as_ref().map(|_| audio_dir.join("baseline"));
        rows.push(baseline_row(
            exp,
            &args,
            &utterances,
            &judge,
            &sampler,
            dir,
            &device,
        )?);
    }
    if let Some(asr) = &asr {
        let candidates = audio_dir.join("candidates.txt");
        crate::asr_judge::write_candidates(&candidates, all.iter().map(|u| u.text.as_str()))?;
        let total = rows.len();
        for (i, row) in rows.iter_mut().enumerate() {
            let mut name = row_dir_name(&row.decoder);
            if row.system != "multistream" {
                name = format!("baseline/{name}");
            }
            eprintln!(
                "independent recogniser: row {}/{total} ({})",
                i + 1,
                row.decoder
            );
            row.asr = Some(asr.score_dir(
                &audio_dir.join(&name),
                &candidates,
                &audio_dir.join(format!("{name}.asr.json")),
                rayon::current_num_threads(),
            )?);
        }
    }
    write_report(&args, &rows, judge.candidates(), judge.chance())
}

/// Keeps one clip and its transcript for the independent recogniser (`<id>.wav`, `<id>.txt`).
fn save_clip(dir: &Path, id: &str, text: &str, samples: &[f32], rate: u32) -> anyhow::Result<()> {
    let wav = dir.join(format!("{id}.wav"));
    let audio = voxspec_audio::Audio::new(samples.to_vec(), rate);
    voxspec_audio::write_wav(&wav, &audio, voxspec_audio::WavFormat::Pcm16)
        .with_context(|| format!("writing {}", wav.display()))?;
    let txt = dir.join(format!("{id}.txt"));
    std::fs::write(&txt, text).with_context(|| format!("writing {}", txt.display()))
}

fn bar_inc(bar: &Bar) {
    voxspec_data::Progress::inc(bar, 1);
}

/// The main job's single-stream AR model on the same sentences (AR decoder).
fn baseline_row(
    exp: &Path,
    args: &MultiStreamBenchArgs,
    utterances: &[voxspec_data::Utterance],
    judge: &Judge<'_>,
    sampler: &voxspec_infer::SamplerConfig,
    audio_dir: Option<PathBuf>,
    device: &burn::tensor::Device,
) -> anyhow::Result<MultiStreamRow> {
    let models = ModelArgs {
        exp: exp.to_path_buf(),
        model: args.baseline_model.clone(),
        nar: None,
        codec: None,
        transitions: None,
        transition_weight: 1.0,
        engine: voxspec_tts::EngineKind::Native,
    };
    let pipeline = Pipeline::load(&models.paths(), device)?;
    let lengths = LengthArgs {
        min_ratio: 2.0,
        max_ratio: 20.0,
        pace: 1.0,
    };
    let settings = BenchSettings {
        sampler: voxspec_infer::SamplerConfig {
            repetition_penalty: 1.0,
            ..*sampler
        },
        lengths: lengths.lengths(),
        seed: args.seed,
        audio_dir,
    };
    let report = run_decode_bench(
        &pipeline,
        &[DecoderSpec::Ar],
        &DecoderParts::default(),
        utterances,
        Some(judge),
        None,
        &settings,
        &Bar::new(),
    )?;
    let r = report
        .rows
        .first()
        .context("the baseline benchmark returned no row")?;
    let frame_rate =
        f64::from(pipeline.sample_rate()) / pipeline.codec_config.hop_length().max(1) as f64;
    let audio_seconds = r.tokens as f64 / frame_rate;
    Ok(MultiStreamRow {
        system: format!("single-stream AR ({})", exp.display()),
        decoder: r.label.clone(),
        utterances: r.utterances,
        frames: r.tokens,
        lm_seconds: r.lm_rtf * audio_seconds,
        audio_seconds,
        lm_rtf: r.lm_rtf,
        ms_per_frame: r.tpt_ms,
        frames_per_forward: r.tokens_per_forward,
        target_forwards: r.target_forwards,
        cer: r.cer,
        forced_choice: r.forced_choice,
        ..MultiStreamRow::default()
    })
}

fn write_report(
    args: &MultiStreamBenchArgs,
    rows: &[MultiStreamRow],
    candidates: usize,
    chance: f64,
) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let json = serde_json::json!({
        "benchmark": "multistream",
        "model": args.model,
        "draft": args.draft,
        "engine": args.engine,
        "reference": args.reference,
        "split": args.sentences.split,
        "threads": rayon::current_num_threads(),
        "sampler": {
            "temperature": args.sampling.temperature(1.0),
            "top_k": args.sampling.sample_top_k,
            "top_p": args.sampling.top_p,
            "repetition_penalty": args.repetition_penalty,
        },
        "forced_choice": { "candidates": candidates, "chance": chance },
        "rows": rows,
    });
    let path = args.out.join("bench-multistream.json");
    voxspec_data::write_atomic(&path, serde_json::to_string_pretty(&json)?.as_bytes())
        .with_context(|| format!("writing {}", path.display()))?;
    let mut md = String::from(
        "| system | decoder | LM RTF | ms/frame | speedup | frames/forward | acceptance | CER (%) | \
         ID (%) | WER, ASR (%) | ID, ASR (%) |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        md.push_str(&format!(
            "| {} | {} | {:.3} | {:.2} | {} | {:.2} | {} | {} | {} | {} | {} |\n",
            r.system,
            r.decoder,
            r.lm_rtf,
            r.ms_per_frame,
            if r.system == "multistream" {
                format!("{:.2}x", r.speedup_vs_frame_ar)
            } else {
                "—".into()
            },
            r.frames_per_forward,
            r.acceptance.map_or("—".into(), |a| format!("{a:.2}")),
            r.cer.map_or("—".into(), |c| format!("{:.1}", 100.0 * c)),
            r.forced_choice
                .map_or("—".into(), |c| format!("{:.1}", 100.0 * c)),
            r.asr
                .as_ref()
                .map_or("—".into(), |a| format!("{:.1}", 100.0 * a.wer)),
            r.asr.as_ref().map_or("—".into(), |a| format!(
                "{:.1} ± {:.1}",
                100.0 * a.forced_choice,
                100.0 * a.forced_choice_se
            )),
        ));
    }
    md.push_str(&format!(
        "\nforced choice among {candidates} sentences (chance {:.1} %)\n",
        100.0 * chance
    ));
    let md_path = args.out.join("bench-multistream.md");
    voxspec_data::write_atomic(&md_path, md.as_bytes())
        .with_context(|| format!("writing {}", md_path.display()))?;
    println!("{md}");
    eprintln!("wrote {} and {}", path.display(), md_path.display());
    Ok(())
}
