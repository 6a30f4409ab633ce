//! A depthwise output plane with AVX-512 (16 output columns a vector) or AVX2 (8), stride 1
//! or 2 along the row.
//!
//! Per output row, only the kernel rows whose input row lies inside the data are visited (a
//! contiguous range of `ky`). Along the row, each vector of output columns takes, per kernel
//! column `kx`, the input columns its lanes read with masked loads: a lane whose column falls
//! in the padding (or past the columns the vector needs) is masked off, so it reads nothing
//! (masked-off lanes never fault) and contributes 0 — the borders need no scalar code and no
//! padded copy. Stride 1 loads a tap's columns contiguously; stride 2 loads the `2·lanes - 1`
//! input columns a tap spans as two overlapping contiguous vectors (at `c` and `c + lanes - 1`,
//! so neither reaches past the last column used) and gathers their even columns with one
//! two-source permute (AVX-512) or a shuffle and a 64-bit lane permute (AVX2).

use std::arch::x86_64::*;

use super::{DepthwiseParams, Plane};

/// The lanes `j` of a vector of input columns starting at column `c` that are read: `j <
/// count` (the columns the output vector needs) and `0 <= c + j < width`, as `[lo, hi)`.
pub(super) fn inside(c: isize, count: isize, width: isize) -> (isize, isize) {
    let lo = (-c).max(0);
    let hi = count.min(width - c);
    if hi > lo { (lo, hi) } else { (0, 0) }
}

/// The 16-lane mask of lanes `[lo, hi)` (`0 <= lo <= hi <= 16`).
pub(super) fn mask16((lo, hi): (isize, isize)) -> __mmask16 {
    let bits = |n: isize| ((1u32 << n) - 1) as u16;
    bits(hi) & !bits(lo)
}

/// The row geometry shared by both instruction sets: for output row `oy`, the kernel rows
/// whose input row is inside the data, `[ky0, ky1)`.
pub(super) fn kernel_rows(p: &DepthwiseParams, oy: i64) -> (i64, i64) {
    let top = oy * p.stride_h - p.pad_top;
    // ky·dh >= -top and top + ky·dh <= H - 1.
    let ky0 = if top >= 0 {
        0
    } else {
        (-top + p.dilation_h - 1) / p.dilation_h
    };
    let last = p.height - 1 - top;
    let ky1 = if last < 0 {
        0
    } else {
        (last / p.dilation_h + 1).min(p.kernel_h)
    };
    (ky0.min(ky1), ky1)
}

/// The 16 output columns of row stride `S` whose first tap is input column `at`: lanes `lo`
/// of the vector at `at` (stride 1), or the even columns of the vectors at `at` (lanes `lo`)
/// and `at + 15` (lanes `hi`) (stride 2); masked-off lanes read nothing and give 0.
///
/// # Safety
///
/// The unmasked lanes are readable; the CPU has AVX-512F.
#[target_feature(enable = "avx512f")]
#[inline]
pub(super) unsafe fn tap16<const S: isize>(at: *const f32, lo: __mmask16, hi: __mmask16) -> __m512 {
    // Output lane i of a stride-2 vector: input column 2i, lane 2i of the vector at `at` for
    // i < 8, else lane 2i - 15 of the one at `at + 15` (index 16 + that in the permute).
    let evens = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 17, 19, 21, 23, 25, 27, 29, 31);
    // SAFETY: only the unmasked lanes are read.
    unsafe {
        let a = _mm512_maskz_loadu_ps(lo, at);
        if S == 1 {
            a
        } else {
            let b = _mm512_maskz_loadu_ps(hi, at.wrapping_offset(15));
            _mm512_permutex2var_ps(a, evens, b)
        }
    }
}

/// For a vector of `n` output columns of row stride `S` whose first tap is input column `c`
/// of a row `width` wide: the masks [`tap16`] takes.
pub(super) fn masks16<const S: isize>(c: isize, n: isize, width: isize) -> (__mmask16, __mmask16) {
    let span = if S == 1 { n } else { 2 * n - 1 };
    (
        mask16(inside(c, span.min(16), width)),
        mask16(inside(c + 15, span - 15, width)),
    )
}

/// Plane `plane` with AVX-512, stride 1 or 2 along the row: a 3×3 kernel by
/// [`plane3_avx512`], any other row by row ([`row_avx512`]). `chunks` caches the 3×3 rows' vectors between the planes of one
/// convolution (empty before the first).
///
/// # Safety
///
/// `plane.x` is an input plane of `H·W` elements, `plane.w` `kh·kw` weights, `plane.y` an
/// output plane of `OH·OW` elements; the CPU has AVX-512F; the row stride is 1 or 2.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn plane_avx512(plane: &Plane<'_>, chunks: &mut Vec<Chunk3>) {
    let p = plane.p;
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match (p.stride_w, p.kernel_h == 3 && p.kernel_w == 3) {
            (1, true) => {
                if chunks.is_empty() {
                    *chunks = chunks3::<1>(plane);
                }
                plane3_avx512::<1>(plane, chunks)
            }
            (_, true) => {
                if chunks.is_empty() {
                    *chunks = chunks3::<2>(plane);
                }
                plane3_avx512::<2>(plane, chunks)
            }
            (1, false) => (0..p.out_height).for_each(|oy| row_avx512::<1>(plane, oy)),
            (_, false) => (0..p.out_height).for_each(|oy| row_avx512::<2>(plane, oy)),
        }
    }
}

/// A vector of output columns of a 3×3 row: its first column and lanes, and per kernel column
/// the first input column its taps read and the lanes read of the vector there (and of the one
/// 15 columns on, for stride 2). The same for every row of every plane of one convolution.
#[derive(Clone, Copy)]
pub(super) struct Chunk3 {
    ox: isize,
    n: isize,
    c: [isize; 3],
    lo: [__mmask16; 3],
    hi: [__mmask16; 3],
}

/// The [`Chunk3`]s of an output row with stride `S`.
fn chunks3<const S: isize>(plane: &Plane<'_>) -> Vec<Chunk3> {
    let p = plane.p;
    let (w, ow) = (p.width as isize, p.out_width as isize);
    let (dw, pl) = (p.dilation_w as isize, p.pad_left as isize);
    (0..ow)
        .step_by(16)
        .map(|ox| {
            let n = (ow - ox).min(16);
            let span = if S == 1 { n } else { 2 * n - 1 };
            let c = [0, 1, 2].map(|kx| ox * S + kx * dw - pl);
            Chunk3 {
                ox,
                n,
                c,
                lo: c.map(|c| mask16(inside(c, span.min(16), w))),
                hi: c.map(|c| mask16(inside(c + 15, span - 15, w))),
            }
        })
        .collect()
}

/// A 3×3 plane with row stride `S`: the nine weights held in registers, each row by
/// [`row3_avx512`] (`EDGE` for the rows with a kernel row outside the data).
///
/// # Safety
///
/// As [`plane_avx512`]; the kernel is 3×3 and `chunks` are [`chunks3`] of this convolution.
#[target_feature(enable = "avx512f")]
unsafe fn plane3_avx512<const S: isize>(plane: &Plane<'_>, chunks: &[Chunk3]) {
    // SAFETY: the plane has 9 weights.
    let wt: [__m512; 9] = std::array::from_fn(|k| _mm512_set1_ps(unsafe { *plane.w.add(k) }));
    for oy in 0..plane.p.out_height {
        let rows = kernel_rows(plane.p, oy);
        // SAFETY: forwarded from this function's contract.
        unsafe {
            if rows == (0, 3) {
                row3_avx512::<S, false>(plane, chunks, &wt, oy, rows);
            } else {
                row3_avx512::<S, true>(plane, chunks, &wt, oy, rows);
            }
        }
    }
}

/// Output row `oy` of a 3×3 plane: the three kernel rows summed into separate accumulators
/// (shorter dependency chains), every tap a masked load (all lanes in the interior). With
/// `EDGE`, the kernel rows outside `[ky0, ky1)` are masked off entirely (they read nothing).
///
/// # Safety
///
/// As [`plane3_avx512`]; `wt` holds the plane's weights broadcast; `(ky0, ky1)` are
/// [`kernel_rows`] of `oy`, all three when not `EDGE`.
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn row3_avx512<const S: isize, const EDGE: bool>(
    plane: &Plane<'_>,
    chunks: &[Chunk3],
    wt: &[__m512; 9],
    oy: i64,
    (ky0, ky1): (i64, i64),
) {
    let p = plane.p;
    let epi = Epilogue512::of(&plane.epi);
    let top = oy * p.stride_h - p.pad_top;
    let valid = [0, 1, 2].map(|ky| (ky0..ky1).contains(&ky));
    let keep: [__mmask16; 3] = valid.map(|v| if v { 0xffff } else { 0 });
    // A kernel row outside the data is never read: any address does.
    let r = [0, 1, 2].map(|ky| {
        let iy = if valid[ky as usize] {
            top + ky * p.dilation_h
        } else {
            0
        };
        plane.x.wrapping_offset(iy as isize * p.width as isize)
    });
    // SAFETY: row `oy` of the output plane.
    let out = unsafe { plane.y.offset((oy * p.out_width) as isize) };
    for ch in chunks {
        let mut acc = [_mm512_setzero_ps(); 3];
        for (ky, a) in acc.iter_mut().enumerate() {
            let tap = |kx: usize| {
                let at = r[ky].wrapping_offset(ch.c[kx]);
                let (lo, hi) = if EDGE {
                    (ch.lo[kx] & keep[ky], ch.hi[kx] & keep[ky])
                } else {
                    (ch.lo[kx], ch.hi[kx])
                };
                // SAFETY: the unmasked lanes are columns `0..W` of an input row inside the
                // data.
                unsafe { tap16::<S>(at, lo, hi) }
            };
            *a = _mm512_mul_ps(wt[3 * ky], tap(0));
            *a = _mm512_fmadd_ps(wt[3 * ky + 1], tap(1), *a);
            *a = _mm512_fmadd_ps(wt[3 * ky + 2], tap(2), *a);
        }
        let sum = epi.apply(_mm512_add_ps(_mm512_add_ps(acc[0], acc[1]), acc[2]));
        // SAFETY: output columns `ox..ox + n` of the row.
        unsafe {
            let at = out.offset(ch.ox);
            if ch.n == 16 {
                _mm512_storeu_ps(at, sum);
            } else {
                _mm512_mask_storeu_ps(at, mask16((0, ch.n)), sum);
            }
        }
    }
}

/// A channel's epilogue in AVX-512 registers.
pub(super) struct Epilogue512 {
    scale: Option<__m512>,
    shift: Option<__m512>,
    lo: __m512,
    hi: __m512,
}

impl Epilogue512 {
    #[target_feature(enable = "avx512f")]
    pub(super) fn of(e: &super::ChannelEpilogue) -> Epilogue512 {
        Epilogue512 {
            scale: e.scale.map(|s| _mm512_set1_ps(s)),
            shift: e.shift.map(|b| _mm512_set1_ps(b)),
            lo: _mm512_set1_ps(e.lo),
            hi: _mm512_set1_ps(e.hi),
        }
    }

    /// `v` through the epilogue: `min(hi, v)` returns `v` when it is NaN (the second
    /// operand), as `hi < v ? hi : v` does; likewise `max(lo, v)`.
    #[target_feature(enable = "avx512f")]
    pub(super) fn apply(&self, mut v: __m512) -> __m512 {
        if let Some(s) = self.scale {
            v = _mm512_mul_ps(v, s);
        }
        if let Some(b) = self.shift {
            v = _mm512_add_ps(v, b);
        }
        _mm512_max_ps(self.lo, _mm512_min_ps(self.hi, v))
    }
}

/// Output row `oy` of `plane` with AVX-512, row stride `S`, any kernel.
///
/// # Safety
///
/// As [`plane_avx512`].
#[target_feature(enable = "avx512f")]
unsafe fn row_avx512<const S: isize>(plane: &Plane<'_>, oy: i64) {
    let p = plane.p;
    let (w, ow, kw) = (p.width as isize, p.out_width as isize, p.kernel_w as isize);
    let (dw, pl) = (p.dilation_w as isize, p.pad_left as isize);
    let (ky0, ky1) = kernel_rows(p, oy);
    let top = oy * p.stride_h - p.pad_top;
    // SAFETY: row `oy` of the output plane.
    let out = unsafe { plane.y.offset((oy * p.out_width) as isize) };
    let mut ox = 0isize;
    while ox < ow {
        let n = (ow - ox).min(16);
        let mut acc = _mm512_setzero_ps();
        for kx in 0..kw {
            let c = ox * S + kx * dw - pl;
            let (lo, hi) = masks16::<S>(c, n, w);
            for ky in ky0..ky1 {
                let iy = (top + ky * p.dilation_h) as isize;
                // SAFETY: the unmasked lanes are columns `0..W` of input row `iy` (inside
                // the data); weight `(ky, kx)` is inside the plane's weights.
                let (v, wv) = unsafe {
                    let v = tap16::<S>(plane.x.wrapping_offset(iy * w + c), lo, hi);
                    (v, _mm512_set1_ps(*plane.w.offset(ky as isize * kw + kx)))
                };
                acc = _mm512_fmadd_ps(wv, v, acc);
            }
        }
        // SAFETY: output columns `ox..ox + n` of the row.
        unsafe { _mm512_mask_storeu_ps(out.offset(ox), mask16((0, n)), acc) };
        ox += n;
    }
    // SAFETY: the row's `OW` results.
    unsafe { plane.epi.row(out, ow as usize) };
}

/// The 8-lane load/store mask of lanes `[lo, hi)` (`0 <= lo <= hi <= 8`).
#[target_feature(enable = "avx2")]
pub(super) fn mask8((lo, hi): (isize, isize)) -> __m256i {
    let iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let ge_lo = _mm256_cmpgt_epi32(iota, _mm256_set1_epi32(lo as i32 - 1));
    let lt_hi = _mm256_cmpgt_epi32(_mm256_set1_epi32(hi as i32), iota);
    _mm256_and_si256(ge_lo, lt_hi)
}

/// Lanes `[lo, hi)` of the 8 columns at `at`, the others 0.
///
/// # Safety
///
/// Those lanes are readable; the CPU has AVX2.
#[target_feature(enable = "avx2")]
unsafe fn load8(at: *const f32, lanes: (isize, isize)) -> __m256 {
    // SAFETY: only lanes `[lo, hi)` are read.
    unsafe {
        if lanes == (0, 8) {
            _mm256_loadu_ps(at)
        } else {
            _mm256_maskload_ps(at, mask8(lanes))
        }
    }
}

/// The 8 output columns of row stride `S` whose first tap is input column `at`: lanes `lo`
/// of the vector at `at` (stride 1), or the even columns of the vectors at `at` (lanes `lo`)
/// and `at + 7` (lanes `hi`) (stride 2); the other lanes read nothing and give 0.
///
/// # Safety
///
/// Those lanes are readable; the CPU has AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn tap8<const S: isize>(
    at: *const f32,
    lo: (isize, isize),
    hi: (isize, isize),
) -> __m256 {
    // SAFETY: only lanes `lo` and `hi` are read.
    unsafe {
        let a = load8(at, lo);
        if S == 1 {
            return a;
        }
        // Per 128-bit half: [a0, a2, b1, b3], [a4, a6, b5, b7] (b at `at + 7`); then 64-bit
        // lanes reordered 0, 2, 1, 3.
        let b = load8(at.wrapping_offset(7), hi);
        let mixed = _mm256_shuffle_ps::<0b11_01_10_00>(a, b);
        _mm256_castpd_ps(_mm256_permute4x64_pd::<0b11_01_10_00>(_mm256_castps_pd(
            mixed,
        )))
    }
}

/// For a vector of `n` output columns of row stride `S` whose first tap is input column `c`
/// of a row `width` wide: the lanes [`tap8`] reads.
pub(super) fn lanes8<const S: isize>(
    c: isize,
    n: isize,
    width: isize,
) -> ((isize, isize), (isize, isize)) {
    let span = if S == 1 { n } else { 2 * n - 1 };
    (
        inside(c, span.min(8), width),
        inside(c + 7, span - 7, width),
    )
}

/// Plane `plane` with AVX2 and FMA, stride 1 or 2 along the row: a 3×3 kernel by
/// `avx2::plane3_avx2` (`chunks` caching its row vectors between planes), others here.
///
/// # Safety
///
/// As [`plane_avx512`], with AVX2 and FMA instead of AVX-512F.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn plane_avx2(plane: &Plane<'_>, chunks: &mut Vec<super::avx2::Chunk8>) {
    let p = plane.p;
    // SAFETY: forwarded from this function's contract.
    unsafe {
        match (p.stride_w, p.kernel_h == 3 && p.kernel_w == 3) {
            (1, true) => super::avx2::plane3_avx2::<1>(plane, chunks),
            (_, true) => super::avx2::plane3_avx2::<2>(plane, chunks),
            (1, false) => plane_avx2_s::<1>(plane),
            (_, false) => plane_avx2_s::<2>(plane),
        }
    }
}

/// [`plane_avx2`] with row stride `S`.
///
/// # Safety
///
/// As [`plane_avx2`].
#[target_feature(enable = "avx2,fma")]
unsafe fn plane_avx2_s<const S: isize>(plane: &Plane<'_>) {
    let p = plane.p;
    let (w, ow, kw) = (p.width as isize, p.out_width as isize, p.kernel_w as isize);
    let (dw, pl) = (p.dilation_w as isize, p.pad_left as isize);
    for oy in 0..p.out_height {
        let (ky0, ky1) = kernel_rows(p, oy);
        let top = oy * p.stride_h - p.pad_top;
        // SAFETY: row `oy` of the output plane.
        let out = unsafe { plane.y.offset((oy * p.out_width) as isize) };
        let mut ox = 0isize;
        while ox < ow {
            let n = (ow - ox).min(8);
            let mut acc = _mm256_setzero_ps();
            for kx in 0..kw {
                let c = ox * S + kx * dw - pl;
                let (lo, hi) = lanes8::<S>(c, n, w);
                for ky in ky0..ky1 {
                    let iy = (top + ky * p.dilation_h) as isize;
                    // SAFETY: the lanes read are columns `0..W` of input row `iy` (inside the
                    // data); weight `(ky, kx)` is inside the plane's weights.
                    let (v, wv) = unsafe {
                        let v = tap8::<S>(plane.x.wrapping_offset(iy * w + c), lo, hi);
                        (v, _mm256_set1_ps(*plane.w.offset(ky as isize * kw + kx)))
                    };
                    acc = _mm256_fmadd_ps(wv, v, acc);
                }
            }
            // SAFETY: output columns `ox..ox + n` of the row.
            unsafe { store8(out.offset(ox), n, acc) };
            ox += n;
        }
        // SAFETY: the row's `OW` results.
        unsafe { plane.epi.row(out, ow as usize) };
    }
}

/// Stores the first `n` lanes of `v` at `at` (`n <= 8`).
///
/// # Safety
///
/// `at` is writable for `n` elements; the CPU has AVX2.
#[target_feature(enable = "avx2")]
#[inline]
pub(super) unsafe fn store8(at: *mut f32, n: isize, v: __m256) {
    // SAFETY: only the first `n` lanes are written.
    unsafe {
        if n == 8 {
            _mm256_storeu_ps(at, v);
        } else {
            _mm256_maskstore_ps(at, mask8((0, n)), v);
        }
    }
}
