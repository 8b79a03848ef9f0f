//! Pre-tokenization for byte-level BPE: splitting text into words.
//!
//! llama.cpp applies a list of regexes in sequence; each one splits every
//! span the previous ones produced (a match and each stretch of text between
//! matches become spans). Two patterns — GPT-2's and Llama 3's — are run by
//! hand-written scanners instead of a regex engine; those scanners are what
//! define the behaviour (e.g. `\s+(?!\S)` inside a span), so they are
//! reproduced here rule for rule. `\p{N}` alone (SmolLM/StarCoder digit
//! isolation) gets a scanner too. Every other pattern runs on fancy-regex the
//! way llama.cpp runs it on `std::regex`: when the pattern uses Unicode
//! categories, the text is first "collapsed" (ASCII kept, every other code
//! point replaced by one stand-in character per category, non-ASCII
//! whitespace by `\x0B`) and `\p{..}` is rewritten to match the stand-ins.

use std::ops::Range;

use crate::unicode::{flags, CpFlags};

/// The GPT-2 pattern, run by [`split_gpt2`].
pub(crate) const GPT2: &str =
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)";
/// The Llama 3 pattern (case-insensitive contractions), run by [`split_llama3`].
pub(crate) const LLAMA3: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
const LLAMA3_ORIGINAL: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Qwen 2 pattern: Llama 3's with single digits, run by a scanner.
pub(crate) const QWEN2: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// The Qwen 3.5 pattern: Qwen 2's with marks counted as letters, run by a scanner.
pub(crate) const QWEN35: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Runs of newlines and runs of anything else (Gemma 4), run by a scanner.
pub(crate) const NEWLINE_RUNS: &str = "[^\\n]+|[\\n]+";
/// One code point of category N per span.
pub(crate) const ISOLATE_NUMBERS: &str = r"\p{N}";

/// Stand-in characters of the collapsed text, one per category (llama.cpp
/// uses the bytes 0xD0..=0xD5; private-use code points play that role here).
const COLLAPSED_OTHER: char = '\u{E0D0}';
const COLLAPSED_NUMBER: char = '\u{E0D1}';
const COLLAPSED_LETTER: char = '\u{E0D2}';
const COLLAPSED_PUNCT: char = '\u{E0D3}';
const COLLAPSED_MARK: char = '\u{E0D4}';
const COLLAPSED_SYMBOL: char = '\u{E0D5}';

/// The category names llama.cpp recognizes in patterns, and the stand-in
/// plus ASCII members each one becomes in a collapsed pattern. (The ASCII
/// sets are llama.cpp's.)
const CATEGORIES: &[(&str, char, &str)] = &[
    ("N", COLLAPSED_NUMBER, "0-9"),
    ("L", COLLAPSED_LETTER, "A-Za-z"),
    ("P", COLLAPSED_PUNCT, r"!-#%-*,-/:-;?-@\[-\]_\{\}"),
    ("M", COLLAPSED_MARK, ""),
    ("S", COLLAPSED_SYMBOL, r"\$\+<->\^`\|\~"),
    ("Lu", COLLAPSED_LETTER, "A-Za-z"),
    ("Ll", COLLAPSED_LETTER, "A-Za-z"),
    ("Lt", COLLAPSED_LETTER, "A-Za-z"),
    ("Lm", COLLAPSED_LETTER, "A-Za-z"),
    ("Lo", COLLAPSED_LETTER, "A-Za-z"),
];

enum Step {
    Gpt2,
    /// The Llama 3 family scanner: digits per number word, marks as letters.
    Llama3 {
        max_digits: usize,
        marks: bool,
    },
    IsolateNumbers,
    NewlineRuns,
    Regex {
        re: fancy_regex::Regex,
        collapsed: bool,
    },
}

/// A compiled list of pre-tokenizer patterns.
pub(crate) struct PreTokenizer {
    steps: Vec<Step>,
    need_collapse: bool,
}

impl std::fmt::Debug for PreTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PreTokenizer")
            .field("steps", &self.steps.len())
            .finish()
    }
}

fn uses_categories(expr: &str) -> bool {
    CATEGORIES
        .iter()
        .any(|(name, _, _)| expr.contains(&format!(r"\p{{{name}}}")))
}

impl PreTokenizer {
    /// Compiles llama.cpp-style patterns (ECMAScript flavour).
    pub(crate) fn new(exprs: &[&str]) -> Result<PreTokenizer, String> {
        let need_collapse = exprs.iter().any(|e| uses_categories(e));
        let mut steps = Vec::with_capacity(exprs.len());
        for &expr in exprs {
            let step = if expr == GPT2 {
                Step::Gpt2
            } else if expr == LLAMA3 || expr == LLAMA3_ORIGINAL {
                Step::Llama3 {
                    max_digits: 3,
                    marks: false,
                }
            } else if expr == QWEN2 {
                Step::Llama3 {
                    max_digits: 1,
                    marks: false,
                }
            } else if expr == QWEN35 {
                Step::Llama3 {
                    max_digits: 1,
                    marks: true,
                }
            } else if expr == ISOLATE_NUMBERS {
                Step::IsolateNumbers
            } else if expr == NEWLINE_RUNS {
                Step::NewlineRuns
            } else {
                let collapsed = uses_categories(expr);
                let translated = translate(expr, collapsed)?;
                let re = fancy_regex::Regex::new(&translated).map_err(|e| {
                    format!("pre-tokenizer regex {expr:?} does not compile ({translated:?}): {e}")
                })?;
                Step::Regex { re, collapsed }
            };
            steps.push(step);
        }
        Ok(PreTokenizer {
            steps,
            need_collapse,
        })
    }

    /// Splits `text` into words, returned as byte ranges of `text`.
    pub(crate) fn split(&self, text: &str) -> Vec<Range<usize>> {
        let chars: Vec<char> = text.chars().collect();
        if chars.is_empty() {
            return Vec::new();
        }
        let mut byte_pos = Vec::with_capacity(chars.len() + 1);
        let mut acc = 0usize;
        for &c in &chars {
            byte_pos.push(acc);
            acc += c.len_utf8();
        }
        byte_pos.push(acc);

        let collapsed = if self.need_collapse {
            Some(Subject::collapsed(&chars))
        } else {
            None
        };
        let mut plain: Option<Subject> = None;

        let mut spans = vec![chars.len()];
        for step in &self.steps {
            spans = match step {
                Step::Gpt2 => split_gpt2(&chars, &spans),
                Step::Llama3 { max_digits, marks } => {
                    split_llama3(&chars, &spans, *max_digits, *marks)
                }
                Step::IsolateNumbers => isolate_numbers(&chars, &spans),
                Step::NewlineRuns => newline_runs(&chars, &spans),
                Step::Regex {
                    re,
                    collapsed: true,
                } => split_regex(
                    re,
                    collapsed.as_ref().expect("collapsed text built"),
                    &spans,
                ),
                Step::Regex {
                    re,
                    collapsed: false,
                } => {
                    let subject = plain.get_or_insert_with(|| Subject::plain(&chars));
                    split_regex(re, subject, &spans)
                }
            };
        }

        let mut words = Vec::with_capacity(spans.len());
        let mut start = 0;
        for len in spans {
            if len > 0 {
                words.push(byte_pos[start]..byte_pos[start + len]);
            }
            start += len;
        }
        words
    }
}

/// The string a general-purpose regex runs on, with the byte offset of every
/// code point.
struct Subject {
    text: String,
    byte_pos: Vec<usize>,
}

impl Subject {
    fn build(chars: &[char], map: impl Fn(char) -> char) -> Subject {
        let mut text = String::with_capacity(chars.len());
        let mut byte_pos = Vec::with_capacity(chars.len() + 1);
        for &c in chars {
            byte_pos.push(text.len());
            text.push(map(c));
        }
        byte_pos.push(text.len());
        Subject { text, byte_pos }
    }

    /// llama.cpp's collapsed text: ASCII as is, others by category.
    fn collapsed(chars: &[char]) -> Subject {
        Subject::build(chars, |c| {
            if c.is_ascii() {
                return c;
            }
            let f = flags(c);
            if f.is_whitespace() {
                return '\x0B';
            }
            match f.category() {
                CpFlags::NUMBER => COLLAPSED_NUMBER,
                CpFlags::LETTER => COLLAPSED_LETTER,
                CpFlags::PUNCTUATION => COLLAPSED_PUNCT,
                CpFlags::MARK => COLLAPSED_MARK,
                CpFlags::SYMBOL => COLLAPSED_SYMBOL,
                _ => COLLAPSED_OTHER,
            }
        })
    }

    /// The text for category-free patterns: non-ASCII whitespace becomes `\x0B`.
    fn plain(chars: &[char]) -> Subject {
        Subject::build(chars, |c| {
            if !c.is_ascii() && flags(c).is_whitespace() {
                '\x0B'
            } else {
                c
            }
        })
    }
}

/// Runs `re` over every span: matches and the gaps between them become spans.
fn split_regex(re: &fancy_regex::Regex, subject: &Subject, spans: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(spans.len());
    let mut start = 0usize;
    for &len in spans {
        let (ini, end) = (start, start + len);
        start = end;
        if len == 0 {
            continue;
        }
        let base = subject.byte_pos[ini];
        let hay = &subject.text[base..subject.byte_pos[end]];
        // Walk code points alongside the matches to turn byte offsets into counts.
        let mut cp = ini; // code point index of `done` below
        let mut done = 0usize; // bytes of `hay` accounted for
        let to_cp = |cp: &mut usize, done: &mut usize, target: usize| {
            while *done < target {
                *cp += 1;
                *done = subject.byte_pos[*cp] - base;
            }
        };
        let mut last_end_cp = ini;
        for m in re.find_iter(hay) {
            let Ok(m) = m else { break };
            if m.start() == m.end() {
                continue;
            }
            to_cp(&mut cp, &mut done, m.start());
            let m_start = cp;
            to_cp(&mut cp, &mut done, m.end());
            let m_end = cp;
            if m_start > last_end_cp {
                out.push(m_start - last_end_cp);
            }
            out.push(m_end - m_start);
            last_end_cp = m_end;
        }
        if last_end_cp < end {
            out.push(end - last_end_cp);
        }
    }
    out
}

/// `\p{N}`: every number code point is its own span.
fn isolate_numbers(chars: &[char], spans: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(spans.len());
    let mut start = 0usize;
    for &len in spans {
        let (ini, end) = (start, start + len);
        start = end;
        let mut run = 0usize;
        for &c in &chars[ini..end] {
            if flags(c).is_number() {
                if run > 0 {
                    out.push(run);
                    run = 0;
                }
                out.push(1);
            } else {
                run += 1;
            }
        }
        if run > 0 {
            out.push(run);
        }
    }
    out
}

/// Runs of `\n` and runs of other code points.
fn newline_runs(chars: &[char], spans: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(spans.len());
    let mut start = 0usize;
    for &len in spans {
        let (ini, end) = (start, start + len);
        start = end;
        let mut pos = ini;
        while pos < end {
            let newline = chars[pos] == '\n';
            let run = pos;
            while pos < end && (chars[pos] == '\n') == newline {
                pos += 1;
            }
            out.push(pos - run);
        }
    }
    out
}

/// A span being scanned: positions outside it read as "nothing".
struct Scan<'a> {
    chars: &'a [char],
    ini: usize,
    end: usize,
    prev_end: usize,
    out: &'a mut Vec<usize>,
}

impl Scan<'_> {
    #[inline]
    fn cpt(&self, pos: usize) -> Option<char> {
        if pos >= self.ini && pos < self.end {
            Some(self.chars[pos])
        } else {
            None
        }
    }
    #[inline]
    fn flags(&self, pos: usize) -> CpFlags {
        match self.cpt(pos) {
            Some(c) => flags(c),
            None => CpFlags::NONE,
        }
    }
    /// Ends the current word at `end`; returns its length.
    #[inline]
    fn add(&mut self, end: usize) -> usize {
        let len = end - self.prev_end;
        if len > 0 {
            self.out.push(len);
        }
        self.prev_end = end;
        len
    }
}

#[inline]
fn is_other(f: CpFlags) -> bool {
    !(f.is_whitespace() || f.is_letter() || f.is_number()) && f.any()
}

/// GPT-2: `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`,
/// scanned the way llama.cpp's custom splitter does it.
pub(crate) fn split_gpt2(chars: &[char], spans: &[usize]) -> Vec<usize> {
    let mut out = Vec::with_capacity(spans.len());
    let mut start = 0usize;
    for &len in spans {
        let (ini, end) = (start, start + len);
        start = end;
        let mut s = Scan {
            chars,
            ini,
            end,
            prev_end: ini,
            out: &mut out,
        };
        let mut pos = ini;
        while pos < end {
            let c = chars[pos];
            let f = flags(c);

            // 's|'t|'re|'ve|'m|'ll|'d
            if c == '\'' && pos + 1 < end {
                let next = chars[pos + 1];
                if matches!(next, 's' | 't' | 'm' | 'd') {
                    pos += s.add(pos + 2);
                    continue;
                }
                if pos + 2 < end {
                    let next2 = chars[pos + 2];
                    if matches!((next, next2), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                        pos += s.add(pos + 3);
                        continue;
                    }
                }
            }

            let space = c == ' ';
            let mut f2 = if space { s.flags(pos + 1) } else { f };
            // <space>?\p{L}+
            if f2.is_letter() {
                pos += space as usize;
                while f2.is_letter() {
                    pos += 1;
                    f2 = s.flags(pos);
                }
                s.add(pos);
                continue;
            }
            // <space>?\p{N}+
            if f2.is_number() {
                pos += space as usize;
                while f2.is_number() {
                    pos += 1;
                    f2 = s.flags(pos);
                }
                s.add(pos);
                continue;
            }
            // <space>?[^\s\p{L}\p{N}]+
            if is_other(f2) {
                pos += space as usize;
                while is_other(f2) {
                    pos += 1;
                    f2 = s.flags(pos);
                }
                s.add(pos);
                continue;
            }

            let mut n_ws = 0usize;
            while s.flags(pos + n_ws).is_whitespace() {
                n_ws += 1;
            }
            // \s+(?!\S): leave the last whitespace for the next word
            if n_ws > 1 && s.cpt(pos + n_ws).is_some() {
                pos += n_ws - 1;
                s.add(pos);
                continue;
            }
            // \s+
            if n_ws > 0 {
                pos += n_ws;
                s.add(pos);
                continue;
            }
            // no match
            pos += 1;
            s.add(pos);
        }
    }
    out
}

/// Llama 3: `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`,
/// scanned the way llama.cpp's custom splitter does it. Qwen 2 is the same
/// with `\p{N}` (`max_digits` 1); Qwen 3.5 also treats marks as letters.
pub(crate) fn split_llama3(
    chars: &[char],
    spans: &[usize],
    max_digits: usize,
    marks: bool,
) -> Vec<usize> {
    let letter = |f: CpFlags| f.is_letter() || (marks && f.is_mark());
    let mut out = Vec::with_capacity(spans.len());
    let mut start = 0usize;
    for &len in spans {
        let (ini, end) = (start, start + len);
        start = end;
        let mut s = Scan {
            chars,
            ini,
            end,
            prev_end: ini,
            out: &mut out,
        };
        let mut pos = ini;
        while pos < end {
            let c = chars[pos];
            let f = flags(c);

            // (?i:'s|'t|'re|'ve|'m|'ll|'d)
            if c == '\'' && pos + 1 < end {
                let next = chars[pos + 1].to_ascii_lowercase();
                if matches!(next, 's' | 't' | 'm' | 'd') {
                    pos += s.add(pos + 2);
                    continue;
                }
                if pos + 2 < end {
                    let next2 = chars[pos + 2].to_ascii_lowercase();
                    if matches!((next, next2), ('r', 'e') | ('v', 'e') | ('l', 'l')) {
                        pos += s.add(pos + 3);
                        continue;
                    }
                }
            }

            // [^\r\n\p{L}\p{N}]?\p{L}+
            if !(c == '\r' || c == '\n' || f.is_number()) && (letter(f) || letter(s.flags(pos + 1)))
            {
                pos += 1;
                while letter(s.flags(pos)) {
                    pos += 1;
                }
                s.add(pos);
                continue;
            }

            // \p{N}{1,3}
            if f.is_number() {
                let mut group = pos;
                while s.flags(pos).is_number() {
                    pos += 1;
                    if pos - group >= max_digits {
                        s.add(pos);
                        group = pos;
                    }
                }
                s.add(pos);
                continue;
            }

            // <space>?[^\s\p{L}\p{N}]+[\r\n]*  (llama.cpp tests the current
            // code point's flags for "exists", not the next one's)
            let space = c == ' ';
            let mut f2 = if space { s.flags(pos + 1) } else { f };
            let other = |f: CpFlags| !(f.is_whitespace() || letter(f) || f.is_number());
            if other(f2) && f.any() {
                pos += space as usize;
                while other(f2) && f2.any() {
                    pos += 1;
                    f2 = s.flags(pos);
                }
                while matches!(s.cpt(pos), Some('\r') | Some('\n')) {
                    pos += 1;
                }
                s.add(pos);
                continue;
            }

            let mut n_ws = 0usize;
            let mut last_newline_end = 0usize;
            while s.flags(pos + n_ws).is_whitespace() {
                if matches!(chars[pos + n_ws], '\r' | '\n') {
                    last_newline_end = pos + n_ws + 1;
                }
                n_ws += 1;
            }
            // \s*[\r\n]+
            if last_newline_end > 0 {
                pos = last_newline_end;
                s.add(pos);
                continue;
            }
            // \s+(?!\S)
            if n_ws > 1 && s.cpt(pos + n_ws).is_some() {
                pos += n_ws - 1;
                s.add(pos);
                continue;
            }
            // \s+
            if n_ws > 0 {
                pos += n_ws;
                s.add(pos);
                continue;
            }
            // no match
            pos += 1;
            s.add(pos);
        }
    }
    out
}

/// Rewrites an ECMAScript-flavoured llama.cpp pattern for fancy-regex:
/// `\p{..}` becomes the collapsed stand-in plus its ASCII members (when
/// `collapsed`), and `\d` becomes ASCII digits as in ECMAScript.
fn translate(expr: &str, collapsed: bool) -> Result<String, String> {
    let chars: Vec<char> = expr.chars().collect();
    let mut out = String::with_capacity(expr.len() * 2);
    let mut inside = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' && i + 1 < chars.len() {
            let n = chars[i + 1];
            if n == 'p' && chars.get(i + 2) == Some(&'{') {
                let close = chars[i + 3..]
                    .iter()
                    .position(|&c| c == '}')
                    .map(|p| p + i + 3)
                    .ok_or_else(|| format!("unterminated \\p{{ in pre-tokenizer regex {expr:?}"))?;
                let name: String = chars[i + 3..close].iter().collect();
                let Some(&(_, stand_in, ascii)) = CATEGORIES.iter().find(|(n, _, _)| *n == name)
                else {
                    return Err(format!(
                        r"unsupported category \p{{{name}}} in pre-tokenizer regex {expr:?}"
                    ));
                };
                if !collapsed {
                    return Err(format!(
                        "internal: category in a plain pre-tokenizer regex {expr:?}"
                    ));
                }
                if !inside {
                    out.push('[');
                }
                out.push_str(&format!("\\x{{{:X}}}", stand_in as u32));
                out.push_str(ascii);
                if !inside {
                    out.push(']');
                }
                i = close + 1;
                continue;
            }
            if n == 'd' {
                out.push_str(if inside { "0-9" } else { "[0-9]" });
                i += 2;
                continue;
            }
            out.push(c);
            out.push(n);
            i += 2;
            continue;
        }
        if c == '[' && !inside {
            inside = true;
        } else if c == ']' && inside {
            inside = false;
        }
        out.push(c);
        i += 1;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(pre: &PreTokenizer, text: &str) -> Vec<String> {
        pre.split(text)
            .into_iter()
            .map(|r| text[r].to_string())
            .collect()
    }

    #[test]
    fn gpt2_whitespace_runs() {
        let pre = PreTokenizer::new(&[GPT2]).unwrap();
        assert_eq!(words(&pre, "Hello world"), ["Hello", " world"]);
        assert_eq!(words(&pre, "a   b"), ["a", "  ", " b"]);
        assert_eq!(words(&pre, "a  "), ["a", "  "]);
        assert_eq!(words(&pre, "a\n\nb"), ["a", "\n", "\n", "b"]);
        assert_eq!(words(&pre, "a \n b"), ["a", " \n", " b"]);
        assert_eq!(
            words(&pre, "I'm can't we'll"),
            ["I", "'m", " can", "'t", " we", "'ll"]
        );
        assert_eq!(words(&pre, "x = 12+3;"), ["x", " =", " 12", "+", "3", ";"]);
        assert_eq!(words(&pre, " !!"), [" !!"]);
        assert_eq!(words(&pre, "héllo wörld"), ["héllo", " wörld"]);
        assert_eq!(words(&pre, "I'M"), ["I", "'", "M"]);
    }

    #[test]
    fn smollm_isolates_digits_first() {
        let pre = PreTokenizer::new(&[ISOLATE_NUMBERS, GPT2]).unwrap();
        assert_eq!(words(&pre, "abc 123"), ["abc", " ", "1", "2", "3"]);
        assert_eq!(words(&pre, "a  1"), ["a", "  ", "1"]);
        assert_eq!(words(&pre, "x²"), ["x", "²"]);
    }

    #[test]
    fn llama3_scanner() {
        let pre = PreTokenizer::new(&[LLAMA3]).unwrap();
        assert_eq!(words(&pre, "Hello world"), ["Hello", " world"]);
        let qwen35 = PreTokenizer::new(&[QWEN35]).unwrap();
        assert_eq!(
            words(&qwen35, "x e\u{301}a 12"),
            ["x", " e\u{301}a", " ", "1", "2"]
        );
        let l3 = words(&pre, "x e\u{301}a");
        assert_eq!(l3, ["x", " e", "\u{301}a"]);
        assert_eq!(words(&pre, "12345"), ["123", "45"]);
        assert_eq!(words(&pre, "I'M ok"), ["I", "'M", " ok"]);
        assert_eq!(words(&pre, "a \n\n b"), ["a", " \n\n", " b"]);
        assert_eq!(words(&pre, "(hi)"), ["(hi", ")"]);
        assert_eq!(words(&pre, "x ..\n\ny"), ["x", " ..\n\n", "y"]);
    }

    #[test]
    fn generic_regex_matches_scanner_on_plain_text() {
        // The Qwen2 pattern with one character changed (so that it runs on the
        // regex engine) must split like the Llama 3 scanner on text without digits.
        let qwen2 = QWEN2.replace(r"\p{N}|", r"\p{N}{1}|");
        let pre = PreTokenizer::new(&[&qwen2]).unwrap();
        let l3 = PreTokenizer::new(&[LLAMA3]).unwrap();
        for text in [
            "Hello, world! It's  a test.\n\n  Indented\tline",
            "héllo wörld — ça va? 中文字符 😀😀",
            "  leading and trailing  ",
        ] {
            assert_eq!(words(&pre, text), words(&l3, text), "{text:?}");
        }
        assert_eq!(words(&pre, "x 123"), ["x", " ", "1", "2", "3"]);
    }

    #[test]
    fn default_patterns() {
        let pre = PreTokenizer::new(&[r"[\p{P}\$\+<=>\^~\|]+", GPT2, r"\p{N}+", "[0-9][0-9][0-9]"])
            .unwrap();
        assert_eq!(
            words(&pre, "Hi, 12345!"),
            ["Hi", ",", " ", "123", "45", "!"]
        );
    }

    #[test]
    fn translation() {
        assert_eq!(translate(r"\p{N}", true).unwrap(), r"[\x{E0D1}0-9]");
        assert_eq!(
            translate(r"[^\s\p{L}]", true).unwrap(),
            r"[^\s\x{E0D2}A-Za-z]"
        );
        assert_eq!(translate(r"\d{1,3}", false).unwrap(), r"[0-9]{1,3}");
        assert!(translate(r"\p{Han}+", true).is_err());
    }
}
