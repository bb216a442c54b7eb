//! Streaming decode: codes arrive in chunks, audio leaves in chunks, and the concatenated audio
//! equals one [`SpeechTokenizer::decode`] of all the codes (to float rounding; tested).
//!
//! The SEANet decoder is a convolution `first` (kernel k, "same" reflect padding), the
//! unidirectional LSTM, then upsampling stages of transposed convolutions and residual blocks
//! and a last convolution. Each part is streamed the way it allows:
//!
//! - the code vectors of a frame depend on that frame alone;
//! - `first` needs half its kernel's span of context on either side: it runs on a window of
//!   the latents and keeps only the frames whose whole neighbourhood was inside it;
//! - the LSTM is causal: it runs once over each frame, its state carried from chunk to chunk;
//! - the upsampling stack has a finite reach ([`DecodeStream::context`] frames, computed from
//!   its kernels, strides and dilations): it runs on a window of LSTM outputs with that many
//!   frames of context on either side, and the samples of the context frames are dropped.
//!
//! At the true start and (on [`DecodeStream::finish`]) the true end of the sequence the windows
//! reach the sequence's edges, where the reflect padding is the one-shot decoder's; elsewhere
//! a window edge lies at least its context away from every kept frame. The audio of a frame is
//! therefore released once [`DecodeStream::lookahead`] later frames have arrived.

use burn::tensor::{Int, Tensor};

use super::SpeechTokenizer;
use super::layers::{LstmState, elu};
use super::seanet::SeanetDecoder;
use crate::error::CodecError;

/// An incremental decode of one utterance (batch 1) with a [`SpeechTokenizer`]'s decoder.
pub struct DecodeStream<'a> {
    codec: &'a SpeechTokenizer,
    /// Frames of context either side of the upsampling stack's window.
    context: usize,
    /// Frames of context either side of `first`'s window.
    first_context: usize,
    /// Latents `[1, dim, frames]` from frame `latents_from` to the last frame received.
    latents: Option<Tensor<3>>,
    latents_from: usize,
    received: usize,
    lstm_state: Option<Vec<LstmState>>,
    /// LSTM outputs `[1, channels, frames]` from frame `lstm_from` to `lstm_done`.
    lstm_out: Option<Tensor<3>>,
    lstm_from: usize,
    lstm_done: usize,
    /// Frames whose audio has been released.
    emitted: usize,
    finished: bool,
}

impl SpeechTokenizer {
    /// A streaming decode of one utterance: [`DecodeStream::push`] codes as they come,
    /// [`DecodeStream::finish`] at the end.
    ///
    /// # Errors
    /// [`CodecError::Streaming`] when the decoder cannot stream (a bidirectional LSTM).
    pub fn decode_stream(&self) -> Result<DecodeStream<'_>, CodecError> {
        if self
            .decoder
            .lstm
            .as_ref()
            .is_some_and(|l| l.bidirectional())
        {
            return Err(CodecError::Streaming(
                "the decoder's LSTM is bidirectional, so no frame is final before the last".into(),
            ));
        }
        // `first` pads ⌈(k − 1)·d / 2⌉ frames on the left and the rest on the right.
        let first_context = {
            let c = &self.decoder.first.conv;
            ((c.kernel_size - 1) * c.dilation).div_ceil(2)
        };
        Ok(DecodeStream {
            codec: self,
            context: upsampling_reach(&self.decoder),
            first_context,
            latents: None,
            latents_from: 0,
            received: 0,
            lstm_state: None,
            lstm_out: None,
            lstm_from: 0,
            lstm_done: 0,
            emitted: 0,
            finished: false,
        })
    }
}

impl DecodeStream<'_> {
    /// Frames of context the upsampling stack gets on either side of a frame (its reach by
    /// default).
    pub fn context(&self) -> usize {
        self.context
    }

    /// Sets the upsampling stack's context: below [`context`](Self::context)'s default the
    /// audio comes sooner but is no longer exactly the one-shot decode's. Call before the first
    /// push.
    #[must_use]
    pub fn with_context(mut self, frames: usize) -> Self {
        self.context = frames;
        self
    }

    /// Frames that must follow a frame before its audio is released (the stream's latency in
    /// frames, not counting the chunk size).
    pub fn lookahead(&self) -> usize {
        self.first_context + self.context
    }

    /// Frames received so far.
    pub fn frames_received(&self) -> usize {
        self.received
    }

    /// Frames whose audio has been released.
    pub fn frames_released(&self) -> usize {
        self.emitted
    }

    /// Adds the codes of the next frames and returns the audio that became final (possibly
    /// none).
    ///
    /// # Shapes
    /// - `codes`: `[m, 1, frames]`, the first `m` RVQ layers (`1 ≤ m ≤ n_q`, the same `m` for
    ///   every push)
    /// - returns: `frames_released · hop` samples in all, over the calls
    ///
    /// # Errors
    /// [`CodecError::Streaming`] after [`finish`](Self::finish) or for a batch other than 1;
    /// the quantizer's for codes it cannot decode; [`CodecError::TensorRead`].
    pub fn push(&mut self, codes: Tensor<3, Int>) -> Result<Vec<f32>, CodecError> {
        if self.finished {
            return Err(CodecError::Streaming(
                "codes pushed after the stream was finished".into(),
            ));
        }
        let [_, batch, frames] = codes.dims();
        if batch != 1 {
            return Err(CodecError::Streaming(format!(
                "a stream decodes one utterance; codes of batch {batch} given"
            )));
        }
        if frames == 0 {
            return Ok(Vec::new());
        }
        let latents = self.codec.quantizer.decode(codes)?; // [1, dim, frames]
        self.latents = Some(match self.latents.take() {
            Some(l) => Tensor::cat(vec![l, latents], 2),
            None => latents,
        });
        self.received += frames;
        self.advance(false)
    }

    /// Releases the audio of every frame not yet released (the sequence has ended).
    ///
    /// # Errors
    /// As [`push`](Self::push).
    pub fn finish(&mut self) -> Result<Vec<f32>, CodecError> {
        if self.finished {
            return Ok(Vec::new());
        }
        self.finished = true;
        self.advance(true)
    }

    fn advance(&mut self, end: bool) -> Result<Vec<f32>, CodecError> {
        // 1. `first` then the LSTM over every frame whose `first` output is final.
        let lstm_target = if end {
            self.received
        } else {
            self.received.saturating_sub(self.first_context)
        };
        if lstm_target > self.lstm_done {
            let Some(latents) = self.latents.clone() else {
                return Ok(Vec::new());
            };
            let from = self
                .lstm_done
                .saturating_sub(self.first_context)
                .max(self.latents_from);
            let to = (lstm_target + self.first_context).min(self.received);
            let window = latents
                .clone()
                .narrow(2, from - self.latents_from, to - from);
            let x = self.codec.decoder.first.forward(window).narrow(
                2,
                self.lstm_done - from,
                lstm_target - self.lstm_done,
            );
            let x = match &self.codec.decoder.lstm {
                Some(lstm) => {
                    let (y, state) = lstm.forward_stateful(x, self.lstm_state.take());
                    self.lstm_state = Some(state);
                    y
                }
                None => x,
            };
            self.lstm_out = Some(match self.lstm_out.take() {
                Some(o) => Tensor::cat(vec![o, x], 2),
                None => x,
            });
            self.lstm_done = lstm_target;
            // Latents before the next `first` window are not needed again.
            let keep_from = self.lstm_done.saturating_sub(self.first_context);
            if keep_from > self.latents_from {
                let len = latents.dims()[2];
                let drop = keep_from - self.latents_from;
                self.latents = (drop < len).then(|| latents.narrow(2, drop, len - drop));
                self.latents_from = keep_from;
            }
        }
        // 2. The upsampling stack over every frame whose context is in.
        let target = if end {
            self.lstm_done
        } else {
            self.lstm_done.saturating_sub(self.context)
        };
        if target <= self.emitted {
            return Ok(Vec::new());
        }
        let Some(lstm_out) = self.lstm_out.clone() else {
            return Ok(Vec::new());
        };
        let from = self
            .emitted
            .saturating_sub(self.context)
            .max(self.lstm_from);
        let to = (target + self.context).min(self.lstm_done);
        let mut x = lstm_out.clone().narrow(2, from - self.lstm_from, to - from);
        for stage in &self.codec.decoder.stages {
            x = stage.up.forward(elu(x));
            for block in &stage.res {
                x = block.forward(x);
            }
        }
        let hop = self.codec.hop_length();
        let wave = self.codec.decoder.last.forward(elu(x)).narrow(
            2,
            (self.emitted - from) * hop,
            (target - self.emitted) * hop,
        );
        self.emitted = target;
        let keep_from = self.emitted.saturating_sub(self.context);
        if keep_from > self.lstm_from {
            let len = lstm_out.dims()[2];
            let drop = keep_from - self.lstm_from;
            self.lstm_out = (drop < len).then(|| lstm_out.narrow(2, drop, len - drop));
            self.lstm_from = keep_from;
        }
        wave.into_data()
            .try_into_vec::<f32>()
            .map_err(|e| CodecError::TensorRead {
                what: "the streamed waveform",
                reason: format!("{e:?}"),
            })
    }
}

/// Frames of context either side that make the upsampling stack's output for a frame exact:
/// the reach of every kernel, at the rate it runs at, summed and rounded up, plus one.
fn upsampling_reach(decoder: &SeanetDecoder) -> usize {
    let mut rate = 1.0f64; // samples of the current layer per frame
    let mut reach = 0.0f64; // frames
    for stage in &decoder.stages {
        let up = &stage.up.convtr;
        reach += (up.kernel_size as f64 / up.stride as f64 + 1.0) / rate;
        rate *= up.stride as f64;
        for block in &stage.res {
            for conv in [&block.conv1.conv, &block.conv2.conv, &block.shortcut.conv] {
                reach += ((conv.kernel_size - 1) * conv.dilation) as f64 / rate;
            }
        }
    }
    let last = &decoder.last.conv;
    reach += ((last.kernel_size - 1) * last.dilation) as f64 / rate;
    reach.ceil() as usize + 1
}
