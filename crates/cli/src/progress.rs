//! Progress bars for long work (hidden automatically when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};
use voxspec_data::Progress;

/// An indicatif bar behind the library's [`Progress`] trait.
pub struct Bar(ProgressBar);

impl Bar {
    pub fn new() -> Self {
        Bar(ProgressBar::hidden())
    }

    /// A bar of `total` units with a message, drawn right away.
    pub fn with_len(total: u64, what: &str) -> Self {
        let b = Bar::new();
        b.start(total, what);
        b
    }
}

impl Progress for Bar {
    fn start(&self, total: u64, what: &str) {
        self.0
            .set_draw_target(indicatif::ProgressDrawTarget::stderr());
        self.0.set_length(total);
        self.0.set_position(0);
        self.0.set_style(
            ProgressStyle::with_template(
                "{msg:>16} [{bar:40.cyan/blue}] {pos}/{len} ({per_sec}, eta {eta})",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        self.0.set_message(what.to_string());
    }

    fn inc(&self, n: u64) {
        self.0.inc(n);
    }

    fn finish(&self) {
        self.0.finish_and_clear();
    }
}
