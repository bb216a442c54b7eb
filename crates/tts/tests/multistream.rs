//! The multi-stream pipeline behind [`AnyPipeline`], on a tiny random LM, SoCodec and vocoder:
//! the model directory's kind picks it, it speaks whole and as one streamed chunk (the same
//! audio, a whole number of LM frames long), a directory of references gives the mean voice,
//! and what it cannot do is refused by name.

use std::path::Path;

use burn::tensor::Device;
use voxspec_audio::{Audio, WavFormat, write_wav};
use voxspec_infer::SamplerConfig;
use voxspec_tts::{
    AnyPipeline, AnyVoice, DecoderParts, DecoderSpec, Lengths, ModelKind, ModelSource,
    MultiStreamPaths, RuleSpec, SpeakSettings, StreamConfig, TtsError, write_untrained_experiment,
    write_untrained_multistream,
};

/// A tone of `seconds` at `rate` written to `path`.
fn tone(path: &Path, hz: f32, seconds: f32, rate: u32) {
    let n = (seconds * rate as f32) as usize;
    let samples = (0..n)
        .map(|i| 0.3 * (std::f32::consts::TAU * hz * i as f32 / rate as f32).sin())
        .collect();
    write_wav(path, &Audio::new(samples, rate), WavFormat::Pcm16).unwrap();
}

#[test]
fn the_model_directory_picks_the_pipeline() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    let multi = write_untrained_multistream(&dir.path().join("multi"), &device).unwrap();
    assert_eq!(
        ModelKind::of_model_dir(&multi.model),
        ModelKind::MultiStream
    );
    let codec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/codec-minitts");
    let single = write_untrained_experiment(&dir.path().join("single"), &codec, &device).unwrap();
    assert_eq!(ModelKind::of_model_dir(&single.ar), ModelKind::SingleStream);
    assert_eq!(ModelKind::of_model_dir(dir.path()), ModelKind::SingleStream);
}

#[test]
fn a_multistream_lm_speaks_whole_and_streamed() {
    let dir = tempfile::tempdir().unwrap();
    let device = Device::flex();
    let paths = write_untrained_multistream(dir.path(), &device).unwrap();
    let pipeline = AnyPipeline::load(&ModelSource::MultiStream(paths.clone()), &device).unwrap();
    assert_eq!(pipeline.kind(), ModelKind::MultiStream);
    assert_eq!(pipeline.sample_rate(), 16000);

    let voices = dir.path().join("voices");
    std::fs::create_dir_all(&voices).unwrap();
    tone(&voices.join("a.wav"), 220.0, 0.5, 16000);
    tone(&voices.join("b.wav"), 330.0, 0.5, 22050);
    let vector = |path: &Path| match pipeline.encode_voice_file(path).unwrap() {
        AnyVoice::MultiStream(v) => v,
        AnyVoice::SingleStream(_) => panic!("a single-stream voice from a multi-stream LM"),
    };
    let (a, b, mean) = (
        vector(&voices.join("a.wav")),
        vector(&voices.join("b.wav")),
        vector(&voices),
    );
    assert_eq!(a.len(), 16);
    assert!(a != b, "two recordings gave one voice");
    for ((a, b), m) in a.iter().zip(&b).zip(&mean) {
        assert!((0.5 * (a + b) - m).abs() < 1e-5, "{a} {b} → {m}");
    }

    let voice = AnyVoice::MultiStream(a);
    let settings = SpeakSettings {
        decoder: DecoderSpec::Ar,
        sampler: SamplerConfig::default(),
        lengths: Lengths::default(),
        seed: 5,
    };
    let parts = DecoderParts::default();
    let whole = pipeline
        .synthesize("Hello there.", Some(&voice), &settings, &parts)
        .unwrap();
    assert!(whole.tokens > 0 && whole.forwards > 0);
    assert_eq!(whole.samples.len(), whole.tokens * 640);
    assert_eq!(whole.decoder, "ar");
    let (mut stream, figures) = pipeline
        .stream(
            "Hello there.",
            Some(&voice),
            &settings,
            &parts,
            StreamConfig::default(),
        )
        .unwrap();
    assert!(figures.samples.is_empty());
    assert_eq!(figures.tokens, whole.tokens);
    assert!(!stream.is_done());
    assert_eq!(stream.next_chunk().unwrap(), Some(whole.samples.clone()));
    assert!(stream.is_done());
    assert_eq!(stream.next_chunk().unwrap(), None);

    let mtp = SpeakSettings {
        decoder: DecoderSpec::Mtp { heads: 2 },
        ..settings.clone()
    };
    let spoken = pipeline
        .synthesize("Hello there.", Some(&voice), &mtp, &parts)
        .unwrap();
    assert_eq!(spoken.samples.len(), spoken.tokens * 640);

    let err = pipeline
        .synthesize("Hello there.", None, &settings, &parts)
        .unwrap_err();
    assert!(matches!(err, TtsError::NoVoice), "{err}");
    let self_spec = SpeakSettings {
        decoder: DecoderSpec::SelfSpec {
            rule: RuleSpec::Sd,
            gamma: 1,
        },
        ..settings.clone()
    };
    let err = pipeline
        .synthesize("Hello there.", Some(&voice), &self_spec, &parts)
        .unwrap_err();
    assert!(matches!(err, TtsError::Decoder { .. }), "{err}");
    let err = pipeline
        .synthesize("   ", Some(&voice), &settings, &parts)
        .unwrap_err();
    assert!(matches!(err, TtsError::Text(_)), "{err}");
    let err = pipeline
        .encode_voice_file(&dir.path().join("nobody.wav"))
        .unwrap_err();
    assert!(err.to_string().contains("nobody.wav"), "{err}");

    // A vocoder that is not there is named.
    let missing = MultiStreamPaths {
        vocoder: Some(dir.path().join("no-vocoder")),
        ..paths
    };
    let err = AnyPipeline::load(&ModelSource::MultiStream(missing), &device)
        .err()
        .unwrap();
    assert!(err.to_string().contains("no-vocoder"), "{err}");
}
