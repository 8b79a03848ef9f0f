use std::sync::Arc;

use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{Device, Module, Tensor};

use super::matmul::matmul_with;
use super::q8::{self, BlockQ8, QK};
use super::*;

/// Deterministic pseudo-random floats in [-1, 1) (xorshift).
fn rand_vec(len: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn f16_at(b: &[u8], at: usize) -> f64 {
    half::f16::from_bits(u16::from_le_bytes([b[at], b[at + 1]])).to_f64()
}

/// With `RowOrder::Independent` a row's result is the same whatever
/// batch it is computed in (what "batched equals alone" rests on).
#[test]
fn independent_rows_do_not_depend_on_the_batch() {
    use candle_core::quantized::{GgmlDType, QTensor};
    let (n, k) = (64, 512);
    for dtype in [GgmlDType::Q4K, GgmlDType::Q6K] {
        let w = Tensor::from_vec(rand_vec(n * k, 7), (n, k), &Device::Cpu).unwrap();
        let qt = Arc::new(QTensor::quantize(&w, dtype).unwrap());
        let op = QuantMatMul::new(qt, RowOrder::Independent).unwrap();
        let m = 19;
        let x = Tensor::from_vec(rand_vec(m * k, 9), (m, k), &Device::Cpu).unwrap();
        let all = op.forward(&x).unwrap().to_vec2::<f32>().unwrap();
        for (r, row) in all.iter().enumerate() {
            let alone = op.forward(&x.narrow(0, r, 1).unwrap()).unwrap();
            let alone = alone.to_vec2::<f32>().unwrap().remove(0);
            assert!(
                row.iter()
                    .zip(&alone)
                    .all(|(a, b)| a.to_bits() == b.to_bits()),
                "{dtype:?}: row {r} differs in a batch of {m}"
            );
        }
    }
}

/// Plain f64 evaluation of the same quantized math.
fn reference(kind: WeightKind, w: &[u8], x: &[f32], (m, n, k): (usize, usize, usize)) -> Vec<f64> {
    let kb = k / QK;
    let bb = kind.block_bytes();
    let mut out = vec![0.0f64; m * n];
    for i in 0..m {
        let mut xq = vec![BlockQ8::default(); kb];
        q8::quantize_row(&x[i * k..(i + 1) * k], &mut xq, kind.activation_has_sum());
        for r in 0..n {
            let mut acc = 0.0f64;
            for (b, yb) in xq.iter().enumerate() {
                let wb = &w[(r * kb + b) * bb..(r * kb + b + 1) * bb];
                for e in 0..QK {
                    let y = yb.d as f64 * yb.qs[e] as f64;
                    let qs = match kind {
                        WeightKind::Q4_1 => &wb[4..20],
                        WeightKind::Q5_0 => &wb[6..22],
                        WeightKind::Q8_0 => &wb[2..34],
                        WeightKind::Q4_0 => &wb[2..18],
                        WeightKind::Q5_1 => &wb[8..24],
                        WeightKind::Q4K | WeightKind::Q6K | WeightKind::Q5K => unreachable!(),
                    };
                    let high = |at: usize| {
                        let qh = u32::from_le_bytes([wb[at], wb[at + 1], wb[at + 2], wb[at + 3]]);
                        ((qh >> e) & 1) as f64 * 16.0
                    };
                    let nib = if e < 16 { qs[e] & 15 } else { qs[e - 16] >> 4 } as f64;
                    let wv = match kind {
                        WeightKind::Q4_1 => f16_at(wb, 0) * nib + f16_at(wb, 2),
                        WeightKind::Q5_0 => f16_at(wb, 0) * (nib + high(2) - 16.0),
                        WeightKind::Q8_0 => f16_at(wb, 0) * (qs[e] as i8) as f64,
                        WeightKind::Q4_0 => f16_at(wb, 0) * (nib - 8.0),
                        WeightKind::Q5_1 => f16_at(wb, 0) * (nib + high(4)) + f16_at(wb, 2),
                        WeightKind::Q4K | WeightKind::Q6K | WeightKind::Q5K => unreachable!(),
                    };
                    if kind == WeightKind::Q4_1 {
                        // the offset term uses the stored sum s = d * Σq
                        acc += f16_at(wb, 0) * nib * y;
                    } else if kind == WeightKind::Q5_1 {
                        acc += f16_at(wb, 0) * (nib + high(4)) * y;
                    } else {
                        acc += wv * y;
                    }
                }
                if kind.activation_has_sum() {
                    acc += f16_at(wb, 2) * yb.s as f64;
                }
            }
            out[i * n + r] = acc;
        }
    }
    out
}

/// Our SIMD and portable paths agree bit for bit, the op gives the same,
/// and it is close to candle's `QMatMul` (its own quantizer and order);
/// the 32-element types also within 1e-4 of a plain f64 evaluation.
fn check(kind: WeightKind, dtype: GgmlDType, (m, n, k): (usize, usize, usize)) {
    let dev = Device::Cpu;
    let wf = Tensor::from_vec(rand_vec(n * k, 7 + n as u64), (n, k), &dev).unwrap();
    let qt = Arc::new(QTensor::quantize(&wf, dtype).unwrap());
    let xv: Vec<f32> = rand_vec(m * k, 11 + m as u64)
        .iter()
        .map(|v| v * 3.0)
        .collect();
    let w = qt.data().unwrap().into_owned();

    let mut simd = vec![0.0f32; m * n];
    let mut scalar = vec![0.0f32; m * n];
    matmul(kind, &w, &xv, (m, n, k), &mut simd, true);
    matmul(kind, &w, &xv, (m, n, k), &mut scalar, false);
    for (a, b) in simd.iter().zip(&scalar) {
        assert_eq!(a.to_bits(), b.to_bits(), "{kind:?}: simd {a} != scalar {b}");
    }

    if !kind.is_k_quant() {
        let r = reference(kind, &w, &xv, (m, n, k));
        let scale = r.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        for (a, b) in simd.iter().zip(&r) {
            assert!(
                ((*a as f64) - b).abs() <= 1e-4 * scale.max(b.abs()),
                "{kind:?}: {a} vs f64 {b}"
            );
        }
    }

    let x = Tensor::from_vec(xv, (m, k), &dev).unwrap();
    let values = |t: candle_core::Result<Tensor>| -> Vec<f32> {
        t.unwrap().flatten_all().unwrap().to_vec1().unwrap()
    };
    let ours = values(
        QuantMatMul::new(qt.clone(), RowOrder::Ggml)
            .unwrap()
            .forward(&x),
    );
    assert_eq!(ours, simd);
    let theirs = values(QMatMul::from_arc(qt).unwrap().forward(&x));
    let scale = theirs.iter().fold(0.0f32, |a, v| a.max(v.abs()));
    for (a, b) in ours.iter().zip(&theirs) {
        assert!((a - b).abs() <= 1e-2 * scale, "{kind:?}: {a} vs candle {b}");
    }
}

/// Says (visibly, not in the captured output) when this CPU (under
/// `MLXR_CPU_ISA`) runs no 16-row tile kernels, so a test checked only the
/// row paths.
fn note_without_tiles() {
    if TileKernels::detect().is_none() {
        mlxr_testkit::skip_note(
            "no AVX2 or AVX-512 VNNI tile kernels here: the 16-row tile kernels were not run",
        );
    }
}

#[test]
fn k_quants_simd_equals_scalar_and_are_close_to_candle() {
    note_without_tiles();
    for m in [1, 2, 5, 8, 19] {
        check(WeightKind::Q4K, GgmlDType::Q4K, (m, 40, 512));
        // n a multiple of 16: the AVX-512 VNNI tile path where available.
        check(WeightKind::Q4K, GgmlDType::Q4K, (m, 48, 768));
        check(WeightKind::Q6K, GgmlDType::Q6K, (m, 36, 768));
        check(WeightKind::Q6K, GgmlDType::Q6K, (m, 32, 512));
        check(WeightKind::Q5K, GgmlDType::Q5K, (m, 40, 512));
        check(WeightKind::Q5K, GgmlDType::Q5K, (m, 48, 768));
        check(WeightKind::Q5K, GgmlDType::Q5K, (m, 32, 512));
    }
}

/// The 32-element types through both the row path (n = 40) and the tiles.
#[test]
fn thirty_two_element_types_match_reference_and_candle() {
    note_without_tiles();
    for (kind, dtype, k) in [
        (WeightKind::Q4_1, GgmlDType::Q4_1, 576),
        (WeightKind::Q5_0, GgmlDType::Q5_0, 640),
        (WeightKind::Q8_0, GgmlDType::Q8_0, 640),
        (WeightKind::Q4_0, GgmlDType::Q4_0, 640),
        (WeightKind::Q5_1, GgmlDType::Q5_1, 576),
    ] {
        check(kind, dtype, (19, 40, k));
        // n a multiple of 16: the AVX-512 VNNI tile path where available.
        for m in [1, 2, 3, 5, 18, 19] {
            check(kind, dtype, (m, 48, k));
        }
        check(kind, dtype, (2, 16, 32));
        check(kind, dtype, (3, 32, 96));
    }
}

/// With tiles, the op keeps no reference to the GGUF blocks (the weight
/// is in memory once); without, it shares the caller's tensor.
#[test]
fn tiled_ops_let_go_of_the_blocks() {
    for dtype in [
        GgmlDType::Q4_1,
        GgmlDType::Q8_0,
        GgmlDType::Q4K,
        GgmlDType::Q6K,
    ] {
        let k = 512;
        let w = Tensor::from_vec(rand_vec(48 * k, 5), (48, k), &Device::Cpu).unwrap();
        let qt = Arc::new(QTensor::quantize(&w, dtype).unwrap());
        let op = QuantMatMul::new(qt.clone(), RowOrder::Independent).unwrap();
        assert_eq!(
            op.replaces_blocks(),
            TileKernels::detect().is_some(),
            "{dtype:?}"
        );
        let refs = if op.replaces_blocks() { 1 } else { 2 };
        assert_eq!(Arc::strong_count(&qt), refs, "{dtype:?}");
        let x = Tensor::from_vec(rand_vec(3 * k, 6), (3, k), &Device::Cpu).unwrap();
        let ours = op
            .forward(&x)
            .unwrap()
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        let data = qt.data().unwrap();
        let mut blocks = vec![0.0f32; 3 * 48];
        let kind = WeightKind::from_dtype(dtype).unwrap();
        matmul_with(
            kind,
            &data,
            None,
            &x.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            (3, 48, k),
            &mut blocks,
            true,
            RowOrder::Independent,
            &mut Default::default(),
        );
        assert_eq!(ours, blocks, "{dtype:?}");
    }
}

/// Rows read back from the tiles equal candle's dequantization.
#[test]
fn tile_rows_dequantize_like_candle() {
    if TileKernels::detect().is_none() {
        note_without_tiles();
        return;
    }
    for dtype in [
        GgmlDType::Q4_0,
        GgmlDType::Q4_1,
        GgmlDType::Q5_0,
        GgmlDType::Q5_1,
        GgmlDType::Q8_0,
        GgmlDType::Q6K,
    ] {
        let (n, k) = (48, if dtype == GgmlDType::Q6K { 512 } else { 96 });
        let w = Tensor::from_vec(rand_vec(n * k, 8), (n, k), &Device::Cpu).unwrap();
        let qt = Arc::new(QTensor::quantize(&w, dtype).unwrap());
        let expected = qt
            .dequantize(&Device::Cpu)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        let op = QuantMatMul::new(qt, RowOrder::Independent).unwrap();
        assert!(op.has_rows(), "{dtype:?}");
        for (r, want) in expected.iter().enumerate() {
            let mut row = vec![0.0f32; k];
            assert!(op.dequantize_row(r, &mut row));
            assert_eq!(&row, want, "{dtype:?} row {r}");
        }
        assert!(!op.dequantize_row(n, &mut vec![0.0; k]));
    }
}

/// The Q6_K tiles give back candle's rows.
#[test]
fn q6k_tile_rows_are_candles() {
    let (n, k) = (32, 768);
    let w = Tensor::from_vec(rand_vec(n * k, 9), (n, k), &Device::Cpu).unwrap();
    let qt = QTensor::quantize(&w, GgmlDType::Q6K).unwrap();
    let expected = qt
        .dequantize(&Device::Cpu)
        .unwrap()
        .to_vec2::<f32>()
        .unwrap();
    let blocks = qt.data().unwrap();
    let tiles = q6k_tiles::Q6KTiles::new(&blocks, n, k);
    for (r, want) in expected.iter().enumerate() {
        let mut row = vec![0.0f32; k];
        tiles.dequantize_row(r, &mut row);
        assert_eq!(&row, want, "row {r}");
    }
}

/// Compares against dumps of ggml's own CPU `mul_mat`, committed in
/// tests/fixtures/ggml-matmul (written by scripts/llamacpp-reference/ggml-matmul-dump.c
/// against the llama.cpp reference build: `<type>_m<m>.bin` holds u32 type, m, n, k,
/// weight blocks, x as f32, y as f32). Q4_K comes from ggml's CPU_REPACK buffer
/// (gemm for the first m - m % 4 rows, gemv for the rest, as in llama.cpp); Q6_K
/// from a plain buffer (vec_dot below 8 rows, the tiled kernel from 8 on).
#[test]
fn bit_identical_to_ggml_dumps() {
    note_without_tiles();
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/ggml-matmul");
    let mut files = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let bytes = std::fs::read(&path).unwrap();
        let u = |i: usize| u32::from_le_bytes(bytes[i * 4..i * 4 + 4].try_into().unwrap());
        let kind = match u(0) {
            2 => WeightKind::Q4_0,
            3 => WeightKind::Q4_1,
            6 => WeightKind::Q5_0,
            7 => WeightKind::Q5_1,
            8 => WeightKind::Q8_0,
            12 => WeightKind::Q4K,
            13 => WeightKind::Q5K,
            14 => WeightKind::Q6K,
            t => panic!("{}: ggml type {t}", path.display()),
        };
        let (m, n, k) = (u(1) as usize, u(2) as usize, u(3) as usize);
        let wlen = n * k / kind.block_elems() * kind.block_bytes();
        let w = &bytes[16..16 + wlen];
        let floats = |at: usize, len: usize| -> Vec<f32> {
            bytes[at..at + 4 * len]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect()
        };
        let x = floats(16 + wlen, m * k);
        let expected = floats(16 + wlen + 4 * m * k, m * n);
        // All rows, then (through the 16-row tile kernels where this CPU
        // has them) the first rows that fill whole tiles.
        let tiled_n = n - n % 16;
        for (rows, simd) in [(n, true), (n, false), (tiled_n, true)] {
            let w = &w[..rows * k / kind.block_elems() * kind.block_bytes()];
            let mut out = vec![0.0f32; m * rows];
            matmul(kind, w, &x, (m, rows, k), &mut out, simd);
            for (i, a) in out.iter().enumerate() {
                let b = expected[i / rows * n + i % rows];
                assert_eq!(
                    a.to_bits(),
                    b.to_bits(),
                    "{} ({rows} rows): [{i}] {a} vs ggml {b}",
                    path.display()
                );
            }
        }
        files += 1;
    }
    assert_eq!(files, 32, "expected 8 weight types x 4 token counts");
    eprintln!("{files} ggml dumps matched bit for bit");
}

#[test]
fn q8_rounds_ties_to_even_and_stores_f32_sum_product() {
    // amax = 127 → id = 1, d = 1: 0.5 → 0, 1.5 → 2, 2.5 → 2, -0.5 → -0.
    let mut x = vec![0.0f32; QK];
    x[0] = 127.0;
    x[1] = 0.5;
    x[2] = 1.5;
    x[3] = 2.5;
    x[4] = -0.5;
    let mut b = [BlockQ8::default()];
    q8::quantize_row(&x, &mut b, true);
    assert_eq!(&b[0].qs[..5], &[127, 0, 2, 2, 0]);
    assert_eq!(b[0].d, 1.0);
    assert_eq!(b[0].s, 131.0);
}

/// The AVX2 tile kernels, called directly (whatever `MLXR_CPU_ISA` says,
/// where the CPU has AVX2, FMA and F16C), against the portable twins of
/// each order, bit for bit: one token, two, four and eight at once, for every 32-element
/// type, Q4_K in the gemv and gemm orders, Q6_K in the vec_dot and tiled
/// orders. Weights from candle's quantizer, activations scaled up so that
/// the integer sums reach their largest sizes.
#[cfg(target_arch = "x86_64")]
#[test]
fn avx2_tile_kernels_equal_the_portable_dots() {
    use super::kquant_tiles_avx2::x86::{q4k_tiles as q4k_avx2, q5k_tiles as q5k_avx2};
    use super::kquants::dot_q4_k_scalar;
    use super::q5k_tiles::dot_q5_k_scalar;
    use super::q8k::{quantize_row as quantize_k, BlockQ8K, Q8KFlavor};
    if !(is_x86_feature_detected!("avx2")
        && is_x86_feature_detected!("fma")
        && is_x86_feature_detected!("f16c"))
    {
        mlxr_testkit::skip_note("no AVX2/FMA/F16C on this CPU: the AVX2 tile kernels were not run");
        return;
    }
    let vnni = is_x86_feature_detected!("avxvnni");
    if !vnni {
        mlxr_testkit::skip_note(
            "no AVX-VNNI on this CPU: the AVX2 tile kernels' VNNI forms were not run",
        );
    }
    // 40 blocks of 32: the lane-by-lane passes cross a chunk.
    let (n, k) = (32, 1280);
    let quantized = |dtype: GgmlDType, seed: u64| {
        let mut v = rand_vec(n * k, seed);
        // A few rows at the extremes of their blocks' ranges.
        v[..k].iter_mut().for_each(|x| *x = x.signum());
        let w = Tensor::from_vec(v, (n, k), &Device::Cpu).unwrap();
        QTensor::quantize(&w, dtype)
            .unwrap()
            .data()
            .unwrap()
            .into_owned()
    };
    let mut x = [rand_vec(k, 21), rand_vec(k, 22)];
    x[1][..64].iter_mut().for_each(|v| *v = -v.abs() * 4.0);

    for (kind, dtype, code) in [
        (WeightKind::Q4_1, GgmlDType::Q4_1, 0u8),
        (WeightKind::Q5_0, GgmlDType::Q5_0, 1),
        (WeightKind::Q8_0, GgmlDType::Q8_0, 2),
        (WeightKind::Q4_0, GgmlDType::Q4_0, 3),
        (WeightKind::Q5_1, GgmlDType::Q5_1, 4),
    ] {
        let w = quantized(dtype, 31 + code as u64);
        let tiles = q32_tiles::Q32Tiles::new(kind, &w, n, k);
        let kb = k / QK;
        let xq: Vec<Vec<BlockQ8>> = x
            .iter()
            .map(|x| {
                let mut q = vec![BlockQ8::default(); kb];
                q8::quantize_row(x, &mut q, kind.activation_has_sum());
                q
            })
            .collect();
        let os: Vec<Vec<[i32; 8]>> = xq
            .iter()
            .map(|q| {
                let mut o = Vec::new();
                q32_tiles::lane_offsets(kind, q, &mut o);
                o
            })
            .collect();
        let twin = match kind {
            WeightKind::Q4_1 => dot::dot_q4_1_q8_1_scalar,
            WeightKind::Q5_0 => dot::dot_q5_0_q8_0_scalar,
            WeightKind::Q8_0 => dot::dot_q8_0_q8_0_scalar,
            WeightKind::Q4_0 => dot::dot_q4_0_q8_0_scalar,
            _ => dot::dot_q5_1_q8_1_scalar,
        };
        let row_bytes = kb * kind.block_bytes();
        for g in 0..n / 16 {
            let (gt, ys, o) = (
                tiles.group(g),
                [&xq[0][..], &xq[1][..]],
                [&os[0][..], &os[1][..]],
            );
            use super::q32_tiles_avx2::x86::{tile_rows, tile_rows_vnni};
            let (ys4, o4) = ([ys[0], ys[1], ys[1], ys[0]], [o[0], o[1], o[1], o[0]]);
            let pick = |j: usize| (j * 5 / 3) % 2;
            let ys8: [&[BlockQ8]; 8] = std::array::from_fn(|j| ys[pick(j)]);
            let o8: [&[[i32; 8]]; 8] = std::array::from_fn(|j| o[pick(j)]);
            macro_rules! run {
                ($code:literal) => {
                    (
                        tile_rows::<$code, 2>(gt, ys, o),
                        tile_rows::<$code, 1>(gt, [ys[1]], [o[1]]),
                        tile_rows::<$code, 4>(gt, ys4, o4),
                        tile_rows::<$code, 8>(gt, ys8, o8),
                    )
                };
            }
            // SAFETY: the features were checked; one tile and offset per block.
            let (two, one, four, eight) = unsafe {
                match code {
                    0 => run!(0),
                    1 => run!(1),
                    2 => run!(2),
                    3 => run!(3),
                    _ => run!(4),
                }
            };
            // AVX-VNNI's dot products: the same exact sums, so the same bits.
            macro_rules! run_vnni {
                ($code:literal) => {
                    (
                        tile_rows_vnni::<$code, 2>(gt, ys, o),
                        tile_rows_vnni::<$code, 8>(gt, ys8, o8),
                    )
                };
            }
            if vnni {
                // SAFETY: as above, and AVX-VNNI was detected.
                let (v_two, v_eight) = unsafe {
                    match code {
                        0 => run_vnni!(0),
                        1 => run_vnni!(1),
                        2 => run_vnni!(2),
                        3 => run_vnni!(3),
                        _ => run_vnni!(4),
                    }
                };
                let bits = |v: &[[f32; 16]]| -> Vec<u32> {
                    v.iter().flatten().map(|x| x.to_bits()).collect()
                };
                assert_eq!(bits(&v_two), bits(&two), "{kind:?} group {g}, VNNI");
                assert_eq!(
                    bits(&v_eight),
                    bits(&eight),
                    "{kind:?} group {g}, VNNI, 8 tokens"
                );
            }
            for c in 0..16 {
                let r = 16 * g + c;
                let wrow = &w[r * row_bytes..(r + 1) * row_bytes];
                for t in 0..2 {
                    let want = twin(wrow, &xq[t]);
                    assert_eq!(
                        two[t][c].to_bits(),
                        want.to_bits(),
                        "{kind:?} row {r} token {t}"
                    );
                }
                assert_eq!(
                    one[0][c].to_bits(),
                    two[1][c].to_bits(),
                    "{kind:?} row {r} alone"
                );
                // Several tokens go lane by lane: 4, and 8 (both rows, interleaved).
                let outs: [&[[f32; 16]]; 2] = [&four, &eight];
                let tokens: [&[&[BlockQ8]]; 2] = [&ys4, &ys8];
                for (out, ys) in outs.into_iter().zip(tokens) {
                    for (j, y) in ys.iter().enumerate() {
                        assert_eq!(
                            out[j][c].to_bits(),
                            twin(wrow, y).to_bits(),
                            "{kind:?} row {r}, {j} of {}",
                            ys.len()
                        );
                    }
                }
            }
        }
    }

    let kb = k / q8k::QK_K;
    let xk: Vec<Vec<BlockQ8K>> = x
        .iter()
        .map(|x| {
            let mut q = vec![BlockQ8K::default(); kb];
            quantize_k(x, &mut q, Q8KFlavor::Reference);
            q
        })
        .collect();
    let ys = [&xk[0][..], &xk[1][..]];

    let w = quantized(GgmlDType::Q4K, 41);
    let tiles = q4k_tiles::Q4KTiles::new(&w, n, k);
    let row_bytes = kb * kquants::Q4_K_BYTES;
    for g in 0..n / 16 {
        let group = &tiles.tiles[g * kb..(g + 1) * kb];
        for pairs in [[false, true], [true, false]] {
            // SAFETY: the features were checked; one tile per block.
            let (two, one) = unsafe {
                (
                    q4k_avx2::<2>(group, ys, pairs, true),
                    q4k_avx2::<1>(group, [ys[0]], [pairs[0]], true),
                )
            };
            for c in 0..16 {
                let r = 16 * g + c;
                let wrow = &w[r * row_bytes..(r + 1) * row_bytes];
                for t in 0..2 {
                    let want = dot_q4_k_scalar(wrow, ys[t], pairs[t]);
                    assert_eq!(
                        two[t][c].to_bits(),
                        want.to_bits(),
                        "Q4_K row {r} token {t} {pairs:?}"
                    );
                }
                assert_eq!(
                    one[0][c].to_bits(),
                    two[0][c].to_bits(),
                    "Q4_K row {r} alone"
                );
            }
            let ys4 = [ys[0], ys[1], ys[1], ys[0]];
            let pairs4 = [pairs[0], pairs[1], pairs[0], pairs[1]];
            // SAFETY: as above.
            let four = unsafe { q4k_avx2::<4>(group, ys4, pairs4, false) };
            for (j, (out, (y, p))) in four.iter().zip(ys4.iter().zip(pairs4)).enumerate() {
                for (c, v) in out.iter().enumerate() {
                    let r = 16 * g + c;
                    let want = dot_q4_k_scalar(&w[r * row_bytes..(r + 1) * row_bytes], y, p);
                    assert_eq!(v.to_bits(), want.to_bits(), "Q4_K row {r}, {j} of 4");
                }
            }
        }
    }

    let w = quantized(GgmlDType::Q6K, 43);
    let tiles = q6k_tiles::Q6KTiles::new(&w, n, k);
    check_q6k_tiles(false, &tiles.tiles, &w, ys, (n, kb));
    if q4k_tiles::available() {
        check_q6k_tiles(true, &tiles.tiles, &w, ys, (n, kb));
    } else {
        mlxr_testkit::skip_note("no AVX-512 VNNI here: its Q6_K tile kernels were not run");
    }
    let w = quantized(GgmlDType::Q5K, 47);
    let tiles = q5k_tiles::Q5KTiles::new(&w, n, k);
    let row_bytes = kb * q5k_tiles::Q5_K_BYTES;
    for g in 0..n / 16 {
        let group = &tiles.tiles[g * kb..(g + 1) * kb];
        let ys4 = [ys[0], ys[1], ys[1], ys[0]];
        for tiled in [false, true] {
            // SAFETY: the features were checked; one tile per block.
            let (two, one, four) = unsafe {
                if tiled {
                    (
                        q5k_avx2::<2, true>(group, ys),
                        q5k_avx2::<1, true>(group, [ys[1]]),
                        q5k_avx2::<4, true>(group, ys4),
                    )
                } else {
                    (
                        q5k_avx2::<2, false>(group, ys),
                        q5k_avx2::<1, false>(group, [ys[1]]),
                        q5k_avx2::<4, false>(group, ys4),
                    )
                }
            };
            for c in 0..16 {
                let r = 16 * g + c;
                let wrow = &w[r * row_bytes..(r + 1) * row_bytes];
                for t in 0..2 {
                    let want = dot_q5_k_scalar(wrow, ys[t], tiled);
                    assert_eq!(
                        two[t][c].to_bits(),
                        want.to_bits(),
                        "Q5_K row {r} token {t} tiled {tiled}"
                    );
                }
                assert_eq!(
                    one[0][c].to_bits(),
                    two[1][c].to_bits(),
                    "Q5_K row {r} alone"
                );
                for (j, y) in ys4.iter().enumerate() {
                    let want = dot_q5_k_scalar(wrow, y, tiled);
                    assert_eq!(
                        four[j][c].to_bits(),
                        want.to_bits(),
                        "Q5_K row {r}, {j} of 4, tiled {tiled}"
                    );
                }
            }
        }
    }
}

/// The Q6_K tile kernels of AVX-512 VNNI (`avx512`) or AVX2 against
/// [`super::kquants::dot_q6_k_scalar`], bit for bit, in both orders: one
/// token, two, four and eight sharing each line.
#[cfg(target_arch = "x86_64")]
fn check_q6k_tiles(
    avx512: bool,
    tiles: &[q6k_tiles::Tile6],
    w: &[u8],
    ys: [&[super::q8k::BlockQ8K]; 2],
    (n, kb): (usize, usize),
) {
    use super::kquants::dot_q6_k_scalar;
    fn run<const T: usize>(
        how: (bool, bool),
        group: &[q6k_tiles::Tile6],
        ys: [&[super::q8k::BlockQ8K]; T],
    ) -> [[f32; 16]; T] {
        // SAFETY: the caller checked the features; one tile per block.
        unsafe { q6k_tiles::x86::pass::<T>(how, group, ys, true) }
    }
    let isa = if avx512 { "AVX-512" } else { "AVX2" };
    let row_bytes = kb * kquants::Q6_K_BYTES;
    let ys4 = [ys[0], ys[1], ys[1], ys[0]];
    let ys8 = [ys[0], ys[1], ys[1], ys[0], ys[1], ys[0], ys[0], ys[1]];
    for g in 0..n / 16 {
        let group = &tiles[g * kb..(g + 1) * kb];
        for tiled in [false, true] {
            let how = (tiled, avx512);
            let one = run::<1>(how, group, [ys[1]]);
            let two = run::<2>(how, group, ys);
            let four = run::<4>(how, group, ys4);
            let eight = run::<8>(how, group, ys8);
            let all = (one.iter().zip([ys[1]]))
                .chain(two.iter().zip(ys))
                .chain(four.iter().zip(ys4))
                .chain(eight.iter().zip(ys8));
            for (j, (out, y)) in all.enumerate() {
                for (c, v) in out.iter().enumerate() {
                    let r = 16 * g + c;
                    let want = dot_q6_k_scalar(&w[r * row_bytes..(r + 1) * row_bytes], y, tiled);
                    assert_eq!(
                        v.to_bits(),
                        want.to_bits(),
                        "Q6_K {isa} row {r}, token {j} of 1 + 2 + 4 + 8, tiled {tiled}"
                    );
                }
            }
        }
    }
}
