//! Long texts into the sentences a TTS model speaks one at a time.
//!
//! [`split_sentences`] cuts a text (a paragraph, a chapter) at sentence ends — `.`, `!`, `?` or
//! `…`, optionally followed by closing quotes or brackets, then white space — and at paragraph
//! breaks (a blank line). It does not cut after the abbreviations of [`ABBREVIATIONS`]
//! (`Mr.`, `e.g.`, `No.` …), after single initials (`J. R. R. Tolkien`), inside numbers (`3.5`)
//! or where the next word starts in lower case (`etc. and so on`).
//!
//! [`split_clauses`] cuts one sentence that is still too long for the model's context at its
//! clause marks (`;`, `:` and dashes before `,`), nearest the middle first, and between words
//! when a piece has none left.

/// Words that end with a full stop without ending a sentence (lower case, stop excluded).
pub const ABBREVIATIONS: &[&str] = &[
    "mr", "mrs", "ms", "dr", "prof", "st", "jr", "sr", "mt", "ft", "vs", "etc", "e.g", "i.e", "no",
    "vol", "fig", "gen", "col", "capt", "lt", "sgt", "rev", "hon", "gov", "sen", "rep", "inc",
    "ltd", "co", "corp", "dept", "approx", "jan", "feb", "mar", "apr", "jun", "jul", "aug", "sep",
    "sept", "oct", "nov", "dec", "a.m", "p.m", "u.s", "u.k", "cf", "al",
];

/// One sentence of a longer text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sentence {
    /// The sentence, white space collapsed.
    pub text: String,
    /// Whether a paragraph ends after it (a blank line, or the end of the text).
    pub ends_paragraph: bool,
}

/// Characters that may follow a sentence's final mark and still belong to it.
fn is_closer(c: char) -> bool {
    matches!(c, '"' | '\'' | ')' | ']' | '}' | '”' | '’' | '»')
}

/// Whether the word ending in `.` at the end of `before` is an abbreviation or an initial.
fn ends_with_abbreviation(before: &str) -> bool {
    let word = before
        .rsplit(|c: char| c.is_whitespace() || matches!(c, '(' | '"' | '\'' | '“' | '['))
        .next()
        .unwrap_or("");
    let word = word.trim_end_matches('.');
    if word.is_empty() {
        return false;
    }
    let lower = word.to_lowercase();
    if ABBREVIATIONS.contains(&lower.as_str()) {
        return true;
    }
    // a single letter ("J." in "J. Smith"), or dotted initials ("U.S.A")
    let mut letters = word.split('.');
    letters.all(|part| part.chars().count() == 1 && part.chars().all(char::is_alphabetic))
}

/// The sentences of `text`, in order (see the module documentation). Empty input gives none.
pub fn split_sentences(text: &str) -> Vec<Sentence> {
    let mut out = Vec::new();
    for paragraph in paragraphs(text) {
        let words: Vec<&str> = paragraph.split_whitespace().collect();
        let mut current: Vec<&str> = Vec::new();
        for (i, word) in words.iter().enumerate() {
            current.push(word);
            let core = word.trim_end_matches(is_closer);
            let Some(last) = core.chars().last() else {
                continue;
            };
            let ends = match last {
                '!' | '?' | '…' => true,
                '.' => !ends_with_abbreviation(core),
                _ => false,
            };
            let next_starts_lower = words
                .get(i + 1)
                .and_then(|w| {
                    w.trim_start_matches(|c: char| !c.is_alphanumeric())
                        .chars()
                        .next()
                })
                .is_some_and(char::is_lowercase);
            if ends && !next_starts_lower {
                out.push(Sentence {
                    text: current.join(" "),
                    ends_paragraph: false,
                });
                current.clear();
            }
        }
        if !current.is_empty() {
            out.push(Sentence {
                text: current.join(" "),
                ends_paragraph: false,
            });
        }
        if let Some(last) = out.last_mut() {
            last.ends_paragraph = true;
        }
    }
    out
}

/// The paragraphs of `text`: runs of lines separated by blank lines.
fn paragraphs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in text.lines() {
        if line.trim().is_empty() {
            if !current.trim().is_empty() {
                out.push(std::mem::take(&mut current));
            }
            current.clear();
        } else {
            current.push_str(line);
            current.push('\n');
        }
    }
    if !current.trim().is_empty() {
        out.push(current);
    }
    out
}

/// Cuts `sentence` into pieces of at most `max_chars` characters where it can: at the clause
/// mark nearest the middle (`;`, `:`, `-`, `—` counting one word nearer than `,`), else between
/// the words nearest the middle. A single word longer than `max_chars` stays whole. `max_chars`
/// of 0 is read as 1.
pub fn split_clauses(sentence: &str, max_chars: usize) -> Vec<String> {
    let words: Vec<&str> = sentence.split_whitespace().collect();
    let mut out = Vec::new();
    cut(&words, max_chars.max(1), &mut out);
    out
}

fn cut(words: &[&str], max_chars: usize, out: &mut Vec<String>) {
    let text = words.join(" ");
    if words.len() <= 1 || text.chars().count() <= max_chars {
        if !text.is_empty() {
            out.push(text);
        }
        return;
    }
    let mid = words.len() as f64 / 2.0;
    // after word i (0 ≤ i < len − 1): how strongly a clause ends there (0: not at all)
    let strength = |i: usize| {
        let word = words[i].trim_end_matches(is_closer);
        if word.ends_with([';', ':', '-', '—']) || matches!(words[i + 1], "-" | "—") {
            2.0
        } else if word.ends_with(',') {
            1.0
        } else {
            0.0
        }
    };
    // nearest the middle, a stronger mark counting one word nearer
    let cost = |i: usize| ((i + 1) as f64 - mid).abs() - strength(i);
    let at_mark = (0..words.len() - 1)
        .filter(|&i| strength(i) > 0.0)
        .min_by(|&a, &b| cost(a).total_cmp(&cost(b)));
    let split = at_mark.unwrap_or((words.len() / 2).saturating_sub(1));
    cut(&words[..=split], max_chars, out);
    cut(&words[split + 1..], max_chars, out);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(s: &[Sentence]) -> Vec<&str> {
        s.iter().map(|s| s.text.as_str()).collect()
    }

    #[test]
    fn sentences_end_at_their_marks_and_not_at_abbreviations_or_numbers() {
        let text = "Mr. Smith paid $3.50 for it. Did he? Yes! He told Dr. J. R. Brown, \
                    i.e. his friend, about it (twice.) \"Well,\" she said. \"Go.\" Then the end";
        assert_eq!(
            texts(&split_sentences(text)),
            vec![
                "Mr. Smith paid $3.50 for it.",
                "Did he?",
                "Yes!",
                "He told Dr. J. R. Brown, i.e. his friend, about it (twice.)",
                "\"Well,\" she said.",
                "\"Go.\"",
                "Then the end",
            ]
        );
        // a lower-case word after a stop continues the sentence
        assert_eq!(
            texts(&split_sentences(
                "Apples, pears etc. are fruit. So are figs."
            )),
            vec!["Apples, pears etc. are fruit.", "So are figs."]
        );
        assert!(split_sentences(" \n\n ").is_empty());
    }

    #[test]
    fn paragraphs_are_marked_and_lines_within_them_joined() {
        let text = "First line\ncontinues here. Second sentence.\n\n\nNew paragraph.\n";
        let got = split_sentences(text);
        assert_eq!(
            texts(&got),
            vec![
                "First line continues here.",
                "Second sentence.",
                "New paragraph."
            ]
        );
        let ends: Vec<bool> = got.iter().map(|s| s.ends_paragraph).collect();
        assert_eq!(ends, vec![false, true, true]);
    }

    #[test]
    fn long_sentences_split_at_clause_marks_then_between_words() {
        let s = "one two three, four five six seven; eight nine ten";
        assert_eq!(
            split_clauses(s, 40),
            vec!["one two three, four five six seven;", "eight nine ten"]
        );
        assert_eq!(
            split_clauses(s, 20),
            vec!["one two three,", "four five six seven;", "eight nine ten"]
        );
        // no marks: halves between words; a short sentence stays whole
        assert_eq!(
            split_clauses("aaa bbb ccc ddd", 8),
            vec!["aaa bbb", "ccc ddd"]
        );
        assert_eq!(split_clauses("short one.", 100), vec!["short one."]);
        // every piece within the budget, nothing lost
        let long = "word ".repeat(200);
        let pieces = split_clauses(&long, 50);
        assert!(pieces.iter().all(|p| p.chars().count() <= 50));
        assert_eq!(pieces.join(" "), long.trim());
        assert_eq!(split_clauses("unbreakable", 3), vec!["unbreakable"]);
    }
}
