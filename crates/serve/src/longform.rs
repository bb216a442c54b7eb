//! Long texts on the server: a request whose text has several sentences is spoken piece by
//! piece — the worker plans the pieces ([`voxspec_tts::AnyPipeline::plan_pieces`]: sentences,
//! clauses of one too long for the model), each piece runs as its own request in order (piece
//! `i` with seed `seed + i`, the rule of `voxspec synthesize`), and the pieces are joined with
//! the pauses of [`crate::Defaults::long_form`]. A streamed response starts with the first
//! piece's first chunk; the next piece is submitted when the one before has finished, so on a
//! busy server a long text does not hold more than one batch slot at a time.
//!
//! A text of one piece goes through unchanged, so its audio equals the one-request synthesis.

use tokio::sync::{mpsc as chunks, oneshot};

use crate::api::SpeechRequest;
use crate::error::ApiError;
use crate::worker::{Job, Reply, Speech, Synthesizer};

type ChunkSender = chunks::UnboundedSender<Result<Vec<f32>, ApiError>>;

impl Synthesizer {
    /// Speaks `request`'s text, piece by piece when it has several sentences (see the module
    /// documentation). The response's figures (`x-ar-tokens`, ...) are the first piece's for a
    /// streamed response and the sums over the pieces for a whole one.
    ///
    /// # Errors
    /// As [`Synthesizer::synthesize`]; a piece that fails after a streamed response has
    /// started ends its stream with the error.
    pub async fn synthesize_text(&self, request: SpeechRequest) -> Result<Reply, ApiError> {
        let pieces = self.plan(request.clone()).await?;
        if pieces.len() <= 1 {
            return self.synthesize(request).await;
        }
        let seed = request.seed.unwrap_or(0);
        let requests: Vec<(SpeechRequest, f32)> = pieces
            .into_iter()
            .enumerate()
            .map(|(i, piece)| {
                let sub = SpeechRequest {
                    input: piece.text,
                    seed: Some(seed.wrapping_add(i as u64)),
                    ..request.clone()
                };
                (sub, piece.pause)
            })
            .collect();
        if request.stream {
            self.stream_pieces(requests).await
        } else {
            self.whole_pieces(requests).await
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

    /// One whole response: the pieces' samples and pauses, the figures summed.
    async fn whole_pieces(&self, requests: Vec<(SpeechRequest, f32)>) -> Result<Reply, ApiError> {
        let mut total: Option<Speech> = None;
        for (sub, pause) in requests {
            let speech = match self.synthesize(sub).await? {
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
        total
            .map(Reply::Whole)
            .ok_or_else(|| ApiError::internal("the text had no piece"))
    }

    /// One streamed response: the first piece's stream now, the rest forwarded in order by a
    /// task as each piece is spoken.
    async fn stream_pieces(&self, requests: Vec<(SpeechRequest, f32)>) -> Result<Reply, ApiError> {
        let mut requests = requests.into_iter();
        let Some((first, first_pause)) = requests.next() else {
            return Err(ApiError::internal("the text had no piece"));
        };
        let (speech, first_chunks) = match self.synthesize(first).await? {
            Reply::Stream(speech, chunks) => (speech, chunks),
            Reply::Whole(speech) => {
                let (tx, rx) = chunks::unbounded_channel();
                let _ = tx.send(Ok(speech.samples.clone()));
                (speech, rx)
            }
        };
        let rate = speech.sample_rate;
        let (tx, rx) = chunks::unbounded_channel();
        let synth = self.clone();
        tokio::spawn(async move {
            if !forward(first_chunks, &tx, pause_samples(first_pause, rate)).await {
                return;
            }
            for (sub, pause) in requests {
                let piece = match synth.synthesize(sub).await {
                    Ok(Reply::Stream(_, piece)) => piece,
                    Ok(Reply::Whole(speech)) => {
                        let (one, piece) = chunks::unbounded_channel();
                        let _ = one.send(Ok(speech.samples));
                        piece
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return;
                    }
                };
                if !forward(piece, &tx, pause_samples(pause, rate)).await {
                    return;
                }
            }
        });
        Ok(Reply::Stream(speech, rx))
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
