//! A streaming GGUF writer for large outputs: the header is written first
//! (tensor sizes follow from their types and shapes), then each tensor's
//! data in order. Everything goes to a hidden temporary file beside the
//! output, renamed into place by [`GgufStreamWriter::finish`]; a writer
//! dropped before that (an error, an interrupted run) removes it, so a
//! failed run leaves no partial model behind.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::ggml_type::GgmlType;
use super::value::MetadataValue;
use super::writer::{write_str, write_value};
use super::{GgufError, DEFAULT_ALIGNMENT};

/// One tensor of the output, in the order its data will be written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    pub name: String,
    /// GGUF order (`dims[0]` varies fastest).
    pub dims: Vec<u64>,
    pub ggml_type: GgmlType,
}

impl TensorSpec {
    /// Exact data size in bytes, or `None` when the first dimension is not
    /// a multiple of the type's block size.
    pub fn size_bytes(&self) -> Option<u64> {
        let row = *self.dims.first().unwrap_or(&1);
        let block = self.ggml_type.block_size();
        if !row.is_multiple_of(block) {
            return None;
        }
        let rows = self
            .dims
            .iter()
            .skip(1)
            .try_fold(1u64, |a, &d| a.checked_mul(d))?;
        (row / block)
            .checked_mul(self.ggml_type.type_size())?
            .checked_mul(rows)
    }
}

/// Writes a GGUF v3 file tensor by tensor; see the module documentation.
#[derive(Debug)]
pub struct GgufStreamWriter {
    out: Option<BufWriter<File>>,
    temp_path: PathBuf,
    path: PathBuf,
    sizes: Vec<u64>,
    next: usize,
    alignment: u64,
    written: u64,
}

impl GgufStreamWriter {
    /// Creates the temporary file and writes the header. `kvs` are written
    /// as given (a `general.alignment` among them sets the alignment).
    pub fn create(
        path: impl AsRef<Path>,
        kvs: &[(String, MetadataValue)],
        tensors: &[TensorSpec],
    ) -> Result<GgufStreamWriter, GgufError> {
        let path = path.as_ref().to_owned();
        let io_err = |source| GgufError::Io {
            path: path.clone(),
            source,
        };
        let alignment = match kvs.iter().find(|(k, _)| k == "general.alignment") {
            Some((_, MetadataValue::U32(a))) if a.is_power_of_two() => u64::from(*a),
            Some(_) => {
                return Err(io_err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "general.alignment must be a u32 power of two",
                )))
            }
            None => DEFAULT_ALIGNMENT,
        };
        let mut sizes = Vec::with_capacity(tensors.len());
        for t in tensors {
            let size = t.size_bytes().ok_or_else(|| {
                io_err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!(
                        "tensor {}: row length {} is not a multiple of {}'s block size {}",
                        t.name,
                        t.dims.first().unwrap_or(&1),
                        t.ggml_type,
                        t.ggml_type.block_size()
                    ),
                ))
            })?;
            sizes.push(size);
        }

        let mut header = Vec::new();
        header.extend_from_slice(b"GGUF");
        header.extend_from_slice(&3u32.to_le_bytes());
        header.extend_from_slice(&(tensors.len() as u64).to_le_bytes());
        header.extend_from_slice(&(kvs.len() as u64).to_le_bytes());
        for (k, v) in kvs {
            write_str(&mut header, k);
            header.extend_from_slice(&v.type_id().to_le_bytes());
            write_value(&mut header, v);
        }
        let mut offset = 0u64;
        for (t, &size) in tensors.iter().zip(&sizes) {
            write_str(&mut header, &t.name);
            header.extend_from_slice(&(t.dims.len() as u32).to_le_bytes());
            for d in &t.dims {
                header.extend_from_slice(&d.to_le_bytes());
            }
            header.extend_from_slice(&t.ggml_type.id().to_le_bytes());
            header.extend_from_slice(&offset.to_le_bytes());
            offset = (offset + size).div_ceil(alignment) * alignment;
        }
        let padded = (header.len() as u64).div_ceil(alignment) * alignment;
        header.resize(padded as usize, 0);

        let temp_path = temp_path_for(&path);
        let file = File::create(&temp_path).map_err(|source| GgufError::Io {
            path: temp_path.clone(),
            source,
        })?;
        let mut writer = GgufStreamWriter {
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            temp_path,
            path,
            sizes,
            next: 0,
            alignment,
            written: 0,
        };
        writer.write_all(&header)?;
        writer.written = 0;
        Ok(writer)
    }

    /// Where the data goes until [`GgufStreamWriter::finish`].
    pub fn temp_path(&self) -> &Path {
        &self.temp_path
    }

    /// Writes the next tensor's data (exactly its size) and its padding.
    pub fn write_tensor(&mut self, data: &[u8]) -> Result<(), GgufError> {
        let Some(&size) = self.sizes.get(self.next) else {
            return Err(self.invalid(format!(
                "more tensors written than the {} declared",
                self.sizes.len()
            )));
        };
        if data.len() as u64 != size {
            return Err(self.invalid(format!(
                "tensor {} has {} bytes, expected {size}",
                self.next,
                data.len()
            )));
        }
        self.write_all(data)?;
        let pad = self.written.div_ceil(self.alignment) * self.alignment - self.written;
        self.write_all(&vec![0u8; pad as usize])?;
        self.next += 1;
        Ok(())
    }

    /// Flushes, syncs and renames the file into place once every tensor is
    /// written.
    pub fn finish(mut self) -> Result<(), GgufError> {
        if self.next != self.sizes.len() {
            return Err(self.invalid(format!(
                "{} of {} tensors written",
                self.next,
                self.sizes.len()
            )));
        }
        let out = self.out.take().expect("writer is open until finish");
        let temp = self.temp_path.clone();
        let io_err = |source| GgufError::Io {
            path: temp.clone(),
            source,
        };
        let file = out.into_inner().map_err(|e| io_err(e.into_error()))?;
        file.sync_all().map_err(io_err)?;
        drop(file);
        std::fs::rename(&self.temp_path, &self.path).map_err(io_err)
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<(), GgufError> {
        let out = self.out.as_mut().expect("writer is open until finish");
        out.write_all(bytes).map_err(|source| GgufError::Io {
            path: self.temp_path.clone(),
            source,
        })?;
        self.written += bytes.len() as u64;
        Ok(())
    }

    fn invalid(&self, message: String) -> GgufError {
        GgufError::Io {
            path: self.path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidInput, message),
        }
    }
}

impl Drop for GgufStreamWriter {
    fn drop(&mut self) {
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.temp_path);
        }
    }
}

/// `dir/.name.partial-PID` beside `path`, so the final rename stays on one
/// file system.
fn temp_path_for(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out.gguf".into());
    path.with_file_name(format!(".{name}.partial-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::writer::GgufWriter;
    use crate::gguf::GgufFile;

    fn specs() -> Vec<TensorSpec> {
        vec![
            TensorSpec {
                name: "a".into(),
                dims: vec![3],
                ggml_type: GgmlType::F32,
            },
            TensorSpec {
                name: "b".into(),
                dims: vec![32, 2],
                ggml_type: GgmlType::Q8_0,
            },
        ]
    }

    #[test]
    fn matches_the_in_memory_writer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let kvs = vec![(
            "general.architecture".to_string(),
            MetadataValue::from("llama"),
        )];
        let a: Vec<u8> = [1f32, 2.0, 3.0]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect();
        let b: Vec<u8> = (0..68u8).collect();
        let mut w = GgufStreamWriter::create(&path, &kvs, &specs()).unwrap();
        let temp = w.temp_path().to_owned();
        assert!(temp.exists() && !path.exists());
        w.write_tensor(&a).unwrap();
        w.write_tensor(&b).unwrap();
        w.finish().unwrap();
        assert!(!temp.exists());
        let mut expected = GgufWriter::new()
            .kv("general.architecture", "llama")
            .tensor("a", &[3], GgmlType::F32, a)
            .tensor("b", &[32, 2], GgmlType::Q8_0, b)
            .build();
        // The stream writer also pads after the last tensor, as llama.cpp does.
        expected.resize(expected.len().div_ceil(32) * 32, 0);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
        let f = GgufFile::open(&path).unwrap();
        assert_eq!(f.tensor("b").unwrap().size_bytes, 68);
    }

    #[test]
    fn an_unfinished_file_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let mut w = GgufStreamWriter::create(&path, &[], &specs()).unwrap();
        w.write_tensor(&[0; 12]).unwrap();
        assert!(w.write_tensor(&[0; 3]).is_err());
        drop(w);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
        let w = GgufStreamWriter::create(&path, &[], &specs()).unwrap();
        assert!(w.finish().is_err());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn a_row_that_is_not_whole_blocks_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let spec = TensorSpec {
            name: "w".into(),
            dims: vec![33, 1],
            ggml_type: GgmlType::Q8_0,
        };
        let e = GgufStreamWriter::create(dir.path().join("m.gguf"), &[], &[spec]).unwrap_err();
        assert!(e.to_string().contains("not a multiple"), "{e}");
    }
}
