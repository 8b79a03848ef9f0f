//! `sha256:<hex>` content digests.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

use crate::error::{RegistryError, Result};

const PREFIX: &str = "sha256:";

/// A SHA-256 content digest, always held as `sha256:<64 lowercase hex>`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest(String);

impl Digest {
    /// Parses `sha256:<hex>` (also Ollama's file-name form `sha256-<hex>`);
    /// hex may be upper or lower case and is normalised to lower case.
    pub fn parse(s: &str) -> Result<Digest> {
        let hex = s
            .strip_prefix(PREFIX)
            .or_else(|| s.strip_prefix("sha256-"))
            .ok_or_else(|| RegistryError::InvalidDigest(s.to_string()))?;
        Digest::from_hex(hex).map_err(|_| RegistryError::InvalidDigest(s.to_string()))
    }

    /// From 64 hex digits without the `sha256:` prefix.
    pub fn from_hex(hex: &str) -> Result<Digest> {
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(RegistryError::InvalidDigest(hex.to_string()));
        }
        Ok(Digest(format!("{PREFIX}{}", hex.to_ascii_lowercase())))
    }

    /// The digest of a finished hasher.
    pub fn from_hasher(hasher: Sha256) -> Digest {
        Digest(format!("{PREFIX}{}", to_hex(&hasher.finalize())))
    }

    /// The digest of a byte string.
    pub fn of_bytes(bytes: &[u8]) -> Digest {
        Digest::from_hasher(Sha256::new_with_prefix(bytes))
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.0[PREFIX.len()..]
    }

    /// The first 12 hex digits, as Ollama shows digests in progress lines.
    pub fn short(&self) -> &str {
        &self.hex()[..12]
    }

    /// `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// `sha256-<hex>`: the blob's file name.
    pub fn file_name(&self) -> String {
        format!("sha256-{}", self.hex())
    }
}

pub(crate) fn to_hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Digest({})", self.0)
    }
}

impl FromStr for Digest {
    type Err = RegistryError;
    fn from_str(s: &str) -> Result<Digest> {
        Digest::parse(s)
    }
}

impl serde::Serialize for Digest {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> serde::Deserialize<'de> for Digest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Digest, D::Error> {
        let s = String::deserialize(d)?;
        Digest::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_format() {
        let empty = Digest::of_bytes(b"");
        assert_eq!(
            empty.as_str(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(empty.as_str()).unwrap(), empty);
        assert_eq!(Digest::parse(&empty.file_name()).unwrap(), empty);
        assert_eq!(
            Digest::parse(&empty.as_str().to_uppercase().replace("SHA256", "sha256")).unwrap(),
            empty
        );
        assert_eq!(empty.short(), "e3b0c44298fc");
        for bad in [
            "",
            "sha256:",
            "sha256:abc",
            "md5:e3b0",
            "sha256:../../etc/passwd",
        ] {
            assert!(Digest::parse(bad).is_err(), "{bad}");
        }
        let g = format!("sha256:{}", "g".repeat(64));
        assert!(Digest::parse(&g).is_err());
    }
}
