//! A bounded little-endian cursor over the raw bytes of a GGUF file.
//!
//! Every read checks the remaining length first, and every count read from
//! the file is bounded by what could possibly fit in the remaining bytes
//! before anything is allocated for it. Error descriptions (`what`) are built
//! lazily, only when an error actually happens.

use super::error::GgufError;

pub(crate) type What<'w> = &'w dyn Fn() -> String;

pub(crate) struct Reader<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(data: &'a [u8]) -> Self {
        Reader { data, pos: 0 }
    }

    /// Current byte offset from the start of the input.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.data.len() - self.pos
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: u64, what: What<'_>) -> Result<&'a [u8], GgufError> {
        let n = match usize::try_from(n) {
            Ok(n) if n <= self.remaining() => n,
            _ => {
                return Err(GgufError::Truncated {
                    what: what(),
                    offset: self.pos as u64,
                })
            }
        };
        let out = &self.data[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn fixed<const N: usize>(&mut self, what: What<'_>) -> Result<[u8; N], GgufError> {
        let bytes = self.take(N as u64, what)?;
        let mut out = [0u8; N];
        out.copy_from_slice(bytes);
        Ok(out)
    }

    pub(crate) fn u8(&mut self, what: What<'_>) -> Result<u8, GgufError> {
        Ok(self.fixed::<1>(what)?[0])
    }

    pub(crate) fn u16(&mut self, what: What<'_>) -> Result<u16, GgufError> {
        self.fixed(what).map(u16::from_le_bytes)
    }

    pub(crate) fn u32(&mut self, what: What<'_>) -> Result<u32, GgufError> {
        self.fixed(what).map(u32::from_le_bytes)
    }

    pub(crate) fn u64(&mut self, what: What<'_>) -> Result<u64, GgufError> {
        self.fixed(what).map(u64::from_le_bytes)
    }

    /// A count of elements that each take at least `min_elem_size` bytes in
    /// the rest of the input: larger counts are rejected with `TooLarge`, so
    /// the returned count is safe to reserve memory for.
    pub(crate) fn count(&mut self, min_elem_size: u64, what: What<'_>) -> Result<usize, GgufError> {
        let offset = self.pos as u64;
        let n = self.u64(what)?;
        let limit = self.remaining() as u64 / min_elem_size.max(1);
        if n > limit {
            return Err(GgufError::TooLarge {
                what: what(),
                value: n,
                limit,
                offset,
            });
        }
        // n <= remaining, which is a usize.
        Ok(n as usize)
    }

    /// A GGUF string: u64 byte length, then that many bytes of UTF-8.
    pub(crate) fn str(&mut self, what: What<'_>) -> Result<&'a str, GgufError> {
        let len_what = || format!("length of {}", what());
        let len = self.count(1, &len_what)?;
        let offset = self.pos as u64;
        let bytes = self.take(len as u64, what)?;
        std::str::from_utf8(bytes).map_err(|e| GgufError::InvalidUtf8 {
            what: what(),
            offset: offset + e.valid_up_to() as u64,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_little_endian_and_bounds() {
        let data = [1u8, 2, 0, 3, 0, 0, 0, 4];
        let mut r = Reader::new(&data);
        assert_eq!(r.u8(&|| "a".into()).unwrap(), 1);
        assert_eq!(r.u16(&|| "b".into()).unwrap(), 2);
        assert_eq!(r.u32(&|| "c".into()).unwrap(), 3);
        assert_eq!(r.pos(), 7);
        let err = r.u32(&|| "field d".into()).unwrap_err();
        assert!(
            matches!(err, GgufError::Truncated { offset: 7, .. }),
            "{err}"
        );
        assert!(err.to_string().contains("field d"));
        assert_eq!(r.pos(), 7, "failed read must not advance");
    }

    #[test]
    fn huge_counts_and_lengths_are_rejected() {
        let mut data = (1u64 << 60).to_le_bytes().to_vec();
        data.extend_from_slice(b"abc");
        let err = Reader::new(&data).str(&|| "key".into()).unwrap_err();
        assert!(
            matches!(err, GgufError::TooLarge { value, limit: 3, offset: 0, .. } if value == 1 << 60),
            "{err}"
        );
        let err = Reader::new(&data).count(8, &|| "n".into()).unwrap_err();
        assert!(matches!(err, GgufError::TooLarge { limit: 0, .. }), "{err}");
        let ok = Reader::new(&[1, 0, 0, 0, 0, 0, 0, 0, b'x']).str(&|| "s".into());
        assert_eq!(ok.unwrap(), "x");
    }

    #[test]
    fn invalid_utf8_reports_offset() {
        let mut data = 3u64.to_le_bytes().to_vec();
        data.extend_from_slice(&[b'a', 0xff, b'b']);
        let err = Reader::new(&data).str(&|| "key".into()).unwrap_err();
        assert!(
            matches!(err, GgufError::InvalidUtf8 { offset: 9, .. }),
            "{err}"
        );
    }
}
