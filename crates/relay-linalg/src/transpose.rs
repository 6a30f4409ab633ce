//! Transposes of blocks of 4-byte elements, for the packing of a GEMM operand stored
//! transposed and for transposing copies: 8×8 tiles through AVX registers (eight loads, the
//! unpack–shuffle–permute network, eight stores, as MLAS's `MlasTranspose`) when the CPU has
//! AVX, a tile of fewer than eight rows padded in registers and stored by its lanes, and the
//! columns past the last whole tile (and every element without AVX) one at a time.

/// Writes the transpose of the `rows × cols` block at `src` (row `i` at `src + i·src_ld`,
/// its elements contiguous) to `dst` (row `j` at `dst + j·dst_ld`, contiguous):
/// `dst[j·dst_ld + i] = src[i·src_ld + j]`.
///
/// # Safety
///
/// Both blocks lie inside their buffers and do not overlap.
pub(crate) unsafe fn transpose_u32(
    src: *const u32,
    src_ld: isize,
    dst: *mut u32,
    dst_ld: isize,
    rows: usize,
    cols: usize,
) {
    #[cfg(target_arch = "x86_64")]
    if has_avx() {
        // SAFETY: the CPU has AVX; forwarded.
        unsafe { avx::transpose(src, src_ld, dst, dst_ld, rows, cols) };
        return;
    }
    // SAFETY: forwarded.
    unsafe { by_element(src, src_ld, dst, dst_ld, (0, rows), (0, cols)) }
}

/// [`transpose_u32`] of rows `r0..r1` and columns `c0..c1` of the block, one element at a
/// time.
///
/// # Safety
///
/// As [`transpose_u32`], for the part.
unsafe fn by_element(
    src: *const u32,
    src_ld: isize,
    dst: *mut u32,
    dst_ld: isize,
    (r0, r1): (usize, usize),
    (c0, c1): (usize, usize),
) {
    for j in c0..c1 {
        for i in r0..r1 {
            // SAFETY: `(i, j)` is inside the block (forwarded).
            unsafe {
                *dst.offset(j as isize * dst_ld + i as isize) =
                    *src.offset(i as isize * src_ld + j as isize);
            }
        }
    }
}

/// Whether the CPU has AVX, detected once.
#[cfg(target_arch = "x86_64")]
fn has_avx() -> bool {
    static AVX: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVX.get_or_init(|| std::is_x86_feature_detected!("avx"))
}

#[cfg(target_arch = "x86_64")]
mod avx {
    use std::arch::x86_64::*;

    /// [`super::transpose_u32`] with AVX.
    ///
    /// # Safety
    ///
    /// The CPU has AVX; as [`super::transpose_u32`].
    #[target_feature(enable = "avx")]
    pub(super) unsafe fn transpose(
        src: *const u32,
        src_ld: isize,
        dst: *mut u32,
        dst_ld: isize,
        rows: usize,
        cols: usize,
    ) {
        let whole = cols / 8 * 8;
        for i0 in (0..rows).step_by(8) {
            let r = (rows - i0).min(8);
            for j0 in (0..whole).step_by(8) {
                // SAFETY: rows `i0..i0 + r`, columns `j0..j0 + 8` are inside the block.
                unsafe {
                    let at = |i: usize| src.offset((i0 + i) as isize * src_ld + j0 as isize);
                    let t = tile(std::array::from_fn(|i| match i < r {
                        true => _mm256_loadu_ps(at(i).cast()),
                        false => _mm256_setzero_ps(),
                    }));
                    for (q, v) in t.into_iter().enumerate() {
                        let row = dst.offset((j0 + q) as isize * dst_ld + i0 as isize);
                        store_lanes(row.cast(), v, r);
                    }
                }
            }
            // SAFETY: the columns past the whole tiles (forwarded).
            unsafe { super::by_element(src, src_ld, dst, dst_ld, (i0, i0 + r), (whole, cols)) };
        }
    }

    /// The transpose of the 8×8 tile whose rows are `r`.
    #[inline]
    #[target_feature(enable = "avx")]
    fn tile(r: [__m256; 8]) -> [__m256; 8] {
        // Pairs of rows interleaved, then pairs of pairs, then the 128-bit halves.
        let t0 = _mm256_unpacklo_ps(r[0], r[1]);
        let t1 = _mm256_unpackhi_ps(r[0], r[1]);
        let t2 = _mm256_unpacklo_ps(r[2], r[3]);
        let t3 = _mm256_unpackhi_ps(r[2], r[3]);
        let t4 = _mm256_unpacklo_ps(r[4], r[5]);
        let t5 = _mm256_unpackhi_ps(r[4], r[5]);
        let t6 = _mm256_unpacklo_ps(r[6], r[7]);
        let t7 = _mm256_unpackhi_ps(r[6], r[7]);
        let u0 = _mm256_shuffle_ps::<0x44>(t0, t2);
        let u1 = _mm256_shuffle_ps::<0xEE>(t0, t2);
        let u2 = _mm256_shuffle_ps::<0x44>(t1, t3);
        let u3 = _mm256_shuffle_ps::<0xEE>(t1, t3);
        let u4 = _mm256_shuffle_ps::<0x44>(t4, t6);
        let u5 = _mm256_shuffle_ps::<0xEE>(t4, t6);
        let u6 = _mm256_shuffle_ps::<0x44>(t5, t7);
        let u7 = _mm256_shuffle_ps::<0xEE>(t5, t7);
        [
            _mm256_permute2f128_ps::<0x20>(u0, u4),
            _mm256_permute2f128_ps::<0x20>(u1, u5),
            _mm256_permute2f128_ps::<0x20>(u2, u6),
            _mm256_permute2f128_ps::<0x20>(u3, u7),
            _mm256_permute2f128_ps::<0x31>(u0, u4),
            _mm256_permute2f128_ps::<0x31>(u1, u5),
            _mm256_permute2f128_ps::<0x31>(u2, u6),
            _mm256_permute2f128_ps::<0x31>(u3, u7),
        ]
    }

    /// Stores the first `n` (at most 8) lanes of `v` at `p`.
    ///
    /// # Safety
    ///
    /// The CPU has AVX; `p` is valid for `n` elements.
    #[inline]
    #[target_feature(enable = "avx")]
    unsafe fn store_lanes(p: *mut f32, v: __m256, n: usize) {
        // SAFETY: each store writes lanes below `n` (unaligned accesses).
        unsafe {
            if n == 8 {
                _mm256_storeu_ps(p, v);
                return;
            }
            let (mut p, mut part, mut rest) = (p, _mm256_castps256_ps128(v), n);
            if rest >= 4 {
                _mm_storeu_ps(p, part);
                (p, part, rest) = (p.add(4), _mm256_extractf128_ps::<1>(v), rest - 4);
            }
            if rest >= 2 {
                _mm_storel_epi64(p.cast(), _mm_castps_si128(part));
                (p, part, rest) = (p.add(2), _mm_movehl_ps(part, part), rest - 2);
            }
            if rest == 1 {
                _mm_store_ss(p, part);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every block of 1..20 rows by 1..20 columns, from and into rows longer than the block,
    /// on each path, against the definition; the elements around the destination block are
    /// untouched.
    #[test]
    fn every_block_shape_matches_the_definition() {
        type Path = unsafe fn(*const u32, isize, *mut u32, isize, usize, usize);
        let element: Path = |s, sl, d, dl, rows, cols| {
            // SAFETY: forwarded.
            unsafe { by_element(s, sl, d, dl, (0, rows), (0, cols)) }
        };
        for (name, path) in [("chosen", transpose_u32 as Path), ("by element", element)] {
            for rows in 1..20usize {
                for cols in 1..20usize {
                    check(name, path, rows, cols);
                }
            }
        }
    }

    fn check(
        name: &str,
        path: unsafe fn(*const u32, isize, *mut u32, isize, usize, usize),
        rows: usize,
        cols: usize,
    ) {
        let (src_ld, dst_ld) = (cols + 3, rows + 5);
        let src: Vec<u32> = (0..rows * src_ld).map(|k| k as u32 + 1).collect();
        let mut dst = vec![u32::MAX; cols * dst_ld];
        // SAFETY: both blocks are inside their vectors.
        unsafe {
            path(
                src.as_ptr(),
                src_ld as isize,
                dst.as_mut_ptr(),
                dst_ld as isize,
                rows,
                cols,
            )
        };
        for j in 0..cols {
            for k in 0..dst_ld {
                let want = match k < rows {
                    true => src[k * src_ld + j],
                    false => u32::MAX,
                };
                assert_eq!(
                    dst[j * dst_ld + k],
                    want,
                    "{name}: {rows}x{cols} at ({j}, {k})"
                );
            }
        }
    }
}
