//! Operand element types and their conversion to the compute type while packing: `float32`
//! and `float64` as they are, `float16` widened to `float32` (exactly; with F16C when the CPU
//! has it).

#[cfg(target_arch = "x86_64")]
use std::sync::OnceLock;

use super::Element;

/// An element type of a GEMM operand, converted to compute type `T` when packed.
pub trait Operand<T: Element>: Copy + Send + Sync + 'static {
    /// A tag for the packed-operand cache's keys.
    const TAG: u8;

    /// Whether the element is `T` itself (no conversion: it may be read in place).
    const IDENTITY: bool;

    /// `n` contiguous elements at `src` converted into `dst`.
    ///
    /// # Safety
    ///
    /// `src` and `dst` are valid for `n` elements and do not overlap.
    unsafe fn convert(src: *const Self, dst: *mut T, n: usize);

    /// One element converted.
    fn widen(self) -> T;

    /// `N` contiguous elements at `src` converted into `dst` (a panel row of a microkernel's
    /// width, packed once per row of every panel).
    ///
    /// # Safety
    ///
    /// As [`Operand::convert`] for `N` elements.
    #[inline(always)]
    unsafe fn convert_row<const N: usize>(src: *const Self, dst: *mut T) {
        // SAFETY: forwarded.
        unsafe { Self::convert(src, dst, N) }
    }

    /// The rows of a panel `nr` wide from `width` columns of `depth` contiguous elements
    /// each (column `j` at `src + j·ld`): element `p` of column `j` to `dst[p·nr + j]`, for
    /// `j < width`; the other lanes of the panel are not written.
    ///
    /// # Safety
    ///
    /// The columns are valid for `depth` elements, `dst` for `depth` rows of `nr`, and
    /// `width <= nr`.
    #[inline(always)]
    unsafe fn transpose_into(
        src: *const Self,
        ld: isize,
        depth: usize,
        width: usize,
        nr: usize,
        dst: *mut T,
    ) {
        for j in 0..width {
            // SAFETY: column `j` is valid for `depth` elements (by the contract).
            let column = unsafe { src.offset(j as isize * ld) };
            for p in 0..depth {
                // SAFETY: as above; `(p, j)` is inside `dst`.
                unsafe { *dst.add(p * nr + j) = (*column.add(p)).widen() };
            }
        }
    }
}

/// `N` elements copied as one value of constant size, which the compiler expands into vector
/// moves (a `memcpy` call per panel row costs about as much as the copy).
///
/// # Safety
///
/// `src` and `dst` are valid for `N` elements and do not overlap.
#[inline(always)]
pub(crate) unsafe fn copy_row<T: Copy, const N: usize>(src: *const T, dst: *mut T) {
    // SAFETY: by the contract (unaligned accesses).
    unsafe {
        dst.cast::<[T; N]>()
            .write_unaligned(src.cast::<[T; N]>().read_unaligned())
    }
}

impl Operand<f32> for f32 {
    const TAG: u8 = 0;
    const IDENTITY: bool = true;

    unsafe fn convert(src: *const f32, dst: *mut f32, n: usize) {
        // SAFETY: by the contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
    }

    fn widen(self) -> f32 {
        self
    }

    #[inline(always)]
    unsafe fn convert_row<const N: usize>(src: *const f32, dst: *mut f32) {
        // SAFETY: by the contract.
        unsafe { copy_row::<f32, N>(src, dst) }
    }

    /// A tile of eight columns at a time ([`crate::transpose`]).
    unsafe fn transpose_into(
        src: *const f32,
        ld: isize,
        depth: usize,
        width: usize,
        nr: usize,
        dst: *mut f32,
    ) {
        // SAFETY: by the contract: the `width × depth` block of columns is the source, the
        // `depth` rows of `dst` the destination (`width <= nr` lanes of each).
        unsafe {
            crate::transpose::transpose_u32(src.cast(), ld, dst.cast(), nr as isize, width, depth)
        }
    }
}

impl Operand<f64> for f64 {
    const TAG: u8 = 1;
    const IDENTITY: bool = true;

    unsafe fn convert(src: *const f64, dst: *mut f64, n: usize) {
        // SAFETY: by the contract.
        unsafe { std::ptr::copy_nonoverlapping(src, dst, n) }
    }

    fn widen(self) -> f64 {
        self
    }

    #[inline(always)]
    unsafe fn convert_row<const N: usize>(src: *const f64, dst: *mut f64) {
        // SAFETY: by the contract.
        unsafe { copy_row::<f64, N>(src, dst) }
    }
}

/// A `float16` element (its IEEE binary16 bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(transparent)]
pub struct F16(pub u16);

impl Operand<f32> for F16 {
    const TAG: u8 = 2;
    const IDENTITY: bool = false;

    unsafe fn convert(src: *const F16, dst: *mut f32, n: usize) {
        #[cfg(target_arch = "x86_64")]
        if has_f16c() {
            // SAFETY: the CPU has F16C and AVX; forwarded.
            unsafe { convert_f16c(src, dst, n) };
            return;
        }
        for i in 0..n {
            // SAFETY: `i < n`.
            unsafe { *dst.add(i) = (*src.add(i)).widen() };
        }
    }

    fn widen(self) -> f32 {
        relay_runtime::half::f16_bits_to_f32(self.0)
    }
}

/// `n` contiguous `float32` values rounded to `float16` bits (to nearest, ties to even, as
/// `relay_runtime::half::f32_to_f16_bits`), with F16C when the CPU has it.
///
/// # Safety
///
/// `src` and `dst` are valid for `n` elements.
pub unsafe fn narrow(src: *const f32, dst: *mut u16, n: usize) {
    #[cfg(target_arch = "x86_64")]
    if has_f16c() {
        // SAFETY: the CPU has F16C and AVX; forwarded.
        unsafe { narrow_f16c(src, dst, n) };
        return;
    }
    for i in 0..n {
        // SAFETY: `i < n`.
        unsafe { *dst.add(i) = relay_runtime::half::f32_to_f16_bits(*src.add(i)) };
    }
}

/// `float32` to `float16` with F16C, eight at a time, rounding to nearest even.
///
/// # Safety
///
/// The CPU has F16C and AVX; `src` and `dst` are valid for `n` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c,avx")]
unsafe fn narrow_f16c(src: *const f32, dst: *mut u16, n: usize) {
    use std::arch::x86_64::*;
    let whole = n / 8 * 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: elements `i..i + 8` are inside both (unaligned accesses).
        unsafe {
            let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(_mm256_loadu_ps(src.add(i)));
            _mm_storeu_si128(dst.add(i).cast(), h);
        }
    }
    for i in whole..n {
        // SAFETY: `i < n`.
        unsafe { *dst.add(i) = relay_runtime::half::f32_to_f16_bits(*src.add(i)) };
    }
}

/// Whether the CPU converts half precision in hardware (F16C, with AVX), detected once.
#[cfg(target_arch = "x86_64")]
pub(super) fn has_f16c() -> bool {
    static F16C: OnceLock<bool> = OnceLock::new();
    *F16C.get_or_init(|| {
        std::is_x86_feature_detected!("f16c") && std::is_x86_feature_detected!("avx")
    })
}

/// `float16` to `float32` with F16C, eight at a time (exact, as the scalar rule).
///
/// # Safety
///
/// The CPU has F16C and AVX; `src` and `dst` are valid for `n` elements.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "f16c,avx")]
unsafe fn convert_f16c(src: *const F16, dst: *mut f32, n: usize) {
    use std::arch::x86_64::*;
    let whole = n / 8 * 8;
    for i in (0..whole).step_by(8) {
        // SAFETY: elements `i..i + 8` are inside both (unaligned accesses).
        unsafe {
            let h = _mm_loadu_si128(src.add(i).cast());
            _mm256_storeu_ps(dst.add(i), _mm256_cvtph_ps(h));
        }
    }
    for i in whole..n {
        // SAFETY: `i < n`.
        unsafe { *dst.add(i) = (*src.add(i)).widen() };
    }
}
