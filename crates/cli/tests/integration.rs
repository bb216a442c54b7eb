//! The integration tests of `voxspec-cli`, one module per file, built as one test binary:
//! each test binary links the Burn stack, and one per file made the release build of the
//! workspace's tests several times longer. The tests share Burn's process-global RNG, so
//! the README's test command runs them one at a time (`--test-threads=1`).

mod align_cli;
mod cli;
mod codec_cli;
mod codec_eval;
mod common;
mod ctc;
mod eval_cli;
mod lm_cli;
mod multistream_cli;
mod readme;
mod socodec_cli;
mod synth_bench;
mod train_lm;
mod vocoder_cli;
