//! Dot products: the rows of a matrix-vector product, which the GEMM computes without packing
//! (packing would cost as much as the product itself). One per element type and instruction
//! set, chosen through [`Ops`](crate::Ops).

use super::Element;
use crate::isa::Isa;

/// A dot product `sum_l x[l] * y[l]` over `n` contiguous elements.
///
/// # Safety
///
/// `x` and `y` are valid for `n` elements, and the CPU runs the instruction set the function
/// was chosen for.
pub type DotFn<T> = unsafe fn(x: *const T, y: *const T, n: usize) -> T;

/// The `float32` dot product of `isa` (the portable one if the CPU lacks it).
pub fn sdot_for(isa: Isa) -> DotFn<f32> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F (checked); the pointers are the caller's contract.
        Isa::Avx512 if Isa::detected() == Isa::Avx512 => {
            |x, y, n| unsafe { dot_f32_avx512(x, y, n) }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA (checked); the pointers are the caller's contract.
        Isa::Avx2 if Isa::detected() != Isa::Portable => |x, y, n| unsafe { dot_f32_avx2(x, y, n) },
        _ => dot_scalar::<f32>,
    }
}

/// The `float64` dot product of `isa`: the portable one, which the compiler vectorizes with
/// the baseline instruction set, for every ISA.
pub fn ddot_for(_isa: Isa) -> DotFn<f64> {
    dot_scalar::<f64>
}

/// A dot product with eight independent partial sums (which the compiler vectorizes).
///
/// # Safety
///
/// `x` and `y` are valid for `n` elements.
pub unsafe fn dot_scalar<T>(x: *const T, y: *const T, n: usize) -> T
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

/// A `float32` dot product with AVX2 and FMA: four 8-lane accumulators.
///
/// # Safety
///
/// The CPU has AVX2 and FMA; `x` and `y` are valid for `n` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn dot_f32_avx2(x: *const f32, y: *const f32, n: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm256_setzero_ps(); 4];
    let whole = n / 32 * 32;
    let mut i = 0;
    while i < whole {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: `i + 8 * j + 8 <= n`; unaligned loads.
            unsafe {
                let xv = _mm256_loadu_ps(x.add(i + 8 * j));
                let yv = _mm256_loadu_ps(y.add(i + 8 * j));
                *a = _mm256_fmadd_ps(xv, yv, *a);
            }
        }
        i += 32;
    }
    let sum = _mm256_add_ps(_mm256_add_ps(acc[0], acc[1]), _mm256_add_ps(acc[2], acc[3]));
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` holds 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), sum) };
    let mut total: f32 = lanes.iter().sum();
    for l in whole..n {
        // SAFETY: `l < n`.
        total += unsafe { *x.add(l) * *y.add(l) };
    }
    total
}

/// `x · y` over `n` floats with AVX-512: four 16-lane accumulators, then a masked tail (so
/// every length is one vector pass).
///
/// # Safety
///
/// The CPU has AVX-512F; `x` and `y` are valid for `n` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dot_f32_avx512(x: *const f32, y: *const f32, n: usize) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_setzero_ps(); 4];
    let whole = n / 64 * 64;
    let mut i = 0;
    while i < whole {
        for (j, a) in acc.iter_mut().enumerate() {
            // SAFETY: `i + 16 * j + 16 <= n`; unaligned loads.
            unsafe {
                let xv = _mm512_loadu_ps(x.add(i + 16 * j));
                let yv = _mm512_loadu_ps(y.add(i + 16 * j));
                *a = _mm512_fmadd_ps(xv, yv, *a);
            }
        }
        i += 64;
    }
    while i < n {
        let left = (n - i).min(16);
        // A mask of the `left` lanes still inside the vectors (1 to 16).
        let mask: __mmask16 = if left == 16 {
            0xffff
        } else {
            (1u16 << left) - 1
        };
        // SAFETY: masked loads read only lanes `i..i + left`, all below `n`.
        unsafe {
            let xv = _mm512_maskz_loadu_ps(mask, x.add(i));
            let yv = _mm512_maskz_loadu_ps(mask, y.add(i));
            acc[0] = _mm512_fmadd_ps(xv, yv, acc[0]);
        }
        i += left;
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dot_product_path_agrees_on_every_length() {
        for isa in Isa::available() {
            let (sdot, ddot) = (sdot_for(isa), ddot_for(isa));
            for n in 0..300usize {
                let x: Vec<f32> = (0..n).map(|i| ((i * 7) % 11) as f32 - 5.0).collect();
                let y: Vec<f32> = (0..n).map(|i| ((i * 3) % 13) as f32 * 0.25).collect();
                // Small integers and quarters: every path's sum is exact.
                let want: f32 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
                // SAFETY: both vectors hold `n` elements; the CPU runs `isa`.
                let got = unsafe { sdot(x.as_ptr(), y.as_ptr(), n) };
                assert_eq!(got, want, "{isa}, n = {n}");
                let (x, y): (Vec<f64>, Vec<f64>) = (
                    x.iter().map(|&v| v.into()).collect(),
                    y.iter().map(|&v| v.into()).collect(),
                );
                // SAFETY: as above.
                let got = unsafe { ddot(x.as_ptr(), y.as_ptr(), n) };
                assert_eq!(got, f64::from(want), "{isa} float64, n = {n}");
            }
        }
    }
}
