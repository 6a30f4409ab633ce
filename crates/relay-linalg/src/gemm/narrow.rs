//! Products with a narrow result: `c = a · b` where `c` has at most [`MAX_NARROW`] columns (a
//! small-head attention's `probabilities · V`, `[128, 128] × [128, 8]`). Each row of `c` is the
//! sum over `p` of `a[i, p]` times row `p` of `b`, one vector of `b` per step, eight rows of
//! `a` at a time, `a` read in place: the GEMM would pack all of `a` to fill tiles of which a
//! narrow `c` uses a fraction. One per instruction set, chosen through [`Ops`](crate::Ops).

use crate::isa::Isa;

/// The most columns a narrow product has (one AVX-512 vector of `float32`).
pub const MAX_NARROW: usize = 16;

/// `c = a · b` for `a` `m × k` (rows `rsa` apart), `b` `k × n` (rows `rsb` apart), `c` `m × n`
/// (rows `rsc` apart), `n ≤ MAX_NARROW`, every row contiguous.
///
/// # Safety
///
/// The views are valid for the elements they address, `c` is writable and overlaps neither
/// operand, `n ≤ MAX_NARROW`, and the CPU runs the instruction set the function was chosen for.
pub type NarrowFn<T> = unsafe fn(p: Narrow<T>);

/// The operands of a narrow product (see [`NarrowFn`]).
#[derive(Clone, Copy, Debug)]
pub struct Narrow<T> {
    /// Rows of `a` and `c`.
    pub m: usize,
    /// Columns of `b` and `c` (at most [`MAX_NARROW`]).
    pub n: usize,
    /// Columns of `a`, rows of `b`.
    pub k: usize,
    /// `a[0, 0]`.
    pub a: *const T,
    /// Elements between rows of `a`.
    pub rsa: usize,
    /// `b[0, 0]`.
    pub b: *const T,
    /// Elements between rows of `b`.
    pub rsb: usize,
    /// `c[0, 0]`.
    pub c: *mut T,
    /// Elements between rows of `c`.
    pub rsc: usize,
}

/// The `float32` narrow product of `isa` (the portable one if the CPU lacks it).
pub fn snarrow_for(isa: Isa) -> NarrowFn<f32> {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F (checked); the views are the caller's contract.
        Isa::Avx512 if Isa::detected() == Isa::Avx512 => |p| unsafe { narrow_f32_avx512(p) },
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA (checked); the views are the caller's contract.
        Isa::Avx2 if Isa::detected() != Isa::Portable => |p| unsafe { narrow_f32_avx2(p) },
        _ => narrow_portable,
    }
}

/// Rows computed together: independent accumulators that hide the FMA latency.
const ROWS: usize = 8;

/// The portable narrow product: sixteen-lane accumulators the compiler vectorizes.
///
/// # Safety
///
/// As [`NarrowFn`].
pub unsafe fn narrow_portable(p: Narrow<f32>) {
    for i0 in (0..p.m).step_by(ROWS) {
        let rows = ROWS.min(p.m - i0);
        let mut acc = [[0f32; MAX_NARROW]; ROWS];
        for l in 0..p.k {
            let mut bv = [0f32; MAX_NARROW];
            // SAFETY: row `l` of `b` has `n` elements.
            unsafe { std::ptr::copy_nonoverlapping(p.b.add(l * p.rsb), bv.as_mut_ptr(), p.n) };
            for (r, acc) in acc.iter_mut().enumerate().take(rows) {
                // SAFETY: `(i0 + r, l)` is an element of `a`.
                let av = unsafe { *p.a.add((i0 + r) * p.rsa + l) };
                for (s, b) in acc.iter_mut().zip(bv) {
                    *s = av.mul_add(b, *s);
                }
            }
        }
        for (r, acc) in acc.iter().enumerate().take(rows) {
            // SAFETY: row `i0 + r` of `c` has `n` elements.
            unsafe { std::ptr::copy_nonoverlapping(acc.as_ptr(), p.c.add((i0 + r) * p.rsc), p.n) };
        }
    }
}

/// The AVX-512 narrow product: one masked 16-lane vector per row, or for at most 8 columns
/// ([`narrow_pairs_avx512`]) two steps of `k` per vector.
///
/// # Safety
///
/// As [`NarrowFn`]; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn narrow_f32_avx512(p: Narrow<f32>) {
    use std::arch::x86_64::*;
    if p.n <= 8 && p.k >= 2 {
        // SAFETY: forwarded.
        return unsafe { narrow_pairs_avx512(p) };
    }
    let mask: __mmask16 = if p.n >= 16 { 0xffff } else { (1u16 << p.n) - 1 };
    for i0 in (0..p.m).step_by(ROWS) {
        let rows = ROWS.min(p.m - i0);
        let mut acc = [_mm512_setzero_ps(); ROWS];
        for l in 0..p.k {
            // SAFETY: masked: lanes `0..n` of row `l` of `b`.
            let bv = unsafe { _mm512_maskz_loadu_ps(mask, p.b.add(l * p.rsb)) };
            for (r, acc) in acc.iter_mut().enumerate().take(rows) {
                // SAFETY: `(i0 + r, l)` is an element of `a`.
                let av = _mm512_set1_ps(unsafe { *p.a.add((i0 + r) * p.rsa + l) });
                *acc = _mm512_fmadd_ps(av, bv, *acc);
            }
        }
        for (r, acc) in acc.iter().enumerate().take(rows) {
            // SAFETY: masked: lanes `0..n` of row `i0 + r` of `c`.
            unsafe { _mm512_mask_storeu_ps(p.c.add((i0 + r) * p.rsc), mask, *acc) };
        }
    }
}

thread_local! {
    /// A thread's rows of `b` interleaved in pairs ([`narrow_pairs_avx512`]).
    static PAIRS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Rows of `a` computed together by [`narrow_pairs_avx512`].
const PAIR_ROWS: usize = 12;

/// The AVX-512 narrow product for `n ≤ 8`: a vector holds two steps of `k`, so a product of 8
/// columns fills all 16 lanes. Rows `2q` and `2q + 1` of `b` are interleaved once per call,
/// a vector permute per pair (lane `2j + h` holds `b[2q + h, j]`); per row of `a`, `a[i, 2q]` and `a[i, 2q + 1]` are
/// broadcast as a pair, and lanes `2j` and `2j + 1` of the sum add up to `c[i, j]`.
///
/// # Safety
///
/// As [`NarrowFn`] with `n ≤ 8` and `k ≥ 2`; the CPU has AVX-512F.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn narrow_pairs_avx512(p: Narrow<f32>) {
    use std::arch::x86_64::*;
    let pairs = p.k.div_ceil(2);
    PAIRS.with_borrow_mut(|packed| {
        packed.resize(pairs * 16, 0.0);
        let mask = ((1u32 << p.n) - 1) as __mmask16;
        // Lane 2j from row 2q's lane j, lane 2j + 1 from row 2q + 1's.
        let interleave = _mm512_setr_epi32(0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
        for q in 0..pairs {
            let row = |l: usize| match l < p.k {
                // SAFETY: masked: lanes `0..n` of row `l` of `b`.
                true => unsafe { _mm512_maskz_loadu_ps(mask, p.b.add(l * p.rsb)) },
                false => _mm512_setzero_ps(),
            };
            let pair = _mm512_permutex2var_ps(row(2 * q), interleave, row(2 * q + 1));
            // SAFETY: pair `q` of the packed rows.
            unsafe { _mm512_storeu_ps(packed.as_mut_ptr().add(q * 16), pair) };
        }
        let mut i0 = 0;
        for group in [PAIR_ROWS, 4, 1] {
            while p.m - i0 >= group {
                // SAFETY: rows `i0..i0 + group` of `a` and `c`; `packed` holds the pairs.
                unsafe {
                    match group {
                        PAIR_ROWS => pair_rows::<PAIR_ROWS>(&p, packed, i0),
                        4 => pair_rows::<4>(&p, packed, i0),
                        _ => pair_rows::<1>(&p, packed, i0),
                    }
                }
                i0 += group;
            }
        }
    })
}

/// Rows `i0..i0 + R` of [`narrow_pairs_avx512`]'s product from the interleaved pairs
/// `packed` (the accumulators in registers: `R` is a constant).
///
/// # Safety
///
/// As [`narrow_pairs_avx512`]; the rows are rows of `a` and `c`, `packed` holds `k.div_ceil(2)`
/// pairs.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx512f")]
unsafe fn pair_rows<const R: usize>(p: &Narrow<f32>, packed: &[f32], i0: usize) {
    use std::arch::x86_64::*;
    let whole = p.k / 2;
    let mut acc = [_mm512_setzero_ps(); R];
    for q in 0..whole {
        // SAFETY: pair `q` of the packed rows.
        let bv = unsafe { _mm512_loadu_ps(packed.as_ptr().add(q * 16)) };
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `(i0 + r, 2q)` and `(i0 + r, 2q + 1)` are elements of `a`.
            let pair = unsafe {
                std::ptr::read_unaligned(p.a.add((i0 + r) * p.rsa + 2 * q).cast::<f64>())
            };
            *acc = _mm512_fmadd_ps(_mm512_castpd_ps(_mm512_set1_pd(pair)), bv, *acc);
        }
    }
    if p.k % 2 == 1 {
        // The last step alone: its pair's odd lanes are zero.
        // SAFETY: the last pair of the packed rows.
        let bv = unsafe { _mm512_loadu_ps(packed.as_ptr().add(whole * 16)) };
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `(i0 + r, k - 1)` is an element of `a`.
            let av = _mm512_set1_ps(unsafe { *p.a.add((i0 + r) * p.rsa + p.k - 1) });
            *acc = _mm512_fmadd_ps(av, bv, *acc);
        }
    }
    let mask = ((1u32 << p.n) - 1) as __mmask16;
    for (r, acc) in acc.iter().enumerate() {
        let sums = _mm512_add_ps(*acc, _mm512_permute_ps::<0b1011_0001>(*acc));
        let c = _mm512_maskz_compress_ps(0x5555, sums);
        // SAFETY: masked: lanes `0..n` of row `i0 + r` of `c`.
        unsafe { _mm512_mask_storeu_ps(p.c.add((i0 + r) * p.rsc), mask, c) };
    }
}

/// The AVX2 narrow product: one 8-lane vector per row of `c` for `n ≤ 8`, two for wider,
/// [`AVX2_ROWS`] accumulators in registers (rows of `a` broadcast in place). The partial
/// vectors of `b` and `c` are masked; whole ones are plain loads and stores (a masked store
/// is microcoded on AMD's cores).
///
/// # Safety
///
/// As [`NarrowFn`]; the CPU has AVX2 and FMA.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn narrow_f32_avx2(p: Narrow<f32>) {
    use std::arch::x86_64::*;
    let lane = |j: usize| if j < p.n { -1 } else { 0 };
    let masks = [0, 8].map(|from| {
        let m: [i32; 8] = std::array::from_fn(|j| lane(from + j));
        // SAFETY: `m` holds 8 integers.
        unsafe { _mm256_loadu_si256(m.as_ptr().cast()) }
    });
    let mut i0 = 0;
    // SAFETY (every call): rows `i0..i0 + group` of `a` and `c`; the views are the caller's.
    if p.n <= 8 {
        for group in [AVX2_ROWS, 4, 1] {
            while p.m - i0 >= group {
                unsafe {
                    match group {
                        AVX2_ROWS => rows_avx2::<AVX2_ROWS, 1>(&p, &masks, i0),
                        4 => rows_avx2::<4, 1>(&p, &masks, i0),
                        _ => rows_avx2::<1, 1>(&p, &masks, i0),
                    }
                }
                i0 += group;
            }
        }
    } else {
        for group in [AVX2_ROWS / 2, 2, 1] {
            while p.m - i0 >= group {
                unsafe {
                    match group {
                        2 => rows_avx2::<2, 2>(&p, &masks, i0),
                        1 => rows_avx2::<1, 2>(&p, &masks, i0),
                        _ => rows_avx2::<{ AVX2_ROWS / 2 }, 2>(&p, &masks, i0),
                    }
                }
                i0 += group;
            }
        }
    }
}

/// Accumulators of [`narrow_f32_avx2`]: twelve of the sixteen registers, leaving one for `b`
/// and one for a broadcast row of `a`.
const AVX2_ROWS: usize = 12;

/// Rows `i0..i0 + R` of [`narrow_f32_avx2`]'s product, `H` vectors per row (the accumulators
/// in registers: `R` and `H` are constants); `masks[h]` selects vector `h`'s lanes below `n`.
///
/// # Safety
///
/// As [`narrow_f32_avx2`]; the rows are rows of `a` and `c`, and `n ≤ 8 H`.
#[cfg(target_arch = "x86_64")]
#[inline]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2<const R: usize, const H: usize>(
    p: &Narrow<f32>,
    masks: &[std::arch::x86_64::__m256i; 2],
    i0: usize,
) {
    use std::arch::x86_64::*;
    let whole = |h: usize| p.n >= 8 * (h + 1);
    let mut acc = [[_mm256_setzero_ps(); H]; R];
    for l in 0..p.k {
        let bv: [__m256; H] = std::array::from_fn(|h| {
            let at = p.b.wrapping_add(l * p.rsb + 8 * h);
            // SAFETY: lanes `8h..n` of row `l` of `b`, masked unless all eight are.
            unsafe {
                match whole(h) {
                    true => _mm256_loadu_ps(at),
                    false => _mm256_maskload_ps(at, masks[h]),
                }
            }
        });
        for (r, acc) in acc.iter_mut().enumerate() {
            // SAFETY: `(i0 + r, l)` is an element of `a`.
            let av = _mm256_set1_ps(unsafe { *p.a.add((i0 + r) * p.rsa + l) });
            for (s, b) in acc.iter_mut().zip(bv) {
                *s = _mm256_fmadd_ps(av, b, *s);
            }
        }
    }
    for (r, acc) in acc.iter().enumerate() {
        for (h, s) in acc.iter().enumerate() {
            let at = p.c.wrapping_add((i0 + r) * p.rsc + 8 * h);
            // SAFETY: lanes `8h..n` of row `i0 + r` of `c`, masked unless all eight are.
            unsafe {
                match whole(h) {
                    true => _mm256_storeu_ps(at, *s),
                    false => _mm256_maskstore_ps(at, masks[h], *s),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every path this CPU runs against a plain triple loop, at every narrow width and at
    /// row counts that leave a partial group of eight.
    #[test]
    fn every_path_agrees_with_the_reference() {
        for isa in Isa::available() {
            let narrow = snarrow_for(isa);
            for n in 1..=MAX_NARROW {
                for (m, k) in [(1, 1), (7, 3), (8, 128), (19, 33), (64, 0)] {
                    let a: Vec<f32> = (0..m * k).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
                    let b: Vec<f32> = (0..k * n).map(|i| ((i * 5) % 11) as f32 * 0.5).collect();
                    let mut c = vec![f32::NAN; m * n];
                    let p = Narrow {
                        m,
                        n,
                        k,
                        a: a.as_ptr(),
                        rsa: k,
                        b: b.as_ptr(),
                        rsb: n,
                        c: c.as_mut_ptr(),
                        rsc: n,
                    };
                    // SAFETY: the views are the vectors'; `isa` runs here.
                    unsafe { narrow(p) };
                    for i in 0..m {
                        for j in 0..n {
                            let want: f32 = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
                            assert_eq!(c[i * n + j], want, "{isa} {m}×{k}×{n} at ({i}, {j})");
                        }
                    }
                }
            }
        }
    }
}
