//! Forced-choice sentence identification of clips by the CTC teacher
//! (`voxspec_teacher::ctc::forced_choice`), with the teacher's greedy CER beside it: the clips
//! (a manifest or a folder of audio files with transcripts), the candidate sentences, the
//! scoring, and the report of `voxspec eval intelligibility`.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;
use voxspec_data::{Progress, read_manifest};
use voxspec_teacher::SemanticTeacher;
use voxspec_teacher::ctc::{CtcTeacher, ForcedChoice, ForcedChoiceSummary, LengthNorm};
use voxspec_tts::AsrScore;

use crate::error::{EvalError, Result};
use crate::judge::{AsrJudge, write_candidates};

/// One-line definition written into the JSON report.
pub const INTELLIGIBILITY_DEFINITION: &str = "forced-choice sentence identification: each clip's CTC \
    log-likelihood log p(y_k | clip) under the teacher, divided by the length of y_k \
    unless length_norm is none, scores every candidate transcript y_k; a clip is identified when its own transcript scores strictly highest \
    (ties count against); accuracy = identified / clips, chance = 1 / candidates";

/// One input clip.
#[derive(Debug, Clone)]
pub struct Clip {
    /// Its id (the manifest's, or the file name without extension).
    pub id: String,
    /// The audio file.
    pub path: PathBuf,
    /// Its transcript.
    pub text: String,
}

/// One clip's line in the report.
#[derive(Debug, Clone, Serialize)]
pub struct ClipReport {
    /// The clip's id.
    pub id: String,
    /// Its audio file.
    pub path: PathBuf,
    /// Its own transcript, as the candidate set holds it (normalised).
    pub own_text: String,
    /// The candidate that scored highest.
    pub best_text: String,
    /// 1 + the other candidates scoring at least as high as the own one.
    pub rank: usize,
    /// `rank == 1`.
    pub identified: bool,
    /// Score of the own transcript.
    pub own_score: f64,
    /// Score of the best candidate.
    pub best_score: f64,
    /// The teacher's greedy transcript.
    pub hypothesis: String,
    /// Its character error rate against the own transcript.
    pub cer: f64,
}

/// The JSON report of `voxspec eval intelligibility`.
#[derive(Debug, Clone, Serialize)]
pub struct IntelligibilityReport {
    /// [`INTELLIGIBILITY_DEFINITION`].
    pub measure: &'static str,
    /// The CTC teacher's directory.
    pub teacher: PathBuf,
    /// The manifest or folder of the clips.
    pub input: PathBuf,
    /// Where the candidates came from, in words.
    pub candidates_from: String,
    /// How candidate scores were normalised for length.
    pub length_norm: LengthNorm,
    /// Accuracy, chance and CER over the clips.
    pub summary: ForcedChoiceSummary,
    /// The independent recogniser on the same clips and candidates, when it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub asr: Option<AsrScore>,
    /// One line per clip.
    pub clips: Vec<ClipReport>,
}

/// The clips of a manifest (JSON lines with id, path, text).
///
/// # Errors
/// [`EvalError::Context`] naming the manifest when it cannot be read.
pub fn manifest_clips(manifest: &Path) -> Result<Vec<Clip>> {
    let utterances = read_manifest(manifest).map_err(|e| {
        EvalError::from(e).context(format!("reading the manifest {}", manifest.display()))
    })?;
    Ok(utterances
        .into_iter()
        .map(|u| Clip {
            id: u.id,
            path: PathBuf::from(u.path),
            text: u.text,
        })
        .collect())
}

/// The clips of a directory: every audio file (wav, flac, mp3, ogg) with a `<name>.txt`
/// transcript beside it, by name.
///
/// # Errors
/// [`EvalError::Io`] when the directory cannot be listed; [`EvalError::Input`] when it holds
/// no audio file or an audio file has no readable transcript.
pub fn read_dir_clips(dir: &Path) -> Result<Vec<Clip>> {
    const AUDIO: [&str; 4] = ["wav", "flac", "mp3", "ogg"];
    let listing = |e| EvalError::io("reading the directory", dir, e);
    let mut audio = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(listing)? {
        let path = entry.map_err(listing)?.path();
        let is_audio = path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| AUDIO.contains(&e.to_ascii_lowercase().as_str()));
        if is_audio && path.is_file() {
            audio.push(path);
        }
    }
    audio.sort();
    if audio.is_empty() {
        return Err(EvalError::input(format!(
            "{} has no audio files ({})",
            dir.display(),
            AUDIO.join(", ")
        )));
    }
    audio
        .into_iter()
        .map(|path| {
            let transcript = path.with_extension("txt");
            let text = std::fs::read_to_string(&transcript).map_err(|e| {
                EvalError::input(format!(
                    "{} has no readable transcript {}: {e}",
                    path.display(),
                    transcript.display()
                ))
            })?;
            let id = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            Ok(Clip {
                id,
                path,
                text: text.trim().to_string(),
            })
        })
        .collect()
}

/// Candidate sentences from a manifest (`*.jsonl`, its texts) or a text file, one per
/// non-empty line.
///
/// # Errors
/// [`EvalError::Context`] naming the file when it cannot be read.
pub fn read_candidates(path: &Path) -> Result<Vec<String>> {
    if path.extension().is_some_and(|e| e == "jsonl") {
        return Ok(read_manifest(path)
            .map_err(|e| {
                EvalError::from(e)
                    .context(format!("reading the candidate manifest {}", path.display()))
            })?
            .into_iter()
            .map(|u| u.text)
            .collect());
    }
    let text = std::fs::read_to_string(path)
        .map_err(|e| EvalError::io("reading the candidates", path, e))?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(String::from)
        .collect())
}

/// The outcome of [`identify_clips`].
#[derive(Debug, Clone)]
pub struct Identification {
    /// How candidate scores were normalised for length.
    pub length_norm: LengthNorm,
    /// Accuracy, chance and CER over the clips.
    pub summary: ForcedChoiceSummary,
    /// One line per clip, in input order.
    pub clips: Vec<ClipReport>,
}

impl Identification {
    /// The summary as a markdown table, after an empty line: clips, candidates, identified,
    /// accuracy and chance (%), mean rank, CER (%).
    pub fn table(&self) -> String {
        let s = &self.summary;
        format!(
            "\n| clips | candidates | identified | accuracy (%) | chance (%) | mean rank | CER (%) |\n\
             |---:|---:|---:|---:|---:|---:|---:|\n\
             | {} | {} | {} | {:.1} | {:.1} | {:.1} | {:.1} |\n",
            s.clips,
            s.candidates,
            s.identified,
            100.0 * s.accuracy,
            100.0 * s.chance,
            s.mean_rank,
            100.0 * s.cer
        )
    }

    /// The first `show` misidentified clips with their rank, own and best text, after an
    /// empty line and a heading; empty when every clip was identified or `show` is 0.
    pub fn misidentified(&self, show: usize) -> String {
        let missed: Vec<&ClipReport> = self.clips.iter().filter(|c| !c.identified).collect();
        if missed.is_empty() || show == 0 {
            return String::new();
        }
        let mut s = format!("\nmisidentified ({} clips, first {show}):\n", missed.len());
        for c in missed.iter().take(show) {
            s.push_str(&format!(
                "  {} (rank {}):\n    own:  {}\n    best: {}\n",
                c.id, c.rank, c.own_text, c.best_text
            ));
        }
        s
    }
}

/// Scores every clip against the candidate sentences `texts` (`from` says where they came
/// from, for messages), `batch` clips per teacher forward; `progress` sees one unit per clip.
///
/// # Errors
/// [`EvalError::Context`] when the candidate set cannot be built, or naming the clip whose
/// transcript is not a candidate, whose audio cannot be read, or the batch that cannot be
/// scored; [`EvalError::Input`] for a zero `batch`.
pub fn identify_clips(
    teacher: &CtcTeacher,
    texts: &[String],
    from: &str,
    length_norm: LengthNorm,
    clips: Vec<Clip>,
    batch: usize,
    progress: &dyn Progress,
) -> Result<Identification> {
    if batch == 0 {
        return Err(EvalError::input("the batch must hold at least one clip"));
    }
    let set = ForcedChoice::new(
        teacher.tokenizer(),
        texts.iter().map(String::as_str),
        length_norm,
    )
    .map_err(|e| EvalError::from(e).context(format!("building the candidate set from {from}")))?;
    let own = own_indices(&set, teacher, &clips, from)?;
    let rate = teacher.sample_rate();
    progress.start(clips.len() as u64, "identifying");
    let mut verdicts = Vec::with_capacity(clips.len());
    for (chunk, own) in clips.chunks(batch).zip(own.chunks(batch)) {
        let waves = chunk
            .par_iter()
            .map(|c| {
                voxspec_audio::load_resampled(&c.path, rate)
                    .map(|a| a.samples)
                    .map_err(|e| {
                        EvalError::from(e).context(format!("clip {} ({})", c.id, c.path.display()))
                    })
            })
            .collect::<Result<Vec<_>>>()?;
        let refs: Vec<&[f32]> = waves.iter().map(Vec::as_slice).collect();
        let ids: Vec<&str> = chunk.iter().map(|c| c.id.as_str()).collect();
        verdicts.extend(teacher.forced_choice(&set, &refs, own).map_err(|e| {
            EvalError::from(e).context(format!("scoring the clips {}", ids.join(", ")))
        })?);
        progress.inc(chunk.len() as u64);
    }
    progress.finish();

    let summary = ForcedChoiceSummary::new(&verdicts, set.len());
    let text = |i: usize| set.text(i).unwrap_or_default().to_string();
    let clips = clips
        .into_iter()
        .zip(verdicts)
        .map(|(c, v)| ClipReport {
            id: c.id,
            path: c.path,
            own_text: text(v.choice.own),
            best_text: text(v.choice.best),
            rank: v.choice.rank,
            identified: v.choice.identified,
            own_score: v.choice.own_score,
            best_score: v.choice.best_score,
            hypothesis: v.hypothesis,
            cer: v.errors.rate(),
        })
        .collect();
    Ok(Identification {
        length_norm: set.length_norm(),
        summary,
        clips,
    })
}

/// Each clip's index in `set`, refusing a clip whose transcript is not a candidate.
fn own_indices(
    set: &ForcedChoice,
    teacher: &CtcTeacher,
    clips: &[Clip],
    from: &str,
) -> Result<Vec<usize>> {
    clips
        .iter()
        .map(|c| {
            set.position(teacher.tokenizer(), &c.text)?.ok_or_else(|| {
                EvalError::input(format!(
                    "clip {} ({}): its transcript {:?} is not among the {} candidates of {from} \
                     (compared after the teacher's normalisation)",
                    c.id,
                    c.path.display(),
                    c.text,
                    set.len()
                ))
            })
        })
        .collect()
}

/// The independent recogniser on the clips of `input` (a manifest when `manifest`, else a
/// folder of clips with transcripts) against the candidate sentences `texts`, its files in a
/// temporary folder.
///
/// # Errors
/// [`EvalError::Io`] when the temporary folder cannot be made; [`EvalError::Judge`] when the
/// recogniser fails; as [`write_candidates`].
pub fn score_clips_independently(
    judge: &AsrJudge,
    input: &Path,
    manifest: bool,
    texts: &[String],
    jobs: usize,
) -> Result<AsrScore> {
    let tmp = tempfile::tempdir()
        .map_err(|e| EvalError::io("making a temporary folder in", std::env::temp_dir(), e))?;
    let candidates = tmp.path().join("candidates.txt");
    write_candidates(&candidates, texts.iter().map(String::as_str))?;
    let report = tmp.path().join("asr.json");
    if manifest {
        judge.score_manifest(input, &candidates, &report, jobs)
    } else {
        judge.score_dir(input, &candidates, &report, jobs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(id: &str, rank: usize) -> ClipReport {
        ClipReport {
            id: id.into(),
            path: PathBuf::from(format!("{id}.wav")),
            own_text: "own".into(),
            best_text: "best".into(),
            rank,
            identified: rank == 1,
            own_score: -1.0,
            best_score: -0.5,
            hypothesis: String::new(),
            cer: 0.0,
        }
    }

    #[test]
    fn a_folder_needs_a_transcript_beside_each_clip() {
        let dir = tempfile::tempdir().unwrap();
        let audio = voxspec_audio::Audio::new(vec![0.0; 160], 16_000);
        for name in ["b", "a"] {
            let wav = dir.path().join(format!("{name}.wav"));
            voxspec_audio::write_wav(&wav, &audio, voxspec_audio::WavFormat::Pcm16).unwrap();
        }
        std::fs::write(dir.path().join("a.txt"), " hello \n").unwrap();
        std::fs::write(dir.path().join("b.txt"), "world").unwrap();
        let clips = read_dir_clips(dir.path()).unwrap();
        let ids: Vec<&str> = clips.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(clips[0].text, "hello");

        std::fs::remove_file(dir.path().join("b.txt")).unwrap();
        let err = read_dir_clips(dir.path()).unwrap_err().to_string();
        assert!(err.contains("b.txt"), "{err}");
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            read_dir_clips(empty.path()),
            Err(EvalError::Input { .. })
        ));
    }

    #[test]
    fn candidates_are_the_non_empty_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.txt");
        std::fs::write(&path, "one\n\n  two  \n").unwrap();
        assert_eq!(read_candidates(&path).unwrap(), ["one", "two"]);
    }

    #[test]
    fn the_summary_lists_the_misidentified_clips() {
        let found = Identification {
            length_norm: LengthNorm::PerLabel,
            summary: ForcedChoiceSummary {
                clips: 3,
                candidates: 4,
                identified: 1,
                ..ForcedChoiceSummary::default()
            },
            clips: vec![report("x", 1), report("y", 2), report("z", 3)],
        };
        let table = found.table();
        assert!(table.starts_with("\n| clips | candidates |"), "{table}");
        assert!(
            table.ends_with("| 3 | 4 | 1 | 0.0 | 0.0 | 0.0 | 0.0 |\n"),
            "{table}"
        );
        let missed = found.misidentified(1);
        assert_eq!(
            missed,
            "\nmisidentified (2 clips, first 1):\n  y (rank 2):\n    own:  own\n    best: best\n"
        );
        assert_eq!(found.misidentified(0), "");
    }
}
