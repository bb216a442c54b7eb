//! Long texts — paragraphs, chapters — spoken sentence by sentence with one voice and one
//! decoder, joined by pauses.
//!
//! ```text
//! text ─ split_sentences ─► sentences ─ request (too long for the context? split_clauses) ─►
//!   pieces ─ synthesize, in order, seed + i ─► samples ⊕ pause ⊕ samples ⊕ … (each piece handed
//!   to `on_piece` as soon as it is ready)
//! ```
//!
//! A sentence keeps its own seed (`seed + index`), so the audio of a piece does not depend on
//! the pieces before it: a one-sentence text gives exactly [`Pipeline::synthesize`]'s samples.

use voxspec_data::sentences::{Sentence, split_clauses, split_sentences};
use voxspec_infer::{Decoder, Request, SamplerConfig, StopReason};
use voxspec_mtp::TtsPrompt;

use crate::engine::ArEngine;
use crate::error::{Result, TtsError};
use crate::pipeline::{Lengths, Pipeline, Synthesis, VoicePrompt};

/// Pauses between the pieces of a long text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LongForm {
    /// Silence after a sentence, seconds.
    pub sentence_pause: f32,
    /// Silence after a paragraph, seconds.
    pub paragraph_pause: f32,
    /// Silence between the clauses of a sentence split to fit the context, seconds.
    pub clause_pause: f32,
}

impl Default for LongForm {
    /// 0.35 s after a sentence, 0.8 s after a paragraph, 0.15 s between clauses.
    fn default() -> Self {
        Self {
            sentence_pause: 0.35,
            paragraph_pause: 0.8,
            clause_pause: 0.15,
        }
    }
}

impl LongForm {
    /// The silence after `sentence`: none after the text's `last` sentence, the paragraph
    /// pause after a paragraph's last sentence, else the sentence pause.
    pub fn pause_after(&self, sentence: &Sentence, last: bool) -> f32 {
        if last {
            0.0
        } else if sentence.ends_paragraph {
            self.paragraph_pause
        } else {
            self.sentence_pause
        }
    }
}

/// One piece of a long text: a sentence, or a clause of one too long for the context.
#[derive(Debug, Clone)]
pub struct Piece {
    /// Its text.
    pub text: String,
    /// Silence after it, seconds (0 after the last piece).
    pub pause: f32,
    /// Its token ids.
    pub ids: Vec<u32>,
    /// Its AR request (seed = the text's seed + the piece's index).
    pub request: Request<TtsPrompt>,
}

/// What one piece gave.
#[derive(Debug, Clone)]
pub struct SpokenPiece {
    /// Its text.
    pub text: String,
    /// First sample of its audio in [`LongSynthesis::samples`].
    pub start: usize,
    /// Samples of its audio (the pause after it excluded).
    pub len: usize,
    /// Codes the AR stage generated.
    pub codes: usize,
    /// Why its AR stage stopped.
    pub stop: StopReason,
    /// Target forwards of its AR stage.
    pub forwards: usize,
    /// Wall time of its AR stage, seconds.
    pub ar_seconds: f64,
    /// Wall time of its NAR stage and codec decoder, seconds.
    pub rest_seconds: f64,
}

/// A long text's audio and its pieces.
#[derive(Debug, Clone)]
pub struct LongSynthesis {
    /// The whole waveform at [`Pipeline::sample_rate`].
    pub samples: Vec<f32>,
    /// The pieces, in order.
    pub pieces: Vec<SpokenPiece>,
}

impl Pipeline {
    /// Cuts `text` into the pieces the AR model speaks one at a time (sentences, and clauses of
    /// a sentence whose request would not fit the context) with their requests.
    ///
    /// # Errors
    /// [`TtsError::Text`] for a text with nothing to speak or characters the tokenizer cannot
    /// read (naming the sentence); [`TtsError::TooLong`] for a single word that does not fit.
    pub fn plan_text(
        &self,
        text: &str,
        prompt: Option<&VoicePrompt>,
        lengths: &Lengths,
        config: &LongForm,
        seed: u64,
    ) -> Result<Vec<Piece>> {
        let sentences = split_sentences(text);
        if sentences.is_empty() {
            return Err(TtsError::Text("the text has nothing to speak".into()));
        }
        let mut pieces: Vec<Piece> = Vec::new();
        for (i, sentence) in sentences.iter().enumerate() {
            let first = pieces.len();
            self.plan_piece(&sentence.text, prompt, lengths, config, seed, &mut pieces)?;
            if pieces.len() > first
                && let Some(last) = pieces.last_mut()
            {
                last.pause = config.pause_after(sentence, i + 1 == sentences.len());
            }
        }
        Ok(pieces)
    }

    /// Appends `text` as one piece, or (too long for the context) its clauses, recursively.
    fn plan_piece(
        &self,
        text: &str,
        prompt: Option<&VoicePrompt>,
        lengths: &Lengths,
        config: &LongForm,
        seed: u64,
        pieces: &mut Vec<Piece>,
    ) -> Result<()> {
        let ids = self
            .text_ids(text)
            .map_err(|e| TtsError::Text(format!("{e} (in {text:?})")))?;
        match self.request(&ids, prompt, lengths, seed + pieces.len() as u64) {
            Ok(request) => {
                pieces.push(Piece {
                    text: text.to_string(),
                    pause: config.clause_pause,
                    ids,
                    request,
                });
                Ok(())
            }
            Err(TtsError::TooLong(reason)) => {
                let chars = text.chars().count();
                let halves = split_clauses(text, chars.div_ceil(2));
                if halves.len() < 2 {
                    return Err(TtsError::TooLong(format!("{reason} (in {text:?})")));
                }
                for half in &halves {
                    self.plan_piece(half, prompt, lengths, config, seed, pieces)?;
                }
                Ok(())
            }
            Err(other) => Err(other),
        }
    }

    /// Speaks a long text: [`Pipeline::plan_text`], then each piece in order through `decoder`,
    /// joined by the pauses of `config`. `on_piece` receives each piece's samples followed by
    /// its pause as soon as they are ready (a stream of the whole text, piece by piece).
    ///
    /// # Errors
    /// Those of [`Pipeline::plan_text`] and [`Pipeline::synthesize`], and `on_piece`'s.
    #[allow(clippy::too_many_arguments)]
    pub fn synthesize_text(
        &self,
        decoder: &mut dyn Decoder<ArEngine>,
        text: &str,
        prompt: Option<&VoicePrompt>,
        lengths: &Lengths,
        sampler: &SamplerConfig,
        seed: u64,
        config: &LongForm,
        on_piece: &mut dyn FnMut(&[f32]) -> Result<()>,
    ) -> Result<LongSynthesis> {
        let plan = self.plan_text(text, prompt, lengths, config, seed)?;
        let rate = self.sample_rate() as f32;
        let mut samples = Vec::new();
        let mut pieces = Vec::with_capacity(plan.len());
        for piece in plan {
            let Synthesis {
                generation,
                ar_seconds,
                rest_seconds,
                samples: audio,
            } = self.synthesize(decoder, &piece.request, &piece.ids, prompt, sampler)?;
            let start = samples.len();
            samples.extend_from_slice(&audio);
            let silence = (piece.pause.max(0.0) * rate).round() as usize;
            samples.resize(samples.len() + silence, 0.0);
            on_piece(&samples[start..])?;
            pieces.push(SpokenPiece {
                text: piece.text,
                start,
                len: audio.len(),
                codes: generation.tokens.len(),
                stop: generation.stop,
                forwards: generation.stats.target_forwards,
                ar_seconds,
                rest_seconds,
            });
        }
        Ok(LongSynthesis { samples, pieces })
    }
}
