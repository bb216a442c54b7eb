//! Phone alignments from Praat TextGrid files (the Montreal Forced Aligner's output format).
//!
//! Both text formats Praat writes are read: the long one (`xmin = 0`, `intervals [1]:`, ...) and
//! the short one (bare values). Only the phone tier is returned: the tier named `phones`, or else
//! the first tier whose name contains `phone` (case-insensitive). UTF-8 and UTF-16 (with a byte
//! order mark, as Praat writes non-ASCII files) are accepted; binary TextGrids are not.
//!
//! The result is an [`Alignment`]: consecutive phone intervals starting at 0 s, given by their end
//! times. Empty labels (MFA's silence) become `sil`; a gap between intervals is filled with `sil`;
//! zero-length intervals are dropped.
//!
//! ```text
//! File type = "ooTextFile"            File type = "ooTextFile"
//! Object class = "TextGrid"           Object class = "TextGrid"
//!
//! xmin = 0                            0
//! xmax = 1.2                          1.2
//! tiers? <exists>                     <exists>
//! size = 1                            1
//! item []:                            "IntervalTier"
//!     item [1]:                       "phones"
//!         class = "IntervalTier"      0
//!         name = "phones"             1.2
//!         xmin = 0                    2
//!         xmax = 1.2                  0
//!         intervals: size = 2         0.3
//!         intervals [1]:              ""
//!             xmin = 0                0.3
//!             xmax = 0.3              1.2
//!             text = ""               "AH"
//!         intervals [2]: ...
//! ```

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{DataError, Result};

/// The label given to silence (and to empty intervals).
pub const SILENCE: &str = "sil";

/// A phone alignment: `phones[i]` lasts from `ends[i - 1]` (0 for the first) to `ends[i]`, in
/// seconds of the audio file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Alignment {
    /// Phone labels as in the file (ARPAbet for MFA and minitts), silence as [`SILENCE`].
    pub phones: Vec<String>,
    /// End time of each phone in seconds, strictly increasing; the first phone starts at 0.
    pub ends: Vec<f64>,
}

impl Alignment {
    /// Number of intervals.
    pub fn len(&self) -> usize {
        self.phones.len()
    }

    /// True when there are no intervals.
    pub fn is_empty(&self) -> bool {
        self.phones.is_empty()
    }

    /// End of the last interval (0 when empty), in seconds.
    pub fn end(&self) -> f64 {
        self.ends.last().copied().unwrap_or(0.0)
    }

    /// Start time of each interval, in seconds.
    pub fn starts(&self) -> Vec<f64> {
        let mut out = Vec::with_capacity(self.ends.len());
        out.push(0.0);
        out.extend_from_slice(&self.ends[..self.ends.len().saturating_sub(1)]);
        out.truncate(self.ends.len());
        out
    }

    /// Duration of each interval, in seconds.
    pub fn durations(&self) -> Vec<f64> {
        self.starts()
            .iter()
            .zip(&self.ends)
            .map(|(s, e)| e - s)
            .collect()
    }

    /// Checks the invariants: as many labels as ends, no empty label, ends finite, positive and
    /// strictly increasing. Returns what is wrong.
    pub fn check(&self) -> std::result::Result<(), String> {
        if self.phones.len() != self.ends.len() {
            return Err(format!(
                "{} phones but {} end times",
                self.phones.len(),
                self.ends.len()
            ));
        }
        let mut prev = 0.0;
        for (i, (p, &e)) in self.phones.iter().zip(&self.ends).enumerate() {
            if p.trim().is_empty() {
                return Err(format!("phone {} has an empty label", i + 1));
            }
            if !(e.is_finite() && e > prev) {
                return Err(format!(
                    "phone {} ({p:?}) ends at {e} s, not after {prev} s",
                    i + 1
                ));
            }
            prev = e;
        }
        Ok(())
    }
}

/// Reads the phone tier of a TextGrid file.
pub fn read_textgrid(path: &Path) -> Result<Alignment> {
    let bytes = std::fs::read(path).map_err(|e| DataError::io("reading", path, e))?;
    let text = decode(&bytes).ok_or_else(|| {
        error(
            path,
            1,
            "not a text TextGrid (binary, or neither UTF-8 nor UTF-16 text)",
        )
    })?;
    parse_textgrid(&text, path)
}

/// Parses the text of a TextGrid; `path` is only used in error messages.
pub fn parse_textgrid(text: &str, path: &Path) -> Result<Alignment> {
    let mut p = Parser {
        tokens: tokenize(text, path)?,
        pos: 0,
        path,
    };
    let file_type = p.string("the file type \"ooTextFile\"")?;
    if file_type.0 != "ooTextFile" {
        return Err(error(
            path,
            file_type.1,
            format!("file type is {:?}, expected \"ooTextFile\"", file_type.0),
        ));
    }
    let class = p.string("the object class \"TextGrid\"")?;
    if class.0 != "TextGrid" {
        return Err(error(
            path,
            class.1,
            format!("object class is {:?}, expected \"TextGrid\"", class.0),
        ));
    }
    p.number("xmin")?;
    p.number("xmax")?;
    let (exists, line) = p.flag("tiers? <exists>")?;
    if exists != "exists" {
        return Err(error(path, line, "the TextGrid has no tiers"));
    }
    let (n_tiers, _) = p.count("the number of tiers")?;

    let mut names = Vec::new();
    let mut chosen: Option<(String, Tier)> = None;
    for _ in 0..n_tiers {
        let tier = p.tier()?;
        let name = tier.name.clone();
        let better = match &chosen {
            None => name == "phones" || name.to_lowercase().contains("phone"),
            Some((current, _)) => current != "phones" && name == "phones",
        };
        if better {
            chosen = Some((name.clone(), tier));
        }
        names.push(name);
    }
    let Some((_, tier)) = chosen else {
        return Err(error(
            path,
            1,
            format!(
                "no phone tier (none named \"phones\" or containing \"phone\"; tiers: {})",
                if names.is_empty() {
                    "none".to_string()
                } else {
                    names
                        .iter()
                        .map(|n| format!("{n:?}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ),
        ));
    };
    tier.into_alignment(path)
}

fn error(path: &Path, line: usize, detail: impl Into<String>) -> DataError {
    DataError::TextGrid {
        path: path.to_path_buf(),
        line,
        detail: detail.into(),
    }
}

/// UTF-8 (BOM optional) or UTF-16 with a BOM; `None` for anything else (binary files).
fn decode(bytes: &[u8]) -> Option<String> {
    let utf16 = |be: bool| {
        let units: Vec<u16> = bytes[2..]
            .chunks_exact(2)
            .map(|c| {
                if be {
                    u16::from_be_bytes([c[0], c[1]])
                } else {
                    u16::from_le_bytes([c[0], c[1]])
                }
            })
            .collect();
        String::from_utf16(&units).ok()
    };
    match bytes {
        [0xFF, 0xFE, ..] => utf16(false),
        [0xFE, 0xFF, ..] => utf16(true),
        [0xEF, 0xBB, 0xBF, rest @ ..] => String::from_utf8(rest.to_vec()).ok(),
        _ => String::from_utf8(bytes.to_vec()).ok(),
    }
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    /// A quoted string, with `""` unescaped.
    Str(String),
    /// A number, kept as written.
    Num(String),
    /// `<exists>`, `<absent>`, ...
    Flag(String),
}

impl Tok {
    fn describe(&self) -> String {
        match self {
            Tok::Str(s) => format!("the string {s:?}"),
            Tok::Num(n) => format!("the number {n}"),
            Tok::Flag(f) => format!("<{f}>"),
        }
    }
}

/// Splits a text TextGrid into values. The long format's labels (`xmin =`, `intervals:`,
/// `item [1]:`) are skipped: bare words, `=`, `:`, `?`, anything in `[...]` and `!` comments.
fn tokenize(text: &str, path: &Path) -> Result<Vec<(Tok, usize)>> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\n' => {
                line += 1;
                i += 1;
            }
            '"' => {
                let start_line = line;
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(error(path, start_line, "string is never closed"));
                        }
                        Some('"') if chars.get(i + 1) == Some(&'"') => {
                            s.push('"');
                            i += 2;
                        }
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some(&ch) => {
                            if ch == '\n' {
                                line += 1;
                            }
                            s.push(ch);
                            i += 1;
                        }
                    }
                }
                out.push((Tok::Str(s), start_line));
            }
            '<' => {
                let start = i + 1;
                let end = chars[start..]
                    .iter()
                    .position(|&ch| ch == '>' || ch == '\n')
                    .map(|k| start + k)
                    .filter(|&k| chars[k] == '>')
                    .ok_or_else(|| error(path, line, "'<' without a closing '>'"))?;
                out.push((Tok::Flag(chars[start..end].iter().collect()), line));
                i = end + 1;
            }
            '[' => {
                let end = chars[i..]
                    .iter()
                    .position(|&ch| ch == ']' || ch == '\n')
                    .map(|k| i + k)
                    .filter(|&k| chars[k] == ']')
                    .ok_or_else(|| error(path, line, "'[' without a closing ']'"))?;
                i = end + 1;
            }
            '!' => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            c if c.is_ascii_digit() || c == '-' || c == '+' || c == '.' => {
                let start = i;
                while i < chars.len() && !chars[i].is_whitespace() {
                    i += 1;
                }
                out.push((Tok::Num(chars[start..i].iter().collect()), line));
            }
            c if c.is_whitespace() => i += 1,
            _ => {
                // A label word: letters and the punctuation of `tiers?`, `intervals:`, `=`.
                while i < chars.len()
                    && !chars[i].is_whitespace()
                    && !matches!(chars[i], '"' | '<' | '[' | '!')
                {
                    i += 1;
                }
            }
        }
    }
    Ok(out)
}

struct Tier {
    name: String,
    class: String,
    /// Line of the tier's class string.
    line: usize,
    /// (xmin, xmax, label, line of xmin)
    intervals: Vec<(f64, f64, String, usize)>,
}

impl Tier {
    fn into_alignment(self, path: &Path) -> Result<Alignment> {
        if self.class != "IntervalTier" {
            return Err(error(
                path,
                self.line,
                format!(
                    "tier {:?} is a {}, not an IntervalTier",
                    self.name, self.class
                ),
            ));
        }
        if self.intervals.is_empty() {
            return Err(error(
                path,
                self.line,
                format!("tier {:?} has no intervals", self.name),
            ));
        }
        // Half a sample at 16 kHz: boundaries closer than this are the same boundary.
        const EPS: f64 = 1e-6;
        let mut phones = Vec::with_capacity(self.intervals.len());
        let mut ends: Vec<f64> = Vec::with_capacity(self.intervals.len());
        let mut prev = 0.0;
        for (xmin, xmax, label, line) in self.intervals {
            if xmin < prev - EPS {
                return Err(error(
                    path,
                    line,
                    if ends.is_empty() {
                        format!("interval starts at {xmin} s, before 0")
                    } else {
                        format!(
                            "interval starts at {xmin} s, before the previous one ends ({prev} s)"
                        )
                    },
                ));
            }
            if xmax < xmin {
                return Err(error(
                    path,
                    line,
                    format!("interval ends at {xmax} s, before it starts ({xmin} s)"),
                ));
            }
            if xmin > prev + EPS {
                // A gap (or a first interval after 0): silence.
                phones.push(SILENCE.to_string());
                ends.push(xmin);
                prev = xmin;
            }
            if xmax <= prev + EPS {
                continue; // zero length
            }
            let label = label.trim();
            phones.push(if label.is_empty() {
                SILENCE.to_string()
            } else {
                label.to_string()
            });
            ends.push(xmax);
            prev = xmax;
        }
        if phones.is_empty() {
            return Err(error(
                path,
                self.line,
                format!("tier {:?} has only zero-length intervals", self.name),
            ));
        }
        Ok(Alignment { phones, ends })
    }
}

struct Parser<'a> {
    tokens: Vec<(Tok, usize)>,
    pos: usize,
    path: &'a Path,
}

impl Parser<'_> {
    fn next(&mut self, what: &str) -> Result<(Tok, usize)> {
        match self.tokens.get(self.pos) {
            Some(t) => {
                self.pos += 1;
                Ok(t.clone())
            }
            None => {
                let line = self.tokens.last().map_or(1, |t| t.1);
                Err(error(
                    self.path,
                    line,
                    format!("file ends where {what} was expected"),
                ))
            }
        }
    }

    fn string(&mut self, what: &str) -> Result<(String, usize)> {
        match self.next(what)? {
            (Tok::Str(s), line) => Ok((s, line)),
            (t, line) => Err(error(
                self.path,
                line,
                format!("expected {what} (a quoted string), found {}", t.describe()),
            )),
        }
    }

    fn number(&mut self, what: &str) -> Result<(f64, usize)> {
        match self.next(what)? {
            (Tok::Num(n), line) => match n.parse::<f64>() {
                Ok(v) if v.is_finite() => Ok((v, line)),
                _ => Err(error(
                    self.path,
                    line,
                    format!("{what}: {n:?} is not a number"),
                )),
            },
            (t, line) => Err(error(
                self.path,
                line,
                format!("expected {what} (a number), found {}", t.describe()),
            )),
        }
    }

    fn count(&mut self, what: &str) -> Result<(usize, usize)> {
        match self.next(what)? {
            (Tok::Num(n), line) => n.parse::<usize>().map(|v| (v, line)).map_err(|_| {
                error(
                    self.path,
                    line,
                    format!("{what}: {n:?} is not a whole number"),
                )
            }),
            (t, line) => Err(error(
                self.path,
                line,
                format!("expected {what} (a whole number), found {}", t.describe()),
            )),
        }
    }

    fn flag(&mut self, what: &str) -> Result<(String, usize)> {
        match self.next(what)? {
            (Tok::Flag(f), line) => Ok((f, line)),
            (t, line) => Err(error(
                self.path,
                line,
                format!("expected {what}, found {}", t.describe()),
            )),
        }
    }

    fn tier(&mut self) -> Result<Tier> {
        let (class, line) = self.string("a tier class (\"IntervalTier\" or \"TextTier\")")?;
        let (name, _) = self.string("the tier name")?;
        self.number("the tier's xmin")?;
        self.number("the tier's xmax")?;
        let (n, _) = self.count("the number of intervals or points")?;
        let mut intervals = Vec::new();
        match class.as_str() {
            "IntervalTier" => {
                for _ in 0..n {
                    let (xmin, l) = self.number("an interval's xmin")?;
                    let (xmax, _) = self.number("an interval's xmax")?;
                    let (text, _) = self.string("an interval's text")?;
                    intervals.push((xmin, xmax, text, l));
                }
            }
            "TextTier" => {
                for _ in 0..n {
                    self.number("a point's time")?;
                    self.string("a point's mark")?;
                }
            }
            other => {
                return Err(error(
                    self.path,
                    line,
                    format!("unknown tier class {other:?} (expected IntervalTier or TextTier)"),
                ));
            }
        }
        Ok(Tier {
            name,
            class,
            line,
            intervals,
        })
    }
}

/// Where [`find_textgrid`] looks for `<id>.TextGrid`, in order: `alignments/<speaker>/<chapter>/`,
/// `alignments/<speaker>/`, `alignments/` (when a directory is given), then beside the audio.
pub fn textgrid_candidates(
    audio: &Path,
    id: &str,
    speaker: &str,
    chapter: &str,
    alignments: Option<&Path>,
) -> Vec<PathBuf> {
    let file = format!("{id}.TextGrid");
    let mut out = Vec::new();
    if let Some(dir) = alignments {
        if !chapter.is_empty() {
            out.push(dir.join(speaker).join(chapter).join(&file));
        }
        out.push(dir.join(speaker).join(&file));
        out.push(dir.join(&file));
    }
    out.push(audio.with_file_name(&file));
    out
}

/// The first existing file of [`textgrid_candidates`].
pub fn find_textgrid(
    audio: &Path,
    id: &str,
    speaker: &str,
    chapter: &str,
    alignments: Option<&Path>,
) -> Option<PathBuf> {
    textgrid_candidates(audio, id, speaker, chapter, alignments)
        .into_iter()
        .find(|p| p.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_and_durations_follow_the_ends() {
        let a = Alignment {
            phones: vec!["sil".into(), "AH".into()],
            ends: vec![0.25, 1.0],
        };
        assert_eq!(a.starts(), vec![0.0, 0.25]);
        assert_eq!(a.durations(), vec![0.25, 0.75]);
        assert_eq!(a.end(), 1.0);
        assert!(a.check().is_ok());
        let bad = Alignment {
            phones: vec!["A".into(), "B".into()],
            ends: vec![0.5, 0.5],
        };
        assert!(bad.check().unwrap_err().contains("phone 2"));
    }

    #[test]
    fn tokenizer_skips_labels_brackets_and_comments() {
        let toks = tokenize(
            "item [1]: ! a comment 5\n  xmin = -0.5 \n text = \"a \"\"b\"\"\" <exists>",
            Path::new("x"),
        )
        .unwrap();
        assert_eq!(
            toks,
            vec![
                (Tok::Num("-0.5".into()), 2),
                (Tok::Str("a \"b\"".into()), 3),
                (Tok::Flag("exists".into()), 3),
            ]
        );
    }
}
