//! The plots' drawing backend: plotters' bitmap with text rasterised here.

use ab_glyph::{Font as _, FontRef, ScaleFont as _};
use plotters::backend::BitMapBackend;
use plotters::prelude::*;
use plotters_backend::text_anchor::{HPos, VPos};
use plotters_backend::{BackendColor, BackendCoord, DrawingErrorKind};

/// A [`BitMapBackend`] that rasterises text itself. plotters' ab_glyph text puts every glyph at
/// a whole pixel and drops its left side bearing, which spaces letters visibly unevenly
/// ("M TP h eads"); here glyphs sit at their sub-pixel pen positions with their bearings. The
/// text box is the one plotters measures (advance widths with kerning, `size / 1.24` high), so
/// its layout still fits; capitals are centred in it vertically (plotters draws them about a
/// fifth of the size higher, above the grid line a tick label belongs to).
pub(super) struct Canvas<'a> {
    pub(super) bitmap: BitMapBackend<'a>,
    pub(super) font: FontRef<'static>,
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
