//! The synthesis worker: one thread owns the pipeline and runs requests in arrival order (the
//! CPU is the bottleneck; HTTP handlers only wait on it). A request is checked here against the
//! loaded models before it runs, and a panic inside one synthesis is caught and answered with a
//! 500, so it never takes the server down.

use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use tokio::sync::oneshot;
use voxspec_infer::SamplerConfig;
use voxspec_tts::{
    DecoderParts, DecoderSpec, Lengths, Pipeline, RuleSpec, SpeechItem, TtsError, VoicePrompt,
};

use crate::api::SpeechRequest;
use crate::error::ApiError;
use crate::metrics::Metrics;

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
    /// Longest accepted `input`, in characters.
    pub max_input_chars: usize,
    /// Most requests decoded together: the worker takes up to this many waiting requests and
    /// runs those with the same decoder and sampler as one batch.
    pub max_batch: usize,
    /// How long the worker waits for more requests after the first of a batch (latency traded
    /// for throughput; zero: it takes only what is already waiting).
    pub batch_wait: Duration,
}

impl Default for Defaults {
    fn default() -> Self {
        Self {
            decoder: "mtp-viterbi".into(),
            heads: 4,
            top_k: 5,
            sampler: SamplerConfig::default(),
            max_input_chars: 1000,
            max_batch: 8,
            batch_wait: Duration::from_millis(5),
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
    /// The decoder that ran ([`DecoderSpec::label`]).
    pub decoder: String,
    /// Requests in the batch it ran in (itself included).
    pub batch: usize,
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
type SpeechReply = oneshot::Sender<Result<Speech, ApiError>>;

/// Work for the worker.
enum Job {
    Speech {
        request: SpeechRequest,
        reply: oneshot::Sender<Result<Speech, ApiError>>,
    },
    Voice {
        name: String,
        audio: Vec<u8>,
        reply: oneshot::Sender<Result<VoiceInfo, ApiError>>,
    },
}

/// A handle on the worker: cheap to clone, one per HTTP handler.
#[derive(Clone)]
pub struct Synthesizer {
    jobs: mpsc::Sender<Job>,
    metrics: Arc<Metrics>,
    names: Arc<RwLock<Vec<String>>>,
}

/// What the worker owns.
struct Worker {
    pipeline: Pipeline,
    parts: DecoderParts,
    voices: BTreeMap<String, VoicePrompt>,
    names: Arc<RwLock<Vec<String>>>,
    defaults: Defaults,
}

impl Synthesizer {
    /// Starts the worker thread on `pipeline` with decoder `parts` (a transition matrix enables
    /// `mtp-viterbi`) and the registered `voices`.
    pub fn spawn(
        pipeline: Pipeline,
        parts: DecoderParts,
        voices: BTreeMap<String, VoicePrompt>,
        defaults: Defaults,
        metrics: Arc<Metrics>,
    ) -> Self {
        let (jobs, queue) = mpsc::channel::<Job>();
        let names = Arc::new(RwLock::new(voices.keys().cloned().collect()));
        let worker = Worker {
            pipeline,
            parts,
            voices,
            names: names.clone(),
            defaults,
        };
        let m = metrics.clone();
        std::thread::Builder::new()
            .name("voxspec-synth".into())
            .spawn(move || worker.run(queue, &m))
            .map(|_| ())
            .unwrap_or_else(|e| tracing::error!("cannot start the synthesis thread: {e}"));
        Self {
            jobs,
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
    pub async fn synthesize(&self, request: SpeechRequest) -> Result<Speech, ApiError> {
        let (reply, answer) = oneshot::channel();
        self.metrics.queue_depth.fetch_add(1, Ordering::Relaxed);
        if self.jobs.send(Job::Speech { request, reply }).is_err() {
            self.metrics.queue_depth.fetch_sub(1, Ordering::Relaxed);
            return Err(ApiError::unavailable("the synthesis worker has stopped"));
        }
        answer
            .await
            .map_err(|_| ApiError::unavailable("the synthesis worker has stopped"))?
    }
}

impl Worker {
    fn run(mut self, queue: mpsc::Receiver<Job>, metrics: &Metrics) {
        // Block for one request, then take what arrives within the batch wait, up to the limit.
        while let Ok(first) = queue.recv() {
            let deadline = Instant::now() + self.defaults.batch_wait;
            let mut jobs = vec![first];
            while jobs.len() < self.defaults.max_batch.max(1) {
                let left = deadline.saturating_duration_since(Instant::now());
                let next = if left.is_zero() {
                    queue.try_recv().ok()
                } else {
                    queue.recv_timeout(left).ok()
                };
                match next {
                    Some(job) => jobs.push(job),
                    None => break,
                }
            }
            let mut speech = Vec::new();
            for job in jobs {
                match job {
                    Job::Speech { request, reply } => speech.push((request, reply)),
                    // Voices first: a request of this batch may name one.
                    Job::Voice { name, audio, reply } => {
                        let _ = reply.send(self.add_voice(name, audio));
                    }
                }
            }
            metrics
                .queue_depth
                .fetch_sub(speech.len() as i64, Ordering::Relaxed);
            self.run_jobs(speech, metrics);
        }
    }

    /// Decodes and encodes an uploaded voice and registers it.
    fn add_voice(&mut self, name: String, audio: Vec<u8>) -> Result<VoiceInfo, ApiError> {
        if name == "default" || self.voices.contains_key(&name) {
            return Err(ApiError {
                status: StatusCode::CONFLICT,
                message: format!("name: the voice {name:?} exists already"),
            });
        }
        let label = PathBuf::from(format!("uploaded voice {name}"));
        let audio = voxspec_audio::load_bytes(audio, &label)
            .map_err(|e| ApiError::bad_request(format!("audio: {e}")))?;
        let prompt = catch_unwind(AssertUnwindSafe(|| {
            self.pipeline.encode_voice(&audio, &label, None)
        }))
        .map_err(|_| ApiError::internal("encoding the voice panicked"))?
        .map_err(|e| ApiError::bad_request(format!("audio: {e}")))?;
        self.voices.insert(name.clone(), prompt);
        if let Ok(mut names) = self.names.write() {
            names.push(name.clone());
        }
        tracing::info!(voice = %name, "voice uploaded");
        Ok(VoiceInfo {
            voice: name,
            seconds: audio.duration_secs(),
        })
    }

    /// Checks every request (answering the bad ones), then runs the others in batches of equal
    /// decoder and sampler.
    fn run_jobs(&self, jobs: Vec<(SpeechRequest, SpeechReply)>, metrics: &Metrics) {
        let mut groups: Vec<(Plan, Vec<(SpeechItem<'_>, SpeechReply)>)> = Vec::new();
        for (request, reply) in jobs {
            match self.prepare(&request) {
                Ok((plan, item)) => match groups.iter_mut().find(|(p, _)| *p == plan) {
                    Some((_, members)) => members.push((item, reply)),
                    None => groups.push((plan, vec![(item, reply)])),
                },
                Err(e) => {
                    let _ = reply.send(Err(e));
                }
            }
        }
        for (plan, members) in groups {
            let start = Instant::now();
            let (items, jobs): (Vec<SpeechItem<'_>>, Vec<SpeechReply>) =
                members.into_iter().unzip();
            let result = catch_unwind(AssertUnwindSafe(|| self.run_batch(&plan, &items)))
                .unwrap_or_else(|panic| {
                    let what = panic
                        .downcast_ref::<String>()
                        .map(String::as_str)
                        .or_else(|| panic.downcast_ref::<&str>().copied())
                        .unwrap_or("no message");
                    tracing::error!("a synthesis panicked: {what}");
                    Err(ApiError::internal(format!(
                        "the synthesis panicked: {what}"
                    )))
                });
            let seconds = start.elapsed().as_secs_f64();
            metrics.record_batch(jobs.len(), seconds);
            match result {
                Ok(speeches) => {
                    for (speech, reply) in speeches.into_iter().zip(jobs) {
                        metrics.record_speech(&speech);
                        // The client may have gone; nothing to do then.
                        let _ = reply.send(Ok(speech));
                    }
                }
                Err(e) => {
                    for reply in jobs {
                        let _ = reply.send(Err(e.clone()));
                    }
                }
            }
        }
    }

    fn run_batch(&self, plan: &Plan, items: &[SpeechItem<'_>]) -> Result<Vec<Speech>, ApiError> {
        let mut decoder = self
            .parts
            .build(&plan.spec, &self.pipeline.lm)
            .map_err(|e| ApiError::bad_request(format!("decoder: {e}")))?;
        let out = self
            .pipeline
            .synthesize_batch(decoder.as_mut(), items, &plan.sampler)
            .map_err(|e| ApiError::internal_chain(&e))?;
        Ok(out
            .into_iter()
            .map(|o| Speech {
                samples: o.samples,
                sample_rate: self.pipeline.sample_rate(),
                tokens: o.generation.tokens.len(),
                forwards: o.generation.stats.target_forwards,
                decoder: plan.spec.label(),
                batch: items.len(),
            })
            .collect())
    }

    /// The decoder of a request.
    fn spec(&self, request: &SpeechRequest) -> Result<DecoderSpec, ApiError> {
        let heads = request.heads.unwrap_or(self.defaults.heads);
        if heads == 0 {
            return Err(ApiError::bad_request("heads: must be at least 1"));
        }
        let name = request.decoder.as_deref().unwrap_or(&self.defaults.decoder);
        Ok(match name {
            "ar" => DecoderSpec::Ar,
            "mtp" => DecoderSpec::Mtp { heads },
            "mtp-viterbi" => DecoderSpec::MtpViterbi {
                heads,
                top_k: self.defaults.top_k,
            },
            "self-spec" => DecoderSpec::SelfSpec {
                rule: RuleSpec::Sd,
                gamma: heads.saturating_sub(1).max(1),
            },
            other => {
                return Err(ApiError::bad_request(format!(
                    "decoder: unknown decoder {other:?} (ar, mtp, mtp-viterbi, self-spec)"
                )));
            }
        })
    }

    /// Checks `request` against the models and makes its AR request. The decoder is built once
    /// per batch ([`Worker::run_batch`]); a spec it refuses answers that batch with a 400.
    fn prepare(&self, request: &SpeechRequest) -> Result<(Plan, SpeechItem<'_>), ApiError> {
        let chars = request.input.chars().count();
        if request.input.trim().is_empty() {
            return Err(ApiError::bad_request("input: the text is empty"));
        }
        if chars > self.defaults.max_input_chars {
            return Err(ApiError::bad_request(format!(
                "input: {chars} characters, more than the server's limit of {}",
                self.defaults.max_input_chars
            )));
        }
        if request.stream {
            return Err(ApiError::bad_request(
                "stream: streaming responses are not supported yet; leave it false",
            ));
        }
        let voice = match request.voice.as_deref() {
            None | Some("default") => None,
            Some(name) => Some(self.voices.get(name).ok_or_else(|| {
                ApiError::bad_request(format!(
                    "voice: unknown voice {name:?} (registered: default{})",
                    self.voices
                        .keys()
                        .map(|k| format!(", {k}"))
                        .collect::<String>()
                ))
            })?),
        };
        let pace = match request.speed {
            None => 1.0,
            Some(s) if (0.25..=4.0).contains(&s) => 1.0 / s,
            Some(s) => {
                return Err(ApiError::bad_request(format!(
                    "speed: {s} is outside 0.25..=4"
                )));
            }
        };
        let mut sampler = self.defaults.sampler;
        if let Some(t) = request.temperature {
            sampler.temperature = t;
        }
        sampler
            .validate()
            .map_err(|e| ApiError::bad_request(format!("temperature: {e}")))?;
        let spec = self.spec(request)?;
        let text = self
            .pipeline
            .text_ids(&request.input)
            .map_err(|e| ApiError::bad_request(format!("input: {e}")))?;
        let lengths = Lengths {
            pace,
            ..Lengths::default()
        };
        let ar_request = self
            .pipeline
            .request(&text, voice, &lengths, request.seed.unwrap_or(0))
            .map_err(|e| match e {
                TtsError::Text(m) => ApiError::bad_request(format!("input: {m}")),
                other => ApiError::internal_chain(&other),
            })?;
        Ok((
            Plan { spec, sampler },
            SpeechItem {
                request: ar_request,
                text,
                prompt: voice,
            },
        ))
    }
}

/// What a batch shares: the decoder and the sampler.
#[derive(Debug, Clone, PartialEq)]
struct Plan {
    spec: DecoderSpec,
    sampler: SamplerConfig,
}
