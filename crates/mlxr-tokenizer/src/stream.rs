//! Incremental detokenization for streaming output.

use crate::{TokenId, Tokenizer};

/// Turns a stream of token ids into text, emitting only complete UTF-8
/// characters: a character whose bytes are split across tokens (e.g. an
/// emoji as byte-fallback tokens) is held back until it is complete. Bytes
/// that can never form a valid character become U+FFFD once that is certain
/// (or at [`StreamDecoder::finish`]).
#[derive(Debug, Default, Clone)]
pub struct StreamDecoder {
    pending: Vec<u8>,
    render_special: bool,
}

impl StreamDecoder {
    /// A decoder that does not render control tokens (like `llama-cli`'s default).
    pub fn new() -> StreamDecoder {
        StreamDecoder::default()
    }

    /// A decoder that renders control tokens (e.g. `<|im_end|>`) as their text
    /// when `render_special` is true.
    pub fn with_special(render_special: bool) -> StreamDecoder {
        StreamDecoder {
            pending: Vec::new(),
            render_special,
        }
    }

    /// Adds a token; returns the text that became complete (possibly empty).
    pub fn push(&mut self, tok: &Tokenizer, id: TokenId) -> String {
        self.pending
            .extend_from_slice(&tok.token_to_piece(id, self.render_special));
        self.drain_complete()
    }

    /// Adds raw bytes (e.g. a piece obtained elsewhere); same as [`StreamDecoder::push`].
    pub fn push_bytes(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        self.drain_complete()
    }

    /// Whether bytes of an incomplete character are being held back.
    pub fn has_pending(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Ends the stream: whatever is held back is emitted, invalid bytes as U+FFFD.
    pub fn finish(&mut self) -> String {
        let out = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        out
    }

    fn drain_complete(&mut self) -> String {
        let mut out = String::new();
        let mut rest: &[u8] = &self.pending;
        loop {
            match std::str::from_utf8(rest) {
                Ok(s) => {
                    out.push_str(s);
                    rest = &[];
                    break;
                }
                Err(e) => {
                    let valid = e.valid_up_to();
                    out.push_str(std::str::from_utf8(&rest[..valid]).expect("validated prefix"));
                    match e.error_len() {
                        // An incomplete sequence at the end: wait for more bytes.
                        None => {
                            rest = &rest[valid..];
                            break;
                        }
                        // Bytes that cannot start or continue a character.
                        Some(bad) => {
                            out.push(char::REPLACEMENT_CHARACTER);
                            rest = &rest[valid + bad..];
                        }
                    }
                }
            }
        }
        let keep = rest.len();
        let drop = self.pending.len() - keep;
        self.pending.drain(..drop);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn holds_back_split_characters() {
        let mut d = StreamDecoder::new();
        let emoji = "😀".as_bytes();
        assert_eq!(d.push_bytes(&emoji[..1]), "");
        assert_eq!(d.push_bytes(&emoji[1..3]), "");
        assert!(d.has_pending());
        assert_eq!(d.push_bytes(&emoji[3..]), "😀");
        assert!(!d.has_pending());
        assert_eq!(d.push_bytes("ab".as_bytes()), "ab");
        let e = "é".as_bytes();
        assert_eq!(d.push_bytes(&[b'x', e[0]]), "x");
        assert_eq!(d.push_bytes(&[e[1], b'y']), "éy");
        assert_eq!(d.finish(), "");
    }

    #[test]
    fn invalid_bytes_become_replacement() {
        let mut d = StreamDecoder::new();
        // 0xFF can never be valid: replaced at once.
        assert_eq!(d.push_bytes(&[b'a', 0xFF, b'b']), "a\u{FFFD}b");
        // A lead byte followed by ASCII: invalid once the ASCII arrives.
        assert_eq!(d.push_bytes(&[0xE2]), "");
        assert_eq!(d.push_bytes(b"c"), "\u{FFFD}c");
        // An incomplete tail at the end of the stream.
        assert_eq!(d.push_bytes(&[0xF0, 0x9F]), "");
        assert_eq!(d.finish(), "\u{FFFD}");
    }
}
