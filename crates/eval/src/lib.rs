//! voxspec-eval: quality evaluation of the audio models, the benchmarks, and their reports and
//! figures.
//!
//! - [`split`]: the split under evaluation ([`EvalSplit`]: its utterances and the
//!   forced-choice candidates), the MCD definition, JSON reports;
//! - [`codec`]: resynthesis quality of a SpeechTokenizer-style codec ([`evaluate_codec`]);
//! - [`ctc_dev`]: the CTC teacher's character error rate on a manifest;
//! - [`socodec`]: a SoCodec, stream by stream ([`evaluate_socodec`]);
//! - [`vocoder`]: a vocoder against Griffin-Lim ([`evaluate_vocoder`]);
//! - [`resynthesis_table`]: the markdown summaries of the vocoder and codec evaluations;
//! - [`intelligibility`]: forced-choice sentence identification of clips by the CTC teacher;
//! - [`judge`]: the independent recogniser (`tools/asr_judge.py`, a Python subprocess);
//! - [`bench_audio`], [`bench_codec`]: throughput of the audio front end and of a codec;
//! - [`bench_forward`], [`forward_report`]: the forward benchmark's model and its summary;
//! - [`bench_acceptance`]: offline acceptance of speculative decoding;
//! - [`bench_decode`], [`decode_report`]: every decoder of the AR model on a split's
//!   sentences, and its report;
//! - [`bench_multistream`]: the multi-stream LM's frame decoders on a split's sentences;
//! - [`plots`]: PNG line plots.

pub mod bench_acceptance;
pub mod bench_audio;
pub mod bench_codec;
pub mod bench_decode;
pub mod bench_forward;
pub mod bench_multistream;
pub mod codec;
pub mod ctc_dev;
pub mod decode_report;
pub mod error;
pub mod forward_report;
pub mod intelligibility;
pub mod judge;
pub mod plots;
pub mod resynthesis_table;
pub mod socodec;
pub mod socodec_streams;
pub mod split;
pub mod vocoder;

pub use codec::{CodecEvalReport, CodecEvalSettings, evaluate_codec};
pub use decode_report::{ar_over_baseline, decode_markdown, score_decode_rows, write_decode_plots};
pub use error::{EvalError, Result};
pub use judge::{AsrJudge, write_candidates};
pub use plots::{DEFAULT_SIZE, LinePlot, Series, render_line_plot, write_line_plot};
pub use socodec::{SoCodecEvalReport, SoCodecEvalSettings, evaluate_socodec};
pub use socodec_streams::{StreamsReport, StreamsRow, write_streams_plots};
pub use split::{EvalSplit, MCD_DEFINITION, at_rate, write_report, write_report_sorted};
pub use vocoder::{VocoderEvalReport, VocoderEvalSettings, evaluate_vocoder};
