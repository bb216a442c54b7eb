//! A load generator for the server: `clients` concurrent clients on loopback, each sending its
//! share of the requests one after another over plain HTTP/1.1, and the figures a user sizes a
//! deployment by — audio seconds per wall second, time to the first byte of audio and latency
//! percentiles. With `stream` the requests ask for streamed audio, so the first byte of the body
//! is the first chunk of audio; without it the first byte arrives with the last.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::error::ServeError;

/// One load run.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadConfig {
    /// Concurrent clients.
    pub clients: usize,
    /// Requests in total (spread over the clients round-robin).
    pub requests: usize,
    /// Sentences spoken in turn.
    pub sentences: Vec<String>,
    /// The decoder every request names.
    pub decoder: String,
    /// Longest a request may take before the run fails.
    pub timeout: Duration,
    /// Ask for streamed responses (`stream: true`).
    pub stream: bool,
}

/// What one load run measured.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadReport {
    /// Concurrent clients.
    pub clients: usize,
    /// Requests answered with audio.
    pub requests: usize,
    /// Wall time of the run, seconds.
    pub wall_seconds: f64,
    /// Audio produced, seconds.
    pub audio_seconds: f64,
    /// Audio seconds per wall second.
    pub throughput: f64,
    /// Time to the first byte of the response body, median and 95th percentile, seconds.
    pub ttfb_p50: f64,
    /// See `ttfb_p50`.
    pub ttfb_p95: f64,
    /// Request latency (until the last byte), median and 95th percentile, seconds.
    pub latency_p50: f64,
    /// See `latency_p50`.
    pub latency_p95: f64,
    /// Mean `x-batch` of the responses: how many requests shared a decode.
    pub mean_batch: f64,
}

/// One answered request.
struct Sample {
    ttfb: f64,
    latency: f64,
    audio_seconds: f64,
    batch: usize,
}

/// Runs `config` against the server at `addr`.
///
/// # Errors
/// [`ServeError::Config`] for zero clients or requests or no sentence; [`ServeError::Io`] when a
/// request fails or is not answered with audio (the status line is given).
pub fn run_load(addr: SocketAddr, config: &LoadConfig) -> Result<LoadReport, ServeError> {
    if config.clients == 0 || config.requests == 0 || config.sentences.is_empty() {
        return Err(ServeError::Config {
            field: "load",
            reason: "needs at least one client, one request and one sentence".into(),
        });
    }
    let start = Instant::now();
    let results: Vec<Result<Vec<Sample>, ServeError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..config.clients)
            .map(|c| {
                scope.spawn(move || {
                    (c..config.requests)
                        .step_by(config.clients)
                        .map(|i| request(addr, config, i))
                        .collect::<Result<Vec<Sample>, ServeError>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ServeError::Config {
                        field: "load",
                        reason: "a client thread panicked".into(),
                    })
                })
            })
            .collect()
    });
    let wall = start.elapsed().as_secs_f64();
    let mut samples = Vec::new();
    for r in results {
        samples.extend(r?);
    }
    let audio: f64 = samples.iter().map(|s| s.audio_seconds).sum();
    let percentile = |values: &mut Vec<f64>, p: f64| {
        values.sort_by(f64::total_cmp);
        let i = ((values.len() as f64 - 1.0) * p).round() as usize;
        values.get(i).copied().unwrap_or(f64::NAN)
    };
    let mut ttfb: Vec<f64> = samples.iter().map(|s| s.ttfb).collect();
    let mut latency: Vec<f64> = samples.iter().map(|s| s.latency).collect();
    Ok(LoadReport {
        clients: config.clients,
        requests: samples.len(),
        wall_seconds: wall,
        audio_seconds: audio,
        throughput: audio / wall.max(1e-9),
        ttfb_p50: percentile(&mut ttfb, 0.5),
        ttfb_p95: percentile(&mut ttfb, 0.95),
        latency_p50: percentile(&mut latency, 0.5),
        latency_p95: percentile(&mut latency, 0.95),
        mean_batch: samples.iter().map(|s| s.batch as f64).sum::<f64>()
            / samples.len().max(1) as f64,
    })
}

/// Sends request `i` (sentence `i mod n`, seed `i`, 16-bit PCM) and reads the whole response.
fn request(addr: SocketAddr, config: &LoadConfig, i: usize) -> Result<Sample, ServeError> {
    let io = |source| ServeError::Io {
        addr: addr.to_string(),
        source,
    };
    let text = &config.sentences[i % config.sentences.len()];
    let body = serde_json::json!({
        "input": text, "seed": i, "decoder": config.decoder, "response_format": "pcm",
        "stream": config.stream,
    })
    .to_string();
    let start = Instant::now();
    let mut stream = TcpStream::connect(addr).map_err(io)?;
    stream.set_read_timeout(Some(config.timeout)).map_err(io)?;
    write!(
        stream,
        "POST /v1/audio/speech HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .map_err(io)?;
    let mut response = Vec::new();
    let mut chunk = [0u8; 1 << 16];
    let mut ttfb = None;
    let mut head_end = None;
    loop {
        let n = stream.read(&mut chunk).map_err(io)?;
        if n == 0 {
            break;
        }
        response.extend_from_slice(&chunk[..n]);
        if head_end.is_none() {
            head_end = response
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|p| p + 4);
        }
        if ttfb.is_none() && head_end.is_some_and(|h| response.len() > h) {
            ttfb = Some(start.elapsed().as_secs_f64());
        }
    }
    let latency = start.elapsed().as_secs_f64();
    let head_end =
        head_end.ok_or_else(|| io(std::io::Error::other("the response has no complete header")))?;
    let head = String::from_utf8_lossy(&response[..head_end]).to_lowercase();
    if !head.starts_with("http/1.1 200") {
        let status = head.lines().next().unwrap_or("").to_string();
        return Err(io(std::io::Error::other(format!(
            "request {i} was answered {status}"
        ))));
    }
    let header = |name: &str| -> Option<usize> {
        head.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
    };
    let rate = header("x-sample-rate").unwrap_or(1).max(1);
    let body = &response[head_end..];
    let samples = if head.contains("transfer-encoding: chunked") {
        dechunked_len(body) / 2
    } else {
        body.len() / 2
    };
    Ok(Sample {
        ttfb: ttfb.unwrap_or(latency),
        latency,
        audio_seconds: samples as f64 / rate as f64,
        batch: header("x-batch").unwrap_or(1),
    })
}

/// Payload bytes of an HTTP/1.1 chunked body (sizes in hex, each chunk followed by CRLF).
fn dechunked_len(body: &[u8]) -> usize {
    let mut total = 0;
    let mut at = 0;
    while let Some(end) = body[at..].windows(2).position(|w| w == b"\r\n") {
        let line = String::from_utf8_lossy(&body[at..at + end]);
        let size =
            usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        total += size;
        at += end + 2 + size + 2;
        if at >= body.len() {
            break;
        }
    }
    total
}

/// Serves `app` on a loopback port of `runtime`, runs each of `loads` against it in turn
/// (`on_report` sees each report as it comes), then stops the server.
///
/// # Errors
/// [`ServeError::Io`] when no loopback port can be bound or the server fails; the errors of
/// [`run_load`].
pub fn load_test(
    runtime: &tokio::runtime::Runtime,
    app: axum::Router,
    loads: &[LoadConfig],
    on_report: &mut dyn FnMut(&LoadConfig, &LoadReport),
) -> Result<Vec<LoadReport>, ServeError> {
    let io = |source| ServeError::Io {
        addr: "127.0.0.1:0".into(),
        source,
    };
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .map_err(io)?;
    let addr = listener.local_addr().map_err(io)?;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = runtime.spawn(crate::server::serve(listener, app, async {
        let _ = stopped.await;
    }));
    let mut reports = Vec::with_capacity(loads.len());
    let mut failed = None;
    for load in loads {
        match run_load(addr, load) {
            Ok(report) => {
                on_report(load, &report);
                reports.push(report);
            }
            Err(e) => {
                failed = Some(e);
                break;
            }
        }
    }
    let _ = stop.send(());
    let served = runtime
        .block_on(server)
        .map_err(|e| io(std::io::Error::other(e)))?;
    match failed {
        Some(e) => Err(e),
        None => served.map(|()| reports),
    }
}
