//! A softmax row's exponentials on AVX2 with FMA, written with intrinsics: the portable loop
//! of 16-lane arrays, compiled for AVX2, kept two registers per array and spilled the rest of
//! its four accumulators and constants to the stack (1 ns per element on a Zen 3 core).
//! `e^d = 2^k · e^r` with `k` rounded as the portable [`crate::math::exp_clamped`] rounds it,
//! whose reduction and polynomial these are, and the scaling by `2^k` in two multiplies that
//! give the subnormal results down to `e^-104` as it does. A row's tail past its whole vectors
//! is its last vector, loaded before the loops overwrite its first lanes: copying the tail out
//! and back through a stack array was 40% of the exponentials of 100-element rows.

use std::arch::x86_64::*;

use crate::math::{EXP_P, LN2_HI, LN2_LO, LOG2E, MAGIC};

/// Vectors of 8 lanes per step of the main loop, each with its own sum.
const UNROLL: usize = 4;

/// `Σ e^(v - max)` over the row `y`, replacing each `v` by its term when `store`.
#[target_feature(enable = "avx2,fma")]
pub(super) fn exp_row(y: &mut [f32], max: f32, store: bool) -> f32 {
    if store {
        exp_row_with::<true>(y, max)
    } else {
        exp_row_with::<false>(y, max)
    }
}

#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp_row_with<const STORE: bool>(y: &mut [f32], max: f32) -> f32 {
    let m = _mm256_set1_ps(max);
    let mut acc = [_mm256_setzero_ps(); UNROLL];
    let n = y.len();
    // A row that ends in part of a vector after at least one whole one: its last eight
    // elements as they are before the loops below overwrite the first of them.
    // SAFETY: `n >= 8`, so the eight elements end the row.
    let last =
        (!n.is_multiple_of(8) && n >= 8).then(|| unsafe { _mm256_loadu_ps(y.as_ptr().add(n - 8)) });
    let mut blocks = y.chunks_exact_mut(8 * UNROLL);
    for block in &mut blocks {
        let mut v: [__m256; UNROLL] = std::array::from_fn(|u| {
            // SAFETY: `block` holds `UNROLL` vectors of 8 floats.
            _mm256_sub_ps(unsafe { _mm256_loadu_ps(block.as_ptr().add(8 * u)) }, m)
        });
        exp8(&mut v);
        for u in 0..UNROLL {
            if STORE {
                // SAFETY: as above.
                unsafe { _mm256_storeu_ps(block.as_mut_ptr().add(8 * u), v[u]) };
            }
            acc[u] = _mm256_add_ps(acc[u], v[u]);
        }
    }
    let rest = blocks.into_remainder();
    let mut vectors = rest.chunks_exact_mut(8);
    for chunk in &mut vectors {
        // SAFETY: `chunk` holds 8 floats.
        let mut v = [_mm256_sub_ps(unsafe { _mm256_loadu_ps(chunk.as_ptr()) }, m)];
        exp8(&mut v);
        if STORE {
            // SAFETY: as above.
            unsafe { _mm256_storeu_ps(chunk.as_mut_ptr(), v[0]) };
        }
        acc[0] = _mm256_add_ps(acc[0], v[0]);
    }
    let tail = vectors.into_remainder();
    let mut sum = 0.0;
    if let Some(last) = last {
        // The tail as the last vector of the row: its first lanes are elements the loops took
        // already, computed again the same way (lane by lane, from the same inputs), so the
        // store writes back what is there, and only the tail's lanes join the sum.
        let mut v = [_mm256_sub_ps(last, m)];
        exp8(&mut v);
        if STORE {
            // SAFETY: the last eight elements of the row (`n >= 8`).
            unsafe { _mm256_storeu_ps(y.as_mut_ptr().add(n - 8), v[0]) };
        }
        // SAFETY: `TAIL_MASKS` holds 16 lanes and `n % 8 < 8`.
        let keep = unsafe { _mm256_loadu_si256(TAIL_MASKS.as_ptr().add(n % 8).cast()) };
        acc[0] = _mm256_add_ps(acc[0], _mm256_and_ps(v[0], _mm256_castsi256_ps(keep)));
    } else if !tail.is_empty() {
        let mut lanes = [f32::NEG_INFINITY; 8];
        lanes[..tail.len()].copy_from_slice(tail);
        // SAFETY: `lanes` holds 8 floats; its padding is -inf, whose term is 0.
        let mut v = [_mm256_sub_ps(unsafe { _mm256_loadu_ps(lanes.as_ptr()) }, m)];
        exp8(&mut v);
        // SAFETY: as above.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), v[0]) };
        if STORE {
            tail.copy_from_slice(&lanes[..tail.len()]);
        }
        sum = lanes[..tail.len()].iter().sum();
    }
    let total = acc
        .iter()
        .fold(_mm256_setzero_ps(), |s, &a| _mm256_add_ps(s, a));
    let mut lanes = [0f32; 8];
    // SAFETY: `lanes` holds 8 floats.
    unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), total) };
    let fold = |w: usize, l: &mut [f32; 8]| (0..w).for_each(|i| l[i] += l[i + w]);
    fold(4, &mut lanes);
    fold(2, &mut lanes);
    fold(1, &mut lanes);
    lanes[0] + sum
}

/// `e^d` for `d ≤ 0` (or NaN, kept) of `N` vectors in place, each step taken for all of
/// them before the next: the steps of one vector form a chain of some 20 dependent
/// instructions, and the core overlaps `N` chains only if they are interleaved. `d` is
/// clamped below at -104, where `e^d` rounds to 0.
#[inline]
#[target_feature(enable = "avx2,fma")]
fn exp8<const N: usize>(v: &mut [__m256; N]) {
    let mut km = [_mm256_setzero_ps(); N];
    let mut r = [_mm256_setzero_ps(); N];
    let mut q = [_mm256_set1_ps(EXP_P[EXP_P.len() - 1]); N];
    for d in v.iter_mut() {
        // The second operand is the result when either is NaN.
        *d = _mm256_max_ps(_mm256_set1_ps(-104.0), *d);
    }
    for i in 0..N {
        // k = round(d log2 e) held in the low mantissa bits of `km` (see `MAGIC`).
        km[i] = _mm256_add_ps(
            _mm256_mul_ps(v[i], _mm256_set1_ps(LOG2E)),
            _mm256_set1_ps(MAGIC),
        );
    }
    for i in 0..N {
        let k = _mm256_sub_ps(km[i], _mm256_set1_ps(MAGIC));
        r[i] = _mm256_fmadd_ps(k, _mm256_set1_ps(-LN2_HI), v[i]);
        r[i] = _mm256_fmadd_ps(k, _mm256_set1_ps(-LN2_LO), r[i]);
    }
    for &c in EXP_P[..EXP_P.len() - 1].iter().rev() {
        for i in 0..N {
            q[i] = _mm256_fmadd_ps(q[i], r[i], _mm256_set1_ps(c));
        }
    }
    for i in 0..N {
        // e^r = 1 + r + r² q.
        v[i] = _mm256_add_ps(
            _mm256_fmadd_ps(q[i], _mm256_mul_ps(r[i], r[i]), r[i]),
            _mm256_set1_ps(1.0),
        );
    }
    for i in 0..N {
        // 2^k as 2^(k + 64) · 2^-64: the first factor is normal for k down to -150 and exact
        // in the product, the second rounds once, as a scaling by 2^k would. The bits of
        // `km` shifted into the exponent are those of `k` (MAGIC's low nine bits are zero).
        let scale = _mm256_castsi256_ps(_mm256_add_epi32(
            _mm256_slli_epi32::<23>(_mm256_castps_si256(km[i])),
            _mm256_set1_epi32((127 + 64) << 23),
        ));
        v[i] = _mm256_mul_ps(_mm256_mul_ps(v[i], scale), _mm256_set1_ps(TWO_TO_MINUS_64));
    }
}

/// Eight lanes from `n % 8` on select the last `n % 8` lanes of a vector (all ones there).
static TAIL_MASKS: [i32; 16] = [0, 0, 0, 0, 0, 0, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1];

/// `2^-64`.
const TWO_TO_MINUS_64: f32 = 5.421_011e-20;
