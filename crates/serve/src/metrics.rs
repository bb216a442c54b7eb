//! Server metrics in Prometheus' text format (`GET /metrics`): requests by outcome, the queue
//! depth, audio produced, synthesis time (its ratio to the audio is the real-time factor), AR
//! tokens and forwards (their ratio is tokens per forward), drafted and accepted tokens (their
//! ratio is the acceptance rate), and the time to first audio.

use std::fmt::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

use crate::worker::Speech;

/// Counters shared by the handlers and the worker.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Requests answered with audio.
    pub ok: AtomicU64,
    /// Requests answered with a 4xx.
    pub client_errors: AtomicU64,
    /// Requests answered with a 5xx.
    pub server_errors: AtomicU64,
    /// Requests waiting for the worker.
    pub queue_depth: AtomicI64,
    batches: AtomicU64,
    batched: AtomicU64,
    tokens: AtomicU64,
    forwards: AtomicU64,
    drafted: AtomicU64,
    accepted: AtomicU64,
    /// Seconds of audio produced and seconds spent producing it.
    seconds: Mutex<(f64, f64)>,
    /// Sum and count of the times from a request's arrival to its first audio.
    first_audio: Mutex<(f64, u64)>,
}

impl Metrics {
    /// Adds one finished synthesis of `samples` samples.
    pub fn record_speech(&self, speech: &Speech, samples: usize) {
        self.tokens
            .fetch_add(speech.tokens as u64, Ordering::Relaxed);
        self.forwards
            .fetch_add(speech.forwards as u64, Ordering::Relaxed);
        self.drafted
            .fetch_add(speech.drafted as u64, Ordering::Relaxed);
        self.accepted
            .fetch_add(speech.accepted as u64, Ordering::Relaxed);
        let audio = samples as f64 / f64::from(speech.sample_rate.max(1));
        if let Ok(mut s) = self.seconds.lock() {
            s.0 += audio;
        }
    }

    /// Adds one batched AR decode of `size` requests that took `seconds` of wall time.
    pub fn record_batch(&self, size: usize, seconds: f64) {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.batched.fetch_add(size as u64, Ordering::Relaxed);
        self.record_busy(seconds);
    }

    /// Adds `seconds` of synthesis work (a chunk's NAR and codec).
    pub fn record_busy(&self, seconds: f64) {
        if let Ok(mut s) = self.seconds.lock() {
            s.1 += seconds;
        }
    }

    /// Adds one request's time from arrival to its first audio.
    pub fn record_first_audio(&self, seconds: f64) {
        if let Ok(mut f) = self.first_audio.lock() {
            f.0 += seconds;
            f.1 += 1;
        }
    }

    /// The metrics as Prometheus text exposition.
    pub fn render(&self) -> String {
        let (audio, synth) = self.seconds.lock().map(|s| *s).unwrap_or((0.0, 0.0));
        let (ttfa_sum, ttfa_count) = self.first_audio.lock().map(|f| *f).unwrap_or((0.0, 0));
        let mut out = String::new();
        let mut metric = |name: &str, kind: &str, help: &str, lines: &[(String, String)]| {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            for (labels, value) in lines {
                let _ = writeln!(out, "{name}{labels} {value}");
            }
        };
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed).to_string();
        metric(
            "voxspec_requests_total",
            "counter",
            "Speech requests answered, by outcome.",
            &[
                ("{outcome=\"ok\"}".into(), get(&self.ok)),
                (
                    "{outcome=\"client_error\"}".into(),
                    get(&self.client_errors),
                ),
                (
                    "{outcome=\"server_error\"}".into(),
                    get(&self.server_errors),
                ),
            ],
        );
        metric(
            "voxspec_queue_depth",
            "gauge",
            "Requests waiting for the synthesis worker.",
            &[(
                String::new(),
                self.queue_depth.load(Ordering::Relaxed).max(0).to_string(),
            )],
        );
        metric(
            "voxspec_batches_total",
            "counter",
            "Batches decoded.",
            &[(String::new(), get(&self.batches))],
        );
        metric(
            "voxspec_batched_requests_total",
            "counter",
            "Requests decoded in batches (divided by the batches: the mean batch size).",
            &[(String::new(), get(&self.batched))],
        );
        metric(
            "voxspec_audio_seconds_total",
            "counter",
            "Seconds of audio produced.",
            &[(String::new(), format!("{audio}"))],
        );
        metric(
            "voxspec_synthesis_seconds_total",
            "counter",
            "Wall seconds spent synthesising (divided by the audio seconds: the real-time factor).",
            &[(String::new(), format!("{synth}"))],
        );
        metric(
            "voxspec_time_to_first_audio_seconds",
            "summary",
            "Seconds from a request's arrival to its first audio (sum and count: the mean).",
            &[
                ("_sum".into(), format!("{ttfa_sum}")),
                ("_count".into(), ttfa_count.to_string()),
            ],
        );
        metric(
            "voxspec_ar_tokens_total",
            "counter",
            "Codes generated by the AR stage.",
            &[(String::new(), get(&self.tokens))],
        );
        metric(
            "voxspec_ar_forwards_total",
            "counter",
            "Forwards of the AR model (tokens divided by forwards: tokens per forward).",
            &[(String::new(), get(&self.forwards))],
        );
        metric(
            "voxspec_drafted_tokens_total",
            "counter",
            "Tokens proposed for verification by speculative decoders (self-spec).",
            &[(String::new(), get(&self.drafted))],
        );
        metric(
            "voxspec_accepted_tokens_total",
            "counter",
            "Proposed tokens kept by the verification (divided by the drafted: the acceptance rate).",
            &[(String::new(), get(&self.accepted))],
        );
        out
    }
}
