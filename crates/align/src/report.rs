//! The report of aligning a corpus (`voxspec align` writes it as `report.json`): how many
//! utterances were aligned, the pauses found inside them, and — when the manifests carry
//! alignments of their own — the boundary errors against those.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use burn::tensor::Device;
use serde::Serialize;
use voxspec_data::Utterance;

use crate::aligner::{Aligner, UtteranceAlignment};
use crate::boundary::BoundaryErrors;
use crate::data::{AlignCorpus, AlignUtterance};
use crate::error::AlignError;
use crate::topology::{Topology, class_of_label};

/// Boundary errors of one comparison, as reported.
#[derive(Debug, Clone, Serialize)]
pub struct BoundaryReport {
    /// Utterances compared.
    pub utterances: usize,
    /// Utterances skipped because their phones differ from the reference's.
    pub mismatched: usize,
    /// Boundaries compared.
    pub boundaries: usize,
    /// Mean absolute boundary error, ms.
    pub mean_abs_error_ms: f64,
    /// Share of boundaries within 10 ms.
    pub within_10ms: f64,
    /// Share within 20 ms.
    pub within_20ms: f64,
    /// Share within 50 ms.
    pub within_50ms: f64,
}

impl From<&BoundaryErrors> for BoundaryReport {
    fn from(e: &BoundaryErrors) -> Self {
        let n = e.boundaries.max(1) as f64;
        Self {
            utterances: e.utterances,
            mismatched: e.mismatched,
            boundaries: e.boundaries,
            mean_abs_error_ms: 1000.0 * e.mean_abs_error(),
            within_10ms: e.within_10ms as f64 / n,
            within_20ms: e.within_20ms as f64 / n,
            within_50ms: e.within_50ms as f64 / n,
        }
    }
}

/// The report of aligning a corpus.
#[derive(Debug, Serialize)]
pub struct AlignReport {
    /// The prepared data directory.
    pub data: PathBuf,
    /// Utterances in its manifests.
    pub utterances: usize,
    /// Utterances aligned.
    pub aligned: usize,
    /// Utterances that could not be aligned, with the reason.
    pub failed: Vec<(String, String)>,
    /// Utterances left out of the corpus, with the reason.
    pub left_out: Vec<(String, String)>,
    /// Seconds spent training the aligner (none for a given aligner).
    pub train_seconds: Option<f64>,
    /// Seconds spent aligning.
    pub align_seconds: f64,
    /// Mean log-probability per frame of the best paths.
    pub mean_score: f64,
    /// Pauses found between the first and the last phone.
    pub inner_pauses: usize,
    /// Against the manifests' own alignments, the transcripts' G2P phones aligned.
    pub reference_transcript: Option<BoundaryReport>,
    /// Against the manifests' own alignments, their phone sequences aligned by the same model.
    pub reference_phones: Option<BoundaryReport>,
}

impl AlignReport {
    /// The lines a command prints: how many utterances were aligned in how long, where the
    /// TextGrids went (`written_to`), and each comparison with the corpus's own alignments.
    pub fn summary(&self, written_to: &str) -> String {
        let mut out = format!(
            "aligned {} of {} utterances in {:.1} s ({} inner pauses; mean log-probability per \
             frame {:.3}); TextGrids in {written_to}",
            self.aligned, self.utterances, self.align_seconds, self.inner_pauses, self.mean_score,
        );
        for (what, r) in [
            ("transcripts' phones", &self.reference_transcript),
            ("reference phones   ", &self.reference_phones),
        ] {
            if let Some(r) = r {
                out.push_str(&format!(
                    "\nagainst the corpus's own alignments, {what}: {} utterances ({} with other \
                     phones skipped), {} boundaries: mean |error| {:.1} ms, within 10 ms {:.1} %, \
                     20 ms {:.1} %, 50 ms {:.1} %",
                    r.utterances,
                    r.mismatched,
                    r.boundaries,
                    r.mean_abs_error_ms,
                    100.0 * r.within_10ms,
                    100.0 * r.within_20ms,
                    100.0 * r.within_50ms
                ));
            }
        }
        out
    }

    /// The report of aligning the `utterances` of `data` (`corpus`: those usable), `aligned`
    /// and `failed`, with the seconds spent training (`None`: a given aligner) and aligning,
    /// and the comparisons of [`compare_with_references`].
    pub fn new(
        (data, utterances): (&Path, usize),
        corpus: &AlignCorpus,
        (aligned, failed): (&[UtteranceAlignment], &[(String, AlignError)]),
        (train_seconds, align_seconds): (Option<f64>, f64),
        (reference_transcript, reference_phones): (Option<BoundaryReport>, Option<BoundaryReport>),
    ) -> Self {
        Self {
            data: data.to_path_buf(),
            utterances,
            aligned: aligned.len(),
            failed: failed
                .iter()
                .map(|(id, e)| (id.clone(), e.to_string()))
                .collect(),
            left_out: corpus.left_out.clone(),
            train_seconds,
            align_seconds,
            mean_score: mean_score(aligned),
            inner_pauses: inner_pauses(aligned),
            reference_transcript,
            reference_phones,
        }
    }
}

/// Pauses inside the alignments (silences between their first and last phone).
pub fn inner_pauses(aligned: &[UtteranceAlignment]) -> usize {
    aligned
        .iter()
        .map(|a| {
            let n = a.alignment.phones.len();
            a.alignment.phones[1..n.saturating_sub(1)]
                .iter()
                .filter(|p| p.as_str() == voxspec_data::textgrid::SILENCE)
                .count()
        })
        .sum()
}

/// Mean of the alignments' scores (0 for none).
pub fn mean_score(aligned: &[UtteranceAlignment]) -> f64 {
    aligned.iter().map(|a| a.score).sum::<f64>() / aligned.len().max(1) as f64
}

/// Where the TextGrid of `u` goes: beside its audio, or
/// `<out>/<speaker>/<chapter>/<id>.TextGrid` (the layout `voxspec prepare --alignments`
/// reads).
pub fn textgrid_path(out: &Path, beside_audio: bool, u: &Utterance) -> PathBuf {
    let file = format!("{}.TextGrid", u.id);
    if beside_audio {
        return Path::new(&u.path).with_file_name(file);
    }
    let mut dir = out.join(&u.speaker);
    if !u.chapter.is_empty() {
        dir = dir.join(&u.chapter);
    }
    dir.join(file)
}

/// Boundary errors against the manifests' own alignments, when they have any: the transcript
/// alignments `aligned` as they are, and the reference phone sequences aligned by `aligner`.
///
/// # Errors
/// As [`Aligner::align_corpus`].
pub fn compare_with_references(
    aligner: &Aligner,
    corpus: &AlignCorpus,
    aligned: &[UtteranceAlignment],
    max_frames: usize,
    device: &Device,
    progress: &dyn voxspec_data::Progress,
) -> Result<(Option<BoundaryReport>, Option<BoundaryReport>), AlignError> {
    let references: HashMap<&str, &voxspec_data::Alignment> = corpus
        .utterances()
        .iter()
        .filter_map(|u| {
            u.utterance
                .alignment
                .as_ref()
                .map(|a| (u.utterance.id.as_str(), a))
        })
        .collect();
    if references.is_empty() {
        return Ok((None, None));
    }
    let mut transcript = BoundaryErrors::default();
    for a in aligned {
        if let Some(r) = references.get(a.id.as_str()) {
            transcript.add(&a.alignment, r);
        }
    }
    let reference_topology = |u: &AlignUtterance| -> Option<Topology> {
        let r = u.utterance.alignment.as_ref()?;
        let classes: Option<Vec<u32>> = r.phones.iter().map(|p| class_of_label(p).ok()).collect();
        Topology::required(classes?).ok()
    };
    let (forced, _) =
        aligner.align_corpus(corpus, &reference_topology, max_frames, device, progress)?;
    let mut phones = BoundaryErrors::default();
    for a in &forced {
        if let Some(r) = references.get(a.id.as_str()) {
            phones.add(&a.alignment, r);
        }
    }
    Ok((
        Some(BoundaryReport::from(&transcript)),
        Some(BoundaryReport::from(&phones)),
    ))
}
