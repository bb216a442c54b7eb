//! Greedy autoregressive decoding of the multi-stream LM: one cached forward per delayed step,
//! every stream chosen in parallel from its own head.
//!
//! ```text
//! prefill:  voice, text, steps 0 … P (step 0 = S in every stream; steps ≤ P hold only prompt
//!           frames or S), one forward
//! step s:   stream j holds frame f = s − 1 − delay_j:
//!             f < 0, or f ≥ T once the end is known      → S (forced)
//!             f < P                                       → the prompt's code (never overwritten)
//!             otherwise                                   → argmax of head j (stream 0 over the
//!                                                           codes and EOS; EOS fixes T = f)
//! stop:     after step T + max_delay (every stream has its T frames), T = the frame of stream
//!           0's EOS or max_frames; the delayed layout is then reverted to [K][T]
//! ```

use voxspec_data::UNGENERATED;

use crate::align::StepTrack;
use crate::error::{MultiStreamError, Result};
use crate::input::SeqRow;
use crate::model::{MultiStreamConfig, MultiStreamModel};

/// What to decode.
#[derive(Debug, Clone, Copy)]
pub struct DecodeRequest<'a> {
    /// Text token ids.
    pub text: &'a [u32],
    /// The global (voice) vector, for a model with `global_dim`.
    pub voice: Option<&'a [f32]>,
    /// Acoustic prompt codes `[streams][P]` continued by the decoder (empty: none).
    pub prompt: &'a [Vec<u32>],
    /// Largest number of frames (prompt included) when stream 0 predicts no EOS.
    pub max_frames: usize,
    /// Aligned models: each text token's duration in track units (`None`: the model's
    /// duration predictor decides). Ignored by unaligned models.
    pub durations: Option<&'a [u32]>,
}

/// The step track of a request for an aligned model (`None` for an unaligned one).
///
/// # Errors
/// [`MultiStreamError::InvalidInput`] for durations that do not match the text; the duration
/// predictor's errors.
pub fn request_track(
    model: &MultiStreamModel,
    config: &MultiStreamConfig,
    text: &[u32],
    durations: Option<&[u32]>,
) -> Result<Option<StepTrack>> {
    let Some(align) = &config.align else {
        return Ok(None);
    };
    let units = match (durations, &model.duration) {
        (Some(d), _) => d.to_vec(),
        (None, Some(predictor)) => {
            predictor
                .predict(text, 1.0)
                .map_err(|e| MultiStreamError::InvalidInput {
                    detail: format!("duration prediction: {e}"),
                })?
        }
        (None, None) => {
            return Err(MultiStreamError::InvalidInput {
                detail: "an aligned model without a duration predictor needs durations".into(),
            });
        }
    };
    if units.len() != text.len() {
        return Err(MultiStreamError::InvalidInput {
            detail: format!("{} durations for {} text tokens", units.len(), text.len()),
        });
    }
    Ok(Some(StepTrack::new(text, &units, align)))
}

/// Index of the largest value (the first on ties).
fn argmax(values: &[f32]) -> usize {
    let mut best = 0;
    for (i, &v) in values.iter().enumerate() {
        if v > values[best] {
            best = i;
        }
    }
    best
}

/// Greedy decoding of one utterance; returns its frames `[streams][T]`, the prompt's first.
///
/// # Errors
/// [`MultiStreamError::InvalidInput`] for empty text, a prompt that is not `streams` rows of one
/// length, `max_frames` not beyond the prompt, or a sequence longer than `max_seq_len`;
/// [`MultiStreamError::TokenOutOfRange`] for bad tokens; [`MultiStreamError::Readback`] when
/// logits cannot be read.
pub fn greedy_decode(
    model: &MultiStreamModel,
    config: &MultiStreamConfig,
    request: &DecodeRequest<'_>,
) -> Result<Vec<Vec<u32>>> {
    let bad = |detail: String| Err(MultiStreamError::InvalidInput { detail });
    let pattern = config.pattern()?;
    let (k, special) = (config.streams, config.special());
    let vocab = config.output_vocab();
    if request.text.is_empty() {
        return bad("the text has no tokens".into());
    }
    let prompt_frames = if request.prompt.is_empty() {
        0
    } else {
        let p = request.prompt[0].len();
        if request.prompt.len() != k || request.prompt.iter().any(|s| s.len() != p) {
            return bad(format!(
                "prompt of lengths {:?}; {k} streams of one length expected",
                request.prompt.iter().map(Vec::len).collect::<Vec<_>>()
            ));
        }
        if let Some(&c) = request.prompt.iter().flatten().find(|&&c| c >= special) {
            return Err(MultiStreamError::TokenOutOfRange {
                what: "code",
                token: c,
                vocab: config.codebook_size,
            });
        }
        p
    };
    if request.max_frames <= prompt_frames {
        return bad(format!(
            "max_frames {} leaves nothing to generate after a prompt of {prompt_frames}",
            request.max_frames
        ));
    }
    let max_steps = pattern.steps(request.max_frames);
    let capacity = config.voice_positions() + request.text.len() + max_steps;
    if capacity > model.transformer.max_seq_len() {
        return bad(format!(
            "{capacity} positions (text {} + {max_steps} steps) exceed max_seq_len {}",
            request.text.len(),
            model.transformer.max_seq_len()
        ));
    }

    // The delayed layout being filled: S, prompt codes, or UNGENERATED.
    let mut grid = vec![vec![UNGENERATED; max_steps]; k];
    for (j, row) in grid.iter_mut().enumerate() {
        for (s, slot) in row.iter_mut().enumerate() {
            *slot = match pattern.frame_at(j, s, request.max_frames) {
                None => special,
                Some(f) if f < prompt_frames => request.prompt[j][f],
                Some(_) => UNGENERATED,
            };
        }
    }
    let column = |grid: &[Vec<u32>], from: usize, to: usize| -> Vec<Vec<u32>> {
        grid.iter().map(|row| row[from..to].to_vec()).collect()
    };

    let track = request_track(model, config, request.text, request.durations)?;
    let track_ids = |from: usize, n: usize| -> Vec<u32> {
        match (&track, &config.align) {
            (Some(t), Some(a)) => t.steps(from, n, config.text_vocab, a),
            _ => Vec::new(),
        }
    };
    let mut cache = model.new_cache(1, capacity)?;
    // Steps 0 ..= P hold only S and prompt frames.
    let known = column(&grid, 0, prompt_frames + 1);
    let known_track = track_ids(0, prompt_frames + 1);
    let prefill = model.input(
        config,
        &[SeqRow {
            voice: request.voice,
            text: request.text,
            steps: &known,
            track: &known_track,
        }],
    )?;
    let mut logits = model.forward_cached(&prefill, &mut cache)?;
    let mut last = prefill.lens[0] - 1;
    let mut fed = prompt_frames; // the last step fed to the model
    let mut end: Option<usize> = None;
    loop {
        // [1, width, K, V] → the last position's [K, V]
        let scores = logits
            .narrow(1, last, 1)
            .into_data()
            .try_into_vec::<f32>()
            .map_err(|e| MultiStreamError::Readback(format!("logits: {e:?}")))?;
        let step = fed + 1;
        for j in 0..k {
            let bound = end.unwrap_or(request.max_frames);
            let token = match pattern.frame_at(j, step, request.max_frames) {
                None => special,
                Some(f) if f < prompt_frames => grid[j][step],
                Some(f) if f >= bound => special,
                Some(f) => {
                    let head = &scores[j * vocab..(j + 1) * vocab];
                    // Only stream 0 may end the utterance; the others pick a code.
                    let choice = if j == 0 {
                        argmax(head)
                    } else {
                        argmax(&head[..config.codebook_size])
                    } as u32;
                    if choice == config.eos() {
                        end = Some(f);
                        special
                    } else {
                        choice
                    }
                }
            };
            grid[j][step] = token;
        }
        let frames = end.unwrap_or(request.max_frames);
        let steps = pattern.steps(frames);
        if step + 1 >= steps {
            let delayed: Vec<Vec<u32>> = grid.iter().map(|row| row[..steps].to_vec()).collect();
            return Ok(pattern.revert(&delayed)?);
        }
        let next = column(&grid, step, step + 1);
        let next_track = track_ids(step, 1);
        let input = model.input(
            config,
            &[SeqRow {
                voice: None,
                text: &[],
                steps: &next,
                track: &next_track,
            }],
        )?;
        logits = model.forward_cached(&input, &mut cache)?;
        last = 0;
        fed = step;
    }
}
