//! A trained aligner: its files, and phone alignments of utterances from it.
//!
//! ```text
//! <dir>/config.json        {"kind": "aligner", "model": {...}, "frontend": {...}}
//! <dir>/model.safetensors  the acoustic model's weights
//! ```
//!
//! Frames are centred every 10 ms (`t · hop`). The boundary between the last frame of a phone,
//! `a − 1`, and the first of the next, `a`, lies where the two phones' frame scores cross,
//! interpolated linearly between the frame centres (at `(a − ½) · hop / rate` seconds when they
//! do not cross there); the first phone starts at 0 and the last ends at the end of the audio.

use std::path::Path;

use burn::tensor::Device;
use burn::tensor::activation::log_softmax;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use voxspec_data::Alignment;
use voxspec_data::textgrid::SILENCE;
use voxspec_teacher::ctc::{Frontend, FrontendConfig};
use voxspec_train::weights::{CONFIG_FILE, WEIGHTS_FILE};

use crate::data::{AlignCorpus, AlignUtterance};
use crate::error::AlignError;
use crate::hmm::viterbi_min_frames;
use crate::model::{AlignerModel, AlignerModelConfig};
use crate::scoring::Scoring;
use crate::topology::{Topology, is_silence};

/// Where, in frames, the boundary between frames `a − 1` (the last of class `left`) and `a`
/// (the first of class `right`) lies: the zero of the score difference `s_right − s_left`,
/// interpolated linearly between the two frame centres and kept within their middle 90 %; the
/// midpoint `a − ½` when the scores do not cross there.
///
/// # Shapes
/// `scores: [frames, classes]` row-major.
fn crossing(scores: &[f32], classes: usize, a: usize, left: usize, right: usize) -> f64 {
    let midpoint = a as f64 - 0.5;
    if a == 0 || left == right {
        return midpoint;
    }
    let diff = |t: usize| -> Option<f64> {
        let row = scores.get(t * classes..(t + 1) * classes)?;
        Some(f64::from(*row.get(right)?) - f64::from(*row.get(left)?))
    };
    match (diff(a - 1), diff(a)) {
        (Some(d0), Some(d1)) if d0 < 0.0 && d1 > 0.0 => {
            (a - 1) as f64 + (-d0 / (d1 - d0)).clamp(0.05, 0.95)
        }
        _ => midpoint,
    }
}

/// `kind` of an aligner's `config.json`.
pub const ALIGNER_KIND: &str = "aligner";

/// What `config.json` holds besides the kind.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AlignerFile {
    /// The model.
    pub model: AlignerModelConfig,
    /// The front end.
    pub frontend: FrontendConfig,
    /// How frames are scored against states (as in training).
    pub scoring: Scoring,
}

/// The alignment of one utterance.
#[derive(Debug, Clone, PartialEq)]
pub struct UtteranceAlignment {
    /// Utterance id.
    pub id: String,
    /// Phones (`sil` for silence) and their end times.
    pub alignment: Alignment,
    /// Mean log-probability per frame of the best path (low: the transcript may not match).
    pub score: f64,
}

/// The alignments of a corpus, and the utterances that could not be aligned with the reason.
pub type CorpusAlignment = (Vec<UtteranceAlignment>, Vec<(String, AlignError)>);

/// A trained aligner.
#[derive(Debug, Clone)]
pub struct Aligner {
    model: AlignerModel,
    file: AlignerFile,
    frontend: Frontend,
}

impl Aligner {
    /// An aligner from a trained model (switched to inference).
    ///
    /// # Errors
    /// Front-end errors.
    pub fn new(
        model: AlignerModel,
        config: AlignerModelConfig,
        frontend: FrontendConfig,
        scoring: Scoring,
    ) -> Result<Self, AlignError> {
        Ok(Self {
            frontend: frontend.init()?,
            model,
            file: AlignerFile {
                model: config,
                frontend,
                scoring,
            },
        })
    }

    /// Loads `<dir>/{config.json, model.safetensors}` onto `device`.
    ///
    /// # Errors
    /// [`AlignError::Train`] naming the file when it is missing, of another kind or does not
    /// match the config.
    pub fn load(dir: &Path, device: &Device) -> Result<Self, AlignError> {
        let (_, file): (_, AlignerFile) = voxspec_train::read_model_config(dir, &[ALIGNER_KIND])?;
        let model = file.model.init(device)?;
        let model = voxspec_train::load_weights(model, &dir.join(WEIGHTS_FILE))?;
        Self::new(model, file.model, file.frontend, file.scoring)
    }

    /// Writes `<dir>/config.json` and `<dir>/model.safetensors` (each atomically).
    ///
    /// # Errors
    /// I/O errors naming the file.
    pub fn save(&self, dir: &Path) -> Result<(), AlignError> {
        std::fs::create_dir_all(dir).map_err(|e| {
            AlignError::input(
                "aligner directory",
                format!("cannot create {}: {e}", dir.display()),
            )
        })?;
        voxspec_train::save_weights(&self.model, &dir.join(WEIGHTS_FILE))?;
        voxspec_train::write_model_config(dir, ALIGNER_KIND, &self.file)?;
        debug_assert!(dir.join(CONFIG_FILE).is_file());
        Ok(())
    }

    /// Aligns with every phone held for at least `frames` frames (see [`Scoring`]).
    pub fn set_min_phone_frames(&mut self, frames: usize) {
        self.file.scoring.min_phone_frames = Some(frames.max(1));
    }

    /// The front end.
    pub fn frontend(&self) -> &Frontend {
        &self.frontend
    }

    /// Frame log-probabilities of a batch of utterances of `corpus` (by index), each
    /// `[frames, classes]` row-major.
    ///
    /// # Errors
    /// Model errors; [`AlignError::TensorRead`].
    pub fn log_probs(
        &self,
        corpus: &AlignCorpus,
        items: &[usize],
        device: &Device,
    ) -> Result<Vec<Vec<f32>>, AlignError> {
        let batch = corpus.batch(items, device);
        let logits = self.model.forward(batch.features, &batch.lengths)?;
        let [_, frames, classes] = logits.dims();
        let host = crate::host_f32(log_softmax(logits, 2).into_data(), "aligner log_probs")?;
        Ok(batch
            .lengths
            .iter()
            .enumerate()
            .map(|(b, &len)| host[b * frames * classes..(b * frames + len) * classes].to_vec())
            .collect())
    }

    /// Aligns one utterance's frame scores (log-probabilities, or the prior-scaled ones that
    /// [`Aligner::align_corpus`] uses) to `topology` (the transcript's, or a known phone
    /// sequence).
    ///
    /// # Errors
    /// [`AlignError::TooShort`] and shape errors.
    pub fn align(
        &self,
        utt: &AlignUtterance,
        log_probs: &[f32],
        topology: &Topology,
    ) -> Result<UtteranceAlignment, AlignError> {
        let classes = self.file.model.classes;
        let min_frames = self.file.scoring.min_phone_frames();
        let (segments, score) =
            viterbi_min_frames(log_probs, utt.frames, classes, topology, min_frames)?;
        let cfg = self.frontend.config();
        let hop = cfg.hop_length as f64 / f64::from(cfg.sample_rate);
        let duration = utt.utterance.duration;
        let mut phones = Vec::with_capacity(segments.len());
        let mut ends = Vec::with_capacity(segments.len());
        for (i, seg) in segments.iter().enumerate() {
            let class = topology.classes[seg.state];
            let end = match segments.get(i + 1) {
                None => duration,
                Some(next) => {
                    let next_class = topology.classes[next.state] as usize;
                    let at = crossing(log_probs, classes, seg.end, class as usize, next_class);
                    (at * hop).min(duration)
                }
            };
            let label = if is_silence(class) {
                SILENCE.to_string()
            } else {
                topology.label(seg.state).to_string()
            };
            // Two silences in a row (a skipped word's pause cannot give this, but keep the
            // file well-formed whatever the topology) merge into one interval.
            if is_silence(class) && phones.last().is_some_and(|p: &String| p == SILENCE) {
                if let Some(e) = ends.last_mut() {
                    *e = end;
                }
                continue;
            }
            if ends.last().is_some_and(|&prev: &f64| end <= prev) {
                return Err(AlignError::input(
                    "alignment",
                    format!("boundaries not increasing at phone {} ({end:.3} s)", i + 1),
                ));
            }
            phones.push(label);
            ends.push(end);
        }
        let alignment = Alignment { phones, ends };
        alignment
            .check()
            .map_err(|e| AlignError::input("alignment", e))?;
        Ok(UtteranceAlignment {
            id: utt.utterance.id.clone(),
            alignment,
            score: score / utt.frames as f64,
        })
    }

    /// Aligns every utterance of `corpus` to its transcript (or, with `topology_of`, to the
    /// topology it returns), scoring frames as in training ([`Scoring`], with `q` the mean
    /// posterior over the whole corpus). The model runs in batches of at most `max_frames`
    /// padded frames. Utterances that cannot be aligned are returned with their error.
    ///
    /// # Errors
    /// Model errors (per-utterance failures are in the second list).
    pub fn align_corpus(
        &self,
        corpus: &AlignCorpus,
        topology_of: &(dyn Fn(&AlignUtterance) -> Option<Topology> + Sync),
        max_frames: usize,
        device: &Device,
        progress: &dyn voxspec_data::Progress,
    ) -> Result<CorpusAlignment, AlignError> {
        let utts = corpus.utterances();
        let mut order: Vec<usize> = (0..utts.len()).collect();
        order.sort_by_key(|&i| utts[i].frames);
        let mut log_probs: Vec<Vec<f32>> = vec![Vec::new(); utts.len()];
        progress.start(utts.len() as u64, "aligning");
        let mut start = 0;
        while start < order.len() {
            let mut end = start + 1;
            while end < order.len() && (end + 1 - start) * utts[order[end]].frames <= max_frames {
                end += 1;
            }
            let items = &order[start..end];
            for (&i, lp) in items.iter().zip(self.log_probs(corpus, items, device)?) {
                log_probs[i] = lp;
            }
            progress.inc(items.len() as u64);
            start = end;
        }
        progress.finish();
        let classes = self.file.model.classes;
        let all: Vec<&[f32]> = log_probs.iter().map(Vec::as_slice).collect();
        let log_prior = crate::scoring::log_prior(&all, classes);
        let results: Vec<Result<UtteranceAlignment, AlignError>> = utts
            .par_iter()
            .zip(&log_probs)
            .map(|(utt, lp)| {
                let topology = topology_of(utt).unwrap_or_else(|| utt.topology.clone());
                let scores = self.file.scoring.scores(lp, &log_prior, &utt.levels);
                self.align(utt, &scores, &topology)
            })
            .collect();
        let mut done = Vec::with_capacity(utts.len());
        let mut failed = Vec::new();
        for (utt, r) in utts.iter().zip(results) {
            match r {
                Ok(a) => done.push(a),
                Err(e) => failed.push((utt.utterance.id.clone(), e)),
            }
        }
        Ok((done, failed))
    }

    /// The model.
    pub fn model(&self) -> &AlignerModel {
        &self.model
    }

    /// Model and front-end settings.
    pub fn file(&self) -> &AlignerFile {
        &self.file
    }
}

#[cfg(test)]
mod tests {
    use super::crossing;

    #[test]
    fn boundaries_move_to_where_the_scores_cross() {
        // two classes, frames 0..4; class 1 takes over between frames 1 and 2
        let row = |a: f32, b: f32| [a, b];
        let scores: Vec<f32> = [
            row(0.0, -3.0),
            row(-0.5, -2.0),
            row(-2.5, -0.5),
            row(-3.0, 0.0),
        ]
        .concat();
        // d(1) = -1.5, d(2) = 2.0: crossing 1.5 / 3.5 of the way from frame 1 to frame 2
        let at = crossing(&scores, 2, 2, 0, 1);
        assert!((at - (1.0 + 1.5 / 3.5)).abs() < 1e-9, "{at}");
        // no crossing between the frames (or the same class): the midpoint
        assert_eq!(crossing(&scores, 2, 1, 0, 1), 0.5);
        assert_eq!(crossing(&scores, 2, 2, 1, 1), 1.5);
        // a crossing right at a frame is kept off it
        let flat: Vec<f32> = [row(0.0, -1e-6), row(-10.0, 0.0)].concat();
        assert!((crossing(&flat, 2, 1, 0, 1) - 0.05).abs() < 1e-9);
        // past the scores: the midpoint
        assert_eq!(crossing(&scores, 2, 9, 0, 1), 8.5);
    }
}
