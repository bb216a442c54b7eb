//! The markdown summaries `voxspec vocoder eval` and `voxspec codec eval` (both codec
//! families) print, and the stream-by-stream comparison of SoCodec reports: the size of
//! the evaluation, one table row per version of the audio, and what the identification scores
//! compare against.

use std::fmt::Write as _;

use voxspec_codec::VoicedScore;
use voxspec_tts::AsrScore;

use crate::codec::{AsrRows, CodecEvalReport};
use crate::socodec::SoCodecEvalReport;
use crate::socodec_streams::StreamsReport;
use crate::vocoder::VocoderEvalReport;

/// `WER | ID ± SE` cells of the independent recogniser, or dashes when it did not run.
fn asr_cells(asr: Option<&AsrScore>) -> String {
    asr.map_or_else(
        || "– | –".to_string(),
        |a| {
            format!(
                "{} | {:.1} ± {:.1}",
                a.wer_text(),
                100.0 * a.forced_choice,
                100.0 * a.forced_choice_se
            )
        },
    )
}

impl VocoderEvalReport {
    /// The summary: utterances and seconds, the table of original, vocoder and Griffin-Lim
    /// audio (MCD, voiced-frame scores, CER, identification, the recogniser's WER and
    /// identification, real-time factor) and the chance level of identification.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n{} utterances, {:.1} s of audio\n",
            self.utterances, self.audio_seconds
        );
        let _ = writeln!(
            out,
            "| audio | MCD (dB) | MCD voiced (dB) | F0 RMSE (cents) | V/UV error (%) | CER, CTC (%) \
             | ID, CTC (%) | WER, ASR (%) | ID, ASR (%) | RTF |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for (name, s) in [
            ("original", &self.original),
            ("vocoder resynthesis", &self.vocoder_resynthesis),
            ("Griffin-Lim resynthesis", &self.griffin_lim_resynthesis),
        ] {
            let opt = |v: Option<f64>, digits: usize| {
                v.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
            };
            let voiced = s.voiced.as_ref().map_or_else(
                || "– | – | –".to_string(),
                |v| {
                    format!(
                        "{:.2} | {:.0} | {:.1}",
                        v.mcd_db,
                        v.f0_rmse_cents,
                        100.0 * v.vuv_error
                    )
                },
            );
            let _ = writeln!(
                out,
                "| {name} | {} | {voiced} | {:.2} | {:.1} | {} | {} |",
                opt(s.mcd_db, 2),
                100.0 * s.cer,
                100.0 * s.forced_choice,
                asr_cells(s.asr.as_ref()),
                opt(s.real_time_factor, 3)
            );
        }
        let _ = writeln!(
            out,
            "\nID: forced-choice sentence identification among all {} transcripts of the split; \
             chance = {:.1} %. RTF: seconds of computation per second of audio.",
            self.forced_choice_candidates,
            100.0 * self.forced_choice_chance
        );
        out
    }
}

impl CodecEvalReport {
    /// The summary: utterances and seconds, the table of the original, the full and the
    /// RVQ-1-only reconstruction (MCD, voiced-frame scores, CER, identification, the
    /// recogniser's WER and identification) and the chance level of identification.
    pub fn markdown(&self) -> String {
        let asr = |pick: fn(&AsrRows) -> &AsrScore| asr_cells(self.asr.as_ref().map(pick));
        let voiced_cells = |v: &VoicedScore| {
            format!(
                "{:.2} | {:.0} | {:.1} | {:.1}",
                v.mcd_db,
                v.f0_rmse_cents,
                100.0 * v.gross_f0_error,
                100.0 * v.vuv_error
            )
        };
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n{} utterances, {:.1} s of audio\n",
            self.utterances, self.audio_seconds
        );
        let _ = writeln!(
            out,
            "| audio | MCD (dB) | MCD voiced (dB) | F0 RMSE (cents) | F0 gross (%) | V/UV error (%) \
             | CER, CTC (%) | ID, CTC (%) | WER, ASR (%) | ID, ASR (%) |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        let _ = writeln!(
            out,
            "| original | – | – | – | – | – | {:.2} | {:.1} | {} |",
            100.0 * self.cer_original,
            100.0 * self.forced_choice_original,
            asr(|r| &r.original)
        );
        let _ = writeln!(
            out,
            "| {} | {:.2} | {} | {:.2} | {:.1} | {} |",
            self.rows[0],
            self.mcd_full_db,
            voiced_cells(&self.voiced_full),
            100.0 * self.cer_full,
            100.0 * self.forced_choice_full,
            asr(|r| &r.full)
        );
        let _ = writeln!(
            out,
            "| {} | {:.2} | {} | {:.2} | {:.1} | {} |",
            self.rows[1],
            self.mcd_rvq1_db,
            voiced_cells(&self.voiced_rvq1),
            100.0 * self.cer_rvq1,
            100.0 * self.forced_choice_rvq1,
            asr(|r| &r.rvq1)
        );
        let _ = writeln!(
            out,
            "\nID: forced-choice sentence identification among all {} transcripts of the split; \
             chance = {:.1} %.",
            self.forced_choice_candidates,
            100.0 * self.forced_choice_chance
        );
        out
    }
}

impl SoCodecEvalReport {
    /// The summary: utterances, seconds and the codec's streams, the table of the original, the
    /// vocoder on its mel and the first b streams (MCD, CER and identification by the CTC
    /// teacher, the recogniser's WER and identification), and the chance level.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "\n{} utterances, {:.1} s; SoCodec {} streams at {} ms ({:?})\n",
            self.utterances, self.audio_seconds, self.streams, self.frame_ms, self.quantizer
        );
        let _ = writeln!(
            out,
            "| audio | MCD (dB) | CER (%) | ID (%) | WER, ASR (%) | ID, ASR (%) |"
        );
        let _ = writeln!(out, "|---|---:|---:|---:|---:|---:|");
        for (i, row) in self.rows.iter().enumerate() {
            let mcd = if i == 0 {
                "–".to_string()
            } else {
                format!("{:.2}", row.mcd_db)
            };
            let _ = writeln!(
                out,
                "| {} | {mcd} | {:.1} | {:.1} | {} |",
                row.name,
                100.0 * row.cer,
                100.0 * row.forced_choice,
                asr_cells(row.asr.as_ref())
            );
        }
        let _ = writeln!(
            out,
            "\nID: forced choice among all {} transcripts of the split; chance = {:.1} %.",
            self.forced_choice_candidates,
            100.0 * self.forced_choice_chance
        );
        out
    }
}

/// One table of labelled SoCodec reports, a row per report and decoded audio: MCD, CER and
/// identification, and the test utterances of each report.
pub fn streams_markdown(reports: &[(String, StreamsReport)]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "| model | audio | MCD (dB) | CER (%) | ID (%) |");
    let _ = writeln!(out, "|---|---|---:|---:|---:|");
    for (label, r) in reports {
        for row in &r.rows {
            let _ = writeln!(
                out,
                "| {label} | {} | {:.2} | {:.1} | {:.1} |",
                row.name,
                row.mcd_db,
                100.0 * row.cer,
                100.0 * row.forced_choice
            );
        }
    }
    let n: Vec<usize> = reports.iter().map(|(_, r)| r.utterances).collect();
    let _ = writeln!(out, "\n(test utterances per report: {n:?})");
    out
}
