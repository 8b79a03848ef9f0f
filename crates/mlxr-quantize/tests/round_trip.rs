//! Quantize -> dequantize stays within each type's error, and odd inputs
//! are errors, never panics.

use mlxr_formats::gguf::GgmlType;
use mlxr_quantize::{dequantize, quantize, row_size, QuantizeError};

/// Deterministic weights (xorshift, sums of three uniforms) whose scale
/// changes every 256 values.
fn weights(n: usize) -> Vec<f32> {
    let mut s = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5
    };
    (0..n)
        .map(|i| {
            let scale = 10f32.powi(-(((i / 256) % 4) as i32));
            (next() + next() + next()) * scale
        })
        .collect()
}

fn relative_rms_error(ty: GgmlType, x: &[f32], n_per_row: usize) -> f32 {
    let q = quantize(ty, x, n_per_row).unwrap();
    assert_eq!(
        q.len(),
        x.len() / n_per_row * row_size(ty, n_per_row).unwrap()
    );
    let y = dequantize(ty, &q, x.len()).unwrap();
    // Per 32-value group, so that small groups count as much as large ones.
    let mut worst = 0f32;
    for (xs, ys) in x.chunks(32).zip(y.chunks(32)) {
        let err: f32 = xs.iter().zip(ys).map(|(a, b)| (a - b) * (a - b)).sum();
        let norm: f32 = xs.iter().map(|a| a * a).sum();
        worst = worst.max((err / norm).sqrt());
    }
    worst
}

#[test]
fn every_type_round_trips_within_its_error() {
    let x = weights(4 * 512);
    let bounds = [
        (GgmlType::F32, 0.0),
        (GgmlType::F16, 1e-3),
        (GgmlType::BF16, 8e-3),
        (GgmlType::Q8_0, 0.01),
        (GgmlType::Q6_K, 0.08),
        (GgmlType::Q5_0, 0.08),
        (GgmlType::Q5_1, 0.08),
        (GgmlType::Q5_K, 0.1),
        (GgmlType::Q4_0, 0.16),
        (GgmlType::Q4_1, 0.16),
        (GgmlType::Q4_K, 0.2),
        (GgmlType::Q3_K, 0.4),
        (GgmlType::Q2_K, 0.8),
    ];
    let errors: Vec<(GgmlType, f32, f32)> = bounds
        .iter()
        .map(|&(ty, bound)| (ty, relative_rms_error(ty, &x, 512), bound))
        .collect();
    for &(ty, e, bound) in &errors {
        assert!(
            e <= bound,
            "{ty}: worst group error {e} > {bound}; all: {errors:?}"
        );
    }
}

#[test]
fn zeros_and_constants_round_trip_exactly() {
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
    ] {
        let x = vec![0.0f32; 256];
        let y = dequantize(ty, &quantize(ty, &x, 256).unwrap(), 256).unwrap();
        assert!(y.iter().all(|&v| v == 0.0), "{ty}");
    }
    for ty in [
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        let x = vec![0.0f32; 256];
        let y = dequantize(ty, &quantize(ty, &x, 256).unwrap(), 256).unwrap();
        assert!(y.iter().all(|&v| v == 0.0), "{ty}: {:?}", &y[..4]);
    }
}

#[test]
fn odd_shapes_are_errors() {
    let x = weights(512);
    // A row that is not whole blocks.
    assert!(matches!(
        quantize(GgmlType::Q4_K, &x[..500], 250),
        Err(QuantizeError::Shape { .. })
    ));
    assert!(matches!(
        quantize(GgmlType::Q8_0, &x[..40], 40),
        Err(QuantizeError::Shape { .. })
    ));
    // Values that are not whole rows, and empty rows.
    assert!(matches!(
        quantize(GgmlType::Q8_0, &x[..96], 64),
        Err(QuantizeError::Shape { .. })
    ));
    assert!(matches!(
        quantize(GgmlType::Q8_0, &x, 0),
        Err(QuantizeError::Shape { .. })
    ));
    // Types that are not written.
    for ty in [
        GgmlType::IQ2_XXS,
        GgmlType::Q8_K,
        GgmlType::I32,
        GgmlType::MXFP4,
    ] {
        assert!(
            matches!(
                quantize(ty, &x, 256),
                Err(QuantizeError::UnsupportedTarget(_))
            ),
            "{ty}"
        );
    }
    // Dequantizing bytes of the wrong length.
    assert!(dequantize(GgmlType::Q4_K, &[0u8; 100], 256).is_err());
    assert!(dequantize(GgmlType::Q4_0, &[0u8; 18], 33).is_err());
    assert!(dequantize(GgmlType::IQ2_XXS, &[0u8; 66], 256).is_err());
    // No values is no rows.
    assert_eq!(quantize(GgmlType::Q4_0, &[], 32).unwrap(), Vec::<u8>::new());
}

#[test]
fn non_finite_values_do_not_panic() {
    let mut x = weights(256);
    x[3] = f32::NAN;
    x[100] = f32::INFINITY;
    x[200] = f32::NEG_INFINITY;
    for ty in [
        GgmlType::F16,
        GgmlType::BF16,
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q4_1,
        GgmlType::Q5_0,
        GgmlType::Q5_1,
        GgmlType::Q2_K,
        GgmlType::Q3_K,
        GgmlType::Q4_K,
        GgmlType::Q5_K,
        GgmlType::Q6_K,
    ] {
        let _ = quantize(ty, &x, 256);
    }
}
