//! Axes (ranges, ticks, labels) and the legend's place of the line plots.

use std::ops::Range;

use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, ValueFormatter};
use plotters::prelude::*;

use super::{Drawn, MAX_INTEGER_X_TICKS};

/// One axis in chart coordinates (log10 of the value on a log axis): range, ticks at exactly the
/// given values (no light grid lines) and their labels.
#[derive(Debug, Clone)]
pub(super) struct Axis {
    pub(super) range: (f64, f64),
    pub(super) ticks: Vec<f64>,
    /// Decimals of tick labels on a linear axis.
    pub(super) decimals: usize,
    pub(super) log: bool,
}

impl Axis {
    fn label(&self, v: f64) -> String {
        if self.log {
            format_significant(10f64.powf(v))
        } else {
            // `+ 0.0` turns -0.0 into 0.0.
            format!("{:.*}", self.decimals, v + 0.0)
        }
    }

    pub(super) fn labels(&self) -> impl Iterator<Item = String> + '_ {
        self.ticks.iter().map(|&t| self.label(t))
    }
}

impl Ranged for Axis {
    type FormatOption = NoDefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let t = (value - self.range.0) / (self.range.1 - self.range.0);
        limit.0 + (f64::from(limit.1 - limit.0) * t).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.0..self.range.1
    }
}

impl ValueFormatter<f64> for Axis {
    fn format_ext(&self, value: &f64) -> String {
        self.label(*value)
    }
}

/// The x axis: a tick at every x value present when they are few integers (heads 1, 2, 4, 8),
/// evenly spaced round ticks otherwise.
pub(super) fn x_axis(xs: impl Iterator<Item = f64>) -> Axis {
    let mut values: Vec<f64> = xs.collect();
    values.sort_by(f64::total_cmp);
    values.dedup();
    let integers = values.iter().all(|x| (x - x.round()).abs() < 1e-9);
    if integers && values.len() <= MAX_INTEGER_X_TICKS {
        let (lo, hi) = (values[0], values[values.len() - 1]);
        let pad = if hi > lo { 0.06 * (hi - lo) } else { 0.5 };
        Axis {
            range: (lo - pad, hi + pad),
            ticks: values.iter().map(|x| x.round()).collect(),
            decimals: 0,
            log: false,
        }
    } else {
        linear_axis(values.into_iter())
    }
}

/// A linear axis over the values, padded by 8% of their span on either side.
pub(super) fn linear_axis(values: impl Iterator<Item = f64>) -> Axis {
    let (lo, hi) = min_max(values);
    let pad = if hi > lo {
        0.08 * (hi - lo)
    } else if lo != 0.0 {
        0.1 * lo.abs()
    } else {
        1.0
    };
    let range = (lo - pad, hi + pad);
    let (ticks, step) = linear_ticks(range.0, range.1, 6);
    Axis {
        range,
        ticks,
        decimals: decimals_for_step(step),
        log: false,
    }
}

/// A log10 axis over positive values: ticks at 1-2-5 multiples of powers of ten when that gives
/// a few, at powers of ten when it gives too many, at round linear values inside one decade.
pub(super) fn log_axis(values: impl Iterator<Item = f64>) -> Axis {
    let (lo, hi) = min_max(values.map(f64::log10));
    let pad = if hi > lo { 0.08 * (hi - lo) } else { 0.1 };
    let range = (lo - pad, hi + pad);
    let in_range = |v: f64| v >= range.0 && v <= range.1;
    let decades = (range.0.floor() as i32)..=(range.1.ceil() as i32);
    let mut ticks: Vec<f64> = decades
        .clone()
        .flat_map(|k| [1.0, 2.0, 5.0].map(|m| (m * 10f64.powi(k)).log10()))
        .filter(|&v| in_range(v))
        .collect();
    if ticks.len() > 10 {
        let powers: Vec<f64> = decades.map(f64::from).filter(|&v| in_range(v)).collect();
        // Every n-th power of ten over many decades.
        let every = powers.len().div_ceil(8).max(1);
        ticks = powers.into_iter().step_by(every).collect();
    }
    if ticks.len() < 3 {
        let (linear, _) = linear_ticks(10f64.powf(range.0), 10f64.powf(range.1), 5);
        ticks = linear
            .into_iter()
            .filter(|&v| v > 0.0)
            .map(f64::log10)
            .collect();
    }
    Axis {
        range,
        ticks,
        decimals: 0,
        log: true,
    }
}

pub(super) fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// Ticks at multiples of a 1-2-5 step inside `lo..=hi`, as close to `target` of them as such a
/// step allows, and the step.
pub(super) fn linear_ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
    let magnitude = 10f64.powf(((hi - lo) / target as f64).log10().floor());
    let count = |step: f64| ((hi / step).floor() - (lo / step).ceil() + 1.0).max(0.0);
    let step = [10.0, 5.0, 2.0, 1.0, 0.5]
        .map(|m| m * magnitude)
        .into_iter()
        .min_by(|&a, &b| {
            let off = |step| (count(step) - target as f64).abs();
            off(a).total_cmp(&off(b))
        })
        .unwrap_or(magnitude);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step).floor() as i64;
    ((first..=last).map(|k| k as f64 * step).collect(), step)
}

/// Decimals that show a multiple of `step` (a 1-2-5 step) exactly.
pub(super) fn decimals_for_step(step: f64) -> usize {
    (-step.log10() - 1e-9).ceil().max(0.0) as usize
}

/// A tick value to three significant digits: plain for 0.001 ..= 99999, else scientific.
pub(super) fn format_significant(v: f64) -> String {
    if v == 0.0 {
        return "0".to_string();
    }
    let exponent = v.abs().log10().floor() as i32;
    let rounded = if exponent >= 2 {
        let scale = 10f64.powi(exponent - 2);
        (v / scale).round() * scale
    } else {
        let scale = 10f64.powi(2 - exponent);
        (v * scale).round() / scale
    };
    if (-3..5).contains(&exponent) {
        format!("{rounded}")
    } else {
        format!("{rounded:e}")
    }
}

/// The corner of the plotting area where a legend of `size` (fractions of the area's width and
/// height) covers the fewest markers and line samples: the data stays visible.
pub(super) fn legend_position(
    series: &[Drawn],
    x_axis: &Axis,
    y_axis: &Axis,
    log_y: bool,
    size: (f64, f64),
) -> SeriesLabelPosition {
    let (xr, yr) = (x_axis.range, y_axis.range);
    let normalise = |(x, y): (f64, f64)| {
        let y = if log_y { y.log10() } else { y };
        ((x - xr.0) / (xr.1 - xr.0), (y - yr.0) / (yr.1 - yr.0))
    };
    // Markers and 32 samples along every line segment.
    let mut samples = Vec::new();
    for Drawn { points, .. } in series {
        let normalised: Vec<(f64, f64)> = points.iter().map(|&p| normalise(p)).collect();
        samples.extend_from_slice(&normalised);
        for w in normalised.windows(2) {
            let ((x0, y0), (x1, y1)) = (w[0], w[1]);
            samples.extend((1..32).map(|i| {
                let t = f64::from(i) / 32.0;
                (x0 + t * (x1 - x0), y0 + t * (y1 - y0))
            }));
        }
    }
    let (w, h) = (size.0.min(1.0), size.1.min(1.0));
    let covered = |right: bool, upper: bool| {
        samples
            .iter()
            .filter(|&&(x, y)| {
                (if right { x >= 1.0 - w } else { x <= w })
                    && (if upper { y >= 1.0 - h } else { y <= h })
            })
            .count()
    };
    // On ties the first: upper right, upper left, lower right, lower left.
    [
        (SeriesLabelPosition::UpperRight, true, true),
        (SeriesLabelPosition::UpperLeft, false, true),
        (SeriesLabelPosition::LowerRight, true, false),
        (SeriesLabelPosition::LowerLeft, false, false),
    ]
    .into_iter()
    .min_by_key(|&(_, right, upper)| covered(right, upper))
    .map_or(SeriesLabelPosition::UpperRight, |(position, _, _)| position)
}
