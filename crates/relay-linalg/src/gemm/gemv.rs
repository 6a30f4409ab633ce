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
//! 3072 × 768 weight 10.2, 11.8, 22.1). A few vectors at once (the rows of a product with at
//! most [`VECTORS`] rows: a step over the beams of a beam search) share each load of the
//! matrix: GPT-2's head at four beams took 17.9 ms through the GEMM's packed panels and takes
//! 9.0 ms here (AVX2, one thread). One per element type and instruction set, chosen through
//! [`Ops`](crate::Ops).

use super::Element;
use crate::isa::Isa;

/// `y[v · ldy + j · incy] = Σ_l x[v · ldx + l] · rows[j · ld + l]` for each of the `m`
/// vectors `v` and `j < n`.
///
/// # Safety
///
/// As [`Gemv`] says; the CPU runs the instruction set the function was chosen for.
pub type GemvFn<T> = unsafe fn(p: Gemv<T>);

/// The operands of a matrix-vector product (see [`GemvFn`]): each of the `m` vectors is valid
/// for `k` elements from `x + v · ldx`, each of the `n` rows for `k` from `rows + j · ld`, and
/// `y` for writes at `v · ldy + j · incy`, overlapping neither. A few vectors at once are the
/// rows of a product with a few rows (a decoder's step over the beams of a beam search): the
/// matrix is read once for all of them.
#[derive(Clone, Copy, Debug)]
pub struct Gemv<T> {
    /// Vectors (at least 1).
    pub m: usize,
    /// Elements from one vector to the next.
    pub ldx: usize,
    /// Elements from one vector's results to the next's.
    pub ldy: usize,
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

impl<T> Gemv<T> {
    /// The product's rows `j0..j1` and their results (`j0 <= j1 <= n`): a thread's share.
    pub fn rows_in(self, j0: usize, j1: usize) -> Gemv<T> {
        Gemv {
            n: j1 - j0,
            rows: self.rows.wrapping_add(j0 * self.ld),
            y: self.y.wrapping_add(j0 * self.incy),
            ..self
        }
    }
}

// SAFETY: the operands are only read (`x`, `rows`) or written at rows no other thread's share
// has (`y`, split by `rows_in`); the caller keeps the memory alive for the call.
unsafe impl<T> Send for Gemv<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Gemv<T> {}

/// Rows read side by side, one from each band.
pub const ROWS: usize = 4;

/// The most vectors computed together: more are taken [`VECTORS`] at a time, each group
/// reading the matrix again.
pub const VECTORS: usize = 4;

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
    for v in 0..p.m {
        for j in 0..p.n {
            // SAFETY: vector `v`, row `j` and `y[v, j]` are in the operands (the contract).
            unsafe {
                let row = p.rows.add(j * p.ld);
                *p.y.add(v * p.ldy + j * p.incy) = dot(p.x.add(v * p.ldx), row, p.k);
            }
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

/// The `float32` product with AVX2 and FMA: one vector by [`one_vector_avx2`], several
/// [`VECTORS`] at a time by [`vectors_avx2`].
///
/// # Safety
///
/// The CPU has AVX2 and FMA; as [`GemvFn`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn gemv_f32_avx2(p: Gemv<f32>) {
    if p.m == 1 {
        // SAFETY: forwarded.
        return unsafe { one_vector_avx2(p) };
    }
    for v0 in (0..p.m).step_by(VECTORS) {
        let q = Gemv {
            m: VECTORS.min(p.m - v0),
            x: p.x.wrapping_add(v0 * p.ldx),
            y: p.y.wrapping_add(v0 * p.ldy),
            ..p
        };
        // SAFETY: vectors `v0..v0 + q.m` and their results are in the operands.
        unsafe {
            match q.m {
                1 => one_vector_avx2(q),
                2 => vectors_avx2::<4, 2>(q),
                3 => vectors_avx2::<4, 3>(q),
                _ => vectors_avx2::<4, 4>(q),
            }
        }
    }
}

/// One vector (`p.m == 1`) with AVX2: a row of each band at a time, then the rows after the
/// bands one at a time.
///
/// # Safety
///
/// The CPU has AVX2 and FMA; as [`GemvFn`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn one_vector_avx2(p: Gemv<f32>) {
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

/// `V` vectors (`p.m == V`) with AVX2: the rows split into `R` bands, a row of each band at
/// a time against every vector, one 8-lane partial sum per row and vector, then the rows after the bands one at a time.
///
/// # Safety
///
/// The CPU has AVX2 and FMA; as [`GemvFn`], with `p.m == V`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn vectors_avx2<const R: usize, const V: usize>(p: Gemv<f32>) {
    let band = p.n / R;
    for j in 0..band {
        // SAFETY: row `j` of each band is in the operands.
        unsafe { rows_vectors_avx2::<R, V>(&p, j, band) };
    }
    for j in band * R..p.n {
        // SAFETY: row `j` is in the operands.
        unsafe { rows_vectors_avx2::<1, V>(&p, j, 0) };
    }
}

/// Rows `j + r · band` (`r < R`) of the product against `V` vectors with AVX2: one 8-lane
/// partial sum per row and vector over 8 elements a step, then the scalar rest.
///
/// # Safety
///
/// The CPU has AVX2 and FMA; the rows and `V` vectors are in the operands ([`GemvFn`]).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_vectors_avx2<const R: usize, const V: usize>(p: &Gemv<f32>, j: usize, band: usize) {
    use std::arch::x86_64::*;
    let at = |r: usize| j + r * band;
    let row = |r: usize| p.rows.wrapping_add(at(r) * p.ld);
    let vector = |v: usize| p.x.wrapping_add(v * p.ldx);
    let mut acc = [[_mm256_setzero_ps(); V]; R];
    let mut l = 0;
    while l + 8 <= p.k {
        // SAFETY: elements `l..l + 8` of each vector and row (`l + 8 <= k`).
        unsafe {
            let mut xs = [_mm256_setzero_ps(); V];
            for (v, x) in xs.iter_mut().enumerate() {
                *x = _mm256_loadu_ps(vector(v).add(l));
            }
            for (r, acc) in acc.iter_mut().enumerate() {
                let w = _mm256_loadu_ps(row(r).add(l));
                for (a, &x) in acc.iter_mut().zip(&xs) {
                    *a = _mm256_fmadd_ps(x, w, *a);
                }
            }
        }
        l += 8;
    }
    for (r, acc) in acc.iter().enumerate() {
        for (v, &a) in acc.iter().enumerate() {
            let mut sum = horizontal_sum_avx(a);
            for i in l..p.k {
                // SAFETY: `i < k`.
                sum += unsafe { *vector(v).add(i) * *row(r).add(i) };
            }
            // SAFETY: `y[v, at(r)]` is in the operands.
            unsafe { *p.y.add(v * p.ldy + at(r) * p.incy) = sum };
        }
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

/// The `float32` product with AVX-512: one vector a row of each band at a time, then the rows
/// after the bands one at a time; several by the AVX2 kernels.
///
/// # Safety
///
/// The CPU has AVX-512F; as [`GemvFn`].
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn gemv_f32_avx512(p: Gemv<f32>) {
    if p.m != 1 {
        // Several vectors: the AVX2 kernels, whose registers hold a partial sum per row and
        // vector (an AVX-512 CPU has AVX2 and FMA).
        // SAFETY: forwarded.
        return unsafe { gemv_f32_avx2(p) };
    }
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

    /// `p`'s operands as `T`: `m` vectors `k + 1` apart, `n` rows `k + 3` apart (further
    /// apart than they are long), results `2n + 1` apart and every other one.
    fn check<T>(gemv: GemvFn<T>, (m, n, k): (usize, usize, usize), what: &str)
    where
        T: Copy + From<i8> + std::fmt::Debug + PartialEq + std::ops::Add<Output = T>,
        T: std::ops::Mul<Output = T> + std::iter::Sum,
    {
        let (ldx, ld, ldy) = (k + 1, k + 3, 2 * n + 1);
        let x: Vec<T> = (0..m * ldx)
            .map(|i| T::from(((i * 7) % 11) as i8 - 5))
            .collect();
        let rows: Vec<T> = (0..n * ld)
            .map(|i| T::from(((i * 3) % 13) as i8 - 6))
            .collect();
        // Small integers: every path's sum is exact.
        let want: Vec<T> = (0..m)
            .flat_map(|v| (0..n).map(move |j| (v, j)))
            .map(|(v, j)| (0..k).map(|l| x[v * ldx + l] * rows[j * ld + l]).sum())
            .collect();
        let mut y = vec![T::from(-99); m * ldy];
        let p = Gemv {
            m,
            ldx,
            ldy,
            n,
            k,
            x: x.as_ptr(),
            rows: rows.as_ptr(),
            ld,
            y: y.as_mut_ptr(),
            incy: 2,
        };
        // SAFETY: the operands hold what `p` addresses; the CPU runs the function's ISA.
        unsafe { gemv(p) };
        let got: Vec<T> = (0..m)
            .flat_map(|v| (0..n).map(move |j| v * ldy + 2 * j))
            .map(|i| y[i])
            .collect();
        assert_eq!(got, want, "{what}, m = {m}, n = {n}, k = {k}");
    }

    /// Every path, against the sum of products, for one to nine vectors (two groups and
    /// part of a third), every row count up to two rows per band and some after the bands,
    /// and every length across the vector steps.
    #[test]
    fn every_path_agrees_on_every_shape() {
        for isa in Isa::available() {
            let (sgemv, dgemv) = (sgemv_for(isa), dgemv_for(isa));
            for m in 1..=2 * VECTORS + 1 {
                for n in 0..=3 * ROWS + 1 {
                    for k in (0..80usize).step_by(if m == 1 { 1 } else { 3 }) {
                        check::<f32>(sgemv, (m, n, k), isa.name());
                        check::<f64>(dgemv, (m, n, k), "float64");
                    }
                }
            }
        }
    }
}
