//! The report of `voxspec bench decode` (`voxspec_tts::run_decode_bench`'s rows): a markdown
//! table like the MTP paper's Tables I–II and PNG plots like its Figs. 3–5 (TPT, CER and NLL
//! over the number of heads, with and without Viterbi; speedup over γ of speculative rows).

use std::path::{Path, PathBuf};

use serde::Serialize;
use voxspec_infer::SamplerConfig;
use voxspec_teacher::ctc::LengthNorm;
use voxspec_tts::{
    DecodeReport, DecodeRow, DecoderSpec, EngineKind, Judge, RuleSpec, row_dir_name,
};

use crate::error::{EvalError, Result};
use crate::judge::{AsrJudge, write_candidates};
use crate::plots::{DEFAULT_SIZE, LinePlot, Series, write_line_plot};
use crate::split::write_report_sorted;

/// Figures like the MTP paper's Figs. 3–5 — TPT, CER and NLL over the number of heads, one line
/// without Viterbi and one per Viterbi top_k (AR is the k = 1 point of each) — and, with
/// speculative rows, speedup over γ per acceptance rule. Returns how many were written.
///
/// # Errors
/// [`EvalError::Plot`] naming a figure that cannot be drawn or written.
pub fn write_decode_plots(dir: &Path, rows: &[DecodeRow], cer: bool) -> Result<usize> {
    let ar = &rows[0];
    let mut top_ks: Vec<usize> = rows
        .iter()
        .filter_map(|r| match r.spec {
            DecoderSpec::MtpViterbi { top_k, .. } => Some(top_k),
            _ => None,
        })
        .collect();
    top_ks.sort_unstable();
    top_ks.dedup();
    let over_heads = |metric: &dyn Fn(&DecodeRow) -> Option<f64>| -> Vec<Series> {
        let start = metric(ar).map(|y| (1.0, y));
        let mut plain: Vec<(f64, f64)> = start.into_iter().collect();
        for r in rows {
            if let (DecoderSpec::Mtp { heads }, Some(y)) = (&r.spec, metric(r)) {
                plain.push((*heads as f64, y));
            }
        }
        let mut series = vec![Series {
            label: "w/o Viterbi".into(),
            points: plain,
        }];
        for &k in &top_ks {
            let mut points: Vec<(f64, f64)> = start.into_iter().collect();
            for r in rows {
                if let (DecoderSpec::MtpViterbi { heads, top_k }, Some(y)) = (&r.spec, metric(r))
                    && *top_k == k
                {
                    points.push((*heads as f64, y));
                }
            }
            series.push(Series {
                label: format!("w/ Viterbi, top_k={k}"),
                points,
            });
        }
        series
    };
    let mut written = 0;
    let mut figure = |name: &str, title: &str, y_label: &str, series: Vec<Series>| {
        let series: Vec<Series> = series.into_iter().filter(|s| s.points.len() > 1).collect();
        if series.is_empty() {
            return Ok::<(), EvalError>(());
        }
        write_line_plot(
            &dir.join(name),
            &LinePlot {
                title,
                x_label: "MTP heads k",
                y_label,
                series: &series,
                log_y: false,
                size: DEFAULT_SIZE,
            },
        )?;
        written += 1;
        Ok(())
    };
    figure(
        "tpt.png",
        "Time per token over the number of heads",
        "TPT (ms/token)",
        over_heads(&|r| Some(r.tpt_ms)),
    )?;
    if cer {
        figure(
            "cer.png",
            "CER of the synthesised speech (CTC teacher)",
            "CER (%)",
            over_heads(&|r| r.cer.map(|c| 100.0 * c)),
        )?;
    }
    figure(
        "nll.png",
        "Target NLL of the generated codes",
        "NLL (nats/token)",
        over_heads(&|r| r.nll),
    )?;

    // Speculative rows: speedup over γ, one line per drafter and rule.
    let mut lines: Vec<Series> = Vec::new();
    for r in rows {
        let (prefix, rule, gamma) = match &r.spec {
            DecoderSpec::Speculative { rule, gamma } => ("draft", rule, *gamma),
            DecoderSpec::SelfSpec { rule, gamma } => ("self", rule, *gamma),
            _ => continue,
        };
        let label = match rule {
            RuleSpec::Sd => format!("{prefix} sd"),
            RuleSpec::Ssd { beta } => format!("{prefix} ssd β={beta}"),
            RuleSpec::Pcg { theta } => format!("{prefix} pcg θ={theta:.3}"),
        };
        match lines.iter_mut().find(|s| s.label == label) {
            Some(s) => s.points.push((gamma as f64, r.speedup)),
            None => lines.push(Series {
                label,
                points: vec![(gamma as f64, r.speedup)],
            }),
        }
    }
    if !lines.is_empty() {
        let lines: Vec<Series> = lines.into_iter().filter(|s| !s.points.is_empty()).collect();
        write_line_plot(
            &dir.join("speculative.png"),
            &LinePlot {
                title: "Speculative decoding: speedup over AR (same run)",
                x_label: "draft length γ",
                y_label: "speedup (x)",
                series: &lines,
                log_y: false,
                size: DEFAULT_SIZE,
            },
        )?;
        written += 1;
    }
    Ok(written)
}

/// AR's speed-up over the baseline engine's AR: the inverse of the baseline row's `speedup`.
pub fn ar_over_baseline(baseline: &DecodeRow) -> f64 {
    if baseline.speedup > 0.0 {
        1.0 / baseline.speedup
    } else {
        0.0
    }
}

fn fmt_opt(v: Option<f64>, scale: f64, digits: usize) -> String {
    v.map_or("–".into(), |v| format!("{:.*}", digits, v * scale))
}

/// The markdown report of `voxspec bench decode`: the decoder table (AR first and the baseline
/// engine's AR right after it, with `baseline`'s engine, the one the rows ran on), the
/// forced-choice chance line (`chance` = number of candidates and 1 / that, when a teacher
/// scored) and the forward-cost line (`costs`: median ms over k = 1, 2, … new tokens).
pub fn decode_markdown(
    rows: &[DecodeRow],
    baseline: Option<(&DecodeRow, &str)>,
    costs: &[f64],
    utterances: usize,
    chance: Option<(usize, f64)>,
) -> String {
    let cer = chance.is_some();
    let asr = rows.iter().any(|r| r.asr.is_some());
    let mut s = String::from(
        "| decoder | TPT (ms) | speedup | tokens/forward | acceptance | CER (%) | ID (%) | NLL \
         | EOS stops |",
    );
    s.push_str(if asr {
        " WER, ASR (%) | ID, ASR (%) |\n|---|---|---|---|---|---|---|---|---|---|---|\n"
    } else {
        "\n|---|---|---|---|---|---|---|---|---|\n"
    });
    let ordered = rows
        .iter()
        .take(1)
        .chain(baseline.map(|(b, _)| b))
        .chain(rows.iter().skip(1));
    for r in ordered {
        s.push_str(&format!(
            "| {} | {:.2} | {:.2}x | {:.2} | {} | {} | {} | {} | {}/{} |",
            r.label,
            r.tpt_ms,
            r.speedup,
            r.tokens_per_forward,
            fmt_opt(r.acceptance_rate, 1.0, 3),
            if cer {
                fmt_opt(r.cer, 100.0, 1)
            } else {
                "–".into()
            },
            fmt_opt(r.forced_choice, 100.0, 1),
            fmt_opt(r.nll, 1.0, 3),
            r.eos_stops,
            r.utterances
        ));
        if asr {
            match &r.asr {
                Some(a) => s.push_str(&format!(
                    " {} | {:.1} ± {:.1} |",
                    a.wer_text(),
                    100.0 * a.forced_choice,
                    100.0 * a.forced_choice_se
                )),
                None => s.push_str(" – | – |"),
            }
        }
        s.push('\n');
    }
    let rel: Vec<String> = costs
        .iter()
        .enumerate()
        .map(|(i, c)| format!("k={}: {:.2}", i + 1, c / costs[0]))
        .collect();
    if let (Some((b, engine)), Some(ar)) = (baseline, rows.first()) {
        s.push_str(&format!(
            "\nAR on {engine}: {:.3} ms per token, {:.2}x the speed of `{}` ({:.3} ms), every \
             sentence decoded by both in this run.\n",
            ar.tpt_ms,
            ar_over_baseline(b),
            b.label,
            b.tpt_ms
        ));
    }
    if let Some((n, p)) = chance {
        s.push_str(&format!(
            "\nID: forced-choice sentence identification by the CTC teacher among all {n} \
             transcripts of the split; chance = 1/{n} = {:.1} %.\n",
            100.0 * p
        ));
    }
    if asr {
        s.push_str(
            "\nWER, ASR / ID, ASR: the independent recogniser (tools/asr_judge.py: pocketsphinx's \
             en-us model, never trained on this corpus), open-vocabulary word error rate and \
             forced choice among the same transcripts (± one binomial standard error).\n",
        );
    }
    s.push_str(&format!(
        "\n{utterances} utterances. Forward cost over k new tokens relative to k = 1 on this \
         model and backend: {}.\n",
        rel.join(", ")
    ));
    s
}

/// Scores every row of `report` (the baseline row last) with the independent recogniser: the
/// clips `run_decode_bench` kept in `audio_dir/<row>` against `candidates` (every transcript
/// of the split, written to `audio_dir/candidates.txt`), each row's report beside its folder
/// as `<row>.asr.json`. `on_row` is told each row's index (from 0), the row count and label
/// before it is scored.
///
/// # Errors
/// [`EvalError::Judge`] when the recogniser cannot run or its report is unreadable; as
/// [`write_candidates`].
pub fn score_decode_rows<'a>(
    asr: &AsrJudge,
    report: &mut DecodeReport,
    audio_dir: &Path,
    candidates: impl IntoIterator<Item = &'a str>,
    jobs: usize,
    on_row: &mut dyn FnMut(usize, usize, &str),
) -> Result<()> {
    let candidates_path = audio_dir.join("candidates.txt");
    write_candidates(&candidates_path, candidates)?;
    let total = report.rows.len() + usize::from(report.baseline.is_some());
    let rows = report.rows.iter_mut().chain(report.baseline.as_mut());
    for (i, row) in rows.enumerate() {
        let name = row_dir_name(&row.label);
        on_row(i, total, &row.label);
        let score = asr.score_dir(
            &audio_dir.join(&name),
            &candidates_path,
            &audio_dir.join(format!("{name}.asr.json")),
            jobs,
        )?;
        row.asr = Some(score);
    }
    Ok(())
}

/// The sampler of a benchmark, as its reports give it.
#[derive(Debug, Clone, Serialize)]
pub struct SamplerSummary {
    /// Sampling temperature.
    pub temperature: f32,
    /// Candidates sampled among (0: all).
    pub top_k: usize,
    /// Nucleus mass.
    pub top_p: f32,
}

impl From<&SamplerConfig> for SamplerSummary {
    fn from(s: &SamplerConfig) -> Self {
        Self {
            temperature: s.temperature,
            top_k: s.top_k,
            top_p: s.top_p,
        }
    }
}

/// The models of a decode benchmark.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeModels {
    /// AR model directory.
    pub ar: PathBuf,
    /// NAR model directory.
    pub nar: PathBuf,
    /// Codec directory.
    pub codec: PathBuf,
    /// Mel decoder that rendered the codes in place of the codec's decoder, when there was one.
    pub mel_decoder: Option<PathBuf>,
    /// Its vocoder (`None` with a mel decoder: Griffin-Lim).
    pub vocoder: Option<PathBuf>,
    /// Draft model directory, when the speculative rows had one.
    pub draft: Option<PathBuf>,
}

/// A forward over `k` new tokens.
#[derive(Debug, Clone, Serialize)]
pub struct ForwardCost {
    /// New tokens.
    pub k: usize,
    /// Median time, ms.
    pub median_ms: f64,
    /// Relative to `k = 1`.
    pub relative_to_k1: f64,
}

impl ForwardCost {
    /// The costs of [`DecodeReport::forward_costs`] (median ms over k = 1, 2, …).
    pub fn of(costs: &[f64]) -> Vec<Self> {
        costs
            .iter()
            .enumerate()
            .map(|(i, &c)| Self {
                k: i + 1,
                median_ms: c,
                relative_to_k1: c / costs[0],
            })
            .collect()
    }
}

/// The forced-choice candidates of the CTC teacher's columns.
#[derive(Debug, Clone, Serialize)]
pub struct ForcedChoiceSet {
    /// Candidate sentences.
    pub candidates: usize,
    /// 1 / candidates.
    pub chance: f64,
    /// How candidate scores are normalised for length.
    pub length_norm: LengthNorm,
}

impl From<&Judge<'_>> for ForcedChoiceSet {
    fn from(j: &Judge<'_>) -> Self {
        Self {
            candidates: j.candidates(),
            chance: j.chance(),
            length_norm: j.length_norm(),
        }
    }
}

/// The independent recogniser, when it scored the rows.
#[derive(Debug, Clone, Serialize)]
pub struct AsrJudgeInfo {
    /// The tool, in words.
    pub tool: &'static str,
    /// Where it was found ([`AsrJudge::describe`]).
    pub found: String,
    /// Candidate sentences it chose among.
    pub candidates: usize,
}

impl AsrJudgeInfo {
    /// `judge` choosing among `candidates` sentences.
    pub fn new(judge: &AsrJudge, candidates: usize) -> Self {
        Self {
            tool: "tools/asr_judge.py (pocketsphinx en-us, a fresh decoder per clip)",
            found: judge.describe(),
            candidates,
        }
    }
}

/// AR on the baseline engine.
#[derive(Debug, Clone, Serialize)]
pub struct DecodeBaseline {
    /// The baseline engine's name.
    pub engine: Option<&'static str>,
    /// Its row.
    pub row: DecodeRow,
    /// [`ar_over_baseline`] of the row.
    pub ar_speedup_over_baseline: f64,
}

impl DecodeBaseline {
    /// The baseline `row`, run on `engine`.
    pub fn new(row: DecodeRow, engine: Option<EngineKind>) -> Self {
        Self {
            engine: engine.map(EngineKind::name),
            ar_speedup_over_baseline: ar_over_baseline(&row),
            row,
        }
    }
}

/// The JSON report of `voxspec bench decode` ([`write_decode_bench`] writes it with its keys
/// in alphabetical order).
#[derive(Debug, Clone, Serialize)]
pub struct DecodeBenchReport {
    /// `"decode"`.
    pub benchmark: &'static str,
    /// The split whose sentences were spoken.
    pub split: String,
    /// Utterances decoded.
    pub utterances: usize,
    /// Worker threads.
    pub threads: usize,
    /// The CPU (`model name` of /proc/cpuinfo).
    pub cpu: String,
    /// The native engine's matrix kernel on this CPU (`VOXSPEC_KERNEL` caps it).
    pub kernel: &'static str,
    /// The engine the rows ran on.
    pub engine: EngineKind,
    /// The sampler of every row.
    pub sampler: SamplerSummary,
    /// The models.
    pub models: DecodeModels,
    /// Forward cost over k = 1.. new tokens.
    pub forward_cost: Vec<ForwardCost>,
    /// The CTC teacher's candidates, when it scored.
    pub forced_choice: Option<ForcedChoiceSet>,
    /// The independent recogniser, when it scored.
    pub asr_judge: Option<AsrJudgeInfo>,
    /// One row per decoder, AR first.
    pub rows: Vec<DecodeRow>,
    /// AR on the baseline engine, when one ran.
    pub baseline: Option<DecodeBaseline>,
}

impl DecodeBenchReport {
    /// The markdown table of the report ([`decode_markdown`]).
    pub fn markdown(&self) -> String {
        let costs: Vec<f64> = self.forward_cost.iter().map(|c| c.median_ms).collect();
        let chance = self
            .forced_choice
            .as_ref()
            .map(|f| (f.candidates, f.chance));
        let baseline = self.baseline.as_ref().map(|b| (&b.row, self.engine.name()));
        let mut md = decode_markdown(&self.rows, baseline, &costs, self.utterances, chance);
        md.push_str(&format!(
            "\nHost: {}, {} threads; engine {}, kernel {}.\n",
            self.cpu,
            self.threads,
            self.engine.name(),
            self.kernel
        ));
        md
    }
}

/// The files [`write_decode_bench`] wrote.
#[derive(Debug, Clone)]
pub struct DecodeBenchFiles {
    /// `bench-decode.json`.
    pub json: PathBuf,
    /// `bench-decode.md`.
    pub markdown: PathBuf,
    /// The markdown table.
    pub table: String,
    /// PNG plots written.
    pub plots: usize,
}

/// Writes `report` into `dir`: `bench-decode.json`, the markdown table `bench-decode.md` and
/// the plots of [`write_decode_plots`] (the CER plot when the teacher scored).
///
/// # Errors
/// [`EvalError::Json`], [`EvalError::Data`] or [`EvalError::Plot`] naming the file.
pub fn write_decode_bench(dir: &Path, report: &DecodeBenchReport) -> Result<DecodeBenchFiles> {
    let json = dir.join("bench-decode.json");
    write_report_sorted(&json, report)?;
    let table = report.markdown();
    let markdown = dir.join("bench-decode.md");
    voxspec_data::write_atomic(&markdown, table.as_bytes())?;
    let plots = write_decode_plots(dir, &report.rows, report.forced_choice.is_some())?;
    Ok(DecodeBenchFiles {
        json,
        markdown,
        table,
        plots,
    })
}
