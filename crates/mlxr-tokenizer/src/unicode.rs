//! Unicode helpers for the pre-tokenizers.
//!
//! llama.cpp classifies every code point into exactly one general-category
//! group (number, letter, separator, mark, punctuation, symbol, control, or
//! undefined for unassigned code points) plus a separate White_Space flag. Its
//! table is generated from Unicode 15.1, so ours is built from the regex
//! engine's Unicode tables restricted to code points assigned by 15.1: a code
//! point that Unicode 16 added is "undefined" here, as it is in llama.cpp.
//!
//! Also GPT-2's reversible byte <-> printable character mapping.

use std::sync::OnceLock;

/// Category/whitespace flags of one code point, laid out like llama.cpp's
/// `unicode_cpt_flags`: exactly one category bit is set for a code point that
/// exists; the all-zero value stands for "outside the current span".
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct CpFlags(u16);

#[allow(dead_code)] // the full set of llama.cpp's flags, not all read
impl CpFlags {
    pub const UNDEFINED: u16 = 0x0001;
    pub const NUMBER: u16 = 0x0002;
    pub const LETTER: u16 = 0x0004;
    pub const SEPARATOR: u16 = 0x0008;
    pub const MARK: u16 = 0x0010;
    pub const PUNCTUATION: u16 = 0x0020;
    pub const SYMBOL: u16 = 0x0040;
    pub const CONTROL: u16 = 0x0080;
    pub const WHITESPACE: u16 = 0x0100;

    /// The empty flags llama.cpp returns for positions outside a span.
    pub const NONE: CpFlags = CpFlags(0);

    #[inline]
    pub fn is_number(self) -> bool {
        self.0 & Self::NUMBER != 0
    }
    #[inline]
    pub fn is_letter(self) -> bool {
        self.0 & Self::LETTER != 0
    }
    #[inline]
    pub fn is_mark(self) -> bool {
        self.0 & Self::MARK != 0
    }
    #[inline]
    pub fn is_whitespace(self) -> bool {
        self.0 & Self::WHITESPACE != 0
    }
    /// Any flag set (false only for [`CpFlags::NONE`]).
    #[inline]
    pub fn any(self) -> bool {
        self.0 != 0
    }
    /// The category bit alone.
    #[inline]
    pub fn category(self) -> u16 {
        self.0 & 0x00FF
    }
}

/// Category index per code point (0..=7, the bit number of the category
/// flag), with bit 3 (value 8) marking White_Space.
fn table() -> &'static [u8] {
    static TABLE: OnceLock<Box<[u8]>> = OnceLock::new();
    TABLE.get_or_init(build_table)
}

fn build_table() -> Box<[u8]> {
    // Bit numbers of the category flags above.
    const GROUPS: &[(u8, &str)] = &[
        (1, r"\p{N}"),
        (2, r"\p{L}"),
        (3, r"\p{Z}"),
        (4, r"\p{M}"),
        (5, r"\p{P}"),
        (6, r"\p{S}"),
        (7, r"\p{Cc}\p{Cf}\p{Co}"),
    ];
    let mut t = vec![0u8; 0x110000].into_boxed_slice();
    for &(bit, class) in GROUPS {
        let pattern = format!(r"[[{class}]&&\p{{Age=V15_1}}]");
        for (lo, hi) in class_ranges(&pattern) {
            for cp in lo..=hi {
                t[cp as usize] = bit;
            }
        }
    }
    for (cp, slot) in t.iter_mut().enumerate() {
        if char::from_u32(cp as u32).is_some_and(char::is_whitespace) {
            *slot |= 8;
        }
    }
    t
}

/// The code point ranges of a Unicode class expression.
fn class_ranges(pattern: &str) -> Vec<(u32, u32)> {
    use regex_syntax::hir::{Class, HirKind};
    let hir = regex_syntax::ParserBuilder::new()
        .build()
        .parse(pattern)
        .expect("built-in Unicode class parses");
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => c
            .ranges()
            .iter()
            .map(|r| (r.start() as u32, r.end() as u32))
            .collect(),
        other => panic!("unexpected HIR for {pattern}: {other:?}"),
    }
}

/// Builds the category table (otherwise built on first use).
pub(crate) fn init() {
    table();
}

/// Flags of a code point (llama.cpp's `unicode_cpt_flags_from_cpt`).
#[inline]
pub(crate) fn flags(c: char) -> CpFlags {
    let v = table()[c as usize];
    let mut f = 1u16 << (v & 7);
    if v & 8 != 0 {
        f |= CpFlags::WHITESPACE;
    }
    CpFlags(f)
}

/// GPT-2's byte -> character table: printable Latin-1 bytes map to
/// themselves, the other 68 bytes to U+0100.. in byte order.
fn byte_chars() -> &'static [char; 256] {
    static T: OnceLock<[char; 256]> = OnceLock::new();
    T.get_or_init(|| {
        let mut t = ['\0'; 256];
        let mut next = 256u32;
        for (b, slot) in t.iter_mut().enumerate() {
            let keep = (0x21..=0x7E).contains(&b)
                || (0xA1..=0xAC).contains(&b)
                || (0xAE..=0xFF).contains(&b);
            let cp = if keep {
                b as u32
            } else {
                next += 1;
                next - 1
            };
            *slot = char::from_u32(cp).expect("valid code point");
        }
        t
    })
}

/// The printable character GPT-2's byte-level BPE uses for `b`.
#[inline]
pub(crate) fn byte_to_char(b: u8) -> char {
    byte_chars()[b as usize]
}

/// The byte a GPT-2 byte-level character stands for, if it is one.
#[inline]
pub(crate) fn char_to_byte(c: char) -> Option<u8> {
    static T: OnceLock<Vec<u16>> = OnceLock::new();
    let t = T.get_or_init(|| {
        let mut t = vec![u16::MAX; 0x144];
        for b in 0..=255u8 {
            t[byte_to_char(b) as usize] = b as u16;
        }
        t
    });
    match t.get(c as usize) {
        Some(&v) if v != u16::MAX => Some(v as u8),
        _ => None,
    }
}

/// Appends the GPT-2 byte-level encoding of `bytes` to `out`.
pub(crate) fn byte_encode_into(bytes: &[u8], out: &mut String) {
    for &b in bytes {
        out.push(byte_to_char(b));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn categories_match_llamacpp_table() {
        assert_eq!(flags('a').category(), CpFlags::LETTER);
        assert_eq!(flags('Z').category(), CpFlags::LETTER);
        assert_eq!(flags('7').category(), CpFlags::NUMBER);
        assert_eq!(flags('²').category(), CpFlags::NUMBER);
        assert_eq!(flags(' ').category(), CpFlags::SEPARATOR);
        assert!(flags(' ').is_whitespace());
        assert_eq!(flags('\n').category(), CpFlags::CONTROL);
        assert!(flags('\n').is_whitespace());
        assert_eq!(flags('!').category(), CpFlags::PUNCTUATION);
        assert_eq!(flags('$').category(), CpFlags::SYMBOL);
        assert_eq!(flags('~').category(), CpFlags::SYMBOL);
        assert_eq!(flags('\u{301}').category(), CpFlags::MARK);
        assert_eq!(flags('\u{378}').category(), CpFlags::UNDEFINED);
        assert_eq!(flags('😀').category(), CpFlags::SYMBOL);
        assert_eq!(flags('中').category(), CpFlags::LETTER);
        assert_eq!(flags('\u{200B}').category(), CpFlags::CONTROL);
        assert!(!flags('\u{200B}').is_whitespace());
        assert!(flags('\u{3000}').is_whitespace());
        assert!(flags('\u{85}').is_whitespace());
        // U+1C89 (Cyrillic, added in Unicode 16) is undefined in llama.cpp's 15.1 table.
        assert_eq!(flags('\u{1C89}').category(), CpFlags::UNDEFINED);
        assert_eq!(flags('\u{F0000}').category(), CpFlags::CONTROL);
        assert!(flags('a').any());
        assert!(!CpFlags::NONE.any());
    }

    #[test]
    fn gpt2_byte_mapping() {
        assert_eq!(byte_to_char(b' '), 'Ġ');
        assert_eq!(byte_to_char(b'\n'), 'Ċ');
        assert_eq!(byte_to_char(b'a'), 'a');
        assert_eq!(byte_to_char(0), '\u{100}');
        assert_eq!(byte_to_char(0xAD), '\u{143}');
        for b in 0..=255u8 {
            assert_eq!(char_to_byte(byte_to_char(b)), Some(b));
        }
        assert_eq!(char_to_byte('€'), None);
    }
}
