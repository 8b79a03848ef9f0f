//! Activations whose rounding must match the reference implementation.

use candle_core::{CpuStorage, CustomOp1, Layout, Shape, Tensor};
use half::f16;

use crate::Result;

/// GELU (tanh approximation) evaluated the way ggml's CPU backend does it:
/// the input is rounded to f16, the result read from an f16 table, and inputs
/// beyond ±10 saturate. Matching that rounding keeps 8-bit activation
/// quantization downstream from flipping where llama.cpp does not.
pub fn gelu_tanh(x: &Tensor) -> Result<Tensor> {
    if !x.device().is_cpu() {
        return Ok(x.gelu()?);
    }
    Ok(x.contiguous()?.apply_op1_no_bwd(&GeluF16Table)?)
}

fn gelu_f32(x: f32) -> f32 {
    const SQRT_2_OVER_PI: f32 = 0.797_884_6;
    const COEF_A: f32 = 0.044_715;
    0.5 * x * (1.0 + (SQRT_2_OVER_PI * x * (1.0 + COEF_A * x * x)).tanh())
}

fn gelu_f16_table(x: f32) -> f32 {
    if x <= -10.0 {
        0.0
    } else if x >= 10.0 {
        x
    } else {
        let rounded = f16::from_f32(x).to_f32();
        f16::from_f32(gelu_f32(rounded)).to_f32()
    }
}

struct GeluF16Table;

impl CustomOp1 for GeluF16Table {
    fn name(&self) -> &'static str {
        "gelu-f16-table"
    }

    fn cpu_fwd(
        &self,
        storage: &CpuStorage,
        layout: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (start, end) = layout
            .contiguous_offsets()
            .ok_or_else(|| candle_core::Error::Msg("gelu: input must be contiguous".into()))?;
        let x = &storage.as_slice::<f32>()?[start..end];
        let y: Vec<f32> = x.iter().map(|&v| gelu_f16_table(v)).collect();
        Ok((CpuStorage::F32(y), layout.shape().clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_exact_gelu_within_f16_precision_and_saturates() {
        for &x in &[-12.0f32, -3.0, -0.5, 0.0, 0.1, 1.0, 2.5, 9.99, 10.0, 50.0] {
            let y = gelu_f16_table(x);
            let exact = gelu_f32(x);
            assert!(
                (y - exact).abs() <= 2e-3 * exact.abs().max(1.0),
                "x={x}: {y} vs {exact}"
            );
        }
        assert_eq!(gelu_f16_table(-10.0), 0.0);
        assert_eq!(gelu_f16_table(12.345), 12.345);
        // Values come out on the f16 grid.
        let y = gelu_f16_table(0.3);
        assert_eq!(f16::from_f32(y).to_f32(), y);
    }

    #[test]
    fn tensor_op_agrees_with_scalar() {
        let x = Tensor::new(
            &[-11.0f32, -1.0, 0.25, 3.0, 11.0],
            &candle_core::Device::Cpu,
        )
        .unwrap();
        let y = gelu_tanh(&x).unwrap().to_vec1::<f32>().unwrap();
        let want: Vec<f32> = [-11.0f32, -1.0, 0.25, 3.0, 11.0]
            .iter()
            .map(|&v| gelu_f16_table(v))
            .collect();
        assert_eq!(y, want);
    }
}
