//! voxspec-tts: the text-to-speech pipeline as a library.
//!
//! A trained experiment (`recipes/libritts/train_mtp.sh` writes one) is an AR model with its
//! `tokenizer.json`, a NAR model and a codec. [`Pipeline`] loads them and speaks:
//!
//! ```text
//! text ──tokenizer──▶ ids ──AR (any decoder)──▶ RVQ-1 codes ──NAR──▶ codes [n_q][frames]
//!                                                                     └─codec decoder─▶ waveform
//! ```
//!
//! The AR stage runs any decoder of `voxspec-infer` — AR, MTP with or without Viterbi, exact
//! speculative sampling, SSD, PCG, self-speculation — named by a [`DecoderSpec`] and built by
//! [`DecoderParts::build`] on the engine of [`ModelPaths::engine`] (the native CPU engine or
//! Burn). [`run_decode_bench`] runs a grid of decoders ([`DecoderGrid`]) on the same sentences
//! and returns one [`DecodeRow`] each: speed against AR measured alongside, and quality by the
//! CTC teacher ([`Judge`]). [`Pipeline::synthesize_text`] speaks a long text (paragraphs, a
//! chapter) sentence by sentence with one decoder, joined by the pauses of [`LongForm`].
//!
//! A delayed multi-stream LM (`voxspec train multistream`) speaks through
//! [`MultiStreamPipeline`]: text → the voice vector of a reference recording → the LM (AR,
//! speculative with a [`MultiStreamDraft`], or multi-token heads; [`MultiStreamDecoder`]) →
//! SoCodec decoder → vocoder. [`AnyPipeline`] holds either pipeline, picked by the model
//! directory's kind ([`ModelKind::of_model_dir`]), for callers that take both (`voxspec
//! serve`).
//!
//! # Speaking a sentence
//!
//! ```
//! use burn::tensor::Device;
//! use voxspec_audio::{Audio, WavFormat, write_wav};
//! use voxspec_infer::SamplerConfig;
//! use voxspec_tts::{DecoderParts, DecoderSpec, ModelPaths, Pipeline};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # // The doc test writes an untrained experiment (its speech is noise) with the shipped codec.
//! # let dir = tempfile::tempdir()?;
//! # let codec = std::path::Path::new("../../checkpoints/codec-minitts");
//! # voxspec_tts::write_untrained_experiment(dir.path(), codec, &Device::flex())?;
//! # let exp = dir.path();
//! # let out = dir.path().join("cat.wav");
//! // `exp` is an experiment directory, e.g. exp/minitts after the main recipe.
//! let mut paths = ModelPaths::experiment(exp);
//! # paths.codec = codec.to_path_buf();
//! let pipeline = Pipeline::load(&paths, &Device::flex())?;
//! let spec = DecoderSpec::Mtp { heads: 4 };
//! let mut decoder = DecoderParts::default().build(&spec, &pipeline.lm)?;
//! let speech = pipeline.speak("The cat sat on the mat.", decoder.as_mut(), &SamplerConfig::default(), 0)?;
//! let audio = Audio::new(speech.samples, pipeline.sample_rate());
//! write_wav(&out, &audio, WavFormat::Pcm16)?;
//! # assert!(std::fs::metadata(&out)?.len() > 44);
//! # Ok(())
//! # }
//! ```
//!
//! # Adding a decoder
//!
//! 1. Write it as one module of `voxspec-infer` implementing `voxspec_infer::Decoder` for any
//!    `LanguageModel` (the KV cache's `truncate` is the rollback a speculative decoder needs;
//!    `voxspec_infer::verify` holds the shared verification phase). Test it there against the
//!    AR decoder: at temperature 0 an exact decoder returns AR's tokens.
//! 2. Add one variant to [`DecoderSpec`] (its settings, serialised into benchmark rows) and its
//!    label in [`DecoderSpec::label`].
//! 3. Build it in [`DecoderParts::build`]; if it needs something besides the target model (a
//!    second model, a table), add that to [`DecoderParts`].
//! 4. Give it rows in [`DecoderGrid::specs`] and a `--decoder` value in the CLI's
//!    `synthesize`: both then measure and speak with it.

#![warn(missing_docs)]

mod any_pipeline;
mod bench;
mod bench_forward;
mod bench_pipeline;
mod decoders;
mod engine;
mod error;
mod longform;
mod multistream;
mod nar_fill;
mod pipeline;
mod stream;
mod untrained;

pub use any_pipeline::{
    AnyPipeline, AnySpeech, AnySpeechStream, AnyVoice, ModelKind, ModelSource, SpeakSettings,
    TextPiece,
};
pub use bench::{
    AsrScore, Baseline, BenchSettings, DecodeReport, DecodeRow, DecoderGrid, Judge, row_dir_name,
    run_decode_bench,
};
pub use bench_forward::{
    DecoderPoint, Floor, ForwardBench, ForwardPeer, ForwardPoint, ForwardReport, GreedyPoint,
    PeerPoint, device_read_bandwidth_gbs, read_forward_peer, run_forward_bench, same_peer_config,
};
pub use bench_pipeline::{
    PipelineCase, PipelineReport, StageSeconds, cpu_model, run_pipeline_bench,
};
pub use decoders::{
    DecoderParts, DecoderSpec, GroupsAt, PartSources, PreparedDecoder, RuleSpec, load_draft,
};
pub use engine::{ArCache, ArEngine, EngineKind};
pub use error::{Result, TtsError};
pub use longform::{LongForm, LongSynthesis, Piece, SpokenPiece};
pub use multistream::{
    FrameDecodeFn, MultiStreamDecoder, MultiStreamDraft, MultiStreamPaths, MultiStreamPipeline,
    MultiStreamSpeech, is_multistream_dir, load_multistream_draft,
};
pub use nar_fill::FillReport;
pub use pipeline::{Lengths, ModelPaths, Pipeline, SpeechItem, Synthesis, VoicePrompt};
pub use stream::{NarWindow, SpeechStream, StreamConfig, Streamed};
pub use untrained::{write_untrained_experiment, write_untrained_multistream};
