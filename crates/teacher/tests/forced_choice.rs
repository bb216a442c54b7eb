//! Forced-choice sentence identification with the shipped CTC teacher
//! (`checkpoints/ctc-minitts`) on the 60 test-clean utterances of `datasets/minitts`, against
//! negative controls that must score at chance: white noise, silence, and the original
//! recordings paired with a derangement of their transcripts.
//!
//! The chance bound: a clip that carries no information about its sentence is identified with
//! probability at most `1/60` (ties count against), so over 60 independent clips the count is
//! at most Binomial(60, 1/60); the tests allow its 99.9 % quantile (5 clips).
//!
//! Run with `--nocapture` to see the measured numbers.

use std::path::{Path, PathBuf};

use burn::tensor::Device;
use voxspec_teacher::SemanticTeacher;
use voxspec_teacher::ctc::{CtcTeacher, ForcedChoice, ForcedChoiceSummary, LengthNorm};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shipped teacher on the CPU.
fn teacher() -> CtcTeacher {
    CtcTeacher::load(root().join("checkpoints/ctc-minitts"), &Device::flex())
        .expect("the shipped teacher checkpoints/ctc-minitts loads")
}

/// `(id, waveform at 16 kHz, normalized transcript)` of every test-clean utterance, by id.
fn test_clean(rate: u32) -> Vec<(String, Vec<f32>, String)> {
    let mut files = Vec::new();
    let mut stack = vec![root().join("datasets/minitts/test-clean")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "flac") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let id = path.file_stem().unwrap().to_string_lossy().into_owned();
            let text = std::fs::read_to_string(path.with_file_name(format!("{id}.normalized.txt")))
                .unwrap();
            let wave = voxspec_audio::load_resampled(&path, rate).unwrap().samples;
            (id, wave, text)
        })
        .collect()
}

/// Smallest `k` with `P(X ≤ k) ≥ q` for `X ~ Binomial(n, p)`.
fn binomial_quantile(n: usize, p: f64, q: f64) -> usize {
    let mut cdf = 0.0;
    for k in 0..=n {
        let log_choose: f64 = (0..k)
            .map(|i| ((n - i) as f64).ln() - ((i + 1) as f64).ln())
            .sum();
        cdf += (log_choose + k as f64 * p.ln() + (n - k) as f64 * (1.0 - p).ln()).exp();
        if cdf >= q {
            return k;
        }
    }
    n
}

/// Both scoring rules: the chance bound must hold whichever is chosen.
const NORMS: [LengthNorm; 2] = [LengthNorm::None, LengthNorm::PerLabel];

/// Scores `waves`, clip `b` claiming candidate `own[b]`, in batches of 8.
fn run(
    teacher: &CtcTeacher,
    set: &ForcedChoice,
    waves: &[Vec<f32>],
    own: &[usize],
) -> ForcedChoiceSummary {
    let mut verdicts = Vec::new();
    for (w, o) in waves.chunks(8).zip(own.chunks(8)) {
        let refs: Vec<&[f32]> = w.iter().map(Vec::as_slice).collect();
        verdicts.extend(teacher.forced_choice(set, &refs, o).unwrap());
    }
    ForcedChoiceSummary::new(&verdicts, set.len())
}

/// The teacher, the clips, the candidate set (their 60 transcripts) and each clip's own index.
fn fixture() -> (CtcTeacher, Vec<Vec<f32>>, ForcedChoice, Vec<usize>) {
    let teacher = teacher();
    let clips = test_clean(teacher.sample_rate());
    assert_eq!(
        clips.len(),
        60,
        "test-clean of datasets/minitts has 60 utterances"
    );
    let set = ForcedChoice::new(
        teacher.tokenizer(),
        clips.iter().map(|c| c.2.as_str()),
        LengthNorm::default(),
    )
    .unwrap();
    assert_eq!(set.len(), 60, "the 60 transcripts are distinct");
    let own: Vec<usize> = clips
        .iter()
        .map(|c| set.position(teacher.tokenizer(), &c.2).unwrap().unwrap())
        .collect();
    let waves = clips.into_iter().map(|c| c.1).collect();
    (teacher, waves, set, own)
}

/// The largest identified count a no-information condition may reach.
fn chance_bound(clips: usize, candidates: usize) -> usize {
    binomial_quantile(clips, 1.0 / candidates as f64, 0.999)
}

fn report(name: &str, s: &ForcedChoiceSummary) {
    eprintln!(
        "{name}: identified {}/{} ({:.1} %), chance {:.1} %, mean rank {:.1}, CER {:.1} %",
        s.identified,
        s.clips,
        100.0 * s.accuracy,
        100.0 * s.chance,
        s.mean_rank,
        100.0 * s.cer
    );
}

#[test]
fn the_bound_is_the_binomial_quantile() {
    // P(X ≤ 4) = 0.9966 < 0.999 ≤ P(X ≤ 5) = 0.9994 for Binomial(60, 1/60).
    assert_eq!(chance_bound(60, 60), 5);
    assert_eq!(binomial_quantile(10, 0.5, 0.5), 5);
}

/// Measured: 60/60 per label (the default rule), 59/60 with raw log-likelihoods.
#[test]
fn originals_are_identified() {
    let (teacher, waves, set, own) = fixture();
    let per_label = run(&teacher, &set, &waves, &own);
    report("originals, log p / len", &per_label);
    let raw = run(
        &teacher,
        &set.clone().with_length_norm(LengthNorm::None),
        &waves,
        &own,
    );
    report("originals, log p", &raw);
    assert!(raw.accuracy >= 0.9, "{raw:?}");
    assert!(per_label.accuracy >= 0.9, "{per_label:?}");
    // The greedy CER of the same clips is far from perfect: the choice is the easier task.
    assert!(raw.cer > 0.1, "{raw:?}");
}

#[test]
fn white_noise_scores_at_chance() {
    let (teacher, waves, set, own) = fixture();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let noise: Vec<Vec<f32>> = waves
        .iter()
        .map(|w| {
            (0..w.len())
                .map(|_| {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    0.1 * ((state >> 40) as f32 / (1u64 << 24) as f32 - 0.5)
                })
                .collect()
        })
        .collect();
    for norm in NORMS {
        let s = run(&teacher, &set.clone().with_length_norm(norm), &noise, &own);
        report(&format!("white noise, {norm:?}"), &s);
        assert!(s.identified <= chance_bound(60, set.len()), "{s:?}");
    }
}

#[test]
fn silence_scores_at_chance() {
    let (teacher, waves, set, own) = fixture();
    let silence: Vec<Vec<f32>> = waves.iter().map(|w| vec![0.0; w.len()]).collect();
    for norm in NORMS {
        let s = run(
            &teacher,
            &set.clone().with_length_norm(norm),
            &silence,
            &own,
        );
        report(&format!("silence, {norm:?}"), &s);
        assert!(s.identified <= chance_bound(60, set.len()), "{s:?}");
    }
}

#[test]
fn deranged_transcripts_score_at_chance() {
    let (teacher, waves, set, own) = fixture();
    // Sattolo's shuffle: a uniformly random cyclic permutation, so no clip keeps its text.
    let mut perm: Vec<usize> = (0..own.len()).collect();
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for i in (1..perm.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = (state % i as u64) as usize;
        perm.swap(i, j);
    }
    let claimed: Vec<usize> = perm.iter().map(|&p| own[p]).collect();
    assert!(claimed.iter().zip(&own).all(|(c, o)| c != o));
    for norm in NORMS {
        let s = run(
            &teacher,
            &set.clone().with_length_norm(norm),
            &waves,
            &claimed,
        );
        report(&format!("deranged transcripts, {norm:?}"), &s);
        assert!(s.identified <= chance_bound(60, set.len()), "{s:?}");
    }
}
