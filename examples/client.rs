//! A client of `voxspec serve` with nothing but the standard library: posts one request to the
//! OpenAI-style endpoint with `"stream": true`, reads the chunked audio as it arrives (printing
//! when the first bytes came), and saves the WAV.
//!
//! ```text
//! voxspec serve &                                   # 127.0.0.1:8080
//! cargo run --release --example client -- "Hello from voxspec." out.wav [127.0.0.1:8080]
//! ```

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let text = args
        .next()
        .unwrap_or_else(|| "Hello from voxspec.".to_string());
    let out = args
        .next()
        .unwrap_or_else(|| "client-example.wav".to_string());
    let addr = args.next().unwrap_or_else(|| "127.0.0.1:8080".to_string());

    // serde_json would do this; a string escape keeps the example dependency-free.
    let escaped: String = text
        .chars()
        .flat_map(|c| match c {
            '"' => vec!['\\', '"'],
            '\\' => vec!['\\', '\\'],
            c if c.is_control() => vec![' '],
            c => vec![c],
        })
        .collect();
    let body = format!(r#"{{"input": "{escaped}", "response_format": "wav", "stream": true}}"#);
    let started = Instant::now();
    let mut stream = TcpStream::connect(&addr)?;
    write!(
        stream,
        "POST /v1/audio/speech HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )?;

    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    let mut chunked = false;
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        chunked |= line.eq_ignore_ascii_case("transfer-encoding: chunked");
    }
    if !status.contains(" 200 ") {
        let mut error = String::new();
        reader.read_to_string(&mut error)?;
        return Err(format!("{}: {error}", status.trim_end()).into());
    }

    let mut audio = Vec::new();
    if chunked {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size)?;
            let n = usize::from_str_radix(size.trim(), 16)?;
            if n == 0 {
                break;
            }
            if audio.is_empty() {
                println!("first audio after {:.3} s", started.elapsed().as_secs_f64());
            }
            let mut chunk = vec![0; n + 2]; // the chunk and its CRLF
            reader.read_exact(&mut chunk)?;
            audio.extend_from_slice(&chunk[..n]);
        }
    } else {
        reader.read_to_end(&mut audio)?;
    }
    // A streamed WAV's header leaves its sizes open (0xFFFFFFFF); now that the length is
    // known, write them so every reader takes the file.
    if audio.len() >= 44 && &audio[..4] == b"RIFF" && &audio[36..40] == b"data" {
        let riff = u32::try_from(audio.len() - 8).unwrap_or(u32::MAX);
        let data = u32::try_from(audio.len() - 44).unwrap_or(u32::MAX);
        audio[4..8].copy_from_slice(&riff.to_le_bytes());
        audio[40..44].copy_from_slice(&data.to_le_bytes());
    }
    std::fs::write(&out, &audio)?;
    println!(
        "{out}: {} bytes in {:.3} s",
        audio.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
