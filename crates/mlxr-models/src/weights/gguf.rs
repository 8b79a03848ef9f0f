//! Named weights of a GGUF file as candle tensors.

use std::sync::Arc;

use candle_core::quantized::{ggml_file::qtensor_from_ggml, GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use mlxr_formats::gguf::{GgmlType, GgufFile};

use super::Weights;
use crate::backend::cpu::kernels::{RowOrder, WeightKind};
use crate::layers::{Embedding, Linear};
use crate::ModelError;

pub struct GgufWeights<'a> {
    file: &'a GgufFile,
    device: Device,
    /// The CPU kernels' arithmetic order, or `None` for candle's ops alone.
    kernels: Option<RowOrder>,
}

impl<'a> GgufWeights<'a> {
    pub fn new(file: &'a GgufFile, device: &Device) -> Self {
        Self {
            file,
            device: device.clone(),
            kernels: Some(RowOrder::Ggml),
        }
    }

    /// Prepares the quantized matmuls for the CPU kernels with their
    /// arithmetic order, or (`None`) for candle's ops alone.
    pub fn with_kernels(mut self, kernels: Option<RowOrder>) -> Self {
        self.kernels = kernels;
        self
    }

    pub fn contains(&self, name: &str) -> bool {
        self.file.tensor(name).is_some()
    }

    pub fn file(&self) -> &'a GgufFile {
        self.file
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    /// The tensor `name` in its stored (possibly quantized) type. `shape` is in
    /// row-major order (outermost first), the reverse of GGUF's `ne` order.
    /// The copy is the tensor's only one: the file's pages of it leave
    /// memory ([`GgufFile::release`]).
    pub fn qtensor(&self, name: &str, shape: &[usize]) -> Result<QTensor, ModelError> {
        let (dtype, bytes) = self.stored(name, shape)?;
        let t = qtensor_from_ggml(dtype, bytes, shape.to_vec(), &self.device)
            .map_err(|e| ModelError::candle(format!("loading tensor '{name}'"), e))?;
        self.release(name);
        Ok(t)
    }

    fn release(&self, name: &str) {
        if let Some(info) = self.file.tensor(name) {
            self.file.release(info);
        }
    }

    /// The type and raw data of `name`, checked to have `shape`.
    pub(crate) fn stored(
        &self,
        name: &str,
        shape: &[usize],
    ) -> Result<(GgmlDType, &'a [u8]), ModelError> {
        let info = self
            .file
            .tensor(name)
            .ok_or_else(|| ModelError::MissingTensor(name.to_string()))?;
        let stored: Vec<usize> = info.dims.iter().rev().map(|&d| d as usize).collect();
        ModelError::check_shape(name, shape, &stored)?;
        let dtype = candle_dtype(info.ggml_type).ok_or_else(|| {
            ModelError::Gguf(mlxr_formats::gguf::GgufError::UnsupportedTensorType {
                tensor: name.to_string(),
                ggml_type: info.ggml_type,
            })
        })?;
        Ok((dtype, self.file.tensor_data(info)?))
    }

    /// The type all of `names` share, when they exist, there are several, the
    /// weights load on the CPU and our kernels compute that type.
    pub(crate) fn common_kernel_type(&self, names: &[String]) -> Option<GgmlDType> {
        if names.len() < 2 || !self.device.is_cpu() || self.kernels.is_none() {
            return None;
        }
        let mut types = names
            .iter()
            .map(|n| self.file.tensor(n).map(|i| i.ggml_type));
        let first = types.next()??;
        if !types.all(|t| t == Some(first)) {
            return None;
        }
        let dtype = candle_dtype(first)?;
        WeightKind::from_dtype(dtype).map(|_| dtype)
    }

    /// The tensor `name` dequantized to f32 (norm weights and other small vectors).
    pub fn tensor(&self, name: &str, shape: &[usize]) -> Result<Tensor, ModelError> {
        self.qtensor(name, shape)?
            .dequantize(&self.device)
            .map_err(|e| ModelError::candle(format!("dequantizing tensor '{name}'"), e))
    }
}

impl Weights for GgufWeights<'_> {
    fn contains(&self, name: &str) -> bool {
        GgufWeights::contains(self, name)
    }

    fn linear(&self, name: &str, out: usize, inp: usize) -> Result<Linear, ModelError> {
        Linear::ggml(Arc::new(self.qtensor(name, &[out, inp])?), self.kernels)
    }

    fn stacked_linear(
        &self,
        names: &[String],
        outs: &[usize],
        inp: usize,
    ) -> Result<Option<Linear>, ModelError> {
        let Some(dtype) = self.common_kernel_type(names) else {
            return Ok(None);
        };
        // Rows are stored one after another, so the stack is the concatenation.
        let mut bytes = Vec::new();
        for (name, &out) in names.iter().zip(outs) {
            bytes.extend_from_slice(self.stored(name, &[out, inp])?.1);
            self.release(name);
        }
        let rows = outs.iter().sum();
        let stacked = qtensor_from_ggml(dtype, &bytes, vec![rows, inp], &self.device)
            .map_err(|e| ModelError::candle(format!("stacking {names:?}"), e))?;
        Ok(Some(Linear::ggml(Arc::new(stacked), self.kernels)?))
    }

    fn vector(&self, name: &str, len: usize) -> Result<Tensor, ModelError> {
        self.tensor(name, &[len])
    }

    fn embedding(&self, name: &str, vocab: usize, hidden: usize) -> Result<Embedding, ModelError> {
        Ok(Embedding::Ggml(Arc::new(
            self.qtensor(name, &[vocab, hidden])?,
        )))
    }

    fn kernels(&self) -> Option<RowOrder> {
        self.kernels
    }
}

fn candle_dtype(t: GgmlType) -> Option<GgmlDType> {
    Some(match t {
        GgmlType::F32 => GgmlDType::F32,
        GgmlType::F16 => GgmlDType::F16,
        GgmlType::BF16 => GgmlDType::BF16,
        GgmlType::Q4_0 => GgmlDType::Q4_0,
        GgmlType::Q4_1 => GgmlDType::Q4_1,
        GgmlType::Q5_0 => GgmlDType::Q5_0,
        GgmlType::Q5_1 => GgmlDType::Q5_1,
        GgmlType::Q8_0 => GgmlDType::Q8_0,
        GgmlType::Q8_1 => GgmlDType::Q8_1,
        GgmlType::Q2_K => GgmlDType::Q2K,
        GgmlType::Q3_K => GgmlDType::Q3K,
        GgmlType::Q4_K => GgmlDType::Q4K,
        GgmlType::Q5_K => GgmlDType::Q5K,
        GgmlType::Q6_K => GgmlDType::Q6K,
        GgmlType::Q8_K => GgmlDType::Q8K,
        _ => return None,
    })
}
