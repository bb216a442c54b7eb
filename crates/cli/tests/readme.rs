//! The README's quickstart, run as a new user would from the repository root: its `synthesize`
//! command writes a WAV in the shipped real voice, and its `serve` + `curl` pair answers with a
//! WAV (the request body is the README's own).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The shell commands of the README's "Quickstart" section: lines of its ```bash blocks, joined
/// across trailing backslashes, comments cut.
fn quickstart_commands() -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    let section = readme
        .split("\n## Quickstart")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("a Quickstart section");
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut pending = String::new();
    for line in section.lines() {
        if line.trim_start().starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if !in_block {
            continue;
        }
        let code = match line.find(" #") {
            Some(at) if !line[..at].contains('\'') || line[..at].matches('\'').count() % 2 == 0 => {
                &line[..at]
            }
            _ => line,
        };
        let code = code.trim_end();
        if let Some(head) = code.strip_suffix('\\') {
            pending.push_str(head);
            pending.push(' ');
        } else {
            pending.push_str(code);
            if !pending.trim().is_empty() {
                commands.push(pending.trim().to_string());
            }
            pending.clear();
        }
    }
    commands
}

/// Splits a command line into words: single and double quotes group, a backslash outside
/// single quotes escapes.
fn words(line: &str) -> Vec<String> {
    let (mut out, mut word, mut any) = (Vec::new(), String::new(), false);
    let mut chars = line.chars();
    let mut quote: Option<char> = None;
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') | (None, '\\') => {
                if let Some(n) = chars.next() {
                    word.push(n);
                }
            }
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, c) if c.is_whitespace() => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            (None, c) => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out
}

/// The value after `flag` in `args`.
fn value_of<'a>(args: &'a [String], flag: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == flag)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// POSTs `body` as JSON to `path` and returns the status code and the response body.
fn post(addr: &str, path: &str, body: &str) -> std::io::Result<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr)?;
    stream.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        stream,
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response)?;
    let head_end = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(response.len(), |p| p + 4);
    let head = String::from_utf8_lossy(&response[..head_end]).to_string();
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut payload = response[head_end..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        payload = dechunk(&payload);
    }
    Ok((status, payload))
}

/// The body of a chunked HTTP response.
fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(eol) = data.windows(2).position(|w| w == b"\r\n") {
        let size =
            usize::from_str_radix(String::from_utf8_lossy(&data[..eol]).trim(), 16).unwrap_or(0);
        if size == 0 {
            break;
        }
        let start = eol + 2;
        out.extend_from_slice(&data[start..(start + size).min(data.len())]);
        data = &data[(start + size + 2).min(data.len())..];
    }
    out
}

#[test]
fn the_quickstart_speaks_and_serves() {
    let commands = quickstart_commands();
    let dir = tempfile::tempdir().unwrap();
    let root = repo_root();

    // voxspec synthesize --text "..." --out hello.wav
    let synth = commands
        .iter()
        .map(|c| words(c))
        .find(|w| w.first().map(String::as_str) == Some("voxspec") && w[1] == "synthesize")
        .expect("a synthesize command in the quickstart");
    let wav = dir.path().join("hello.wav");
    let mut args: Vec<String> = synth[1..].to_vec();
    let out_at = args.iter().position(|a| a == "--out").expect("--out") + 1;
    args[out_at] = wav.to_string_lossy().into_owned();
    let o = Command::new(env!("CARGO_BIN_EXE_voxspec"))
        .args(&args)
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let audio = voxspec_audio::load(&wav).unwrap();
    assert_eq!(audio.sample_rate, 16000);
    let seconds = audio.samples.len() as f64 / 16000.0;
    assert!((1.0..10.0).contains(&seconds), "{seconds} s");

    // voxspec serve, then the README's request
    let serve = commands
        .iter()
        .map(|c| words(c))
        .find(|w| w.first().map(String::as_str) == Some("voxspec") && w[1] == "serve")
        .expect("a serve command in the quickstart");
    let curl = commands
        .iter()
        .map(|c| words(c))
        .find(|w| w.first().map(String::as_str) == Some("curl"))
        .expect("a curl command in the quickstart");
    let body = value_of(&curl, "-d").expect("curl -d BODY").to_string();
    let url = curl
        .iter()
        .find(|w| w.starts_with("http://"))
        .expect("curl URL");
    let path = format!("/{}", url.splitn(4, '/').nth(3).unwrap_or(""));
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let mut args: Vec<String> = serve[1..].to_vec();
    args.extend(["--addr".to_string(), addr.clone()]);
    let _server = Server(
        Command::new(env!("CARGO_BIN_EXE_voxspec"))
            .args(&args)
            .current_dir(&root)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let started = Instant::now();
    let (status, payload) = loop {
        match post(&addr, &path, &body) {
            Ok(r) => break r,
            Err(e) => {
                assert!(
                    started.elapsed() < Duration::from_secs(120),
                    "the server did not answer: {e}"
                );
                std::thread::sleep(Duration::from_millis(250));
            }
        }
    };
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&payload));
    assert_eq!(&payload[..4], b"RIFF");
    let reply = dir.path().join("speech.wav");
    std::fs::write(&reply, &payload).unwrap();
    let audio = voxspec_audio::load(&reply).unwrap();
    assert!(audio.samples.len() as f64 / f64::from(audio.sample_rate) > 0.5);
}

#[test]
fn command_lines_split_like_a_shell() {
    assert_eq!(
        words(r#"curl -s http://x -d '{"input": "Hi there."}' -o "a b.wav""#),
        vec![
            "curl",
            "-s",
            "http://x",
            "-d",
            r#"{"input": "Hi there."}"#,
            "-o",
            "a b.wav"
        ]
    );
    assert_eq!(words(r"a\ b ''"), vec!["a b", ""]);
}
