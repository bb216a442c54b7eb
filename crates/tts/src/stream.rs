//! Streaming synthesis: the audio of an utterance in chunks, the first one long before the
//! whole is done.
//!
//! The AR stage is the fast one (a 9-second sentence takes about 0.15 s on 2 cores with MTP +
//! Viterbi); the NAR and the codec decoder cost about six times more. So the AR model decodes
//! the whole utterance first, then [`SpeechStream`] turns its codes into audio chunk by chunk:
//!
//! - the NAR fills layers 2..N of a chunk's frames from a window of RVQ-1 codes around it
//!   ([`NarWindow::Sliding`]), or once for the whole utterance ([`NarWindow::Whole`]);
//! - the codec decodes incrementally ([`voxspec_codec::DecodeStream`]), carrying its LSTM
//!   state, so chunk joins are exactly the one-shot decode's;
//! - a mel decoder with a vocoder renders each chunk from a window reaching
//!   [`voxspec_codec::MelSpeech::context_frames`] past it on either side, which gives the chunk
//!   the samples of a one-shot render of the same codes; with Griffin-Lim (whose iterations tie
//!   every frame to every other) the utterance is rendered in one piece.
//!
//! With [`NarWindow::Whole`] the streamed audio equals [`Pipeline::vocode`]'s to float rounding
//! (tested); a sliding window changes some of the NAR's codes (the NAR attends over the whole
//! utterance when it has it) and buys a time to first audio that no longer grows with the
//! sentence.

use std::time::Instant;

use voxspec_codec::DecodeStream;
use voxspec_infer::{Decoder, SamplerConfig};

use crate::engine::ArEngine;
use crate::error::{Result, TtsError};
use crate::pipeline::{Pipeline, SpeechItem, Synthesis, VoicePrompt};

/// How the NAR stage of a stream sees the utterance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NarWindow {
    /// One NAR pass over every frame before the first chunk: the audio equals the one-shot
    /// synthesis, the first chunk waits for the whole NAR stage.
    Whole,
    /// Each chunk's frames with `context` frames of RVQ-1 codes on either side (and the whole
    /// text): the first chunk costs a NAR pass over a short window only.
    Sliding {
        /// Frames of context on each side of a chunk.
        context: usize,
    },
}

/// How a streamed synthesis is cut.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamConfig {
    /// Frames of the first chunk (50 per second with the shipped codec).
    pub first_frames: usize,
    /// Frames of every later chunk.
    pub chunk_frames: usize,
    /// The NAR's view of the utterance.
    pub nar: NarWindow,
}

impl Default for StreamConfig {
    /// First chunk 0.4 s, later chunks 2 s, NAR windows with 1 s of context on each side.
    fn default() -> Self {
        Self {
            first_frames: 20,
            chunk_frames: 100,
            nar: NarWindow::Sliding { context: 50 },
        }
    }
}

impl StreamConfig {
    /// Checks the sizes.
    ///
    /// # Errors
    /// [`TtsError::Config`] naming a chunk size of 0.
    pub fn validate(&self) -> Result<()> {
        if self.first_frames == 0 || self.chunk_frames == 0 {
            return Err(TtsError::Config(format!(
                "stream chunks must hold at least one frame (first {}, later {})",
                self.first_frames, self.chunk_frames
            )));
        }
        Ok(())
    }
}

/// The audio of one utterance, chunk by chunk ([`Pipeline::stream`]).
pub struct SpeechStream<'p> {
    pipeline: &'p Pipeline,
    config: StreamConfig,
    /// RVQ-1 codes of the utterance (the AR output).
    first: Vec<u32>,
    nar_text: Vec<u32>,
    prompt_codes: Vec<Vec<u32>>,
    /// An aligned NAR's track ids of every frame.
    track: Option<Vec<u32>>,
    /// Each frame's phone, for a mel decoder with a phone input.
    phones: Option<Vec<u32>>,
    /// Every layer of every frame when the NAR ran over the whole utterance.
    whole: Option<Vec<Vec<u32>>>,
    /// The codec's incremental decoder; `None` when a mel decoder renders the codes.
    codec: Option<DecodeStream<'p>>,
    /// Frames of context a mel decoder's chunk is rendered with (a vocoder renders it); `None`
    /// with the codec, or with Griffin-Lim, which renders [`SpeechStream::whole`] in one piece.
    mel_context: Option<usize>,
    /// Frames whose codes went to the codec.
    pushed: usize,
    done: bool,
}

impl Pipeline {
    /// A stream of the audio for RVQ-1 codes `first` (an AR generation's tokens) of `text`
    /// (without a prompt's transcript) with an optional voice prompt; `durations` as in
    /// [`Pipeline::vocode`].
    ///
    /// # Errors
    /// [`TtsError::Config`] for a bad `config`; [`TtsError::Text`] when the NAR's context is too
    /// small; the NAR's (for [`NarWindow::Whole`]) and the codec's.
    pub fn stream(
        &self,
        text: &[u32],
        prompt: Option<&VoicePrompt>,
        first: &[u32],
        durations: Option<&[u32]>,
        config: StreamConfig,
    ) -> Result<SpeechStream<'_>> {
        config.validate()?;
        let (nar_text, prompt_codes) = self.nar_inputs(text, prompt, first.len())?;
        let track = self.nar_track(text, durations, first.len());
        let phones = self.mel_phones(text, durations, first.len())?;
        let mel_context = self.mel.as_ref().and_then(|m| m.context_frames());
        let one_piece = self.mel.is_some() && mel_context.is_none();
        let whole = match config.nar {
            _ if first.is_empty() => None,
            _ if one_piece => {
                Some(self.nar_codes(&nar_text, &prompt_codes, first, track.as_deref())?)
            }
            NarWindow::Whole => {
                Some(self.nar_codes(&nar_text, &prompt_codes, first, track.as_deref())?)
            }
            _ => None,
        };
        let codec = match self.mel {
            Some(_) => None,
            None => Some(
                self.codec
                    .decode_stream()
                    .map_err(TtsError::stage("the codec decoder"))?,
            ),
        };
        Ok(SpeechStream {
            pipeline: self,
            config,
            first: first.to_vec(),
            nar_text,
            prompt_codes,
            track,
            phones,
            whole,
            codec,
            mel_context,
            pushed: 0,
            done: false,
        })
    }

    /// [`Pipeline::synthesize`] of `item` with the audio handed to `sink` chunk by chunk as it
    /// is made (empty chunks are not handed on). The returned [`Synthesis`] holds the whole waveform;
    /// [`Streamed::first_audio_seconds`] is the time from the call to the first chunk.
    ///
    /// # Errors
    /// The decoder's, the NAR's, the codec's, and `sink`'s own.
    pub fn synthesize_stream(
        &self,
        decoder: &mut dyn Decoder<ArEngine>,
        item: &SpeechItem<'_>,
        sampler: &SamplerConfig,
        config: StreamConfig,
        sink: &mut dyn FnMut(&[f32]) -> Result<()>,
    ) -> Result<Streamed> {
        let start = Instant::now();
        let generation = self.generate_one(decoder, &item.request, sampler)?;
        let ar_seconds = start.elapsed().as_secs_f64();
        let rest = Instant::now();
        let mut stream = self.stream(
            &item.text,
            item.prompt,
            &generation.tokens,
            item.request.prompt.durations.as_deref(),
            config,
        )?;
        let mut samples = Vec::new();
        let mut first_audio_seconds = None;
        let mut chunks = 0;
        while let Some(chunk) = stream.next_chunk()? {
            if chunk.is_empty() {
                continue;
            }
            first_audio_seconds.get_or_insert_with(|| start.elapsed().as_secs_f64());
            chunks += 1;
            sink(&chunk)?;
            samples.extend_from_slice(&chunk);
        }
        Ok(Streamed {
            synthesis: Synthesis {
                generation,
                ar_seconds,
                rest_seconds: rest.elapsed().as_secs_f64(),
                samples,
            },
            first_audio_seconds: first_audio_seconds
                .unwrap_or_else(|| start.elapsed().as_secs_f64()),
            chunks,
        })
    }
}

/// What [`Pipeline::synthesize_stream`] produced.
pub struct Streamed {
    /// The synthesis, its waveform the chunks joined.
    pub synthesis: Synthesis,
    /// Seconds from the call to the first non-empty chunk (the whole call when there was none).
    pub first_audio_seconds: f64,
    /// Non-empty chunks handed on.
    pub chunks: usize,
}

impl SpeechStream<'_> {
    /// Frames of the utterance.
    pub fn frames(&self) -> usize {
        self.first.len()
    }

    /// Whether every chunk has been returned.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// The audio of the next chunk, `None` once the utterance is out. A chunk may be empty
    /// (the codec holds back its last few frames until the frames after them are in).
    ///
    /// # Errors
    /// The NAR's and the codec's, each naming its stage.
    pub fn next_chunk(&mut self) -> Result<Option<Vec<f32>>> {
        if self.done {
            return Ok(None);
        }
        let total = self.first.len();
        if self.pushed >= total {
            self.done = true;
            return self.finish().map(Some);
        }
        let size = if self.pushed == 0 {
            self.config.first_frames
        } else {
            self.config.chunk_frames
        };
        let (from, to) = (self.pushed, (self.pushed + size).min(total));
        // The codec's stream is taken out while the window's codes are made, and put back.
        let Some(mut codec) = self.codec.take() else {
            return self.next_mel_chunk(from, to).map(Some);
        };
        let pushed = self.window_codes(from, to).and_then(|window| {
            codec
                .push(self.pipeline.codes_tensor(&window, 0, to - from))
                .map_err(TtsError::stage("the codec decoder"))
        });
        self.codec = Some(codec);
        let mut audio = pushed?;
        self.pushed = to;
        if to == total {
            self.done = true;
            audio.extend(self.finish()?);
        }
        Ok(Some(audio))
    }

    /// A mel decoder's chunk of frames `from..to`: with a vocoder, rendered from a window with
    /// the context it depends on; with Griffin-Lim, the whole utterance in one piece.
    fn next_mel_chunk(&mut self, from: usize, to: usize) -> Result<Vec<f32>> {
        let total = self.first.len();
        let Some(context) = self.mel_context else {
            self.pushed = total;
            self.done = true;
            return match &self.whole {
                Some(all) => self.pipeline.decode_codes(all, self.phones.as_deref()),
                None => Ok(Vec::new()),
            };
        };
        let (lo, hi) = (from.saturating_sub(context), (to + context).min(total));
        let window = self.window_codes(lo, hi)?;
        let phones = self.phones.as_ref().map(|p| &p[lo..hi]);
        let audio = self
            .pipeline
            .render_span(&window, phones, from - lo, to - lo)?;
        self.pushed = to;
        self.done = to == total;
        Ok(audio)
    }

    /// Every layer's codes of frames `from..to`: a slice of [`SpeechStream::whole`], or the
    /// NAR's over those frames and its context window.
    fn window_codes(&self, from: usize, to: usize) -> Result<Vec<Vec<u32>>> {
        if let Some(all) = &self.whole {
            return Ok(all.iter().map(|row| row[from..to].to_vec()).collect());
        }
        let total = self.first.len();
        let context = match self.config.nar {
            NarWindow::Sliding { context } => context,
            NarWindow::Whole => total,
        };
        let (lo, hi) = (from.saturating_sub(context), (to + context).min(total));
        let slots = self.pipeline.nar.track_layout().map_or(0, |l| l.slots());
        let track = self.track.as_ref().map(|t| &t[lo * slots..hi * slots]);
        let window = self.pipeline.nar_codes(
            &self.nar_text,
            &self.prompt_codes,
            &self.first[lo..hi],
            track,
        )?;
        Ok(window
            .into_iter()
            .map(|row| row[from - lo..to - lo].to_vec())
            .collect())
    }

    /// The codec's last frames (none with a mel decoder, which rendered everything at once).
    fn finish(&mut self) -> Result<Vec<f32>> {
        match &mut self.codec {
            Some(codec) => codec.finish().map_err(TtsError::stage("the codec decoder")),
            None => Ok(Vec::new()),
        }
    }
}
