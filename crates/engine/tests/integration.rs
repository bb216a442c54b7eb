//! The integration tests of `voxspec-engine`, one module per file, built as one test binary:
//! each test binary links the Burn stack, and one per file made the release build of the
//! workspace's tests several times longer. The tests share Burn's process-global RNG, so
//! the README's test command runs them one at a time (`--test-threads=1`).

mod multistream_parity;
mod nar_parity;
mod parity;
mod render_parity;
mod support;
mod weight_format_parity;
