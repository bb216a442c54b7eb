//! The whole request, stage by stage (`voxspec bench pipeline`): texts go through what
//! `synthesize` does — the text front end (sentence split, G2P, the duration predictor), the AR
//! stage, the NAR and the codec decoder — each stage timed on its own, and again streamed, as
//! the server streams, for the time to the first audio. Short sentences and paragraphs are two
//! cases of one run, so their figures compare.
//!
//! ```text
//! per text:  whole pass    plan (front end) → per piece: AR → NAR → codec   (stage seconds)
//!            streamed pass plan the first sentence → AR → first chunk        (first audio)
//! per case:  real-time factor = Σ wall / Σ audio; each stage's share of Σ wall;
//!            first audio p50 / p95 over the case's texts
//! ```

use std::time::Instant;

use serde::{Deserialize, Serialize};
use voxspec_data::sentences::split_sentences;
use voxspec_infer::{Decoder, SamplerConfig};

use crate::engine::ArEngine;
use crate::error::{Result, TtsError};
use crate::longform::LongForm;
use crate::pipeline::{Lengths, Pipeline};
use crate::stream::StreamConfig;

/// Seconds spent in each stage.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct StageSeconds {
    /// Sentence split, G2P and the duration predictor (planning every piece).
    pub front_end: f64,
    /// The AR stage (the decoder).
    pub ar: f64,
    /// The NAR stage (RVQ layers 2..N).
    pub nar: f64,
    /// The codec decoder (codes to waveform).
    pub codec: f64,
}

impl StageSeconds {
    /// The four stages together.
    pub fn total(&self) -> f64 {
        self.front_end + self.ar + self.nar + self.codec
    }

    fn add(&mut self, other: &StageSeconds) {
        self.front_end += other.front_end;
        self.ar += other.ar;
        self.nar += other.nar;
        self.codec += other.codec;
    }

    /// Each stage's share of [`StageSeconds::total`], in the field order.
    pub fn shares(&self) -> [f64; 4] {
        let t = self.total().max(f64::MIN_POSITIVE);
        [
            self.front_end / t,
            self.ar / t,
            self.nar / t,
            self.codec / t,
        ]
    }
}

/// One case of the benchmark (e.g. short sentences, or paragraphs).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PipelineCase {
    /// The case's name.
    pub label: String,
    /// Texts synthesised.
    pub texts: usize,
    /// Pieces spoken (sentences, or clauses of sentences too long for the context).
    pub pieces: usize,
    /// Mean characters per text.
    pub mean_chars: f64,
    /// Seconds of audio made (pauses between sentences included).
    pub audio_seconds: f64,
    /// Seconds of wall time of the whole (unstreamed) passes.
    pub wall_seconds: f64,
    /// Wall time over audio time.
    pub rtf: f64,
    /// Wall time per stage.
    pub stages: StageSeconds,
    /// [`StageSeconds::shares`] of `stages`: front end, AR, NAR, codec.
    pub shares: [f64; 4],
    /// Streamed: seconds from the request to its first audio, median over the texts.
    pub first_audio_p50: f64,
    /// Streamed: the 95th percentile of the same.
    pub first_audio_p95: f64,
}

/// What [`run_pipeline_bench`] measured.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PipelineReport {
    /// The CPU (`model name` of /proc/cpuinfo where there is one).
    pub cpu: String,
    /// Worker threads.
    pub threads: usize,
    /// The AR stage's decoder.
    pub decoder: String,
    /// The engine of the AR model (`--engine`).
    #[serde(default)]
    pub engine: String,
    /// What renders the codes ([`Pipeline::renderer_name`]).
    #[serde(default)]
    pub renderer: String,
    /// The cases, in the order given.
    pub cases: Vec<PipelineCase>,
}

/// The CPU's model name (`model name` of /proc/cpuinfo), or `"unknown CPU"`.
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, name)| name.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into())
}

/// The `q`-quantile (0..=1) of `values` by the nearest rank; 0 for none.
fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

impl Pipeline {
    /// Speaks `text` (any length) through `decoder` stage by stage, as `synthesize` does, and
    /// returns the seconds of each stage, the samples made and the pieces spoken.
    fn timed_text(
        &self,
        decoder: &mut dyn Decoder<ArEngine>,
        text: &str,
        sampler: &SamplerConfig,
        long_form: &LongForm,
        seed: u64,
    ) -> Result<(StageSeconds, usize, usize)> {
        let mut t = StageSeconds::default();
        let start = Instant::now();
        let plan = self.plan_text(text, None, &Lengths::default(), long_form, seed)?;
        t.front_end = start.elapsed().as_secs_f64();
        let rate = self.sample_rate() as f32;
        let mut samples = 0usize;
        for piece in &plan {
            let start = Instant::now();
            let generation = self.generate_one(decoder, &piece.request, sampler)?;
            t.ar += start.elapsed().as_secs_f64();
            let first = &generation.tokens;
            if !first.is_empty() {
                let start = Instant::now();
                let (nar_text, prompt_codes) = self.nar_inputs(&piece.ids, None, first.len())?;
                let durations = piece.request.prompt.durations.as_deref();
                let track = self.nar_track(&piece.ids, durations, first.len());
                let codes = self.nar_codes(&nar_text, &prompt_codes, first, track.as_deref())?;
                t.nar += start.elapsed().as_secs_f64();
                let start = Instant::now();
                let phones = self.mel_phones(&piece.ids, durations, first.len())?;
                samples += self.decode_codes(&codes, phones.as_deref())?.len();
                t.codec += start.elapsed().as_secs_f64();
            }
            samples += (piece.pause.max(0.0) * rate).round() as usize;
        }
        Ok((t, samples, plan.len()))
    }

    /// Seconds from the call to the first audio of `text` streamed: its first sentence is
    /// planned (the rest would be planned while it plays), spoken by `decoder`, and the stream's
    /// first non-empty chunk made.
    fn first_audio(
        &self,
        decoder: &mut dyn Decoder<ArEngine>,
        text: &str,
        sampler: &SamplerConfig,
        long_form: &LongForm,
        stream: StreamConfig,
        seed: u64,
    ) -> Result<f64> {
        let start = Instant::now();
        let first_sentence = split_sentences(text)
            .into_iter()
            .next()
            .ok_or_else(|| TtsError::Text("the text has nothing to speak".into()))?;
        let plan = self.plan_text(
            &first_sentence.text,
            None,
            &Lengths::default(),
            long_form,
            seed,
        )?;
        let piece = plan
            .first()
            .ok_or_else(|| TtsError::Text("the text has nothing to speak".into()))?;
        let generation = self.generate_one(decoder, &piece.request, sampler)?;
        let mut audio = self.stream(
            &piece.ids,
            None,
            &generation.tokens,
            piece.request.prompt.durations.as_deref(),
            stream,
        )?;
        while let Some(chunk) = audio.next_chunk()? {
            if !chunk.is_empty() {
                break;
            }
        }
        Ok(start.elapsed().as_secs_f64())
    }
}

/// Runs every case (`(label, texts)`) through `pipeline` with `decoder`: each text once whole
/// (stage by stage) and once streamed (first audio), text `i` with seed `seed + i`. Every
/// case is preceded by one untimed warm-up synthesis of its first text.
///
/// # Errors
/// [`TtsError::Text`] for a case without texts; those of the stages.
#[allow(clippy::too_many_arguments)]
pub fn run_pipeline_bench(
    pipeline: &Pipeline,
    decoder: &mut dyn Decoder<ArEngine>,
    cases: &[(String, Vec<String>)],
    sampler: &SamplerConfig,
    long_form: &LongForm,
    stream: StreamConfig,
    seed: u64,
    threads: usize,
    on_text: &mut dyn FnMut(&str, usize),
) -> Result<PipelineReport> {
    let mut out = Vec::with_capacity(cases.len());
    for (label, texts) in cases {
        let warm = texts
            .first()
            .ok_or_else(|| TtsError::Text(format!("the case {label:?} has no texts")))?;
        pipeline.timed_text(decoder, warm, sampler, long_form, seed)?;
        let mut stages = StageSeconds::default();
        let (mut samples, mut pieces, mut chars) = (0usize, 0usize, 0usize);
        let mut first = Vec::with_capacity(texts.len());
        for (i, text) in texts.iter().enumerate() {
            let s = seed + i as u64;
            let (t, n, p) = pipeline.timed_text(decoder, text, sampler, long_form, s)?;
            stages.add(&t);
            samples += n;
            pieces += p;
            chars += text.chars().count();
            first.push(pipeline.first_audio(decoder, text, sampler, long_form, stream, s)?);
            on_text(label, i + 1);
        }
        let audio_seconds = samples as f64 / f64::from(pipeline.sample_rate());
        let wall_seconds = stages.total();
        out.push(PipelineCase {
            label: label.clone(),
            texts: texts.len(),
            pieces,
            mean_chars: chars as f64 / texts.len() as f64,
            audio_seconds,
            wall_seconds,
            rtf: wall_seconds / audio_seconds.max(f64::MIN_POSITIVE),
            shares: stages.shares(),
            stages,
            first_audio_p50: quantile(&first, 0.5),
            first_audio_p95: quantile(&first, 0.95),
        });
    }
    Ok(PipelineReport {
        cpu: cpu_model(),
        threads,
        decoder: decoder.name(),
        engine: pipeline.lm.kind().name().into(),
        renderer: pipeline.renderer_name(),
        cases: out,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_take_the_nearest_rank() {
        let v = [0.3, 0.1, 0.2, 0.5, 0.4];
        assert_eq!(quantile(&v, 0.5), 0.3);
        assert_eq!(quantile(&v, 0.95), 0.5);
        assert_eq!(quantile(&v, 0.0), 0.1);
        assert_eq!(quantile(&[], 0.5), 0.0);
    }

    #[test]
    fn shares_sum_to_one() {
        let s = StageSeconds {
            front_end: 1.0,
            ar: 2.0,
            nar: 3.0,
            codec: 4.0,
        };
        assert_eq!(s.total(), 10.0);
        assert_eq!(s.shares(), [0.1, 0.2, 0.3, 0.4]);
    }
}
