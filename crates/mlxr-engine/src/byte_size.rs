//! Sizes in bytes as flags and config files spell them.

use std::fmt;
use std::str::FromStr;

/// A size in bytes: `64GiB`, `512MiB`, `1.5GB`, `1000000`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let bad =
            || format!("'{s}' is not a size: give bytes, e.g. 64GiB, 512MiB, 1.5GB or 1000000");
        let split = s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len());
        let (number, unit) = s.split_at(split);
        let value: f64 = number.trim().parse().map_err(|_| bad())?;
        let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1.0,
            "k" | "kb" => 1e3,
            "m" | "mb" => 1e6,
            "g" | "gb" => 1e9,
            "t" | "tb" => 1e12,
            "kib" => 1024.0,
            "mib" => 1024.0 * 1024.0,
            "gib" => 1024.0 * 1024.0 * 1024.0,
            "tib" => 1024.0 * 1024.0 * 1024.0 * 1024.0,
            _ => return Err(bad()),
        };
        let bytes = value * scale;
        if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
            return Err(bad());
        }
        Ok(ByteSize(bytes as u64))
    }
}

/// The largest binary unit that divides the size exactly (`64 GiB`,
/// `1536 MiB`, `1000000 bytes`).
impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shift, unit) in [(40, "TiB"), (30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if self.0 >= 1 << shift && self.0.is_multiple_of(1 << shift) {
                return write!(f, "{} {unit}", self.0 >> shift);
            }
        }
        write!(f, "{} bytes", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::ByteSize;

    #[test]
    fn parses_and_prints() {
        for (text, bytes, shown) in [
            ("1MiB", 1 << 20, "1 MiB"),
            ("64GiB", 64 << 30, "64 GiB"),
            ("1.5GB", 1_500_000_000, "1500000000 bytes"),
            ("1000000", 1_000_000, "1000000 bytes"),
            ("2 tib", 2 << 40, "2 TiB"),
        ] {
            let size: ByteSize = text.parse().unwrap();
            assert_eq!(size.0, bytes, "{text}");
            assert_eq!(size.to_string(), shown, "{text}");
        }
        for bad in ["", "0", "-1GiB", "1 parsec", "nan", "1e30TiB"] {
            assert!(bad.parse::<ByteSize>().is_err(), "{bad}");
        }
    }
}
