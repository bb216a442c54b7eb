//! The text summary of the forward benchmark (`voxspec_tts::run_forward_bench`): the model and
//! its bandwidth floors, the cost of a forward over k new tokens per engine and weight format
//! (a markdown table), the peer measured alongside, greedy decoding and the decoders.

use std::fmt::Write;

use voxspec_tts::ForwardReport;

/// What the summary says besides the report.
#[derive(Debug, Clone, Copy)]
pub struct ForwardRun<'a> {
    /// Cached positions before the measured block.
    pub context: usize,
    /// Tokens of the greedy decoding loop and the decoders.
    pub generate: usize,
    /// Worker threads.
    pub threads: usize,
    /// The device Burn ran on, in words (named when it is not the CPU).
    pub device: &'a str,
}

/// The summary of `report`, one line each, ending in a newline.
pub fn forward_summary(report: &ForwardReport, run: ForwardRun<'_>) -> String {
    let mut s = String::new();
    // Writing into a String cannot fail.
    let _ = write_summary(&mut s, report, run);
    s
}

fn write_summary(s: &mut String, report: &ForwardReport, run: ForwardRun<'_>) -> std::fmt::Result {
    writeln!(
        s,
        "{} parameters, {} cached positions; host read bandwidth {:.1} GB/s ({} threads); \
         native kernel {}",
        report.parameters, run.context, report.bandwidth_gbs, run.threads, report.kernel,
    )?;
    for f in &report.floors {
        writeln!(
            s,
            "{} weights: {:.1} MB per step, floor {:.3} ms",
            f.weights, f.weight_mb, f.floor_ms
        )?;
    }
    if let Some(gbs) = report.device_bandwidth_gbs {
        writeln!(
            s,
            "{}: read bandwidth {gbs:.1} GB/s (sums over 4 x 64 MB); Burn's f32 floor there {:.3} ms \
             (the native engine's rows run on the host)",
            run.device, report.burn_floor_ms
        )?;
    }
    writeln!(
        s,
        "| engine | weights | k | ms | cost(k)/cost(1) | ms/token | x floor |\n\
         |---|---|---|---|---|---|---|"
    )?;
    for p in &report.results {
        writeln!(
            s,
            "| {:?} | {} | {} | {:.3} | {:.2} | {:.3} | {:.2} |",
            p.engine,
            p.weights,
            p.k,
            p.median_ms,
            p.cost_relative_to_k1,
            p.ms_per_token,
            p.floor_multiple
        )?;
    }
    if let Some(peer) = &report.peer {
        writeln!(
            s,
            "\n{} on the same shape, measured alongside:",
            peer.framework
        )?;
        writeln!(s, "| k | ms | cost(k)/cost(1) |\n|---|---|---|")?;
        let one = peer.forward.first().map_or(1.0, |p| p.median_ms);
        for p in &peer.forward {
            writeln!(
                s,
                "| {} | {:.3} | {:.2} |",
                p.k,
                p.median_ms,
                p.median_ms / one
            )?;
        }
        writeln!(
            s,
            "greedy generate: {:.3} ms/token",
            peer.generate_ms_per_token
        )?;
    }
    for g in &report.greedy {
        let vs = g
            .speedup_over_peer
            .map(|r| format!(" ({r:.2}x faster than the peer's generate)"))
            .unwrap_or_default();
        writeln!(
            s,
            "greedy decoding, {:?} {}: {:.3} ms/token over {} tokens{vs}",
            g.engine, g.weights, g.ms_per_token, g.tokens
        )?;
    }
    if !report.decoders.is_empty() {
        writeln!(
            s,
            "\ndecoding {} tokens (greedy, prefill excluded):\n\
             | engine | weights | decoder | ms/token | speed-up over AR |\n|---|---|---|---|---|",
            run.generate
        )?;
        for d in &report.decoders {
            writeln!(
                s,
                "| {:?} | {} | {} | {:.3} | {:.2}x |",
                d.engine, d.weights, d.decoder, d.ms_per_token, d.speedup_over_ar
            )?;
        }
    }
    Ok(())
}
