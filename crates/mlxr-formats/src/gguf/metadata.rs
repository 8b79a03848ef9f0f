//! GGUF metadata: the ordered key/value map and its typed getters.

use std::collections::HashMap;

use super::error::GgufError;
pub use super::value::{MetadataArray, MetadataValue};

/// The metadata of a GGUF file: key/value pairs in file order, indexed by key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metadata {
    entries: Vec<(String, MetadataValue)>,
    index: HashMap<String, usize>,
}

/// Maps `MissingKey` to `Ok(None)`.
fn optional<T>(r: Result<T, GgufError>) -> Result<Option<T>, GgufError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(GgufError::MissingKey { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

fn int_to<T: TryFrom<i128>>(
    key: &str,
    v: &MetadataValue,
    expected: &'static str,
) -> Result<T, GgufError> {
    let i = v
        .as_i128()
        .ok_or_else(|| GgufError::wrong_type(key, expected, v.type_name()))?;
    T::try_from(i).map_err(|_| GgufError::OutOfRange {
        key: key.to_owned(),
        expected,
        value: i.to_string(),
    })
}

fn int_array_to<T: TryFrom<i128>>(
    key: &str,
    a: &MetadataArray,
    expected: &'static str,
) -> Result<Vec<T>, GgufError> {
    let ints = a
        .to_i128_vec()
        .ok_or_else(|| GgufError::wrong_type(key, expected, a.type_name()))?;
    ints.into_iter()
        .enumerate()
        .map(|(i, x)| {
            T::try_from(x).map_err(|_| GgufError::OutOfRange {
                key: format!("{key}[{i}]"),
                expected,
                value: x.to_string(),
            })
        })
        .collect()
}

impl Metadata {
    /// Builds metadata from entries; a duplicate key is an error.
    pub fn from_entries(
        entries: impl IntoIterator<Item = (String, MetadataValue)>,
    ) -> Result<Self, GgufError> {
        let mut m = Metadata::default();
        for (k, v) in entries {
            m.insert(k, v, 0)?;
        }
        Ok(m)
    }

    /// Appends an entry (offset is only used in the duplicate-key error).
    pub(crate) fn insert(
        &mut self,
        key: String,
        value: MetadataValue,
        offset: u64,
    ) -> Result<(), GgufError> {
        if self.index.contains_key(&key) {
            return Err(GgufError::DuplicateKey { key, offset });
        }
        self.index.insert(key.clone(), self.entries.len());
        self.entries.push((key, value));
        Ok(())
    }

    pub(crate) fn reserve(&mut self, n: usize) {
        self.entries.reserve(n);
        self.index.reserve(n);
    }

    pub fn get(&self, key: &str) -> Option<&MetadataValue> {
        self.index.get(key).map(|&i| &self.entries[i].1)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.index.contains_key(key)
    }

    /// Entries in file order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &MetadataValue)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Keys in file order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn require(&self, key: &str) -> Result<&MetadataValue, GgufError> {
        self.get(key).ok_or_else(|| GgufError::missing(key))
    }

    pub fn get_str(&self, key: &str) -> Result<&str, GgufError> {
        let v = self.require(key)?;
        v.as_str()
            .ok_or_else(|| GgufError::wrong_type(key, "string", v.type_name()))
    }

    /// Any integer type whose value fits in a u32.
    pub fn get_u32(&self, key: &str) -> Result<u32, GgufError> {
        int_to(key, self.require(key)?, "u32")
    }

    /// Any integer type whose value is non-negative.
    pub fn get_u64(&self, key: &str) -> Result<u64, GgufError> {
        int_to(key, self.require(key)?, "u64")
    }

    /// Any integer type whose value fits in an i64.
    pub fn get_i64(&self, key: &str) -> Result<i64, GgufError> {
        int_to(key, self.require(key)?, "i64")
    }

    /// f32, f64 (rounded) or any integer type (converted).
    pub fn get_f32(&self, key: &str) -> Result<f32, GgufError> {
        let v = self.require(key)?;
        match *v {
            MetadataValue::F32(x) => Ok(x),
            MetadataValue::F64(x) => Ok(x as f32),
            _ => v
                .as_i128()
                .map(|i| i as f32)
                .ok_or_else(|| GgufError::wrong_type(key, "f32", v.type_name())),
        }
    }

    pub fn get_bool(&self, key: &str) -> Result<bool, GgufError> {
        match self.require(key)? {
            MetadataValue::Bool(b) => Ok(*b),
            v => Err(GgufError::wrong_type(key, "bool", v.type_name())),
        }
    }

    pub fn get_array(&self, key: &str) -> Result<&MetadataArray, GgufError> {
        match self.require(key)? {
            MetadataValue::Array(a) => Ok(a),
            v => Err(GgufError::wrong_type(key, "array", v.type_name())),
        }
    }

    pub fn get_str_array(&self, key: &str) -> Result<&[String], GgufError> {
        match self.get_array(key)? {
            MetadataArray::String(v) => Ok(v),
            a => Err(GgufError::wrong_type(key, "array[string]", a.type_name())),
        }
    }

    pub fn get_f32_array(&self, key: &str) -> Result<&[f32], GgufError> {
        match self.get_array(key)? {
            MetadataArray::F32(v) => Ok(v),
            a => Err(GgufError::wrong_type(key, "array[f32]", a.type_name())),
        }
    }

    /// From an array of any integer type whose values fit in i32.
    pub fn get_i32_array(&self, key: &str) -> Result<Vec<i32>, GgufError> {
        match self.get_array(key)? {
            MetadataArray::I32(v) => Ok(v.clone()),
            a => int_array_to(key, a, "array[i32]"),
        }
    }

    /// From an array of any integer type whose values fit in u32.
    pub fn get_u32_array(&self, key: &str) -> Result<Vec<u32>, GgufError> {
        match self.get_array(key)? {
            MetadataArray::U32(v) => Ok(v.clone()),
            a => int_array_to(key, a, "array[u32]"),
        }
    }

    /// A per-layer value as llama.cpp stores it: either one integer for all
    /// layers (broadcast to `n_layers`) or an integer array of exactly
    /// `n_layers` elements.
    pub fn get_u32_per_layer(&self, key: &str, n_layers: usize) -> Result<Vec<u32>, GgufError> {
        match self.require(key)? {
            MetadataValue::Array(_) => {
                let v = self.get_u32_array(key)?;
                if v.len() != n_layers {
                    return Err(GgufError::OutOfRange {
                        key: key.to_owned(),
                        expected: "one value per layer",
                        value: format!("an array of {} values for {n_layers} layers", v.len()),
                    });
                }
                Ok(v)
            }
            _ => Ok(vec![self.get_u32(key)?; n_layers]),
        }
    }

    pub fn opt_str(&self, key: &str) -> Result<Option<&str>, GgufError> {
        optional(self.get_str(key))
    }

    pub fn opt_u32(&self, key: &str) -> Result<Option<u32>, GgufError> {
        optional(self.get_u32(key))
    }

    pub fn opt_u64(&self, key: &str) -> Result<Option<u64>, GgufError> {
        optional(self.get_u64(key))
    }

    pub fn opt_i64(&self, key: &str) -> Result<Option<i64>, GgufError> {
        optional(self.get_i64(key))
    }

    pub fn opt_f32(&self, key: &str) -> Result<Option<f32>, GgufError> {
        optional(self.get_f32(key))
    }

    pub fn opt_bool(&self, key: &str) -> Result<Option<bool>, GgufError> {
        optional(self.get_bool(key))
    }

    pub fn opt_str_array(&self, key: &str) -> Result<Option<&[String]>, GgufError> {
        optional(self.get_str_array(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_entries_rejects_duplicates() {
        let m = Metadata::from_entries([
            ("a".to_owned(), MetadataValue::U32(1)),
            ("b".to_owned(), "x".into()),
        ])
        .unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m.get_u32("a").unwrap(), 1);
        assert_eq!(m.opt_str("b").unwrap(), Some("x"));
        let err = Metadata::from_entries([
            ("a".to_owned(), MetadataValue::U32(1)),
            ("a".to_owned(), MetadataValue::U32(2)),
        ])
        .unwrap_err();
        assert!(matches!(err, GgufError::DuplicateKey { .. }));
    }

    #[test]
    fn integer_conversions() {
        let m = Metadata::from_entries([
            ("neg".to_owned(), MetadataValue::I32(-1)),
            ("big".to_owned(), MetadataValue::U64(1 << 40)),
            ("arr".to_owned(), vec![1u64, 1 << 40].into()),
        ])
        .unwrap();
        assert_eq!(m.get_i64("neg").unwrap(), -1);
        assert!(matches!(
            m.get_u64("neg"),
            Err(GgufError::OutOfRange { .. })
        ));
        assert_eq!(m.get_u64("big").unwrap(), 1 << 40);
        assert!(matches!(
            m.get_u32("big"),
            Err(GgufError::OutOfRange { .. })
        ));
        assert_eq!(m.get_f32("big").unwrap(), (1u64 << 40) as f32);
        let err = m.get_u32_array("arr").unwrap_err();
        assert_eq!(
            err.to_string(),
            "metadata key 'arr[1]' has value 1099511627776, which does not fit in array[u32]"
        );
    }
}
