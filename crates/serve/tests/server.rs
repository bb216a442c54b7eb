//! The server on an untrained experiment with the shipped codec: audio comes back as WAV or PCM
//! (equal samples, same seed → same bytes), every bad request gets a 4xx JSON error naming the
//! field and none stops the server, the metrics count what happened, and `serve` answers over a
//! real socket and shuts down gracefully.

use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use burn::tensor::Device;
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;
use voxspec_serve::{Defaults, LoadConfig, ServerConfig, build_app, run_load, serve};
use voxspec_tts::{DecoderParts, NarWindow, Pipeline, StreamConfig, write_untrained_experiment};

fn app(dir: &Path) -> Router {
    app_with(dir, Duration::ZERO)
}

/// The app with `batch_wait`: how long the worker gathers requests for a batch.
fn app_with(dir: &Path, batch_wait: Duration) -> Router {
    app_from(
        dir,
        Defaults {
            batch_wait,
            ..Defaults::default()
        },
    )
}

/// The app with `defaults` (decoder, heads and input limit set for the tests).
fn app_from(dir: &Path, defaults: Defaults) -> Router {
    let codec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/codec-minitts");
    let device = Device::flex();
    let paths = write_untrained_experiment(dir, &codec, &device).unwrap();
    let pipeline = Pipeline::load(&paths, &device).unwrap();
    let config = ServerConfig {
        defaults: Defaults {
            decoder: "mtp".into(),
            heads: 2,
            max_input_chars: 200,
            ..defaults
        },
        max_body_bytes: 4096,
        ..ServerConfig::default()
    };
    build_app(pipeline, DecoderParts::default(), &config).unwrap()
}

async fn call(app: &Router, method: &str, uri: &str, body: Body) -> (StatusCode, String, Vec<u8>) {
    let request = Request::builder()
        .method(method)
        .uri(uri)
        .header("content-type", "application/json")
        .body(body)
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let content_type = response
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, content_type, bytes.to_vec())
}

async fn speak(app: &Router, body: Value) -> (StatusCode, String, Vec<u8>) {
    call(
        app,
        "POST",
        "/v1/audio/speech",
        Body::from(body.to_string()),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speech_health_metrics_and_bad_requests() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());

    let (status, content_type, page) = call(&app, "GET", "/", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type.starts_with("text/html"), "{content_type}");
    let page = String::from_utf8(page).unwrap();
    for id in [
        "id=\"text\"",
        "id=\"voice\"",
        "id=\"decoder\"",
        "id=\"play\"",
        "id=\"status\"",
    ] {
        assert!(page.contains(id), "the page lacks {id}");
    }

    let (status, _, body) = call(&app, "GET", "/health", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    let health: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(health["status"], "ok");
    let rate = health["sample_rate"].as_u64().unwrap();

    // WAV: a valid 16-bit mono file at the codec's rate; the same seed gives the same bytes.
    let request = json!({"model": "tts-1", "input": "The cat sat on the mat.", "voice": "default", "seed": 7});
    let (status, content_type, wav) = speak(&app, request.clone()).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&wav));
    assert_eq!(content_type, "audio/wav");
    let reader = hound::WavReader::new(std::io::Cursor::new(&wav)).unwrap();
    let spec = reader.spec();
    assert_eq!((spec.channels, spec.bits_per_sample), (1, 16));
    assert_eq!(u64::from(spec.sample_rate), rate);
    let samples: Vec<i16> = reader.into_samples().map(Result::unwrap).collect();
    assert!(!samples.is_empty());
    assert_eq!(speak(&app, request.clone()).await.2, wav);

    // PCM: the same samples, little-endian, no header.
    let mut pcm_request = request.clone();
    pcm_request["response_format"] = json!("pcm");
    let (status, content_type, pcm) = speak(&app, pcm_request).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "audio/pcm");
    let pcm: Vec<i16> = pcm
        .chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect();
    assert_eq!(pcm, samples);

    // Bad requests: a 4xx with a JSON error naming the field; the server goes on.
    let long = "word ".repeat(60);
    let cases: Vec<(Value, StatusCode, &str)> = vec![
        (json!({"input": "   "}), StatusCode::BAD_REQUEST, "input"),
        (json!({"input": long}), StatusCode::BAD_REQUEST, "limit"),
        (
            json!({"input": "hi", "voice": "nobody"}),
            StatusCode::BAD_REQUEST,
            "voice",
        ),
        (
            json!({"input": "hi", "decoder": "magic"}),
            StatusCode::BAD_REQUEST,
            "unknown decoder",
        ),
        (
            json!({"input": "hi", "decoder": "mtp-viterbi"}),
            StatusCode::BAD_REQUEST,
            "transition matrix",
        ),
        (
            json!({"input": "hi", "heads": 0}),
            StatusCode::BAD_REQUEST,
            "heads",
        ),
        (
            json!({"input": "hi", "heads": 9}),
            StatusCode::BAD_REQUEST,
            "prediction heads",
        ),
        (
            json!({"input": "hi", "speed": 10.0}),
            StatusCode::BAD_REQUEST,
            "speed",
        ),
        (
            json!({"input": "hi", "stream": true, "voice": "nobody"}),
            StatusCode::BAD_REQUEST,
            "voice",
        ),
        (
            json!({"input": "hi", "temperature": -1.0}),
            StatusCode::BAD_REQUEST,
            "temperature",
        ),
        (
            json!({"input": "hi", "response_format": "mp3"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "response_format",
        ),
        (
            json!({"voice": "default"}),
            StatusCode::UNPROCESSABLE_ENTITY,
            "input",
        ),
    ];
    for (body, expected, needle) in &cases {
        let (status, content_type, bytes) = speak(&app, body.clone()).await;
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(status, *expected, "{body}: {text}");
        assert_eq!(content_type, "application/json", "{body}");
        let error: Value = serde_json::from_slice(&bytes).unwrap();
        let message = error["error"]["message"].as_str().unwrap();
        assert!(message.contains(needle), "{body}: {message}");
    }
    let (status, _, _) = call(&app, "POST", "/v1/audio/speech", Body::from("{not json")).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let huge = json!({"input": "a".repeat(10_000)}).to_string();
    let (status, _, _) = call(&app, "POST", "/v1/audio/speech", Body::from(huge)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(speak(&app, request).await.0, StatusCode::OK);
    // Self-speculation drafts and verifies: the metrics count both.
    let self_spec = json!({"input": "The cat sat on the mat.", "decoder": "self-spec", "seed": 1});
    assert_eq!(speak(&app, self_spec).await.0, StatusCode::OK);

    // Metrics: 5 answered with audio, every bad request counted.
    let (status, content_type, body) = call(&app, "GET", "/metrics", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    assert!(content_type.starts_with("text/plain"));
    let text = String::from_utf8(body).unwrap();
    assert!(
        text.contains("voxspec_requests_total{outcome=\"ok\"} 5"),
        "{text}"
    );
    let value = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(&format!("{name} ")))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name} missing in {text}"))
    };
    let (drafted, accepted) = (
        value("voxspec_drafted_tokens_total"),
        value("voxspec_accepted_tokens_total"),
    );
    assert!(
        drafted > 0.0 && accepted <= drafted,
        "drafted {drafted}, accepted {accepted}"
    );
    assert_eq!(value("voxspec_time_to_first_audio_seconds_count"), 5.0);
    assert!(value("voxspec_time_to_first_audio_seconds_sum") > 0.0);
    let client = format!(
        "voxspec_requests_total{{outcome=\"client_error\"}} {}",
        cases.len() + 2
    );
    assert!(text.contains(&client), "{text}");
    assert!(text.contains("voxspec_queue_depth 0"), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn voices_are_uploaded_and_used() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../datasets/minitts/test-clean");
    let flac = std::fs::read_dir(&root)
        .unwrap()
        .flat_map(|d| walk(&d.unwrap().path()))
        .find(|p| p.extension().is_some_and(|e| e == "flac"))
        .expect("a FLAC file of the bundled corpus");
    let upload = |name: &str, bytes: Vec<u8>| {
        let app = app.clone();
        let uri = format!("/v1/voices?name={name}");
        async move { call(&app, "POST", &uri, Body::from(bytes)).await }
    };
    let (status, _, body) = upload("reader", std::fs::read(&flac).unwrap()).await;
    assert_eq!(
        status,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    let info: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(info["voice"], "reader");
    assert!(info["seconds"].as_f64().unwrap() > 0.5);

    // Listed, and used: the NAR is conditioned on it, so the audio differs from no voice.
    let (_, _, list) = call(&app, "GET", "/v1/voices", Body::empty()).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&list).unwrap(),
        json!(["default", "reader"])
    );
    let (_, _, health) = call(&app, "GET", "/health", Body::empty()).await;
    assert_eq!(
        serde_json::from_slice::<Value>(&health).unwrap()["voices"],
        json!(["reader"])
    );
    let with = |voice: &str| json!({"input": "The cat sat on the mat.", "voice": voice, "seed": 3});
    let (status, _, voiced) = speak(&app, with("reader")).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&voiced)
    );
    let (_, _, plain) = speak(&app, with("default")).await;
    assert_ne!(voiced, plain);

    // Bad uploads: taken or reserved names, bad names, audio that is not audio, no name.
    for (name, bytes, expected, needle) in [
        (
            "reader",
            std::fs::read(&flac).unwrap(),
            StatusCode::CONFLICT,
            "exists",
        ),
        (
            "default",
            std::fs::read(&flac).unwrap(),
            StatusCode::CONFLICT,
            "exists",
        ),
        ("a%20b", vec![1, 2, 3], StatusCode::BAD_REQUEST, "name"),
        (
            "noise",
            b"not audio at all".to_vec(),
            StatusCode::BAD_REQUEST,
            "audio",
        ),
        ("empty", Vec::new(), StatusCode::BAD_REQUEST, "audio"),
    ] {
        let (status, _, body) = upload(name, bytes).await;
        let text = String::from_utf8_lossy(&body);
        assert_eq!(status, expected, "{name}: {text}");
        assert!(text.contains(needle), "{name}: {text}");
    }
    let (status, _, _) = call(&app, "POST", "/v1/voices", Body::from(vec![0u8; 10])).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

/// Serves `app` on an ephemeral loopback port: its address, the shutdown trigger and the task.
async fn on_socket(
    app: Router,
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<Result<(), voxspec_serve::ServeError>>,
) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, app, async {
        let _ = stopped.await;
    }));
    (addr, stop, server)
}

/// Every file below `path` (or `path` itself).
fn walk(path: &Path) -> Vec<std::path::PathBuf> {
    if path.is_dir() {
        std::fs::read_dir(path)
            .unwrap()
            .flat_map(|e| walk(&e.unwrap().path()))
            .collect()
    } else {
        vec![path.to_path_buf()]
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_are_batched_and_get_their_own_audio() {
    let dir = tempfile::tempdir().unwrap();
    // A long wait makes the batching certain on a busy machine.
    let app = app_with(dir.path(), Duration::from_millis(200));
    const SENTENCES: [&str; 3] = [
        "Hello.",
        "The cat sat on the mat.",
        "Good morning to you all.",
    ];
    let body = |i: usize| json!({"input": SENTENCES[i % 3], "seed": i, "response_format": "pcm"});
    let mut alone = Vec::new();
    for i in 0..6 {
        let (status, _, bytes) = speak(&app, body(i)).await;
        assert_eq!(status, StatusCode::OK);
        alone.push(bytes);
    }
    let calls: Vec<_> = (0..6)
        .map(|i| {
            let app = app.clone();
            tokio::spawn(async move {
                let request = Request::builder()
                    .method("POST")
                    .uri("/v1/audio/speech")
                    .header("content-type", "application/json")
                    .body(Body::from(body(i).to_string()))
                    .unwrap();
                let response = app.oneshot(request).await.unwrap();
                let batch: usize = response.headers()["x-batch"]
                    .to_str()
                    .unwrap()
                    .parse()
                    .unwrap();
                let bytes = response.into_body().collect().await.unwrap().to_bytes();
                (batch, bytes.to_vec())
            })
        })
        .collect();
    let mut largest = 0;
    for (i, call) in calls.into_iter().enumerate() {
        let (batch, bytes) = call.await.unwrap();
        largest = largest.max(batch);
        assert_eq!(bytes, alone[i], "request {i} (batch of {batch})");
    }
    assert!(largest > 1, "six concurrent requests never shared a batch");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_over_a_socket_and_shuts_down_gracefully() {
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let (addr, stop, server) = on_socket(app).await;
    let response = tokio::task::spawn_blocking(move || {
        let body = json!({"input": "Hello there.", "response_format": "pcm"}).to_string();
        let mut stream = std::net::TcpStream::connect(addr).unwrap();
        write!(
            stream,
            "POST /v1/audio/speech HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut response = Vec::new();
        stream.read_to_end(&mut response).unwrap();
        response
    })
    .await
    .unwrap();
    let head = String::from_utf8_lossy(&response[..response.len().min(200)]).to_string();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.to_lowercase().contains("x-sample-rate"), "{head}");

    // The load generator: every request answered, the figures consistent.
    let load = LoadConfig {
        clients: 2,
        requests: 5,
        sentences: vec!["Hello.".into(), "The cat sat on the mat.".into()],
        decoder: "mtp".into(),
        timeout: Duration::from_secs(60),
        stream: false,
    };
    let streamed = LoadConfig {
        stream: true,
        ..load.clone()
    };
    let report = tokio::task::spawn_blocking(move || run_load(addr, &load))
        .await
        .unwrap()
        .unwrap();
    assert_eq!((report.clients, report.requests), (2, 5));
    assert!(report.audio_seconds > 0.0 && report.throughput > 0.0);
    assert!(report.ttfb_p50 <= report.latency_p50 && report.latency_p50 <= report.latency_p95);
    assert!(report.mean_batch >= 1.0);
    // Streamed (chunked) responses carry the same audio: same seeds, same codes, same length.
    let stream_report = tokio::task::spawn_blocking(move || run_load(addr, &streamed))
        .await
        .unwrap()
        .unwrap();
    assert!(
        (stream_report.audio_seconds - report.audio_seconds).abs() < 1e-9,
        "streamed {} s against whole {} s",
        stream_report.audio_seconds,
        report.audio_seconds
    );
    let bad = LoadConfig {
        decoder: "magic".into(),
        ..LoadConfig {
            clients: 1,
            requests: 1,
            sentences: vec!["Hello.".into()],
            decoder: String::new(),
            timeout: Duration::from_secs(60),
            stream: false,
        }
    };
    let err = tokio::task::spawn_blocking(move || run_load(addr, &bad))
        .await
        .unwrap()
        .unwrap_err();
    assert!(err.to_string().contains("400"), "{err}");
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// The page in headless Chromium: it types a sentence, presses play, and the audio arrives (the
/// status line reports its duration and the time to first audio). Needs Chromium (Debian:
/// `apt install chromium`): `cargo test --release -p voxspec-serve -- --ignored`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs chromium (apt install chromium); run with --ignored"]
async fn the_page_speaks_in_headless_chromium() {
    let browser = ["chromium", "chromium-browser", "google-chrome"]
        .into_iter()
        .find(|b| {
            std::process::Command::new(b)
                .arg("--version")
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("Chromium is not installed (apt install chromium)");
    let dir = tempfile::tempdir().unwrap();
    let app = app(dir.path());
    let (addr, stop, server) = on_socket(app).await;
    let profile = tempfile::tempdir().unwrap();
    let url = format!("http://{addr}/?say=The%20cat%20sat%20on%20the%20mat.");
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--autoplay-policy=no-user-gesture-required",
                "--virtual-time-budget=30000",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("--dump-dom")
            .arg(url)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let dom = String::from_utf8_lossy(&output.stdout);
    let status = dom
        .split("id=\"status\"")
        .nth(1)
        .and_then(|s| s.split("</div>").next())
        .unwrap_or_default()
        .to_string();
    assert!(
        status.contains("audio: ") && status.contains("time to first audio"),
        "status {status:?}; stderr {}",
        String::from_utf8_lossy(&output.stderr)
    );
    stop.send(()).unwrap();
    server.await.unwrap().unwrap();
}

/// 16-bit samples of little-endian PCM bytes.
/// The largest difference between two sample sequences, in LSB.
fn max_difference(a: &[i16], b: &[i16]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (i32::from(*x) - i32::from(*y)).abs())
        .max()
        .unwrap_or(0)
}

/// The app streaming in small chunks with one NAR pass per utterance: its streamed audio is
/// then the whole response's, chunk joins aside.
fn whole_nar_app(dir: &Path) -> Router {
    app_from(
        dir,
        Defaults {
            stream: StreamConfig {
                first_frames: 9,
                chunk_frames: 5,
                nar: NarWindow::Whole,
            },
            ..Defaults::default()
        },
    )
}

fn samples(pcm: &[u8]) -> Vec<i16> {
    pcm.chunks_exact(2)
        .map(|b| i16::from_le_bytes([b[0], b[1]]))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_audio_arrives_in_chunks_and_equals_the_whole_response() {
    let dir = tempfile::tempdir().unwrap();
    let app = whole_nar_app(dir.path());
    let body = json!({"input": "The cat sat on the mat.", "seed": 3, "response_format": "pcm"});
    let (status, _, whole) = speak(&app, body.clone()).await;
    assert_eq!(status, StatusCode::OK);
    let mut streamed_body = body.clone();
    streamed_body["stream"] = json!(true);
    let request = Request::builder()
        .method("POST")
        .uri("/v1/audio/speech")
        .header("content-type", "application/json")
        .body(Body::from(streamed_body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers().get("content-length").is_none());
    let mut body = response.into_body();
    let mut frames = 0;
    let mut streamed = Vec::new();
    while let Some(frame) = body.frame().await {
        let frame = frame.unwrap();
        if let Some(data) = frame.data_ref() {
            frames += 1;
            streamed.extend_from_slice(data);
        }
    }
    assert!(frames > 2, "the audio came in {frames} body frame(s)");
    let (a, b) = (samples(&whole), samples(&streamed));
    assert_eq!(a.len(), b.len());
    let worst = max_difference(&a, &b);
    assert!(worst <= 1, "streamed and whole audio differ by {worst} LSB");

    // A WAV stream starts with a header whose sizes are left open.
    streamed_body["response_format"] = json!("wav");
    let (status, content_type, wav) = speak(&app, streamed_body).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(content_type, "audio/wav");
    assert_eq!(&wav[..4], b"RIFF");
    assert_eq!(&wav[36..40], b"data");
    assert_eq!(samples(&wav[44..]).len(), b.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_request_joins_a_running_one_and_finishes_first() {
    let dir = tempfile::tempdir().unwrap();
    // One frame per round for every sequence: the long request runs for many rounds.
    let app = app_from(
        dir.path(),
        Defaults {
            max_batch: 4,
            chunk_frames: 1,
            stream: StreamConfig {
                first_frames: 1,
                chunk_frames: 1,
                nar: NarWindow::Whole,
            },
            ..Defaults::default()
        },
    );
    // The untrained models have 64 positions: a short text leaves room for a long utterance, a
    // long text for a short one.
    let long = json!({"input": "Hi.", "seed": 1, "response_format": "pcm", "stream": true});
    let request = Request::builder()
        .method("POST")
        .uri("/v1/audio/speech")
        .header("content-type", "application/json")
        .body(Body::from(long.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let long_tokens: usize = response.headers()["x-ar-tokens"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    let mut body = response.into_body();
    // The long sequence is running: its first audio is here.
    let first = body.frame().await.unwrap().unwrap();
    assert!(first.data_ref().is_some_and(|d| !d.is_empty()));
    let reader = tokio::spawn(async move {
        while let Some(frame) = body.frame().await {
            frame.unwrap();
        }
        std::time::Instant::now()
    });
    let short = json!({"input": "A longer sentence with rather more words in it.", "seed": 2,
        "response_format": "pcm"});
    let (status, _, short) = speak(&app, short).await;
    let short_done = std::time::Instant::now();
    assert_eq!(status, StatusCode::OK);
    assert!(!short.is_empty());
    assert!(
        long_tokens > 2 * samples(&short).len() / 320,
        "{long_tokens} frames is not long"
    );
    let long_done = reader.await.unwrap();
    assert!(
        short_done < long_done,
        "the short request waited for the long one ({long_tokens} frames) to end"
    );
}

/// A POST of `body` to the speech endpoint: status, headers and body.
async fn speak_with_headers(
    app: &Router,
    body: &Value,
) -> (StatusCode, axum::http::HeaderMap, Vec<u8>) {
    let request = Request::builder()
        .method("POST")
        .uri("/v1/audio/speech")
        .header("content-type", "application/json")
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = app.clone().oneshot(request).await.unwrap();
    let (status, headers) = (response.status(), response.headers().clone());
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, headers, bytes.to_vec())
}

/// The server on a tiny random multi-stream LM, SoCodec and vocoder: it refuses to start without
/// a voice (or with a missing recording, named), reports the LM's kind and decoders, and answers
/// with a WAV at the codec's rate holding exactly the LM's frames of audio (640 samples each),
/// the same for the same seed, streamed or whole; the decoders the LM cannot run get a 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serves_a_multistream_lm() {
    use voxspec_audio::{Audio, WavFormat, write_wav};
    use voxspec_tts::{MultiStreamPipeline, write_untrained_multistream};

    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    let paths = write_untrained_multistream(dir.path(), &device).unwrap();
    // The voice: half a second of a tone at 22.05 kHz (resampled to the codec's 16 kHz).
    let reference = dir.path().join("reference.wav");
    let tone: Vec<f32> = (0..11025).map(|i| 0.3 * (i as f32 * 0.05).sin()).collect();
    write_wav(&reference, &Audio::new(tone, 22050), WavFormat::Pcm16).unwrap();
    let load = || MultiStreamPipeline::load(&paths, &device).unwrap();
    let config = ServerConfig {
        defaults: Defaults {
            decoder: "ar".into(),
            batch_wait: Duration::ZERO,
            ..Defaults::default()
        },
        ..ServerConfig::default()
    };

    let start_error = |config: &ServerConfig| {
        build_app(load(), DecoderParts::default(), config)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    };
    let err = start_error(&config);
    assert!(err.contains("voice of a reference recording"), "{err}");
    let missing = ServerConfig {
        default_voice: Some(dir.path().join("nobody.wav")),
        ..config.clone()
    };
    let err = start_error(&missing);
    assert!(err.contains("nobody.wav"), "{err}");
    // The LM has 2 heads: a default of 4 is refused at start, not on every request.
    let mut four = ServerConfig {
        default_voice: Some(reference.clone()),
        ..config.clone()
    };
    four.defaults.decoder = "mtp".into();
    let err = start_error(&four);
    assert!(
        err.contains("--heads 4") && err.contains("2 prediction head"),
        "{err}"
    );

    let app = build_app(
        load(),
        DecoderParts::default(),
        &ServerConfig {
            default_voice: Some(reference),
            ..config
        },
    )
    .unwrap();
    let (status, _, body) = call(&app, "GET", "/health", Body::empty()).await;
    assert_eq!(status, StatusCode::OK);
    let health: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(health["kind"], "multistream");
    assert_eq!(health["sample_rate"], 16000);
    assert_eq!(health["decoders"], json!(["ar", "mtp", "mtp-viterbi"]));

    let request = json!({"input": "Hello there.", "seed": 3});
    let (status, headers, wav) = speak_with_headers(&app, &request).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&wav));
    assert_eq!(headers["content-type"], "audio/wav");
    assert_eq!(headers["x-decoder"], "ar");
    assert_eq!(headers["x-sample-rate"], "16000");
    let frames: usize = headers["x-ar-tokens"].to_str().unwrap().parse().unwrap();
    assert!(frames > 0);
    let reader = hound::WavReader::new(std::io::Cursor::new(&wav)).unwrap();
    let spec = reader.spec();
    assert_eq!(
        (spec.channels, spec.bits_per_sample, spec.sample_rate),
        (1, 16, 16000)
    );
    let clip: Vec<i16> = reader.into_samples().map(Result::unwrap).collect();
    // 40 ms frames at 16 kHz: the vocoder's 4 mel frames of 160 samples each.
    assert_eq!(clip.len(), frames * 640);
    assert!(clip.iter().any(|&s| s != 0), "silence");
    assert_eq!(speak_with_headers(&app, &request).await.2, wav);

    // Streamed: the same audio, in one chunk after the header.
    let mut streamed = request.clone();
    streamed["stream"] = json!(true);
    streamed["response_format"] = json!("pcm");
    let (status, _, pcm) = speak_with_headers(&app, &streamed).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(samples(&pcm), clip);

    let mtp = json!({"input": "Hello there.", "decoder": "mtp", "heads": 2});
    let (status, headers, body) = speak_with_headers(&app, &mtp).await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_eq!(headers["x-decoder"], "mtp k=2");
    for (body, needle) in [
        (json!({"input": "hi", "decoder": "self-spec"}), "decoder"),
        (
            json!({"input": "hi", "decoder": "mtp-viterbi", "heads": 2}),
            "transition matrices",
        ),
        (
            json!({"input": "hi", "decoder": "mtp", "heads": 3}),
            "prediction head",
        ),
        (json!({"input": "hi", "voice": "nobody"}), "voice"),
    ] {
        let (status, _, bytes) = speak_with_headers(&app, &body).await;
        let text = String::from_utf8_lossy(&bytes);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {text}");
        assert!(text.contains(needle), "{body}: {text}");
    }
}

/// A text of several sentences is spoken sentence by sentence (sentence i with seed + i) and
/// joined with the sentence pause; streamed, the same audio arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_text_is_spoken_sentence_by_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let app = whole_nar_app(dir.path());
    let sentences = ["The cat sat.", "A dog ran home.", "Birds flew south."];
    let pcm =
        |text: &str, seed: u64| json!({"input": text, "seed": seed, "response_format": "pcm"});
    let mut expected = Vec::new();
    let (_, _, health) = call(&app, "GET", "/health", Body::empty()).await;
    let rate = serde_json::from_slice::<Value>(&health).unwrap()["sample_rate"]
        .as_u64()
        .unwrap() as f32;
    let pause = (voxspec_tts::LongForm::default().sentence_pause * rate).round() as usize;
    for (i, sentence) in sentences.iter().enumerate() {
        let (status, _, one) = speak(&app, pcm(sentence, 5 + i as u64)).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&one));
        expected.extend(samples(&one));
        if i + 1 < sentences.len() {
            expected.extend(std::iter::repeat_n(0i16, pause));
        }
    }
    let text = sentences.join(" ");
    let (status, _, whole) = speak(&app, pcm(&text, 5)).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&whole)
    );
    assert_eq!(samples(&whole), expected);

    let mut body = pcm(&text, 5);
    body["stream"] = json!(true);
    let (status, _, streamed) = speak(&app, body).await;
    assert_eq!(status, StatusCode::OK);
    let (a, b) = (samples(&streamed), expected);
    assert_eq!(a.len(), b.len());
    let worst = max_difference(&a, &b);
    assert!(
        worst <= 1,
        "streamed and whole long-form audio differ by {worst} LSB"
    );
}
