//! Metadata values and arrays: types, type names, `Display`, conversions.

use std::fmt;

/// One metadata value.
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataValue {
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    U32(u32),
    I32(i32),
    U64(u64),
    I64(i64),
    F32(f32),
    F64(f64),
    Bool(bool),
    String(String),
    Array(MetadataArray),
}

/// A metadata array: all elements have one type; arrays may nest.
#[derive(Clone, Debug, PartialEq)]
pub enum MetadataArray {
    U8(Vec<u8>),
    I8(Vec<i8>),
    U16(Vec<u16>),
    I16(Vec<i16>),
    U32(Vec<u32>),
    I32(Vec<i32>),
    U64(Vec<u64>),
    I64(Vec<i64>),
    F32(Vec<f32>),
    F64(Vec<f64>),
    Bool(Vec<bool>),
    String(Vec<String>),
    Array(Vec<MetadataArray>),
}

/// GGUF value type ids.
pub(crate) mod value_type {
    pub const U8: u32 = 0;
    pub const I8: u32 = 1;
    pub const U16: u32 = 2;
    pub const I16: u32 = 3;
    pub const U32: u32 = 4;
    pub const I32: u32 = 5;
    pub const F32: u32 = 6;
    pub const BOOL: u32 = 7;
    pub const STRING: u32 = 8;
    pub const ARRAY: u32 = 9;
    pub const U64: u32 = 10;
    pub const I64: u32 = 11;
    pub const F64: u32 = 12;
}

impl MetadataValue {
    /// The GGUF type name: `u8` ... `f64`, `bool`, `string`, or `array[T]`.
    pub fn type_name(&self) -> &'static str {
        match self {
            MetadataValue::U8(_) => "u8",
            MetadataValue::I8(_) => "i8",
            MetadataValue::U16(_) => "u16",
            MetadataValue::I16(_) => "i16",
            MetadataValue::U32(_) => "u32",
            MetadataValue::I32(_) => "i32",
            MetadataValue::U64(_) => "u64",
            MetadataValue::I64(_) => "i64",
            MetadataValue::F32(_) => "f32",
            MetadataValue::F64(_) => "f64",
            MetadataValue::Bool(_) => "bool",
            MetadataValue::String(_) => "string",
            MetadataValue::Array(a) => a.type_name(),
        }
    }

    /// The GGUF value type id of this value.
    pub fn type_id(&self) -> u32 {
        use value_type::*;
        match self {
            MetadataValue::U8(_) => U8,
            MetadataValue::I8(_) => I8,
            MetadataValue::U16(_) => U16,
            MetadataValue::I16(_) => I16,
            MetadataValue::U32(_) => U32,
            MetadataValue::I32(_) => I32,
            MetadataValue::U64(_) => U64,
            MetadataValue::I64(_) => I64,
            MetadataValue::F32(_) => F32,
            MetadataValue::F64(_) => F64,
            MetadataValue::Bool(_) => BOOL,
            MetadataValue::String(_) => STRING,
            MetadataValue::Array(_) => ARRAY,
        }
    }

    /// The value as an integer, if it is one of the integer types.
    pub fn as_i128(&self) -> Option<i128> {
        Some(match *self {
            MetadataValue::U8(v) => v.into(),
            MetadataValue::I8(v) => v.into(),
            MetadataValue::U16(v) => v.into(),
            MetadataValue::I16(v) => v.into(),
            MetadataValue::U32(v) => v.into(),
            MetadataValue::I32(v) => v.into(),
            MetadataValue::U64(v) => v.into(),
            MetadataValue::I64(v) => v.into(),
            _ => return None,
        })
    }

    /// The value as a string slice, if it is a string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            MetadataValue::String(s) => Some(s),
            _ => None,
        }
    }
}

impl MetadataArray {
    pub fn len(&self) -> usize {
        match self {
            MetadataArray::U8(v) => v.len(),
            MetadataArray::I8(v) => v.len(),
            MetadataArray::U16(v) => v.len(),
            MetadataArray::I16(v) => v.len(),
            MetadataArray::U32(v) => v.len(),
            MetadataArray::I32(v) => v.len(),
            MetadataArray::U64(v) => v.len(),
            MetadataArray::I64(v) => v.len(),
            MetadataArray::F32(v) => v.len(),
            MetadataArray::F64(v) => v.len(),
            MetadataArray::Bool(v) => v.len(),
            MetadataArray::String(v) => v.len(),
            MetadataArray::Array(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// `array[T]` where T is the element type name (`array[array]` when nested).
    pub fn type_name(&self) -> &'static str {
        match self {
            MetadataArray::U8(_) => "array[u8]",
            MetadataArray::I8(_) => "array[i8]",
            MetadataArray::U16(_) => "array[u16]",
            MetadataArray::I16(_) => "array[i16]",
            MetadataArray::U32(_) => "array[u32]",
            MetadataArray::I32(_) => "array[i32]",
            MetadataArray::U64(_) => "array[u64]",
            MetadataArray::I64(_) => "array[i64]",
            MetadataArray::F32(_) => "array[f32]",
            MetadataArray::F64(_) => "array[f64]",
            MetadataArray::Bool(_) => "array[bool]",
            MetadataArray::String(_) => "array[string]",
            MetadataArray::Array(_) => "array[array]",
        }
    }

    /// The GGUF value type id of the elements.
    pub fn element_type_id(&self) -> u32 {
        use value_type::*;
        match self {
            MetadataArray::U8(_) => U8,
            MetadataArray::I8(_) => I8,
            MetadataArray::U16(_) => U16,
            MetadataArray::I16(_) => I16,
            MetadataArray::U32(_) => U32,
            MetadataArray::I32(_) => I32,
            MetadataArray::U64(_) => U64,
            MetadataArray::I64(_) => I64,
            MetadataArray::F32(_) => F32,
            MetadataArray::F64(_) => F64,
            MetadataArray::Bool(_) => BOOL,
            MetadataArray::String(_) => STRING,
            MetadataArray::Array(_) => ARRAY,
        }
    }

    /// The elements as integers, if this is an array of an integer type.
    pub fn to_i128_vec(&self) -> Option<Vec<i128>> {
        fn conv<T: Copy + Into<i128>>(v: &[T]) -> Vec<i128> {
            v.iter().map(|&x| x.into()).collect()
        }
        Some(match self {
            MetadataArray::U8(v) => conv(v),
            MetadataArray::I8(v) => conv(v),
            MetadataArray::U16(v) => conv(v),
            MetadataArray::I16(v) => conv(v),
            MetadataArray::U32(v) => conv(v),
            MetadataArray::I32(v) => conv(v),
            MetadataArray::U64(v) => conv(v),
            MetadataArray::I64(v) => conv(v),
            _ => return None,
        })
    }
}

/// How many array elements `{}` shows before abbreviating.
const SHOWN_ELEMENTS: usize = 8;
/// How many characters of a string `{}` shows before abbreviating.
const SHOWN_CHARS: usize = 120;

fn fmt_str(f: &mut fmt::Formatter<'_>, s: &str, full: bool) -> fmt::Result {
    let n_chars = s.chars().count();
    if full || n_chars <= SHOWN_CHARS {
        write!(f, "{s:?}")
    } else {
        let head: String = s.chars().take(SHOWN_CHARS).collect();
        write!(f, "{head:?}... ({n_chars} chars)")
    }
}

/// `{}` abbreviates long strings and arrays (for `mlxr show`-like listings);
/// `{:#}` prints everything.
impl fmt::Display for MetadataValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MetadataValue::U8(v) => write!(f, "{v}"),
            MetadataValue::I8(v) => write!(f, "{v}"),
            MetadataValue::U16(v) => write!(f, "{v}"),
            MetadataValue::I16(v) => write!(f, "{v}"),
            MetadataValue::U32(v) => write!(f, "{v}"),
            MetadataValue::I32(v) => write!(f, "{v}"),
            MetadataValue::U64(v) => write!(f, "{v}"),
            MetadataValue::I64(v) => write!(f, "{v}"),
            MetadataValue::F32(v) => write!(f, "{v}"),
            MetadataValue::F64(v) => write!(f, "{v}"),
            MetadataValue::Bool(v) => write!(f, "{v}"),
            MetadataValue::String(s) => fmt_str(f, s, f.alternate()),
            MetadataValue::Array(a) => fmt::Display::fmt(a, f),
        }
    }
}

fn fmt_list<T>(
    f: &mut fmt::Formatter<'_>,
    items: &[T],
    mut one: impl FnMut(&mut fmt::Formatter<'_>, &T) -> fmt::Result,
) -> fmt::Result {
    let full = f.alternate();
    let shown = if full {
        items.len()
    } else {
        items.len().min(SHOWN_ELEMENTS)
    };
    f.write_str("[")?;
    for (i, x) in items[..shown].iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        one(f, x)?;
    }
    if shown < items.len() {
        write!(f, ", ... ({} items)", items.len())?;
    }
    f.write_str("]")
}

impl fmt::Display for MetadataArray {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn plain<T: fmt::Display>(f: &mut fmt::Formatter<'_>, x: &T) -> fmt::Result {
            write!(f, "{x}")
        }
        match self {
            MetadataArray::U8(v) => fmt_list(f, v, plain),
            MetadataArray::I8(v) => fmt_list(f, v, plain),
            MetadataArray::U16(v) => fmt_list(f, v, plain),
            MetadataArray::I16(v) => fmt_list(f, v, plain),
            MetadataArray::U32(v) => fmt_list(f, v, plain),
            MetadataArray::I32(v) => fmt_list(f, v, plain),
            MetadataArray::U64(v) => fmt_list(f, v, plain),
            MetadataArray::I64(v) => fmt_list(f, v, plain),
            MetadataArray::F32(v) => fmt_list(f, v, plain),
            MetadataArray::F64(v) => fmt_list(f, v, plain),
            MetadataArray::Bool(v) => fmt_list(f, v, plain),
            MetadataArray::String(v) => fmt_list(f, v, |f, s| fmt_str(f, s, f.alternate())),
            MetadataArray::Array(v) => fmt_list(f, v, |f, a| fmt::Display::fmt(a, f)),
        }
    }
}

macro_rules! from_impls {
    ($($t:ty => $variant:ident),* $(,)?) => {$(
        impl From<$t> for MetadataValue {
            fn from(v: $t) -> Self { MetadataValue::$variant(v) }
        }
        impl From<Vec<$t>> for MetadataArray {
            fn from(v: Vec<$t>) -> Self { MetadataArray::$variant(v) }
        }
        impl From<Vec<$t>> for MetadataValue {
            fn from(v: Vec<$t>) -> Self { MetadataValue::Array(MetadataArray::$variant(v)) }
        }
    )*};
}

from_impls!(
    u8 => U8, i8 => I8, u16 => U16, i16 => I16, u32 => U32, i32 => I32,
    u64 => U64, i64 => I64, f32 => F32, f64 => F64, bool => Bool, String => String,
    MetadataArray => Array,
);

impl From<&str> for MetadataValue {
    fn from(v: &str) -> Self {
        MetadataValue::String(v.to_owned())
    }
}

impl From<Vec<&str>> for MetadataValue {
    fn from(v: Vec<&str>) -> Self {
        MetadataValue::Array(MetadataArray::String(
            v.into_iter().map(str::to_owned).collect(),
        ))
    }
}
