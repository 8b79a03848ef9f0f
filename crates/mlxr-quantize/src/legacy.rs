//! The 32-weight block types: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 (ggml's
//! `quantize_row_q*_ref`, which `quantize_q*` uses without an importance
//! matrix).
//!
//! Layouts (little-endian, f16 scales first):
//! Q4_0 `d, qs[16]`; Q4_1 `d, m, qs[16]`; Q5_0 `d, qh[4], qs[16]`;
//! Q5_1 `d, m, qh[4], qs[16]`; Q8_0 `d, qs[32]`. Nibble `j` of `qs` holds
//! weight `j` (low) and `j + 16` (high).

use crate::fp16::f32_to_f16_bits;

pub const QK: usize = 32;

/// The value of largest magnitude (the first one on ties), as ggml picks it.
fn signed_absmax(x: &[f32]) -> f32 {
    let mut amax = 0.0f32;
    let mut max = 0.0f32;
    for &v in x {
        if amax < v.abs() {
            amax = v.abs();
            max = v;
        }
    }
    max
}

fn min_max(x: &[f32]) -> (f32, f32) {
    let mut min = f32::MAX;
    let mut max = -f32::MAX;
    for &v in x {
        if v < min {
            min = v;
        }
        if v > max {
            max = v;
        }
    }
    (min, max)
}

fn inverse(d: f32) -> f32 {
    if d != 0.0 {
        1.0 / d
    } else {
        0.0
    }
}

pub fn quantize_row_q4_0(x: &[f32], y: &mut [u8]) {
    for (x, y) in x.chunks_exact(QK).zip(y.chunks_exact_mut(18)) {
        let d = signed_absmax(x) / -8.0;
        let id = inverse(d);
        y[0..2].copy_from_slice(&f32_to_f16_bits(d).to_le_bytes());
        for j in 0..QK / 2 {
            let q0 = ((x[j] * id + 8.5) as i8).min(15) as u8;
            let q1 = ((x[j + QK / 2] * id + 8.5) as i8).min(15) as u8;
            y[2 + j] = q0 | (q1 << 4);
        }
    }
}

pub fn quantize_row_q4_1(x: &[f32], y: &mut [u8]) {
    for (x, y) in x.chunks_exact(QK).zip(y.chunks_exact_mut(20)) {
        let (min, max) = min_max(x);
        let d = (max - min) / 15.0;
        let id = inverse(d);
        y[0..2].copy_from_slice(&f32_to_f16_bits(d).to_le_bytes());
        y[2..4].copy_from_slice(&f32_to_f16_bits(min).to_le_bytes());
        for j in 0..QK / 2 {
            let q0 = (((x[j] - min) * id + 0.5) as i8).min(15) as u8;
            let q1 = (((x[j + QK / 2] - min) * id + 0.5) as i8).min(15) as u8;
            y[4 + j] = q0 | (q1 << 4);
        }
    }
}

pub fn quantize_row_q5_0(x: &[f32], y: &mut [u8]) {
    for (x, y) in x.chunks_exact(QK).zip(y.chunks_exact_mut(22)) {
        let d = signed_absmax(x) / -16.0;
        let id = inverse(d);
        y[0..2].copy_from_slice(&f32_to_f16_bits(d).to_le_bytes());
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let q0 = ((x[j] * id + 16.5) as i8).min(31) as u8;
            let q1 = ((x[j + QK / 2] * id + 16.5) as i8).min(31) as u8;
            y[6 + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
            qh |= (((q0 & 0x10) >> 4) as u32) << j;
            qh |= (((q1 & 0x10) >> 4) as u32) << (j + QK / 2);
        }
        y[2..6].copy_from_slice(&qh.to_le_bytes());
    }
}

pub fn quantize_row_q5_1(x: &[f32], y: &mut [u8]) {
    for (x, y) in x.chunks_exact(QK).zip(y.chunks_exact_mut(24)) {
        let (min, max) = min_max(x);
        let d = (max - min) / 31.0;
        let id = inverse(d);
        y[0..2].copy_from_slice(&f32_to_f16_bits(d).to_le_bytes());
        y[2..4].copy_from_slice(&f32_to_f16_bits(min).to_le_bytes());
        let mut qh = 0u32;
        for j in 0..QK / 2 {
            let q0 = ((x[j] - min) * id + 0.5) as u8;
            let q1 = ((x[j + QK / 2] - min) * id + 0.5) as u8;
            y[8 + j] = (q0 & 0x0f) | ((q1 & 0x0f) << 4);
            qh |= (((q0 & 0x10) >> 4) as u32) << j;
            qh |= (((q1 & 0x10) >> 4) as u32) << (j + QK / 2);
        }
        y[4..8].copy_from_slice(&qh.to_le_bytes());
    }
}

pub fn quantize_row_q8_0(x: &[f32], y: &mut [u8]) {
    for (x, y) in x.chunks_exact(QK).zip(y.chunks_exact_mut(34)) {
        let amax = x.iter().fold(0.0f32, |a, v| a.max(v.abs()));
        let d = amax / 127.0;
        let id = inverse(d);
        y[0..2].copy_from_slice(&f32_to_f16_bits(d).to_le_bytes());
        for j in 0..QK {
            y[2 + j] = (x[j] * id).round() as i8 as u8;
        }
    }
}
