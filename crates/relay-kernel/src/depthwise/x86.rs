//! The interior columns of a depthwise row with AVX-512 (16 output columns a vector) and AVX2
//! (8). Stride 1 loads each tap's columns contiguously; stride 2 loads the `2·lanes - 1`
//! input columns a tap spans as two overlapping contiguous vectors (at `p` and `p + lanes -
//! 1`, so neither reads past the last column used) and gathers their even columns with one
//! two-source permute (AVX-512) or a shuffle and a lane permute (AVX2). Other strides run the
//! portable loop. A partial last vector uses masked loads and stores (which do not fault on
//! masked-off lanes).

use std::arch::x86_64::*;

use super::Row;

/// A 16-lane mask of the first `n` lanes (`n` clamped to 0..=16).
fn mask16(n: isize) -> __mmask16 {
    match n {
        ..=0 => 0,
        16.. => 0xffff,
        _ => (1u16 << n) - 1,
    }
}

/// The interior of `r` with AVX-512.
///
/// # Safety
///
/// As `Row::interior_portable`; the CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn row_avx512(r: &Row<'_>) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match r.stride {
            1 => interior_avx512::<1>(r),
            2 => interior_avx512::<2>(r),
            _ => r.interior_portable(r.x0),
        }
    }
}

/// The interior columns of `r` with stride `S` (1 or 2), 16 at a time.
///
/// # Safety
///
/// As [`row_avx512`].
#[target_feature(enable = "avx512f")]
unsafe fn interior_avx512<const S: usize>(r: &Row<'_>) {
    // Output lane i of a stride-2 vector: input column 2i, lane 2i of the vector at `p` for
    // i < 8, else lane 2i - 15 of the one at `p + 15` (index 16 + that in the permute).
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31);
    let mut ox = r.x0;
    while ox < r.x1 {
        let n = (r.x1 - ox).min(16);
        let mut acc = _mm512_setzero_ps();
        for &(row, w) in r.taps {
            for kx in 0..r.kw {
                let p = row.wrapping_add(ox * S + kx * r.dilation);
                // SAFETY: the masked lanes are the input columns this tap of output columns
                // `ox..ox + n` reads, all inside the row (interior columns); `kx < kw`.
                let v = unsafe {
                    if S == 1 {
                        _mm512_maskz_loadu_ps(mask16(n as isize), p)
                    } else {
                        let span = 2 * n as isize - 1;
                        let lo = _mm512_maskz_loadu_ps(mask16(span), p);
                        let hi = _mm512_maskz_loadu_ps(mask16(span - 15), p.wrapping_add(15));
                        _mm512_permutex2var_ps(lo, evens, hi)
                    }
                };
                // SAFETY: weight `kx` of the kernel row.
                let wv = _mm512_set1_ps(unsafe { *w.add(kx) });
                acc = _mm512_fmadd_ps(wv, v, acc);
            }
        }
        // SAFETY: output columns `ox..ox + n` are inside the row.
        unsafe { _mm512_mask_storeu_ps(r.out.add(ox), mask16(n as isize), acc) };
        ox += n;
    }
}

/// The interior of `r` with AVX2 and FMA.
///
/// # Safety
///
/// As `Row::interior_portable`; the CPU has AVX2 and FMA.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn row_avx2(r: &Row<'_>) {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match r.stride {
            1 => interior_avx2::<1>(r),
            2 => interior_avx2::<2>(r),
            _ => r.interior_portable(r.x0),
        }
    }
}

/// An 8-lane load mask of the first `n` lanes (`n` clamped to 0..=8).
#[target_feature(enable = "avx2")]
fn mask8(n: isize) -> __m256i {
    let n = n.clamp(0, 8) as i32;
    _mm256_cmpgt_epi32(
        _mm256_set1_epi32(n),
        _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7),
    )
}

/// Input columns `p, p + S, …` of `n` output lanes (`n <= 8`).
///
/// # Safety
///
/// The input columns `p .. p + S·(n - 1)` are readable; the CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn load8<const S: usize>(p: *const f32, n: usize) -> __m256 {
    // SAFETY: only lanes inside `p .. p + S·(n - 1)` are loaded.
    unsafe {
        if S == 1 {
            return if n == 8 {
                _mm256_loadu_ps(p)
            } else {
                _mm256_maskload_ps(p, mask8(n as isize))
            };
        }
        // Columns 0..=7 at `p`, 7..=14 at `p + 7`: evens 0, 2, 4, 6 of the first, 8, 10, 12,
        // 14 are lanes 1, 3, 5, 7 of the second.
        let (lo, hi) = if n == 8 {
            (_mm256_loadu_ps(p), _mm256_loadu_ps(p.wrapping_add(7)))
        } else {
            let span = 2 * n as isize - 1;
            (
                _mm256_maskload_ps(p, mask8(span)),
                _mm256_maskload_ps(p.wrapping_add(7), mask8(span - 7)),
            )
        };
        // Per 128-bit half: [lo0, lo2, hi1, hi3], [lo4, lo6, hi5, hi7]; then 64-bit lanes
        // reordered 0, 2, 1, 3.
        let mixed = _mm256_shuffle_ps::<0b11_01_10_00>(lo, hi);
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
            mixed,
        )))
    }
}

/// The interior columns of `r` with stride `S` (1 or 2), 8 at a time.
///
/// # Safety
///
/// As [`row_avx2`].
#[target_feature(enable = "avx2,fma")]
unsafe fn interior_avx2<const S: usize>(r: &Row<'_>) {
    let mut ox = r.x0;
    while ox < r.x1 {
        let n = (r.x1 - ox).min(8);
        let mut acc = _mm256_setzero_ps();
        for &(row, w) in r.taps {
            for kx in 0..r.kw {
                let p = row.wrapping_add(ox * S + kx * r.dilation);
                // SAFETY: the tap's input columns of output columns `ox..ox + n` are inside
                // the row (interior columns); weight `kx` of the kernel row.
                let (v, wv) = unsafe { (load8::<S>(p, n), _mm256_set1_ps(*w.add(kx))) };
                acc = _mm256_fmadd_ps(wv, v, acc);
            }
        }
        // SAFETY: output columns `ox..ox + n` are inside the row.
        unsafe {
            let out = r.out.add(ox);
            if n == 8 {
                _mm256_storeu_ps(out, acc);
            } else {
                _mm256_maskstore_ps(out, mask8(n as isize), acc);
            }
        }
        ox += n;
    }
}
