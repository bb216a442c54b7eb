//! Long texts on the server: a request whose text has several sentences is spoken sentence by
//! sentence — the text is cut into sentences (`voxspec_data::sentences`), and just before a
//! sentence is spoken the worker plans it ([`voxspec_tts::AnyPipeline::plan_pieces`]: the
//! sentence, or its clauses when its request would not fit the model's context). Each piece runs
//! as its own request in order (piece `i` with seed `seed + i`, the rule of `voxspec
//! synthesize`), and the pieces are joined with the pauses of [`crate::Defaults::long_form`].
//! Planning one sentence at a time keeps the first audio of a long text as early as a short
//! one's; a streamed response starts with the first piece's first chunk, and the next piece is
//! submitted when the one before has finished, so a long text holds one batch slot at a time.
//!
//! A text of one sentence goes through unchanged (planned whole), so its audio equals the
//! one-request synthesis.

use tokio::sync::{mpsc as chunks, oneshot};
use voxspec_data::sentences::split_sentences;

use crate::api::SpeechRequest;
use crate::error::ApiError;
use crate::worker::{Job, Reply, Speech, Synthesizer};

type ChunkSender = chunks::UnboundedSender<Result<Vec<f32>, ApiError>>;

/// A sentence of a long text and the silence after it, seconds.
type SentencePlan = (String, f32);

impl Synthesizer {
    /// Speaks `request`'s text, sentence by sentence when it has several (see the module
    /// documentation). The response's figures (`x-ar-tokens`, ...) are the first piece's for a
    /// streamed response and the sums over the pieces for a whole one.
    ///
    /// # Errors
    /// As [`Synthesizer::synthesize`]; a piece that fails after a streamed response has
    /// started ends its stream with the error.
    pub async fn synthesize_text(&self, request: SpeechRequest) -> Result<Reply, ApiError> {
        let sentences = split_sentences(&request.input);
        if sentences.len() <= 1 {
            // One sentence: planned whole (its clauses when it is too long for the context).
            let pieces = self.plan(request.clone()).await?;
            if pieces.len() <= 1 {
                return self.synthesize(request).await;
            }
        }
        let n = sentences.len();
        let plans: Vec<SentencePlan> = sentences
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                let pause = self.long_form.pause_after(&s, i + 1 == n);
                (s.text, pause)
            })
            .collect();
        let speaker = Speaker {
            synth: self.clone(),
            request,
            next_seed: 0,
        };
        if speaker.request.stream {
            speaker.stream(plans).await
        } else {
            speaker.whole(plans).await
        }
    }

    /// The pieces of `request`'s text, planned by the worker.
    async fn plan(&self, request: SpeechRequest) -> Result<Vec<voxspec_tts::TextPiece>, ApiError> {
        let (reply, answer) = oneshot::channel();
        if self.jobs.send(Job::Plan { request, reply }).is_err() {
            return Err(ApiError::unavailable("the synthesis worker has stopped"));
        }
        answer
            .await
            .map_err(|_| ApiError::unavailable("the synthesis worker has stopped"))?
    }
}

/// Speaks the sentences of one long request in order.
struct Speaker {
    synth: Synthesizer,
    /// The original request (its text, voice, decoder, sampler, format).
    request: SpeechRequest,
    /// Pieces spoken so far: the next piece's seed offset.
    next_seed: u64,
}

impl Speaker {
    /// The requests of one sentence's pieces with the silence after each.
    async fn pieces(
        &mut self,
        (text, pause): &SentencePlan,
    ) -> Result<Vec<(SpeechRequest, f32)>, ApiError> {
        let sentence = SpeechRequest {
            input: text.clone(),
            ..self.request.clone()
        };
        let pieces = self.synth.plan(sentence).await?;
        let last = pieces.len().saturating_sub(1);
        let seed = self.request.seed.unwrap_or(0);
        let mut out = Vec::with_capacity(pieces.len());
        for (i, piece) in pieces.into_iter().enumerate() {
            let sub = SpeechRequest {
                input: piece.text,
                seed: Some(seed.wrapping_add(self.next_seed)),
                ..self.request.clone()
            };
            self.next_seed += 1;
            out.push((sub, if i == last { *pause } else { piece.pause }));
        }
        Ok(out)
    }

    /// One whole response: the pieces' samples and pauses, the figures summed.
    async fn whole(mut self, plans: Vec<SentencePlan>) -> Result<Reply, ApiError> {
        let mut total: Option<Speech> = None;
        for plan in &plans {
            for (sub, pause) in self.pieces(plan).await? {
                let speech = match self.synth.synthesize(sub).await? {
                    Reply::Whole(speech) => speech,
                    Reply::Stream(..) => {
                        return Err(ApiError::internal(
                            "a whole request was answered with a stream",
                        ));
                    }
                };
                let silence = pause_samples(pause, speech.sample_rate);
                match &mut total {
                    None => {
                        let mut first = speech;
                        first.samples.resize(first.samples.len() + silence, 0.0);
                        total = Some(first);
                    }
                    Some(t) => {
                        t.samples.extend_from_slice(&speech.samples);
                        t.samples.resize(t.samples.len() + silence, 0.0);
                        t.tokens += speech.tokens;
                        t.forwards += speech.forwards;
                        t.drafted += speech.drafted;
                        t.accepted += speech.accepted;
                        t.batch = t.batch.max(speech.batch);
                    }
                }
            }
        }
        total
            .map(Reply::Whole)
            .ok_or_else(|| ApiError::internal("the text had no piece"))
    }

    /// One streamed response: the first piece's stream now, the rest planned, spoken and
    /// forwarded in order by a task.
    async fn stream(mut self, plans: Vec<SentencePlan>) -> Result<Reply, ApiError> {
        let mut plans = plans.into_iter();
        let Some(first_plan) = plans.next() else {
            return Err(ApiError::internal("the text had no piece"));
        };
        let mut first_pieces = self.pieces(&first_plan).await?.into_iter();
        let Some((first, first_pause)) = first_pieces.next() else {
            return Err(ApiError::internal("the first sentence had no piece"));
        };
        let (speech, first_chunks) = as_stream(self.synth.synthesize(first).await?);
        let rate = speech.sample_rate;
        let (tx, rx) = chunks::unbounded_channel();
        let rest: Vec<(SpeechRequest, f32)> = first_pieces.collect();
        tokio::spawn(async move {
            if !forward(first_chunks, &tx, pause_samples(first_pause, rate)).await {
                return;
            }
            if !self.speak(rest, &tx, rate).await {
                return;
            }
            for plan in plans {
                let pieces = match self.pieces(&plan).await {
                    Ok(pieces) => pieces,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if !self.speak(pieces, &tx, rate).await {
                    return;
                }
            }
        });
        Ok(Reply::Stream(speech, rx))
    }

    /// Speaks `pieces` in order into `tx`; false when one failed (its error was passed on) or
    /// the client has gone.
    async fn speak(&self, pieces: Vec<(SpeechRequest, f32)>, tx: &ChunkSender, rate: u32) -> bool {
        for (sub, pause) in pieces {
            let piece = match self.synth.synthesize(sub).await {
                Ok(reply) => as_stream(reply).1,
                Err(e) => {
                    let _ = tx.send(Err(e));
                    return false;
                }
            };
            if !forward(piece, tx, pause_samples(pause, rate)).await {
                return false;
            }
        }
        true
    }
}

/// A reply as a stream of chunks (a whole reply is one chunk).
fn as_stream(
    reply: Reply,
) -> (
    Speech,
    chunks::UnboundedReceiver<Result<Vec<f32>, ApiError>>,
) {
    match reply {
        Reply::Stream(speech, chunks) => (speech, chunks),
        Reply::Whole(speech) => {
            let (tx, rx) = chunks::unbounded_channel();
            let _ = tx.send(Ok(speech.samples.clone()));
            (speech, rx)
        }
    }
}

/// Sends every chunk of `piece` on, then `silence` zero samples; false when the piece failed
/// (its error was passed on) or the client has gone.
async fn forward(
    mut piece: chunks::UnboundedReceiver<Result<Vec<f32>, ApiError>>,
    tx: &ChunkSender,
    silence: usize,
) -> bool {
    while let Some(item) = piece.recv().await {
        let failed = item.is_err();
        if tx.send(item).is_err() || failed {
            return false;
        }
    }
    silence == 0 || tx.send(Ok(vec![0.0; silence])).is_ok()
}

/// Samples of `seconds` of silence at `rate`.
fn pause_samples(seconds: f32, rate: u32) -> usize {
    (seconds.max(0.0) * rate as f32).round() as usize
}
