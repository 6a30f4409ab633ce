//! The 3×3 depthwise loop with AVX2 and FMA (8 output columns a vector), row stride 1 or 2:
//! the AVX-512 loop's design (`x86.rs`) with 8 lanes — nine broadcast weights in registers,
//! each row vector's lane masks computed once per convolution (full vectors load without a
//! mask), one accumulator per kernel row, the epilogue in registers. A kernel row outside the
//! data is skipped.

use std::arch::x86_64::*;

use super::Plane;
use super::x86::{inside, kernel_rows, mask8};

/// A vector of output columns of a 3×3 row: its first column and lanes, and per kernel column
/// the first input column its taps read with the lanes read there (and 7 columns on, for
/// stride 2), `None` when all 8 are.
#[derive(Clone, Copy)]
pub(super) struct Chunk8 {
    ox: isize,
    n: isize,
    c: [isize; 3],
    lo: [Option<__m256i>; 3],
    hi: [Option<__m256i>; 3],
}

/// The [`Chunk8`]s of an output row with stride `S`.
#[target_feature(enable = "avx2")]
fn chunks8<const S: isize>(plane: &Plane<'_>) -> Vec<Chunk8> {
    let p = plane.p;
    let (w, ow) = (p.width as isize, p.out_width as isize);
    let (dw, pl) = (p.dilation_w as isize, p.pad_left as isize);
    let mask = |lanes: (isize, isize)| (lanes != (0, 8)).then(|| mask8(lanes));
    (0..ow)
        .step_by(8)
        .map(|ox| {
            let n = (ow - ox).min(8);
            let span = if S == 1 { n } else { 2 * n - 1 };
            let c = [0, 1, 2].map(|kx| ox * S + kx * dw - pl);
            Chunk8 {
                ox,
                n,
                c,
                lo: c.map(|c| mask(inside(c, span.min(8), w))),
                hi: c.map(|c| mask(inside(c + 7, span - 7, w))),
            }
        })
        .collect()
}

/// Lanes of the 8 columns at `at` that `mask` keeps (all when `None`), the others 0.
///
/// # Safety
///
/// Those lanes are readable; the CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn load(at: *const f32, mask: Option<__m256i>) -> __m256 {
    // SAFETY: only the kept lanes are read.
    unsafe {
        match mask {
            None => _mm256_loadu_ps(at),
            Some(m) => _mm256_maskload_ps(at, m),
        }
    }
}

/// A 3×3 plane with AVX2, row stride `S`; `chunks` caches [`chunks8`] between the planes of
/// one convolution (empty before the first).
///
/// # Safety
///
/// As `x86::plane_avx2`; the kernel is 3×3.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn plane3_avx2<const S: isize>(plane: &Plane<'_>, chunks: &mut Vec<Chunk8>) {
    if chunks.is_empty() {
        *chunks = chunks8::<S>(plane);
    }
    let p = plane.p;
    // SAFETY: the plane has 9 weights.
    let wt: [__m256; 9] = std::array::from_fn(|k| _mm256_set1_ps(unsafe { *plane.w.add(k) }));
    let e = &plane.epi;
    let (scale, shift) = (
        e.scale.map(|s| _mm256_set1_ps(s)),
        e.shift.map(|b| _mm256_set1_ps(b)),
    );
    let (lo, hi) = (_mm256_set1_ps(e.lo), _mm256_set1_ps(e.hi));
    for oy in 0..p.out_height {
        let (ky0, ky1) = kernel_rows(plane.p, oy);
        let top = oy * p.stride_h - p.pad_top;
        let r = [0, 1, 2].map(|ky| {
            let iy = if (ky0..ky1).contains(&ky) {
                top + ky * p.dilation_h
            } else {
                0
            };
            plane.x.wrapping_offset(iy as isize * p.width as isize)
        });
        // SAFETY: row `oy` of the output plane.
        let out = unsafe { plane.y.offset((oy * p.out_width) as isize) };
        for ch in chunks.iter() {
            let mut sum = _mm256_setzero_ps();
            for ky in ky0 as usize..ky1 as usize {
                let tap = |kx: usize| {
                    let at = r[ky].wrapping_offset(ch.c[kx]);
                    // SAFETY: the lanes read are columns `0..W` of an input row inside the
                    // data.
                    unsafe {
                        let a = load(at, ch.lo[kx]);
                        if S == 1 {
                            return a;
                        }
                        // Per 128-bit half: [a0, a2, b1, b3], [a4, a6, b5, b7] (b at `c + 7`);
                        // then 64-bit lanes reordered 0, 2, 1, 3.
                        let b = load(at.wrapping_offset(7), ch.hi[kx]);
                        let mixed = _mm256_shuffle_ps::<0b11_01_10_00>(a, b);
                        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
                            mixed,
                        )))
                    }
                };
                let mut acc = _mm256_mul_ps(wt[3 * ky], tap(0));
                acc = _mm256_fmadd_ps(wt[3 * ky + 1], tap(1), acc);
                acc = _mm256_fmadd_ps(wt[3 * ky + 2], tap(2), acc);
                sum = _mm256_add_ps(sum, acc);
            }
            if let Some(s) = scale {
                sum = _mm256_mul_ps(sum, s);
            }
            if let Some(b) = shift {
                sum = _mm256_add_ps(sum, b);
            }
            // `min(hi, v)` is `hi < v ? hi : v` (a NaN `v` stays), likewise `max(lo, v)`.
            sum = _mm256_max_ps(lo, _mm256_min_ps(hi, sum));
            // SAFETY: output columns `ox..ox + n` of the row.
            unsafe {
                let at = out.offset(ch.ox);
                if ch.n == 8 {
                    _mm256_storeu_ps(at, sum);
                } else {
                    _mm256_maskstore_ps(at, mask8((0, ch.n)), sum);
                }
            }
        }
    }
}
