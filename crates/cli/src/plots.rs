//! PNG line plots for benchmark figures.
//!
//! Rendering is CPU-only through plotters' bitmap backend into an in-memory RGB buffer, which is
//! encoded with `png` and written atomically. Text uses DejaVu Sans embedded in the binary (see
//! `assets/fonts/LICENSE-DejaVu.txt`), so plots render the same on machines without fonts or
//! fontconfig; glyphs are rasterised by [`Canvas`] rather than by plotters (see there why).

use std::ops::Range;
use std::path::Path;
use std::sync::OnceLock;

use ab_glyph::{Font as _, FontRef, ScaleFont as _};
use anyhow::{Context, Result, anyhow, ensure};
use plotters::backend::BitMapBackend;
use plotters::coord::ranged1d::{KeyPointHint, NoDefaultFormatting, ValueFormatter};
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, DrawingErrorKind};

/// The embedded font, registered with plotters as its `sans-serif` family.
static DEJAVU_SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
const FONT: &str = "sans-serif";

/// Default figure size in pixels (width, height).
pub(crate) const DEFAULT_SIZE: (u32, u32) = (960, 600);

/// Series colours, in order (Tableau 10); more series than colours reuse them.
const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// At most this many distinct integer x values get one tick each; more get evenly spaced ticks.
const MAX_INTEGER_X_TICKS: usize = 24;

/// One labelled line of (x, y) points, drawn in the given order.
#[derive(Debug, Clone)]
pub(crate) struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A line plot: one line with point markers per series, a legend, axis labels and a title.
#[derive(Debug, Clone)]
pub(crate) struct LinePlot<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub series: &'a [Series],
    /// Logarithmic (base 10) y axis; points with y <= 0 are then skipped with a warning.
    pub log_y: bool,
    /// Image size in pixels (width, height); [`DEFAULT_SIZE`] unless there is a reason.
    pub size: (u32, u32),
}

/// Renders `plot` and writes it as a PNG to `path` atomically (temporary sibling, then rename).
///
/// Points that are not finite (and, with `log_y`, points with y <= 0) are skipped with a
/// warning; an empty series list, or no drawable point at all, is an error naming the plot.
pub(crate) fn write_line_plot(path: &Path, plot: &LinePlot) -> Result<()> {
    let png = render_line_plot(plot).with_context(|| format!("plot \"{}\"", plot.title))?;
    voxspec_data::write_atomic(path, &png)
        .with_context(|| format!("writing plot \"{}\" to {}", plot.title, path.display()))
}

/// Renders `plot` to PNG bytes.
pub(crate) fn render_line_plot(plot: &LinePlot) -> Result<Vec<u8>> {
    let (width, height) = plot.size;
    ensure!(
        (200..=8192).contains(&width) && (150..=8192).contains(&height),
        "image size {width}x{height} is outside 200x150 ..= 8192x8192"
    );
    ensure!(!plot.series.is_empty(), "no series to draw");
    let series = drawable_series(plot);
    ensure!(
        series.iter().any(|s| !s.points.is_empty()),
        "no drawable points in {} series (all empty{})",
        plot.series.len(),
        if plot.log_y {
            ", non-finite or <= 0 on the log y axis"
        } else {
            " or non-finite"
        }
    );
    let font = font()?;

    let all = || series.iter().flat_map(|s| s.points.iter().copied());
    let x_axis = x_axis(all().map(|(x, _)| x));
    let y_axis = if plot.log_y {
        log_axis(all().map(|(_, y)| y))
    } else {
        linear_axis(all().map(|(_, y)| y))
    };
    let y_label_chars = y_axis.labels().map(|l| l.chars().count()).max();
    let y_label_area = 40 + 9 * y_label_chars.unwrap_or(1) as u32;
    // The legend's share of the plotting area, roughly (15 px text, 12 px margins, 30 px keys).
    let in_legend = || series.iter().filter(|s| !s.points.is_empty());
    let legend_chars = in_legend().map(|s| s.label.chars().count()).max();
    let legend_size = (
        f64::from(9 * legend_chars.unwrap_or(0) as u32 + 70)
            / f64::from(width.saturating_sub(y_label_area + 32).max(1)),
        f64::from(19 * in_legend().count() as u32 + 34)
            / f64::from(height.saturating_sub(54 + 32 + 30).max(1)),
    );
    let legend_at = legend_position(&series, &x_axis, &y_axis, plot.log_y, legend_size);

    let mut buffer = vec![0u8; width as usize * height as usize * 3];
    {
        let bitmap = BitMapBackend::with_buffer(&mut buffer, (width, height));
        let root = Canvas { bitmap, font }.into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(plot.title, (FONT, 24))
            .margin(16)
            .x_label_area_size(54)
            .y_label_area_size(y_label_area)
            .build_cartesian_2d(x_axis, y_axis)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .x_desc(plot.x_label)
            .y_desc(plot.y_label)
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 17))
            .bold_line_style(BLACK.mix(0.12))
            .draw()
            .map_err(draw_err)?;

        for Drawn {
            index,
            label,
            points,
        } in &series
        {
            if points.is_empty() {
                continue;
            }
            let colour = COLOURS[index % COLOURS.len()];
            let to_chart = |&(x, y): &(f64, f64)| (x, if plot.log_y { y.log10() } else { y });
            chart
                .draw_series(LineSeries::new(
                    points.iter().map(to_chart),
                    colour.stroke_width(2),
                ))
                .map_err(draw_err)?
                .label(*label)
                .legend(move |(x, y)| {
                    EmptyElement::at((x + 10, y))
                        + PathElement::new(vec![(-10, 0), (10, 0)], colour.stroke_width(2))
                        + Circle::new((0, 0), 4, colour.filled())
                });
            chart
                .draw_series(
                    points
                        .iter()
                        .map(|p| Circle::new(to_chart(p), 4, colour.filled())),
                )
                .map_err(draw_err)?;
        }
        chart
            .configure_series_labels()
            .position(legend_at)
            .margin(12)
            .label_font((FONT, 15))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .draw()
            .map_err(draw_err)?;
        root.present().map_err(draw_err)?;
    }
    encode_png(&buffer, width, height)
}

fn draw_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow!("drawing failed: {e}")
}

/// The embedded font, also registered with plotters, which measures text with it (legend box).
fn font() -> Result<FontRef<'static>> {
    static FONT_REF: OnceLock<Option<FontRef<'static>>> = OnceLock::new();
    FONT_REF
        .get_or_init(|| {
            let font = FontRef::try_from_slice(DEJAVU_SANS).ok()?;
            plotters::style::register_font(FONT, FontStyle::Normal, DEJAVU_SANS).ok()?;
            Some(font)
        })
        .clone()
        .context("the embedded DejaVu Sans font could not be loaded")
}

/// A [`BitMapBackend`] that rasterises text itself. plotters' ab_glyph text puts every glyph at
/// a whole pixel and drops its left side bearing, which spaces letters visibly unevenly
/// ("M TP h eads"); here glyphs sit at their sub-pixel pen positions with their bearings. The
/// text box is the one plotters measures (advance widths with kerning, `size / 1.24` high), so
/// its layout still fits; capitals are centred in it vertically (plotters draws them about a
/// fifth of the size higher, above the grid line a tick label belongs to).
struct Canvas<'a> {
    bitmap: BitMapBackend<'a>,
    font: FontRef<'static>,
}

type CanvasResult<'a> =
    Result<(), DrawingErrorKind<<BitMapBackend<'a> as DrawingBackend>::ErrorType>>;

impl<'a> DrawingBackend for Canvas<'a> {
    type ErrorType = <BitMapBackend<'a> as DrawingBackend>::ErrorType;

    fn get_size(&self) -> (u32, u32) {
        self.bitmap.get_size()
    }

    fn ensure_prepared(&mut self) -> CanvasResult<'a> {
        self.bitmap.ensure_prepared()
    }

    fn present(&mut self) -> CanvasResult<'a> {
        self.bitmap.present()
    }

    fn draw_pixel(&mut self, point: BackendCoord, color: BackendColor) -> CanvasResult<'a> {
        self.bitmap.draw_pixel(point, color)
    }

    fn draw_line<S: plotters_backend::BackendStyle>(
        &mut self,
        from: BackendCoord,
        to: BackendCoord,
        style: &S,
    ) -> CanvasResult<'a> {
        self.bitmap.draw_line(from, to, style)
    }

    fn draw_rect<S: plotters_backend::BackendStyle>(
        &mut self,
        upper_left: BackendCoord,
        bottom_right: BackendCoord,
        style: &S,
        fill: bool,
    ) -> CanvasResult<'a> {
        self.bitmap.draw_rect(upper_left, bottom_right, style, fill)
    }

    fn draw_path<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        path: I,
        style: &S,
    ) -> CanvasResult<'a> {
        self.bitmap.draw_path(path, style)
    }

    fn draw_circle<S: plotters_backend::BackendStyle>(
        &mut self,
        center: BackendCoord,
        radius: u32,
        style: &S,
        fill: bool,
    ) -> CanvasResult<'a> {
        self.bitmap.draw_circle(center, radius, style, fill)
    }

    fn fill_polygon<S: plotters_backend::BackendStyle, I: IntoIterator<Item = BackendCoord>>(
        &mut self,
        vert: I,
        style: &S,
    ) -> CanvasResult<'a> {
        self.bitmap.fill_polygon(vert, style)
    }

    fn blit_bitmap(&mut self, pos: BackendCoord, size: (u32, u32), src: &[u8]) -> CanvasResult<'a> {
        self.bitmap.blit_bitmap(pos, size, src)
    }

    fn draw_text<S: plotters_backend::BackendTextStyle>(
        &mut self,
        text: &str,
        style: &S,
        pos: BackendCoord,
    ) -> CanvasResult<'a> {
        let colour = style.color();
        if colour.alpha == 0.0 {
            return Ok(());
        }
        let size = style.size() as f32;
        let scaled = self.font.as_scaled(size);
        let height = (style.size() / 1.24) as i32;
        // Capital letters (and digits) centred in the text box, pen from x = 0. The unscaled
        // outline bounds are font units with `min.y` the top (y_max) of the glyph.
        let cap_height = self
            .font
            .outline(self.font.glyph_id('H'))
            .map_or(0.6 * size, |o| o.bounds.min.y * scaled.v_scale_factor());
        let baseline = (height as f32 + cap_height) / 2.0;
        let mut glyphs = Vec::with_capacity(text.len());
        let mut pen = 0f32;
        let mut previous = None;
        for c in text.chars() {
            let id = scaled.glyph_id(c);
            if let Some(previous) = previous {
                pen += scaled.kern(previous, id);
            }
            glyphs.push(id.with_scale_and_position(size, ab_glyph::point(pen, baseline)));
            pen += scaled.h_advance(id);
            previous = Some(id);
        }
        let width = pen as i32;
        let anchor = style.anchor();
        let dx = match anchor.h_pos {
            HPos::Left => 0,
            HPos::Center => -width / 2,
            HPos::Right => -width,
        };
        let dy = match anchor.v_pos {
            VPos::Top => 0,
            VPos::Center => -height / 2,
            VPos::Bottom => -height,
        };
        let mut coverage = Vec::new();
        for glyph in glyphs {
            if let Some(outline) = self.font.outline_glyph(glyph) {
                let min = outline.px_bounds().min;
                let (x0, y0) = (min.x as i32 + dx, min.y as i32 + dy);
                outline.draw(|x, y, c| coverage.push((x0 + x as i32, y0 + y as i32, c)));
            }
        }
        let transform = style.transform();
        let (w, h) = self.bitmap.get_size();
        for (x, y, c) in coverage {
            let (x, y) = transform.transform(x, y);
            let (x, y) = (pos.0 + x, pos.1 + y);
            if c > 0.0 && x >= 0 && y >= 0 && x < w as i32 && y < h as i32 {
                let alpha = colour.alpha * f64::from(c.min(1.0));
                self.bitmap.draw_pixel(
                    (x, y),
                    BackendColor {
                        alpha,
                        rgb: colour.rgb,
                    },
                )?;
            }
        }
        Ok(())
    }
}

fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::RGB);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder.write_header().context("encoding PNG")?;
    writer.write_image_data(rgb).context("encoding PNG")?;
    // The end chunk is written when the writer is dropped.
    drop(writer);
    Ok(bytes)
}

/// A series as drawn: its index (for the colour), label and the points that can be drawn.
struct Drawn<'s> {
    index: usize,
    label: &'s str,
    points: Vec<(f64, f64)>,
}

/// The series to draw, warning about every series that loses points.
fn drawable_series<'s>(plot: &LinePlot<'s>) -> Vec<Drawn<'s>> {
    plot.series
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let points: Vec<(f64, f64)> = s
                .points
                .iter()
                .copied()
                .filter(|&(x, y)| x.is_finite() && y.is_finite() && (!plot.log_y || y > 0.0))
                .collect();
            let dropped = s.points.len() - points.len();
            if dropped > 0 {
                tracing::warn!(
                    "plot \"{}\": series \"{}\": skipping {dropped} of {} points ({})",
                    plot.title,
                    s.label,
                    s.points.len(),
                    if plot.log_y {
                        "non-finite or <= 0 on the log y axis"
                    } else {
                        "non-finite"
                    }
                );
            }
            if points.is_empty() {
                tracing::warn!(
                    "plot \"{}\": series \"{}\" has no points to draw",
                    plot.title,
                    s.label
                );
            }
            Drawn {
                index: i,
                label: &s.label,
                points,
            }
        })
        .collect()
}

/// One axis in chart coordinates (log10 of the value on a log axis): range, ticks at exactly the
/// given values (no light grid lines) and their labels.
#[derive(Debug, Clone)]
struct Axis {
    range: (f64, f64),
    ticks: Vec<f64>,
    /// Decimals of tick labels on a linear axis.
    decimals: usize,
    log: bool,
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

    fn labels(&self) -> impl Iterator<Item = String> + '_ {
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
fn x_axis(xs: impl Iterator<Item = f64>) -> Axis {
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
fn linear_axis(values: impl Iterator<Item = f64>) -> Axis {
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
fn log_axis(values: impl Iterator<Item = f64>) -> Axis {
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

fn min_max(values: impl Iterator<Item = f64>) -> (f64, f64) {
    values.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    })
}

/// Ticks at multiples of a 1-2-5 step inside `lo..=hi`, as close to `target` of them as such a
/// step allows, and the step.
fn linear_ticks(lo: f64, hi: f64, target: usize) -> (Vec<f64>, f64) {
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
fn decimals_for_step(step: f64) -> usize {
    (-step.log10() - 1e-9).ceil().max(0.0) as usize
}

/// A tick value to three significant digits: plain for 0.001 ..= 99999, else scientific.
fn format_significant(v: f64) -> String {
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
fn legend_position(
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

#[cfg(test)]
mod tests {
    use super::*;

    fn series(label: &str, points: &[(f64, f64)]) -> Series {
        Series {
            label: label.to_string(),
            points: points.to_vec(),
        }
    }

    fn plot<'a>(title: &'a str, series: &'a [Series]) -> LinePlot<'a> {
        LinePlot {
            title,
            x_label: "MTP heads",
            y_label: "tokens / s",
            series,
            log_y: false,
            size: (800, 500),
        }
    }

    /// Decodes a PNG: (width, height, RGB pixels).
    fn decode(path: &Path) -> (u32, u32, Vec<u8>) {
        let file = std::fs::File::open(path).unwrap();
        let (info, mut reader) = png::Decoder::new(file).read_info().unwrap();
        assert_eq!(info.color_type, png::ColorType::RGB);
        let mut pixels = vec![0; info.buffer_size()];
        reader.next_frame(&mut pixels).unwrap();
        (info.width, info.height, pixels)
    }

    fn has_colour(pixels: &[u8], colour: RGBColor) -> bool {
        pixels
            .chunks_exact(3)
            .any(|p| p == [colour.0, colour.1, colour.2])
    }

    #[test]
    fn two_series_make_a_png_of_the_requested_size_with_both_colours() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("speed.png");
        let data = [
            series(
                "greedy",
                &[(1.0, 210.0), (2.0, 380.0), (4.0, 610.0), (8.0, 720.0)],
            ),
            series(
                "typical",
                &[(1.0, 190.0), (2.0, 330.0), (4.0, 540.0), (8.0, 655.0)],
            ),
        ];
        write_line_plot(&path, &plot("Throughput", &data)).unwrap();

        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let (width, height, pixels) = decode(&path);
        assert_eq!((width, height), (800, 500));
        assert!(has_colour(&pixels, COLOURS[0]) && has_colour(&pixels, COLOURS[1]));
        // The title was rendered: dark pixels in the top 40 rows, which hold nothing else.
        let title_rows = &pixels[..40 * 800 * 3];
        assert!(
            title_rows
                .chunks_exact(3)
                .any(|p| p.iter().all(|&c| c < 80))
        );
        // Only the PNG is left in the directory: the temporary file was renamed.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn log_y_skips_non_positive_points_and_renders() {
        let data = [series(
            "loss",
            &[(1.0, 3.0), (2.0, 0.5), (3.0, 0.0), (4.0, 0.02)],
        )];
        let png = render_line_plot(&LinePlot {
            log_y: true,
            ..plot("Loss", &data)
        })
        .unwrap();
        assert_eq!(&png[..4], b"\x89PNG");
    }

    #[test]
    fn nothing_to_draw_is_an_error_naming_the_plot() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.png");
        let err = write_line_plot(&path, &plot("Empty figure", &[])).unwrap_err();
        assert!(format!("{err:#}").contains("Empty figure"), "{err:#}");
        assert!(format!("{err:#}").contains("no series"), "{err:#}");

        let data = [
            series("nan", &[(1.0, f64::NAN), (f64::INFINITY, 2.0)]),
            series("none", &[]),
        ];
        let err = write_line_plot(&path, &plot("Broken figure", &data)).unwrap_err();
        assert!(format!("{err:#}").contains("Broken figure"), "{err:#}");
        assert!(!path.exists());
    }

    #[test]
    fn non_finite_points_are_skipped() {
        let data = [series("a", &[(1.0, 1.0), (2.0, f64::NAN), (3.0, 2.0)])];
        render_line_plot(&plot("Partial", &data)).unwrap();
    }

    #[test]
    fn x_ticks_are_the_integer_values_present() {
        let axis = x_axis([8.0, 1.0, 2.0, 4.0, 2.0].into_iter());
        assert_eq!(axis.ticks, vec![1.0, 2.0, 4.0, 8.0]);
        assert!(axis.range.0 < 1.0 && axis.range.1 > 8.0);
        assert_eq!(axis.labels().collect::<Vec<_>>(), ["1", "2", "4", "8"]);

        let axis = x_axis([0.0, 0.25, 0.5, 1.0].into_iter());
        assert_eq!(
            axis.labels().collect::<Vec<_>>(),
            ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"]
        );
    }

    #[test]
    fn y_range_is_padded_and_ticks_are_round() {
        let axis = linear_axis([190.0, 720.0].into_iter());
        assert!(axis.range.0 < 190.0 && axis.range.1 > 720.0);
        assert_eq!(
            axis.labels().collect::<Vec<_>>(),
            ["200", "300", "400", "500", "600", "700"]
        );
        // A constant series still gets a non-empty range.
        let axis = linear_axis([0.0, 0.0].into_iter());
        assert!(axis.range.0 < 0.0 && axis.range.1 > 0.0);

        let axis = log_axis([0.02, 3.0].into_iter());
        assert_eq!(
            axis.labels().collect::<Vec<_>>(),
            ["0.02", "0.05", "0.1", "0.2", "0.5", "1", "2"]
        );
        assert_eq!(format_significant(2e6), "2e6");
    }

    #[test]
    fn legend_goes_to_a_free_corner() {
        let rising = |label| Drawn {
            index: 0,
            label,
            points: vec![(1.0, 1.0), (2.0, 2.0), (4.0, 4.0), (8.0, 8.0)],
        };
        let series = [rising("a")];
        let (x, y) = (
            x_axis([1.0, 8.0].into_iter()),
            linear_axis([1.0, 8.0].into_iter()),
        );
        let at = legend_position(&series, &x, &y, false, (0.3, 0.2));
        assert_eq!(at, SeriesLabelPosition::UpperLeft);
        let mut falling = rising("b");
        falling.points.iter_mut().for_each(|p| p.1 = 9.0 - p.1);
        let at = legend_position(&[falling], &x, &y, false, (0.3, 0.2));
        assert_eq!(at, SeriesLabelPosition::UpperRight);
    }

    /// Renders example figures to the temporary directory for a visual check:
    /// `cargo test --release -p voxspec-cli -- --ignored plots::tests::example_figures`.
    #[test]
    #[ignore = "writes example figures for a visual check"]
    fn example_figures() {
        let data = [
            series(
                "greedy, MTP",
                &[(1.0, 1.0), (2.0, 1.74), (4.0, 2.61), (8.0, 3.02)],
            ),
            series(
                "SSD beta=0.9",
                &[(1.0, 1.0), (2.0, 1.66), (4.0, 2.38), (8.0, 2.71)],
            ),
            series(
                "PCG groups",
                &[(1.0, 1.0), (2.0, 1.81), (4.0, 2.79), (8.0, 3.35)],
            ),
        ];
        let path = std::env::temp_dir().join("voxspec-plot-example.png");
        write_line_plot(
            &path,
            &LinePlot {
                title: "Tokens per decoding step vs. number of MTP heads",
                x_label: "MTP heads",
                y_label: "tokens / step",
                series: &data,
                log_y: false,
                size: DEFAULT_SIZE,
            },
        )
        .unwrap();
        println!("wrote {}", path.display());

        let data = [
            series(
                "CPU (flex)",
                &[(1.0, 180.0), (4.0, 95.0), (16.0, 61.0), (64.0, 48.0)],
            ),
            series("GPU", &[(1.0, 9.5), (4.0, 3.1), (16.0, 1.2), (64.0, 0.41)]),
        ];
        let path = std::env::temp_dir().join("voxspec-plot-example-log.png");
        write_line_plot(
            &path,
            &LinePlot {
                title: "Decoding time per token",
                x_label: "batch size",
                y_label: "ms / token",
                series: &data,
                log_y: true,
                size: DEFAULT_SIZE,
            },
        )
        .unwrap();
        println!("wrote {}", path.display());
    }
}
