//! Metadata in writing order. Setting a key again replaces its value in
//! place, as gguf-py's writer does (a later `add_*` of the same key keeps the
//! key's first position).

use mlxr_formats::gguf::MetadataValue;

#[derive(Clone, Debug, Default)]
pub struct Kvs(Vec<(String, MetadataValue)>);

impl Kvs {
    pub fn set(&mut self, key: impl Into<String>, value: impl Into<MetadataValue>) {
        let key = key.into();
        let value = value.into();
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some(slot) => slot.1 = value,
            None => self.0.push((key, value)),
        }
    }

    pub fn into_vec(self) -> Vec<(String, MetadataValue)> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_set_keeps_the_first_position() {
        let mut kvs = Kvs::default();
        kvs.set("a", 1u32);
        kvs.set("b", 2u32);
        kvs.set("a", 3u32);
        let v = kvs.into_vec();
        assert_eq!(v[0], ("a".to_string(), MetadataValue::U32(3)));
        assert_eq!(v.len(), 2);
    }
}
