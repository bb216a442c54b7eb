//! PNG line plots for benchmark figures.
//!
//! Rendering is CPU-only through plotters' bitmap backend into an in-memory RGB buffer, which is
//! encoded with `png` and written atomically. Text uses DejaVu Sans embedded in the binary (see
//! `assets/fonts/LICENSE-DejaVu.txt`), so plots render the same on machines without fonts or
//! fontconfig; glyphs are rasterised by `Canvas` (`plots/canvas.rs`) rather than by plotters
//! (see there why). Axes, ticks and the legend's place are in `plots/axis.rs`.

mod axis;
mod canvas;

use std::path::Path;
use std::sync::OnceLock;

use ab_glyph::FontRef;
use plotters::backend::BitMapBackend;
use plotters::prelude::*;

use axis::{legend_position, linear_axis, log_axis, x_axis};
use canvas::Canvas;

use crate::error::EvalError;

/// Internal results: the message of what failed.
type Result<T, E = String> = std::result::Result<T, E>;

macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}

/// The embedded font, registered with plotters as its `sans-serif` family.
static DEJAVU_SANS: &[u8] = include_bytes!("../../../assets/fonts/DejaVuSans.ttf");
const FONT: &str = "sans-serif";

/// Default figure size in pixels (width, height).
pub const DEFAULT_SIZE: (u32, u32) = (960, 600);

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
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A line plot: one line with point markers per series, a legend, axis labels and a title.
#[derive(Debug, Clone)]
pub struct LinePlot<'a> {
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
///
/// # Errors
/// [`EvalError::Plot`] naming the plot.
pub fn write_line_plot(path: &Path, plot: &LinePlot) -> Result<(), EvalError> {
    let png = render_line_plot(plot)?;
    voxspec_data::write_atomic(path, &png).map_err(|e| EvalError::Plot {
        title: plot.title.to_string(),
        detail: format!("writing to {}: {e}", path.display()),
    })
}

/// Renders `plot` to PNG bytes.
///
/// # Errors
/// [`EvalError::Plot`] naming the plot: a size outside 200x150 ..= 8192x8192, no series, no
/// drawable point.
pub fn render_line_plot(plot: &LinePlot) -> Result<Vec<u8>, EvalError> {
    render(plot).map_err(|detail| EvalError::Plot {
        title: plot.title.to_string(),
        detail,
    })
}

fn render(plot: &LinePlot) -> Result<Vec<u8>> {
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

fn draw_err<E: std::fmt::Display>(e: E) -> String {
    format!("drawing failed: {e}")
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
        .ok_or_else(|| "the embedded DejaVu Sans font could not be loaded".to_string())
}

fn encode_png(rgb: &[u8], width: u32, height: u32) -> Result<Vec<u8>> {
    let mut bytes = Vec::new();
    let mut encoder = png::Encoder::new(&mut bytes, width, height);
    encoder.set_color(png::ColorType::RGB);
    encoder.set_depth(png::BitDepth::Eight);
    let mut writer = encoder
        .write_header()
        .map_err(|e| format!("encoding PNG: {e}"))?;
    writer
        .write_image_data(rgb)
        .map_err(|e| format!("encoding PNG: {e}"))?;
    // The end chunk is written when the writer is dropped.
    drop(writer);
    Ok(bytes)
}

/// A series as drawn: its index (for the colour), label and the points that can be drawn.
pub(super) struct Drawn<'s> {
    pub(super) index: usize,
    pub(super) label: &'s str,
    pub(super) points: Vec<(f64, f64)>,
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

#[cfg(test)]
mod tests {
    use super::axis::*;
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
