//! Matrix-vector products over contiguous rows: `y[j] = x · row j`. These are the products
//! `c = a · b` with one row of `a` and contiguous columns of `b` (a dense layer at one token:
//! each step of a decoder) or one column of `b` and contiguous rows of `a`, which the GEMM
//! computes without packing (packing would cost as much as the product itself).
//!
//! Such a product reads its matrix once and is bound by memory bandwidth: a decoder's step
//! reads every weight of the model. The kernels split the rows into [`ROWS`] bands and read
//! a row of each band side by side, sharing each vector of `x`: four long sequential streams
//! of cache misses in flight, which the hardware prefetchers follow from row to row of a
//! band. One row at a time keeps one stream busy, and adjacent rows side by side make short
//! streams that restart at every block (AVX2, Zen 3, one thread, from memory, GB/s: GPT-2's
//! 50257 × 768 head 12.0 one row at a time, 12.5 adjacent rows, 19.0 in bands; a
//! 3072 × 768 weight 10.2, 11.8, 22.1). One per element type and instruction set, chosen
//! through [`Ops`](crate::Ops).

use super::Element;
use crate::isa::Isa;

/// `y[j · incy] = Σ_l x[l] · rows[j · ld + l]` for `j < n`.
///
/// # Safety
///
/// As [`Gemv`] says; the CPU runs the instruction set the function was chosen for.
pub type GemvFn<T> = unsafe fn(p: Gemv<T>);

/// The operands of a matrix-vector product (see [`GemvFn`]): `x` is valid for `k` elements,
/// each of the `n` rows for `k` from `rows + j · ld`, and `y` for writes at `j · incy`,
/// overlapping neither.
#[derive(Clone, Copy, Debug)]
pub struct Gemv<T> {
    /// Rows (elements of `y`).
    pub n: usize,
    /// The length of `x` and of each row.
    pub k: usize,
    /// The vector.
    pub x: *const T,
    /// The first row.
    pub rows: *const T,
    /// Elements from one row to the next.
    pub ld: usize,
    /// The result.
    pub y: *mut T,
    /// Elements from one result to the next.
    pub incy: usize,
}

/// Rows read side by side, one from each band.
pub const ROWS: usize = 4;

/// The `float32` product of `isa` (the portable one if the CPU lacks it).
pub fn sgemv_for(isa: Isa) -> GemvFn<f32> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F (checked); the views are the caller's contract.
        Isa::Avx512 if Isa::detected() == Isa::Avx512 => |p| unsafe { gemv_f32_avx512(p) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA (checked); the views are the caller's contract.
        Isa::Avx2 if Isa::detected() != Isa::Portable => |p| unsafe { gemv_f32_avx2(p) },
        _ => gemv_portable::<f32>,
    }
}

/// The `float64` product of `isa`: the portable one, which the compiler vectorizes with the
/// baseline instruction set, for every ISA.
pub fn dgemv_for(_isa: Isa) -> GemvFn<f64> {
    gemv_portable::<f64>
}

/// A dot product per row, each with eight independent partial sums (which the compiler
/// vectorizes).
///
/// # Safety
///
/// As [`GemvFn`].
pub unsafe fn gemv_portable<T>(p: Gemv<T>)
where
    T: Element + std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    for j in 0..p.n {
        // SAFETY: row `j` and `y[j]` are in the operands (the contract).
        unsafe {
            let row = p.rows.add(j * p.ld);
            *p.y.add(j * p.incy) = dot(p.x, row, p.k);
        }
    }
}

/// `x · y` over `n` elements with eight partial sums.
///
/// # Safety
///
/// `x` and `y` are valid for `n` elements.
unsafe fn dot<T>(x: *const T, y: *const T, n: usize) -> T
where
    T: Element + std::ops::Add<Output = T> + std::ops::Mul<Output = T>,
{
    let mut acc = [T::ZERO; 8];
    let whole = n / 8 * 8;
    for i in (0..whole).step_by(8) {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: `i + j < n`.
            *a = *a + unsafe { *x.add(i + j) * *y.add(i + j) };
        }
    }
    let mut sum = acc.iter().fold(T::ZERO, |s, &a| s + a);
    for i in whole..n {
        // SAFETY: `i < n`.
        sum = sum + unsafe { *x.add(i) * *y.add(i) };
    }
    sum
}

/// The `float32` product with AVX2 and FMA: a row of each band at a time, then the rows
/// after the bands one at a time.
///
/// # Safety
///
/// The CPU has AVX2 and FMA; as [`GemvFn`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_f32_avx2(p: Gemv<f32>) {
    let band = p.n / ROWS;
    for j in 0..band {
        // SAFETY: row `j` of each band is in the operands.
        unsafe { rows_f32_avx2::<ROWS>(&p, j, band) };
    }
    for j in band * ROWS..p.n {
        // SAFETY: row `j` is in the operands.
        unsafe { rows_f32_avx2::<1>(&p, j, 0) };
    }
}

/// Rows `j + r · band` (`r < R`) of the product with AVX2: two 8-lane partial sums per row
/// over 16 elements a step, one over the next 8, then the scalar rest.
///
/// # Safety
///
/// The CPU has AVX2 and FMA; the rows are in the operands ([`GemvFn`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_f32_avx2<const R: usize>(p: &Gemv<f32>, j: usize, band: usize) {
    use std::arch::x86_64::*;
    let at = |r: usize| j + r * band;
    let row = |r: usize| p.rows.wrapping_add(at(r) * p.ld);
    let (mut lo, mut hi) = ([_mm256_setzero_ps(); R], [_mm256_setzero_ps(); R]);
    let mut l = 0;
    while l + 16 <= p.k {
        // SAFETY: elements `l..l + 16` of `x` and of each row (`l + 16 <= k`).
        unsafe {
            let (x0, x1) = (_mm256_loadu_ps(p.x.add(l)), _mm256_loadu_ps(p.x.add(l + 8)));
            for r in 0..R {
                lo[r] = _mm256_fmadd_ps(x0, _mm256_loadu_ps(row(r).add(l)), lo[r]);
                hi[r] = _mm256_fmadd_ps(x1, _mm256_loadu_ps(row(r).add(l + 8)), hi[r]);
            }
        }
        l += 16;
    }
    if l + 8 <= p.k {
        // SAFETY: elements `l..l + 8` (`l + 8 <= k`).
        unsafe {
            let x0 = _mm256_loadu_ps(p.x.add(l));
            for (r, lo) in lo.iter_mut().enumerate() {
                *lo = _mm256_fmadd_ps(x0, _mm256_loadu_ps(row(r).add(l)), *lo);
            }
        }
        l += 8;
    }
    for r in 0..R {
        let mut sum = horizontal_sum_avx(_mm256_add_ps(lo[r], hi[r]));
        for i in l..p.k {
            // SAFETY: `i < k`.
            sum += unsafe { *p.x.add(i) * *row(r).add(i) };
        }
        // SAFETY: `y[at(r)]` is in the operands.
        unsafe { *p.y.add(at(r) * p.incy) = sum };
    }
}

/// The sum of the eight lanes of `v`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn horizontal_sum_avx(v: std::arch::x86_64::__m256) -> f32 {
    use std::arch::x86_64::*;
    let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
    let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps::<1>(s, s)))
}

/// The `float32` product with AVX-512: a row of each band at a time, then the rows after the
/// bands one at a time.
///
/// # Safety
///
/// The CPU has AVX-512F; as [`GemvFn`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn gemv_f32_avx512(p: Gemv<f32>) {
    let band = p.n / ROWS;
    for j in 0..band {
        // SAFETY: row `j` of each band is in the operands.
        unsafe { rows_f32_avx512::<ROWS>(&p, j, band) };
    }
    for j in band * ROWS..p.n {
        // SAFETY: row `j` is in the operands.
        unsafe { rows_f32_avx512::<1>(&p, j, 0) };
    }
}

/// Rows `j + r · band` (`r < R`) of the product with AVX-512: two 16-lane partial sums per
/// row over 32 elements a step, then masked steps of at most 16 (every length is one vector
/// pass).
///
/// # Safety
///
/// The CPU has AVX-512F; the rows are in the operands ([`GemvFn`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn rows_f32_avx512<const R: usize>(p: &Gemv<f32>, j: usize, band: usize) {
    use std::arch::x86_64::*;
    let at = |r: usize| j + r * band;
    let row = |r: usize| p.rows.wrapping_add(at(r) * p.ld);
    let (mut lo, mut hi) = ([_mm512_setzero_ps(); R], [_mm512_setzero_ps(); R]);
    let mut l = 0;
    while l + 32 <= p.k {
        // SAFETY: elements `l..l + 32` of `x` and of each row (`l + 32 <= k`).
        unsafe {
            let (x0, x1) = (
                _mm512_loadu_ps(p.x.add(l)),
                _mm512_loadu_ps(p.x.add(l + 16)),
            );
            for r in 0..R {
                lo[r] = _mm512_fmadd_ps(x0, _mm512_loadu_ps(row(r).add(l)), lo[r]);
                hi[r] = _mm512_fmadd_ps(x1, _mm512_loadu_ps(row(r).add(l + 16)), hi[r]);
            }
        }
        l += 32;
    }
    while l < p.k {
        let left = (p.k - l).min(16);
        // The `left` lanes still inside the rows (1 to 16).
        let mask: __mmask16 = if left == 16 {
            0xffff
        } else {
            (1u16 << left) - 1
        };
        // SAFETY: masked loads read only elements `l..l + left`, all below `k`.
        unsafe {
            let x0 = _mm512_maskz_loadu_ps(mask, p.x.add(l));
            for (r, lo) in lo.iter_mut().enumerate() {
                *lo = _mm512_fmadd_ps(x0, _mm512_maskz_loadu_ps(mask, row(r).add(l)), *lo);
            }
        }
        l += left;
    }
    for r in 0..R {
        // SAFETY: `y[at(r)]` is in the operands.
        unsafe { *p.y.add(at(r) * p.incy) = _mm512_reduce_add_ps(_mm512_add_ps(lo[r], hi[r])) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path, against the sum of products, for every row count up to two rows per band
    /// and some after the bands, and every length across the vector steps, with rows further apart than they
    /// are long and a strided result.
    #[test]
    fn every_path_agrees_on_every_shape() {
        for isa in Isa::available() {
            let (sgemv, dgemv) = (sgemv_for(isa), dgemv_for(isa));
            for n in 0..=3 * ROWS + 1 {
                for k in 0..80usize {
                    let ld = k + 3;
                    let x: Vec<f32> = (0..k).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
                    let m: Vec<f32> = (0..n * ld).map(|i| ((i * 3) % 13) as f32 * 0.25).collect();
                    // Small integers and quarters: every path's sum is exact.
                    let want: Vec<f32> = (0..n)
                        .map(|j| x.iter().zip(&m[j * ld..]).map(|(a, b)| a * b).sum())
                        .collect();
                    let mut y = vec![f32::NAN; 2 * n];
                    let p = Gemv {
                        n,
                        k,
                        x: x.as_ptr(),
                        rows: m.as_ptr(),
                        ld,
                        y: y.as_mut_ptr(),
                        incy: 2,
                    };
                    // SAFETY: the operands hold what `p` addresses; the CPU runs `isa`.
                    unsafe { sgemv(p) };
                    let got: Vec<f32> = y.iter().step_by(2).copied().collect();
                    assert_eq!(got, want, "{isa}, n = {n}, k = {k}");
                    let (x, m): (Vec<f64>, Vec<f64>) = (
                        x.iter().map(|&v| v.into()).collect(),
                        m.iter().map(|&v| v.into()).collect(),
                    );
                    let mut y = vec![f64::NAN; 2 * n];
                    let p = Gemv {
                        n,
                        k,
                        x: x.as_ptr(),
                        rows: m.as_ptr(),
                        ld,
                        y: y.as_mut_ptr(),
                        incy: 2,
                    };
                    // SAFETY: as above.
                    unsafe { dgemv(p) };
                    let got: Vec<f64> = y.iter().step_by(2).copied().collect();
                    let want: Vec<f64> = want.iter().map(|&v| v.into()).collect();
                    assert_eq!(got, want, "{isa} float64, n = {n}, k = {k}");
                }
            }
        }
    }
}
