//! The contraction core against a naive product: every ISA this CPU runs, edge and real
//! sizes, transposed and strided operands, one and several threads, and packed constants.

use super::prepacked::PackedConstants;
use super::*;
use crate::KernelContext;

/// Small integers (exact in every summation order for the sizes tested).
fn values<T: From<i8>>(len: usize, seed: usize) -> Vec<T> {
    (0..len)
        .map(|i| T::from(((i * 7 + seed * 13) % 9) as i8 - 4))
        .collect()
}

/// A matrix `rows × cols` stored row-major (`transposed`: column-major) with `pad` extra
/// elements per line, as a view into `store`.
fn layout<T: Copy>(
    data: &[T],
    rows: usize,
    cols: usize,
    transposed: bool,
    pad: usize,
    store: &mut Vec<T>,
) -> (isize, isize) {
    let (lines, len) = if transposed {
        (cols, rows)
    } else {
        (rows, cols)
    };
    let ld = len + pad;
    store.clear();
    store.resize(lines * ld, data[0]);
    for i in 0..rows {
        for j in 0..cols {
            let (l, e) = if transposed { (j, i) } else { (i, j) };
            store[l * ld + e] = data[i * cols + j];
        }
    }
    if transposed {
        (1, ld as isize)
    } else {
        (ld as isize, 1)
    }
}

fn naive<T: Element>(m: usize, k: usize, n: usize, a: &[T], b: &[T]) -> Vec<T> {
    let mut c = vec![T::ZERO; m * n];
    for i in 0..m {
        for j in 0..n {
            c[i * n + j] = (0..k).fold(T::ZERO, |s, l| s + a[i * k + l] * b[l * n + j]);
        }
    }
    c
}

/// `c = a · b` through [`gemm`] with the given layouts; `c` written with row stride `n + 3`
/// (or column-major when `ct`).
#[allow(clippy::too_many_arguments)]
fn product<T: Element + Operand<T> + From<i8>>(
    ctx: &KernelContext,
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
    (at, bt, ct): (bool, bool, bool),
) -> Vec<T> {
    let (mut sa, mut sb) = (Vec::new(), Vec::new());
    let (rsa, csa) = layout(a, m, k, at, 1, &mut sa);
    let (rsb, csb) = layout(b, k, n, bt, 2, &mut sb);
    let nan = vec![T::from(99); m * n];
    let mut sc = Vec::new();
    let (rsc, csc) = layout(&nan, m, n, ct, 3, &mut sc);
    let view = |ptr: *const T, rows, cols, rs, cs| Matrix {
        ptr,
        rows,
        cols,
        rs,
        cs,
    };
    // SAFETY: the stores hold the views.
    let rc = unsafe {
        gemm(
            Some(ctx),
            view(sa.as_ptr(), m, k, rsa, csa),
            view(sb.as_ptr(), k, n, rsb, csb),
            view(sc.as_mut_ptr(), m, n, rsc, csc),
            None,
        )
    };
    assert_eq!(rc, 0);
    let mut c = Vec::with_capacity(m * n);
    for i in 0..m {
        for j in 0..n {
            c.push(sc[(i as isize * rsc + j as isize * csc) as usize]);
        }
    }
    c
}

/// The layouts (`a`, `b`, `c` transposed) every shape is tried in.
const LAYOUTS: [(bool, bool, bool); 3] = [
    (false, false, false),
    (true, true, false),
    (false, true, true),
];

fn check_shapes<T: Element + Operand<T> + From<i8>>(
    shapes: &[(usize, usize, usize)],
    threads: &[usize],
    layouts: &[(bool, bool, bool)],
) {
    for isa in Isa::available() {
        let kern = T::kernel(isa);
        for &t in threads {
            let ctx = on(isa, t);
            for &(m, k, n) in shapes {
                let (a, b) = (values::<T>(m * k, 1), values::<T>(k * n, 2));
                let want = naive(m, k, n, &a, &b);
                for &layouts in layouts {
                    let got = product(&ctx, (m, k, n), &a, &b, layouts);
                    assert!(
                        got == want,
                        "{m}x{k}x{n} {layouts:?} on {t} threads, {isa:?} ({}x{})",
                        kern.mr,
                        kern.nr
                    );
                }
            }
        }
    }
}

/// Sizes around every tile and block edge of every kernel.
fn edge_shapes() -> Vec<(usize, usize, usize)> {
    let mut shapes = vec![(1, 1, 1), (2, 3, 1), (1, 5, 2)];
    for (mr, nr) in [(12, 32), (6, 16), (4, 8), (12, 16), (6, 8)] {
        for (dm, dn) in [(-1i64, 1i64), (0, 0), (1, -1)] {
            let m = (mr as i64 + dm) as usize;
            let n = (nr as i64 + dn) as usize;
            shapes.push((m, 7, n));
            shapes.push((2 * m + 1, 3, 3 * n - 1));
        }
    }
    for k in [255, 256, 257, 513] {
        shapes.push((9, k, 33));
    }
    // Narrow results, computed transposed (`cᵀ = bᵀ · aᵀ`), with every row count of a tile.
    for (m, n) in [(100, 49), (70, 17), (40, 3), (25, 13), (13, 1), (127, 7)] {
        shapes.push((m, 9, n));
    }
    // Every row count of an edge tile, with whole and partial columns (one kernel per row
    // count on AVX2).
    for rows in 1..=12 {
        shapes.push((rows, 5, 32));
        shapes.push((12 + rows, 5, 16 + rows));
    }
    // `b`'s rows padded to exactly 32 and 16 elements (the row stride of a packed panel).
    shapes.push((13, 7, 30));
    shapes.push((13, 7, 14));
    shapes
}

#[test]
fn sgemm_matches_naive_at_edge_sizes() {
    check_shapes::<f32>(&edge_shapes(), &[1, 2], &LAYOUTS);
}

#[test]
fn dgemm_matches_naive_at_edge_sizes() {
    check_shapes::<f64>(&edge_shapes(), &[1, 2], &LAYOUTS);
}

#[test]
fn sgemm_matches_naive_at_real_sizes() {
    // Megabyte operands: the blocks of every loop (MC, KC, NC) and the thread split.
    check_shapes::<f32>(
        &[
            (130, 600, 1100),
            (300, 530, 70),
            (64, 576, 3136),
            (512, 700, 49),
            (49, 300, 3072),
        ],
        &[1, 3],
        &LAYOUTS[..2],
    );
}

#[test]
fn dgemm_matches_naive_at_real_sizes() {
    check_shapes::<f64>(&[(200, 520, 300)], &[2], &LAYOUTS[..1]);
}

/// A context on `isa` (one this CPU runs) with `threads` threads.
pub(crate) fn on(isa: Isa, threads: usize) -> KernelContext {
    KernelContext::with_threads(threads)
        .with_isa(isa)
        .expect("an available ISA")
}

/// The constants `w` as an executable would hand them to its calls.
fn constants<T: Send + Sync + 'static>(
    w: &std::sync::Arc<Vec<T>>,
) -> std::sync::Arc<PackedConstants> {
    let (start, bytes) = (w.as_ptr() as usize, w.len() * size_of::<T>());
    // SAFETY: `w` is kept alive by the table and never written.
    std::sync::Arc::new(unsafe { PackedConstants::new([(0, start, bytes)], w.clone()) })
}

#[test]
fn constants_are_packed_once_and_freed_with_their_table() {
    let (m, k, n) = (70, 300, 90);
    let a = values::<f32>(m * k, 3);
    let w = std::sync::Arc::new(values::<f32>(k * n, 4));
    let want = naive(m, k, n, &a, &w);
    let packed = constants(&w);
    for isa in Isa::available() {
        for threads in [1, 2] {
            let mut ctx = on(isa, threads);
            ctx.set_constants(Some(packed.clone()));
            for _ in 0..5 {
                // `w` as `b` (row-major): packed once per ISA, then read from the table.
                let got = product_in_place(&ctx, (m, k, n), &a, &w);
                assert_eq!(got, want);
            }
        }
    }
    let isas = Isa::available().len();
    assert_eq!(packed.packs(), isas as u64);
    assert_eq!(packed.len(), isas);
    assert!(
        packed.bytes() >= isas * k * n * 4,
        "{} bytes",
        packed.bytes()
    );
    // A non-constant operand with the same contents is never packed for keeps.
    let copy = w.to_vec();
    let mut ctx = KernelContext::with_threads(1);
    ctx.set_constants(Some(packed.clone()));
    assert_eq!(product_in_place(&ctx, (m, k, n), &a, &copy), want);
    assert_eq!(packed.packs(), isas as u64);
    // Without the table, nothing is kept: the same product packs per call.
    assert_eq!(
        product_in_place(&on(Isa::Portable, 1), (m, k, n), &a, &w),
        want
    );
    drop(ctx);
    assert_eq!(std::sync::Arc::strong_count(&packed), 1);
    assert_eq!(std::sync::Arc::strong_count(&w), 2);
    drop(packed);
    // The table held the weights alive; dropping it released them and its packed forms.
    assert_eq!(std::sync::Arc::strong_count(&w), 1);
}

#[test]
fn a_constant_left_operand_is_packed_once() {
    // A convolution's weights are the left operand (`m` = output channels).
    let (m, k, n) = (64, 576, 200);
    let w = std::sync::Arc::new(values::<f64>(m * k, 5));
    let x = values::<f64>(k * n, 6);
    let want = naive(m, k, n, &w, &x);
    let packed = constants(&w);
    let mut ctx = KernelContext::with_threads(2);
    ctx.set_constants(Some(packed.clone()));
    for _ in 0..3 {
        assert_eq!(product_in_place(&ctx, (m, k, n), &w, &x), want);
    }
    assert_eq!(packed.packs(), 1);
}

#[test]
fn two_tables_sharing_a_constant_pack_their_own_and_free_them_apart() {
    let (m, k, n) = (40, 256, 96);
    let a = values::<f32>(m * k, 7);
    let w = std::sync::Arc::new(values::<f32>(k * n, 8));
    let want = naive(m, k, n, &a, &w);
    let (first, second) = (constants(&w), constants(&w));
    let mut ctx = KernelContext::with_threads(1);
    for table in [&first, &second] {
        ctx.set_constants(Some(table.clone()));
        assert_eq!(product_in_place(&ctx, (m, k, n), &a, &w), want);
        assert_eq!(table.packs(), 1);
    }
    let bytes = second.bytes();
    ctx.set_constants(None);
    drop(first);
    // The second table keeps its packed form and reuses it.
    ctx.set_constants(Some(second.clone()));
    assert_eq!(product_in_place(&ctx, (m, k, n), &a, &w), want);
    assert_eq!((second.packs(), second.bytes()), (1, bytes));
}

/// `a · b` with both operands read where they are (row-major), so a registered one is found.
fn product_in_place<T: Element + Operand<T>>(
    ctx: &KernelContext,
    (m, k, n): (usize, usize, usize),
    a: &[T],
    b: &[T],
) -> Vec<T> {
    let mut c = vec![T::ZERO; m * n];
    let view = |ptr: *const T, rows, cols| Matrix {
        ptr,
        rows,
        cols,
        rs: cols as isize,
        cs: 1,
    };
    // SAFETY: the slices hold the row-major matrices.
    let rc = unsafe {
        gemm(
            Some(ctx),
            view(a.as_ptr(), m, k),
            view(b.as_ptr(), k, n),
            view(c.as_mut_ptr(), m, n),
            None,
        )
    };
    assert_eq!(rc, 0);
    c
}

#[test]
fn float16_operands_widen_exactly_on_every_path() {
    let bits: Vec<F16> = (0..=u16::MAX).map(F16).collect();
    let mut fast = vec![0f32; bits.len()];
    // SAFETY: both hold 65,536 elements.
    unsafe { <F16 as Operand<f32>>::convert(bits.as_ptr(), fast.as_mut_ptr(), bits.len()) };
    for (h, f) in bits.iter().zip(&fast) {
        let want = relay_runtime::half::f16_bits_to_f32(h.0);
        assert!(
            want.to_bits() == f.to_bits() || (want.is_nan() && f.is_nan()),
            "{:#06x}: {f} vs {want}",
            h.0
        );
    }
}

#[test]
fn float32_results_round_to_float16_as_the_scalar_rule() {
    // Every float16 value, the midpoints around it and their neighbours; overflow, subnormals.
    let mut xs: Vec<f32> = vec![
        0.0, -0.0, 65504.0, 65519.99, 65520.0, 1e-8, -3e-8, 6e-8, 1e30,
    ];
    for h in 0..=u16::MAX {
        let v = relay_runtime::half::f16_bits_to_f32(h);
        if v.is_finite() {
            let b = v.to_bits();
            xs.extend([v, f32::from_bits(b + 1), f32::from_bits(b.wrapping_sub(1))]);
            xs.extend([
                f32::from_bits(b + 0x1000),
                f32::from_bits(b + 0xfff),
                f32::from_bits(b + 0x1001),
            ]);
        }
    }
    let mut got = vec![0u16; xs.len()];
    // SAFETY: both hold `xs.len()` elements.
    unsafe { operand::narrow(xs.as_ptr(), got.as_mut_ptr(), xs.len()) };
    for (x, g) in xs.iter().zip(&got) {
        assert_eq!(*g, relay_runtime::half::f32_to_f16_bits(*x), "{x:e}");
    }
}

#[test]
fn float16_products_match_naive_on_every_isa() {
    use relay_runtime::half::{f16_bits_to_f32, f32_to_f16_bits};
    for isa in Isa::available() {
        for threads in [1, 2] {
            let ctx = on(isa, threads);
            for &(m, k, n) in &[(1, 1, 1), (9, 7, 33), (70, 300, 90), (64, 576, 700)] {
                // Small integers: every sum is exact in float32 (and the reference's float64).
                let a: Vec<F16> = values::<f32>(m * k, 7)
                    .iter()
                    .map(|&v| F16(f32_to_f16_bits(v)))
                    .collect();
                let b: Vec<F16> = values::<f32>(k * n, 8)
                    .iter()
                    .map(|&v| F16(f32_to_f16_bits(v)))
                    .collect();
                let mut c = vec![0f32; m * n];
                let view = |ptr: *const F16, rows, cols| Matrix {
                    ptr,
                    rows,
                    cols,
                    rs: cols as isize,
                    cs: 1,
                };
                // SAFETY: the vectors hold the row-major matrices.
                let rc = unsafe {
                    gemm(
                        Some(&ctx),
                        view(a.as_ptr(), m, k),
                        view(b.as_ptr(), k, n),
                        Matrix {
                            ptr: c.as_mut_ptr().cast_const(),
                            rows: m,
                            cols: n,
                            rs: n as isize,
                            cs: 1,
                        },
                        None,
                    )
                };
                assert_eq!(rc, 0);
                let wa: Vec<f32> = a.iter().map(|h| f16_bits_to_f32(h.0)).collect();
                let wb: Vec<f32> = b.iter().map(|h| f16_bits_to_f32(h.0)).collect();
                assert_eq!(c, naive(m, k, n, &wa, &wb), "{m}x{k}x{n} {isa:?} {threads}");
            }
        }
    }
}
