//! The synthesis worker: one thread owns the pipeline (the CPU is the bottleneck; HTTP handlers
//! only wait on it) and schedules requests by continuous batching:
//!
//! - up to [`Defaults::max_batch`] sequences run at once; new requests are admitted whenever a
//!   slot is free — a finished sequence frees its slot at once, not at the end of a batch;
//! - the requests admitted together run their AR stage as one batched decode per decoder and
//!   sampler (each keeps its own seed, so with f32 weights a batch gives the audio the request
//!   gets alone; with bf16 weights on AMX tiles a batched step of 12 rows or more rounds its
//!   activations to bf16, so the audio can differ from the request alone by that rounding);
//! - then, each round, every streamed sequence advances by one chunk ([`SpeechStream`]: NAR and
//!   codec for its next frames) and is sent it at once, and so does the oldest whole one (whole
//!   responses are finished in arrival order, interleaved with the streams' chunks).
//!
//! A multi-stream LM ([`AnyPipeline::MultiStream`]) has no batched decode and no chunked audio:
//! each of its requests is spoken whole when admitted and its audio goes out as one chunk
//! (streamed responses too).
//!
//! A text of several sentences is spoken piece by piece ([`Synthesizer::synthesize_text`] in
//! `longform.rs`): the worker plans the pieces ([`AnyPipeline::plan_pieces`]), each piece is
//! one request.
//!
//! A request is checked against the loaded models before it runs, and a panic inside one
//! synthesis is caught and answered with a 500, so it never takes the server down.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use tokio::sync::{mpsc as chunks, oneshot};
use voxspec_infer::SamplerConfig;
use voxspec_tts::{
    AnyPipeline, AnySpeech, AnySpeechStream, AnyVoice, DecoderParts, Lengths, LongForm, NarWindow,
    Pipeline, SpeakSettings, SpeechItem, StreamConfig, TextPiece, TtsError,
};

use crate::api::SpeechRequest;
use crate::error::ApiError;
use crate::metrics::Metrics;

mod request;

use request::{Plan, request_error};
pub(crate) use request::{decoder_names, decoder_spec};

/// Defaults of requests that leave a field out, and limits.
#[derive(Debug, Clone, PartialEq)]
pub struct Defaults {
    /// Decoder of requests without `decoder`.
    pub decoder: String,
    /// Heads of requests without `heads`.
    pub heads: usize,
    /// Viterbi candidates per head.
    pub top_k: usize,
    /// Sampler of requests (their `temperature` and `seed` replace its own).
    pub sampler: SamplerConfig,
    /// Longest accepted `input`, in characters (a long text is spoken sentence by sentence,
    /// so this bounds a request's work, not the model's context).
    pub max_input_chars: usize,
    /// Pauses between the sentences (and clauses) of a long text.
    pub long_form: LongForm,
    /// Most sequences running at once (continuous batching: a new request takes a slot as soon
    /// as one is free); the requests admitted together share one batched AR decode per decoder
    /// and sampler.
    pub max_batch: usize,
    /// How long an idle worker waits for more requests after the first (latency traded for
    /// throughput; zero: it takes only what is already waiting).
    pub batch_wait: Duration,
    /// How streamed responses (`stream: true`) are cut; the NAR window applies to them only
    /// (whole responses use one NAR pass, so their audio equals the unstreamed synthesis).
    pub stream: StreamConfig,
    /// Frames per chunk of whole responses (each running sequence advances this many frames
    /// per round).
    pub chunk_frames: usize,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            // Greedy MTP k=4: the best-identified setting of the shipped real voice.
            decoder: "mtp".into(),
            heads: 4,
            top_k: 5,
            sampler: SamplerConfig::greedy(),
            max_input_chars: 20_000,
            long_form: LongForm::default(),
            max_batch: 8,
            batch_wait: Duration::from_millis(5),
            stream: StreamConfig::default(),
            chunk_frames: 100,
        }
    }
}

/// What one request produced.
#[derive(Debug, Clone)]
pub struct Speech {
    /// The waveform.
    pub samples: Vec<f32>,
    /// Its sample rate.
    pub sample_rate: u32,
    /// AR codes generated.
    pub tokens: usize,
    /// Forwards of the AR model.
    pub forwards: usize,
    /// Tokens proposed for verification (self-speculation's drafts; 0 for the other decoders).
    pub drafted: usize,
    /// Proposed tokens the verification kept.
    pub accepted: usize,
    /// The decoder that ran ([`DecoderSpec::label`]).
    pub decoder: String,
    /// Requests whose AR stage ran in the same batched decode (itself included).
    pub batch: usize,
}

/// The answer to a speech request.
pub enum Reply {
    /// The whole audio.
    Whole(Speech),
    /// A streamed response: the AR stage's figures (no samples) and the chunks as they come
    /// (an error ends the stream).
    Stream(
        Speech,
        chunks::UnboundedReceiver<Result<Vec<f32>, ApiError>>,
    ),
}

/// A voice added by upload.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct VoiceInfo {
    /// Its name.
    pub voice: String,
    /// Seconds of reference audio.
    pub seconds: f64,
}

/// Where a speech result goes.
type SpeechReply = oneshot::Sender<Result<Reply, ApiError>>;

/// Work for the worker.
pub(crate) enum Job {
    Speech {
        request: SpeechRequest,
        arrived: Instant,
        reply: SpeechReply,
    },
    Voice {
        name: String,
        audio: Vec<u8>,
        reply: oneshot::Sender<Result<VoiceInfo, ApiError>>,
    },
    /// The pieces of a request's text ([`AnyPipeline::plan_pieces`]).
    Plan {
        request: SpeechRequest,
        reply: oneshot::Sender<Result<Vec<TextPiece>, ApiError>>,
    },
}

/// A handle on the worker: cheap to clone, one per HTTP handler.
#[derive(Clone)]
pub struct Synthesizer {
    pub(crate) jobs: mpsc::Sender<Job>,
    /// The pauses of long texts ([`Defaults::long_form`]).
    pub(crate) long_form: LongForm,
    metrics: Arc<Metrics>,
    names: Arc<RwLock<Vec<String>>>,
}

/// What the worker owns (the voices apart: running sequences borrow the pipeline while an
/// upload adds a voice).
struct Worker {
    pipeline: AnyPipeline,
    parts: DecoderParts,
    names: Arc<RwLock<Vec<String>>>,
    defaults: Defaults,
    /// The voice of requests that name none (or `default`).
    default_voice: Option<AnyVoice>,
}

/// Where a running sequence's audio goes.
enum Sink {
    Whole(Vec<f32>, SpeechReply),
    Stream(chunks::UnboundedSender<Result<Vec<f32>, ApiError>>),
}

/// A running sequence: its AR stage done, its audio being made chunk by chunk.
struct Active<'p> {
    stream: AnySpeechStream<'p>,
    /// Taken when the sequence is answered.
    sink: Option<Sink>,
    /// The AR stage's figures (samples empty).
    speech: Speech,
    arrived: Instant,
    first_audio: bool,
    samples: usize,
}

impl Synthesizer {
    /// Starts the worker thread on `pipeline` (either kind) with decoder `parts` (for a
    /// single-stream pipeline, a transition matrix enables `mtp-viterbi`), the registered
    /// `voices` and the voice of requests that name none (`default_voice`; a multi-stream LM
    /// answers those with a 400 without one).
    pub fn spawn(
        pipeline: AnyPipeline,
        parts: DecoderParts,
        voices: BTreeMap<String, AnyVoice>,
        default_voice: Option<AnyVoice>,
        defaults: Defaults,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let long_form = defaults.long_form;
        let names = Arc::new(RwLock::new(voices.keys().cloned().collect()));
        let worker = Worker {
            pipeline,
            parts,
            names: names.clone(),
            defaults,
            default_voice,
        };
        let m = metrics.clone();
        std::thread::Builder::new()
            .name("voxspec-synth".into())
            .spawn(move || worker.run(voices, queue, &m))
            .map(|_| ())
            .unwrap_or_else(|e| tracing::error!("cannot start the synthesis thread: {e}"));
        Self {
            jobs,
            long_form,
            metrics,
            names,
        }
    }

    /// Names of the voices requests can pick (besides `default`).
    pub fn voice_names(&self) -> Vec<String> {
        self.names.read().map(|n| n.clone()).unwrap_or_default()
    }

    /// Adds the voice `name` from the bytes of an audio file (any format and rate the audio
    /// reader takes), encoded once by the codec.
    ///
    /// # Errors
    /// [`ApiError`] 400 for a bad name or audio that cannot be decoded or is too short (naming
    /// it), 409 for a name already taken, 503 when the worker is gone.
    pub async fn add_voice(&self, name: String, audio: Vec<u8>) -> Result<VoiceInfo, ApiError> {
        let valid = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
        if !valid {
            return Err(ApiError::bad_request(format!(
                "name: {name:?} must be 1 to 64 letters, digits, '-' or '_'"
            )));
        }
        let (reply, answer) = oneshot::channel();
        if self.jobs.send(Job::Voice { name, audio, reply }).is_err() {
            return Err(ApiError::unavailable("the synthesis worker has stopped"));
        }
        answer
            .await
            .map_err(|_| ApiError::unavailable("the synthesis worker has stopped"))?
    }

    /// Runs `request` on the worker and waits for its result.
    ///
    /// # Errors
    /// [`ApiError`] 400 for a request the models cannot serve (naming the field), 500 when the
    /// synthesis failed or panicked, 503 when the worker is gone.
    pub async fn synthesize(&self, request: SpeechRequest) -> Result<Reply, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
        let job = Job::Speech {
            request,
            arrived: Instant::now(),
            reply,
        };
        if self.jobs.send(job).is_err() {
            self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::unavailable("the synthesis worker has stopped"));
        }
        answer
            .await
            .map_err(|_| ApiError::unavailable("the synthesis worker has stopped"))?
    }
}

impl Worker {
    fn run(
        self,
        mut voices: BTreeMap<String, AnyVoice>,
        queue: mpsc::Receiver<Job>,
        metrics: &Metrics,
    ) {
        self.warm_up();
        let slots = self.defaults.max_batch.max(1);
        let mut active: Vec<Active<'_>> = Vec::new();
        let mut open = true;
        while open || !active.is_empty() {
            // Admit: block when idle (then gather for the batch wait), else take what waits.
            let mut jobs = Vec::new();
            if active.is_empty() {
                match queue.recv() {
                    Ok(job) => jobs.push(job),
                    Err(_) => break,
                }
                let deadline = Instant::now() + self.defaults.batch_wait;
                while jobs.len() < slots {
                    let left = deadline.saturating_duration_since(Instant::now());
                    match queue.recv_timeout(left) {
                        Ok(job) => jobs.push(job),
                        Err(mpsc::RecvTimeoutError::Timeout) => break,
                        Err(mpsc::RecvTimeoutError::Disconnected) => {
                            open = false;
                            break;
                        }
                    }
                }
            } else {
                while open && active.len() + jobs.len() < slots {
                    match queue.try_recv() {
                        Ok(job) => jobs.push(job),
                        Err(mpsc::TryRecvError::Empty) => break,
                        Err(mpsc::TryRecvError::Disconnected) => open = false,
                    }
                }
            }
            let mut speech = Vec::new();
            for job in jobs {
                match job {
                    Job::Speech {
                        request,
                        arrived,
                        reply,
                    } => speech.push((request, arrived, reply)),
                    // Voices first: a request admitted with it may name it.
                    Job::Voice { name, audio, reply } => {
                        let _ = reply.send(self.add_voice(&mut voices, name, audio));
                    }
                    Job::Plan { request, reply } => {
                        let _ = reply.send(guarded(|| self.plan(&voices, &request)));
                    }
                }
            }
            metrics
                .queue_depth
                .fetch_sub(speech.len() as i64, Ordering::Relaxed);
            active.extend(self.start(&voices, speech, metrics));
            // One chunk of every streamed sequence and of the oldest whole one (whole responses
            // are answered in arrival order, so their latency is not spread over each other);
            // finished sequences leave at once.
            let oldest_whole = active
                .iter()
                .position(|a| matches!(a.sink, Some(Sink::Whole(..))));
            let mut index = 0;
            active.retain_mut(|sequence| {
                let turn =
                    Some(index) == oldest_whole || matches!(sequence.sink, Some(Sink::Stream(_)));
                index += 1;
                !turn || self.advance(sequence, metrics)
            });
        }
    }

    /// Speaks one short sentence with the default decoder before the first request, so that
    /// request does not pay for the engine's first use (its thread team, buffers and caches
    /// still cold: a streamed first request's first audio measured 0.19 s against 0.06 s after
    /// it). Failing is not an error (a multi-stream LM without a default voice cannot speak
    /// it); it is logged.
    fn warm_up(&self) {
        let begin = Instant::now();
        let result = guarded(|| {
            let d = &self.defaults;
            let decoder =
                request::decoder_spec(self.pipeline.kind(), &d.decoder, d.heads, d.top_k)?;
            let settings = SpeakSettings {
                decoder,
                sampler: d.sampler,
                lengths: Lengths::default(),
                seed: 0,
            };
            self.pipeline
                .synthesize(
                    "Hello there.",
                    self.default_voice.as_ref(),
                    &settings,
                    &self.parts,
                )
                .map_err(|e| ApiError::internal_chain(&e))
        });
        match result {
            Ok(_) => tracing::info!(
                seconds = begin.elapsed().as_secs_f64(),
                "warmed up with one sentence"
            ),
            Err(e) => tracing::info!("no warm-up sentence: {e}"),
        }
    }

    /// Decodes and encodes an uploaded voice and registers it.
    fn add_voice(
        &self,
        voices: &mut BTreeMap<String, AnyVoice>,
        name: String,
        audio: Vec<u8>,
    ) -> Result<VoiceInfo, ApiError> {
        if name == "default" || voices.contains_key(&name) {
            return Err(ApiError {
                status: StatusCode::CONFLICT,
                message: format!("name: the voice {name:?} exists already"),
            });
        }
        let label = PathBuf::from(format!("uploaded voice {name}"));
        let audio = voxspec_audio::load_bytes(audio, &label)
            .map_err(|e| ApiError::bad_request(format!("audio: {e}")))?;
        let prompt = catch_unwind(AssertUnwindSafe(|| {
            self.pipeline.encode_voice(&audio, &label)
        }))
        .map_err(|_| ApiError::internal("encoding the voice panicked"))?
        .map_err(|e| ApiError::bad_request(format!("audio: {e}")))?;
        voices.insert(name.clone(), prompt);
        if let Ok(mut names) = self.names.write() {
            names.push(name.clone());
        }
        tracing::info!(voice = %name, "voice uploaded");
        Ok(VoiceInfo {
            voice: name,
            seconds: audio.duration_secs(),
        })
    }

    /// Checks every request (answering the bad ones) and starts the others: on a single-stream
    /// pipeline their AR stage runs in batches of equal decoder and sampler; a multi-stream LM
    /// speaks each whole. Returns them as running sequences.
    fn start<'p>(
        &'p self,
        voices: &BTreeMap<String, AnyVoice>,
        jobs: Vec<(SpeechRequest, Instant, SpeechReply)>,
        metrics: &Metrics,
    ) -> Vec<Active<'p>> {
        match &self.pipeline {
            AnyPipeline::SingleStream(pipeline) => {
                self.start_batched(pipeline, voices, jobs, metrics)
            }
            AnyPipeline::MultiStream(_) => self.start_whole(voices, jobs, metrics),
        }
    }

    /// [`Worker::start`] on a multi-stream LM: each request is spoken whole now; its audio is
    /// one chunk.
    fn start_whole<'p>(
        &'p self,
        voices: &BTreeMap<String, AnyVoice>,
        jobs: Vec<(SpeechRequest, Instant, SpeechReply)>,
        metrics: &Metrics,
    ) -> Vec<Active<'p>> {
        let mut started = Vec::new();
        for (request, arrived, reply) in jobs {
            let checked = match self.check(voices, &request) {
                Ok(checked) => checked,
                Err(e) => {
                    let _ = reply.send(Err(e));
                    continue;
                }
            };
            let settings = SpeakSettings {
                decoder: checked.plan.spec,
                sampler: checked.plan.sampler,
                lengths: Lengths {
                    pace: checked.pace,
                    ..Lengths::default()
                },
                seed: checked.seed,
            };
            let begin = Instant::now();
            let result = guarded(|| {
                self.pipeline
                    .stream(
                        &request.input,
                        checked.voice,
                        &settings,
                        &self.parts,
                        self.stream_config(request.stream),
                    )
                    .map_err(request_error)
            });
            metrics.record_batch(1, begin.elapsed().as_secs_f64());
            match result {
                Ok((stream, figures)) => {
                    let speech = self.speech(figures, 1);
                    started.extend(activate(stream, speech, request.stream, arrived, reply));
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
        }
        started
    }

    /// The figures of a response (its samples come later, chunk by chunk).
    fn speech(&self, figures: AnySpeech, batch: usize) -> Speech {
        Speech {
            samples: Vec::new(),
            sample_rate: self.pipeline.sample_rate(),
            tokens: figures.tokens,
            forwards: figures.forwards,
            drafted: figures.drafted,
            accepted: figures.accepted,
            decoder: figures.decoder,
            batch,
        }
    }

    /// How a response's audio is cut: streamed ones by the server's stream settings, whole ones
    /// with one NAR pass (their audio equals the unstreamed synthesis).
    fn stream_config(&self, streamed: bool) -> StreamConfig {
        if streamed {
            self.defaults.stream
        } else {
            let frames = self.defaults.chunk_frames.max(1);
            StreamConfig {
                first_frames: frames,
                chunk_frames: frames,
                nar: NarWindow::Whole,
            }
        }
    }

    /// [`Worker::start`] on a single-stream pipeline: the AR stage of requests of equal decoder
    /// and sampler in one batched decode.
    fn start_batched<'p>(
        &'p self,
        pipeline: &'p Pipeline,
        voices: &BTreeMap<String, AnyVoice>,
        jobs: Vec<(SpeechRequest, Instant, SpeechReply)>,
        metrics: &Metrics,
    ) -> Vec<Active<'p>> {
        type Member<'v> = (SpeechItem<'v>, bool, Instant, SpeechReply);
        let mut groups: Vec<(Plan, Vec<Member<'_>>)> = Vec::new();
        for (request, arrived, reply) in jobs {
            match self.prepare(pipeline, voices, &request) {
                Ok((plan, item)) => {
                    let member = (item, request.stream, arrived, reply);
                    match groups.iter_mut().find(|(p, _)| *p == plan) {
                        Some((_, members)) => members.push(member),
                        None => groups.push((plan, vec![member])),
                    }
                }
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
        }
        let mut started = Vec::new();
        for (plan, members) in groups {
            let begin = Instant::now();
            let items: Vec<(&SpeechItem<'_>, bool)> = members.iter().map(|m| (&m.0, m.1)).collect();
            let result = guarded(|| self.run_ar(pipeline, &plan, &items));
            metrics.record_batch(members.len(), begin.elapsed().as_secs_f64());
            let streams = match result {
                Ok(streams) => streams,
                Err(e) => {
                    for (_, _, _, reply) in members {
                        let _ = reply.send(Err(e.clone()));
                    }
                    continue;
                }
            };
            for ((stream, speech), (_, streamed, arrived, reply)) in
                streams.into_iter().zip(members)
            {
                started.extend(activate(stream, speech, streamed, arrived, reply));
            }
        }
        started
    }

    /// The AR stage of `items` (each with whether it is streamed) in one batched decode, and a
    /// stream of each one's audio.
    fn run_ar<'p>(
        &self,
        pipeline: &'p Pipeline,
        plan: &Plan,
        items: &[(&SpeechItem<'_>, bool)],
    ) -> Result<Vec<(AnySpeechStream<'p>, Speech)>, ApiError> {
        let mut decoder = self
            .parts
            .build(&plan.spec, &pipeline.lm)
            .map_err(|e| ApiError::bad_request(format!("decoder: {e}")))?;
        let requests: Vec<_> = items.iter().map(|(i, _)| i.request.clone()).collect();
        let generations = decoder
            .generate(&pipeline.lm, &requests, &plan.sampler)
            .map_err(|e| ApiError::internal_chain(&TtsError::from(e)))?;
        items
            .iter()
            .zip(generations)
            .map(|(&(item, streamed), g)| {
                let config = self.stream_config(streamed);
                let stream = pipeline
                    .stream(
                        &item.text,
                        item.prompt,
                        &g.tokens,
                        item.request.prompt.durations.as_deref(),
                        config,
                    )
                    .map_err(|e| ApiError::internal_chain(&e))?;
                let stream = AnySpeechStream::SingleStream(stream);
                let speech = Speech {
                    samples: Vec::new(),
                    sample_rate: pipeline.sample_rate(),
                    tokens: g.tokens.len(),
                    forwards: g.stats.target_forwards,
                    drafted: g.stats.drafted,
                    accepted: g.stats.accepted,
                    decoder: plan.spec.label(),
                    batch: items.len(),
                };
                Ok((stream, speech))
            })
            .collect()
    }

    /// Advances one running sequence by a chunk; false once it has finished (or failed, or its
    /// client went away).
    fn advance(&self, sequence: &mut Active<'_>, metrics: &Metrics) -> bool {
        let begin = Instant::now();
        let chunk = guarded(|| {
            sequence
                .stream
                .next_chunk()
                .map_err(|e| ApiError::internal_chain(&e))
        });
        metrics.record_busy(begin.elapsed().as_secs_f64());
        let chunk = match chunk {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return self.finish(sequence, metrics),
            Err(e) => {
                match sequence.sink.take() {
                    Some(Sink::Whole(_, reply)) => {
                        let _ = reply.send(Err(e));
                    }
                    Some(Sink::Stream(tx)) => {
                        let _ = tx.send(Err(e));
                    }
                    None => {}
                }
                return false;
            }
        };
        if !chunk.is_empty() && !sequence.first_audio {
            sequence.first_audio = true;
            metrics.record_first_audio(sequence.arrived.elapsed().as_secs_f64());
        }
        sequence.samples += chunk.len();
        match &mut sequence.sink {
            Some(Sink::Whole(samples, _)) => samples.extend(chunk),
            Some(Sink::Stream(tx)) => {
                if !chunk.is_empty() && tx.send(Ok(chunk)).is_err() {
                    return false; // the client has gone
                }
            }
            None => return false,
        }
        if sequence.stream.is_done() {
            return self.finish(sequence, metrics);
        }
        true
    }

    /// Answers a finished sequence; always false (its slot is free).
    fn finish(&self, sequence: &mut Active<'_>, metrics: &Metrics) -> bool {
        let mut speech = sequence.speech.clone();
        match sequence.sink.take() {
            Some(Sink::Whole(samples, reply)) => {
                speech.samples = samples;
                metrics.record_speech(&speech, sequence.samples);
                let _ = reply.send(Ok(Reply::Whole(speech)));
            }
            Some(Sink::Stream(_)) => metrics.record_speech(&speech, sequence.samples),
            None => {}
        }
        false
    }
}

/// A running sequence on `stream` with its figures `speech`; its audio goes to a stream of
/// chunks (`streamed`) or is gathered for one reply. `None` when the client has gone.
fn activate<'p>(
    stream: AnySpeechStream<'p>,
    speech: Speech,
    streamed: bool,
    arrived: Instant,
    reply: SpeechReply,
) -> Option<Active<'p>> {
    let sink = if streamed {
        let (tx, rx) = chunks::unbounded_channel();
        if reply.send(Ok(Reply::Stream(speech.clone(), rx))).is_err() {
            return None; // the client has gone
        }
        Sink::Stream(tx)
    } else {
        Sink::Whole(Vec::new(), reply)
    };
    Some(Active {
        stream,
        sink: Some(sink),
        speech,
        arrived,
        first_audio: false,
        samples: 0,
    })
}

/// Runs `work`, turning a panic into a 500 that names it.
fn guarded<T>(work: impl FnOnce() -> Result<T, ApiError>) -> Result<T, ApiError> {
    catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| panic.downcast_ref::<&str>().copied())
            .unwrap_or("no message");
        tracing::error!("a synthesis panicked: {what}");
        Err(ApiError::internal(format!(
            "the synthesis panicked: {what}"
        )))
    })
}
