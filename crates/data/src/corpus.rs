//! Corpus preparation: scan a corpus on disk and write train/dev/test manifests.
//!
//! Two layouts are understood:
//!
//! ```text
//! LibriTTS   <root>/<subset>/<speaker>/<chapter>/<utt>.{wav,flac,mp3,ogg}
//!                                               <utt>.normalized.txt   (preferred, configurable)
//!                                               <utt>.original.txt
//! Plain      <root>/<utt>.{wav,flac,mp3,ogg} + <root>/<utt>.txt
//!            speaker = the part of <utt> before its first '_' (the directory name if none)
//! ```
//!
//! A phone alignment is attached to an utterance when a Praat TextGrid `<utt>.TextGrid` (MFA
//! format, see [`crate::textgrid`]) lies beside its audio or in the directory given as
//! [`PrepareConfig::alignments`] (as `<dir>/<speaker>/<chapter>/<utt>.TextGrid`,
//! `<dir>/<speaker>/<utt>.TextGrid` or `<dir>/<utt>.TextGrid`). A malformed TextGrid is an error;
//! one whose end differs from the audio's duration by more than [`ALIGNMENT_TOLERANCE_S`] is
//! not used (a warning names it); utterances without one are counted in a warning.
//!
//! LibriTTS subsets are assigned to splits by name (`train-clean-100` → train, `dev-clean` → dev,
//! ...). A plain corpus goes to train, minus stable hash-chosen fractions for dev and test.
//!
//! Every candidate file is checked in parallel (rayon): the audio is decoded in full (or, with
//! `verify_audio = false`, only its header is read), the transcript is read, and the utterance is
//! kept or skipped for one [`SkipReason`]. The output directory receives `train.jsonl`,
//! `dev.jsonl`, `test.jsonl` and, last, `summary.json`, whose presence marks the preparation as
//! finished: a rerun with the same settings reuses the manifests, a rerun with other settings is
//! refused unless forced.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};
use crate::fsutil::write_atomic;
use crate::manifest::{Utterance, read_manifest, write_manifest};
use crate::textgrid::{find_textgrid, read_textgrid};

/// Audio file extensions the scanner picks up.
pub const AUDIO_EXTENSIONS: [&str; 4] = ["wav", "flac", "mp3", "ogg"];
/// The three splits, in manifest order.
pub const SPLITS: [&str; 3] = ["train", "dev", "test"];
/// An alignment whose end differs from the audio's duration by more than this (seconds) is not
/// used: it most likely belongs to other audio.
pub const ALIGNMENT_TOLERANCE_S: f64 = 0.05;
/// Format version of `summary.json`; a finished preparation of an older version is redone
/// (version 2: manifests carry alignments).
pub const SUMMARY_VERSION: u32 = 2;

/// How the corpus is laid out on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// `<root>/<subset>/<speaker>/<chapter>/<utt>.wav` with `.normalized.txt`/`.original.txt`.
    LibriTts,
    /// `<root>/<utt>.wav` with `<utt>.txt`.
    Plain,
}

/// Which LibriTTS transcript to use. The other one is a fallback when the preferred is missing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TranscriptKind {
    /// `<utt>.normalized.txt` (numbers and abbreviations spelled out).
    Normalized,
    /// `<utt>.original.txt` (the book text).
    Original,
}

/// Settings of one preparation. Stored in `summary.json`, so a rerun can tell whether the
/// manifests on disk were made with the same settings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrepareConfig {
    /// Corpus root.
    pub root: PathBuf,
    /// Layout of the corpus.
    pub layout: Layout,
    /// LibriTTS subsets that form the train split.
    pub train_subsets: Vec<String>,
    /// LibriTTS subsets that form the dev split.
    pub dev_subsets: Vec<String>,
    /// LibriTTS subsets that form the test split.
    pub test_subsets: Vec<String>,
    /// Plain layout: fraction of utterances (chosen by a stable hash of the id) for dev.
    pub dev_fraction: f64,
    /// Plain layout: fraction of utterances for test.
    pub test_fraction: f64,
    /// Utterances shorter than this many seconds are skipped.
    pub min_duration: f64,
    /// Utterances longer than this many seconds are skipped.
    pub max_duration: f64,
    /// Preferred LibriTTS transcript.
    pub transcript: TranscriptKind,
    /// Decode every file in full (finds truncated and corrupt files) instead of reading headers.
    pub verify_audio: bool,
    /// Directory of TextGrid phone alignments, searched before the audio's own directory.
    #[serde(default)]
    pub alignments: Option<PathBuf>,
}

impl PrepareConfig {
    /// LibriTTS defaults: train-clean-100 / dev-clean / test-clean, 0.5–20 s, normalized text.
    pub fn libritts(root: impl Into<PathBuf>) -> Self {
        PrepareConfig {
            root: root.into(),
            layout: Layout::LibriTts,
            train_subsets: vec!["train-clean-100".into()],
            dev_subsets: vec!["dev-clean".into()],
            test_subsets: vec!["test-clean".into()],
            dev_fraction: 0.0,
            test_fraction: 0.0,
            min_duration: 0.5,
            max_duration: 20.0,
            transcript: TranscriptKind::Normalized,
            verify_audio: true,
            alignments: None,
        }
    }

    /// Plain-layout defaults: 5 % dev, 5 % test.
    pub fn plain(root: impl Into<PathBuf>) -> Self {
        PrepareConfig {
            layout: Layout::Plain,
            train_subsets: vec![],
            dev_subsets: vec![],
            test_subsets: vec![],
            dev_fraction: 0.05,
            test_fraction: 0.05,
            ..Self::libritts(root)
        }
    }

    fn validate(&self) -> Result<()> {
        if !(self.min_duration >= 0.0 && self.max_duration > self.min_duration) {
            return Err(DataError::Config {
                field: "min_duration/max_duration",
                detail: format!(
                    "need 0 <= min < max, got min {} and max {}",
                    self.min_duration, self.max_duration
                ),
            });
        }
        let fractions_ok = (0.0..1.0).contains(&self.dev_fraction)
            && (0.0..1.0).contains(&self.test_fraction)
            && self.dev_fraction + self.test_fraction < 1.0;
        if !fractions_ok {
            return Err(DataError::Config {
                field: "dev_fraction/test_fraction",
                detail: format!(
                    "need fractions in [0, 1) summing below 1, got {} and {}",
                    self.dev_fraction, self.test_fraction
                ),
            });
        }
        if self.layout == Layout::LibriTts && self.train_subsets.is_empty() {
            return Err(DataError::Config {
                field: "train_subsets",
                detail: "at least one LibriTTS subset is needed for the train split".into(),
            });
        }
        Ok(())
    }
}

/// Why an utterance was left out of the manifests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SkipReason {
    /// The audio could not be opened or decoded (corrupt, truncated, unsupported codec).
    UnreadableAudio,
    /// The audio file holds no samples.
    EmptyAudio,
    /// No transcript file beside the audio.
    NoTranscript,
    /// The transcript is empty or only whitespace.
    EmptyTranscript,
    /// Shorter than `min_duration`.
    TooShort,
    /// Longer than `max_duration`.
    TooLong,
}

impl SkipReason {
    /// The snake_case name used in `summary.json`.
    pub fn name(self) -> &'static str {
        match self {
            SkipReason::UnreadableAudio => "unreadable_audio",
            SkipReason::EmptyAudio => "empty_audio",
            SkipReason::NoTranscript => "no_transcript",
            SkipReason::EmptyTranscript => "empty_transcript",
            SkipReason::TooShort => "too_short",
            SkipReason::TooLong => "too_long",
        }
    }
}

/// Counts for one split.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitSummary {
    /// Utterances written to the manifest.
    pub kept: usize,
    /// Total duration of the kept utterances, in hours.
    pub hours: f64,
    /// Number of distinct speakers kept.
    pub speakers: usize,
    /// Skipped utterances by reason.
    pub skipped: BTreeMap<SkipReason, usize>,
    /// Kept utterances that have a phone alignment.
    #[serde(default)]
    pub aligned: usize,
}

/// A skipped file, for the report.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Skipped {
    /// The audio file.
    pub path: PathBuf,
    /// Why it was skipped.
    pub reason: SkipReason,
    /// Details (the decoder's error, the duration, ...).
    pub detail: String,
}

/// A TextGrid that was found but not used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlignmentIssue {
    /// The TextGrid file.
    pub textgrid: PathBuf,
    /// Why it was not used.
    pub detail: String,
}

/// What a preparation produced; written to `summary.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrepareSummary {
    /// Format version ([`SUMMARY_VERSION`]; 0 for summaries written before versions existed).
    #[serde(default)]
    pub version: u32,
    /// The settings used.
    pub config: PrepareConfig,
    /// Counts per split (`train`, `dev`, `test`).
    pub splits: BTreeMap<String, SplitSummary>,
    /// Every skipped file with its reason.
    pub skipped: Vec<Skipped>,
    /// TextGrids found but not used (their end does not match the audio).
    #[serde(default)]
    pub alignment_issues: Vec<AlignmentIssue>,
}

impl PrepareSummary {
    /// Total skipped for a reason over all splits.
    pub fn skipped_count(&self, reason: SkipReason) -> usize {
        self.splits
            .values()
            .map(|s| s.skipped.get(&reason).copied().unwrap_or(0))
            .sum()
    }

    /// Kept utterances over all splits.
    pub fn kept(&self) -> usize {
        self.splits.values().map(|s| s.kept).sum()
    }

    /// Kept utterances with a phone alignment over all splits.
    pub fn aligned(&self) -> usize {
        self.splits.values().map(|s| s.aligned).sum()
    }
}

impl std::fmt::Display for PrepareSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "{:<6} {:>8} {:>8} {:>8} {:>8}  reasons",
            "split", "kept", "hours", "speakers", "skipped"
        )?;
        for split in SPLITS {
            let Some(s) = self.splits.get(split) else {
                continue;
            };
            let total: usize = s.skipped.values().sum();
            let reasons: Vec<String> = s
                .skipped
                .iter()
                .map(|(r, n)| format!("{}={n}", r.name()))
                .collect();
            writeln!(
                f,
                "{split:<6} {:>8} {:>8.3} {:>8} {:>8}  {}",
                s.kept,
                s.hours,
                s.speakers,
                total,
                reasons.join(" ")
            )?;
        }
        let aligned = self.aligned();
        if aligned > 0 || !self.alignment_issues.is_empty() || self.config.alignments.is_some() {
            writeln!(
                f,
                "alignments: {aligned} of {} kept utterances ({} without)",
                self.kept(),
                self.kept() - aligned
            )?;
        }
        if !self.alignment_issues.is_empty() {
            writeln!(
                f,
                "{} TextGrid(s) not used, their end differs from the audio by more than {} ms; first: {}: {}",
                self.alignment_issues.len(),
                ALIGNMENT_TOLERANCE_S * 1000.0,
                self.alignment_issues[0].textgrid.display(),
                self.alignment_issues[0].detail
            )?;
        }
        Ok(())
    }
}

/// Reports progress of long work; the CLI draws it as a progress bar.
pub trait Progress: Sync {
    /// Work of `total` units named `what` begins.
    fn start(&self, total: u64, what: &str);
    /// `n` more units are done.
    fn inc(&self, n: u64);
    /// The work is finished.
    fn finish(&self);
}

/// A [`Progress`] that shows nothing.
pub struct NoProgress;

impl Progress for NoProgress {
    fn start(&self, _total: u64, _what: &str) {}
    fn inc(&self, _n: u64) {}
    fn finish(&self) {}
}

/// The result of [`prepare`].
#[derive(Debug, Clone)]
pub struct PrepareOutcome {
    /// Counts and skipped files.
    pub summary: PrepareSummary,
    /// True when finished manifests with the same settings were found and kept.
    pub reused: bool,
}

/// Paths of the files [`prepare`] writes into `out_dir`.
pub fn manifest_path(out_dir: &Path, split: &str) -> PathBuf {
    out_dir.join(format!("{split}.jsonl"))
}

/// Path of the summary written beside the manifests.
pub fn summary_path(out_dir: &Path) -> PathBuf {
    out_dir.join("summary.json")
}

/// Reads the manifest of one split from a prepared directory.
pub fn read_split(out_dir: &Path, split: &str) -> Result<Vec<Utterance>> {
    read_manifest(&manifest_path(out_dir, split))
}

/// [`read_split`] for an optional split: no utterances when its manifest does not exist.
pub fn read_split_if_present(out_dir: &Path, split: &str) -> Result<Vec<Utterance>> {
    if manifest_path(out_dir, split).is_file() {
        read_split(out_dir, split)
    } else {
        Ok(Vec::new())
    }
}

/// One audio file found by the scan, before it is checked.
#[derive(Debug, Clone)]
struct Candidate {
    split: &'static str,
    id: String,
    speaker: String,
    chapter: String,
    audio: PathBuf,
    transcripts: Vec<PathBuf>,
}

/// Scans the corpus described by `config` and writes manifests and a summary into `out_dir`.
///
/// If `out_dir` already holds a finished preparation with the same settings it is kept
/// (`reused = true`) unless `force`; one made with other settings is an error unless `force`.
pub fn prepare(
    config: &PrepareConfig,
    out_dir: &Path,
    force: bool,
    progress: &dyn Progress,
) -> Result<PrepareOutcome> {
    config.validate()?;
    let root = std::fs::canonicalize(&config.root).map_err(|e| DataError::Layout {
        path: config.root.clone(),
        detail: format!("cannot open corpus root: {e}"),
    })?;
    let mut config = config.clone();
    config.root = root;
    if let Some(dir) = &config.alignments {
        let canonical = std::fs::canonicalize(dir)
            .ok()
            .filter(|d| d.is_dir())
            .ok_or_else(|| DataError::Layout {
                path: dir.clone(),
                detail: "alignments directory not found".into(),
            })?;
        config.alignments = Some(canonical);
    }

    if !force && let Some(summary) = finished_summary(out_dir)? {
        if summary.config != config {
            return Err(DataError::StaleManifests {
                dir: out_dir.to_path_buf(),
                detail: describe_difference(&summary.config, &config),
            });
        }
        tracing::info!(dir = %out_dir.display(), "manifests already prepared; keeping them");
        return Ok(PrepareOutcome {
            summary,
            reused: true,
        });
    }

    let candidates = match config.layout {
        Layout::LibriTts => scan_libritts(&config)?,
        Layout::Plain => scan_plain(&config)?,
    };
    tracing::info!(files = candidates.len(), "scanned corpus");

    progress.start(candidates.len() as u64, "checking audio");
    let checked: Vec<(&'static str, Result<Checked>)> = candidates
        .into_par_iter()
        .map(|c| {
            let split = c.split;
            let r = check_candidate(c, &config);
            progress.inc(1);
            (split, r)
        })
        .collect();
    progress.finish();
    // The first fatal error (a malformed TextGrid) in scan order.
    let mut checked_ok = Vec::with_capacity(checked.len());
    for (split, r) in checked {
        checked_ok.push((split, r?));
    }

    let mut per_split: BTreeMap<String, Vec<Utterance>> = BTreeMap::new();
    let mut splits: BTreeMap<String, SplitSummary> = BTreeMap::new();
    let mut skipped = Vec::new();
    let mut alignment_issues = Vec::new();
    for split in SPLITS {
        per_split.insert(split.to_string(), Vec::new());
        splits.insert(split.to_string(), SplitSummary::default());
    }
    for (split, checked) in checked_ok {
        alignment_issues.extend(checked.issue);
        match checked.result {
            Ok(u) => per_split.entry(split.to_string()).or_default().push(u),
            Err(s) => {
                tracing::debug!(path = %s.path.display(), reason = s.reason.name(), "{}", s.detail);
                *splits
                    .entry(split.to_string())
                    .or_default()
                    .skipped
                    .entry(s.reason)
                    .or_default() += 1;
                skipped.push(s);
            }
        }
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));

    for (split, utts) in per_split.iter_mut() {
        utts.sort_by(|a, b| a.id.cmp(&b.id));
        if let Some(dup) = utts.windows(2).find(|w| w[0].id == w[1].id) {
            return Err(DataError::Layout {
                path: config.root.clone(),
                detail: format!(
                    "utterance id {:?} occurs twice in the {split} split",
                    dup[0].id
                ),
            });
        }
        let s = splits.entry(split.clone()).or_default();
        s.kept = utts.len();
        s.hours = utts.iter().map(|u| u.duration).sum::<f64>() / 3600.0;
        let mut speakers: Vec<&str> = utts.iter().map(|u| u.speaker.as_str()).collect();
        speakers.sort_unstable();
        speakers.dedup();
        s.speakers = speakers.len();
        s.aligned = utts.iter().filter(|u| u.alignment.is_some()).count();
    }
    alignment_issues.sort_by(|a: &AlignmentIssue, b| a.textgrid.cmp(&b.textgrid));
    let kept: usize = splits.values().map(|s| s.kept).sum();
    let aligned: usize = splits.values().map(|s| s.aligned).sum();
    if let Some(first) = alignment_issues.first() {
        tracing::warn!(
            "{} TextGrid(s) not used because their end differs from the audio by more than {} ms; first: {}: {}",
            alignment_issues.len(),
            ALIGNMENT_TOLERANCE_S * 1000.0,
            first.textgrid.display(),
            first.detail
        );
    }
    if aligned < kept && (aligned > 0 || config.alignments.is_some()) {
        tracing::warn!(
            "{} of {kept} kept utterances have no phone alignment (no usable <utt>.TextGrid)",
            kept - aligned
        );
    }

    // A stale summary must not survive a partial rewrite: remove it first, write it last.
    let summary_file = summary_path(out_dir);
    if summary_file.exists() {
        std::fs::remove_file(&summary_file)
            .map_err(|e| DataError::io("removing", &summary_file, e))?;
    }
    for (split, utts) in &per_split {
        write_manifest(&manifest_path(out_dir, split), utts)?;
    }
    let summary = PrepareSummary {
        version: SUMMARY_VERSION,
        config,
        splits,
        skipped,
        alignment_issues,
    };
    let json = serde_json::to_vec_pretty(&summary).map_err(|e| DataError::Manifest {
        path: summary_file.clone(),
        line: 0,
        detail: e.to_string(),
    })?;
    write_atomic(&summary_file, &json)?;
    Ok(PrepareOutcome {
        summary,
        reused: false,
    })
}

/// The summary of a finished preparation in `out_dir`, if there is one and all its manifests exist.
fn finished_summary(out_dir: &Path) -> Result<Option<PrepareSummary>> {
    let path = summary_path(out_dir);
    if !path.exists() || SPLITS.iter().any(|s| !manifest_path(out_dir, s).exists()) {
        return Ok(None);
    }
    let bytes = std::fs::read(&path).map_err(|e| DataError::io("reading", &path, e))?;
    match serde_json::from_slice::<PrepareSummary>(&bytes) {
        Ok(s) if s.version < SUMMARY_VERSION => {
            tracing::info!(
                path = %path.display(),
                "manifests of an older format (version {}); preparing again",
                s.version
            );
            Ok(None)
        }
        Ok(s) => Ok(Some(s)),
        Err(e) => {
            tracing::warn!(path = %path.display(), "unreadable summary ({e}); preparing again");
            Ok(None)
        }
    }
}

fn describe_difference(old: &PrepareConfig, new: &PrepareConfig) -> String {
    let old = serde_json::to_value(old).unwrap_or_default();
    let new = serde_json::to_value(new).unwrap_or_default();
    let (Some(old), Some(new)) = (old.as_object(), new.as_object()) else {
        return "settings differ".into();
    };
    let diffs: Vec<String> = new
        .iter()
        .filter(|(k, v)| old.get(*k) != Some(*v))
        .map(|(k, v)| {
            format!(
                "{k}: was {}, now {v}",
                old.get(k).cloned().unwrap_or_default()
            )
        })
        .collect();
    diffs.join("; ")
}

fn is_audio(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| AUDIO_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
}

fn sorted_entries(dir: &Path) -> Result<Vec<PathBuf>> {
    let rd = std::fs::read_dir(dir).map_err(|e| DataError::io("listing", dir, e))?;
    let mut out = Vec::new();
    for entry in rd {
        let entry = entry.map_err(|e| DataError::io("listing", dir, e))?;
        out.push(entry.path());
    }
    out.sort();
    Ok(out)
}

fn file_stem(path: &Path) -> String {
    path.file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn scan_libritts(config: &PrepareConfig) -> Result<Vec<Candidate>> {
    let root = &config.root;
    let mut out = Vec::new();
    let groups: [(&'static str, &Vec<String>); 3] = [
        ("train", &config.train_subsets),
        ("dev", &config.dev_subsets),
        ("test", &config.test_subsets),
    ];
    let (first, second) = match config.transcript {
        TranscriptKind::Normalized => ("normalized", "original"),
        TranscriptKind::Original => ("original", "normalized"),
    };
    for (split, subsets) in groups {
        for subset in subsets {
            let dir = root.join(subset);
            if !dir.is_dir() {
                let found: Vec<String> = sorted_entries(root)?
                    .iter()
                    .filter(|p| p.is_dir())
                    .map(|p| {
                        p.file_name()
                            .unwrap_or_default()
                            .to_string_lossy()
                            .into_owned()
                    })
                    .collect();
                return Err(DataError::Layout {
                    path: root.clone(),
                    detail: format!(
                        "subset {subset:?} not found (subsets present: {})",
                        if found.is_empty() {
                            "none".into()
                        } else {
                            found.join(", ")
                        }
                    ),
                });
            }
            for speaker_dir in sorted_entries(&dir)?.into_iter().filter(|p| p.is_dir()) {
                let speaker = speaker_dir
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                for chapter_dir in sorted_entries(&speaker_dir)?
                    .into_iter()
                    .filter(|p| p.is_dir())
                {
                    let chapter = chapter_dir
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    for audio in sorted_entries(&chapter_dir)?
                        .into_iter()
                        .filter(|p| is_audio(p))
                    {
                        let id = file_stem(&audio);
                        let transcripts = vec![
                            chapter_dir.join(format!("{id}.{first}.txt")),
                            chapter_dir.join(format!("{id}.{second}.txt")),
                        ];
                        out.push(Candidate {
                            split,
                            id,
                            speaker: speaker.clone(),
                            chapter: chapter.clone(),
                            audio,
                            transcripts,
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

/// FNV-1a of the id, finalised, mapped to [0, 1): a split assignment that never changes between runs.
fn stable_unit(id: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in id.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // FNV leaves the top bits nearly unchanged for ids that differ only at the end
    // ("x_001", "x_002"); a 64-bit finaliser spreads every input bit over them.
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn scan_plain(config: &PrepareConfig) -> Result<Vec<Candidate>> {
    let root = &config.root;
    let dir_name = root
        .file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned();
    let mut out = Vec::new();
    for audio in sorted_entries(root)?.into_iter().filter(|p| is_audio(p)) {
        let id = file_stem(&audio);
        let speaker = match id.split_once('_') {
            Some((s, _)) if !s.is_empty() => s.to_string(),
            _ => dir_name.clone(),
        };
        let u = stable_unit(&id);
        let split = if u < config.dev_fraction {
            "dev"
        } else if u < config.dev_fraction + config.test_fraction {
            "test"
        } else {
            "train"
        };
        out.push(Candidate {
            split,
            transcripts: vec![root.join(format!("{id}.txt"))],
            id,
            speaker,
            chapter: String::new(),
            audio,
        });
    }
    if out.is_empty() {
        return Err(DataError::Layout {
            path: root.clone(),
            detail: format!(
                "no audio files ({}) found in a plain-layout corpus",
                AUDIO_EXTENSIONS.join(", ")
            ),
        });
    }
    Ok(out)
}

/// What checking one candidate gave: the utterance or why it was skipped, and a TextGrid that
/// was found but not used.
struct Checked {
    result: std::result::Result<Utterance, Skipped>,
    issue: Option<AlignmentIssue>,
}

fn check_candidate(c: Candidate, config: &PrepareConfig) -> Result<Checked> {
    let skip = |reason, detail: String| {
        Ok(Checked {
            result: Err(Skipped {
                path: c.audio.clone(),
                reason,
                detail,
            }),
            issue: None,
        })
    };
    let Some(transcript) = c.transcripts.iter().find(|p| p.is_file()) else {
        return skip(
            SkipReason::NoTranscript,
            format!("none of {:?}", c.transcripts),
        );
    };
    let text = match std::fs::read(transcript) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).trim().to_string(),
        Err(e) => {
            return skip(
                SkipReason::NoTranscript,
                format!("{}: {e}", transcript.display()),
            );
        }
    };
    if text.is_empty() {
        return skip(
            SkipReason::EmptyTranscript,
            transcript.display().to_string(),
        );
    }
    let info = if config.verify_audio {
        voxspec_audio::load_with_info(&c.audio).map(|(info, audio)| (audio.duration_secs(), info))
    } else {
        voxspec_audio::probe(&c.audio).map(|info| (info.duration_secs(), info))
    };
    let (duration, info) = match info {
        Ok(x) => x,
        Err(voxspec_audio::AudioError::Empty { .. }) => {
            return skip(SkipReason::EmptyAudio, "no samples".into());
        }
        Err(e) => return skip(SkipReason::UnreadableAudio, e.to_string()),
    };
    if duration <= 0.0 {
        return skip(SkipReason::EmptyAudio, "no samples".into());
    }
    if duration < config.min_duration {
        return skip(SkipReason::TooShort, format!("{duration:.3} s"));
    }
    if duration > config.max_duration {
        return skip(SkipReason::TooLong, format!("{duration:.3} s"));
    }
    let mut alignment = None;
    let mut issue = None;
    if let Some(textgrid) = find_textgrid(
        &c.audio,
        &c.id,
        &c.speaker,
        &c.chapter,
        config.alignments.as_deref(),
    ) {
        let a = read_textgrid(&textgrid)?;
        if (a.end() - duration).abs() > ALIGNMENT_TOLERANCE_S {
            issue = Some(AlignmentIssue {
                detail: format!(
                    "ends at {:.3} s, the audio {} lasts {duration:.3} s",
                    a.end(),
                    c.audio.display()
                ),
                textgrid,
            });
        } else {
            alignment = Some(a);
        }
    }
    Ok(Checked {
        result: Ok(Utterance {
            id: c.id,
            speaker: c.speaker,
            chapter: c.chapter,
            path: c.audio.to_string_lossy().into_owned(),
            text,
            duration,
            sample_rate: info.sample_rate,
            alignment,
        }),
        issue,
    })
}
