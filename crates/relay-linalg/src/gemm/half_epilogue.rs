//! The epilogue of a `float16` GEMM ([`HalfEpilogue`]): applied to each row of the `float32`
//! accumulator as it is rounded to `float16`, computing what a kernel's `float16` loop does —
//! the product rounded once, then each step in `float32` on `float16` operands with its
//! result rounded to `float16` (SPEC §4's per-operation rule), then the clamps, exact on
//! `float16` values. With F16C each rounding is one round trip through the hardware's
//! conversion (to nearest, ties to even, a NaN quieted with its high payload bits: the rule
//! of `relay_runtime::half`), eight lanes at a time.

use super::epilogue::{EpilogueCall, Lower, MAX_STEPS, Step, clamp, step};
use super::{F16, Matrix, Operand};

/// A `float16` GEMM's epilogue: steps on `float16` operands (`m × n` views, strides 0 where
/// broadcast), clamp bounds as `float32` (`float16` values).
#[derive(Clone, Copy, Debug)]
pub struct HalfEpilogue {
    steps: [Option<(Step, Matrix<F16>)>; MAX_STEPS],
    upper: Option<f32>,
    lower: Lower<f32>,
    /// Whether rows go eight columns at a time with F16C (the CPU has it, and every operand is
    /// contiguous or broadcast along a row): decided once, not per row.
    f16c: bool,
}

impl HalfEpilogue {
    /// The epilogue `call` describes for an `m × n` `float16` result, or `None` when it is
    /// malformed ([`EpilogueCall::decode`]).
    pub fn decode(call: &EpilogueCall, m: usize, n: usize) -> Option<HalfEpilogue> {
        let (steps, upper, lower) = call.parts::<F16, f32>(m, n, |b| b as f32)?;
        #[cfg(target_arch = "x86_64")]
        let f16c = super::operand::has_f16c()
            && steps.iter().flatten().all(|(_, m)| m.cs == 0 || m.cs == 1);
        #[cfg(not(target_arch = "x86_64"))]
        let f16c = false;
        Some(HalfEpilogue {
            steps,
            upper,
            lower,
            f16c,
        })
    }

    /// Row `i` of the accumulator (`row`, all `n` columns, in `float32`) through the
    /// epilogue, each value left a `float16` one (so that narrowing it is exact).
    ///
    /// # Safety
    ///
    /// Row `i` is inside every step's operand.
    pub unsafe fn apply_row(&self, row: &mut [f32], i: usize) {
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if self.f16c {
            // SAFETY: the CPU has F16C and AVX; forwarded.
            done = unsafe { self.row_f16c(row, i) };
        }
        for (j, v) in row.iter_mut().enumerate().skip(done) {
            let mut x = round(*v);
            for (kind, m) in self.steps.iter().flatten() {
                // SAFETY: `(i, j)` is inside the operand (the contract).
                let o = unsafe { (*m.at(i, j)).widen() };
                x = round(step(*kind, x, o));
            }
            *v = clamp(x, self.upper, self.lower);
        }
    }

    /// [`HalfEpilogue::apply_row`] eight columns at a time, for the whole eights of the row;
    /// returns how many columns it did.
    ///
    /// # Safety
    ///
    /// As [`HalfEpilogue::apply_row`]; the CPU has F16C and AVX, each operand contiguous or
    /// broadcast along the row.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "f16c,avx")]
    unsafe fn row_f16c(&self, row: &mut [f32], i: usize) -> usize {
        use std::arch::x86_64::*;
        let round = |v: __m256| _mm256_cvtph_ps(_mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v));
        let (lo, relu) = self.lower.as_max(f32::NEG_INFINITY);
        let (hi, lo) = (
            _mm256_set1_ps(self.upper.unwrap_or(f32::INFINITY)),
            _mm256_set1_ps(lo),
        );
        let whole = row.len() / 8 * 8;
        for j in (0..whole).step_by(8) {
            // SAFETY: columns `j..j + 8` are in the row and in each contiguous operand; a
            // broadcast operand's element `(i, j)` is its row's one value.
            unsafe {
                let mut v = round(_mm256_loadu_ps(row.as_ptr().add(j)));
                for (kind, m) in self.steps.iter().flatten() {
                    let p = m.at(i, j);
                    let o = if m.cs == 0 {
                        _mm256_set1_ps((*p).widen())
                    } else {
                        _mm256_cvtph_ps(_mm_loadu_si128(p.cast()))
                    };
                    v = round(match kind {
                        Step::Mul => _mm256_mul_ps(v, o),
                        Step::Add => _mm256_add_ps(v, o),
                    });
                }
                // `min(hi, v)` is `hi < v ? hi : v`; `max(v, lo)` `relu`'s select, `max(lo,
                // v)` `clip`'s (x86's min/max return the second operand unless it holds).
                let v = _mm256_min_ps(hi, v);
                let v = if relu {
                    _mm256_max_ps(v, lo)
                } else {
                    _mm256_max_ps(lo, v)
                };
                _mm256_storeu_ps(row.as_mut_ptr().add(j), v);
            }
        }
        whole
    }
}

/// `x` rounded to the nearest `float16` value (as `float32`).
fn round(x: f32) -> f32 {
    relay_runtime::half::f16_bits_to_f32(relay_runtime::half::f32_to_f16_bits(x))
}
