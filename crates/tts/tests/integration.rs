//! The integration tests of `voxspec-tts`, one module per file, built as one test binary:
//! each test binary links the Burn stack, and one per file made the release build of the
//! workspace's tests several times longer. The tests share Burn's process-global RNG, so
//! the README's test command runs them one at a time (`--test-threads=1`).

mod batch;
mod longform;
mod multistream;
mod stream;
