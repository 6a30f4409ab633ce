//! The AVX-512F microkernels, after MLAS's `SgemmKernelAvx512F` but reading a packed `a`:
//! a tile of up to [`MR`] rows by two vectors (32 `f32` or 16 `f64` columns), its `2·MR`
//! accumulators in registers for the whole panel, each step loading the panel row of `b`
//! into two vectors and multiplying it by each of the column's `MR` elements of `a`,
//! broadcast from memory.
//!
//! Edge tiles stay in registers: the row count is a const generic (one loop per count
//! `1..=MR`, so padding rows cost nothing), a tile of at most one vector of columns runs a
//! one-vector loop, and the columns beyond `cols` are masked off in the loads and stores of
//! `c` (MLAS's `k1` mask of the last vector). The kernels also read `b` in place, its rows
//! `ldb` apart, masking the loads past the end of a row (the driver's
//! `reads_b_in_place`).

use std::arch::x86_64::*;

/// Rows of an AVX-512 tile: 12 × 2 vectors = 24 of the 32 vector registers accumulate,
/// leaving two for the row of `b` and one for a broadcast (MLAS's 12-row kernel).
pub(crate) const MR: usize = 12;

/// How many steps of `k` ahead the kernels prefetch a deep packed panel of `b` (at least
/// four times as deep). The panel is read from memory or L2 by its first row tile, and the
/// hardware prefetcher alone leaves the FMAs waiting on it: GPT-2's language-model head,
/// `[16, 256] × [256, 50257]`, 2.75 -> 2.2 ms, BERT's dense layers 2–4% faster (the
/// `gemm_shapes` example, one thread). The AVX2 kernels measured 2–10% slower with it.
const PREFETCH: usize = 16;

/// `$body` with `R` set to the row count `$rows` (one of `1..=MR`).
macro_rules! by_rows {
    ($rows:expr, $tile:ident, ($($arg:expr),*)) => {
        match $rows {
            1 => $tile::<1>($($arg),*),
            2 => $tile::<2>($($arg),*),
            3 => $tile::<3>($($arg),*),
            4 => $tile::<4>($($arg),*),
            5 => $tile::<5>($($arg),*),
            6 => $tile::<6>($($arg),*),
            7 => $tile::<7>($($arg),*),
            8 => $tile::<8>($($arg),*),
            9 => $tile::<9>($($arg),*),
            10 => $tile::<10>($($arg),*),
            11 => $tile::<11>($($arg),*),
            _ => $tile::<MR>($($arg),*),
        }
    };
}

/// Generates the microkernel `$name` (a [`MicroKernel`](super::kernels::MicroKernel) with
/// `MR` rows and `2·$lanes` columns) and its per-row-count tile `$tile`, for `$t` in `$v`
/// vectors with `$mask` lane masks.
macro_rules! avx512_kernel {
    ($name:ident, $tile:ident, $t:ty, $v:ty, $mask:ty, $lanes:literal,
     zero: $zero:path, load: $load:path, loadz: $loadz:path, store: $store:path,
     splat: $splat:path, fma: $fma:path, add: $add:path) => {
        /// The AVX-512 microkernel (see [`MicroKernel`](super::kernels::MicroKernel)).
        ///
        /// # Safety
        ///
        /// As [`MicroKernel`](super::kernels::MicroKernel).
        #[allow(clippy::too_many_arguments)]
        pub(crate) unsafe fn $name(
            kc: usize,
            a: *const $t,
            b: *const $t,
            ldb: usize,
            c: *mut $t,
            ldc: usize,
            accumulate: bool,
            rows: usize,
            cols: usize,
        ) {
            // SAFETY: forwarded (`rows <= MR`; the caller checked the CPU's features).
            unsafe { by_rows!(rows, $tile, (kc, a, b, ldb, c, ldc, accumulate, cols)) }
        }

        /// `R` rows of the tile, as [`$name`].
        ///
        /// # Safety
        ///
        /// As [`$name`], with `rows = R`.
        #[allow(clippy::too_many_arguments)]
        #[target_feature(enable = "avx512f")]
        unsafe fn $tile<const R: usize>(
            kc: usize,
            a: *const $t,
            b: *const $t,
            ldb: usize,
            c: *mut $t,
            ldc: usize,
            accumulate: bool,
            cols: usize,
        ) {
            const L: usize = $lanes;
            // The first `n` lanes (all for `n >= L`).
            let lanes = |n: usize| -> $mask {
                if n >= L {
                    <$mask>::MAX
                } else {
                    ((1u32 << n) - 1) as $mask
                }
            };
            // `v` (plus the masked lanes of `c` at `out` when accumulating) stored to `out`.
            macro_rules! put {
                ($out:expr, $val:expr, $m:expr) => {{
                    let (out, m) = ($out, $m);
                    let v = if accumulate {
                        $add($val, $loadz(m, out))
                    } else {
                        $val
                    };
                    $store(out, m, v);
                }};
            }
            // A packed panel (zero-padded to `2·L` columns, rows `2·L` apart: a constant
            // stride) or rows of `b` read in place, whose loads are masked where they would
            // pass the end of a row.
            let packed = ldb == 2 * L;
            if cols > L {
                let high = lanes(cols - L);
                let mut acc: [[$v; 2]; R] = [[$zero(); 2]; R];
                // The product, rows of `b` `$ld` apart, `$q` the second vector's address and
                // `$second` its load; with `$ahead`, the two lines of a packed panel's row
                // `PREFETCH` steps ahead are asked for.
                macro_rules! product {
                    ($ld:expr, $q:ident => $second:expr, $ahead:expr) => {
                        for p in 0..kc {
                            // SAFETY: `p < kc`: row `p` of each panel is inside it; the
                            // lanes past `cols` of a row read in place are not read; a
                            // prefetch never faults.
                            unsafe {
                                let (ap, bp) = (a.add(p * MR), b.add(p * $ld));
                                if $ahead {
                                    let next = bp.wrapping_add(PREFETCH * $ld).cast::<i8>();
                                    _mm_prefetch::<_MM_HINT_T0>(next);
                                    _mm_prefetch::<_MM_HINT_T0>(next.wrapping_add(64));
                                }
                                let $q = bp.add(L);
                                let (b0, b1) = ($load(bp), $second);
                                for (i, row) in acc.iter_mut().enumerate() {
                                    let x = $splat(*ap.add(i));
                                    row[0] = $fma(x, b0, row[0]);
                                    row[1] = $fma(x, b1, row[1]);
                                }
                            }
                        }
                    };
                }
                // A deep packed panel is one stream (a shallow one is read again by the next
                // tile before it is done).
                if packed && kc >= 4 * PREFETCH {
                    product!(2 * L, q => $load(q), true);
                } else if packed {
                    product!(2 * L, q => $load(q), false);
                } else if cols == 2 * L {
                    product!(ldb, q => $load(q), false);
                } else {
                    product!(ldb, q => $loadz(high, q), false);
                }
                for (i, row) in acc.iter().enumerate() {
                    // SAFETY: row `i < R` of the tile holds `cols` elements at `c + i·ldc`;
                    // masked lanes are not accessed.
                    unsafe {
                        let out = c.add(i * ldc);
                        put!(out, row[0], <$mask>::MAX);
                        put!(out.add(L), row[1], high);
                    }
                }
            } else {
                let low = lanes(cols);
                let mut acc: [$v; R] = [$zero(); R];
                // The product, row `p` of `b` loaded by `$row`.
                macro_rules! product {
                    ($p:ident => $row:expr) => {
                        for $p in 0..kc {
                            // SAFETY: as above.
                            unsafe {
                                let (ap, b0) = (a.add($p * MR), $row);
                                for (i, v) in acc.iter_mut().enumerate() {
                                    *v = $fma($splat(*ap.add(i)), b0, *v);
                                }
                            }
                        }
                    };
                }
                if packed {
                    product!(p => $load(b.add(p * 2 * L)));
                } else {
                    product!(p => $loadz(low, b.add(p * ldb)));
                }
                for (i, &v) in acc.iter().enumerate() {
                    // SAFETY: as above.
                    unsafe { put!(c.add(i * ldc), v, low) };
                }
            }
        }
    };
}

avx512_kernel!(sgemm_avx512, sgemm_tile, f32, __m512, __mmask16, 16,
    zero: _mm512_setzero_ps, load: _mm512_loadu_ps, loadz: _mm512_maskz_loadu_ps,
    store: _mm512_mask_storeu_ps, splat: _mm512_set1_ps, fma: _mm512_fmadd_ps,
    add: _mm512_add_ps);
avx512_kernel!(dgemm_avx512, dgemm_tile, f64, __m512d, __mmask8, 8,
    zero: _mm512_setzero_pd, load: _mm512_loadu_pd, loadz: _mm512_maskz_loadu_pd,
    store: _mm512_mask_storeu_pd, splat: _mm512_set1_pd, fma: _mm512_fmadd_pd,
    add: _mm512_add_pd);
