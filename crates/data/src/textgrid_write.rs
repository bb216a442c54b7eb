//! Writing phone alignments as Praat TextGrids (the long text format, one `phones` tier, as the
//! Montreal Forced Aligner writes them), so any tool that reads MFA output reads voxspec's.

use std::fmt::Write as _;
use std::path::Path;

use crate::error::{DataError, Result};
use crate::textgrid::Alignment;

/// The TextGrid text of `alignment` (intervals from 0 to its end; times with 6 decimals).
///
/// # Errors
/// [`DataError::Config`] when the alignment breaks its invariants ([`Alignment::check`]).
pub fn textgrid_text(alignment: &Alignment) -> Result<String> {
    alignment.check().map_err(|detail| DataError::Config {
        field: "alignment",
        detail,
    })?;
    let end = alignment.end();
    let mut s = String::new();
    let _ = write!(
        s,
        "File type = \"ooTextFile\"\nObject class = \"TextGrid\"\n\nxmin = 0 \nxmax = {end:.6} \n\
         tiers? <exists> \nsize = 1 \nitem []: \n    item [1]:\n        class = \"IntervalTier\" \n\
         \x20       name = \"phones\" \n        xmin = 0 \n        xmax = {end:.6} \n\
         \x20       intervals: size = {} \n",
        alignment.len()
    );
    for (i, ((phone, start), stop)) in alignment
        .phones
        .iter()
        .zip(alignment.starts())
        .zip(&alignment.ends)
        .enumerate()
    {
        let label = phone.replace('"', "\"\"");
        let _ = write!(
            s,
            "        intervals [{}]:\n            xmin = {start:.6} \n            xmax = {stop:.6} \n\
             \x20           text = \"{label}\" \n",
            i + 1
        );
    }
    Ok(s)
}

/// Writes `alignment` to `path` atomically (a temporary sibling, then a rename), creating the
/// parent directories.
///
/// # Errors
/// I/O errors naming the file; [`DataError::Config`] for an invalid alignment.
pub fn write_textgrid(path: &Path, alignment: &Alignment) -> Result<()> {
    let text = textgrid_text(alignment)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| DataError::io("creating", dir, e))?;
    }
    crate::write_atomic(path, text.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::textgrid::parse_textgrid;

    #[test]
    fn written_textgrids_read_back() {
        let a = Alignment {
            phones: vec!["sil".into(), "HH".into(), "AH".into(), "sil".into()],
            ends: vec![0.105, 0.2, 0.355, 1.0],
        };
        let text = textgrid_text(&a).unwrap();
        let back = parse_textgrid(&text, Path::new("x.TextGrid")).unwrap();
        assert_eq!(back, a);
        let bad = Alignment {
            phones: vec!["A".into()],
            ends: vec![0.0],
        };
        assert!(textgrid_text(&bad).is_err());
    }
}
