//! PNG line plots for benchmark figures: `voxspec_eval::plots`.

pub(crate) use voxspec_eval::plots::{DEFAULT_SIZE, LinePlot, Series, write_line_plot};
