//! Alignment of frame log-probabilities to a [`Topology`]: the forward-backward algorithm
//! (the likelihood summed over every monotonic path, and each frame's posterior over classes)
//! and the Viterbi algorithm (the single best path, as phone segments).
//!
//! A path assigns every frame to one state; states are visited in order, each for at least one
//! frame, optional states possibly not at all. Transitions are unweighted (the same "stay or
//! move on" choice as CTC without the blank), so the score of a path is the sum of its frames'
//! log-probabilities. This is the forward-sum objective of Shih et al. 2021 ("RAD-TTS") and
//! Badlani et al. 2022 ("One TTS Alignment To Rule Them All") with a hard monotonic structure
//! instead of an attention prior; its Viterbi path is their "monotonic alignment search", and
//! the algorithm of `torchaudio.functional.forced_align` without the blank.
//!
//! Everything runs in `f64` log space on the host; frames × states is small (a few hundred by
//! a few dozen per utterance).

use voxspec_teacher::ctc::log_add;

use crate::error::AlignError;
use crate::topology::Topology;

/// Checks `log_probs` is `frames × classes` and every class of `topology` is below `classes`.
fn check(
    log_probs: &[f32],
    frames: usize,
    classes: usize,
    topology: &Topology,
) -> Result<(), AlignError> {
    if frames == 0 || log_probs.len() != frames * classes {
        return Err(AlignError::input(
            "log_probs",
            format!(
                "{} values for {frames} frames × {classes} classes",
                log_probs.len()
            ),
        ));
    }
    if let Some(&c) = topology.classes.iter().find(|&&c| c as usize >= classes) {
        return Err(AlignError::input(
            "topology",
            format!("class {c} is not below the {classes} classes of log_probs"),
        ));
    }
    Ok(())
}

/// The summed likelihood of one utterance and its frame posteriors.
#[derive(Debug, Clone, PartialEq)]
pub struct Posteriors {
    /// `log p(frames | topology)` summed over paths; `−∞` when no path fits (too few frames).
    pub log_likelihood: f64,
    /// `[frames, classes]` row-major: the posterior probability that frame `t` belongs to a
    /// state of class `k`. Rows sum to one (all zero when no path fits). This is also
    /// `−∂ log_likelihood / ∂ log_probs`.
    pub occupancy: Vec<f64>,
}

/// Forward-backward over one utterance.
///
/// # Shapes
/// `log_probs: [frames, classes]` row-major (log-softmax per frame).
///
/// # Errors
/// [`AlignError::InvalidInput`] on inconsistent sizes.
pub fn forward_backward(
    log_probs: &[f32],
    frames: usize,
    classes: usize,
    topology: &Topology,
) -> Result<Posteriors, AlignError> {
    check(log_probs, frames, classes, topology)?;
    let n = topology.len();
    let ninf = f64::NEG_INFINITY;
    let emit =
        |t: usize, s: usize| f64::from(log_probs[t * classes + topology.classes[s] as usize]);
    let preds: Vec<Vec<usize>> = (0..n).map(|s| topology.predecessors(s).collect()).collect();
    let mut succs: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (s, ps) in preds.iter().enumerate() {
        for &p in ps {
            succs[p].push(s);
        }
    }

    let mut alpha = vec![ninf; frames * n];
    for (s, a) in alpha[..n].iter_mut().enumerate() {
        if topology.can_start(s) {
            *a = emit(0, s);
        }
    }
    for t in 1..frames {
        let (prev, cur) = alpha.split_at_mut(t * n);
        let prev = &prev[(t - 1) * n..];
        for s in 0..n {
            let mut acc = prev[s];
            for &p in &preds[s] {
                acc = log_add(acc, prev[p]);
            }
            if acc > ninf {
                cur[s] = acc + emit(t, s);
            }
        }
    }
    let last = &alpha[(frames - 1) * n..];
    let log_likelihood = (0..n)
        .filter(|&s| topology.can_end(s))
        .fold(ninf, |acc, s| log_add(acc, last[s]));
    let mut occupancy = vec![0.0; frames * classes];
    if log_likelihood == ninf {
        return Ok(Posteriors {
            log_likelihood,
            occupancy,
        });
    }

    let mut beta = vec![ninf; n];
    for (s, b) in beta.iter_mut().enumerate() {
        if topology.can_end(s) {
            *b = 0.0;
        }
    }
    let mut next = vec![ninf; n];
    for t in (0..frames).rev() {
        let row = &mut occupancy[t * classes..(t + 1) * classes];
        for s in 0..n {
            let g = alpha[t * n + s] + beta[s] - log_likelihood;
            if g > -700.0 {
                row[topology.classes[s] as usize] += g.exp();
            }
        }
        if t == 0 {
            break;
        }
        // β_{t-1}(s) = log Σ_{s' ∈ {s} ∪ succ(s)} β_t(s') + emit(t, s')
        for s in 0..n {
            let mut acc = beta[s] + emit(t, s);
            for &q in &succs[s] {
                acc = log_add(acc, beta[q] + emit(t, q));
            }
            next[s] = acc;
        }
        std::mem::swap(&mut beta, &mut next);
    }
    Ok(Posteriors {
        log_likelihood,
        occupancy,
    })
}

/// One visited state of the best path: frames `start..end`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// State index in the topology.
    pub state: usize,
    /// First frame.
    pub start: usize,
    /// One past the last frame.
    pub end: usize,
}

/// The best path (Viterbi) as segments, skipped optional states left out, and its score.
///
/// # Shapes
/// `log_probs: [frames, classes]` row-major.
///
/// # Errors
/// [`AlignError::InvalidInput`] on inconsistent sizes; [`AlignError::TooShort`] when the
/// utterance has fewer frames than the topology's required states.
pub fn viterbi(
    log_probs: &[f32],
    frames: usize,
    classes: usize,
    topology: &Topology,
) -> Result<(Vec<Segment>, f64), AlignError> {
    check(log_probs, frames, classes, topology)?;
    if frames < topology.min_frames() {
        return Err(AlignError::TooShort {
            frames,
            needed: topology.min_frames(),
        });
    }
    let n = topology.len();
    let ninf = f64::NEG_INFINITY;
    let emit =
        |t: usize, s: usize| f64::from(log_probs[t * classes + topology.classes[s] as usize]);
    let preds: Vec<Vec<usize>> = (0..n).map(|s| topology.predecessors(s).collect()).collect();
    let mut delta = vec![ninf; n];
    let mut back = vec![u32::MAX; frames * n];
    for s in 0..n {
        if topology.can_start(s) {
            delta[s] = emit(0, s);
            back[s] = s as u32;
        }
    }
    let mut next = vec![ninf; n];
    for t in 1..frames {
        for s in 0..n {
            // Ties prefer staying, then the nearest predecessor: deterministic.
            let (mut best, mut from) = (delta[s], s);
            for &p in &preds[s] {
                if delta[p] > best {
                    best = delta[p];
                    from = p;
                }
            }
            if best > ninf {
                next[s] = best + emit(t, s);
                back[t * n + s] = from as u32;
            } else {
                next[s] = ninf;
            }
        }
        std::mem::swap(&mut delta, &mut next);
    }
    let (mut state, mut score) = (usize::MAX, ninf);
    for (s, &d) in delta.iter().enumerate() {
        if topology.can_end(s) && d > score {
            score = d;
            state = s;
        }
    }
    if state == usize::MAX {
        return Err(AlignError::TooShort {
            frames,
            needed: topology.min_frames(),
        });
    }
    let mut path = vec![0usize; frames];
    for t in (0..frames).rev() {
        path[t] = state;
        state = back[t * n + state] as usize;
    }
    let mut segments: Vec<Segment> = Vec::new();
    for (t, &s) in path.iter().enumerate() {
        match segments.last_mut() {
            Some(seg) if seg.state == s => seg.end = t + 1,
            _ => segments.push(Segment {
                state: s,
                start: t,
                end: t + 1,
            }),
        }
    }
    Ok((segments, score))
}

/// [`viterbi`] with every phone (non-silence state) held for at least `min_frames` frames: each
/// is expanded into `min_frames` states of its class in a row (the minimum duration of an HTK-
/// or MFA-style left-to-right phone HMM), and the segments are merged back onto `topology`'s
/// states. An utterance too short for that is aligned without the minimum.
///
/// # Shapes
/// `log_probs: [frames, classes]` row-major.
///
/// # Errors
/// As [`viterbi`].
pub fn viterbi_min_frames(
    log_probs: &[f32],
    frames: usize,
    classes: usize,
    topology: &Topology,
    min_frames: usize,
) -> Result<(Vec<Segment>, f64), AlignError> {
    if min_frames <= 1 {
        return viterbi(log_probs, frames, classes, topology);
    }
    let (expanded, owner) = topology.with_min_frames(min_frames)?;
    if frames < expanded.min_frames() {
        return viterbi(log_probs, frames, classes, topology);
    }
    let (segments, score) = viterbi(log_probs, frames, classes, &expanded)?;
    let mut merged: Vec<Segment> = Vec::with_capacity(topology.len());
    for seg in segments {
        let state = owner[seg.state];
        match merged.last_mut() {
            Some(last) if last.state == state => last.end = seg.end,
            _ => merged.push(Segment { state, ..seg }),
        }
    }
    Ok((merged, score))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Log-probs that put `p` on `path[t]` at frame `t` and share the rest.
    fn peaked(path: &[u32], classes: usize, p: f64) -> Vec<f32> {
        let rest = ((1.0 - p) / (classes - 1) as f64).ln() as f32;
        let mut out = vec![rest; path.len() * classes];
        for (t, &c) in path.iter().enumerate() {
            out[t * classes + c as usize] = p.ln() as f32;
        }
        out
    }

    /// All paths of `topology` over `frames` frames, as state sequences (brute force).
    fn all_paths(topology: &Topology, frames: usize) -> Vec<Vec<usize>> {
        fn extend(t: &Topology, frames: usize, path: &mut Vec<usize>, out: &mut Vec<Vec<usize>>) {
            if path.len() == frames {
                if t.can_end(*path.last().unwrap()) {
                    out.push(path.clone());
                }
                return;
            }
            let s = *path.last().unwrap();
            let mut next = vec![s];
            next.extend((s + 1..t.len()).filter(|&q| t.predecessors(q).any(|p| p == s)));
            for q in next {
                path.push(q);
                extend(t, frames, path, out);
                path.pop();
            }
        }
        let mut out = Vec::new();
        for s in (0..topology.len()).filter(|&s| topology.can_start(s)) {
            extend(topology, frames, &mut vec![s], &mut out);
        }
        out
    }

    #[test]
    fn forward_backward_equals_brute_force() {
        let topology =
            Topology::new(vec![0, 3, 0, 5, 0], vec![true, false, true, false, true]).unwrap();
        let (frames, classes) = (6, 7);
        let lp: Vec<f32> = (0..frames * classes)
            .map(|i| -((i * 37 % 11) as f32) * 0.3 - 0.1)
            .collect();
        let post = forward_backward(&lp, frames, classes, &topology).unwrap();
        let paths = all_paths(&topology, frames);
        assert!(!paths.is_empty());
        let score = |p: &Vec<usize>| -> f64 {
            p.iter()
                .enumerate()
                .map(|(t, &s)| f64::from(lp[t * classes + topology.classes[s] as usize]))
                .sum()
        };
        let total: f64 = paths.iter().map(|p| score(p).exp()).sum();
        assert!((post.log_likelihood - total.ln()).abs() < 1e-9);
        let mut occ = vec![0.0; frames * classes];
        for p in &paths {
            let w = score(p).exp() / total;
            for (t, &s) in p.iter().enumerate() {
                occ[t * classes + topology.classes[s] as usize] += w;
            }
        }
        for (a, b) in occ.iter().zip(&post.occupancy) {
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
        // Viterbi finds the best of them
        let best = paths.iter().map(score).fold(f64::NEG_INFINITY, f64::max);
        let (_, v) = viterbi(&lp, frames, classes, &topology).unwrap();
        assert!((v - best).abs() < 1e-9);
    }

    #[test]
    fn viterbi_recovers_a_planted_path_and_skips_unused_pauses() {
        // SIL A [SIL] B SIL with frames A A A B B SIL: the optional pause is skipped.
        let topology =
            Topology::new(vec![0, 1, 0, 2, 0], vec![false, false, true, false, false]).unwrap();
        let lp = peaked(&[0, 1, 1, 1, 2, 2, 0, 0], 4, 0.9);
        let (segs, _) = viterbi(&lp, 8, 4, &topology).unwrap();
        let got: Vec<(usize, usize, usize)> =
            segs.iter().map(|s| (s.state, s.start, s.end)).collect();
        assert_eq!(got, vec![(0, 0, 1), (1, 1, 4), (3, 4, 6), (4, 6, 8)]);
        // with a pause in the audio the optional state is used
        let lp = peaked(&[0, 1, 1, 0, 0, 2, 2, 0], 4, 0.9);
        let (segs, _) = viterbi(&lp, 8, 4, &topology).unwrap();
        assert_eq!(segs.len(), 5);
        assert_eq!((segs[2].start, segs[2].end), (3, 5));
    }

    #[test]
    fn too_few_frames_is_an_error_and_an_infinite_loss() {
        let topology = Topology::required(vec![0, 1, 2, 0]).unwrap();
        let lp = peaked(&[0, 1, 2], 3, 0.5);
        assert!(matches!(
            viterbi(&lp, 3, 3, &topology),
            Err(AlignError::TooShort {
                frames: 3,
                needed: 4
            })
        ));
        let post = forward_backward(&lp, 3, 3, &topology).unwrap();
        assert_eq!(post.log_likelihood, f64::NEG_INFINITY);
        assert!(post.occupancy.iter().all(|&g| g == 0.0));
        assert!(forward_backward(&lp, 2, 3, &topology).is_err());
    }

    #[test]
    fn a_minimum_duration_lengthens_short_phones_onto_the_original_states() {
        // SIL A B SIL where the scores give B a single frame: with a 3-frame minimum B takes 3
        // frames from its neighbours, and the segments still name the four original states.
        let topology = Topology::required(vec![0, 1, 2, 0]).unwrap();
        let lp = peaked(&[0, 1, 1, 1, 1, 2, 0, 0, 0, 0], 3, 0.6);
        let (plain, _) = viterbi(&lp, 10, 3, &topology).unwrap();
        assert_eq!((plain[2].start, plain[2].end), (5, 6));
        let (held, score) = viterbi_min_frames(&lp, 10, 3, &topology, 3).unwrap();
        let states: Vec<usize> = held.iter().map(|s| s.state).collect();
        assert_eq!(states, vec![0, 1, 2, 3]);
        assert!(held[1..3].iter().all(|s| s.end - s.start >= 3), "{held:?}");
        assert_eq!(held.first().map(|s| s.start), Some(0));
        assert_eq!(held.last().map(|s| s.end), Some(10));
        assert!(held.windows(2).all(|w| w[0].end == w[1].start));
        // the constraint costs score; a minimum of 1 is plain Viterbi
        let (_, free) = viterbi(&lp, 10, 3, &topology).unwrap();
        assert!(score < free);
        assert_eq!(
            viterbi_min_frames(&lp, 10, 3, &topology, 1).unwrap().0,
            plain
        );
        // too short for the minimum (2 phones × 3 + 2 silences > 6 frames): aligned without it
        let (short, _) = viterbi_min_frames(&lp[..6 * 3], 6, 3, &topology, 3).unwrap();
        assert_eq!(short.len(), 4);
    }
}
