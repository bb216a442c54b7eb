//! The tensor STFT/iSTFT against `voxspec_audio::Stft`, and Griffin-Lim.

use burn::tensor::{Device, Tensor, TensorData};
use voxspec_audio::{LogMel, MelConfig, Stft, StftConfig, sine};
use voxspec_codec::vocoder::{GriffinLimConfig, TensorStft, griffin_lim, griffin_lim_from_log_mel};

fn noise(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed;
    (0..n)
        .map(|_| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

fn to_vec<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

/// A linear chirp from f0 to f1 Hz.
fn chirp(f0: f64, f1: f64, sr: f64, n: usize) -> Vec<f32> {
    let dur = n as f64 / sr;
    (0..n)
        .map(|i| {
            let t = i as f64 / sr;
            let phase = 2.0 * std::f64::consts::PI * (f0 * t + 0.5 * (f1 - f0) / dur * t * t);
            (0.5 * phase.sin()) as f32
        })
        .collect()
}

#[test]
fn tensor_stft_round_trip_and_host_parity() {
    let device = Device::flex();
    for (n_fft, hop, win) in [(256usize, 64usize, 256usize), (128, 32, 100)] {
        let cfg = StftConfig {
            n_fft,
            hop_length: hop,
            win_length: win,
            center: true,
        };
        let host = Stft::new(cfg).unwrap();
        let tstft = TensorStft::new(cfg, &device).unwrap();
        let n = hop * 40;
        let x0 = noise(n, 1);
        let x1 = chirp(200.0, 6000.0, 16000.0, n);
        let batch = Tensor::<2>::from_data(
            TensorData::new([x0.clone(), x1.clone()].concat(), [2, n]),
            &device,
        );
        let spec = tstft.forward(batch.clone());
        let n_bins = n_fft / 2 + 1;
        let frames = 1 + n / hop;
        assert_eq!(spec.dims(), [2, 2 * n_bins, frames]);

        // Forward parity with the host FFT, bin by bin.
        let values = to_vec(spec.clone());
        for (b, x) in [&x0, &x1].into_iter().enumerate() {
            let h = host.forward(x);
            assert_eq!(h.n_frames, frames);
            let mut err = 0.0f32;
            let mut scale = 0.0f32;
            for t in 0..frames {
                for k in 0..n_bins {
                    let re = values[(b * 2 * n_bins + k) * frames + t];
                    let im = values[(b * 2 * n_bins + n_bins + k) * frames + t];
                    let c = h.frame(t)[k];
                    err = err.max((re - c.re).abs()).max((im - c.im).abs());
                    scale = scale.max(c.norm());
                }
            }
            assert!(
                err < 1e-4 * scale.max(1.0),
                "n_fft {n_fft} item {b}: err {err}"
            );
        }

        // Round trip: iSTFT(STFT(x)) = x, at the natural and at the vocoder length.
        for length in [n, frames * hop] {
            let y = to_vec(tstft.inverse(spec.clone(), length).unwrap());
            for (b, x) in [&x0, &x1].into_iter().enumerate() {
                let got = &y[b * length..(b + 1) * length];
                let want_len = length.min(n);
                let err = max_abs_diff(&got[..want_len], &x[..want_len]);
                assert!(
                    err < 1e-4,
                    "n_fft {n_fft} length {length} item {b}: err {err}"
                );
                // Past the signal it reconstructs the zero padding.
                assert!(got[want_len..].iter().all(|v| v.abs() < 1e-4));
                // And it agrees with the host iSTFT.
                let h = host.inverse(&host.forward(x), Some(length));
                let err = max_abs_diff(got, &h);
                assert!(err < 1e-4, "host parity n_fft {n_fft} item {b}: err {err}");
            }
        }
    }
}

#[test]
fn tensor_istft_of_arbitrary_spectrum_matches_host() {
    // Not a consistent spectrogram: checks the inverse on its own, DC/Nyquist imaginary parts
    // included (both must ignore them).
    let device = Device::flex();
    let cfg = StftConfig {
        n_fft: 64,
        hop_length: 16,
        win_length: 64,
        center: true,
    };
    let (n_bins, frames) = (33usize, 12usize);
    let host = Stft::new(cfg).unwrap();
    let tstft = TensorStft::new(cfg, &device).unwrap();
    let raw = noise(2 * n_bins * frames, 9); // [2·n_bins, frames]
    let spec = voxspec_audio::Spectrogram {
        n_frames: frames,
        n_bins,
        data: (0..frames * n_bins)
            .map(|i| {
                let (t, k) = (i / n_bins, i % n_bins);
                voxspec_audio::Complex::new(raw[k * frames + t], raw[(n_bins + k) * frames + t])
            })
            .collect(),
    };
    let length = frames * 16;
    let want = host.inverse(&spec, Some(length));
    let t = Tensor::<3>::from_data(TensorData::new(raw, [1, 2 * n_bins, frames]), &device);
    let got = to_vec(tstft.inverse(t, length).unwrap());
    let err = max_abs_diff(&got, &want);
    assert!(err < 1e-5, "err {err}");
}

#[test]
fn tensor_istft_rejects_wrong_bin_count() {
    let device = Device::flex();
    let tstft = TensorStft::new(StftConfig::default(), &device).unwrap();
    let bad = Tensor::<3>::zeros([1, 100, 4], &device);
    let err = tstft.inverse(bad, 256).unwrap_err().to_string();
    assert!(err.contains("1026"), "{err}");
}

/// Spectral convergence of `y` against the magnitude of `x`.
fn sc_between(stft: &Stft, x: &[f32], y: &[f32]) -> f32 {
    let target = stft.forward(x).magnitude();
    voxspec_codec::vocoder::spectral_convergence(&target, &stft.forward(y))
}

#[test]
fn griffin_lim_reconstructs_sine_and_chirp() {
    let cfg = StftConfig {
        n_fft: 512,
        hop_length: 128,
        win_length: 512,
        center: true,
    };
    let stft = Stft::new(cfg).unwrap();
    let n = 128 * 60;
    for (name, x) in [
        ("sine", sine(440.0, 16000, n, 0.5)),
        ("chirp", chirp(100.0, 4000.0, 16000.0, n)),
    ] {
        let spec = stft.forward(&x);
        let mag = spec.magnitude();
        let gl = GriffinLimConfig {
            n_iter: 60,
            momentum: 0.99,
            random_init: Some(3),
        };
        let out = griffin_lim(&stft, &mag, spec.n_frames, n, &gl).unwrap();
        let sc = &out.spectral_convergence;
        assert_eq!(sc.len(), 60);
        assert_eq!(out.wave.len(), n);
        // Falls by a large factor, and is (almost) monotone: no rise of more than 5 % between
        // iterations.
        assert!(sc[59] < 0.25 * sc[0], "{name}: {sc:?}");
        for w in sc.windows(2) {
            assert!(w[1] <= w[0] * 1.05 + 1e-4, "{name}: {sc:?}");
        }
        let final_sc = sc_between(&stft, &x, &out.wave);
        eprintln!("griffin-lim {name}: SC {:.4} -> {final_sc:.4}", sc[0]);
        assert!(
            final_sc < 0.08,
            "{name}: final spectral convergence {final_sc}"
        );
        assert!((final_sc - sc[59]).abs() < 1e-5);
        // Plain Griffin-Lim (no momentum) also converges, more slowly.
        let plain = GriffinLimConfig {
            momentum: 0.0,
            ..gl
        };
        let slow = griffin_lim(&stft, &mag, spec.n_frames, n, &plain).unwrap();
        assert!(slow.spectral_convergence[59] < slow.spectral_convergence[0]);
    }
}

#[test]
fn griffin_lim_from_log_mel_recovers_a_chirp_spectrum() {
    let mel_cfg = MelConfig {
        n_fft: 512,
        hop_length: 128,
        win_length: 512,
        n_mels: 80,
        ..MelConfig::default()
    };
    let n = 128 * 60;
    let x = chirp(200.0, 3000.0, 16000.0, n);
    let front = LogMel::new(mel_cfg).unwrap();
    let log_mel = front.compute(&x);
    let frames = front.n_frames(n);
    let out = griffin_lim_from_log_mel(
        &mel_cfg,
        &log_mel,
        frames,
        &GriffinLimConfig {
            n_iter: 40,
            ..GriffinLimConfig::default()
        },
    )
    .unwrap();
    assert_eq!(out.wave.len(), 128 * (frames - 1));
    // The mel of the reconstruction matches the input mel (the mel is what is known).
    let rebuilt = front.compute(&out.wave);
    let m = mel_cfg.n_mels;
    let (mut err, mut cnt) = (0.0f64, 0usize);
    for t in 2..frames - 2 {
        for b in 0..m {
            let i = t * m + b;
            if log_mel[i] > (1e-2f32).ln() {
                err += f64::from((rebuilt[i] - log_mel[i]).abs());
                cnt += 1;
            }
        }
    }
    let mean = err / cnt.max(1) as f64;
    eprintln!("griffin-lim from log-mel: mean |Δ log-mel| {mean:.4} over {cnt} bins");
    assert!(
        cnt > 100 && mean < 0.35,
        "mean log-mel error {mean} over {cnt} bins"
    );
    // A wrong shape is an error naming the input.
    let e = griffin_lim_from_log_mel(
        &mel_cfg,
        &log_mel[1..],
        frames,
        &GriffinLimConfig::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("log-mel"), "{e}");
}
