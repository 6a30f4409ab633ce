//! A softmax row's exponentials on AVX-512: `e^d = 2^k · e^r` with `k` rounded by
//! `vrndscaleps` and the scaling done by `vscalefps`, which also gives the subnormal results
//! exactly. That is about half the instructions of the portable loop, which builds `2^k` from
//! integer exponent bits in two factors, and the exponentials are most of a softmax's time.
//! The reduction and polynomial are those of [`crate::math::exp_clamped`].

use std::arch::x86_64::*;

use crate::math::{EXP_P, LN2_HI, LN2_LO, LOG2E};

/// Vectors of 16 lanes per step of the main loop, each with its own sum.
const UNROLL: usize = 4;

/// `Σ e^(v - max)` over the row `y`, replacing each `v` by its term when `store`.
#[target_feature(enable = "avx512f")]
pub(super) fn exp_row(y: &mut [f32], max: f32, store: bool) -> f32 {
    if store {
        exp_row_with::<true>(y, max)
    } else {
        exp_row_with::<false>(y, max)
    }
}

#[inline]
#[target_feature(enable = "avx512f")]
fn exp_row_with<const STORE: bool>(y: &mut [f32], max: f32) -> f32 {
    let m = _mm512_set1_ps(max);
    let mut acc = [_mm512_setzero_ps(); UNROLL];
    let mut blocks = y.chunks_exact_mut(16 * UNROLL);
    for block in &mut blocks {
        for (a, v) in acc.iter_mut().zip(block.chunks_exact_mut(16)) {
            // SAFETY: `v` holds 16 floats.
            let e = exp16(_mm512_sub_ps(unsafe { _mm512_loadu_ps(v.as_ptr()) }, m));
            if STORE {
                // SAFETY: as above.
                unsafe { _mm512_storeu_ps(v.as_mut_ptr(), e) };
            }
            *a = _mm512_add_ps(*a, e);
        }
    }
    for v in blocks.into_remainder().chunks_mut(16) {
        let mask = (1u32 << v.len()).wrapping_sub(1) as __mmask16;
        // SAFETY: the mask covers the `v.len()` floats of `v` only.
        let e = exp16(_mm512_sub_ps(
            unsafe { _mm512_maskz_loadu_ps(mask, v.as_ptr()) },
            m,
        ));
        if STORE {
            // SAFETY: as above.
            unsafe { _mm512_mask_storeu_ps(v.as_mut_ptr(), mask, e) };
        }
        acc[0] = _mm512_mask_add_ps(acc[0], mask, acc[0], e);
    }
    let sum = _mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), _mm512_add_ps(acc[2], acc[3]));
    _mm512_reduce_add_ps(sum)
}

/// `e^d` for `d ≤ 0` (or NaN, kept): `d` is clamped below at -104, where `e^d` rounds to 0.
#[inline]
#[target_feature(enable = "avx512f")]
fn exp16(d: __m512) -> __m512 {
    // The second operand is the result when either is NaN.
    let d = _mm512_max_ps(_mm512_set1_ps(-104.0), d);
    let k = _mm512_roundscale_ps::<{ _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC }>(
        _mm512_mul_ps(d, _mm512_set1_ps(LOG2E)),
    );
    let r = _mm512_fmadd_ps(k, _mm512_set1_ps(-LN2_HI), d);
    let r = _mm512_fmadd_ps(k, _mm512_set1_ps(-LN2_LO), r);
    let mut q = _mm512_set1_ps(EXP_P[EXP_P.len() - 1]);
    for &c in EXP_P[..EXP_P.len() - 1].iter().rev() {
        q = _mm512_fmadd_ps(q, r, _mm512_set1_ps(c));
    }
    // e^r = 1 + r + r² q.
    let e = _mm512_add_ps(
        _mm512_fmadd_ps(q, _mm512_mul_ps(r, r), r),
        _mm512_set1_ps(1.0),
    );
    _mm512_scalef_ps(e, k)
}
