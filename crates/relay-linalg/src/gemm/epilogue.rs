//! The epilogue of a GEMM: what a fused kernel does to the product before storing it — a
//! batch norm's multiply and add, a bias, a residual add, `relu` or `clip` — applied by the
//! driver to each tile of `c` right after the tile's last block of the inner dimension is
//! computed, while the tile is in L1, instead of in a second pass over the whole result.
//!
//! Each step computes exactly what the unfused loop nest computes, in the same order and
//! with the same rounding (a multiply, then an add: no fused multiply-add), and the clamps
//! keep their selects' rules for NaN and signed zero.

use super::{Isa, Matrix};

/// The most operand steps an epilogue has.
pub const MAX_STEPS: usize = 4;

/// How a step combines the result with its operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// `v · x`.
    Mul,
    /// `v + x`.
    Add,
}

/// The lower clamp of an epilogue.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Lower<T> {
    /// None.
    None,
    /// `relu`'s `v > lo ? v : lo` (NaN becomes `lo`).
    Relu(T),
    /// `clip`'s `v < lo ? lo : v` (NaN stays NaN).
    Clip(T),
}

impl<T: Copy> Lower<T> {
    /// The clamp as the operand of a vector `max` — its bound, or `none` (an infinite bound)
    /// without one — and whether it is `relu`'s (`max(v, lo)`) rather than `clip`'s
    /// (`max(lo, v)`).
    pub fn as_max(self, none: T) -> (T, bool) {
        match self {
            Lower::None => (none, false),
            Lower::Relu(lo) => (lo, true),
            Lower::Clip(lo) => (lo, false),
        }
    }
}

/// An epilogue: `v = lower(upper(steps(v)))` for each element `v` of the result, where each
/// step multiplies or adds the element of its operand at the same `(i, j)` — an operand is
/// a view the shape of `c`, with a stride of 0 along an axis it is broadcast on (a
/// per-channel scale has column stride 0) — and `upper` is `clip`'s `hi < v ? hi : v`.
#[derive(Clone, Copy, Debug)]
pub struct Epilogue<T> {
    /// The steps, in order.
    pub steps: [Option<(Step, Matrix<T>)>; MAX_STEPS],
    /// The upper clamp's bound, if any.
    pub upper: Option<T>,
    /// The lower clamp.
    pub lower: Lower<T>,
}

// SAFETY: the operands are only read, by the threads of one GEMM; the caller keeps them alive.
unsafe impl<T> Send for Epilogue<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Epilogue<T> {}

impl<T: Epilogued> Epilogue<T> {
    /// The epilogue of the transposed product.
    pub fn transposed(&self) -> Epilogue<T> {
        Epilogue {
            steps: self.steps.map(|s| s.map(|(k, m)| (k, m.transposed()))),
            ..*self
        }
    }

    /// Applies the epilogue to the `rows × cols` block of `c` at `(i0, j0)`, line by line in
    /// the order of `c`'s memory (rows, or columns when those are contiguous), with the
    /// vector instructions of `isa`.
    ///
    /// # Safety
    ///
    /// The block lies inside `c` (writable) and inside every step's operand.
    pub unsafe fn apply(
        &self,
        isa: Isa,
        c: &Matrix<T>,
        (i0, rows): (usize, usize),
        (j0, cols): (usize, usize),
    ) {
        let by_columns = c.rs == 1 && c.cs != 1;
        // (between lines, along a line) strides of a view.
        let strides = |m: &Matrix<T>| {
            if by_columns {
                (m.cs, m.rs)
            } else {
                (m.rs, m.cs)
            }
        };
        let (lines, len) = if by_columns {
            (cols, rows)
        } else {
            (rows, cols)
        };
        let (between, along) = strides(c);
        // SAFETY: `(i0, j0)` is inside `c` and every operand (the contract).
        let block = unsafe {
            Block {
                out: c.at(i0, j0).cast_mut(),
                between,
                along,
                lines,
                len,
                steps: self.steps.map(|s| {
                    s.map(|(k, m)| {
                        let (b, a) = strides(&m);
                        (k, m.at(i0, j0), b, a)
                    })
                }),
                upper: self.upper,
                lower: self.lower,
            }
        };
        // SAFETY: the block's elements are inside `c` and the operands.
        unsafe { T::block(&block, isa) };
    }
}

impl<T> Epilogue<T> {
    /// Asks the CPU to bring the `rows × cols` block of `c` at `(i0, j0)` and the elements
    /// the steps read for it (where they are not broadcast) into cache: called before the
    /// block's product is computed, so that the epilogue after it finds them there (a block
    /// of a large result, or of a residual, read tile by tile a few rows apart, would
    /// otherwise miss the cache line by line, each miss waited for).
    pub fn prefetch(&self, c: &Matrix<T>, (i0, rows): (usize, usize), (j0, cols): (usize, usize)) {
        let by_columns = c.rs == 1 && c.cs != 1;
        let result = std::iter::once((true, c));
        let operands = self.steps.iter().flatten().map(|(_, m)| (false, m));
        for (write, m) in result.chain(operands) {
            let (lines, len, along) = if by_columns {
                (cols, rows, m.rs)
            } else {
                (rows, cols, m.cs)
            };
            if along == 0 {
                continue;
            }
            let bytes = (len - 1) as isize * along * size_of::<T>() as isize;
            for l in 0..lines {
                let (i, j) = if by_columns {
                    (i0, j0 + l)
                } else {
                    (i0 + l, j0)
                };
                let first = m.ptr.wrapping_offset(i as isize * m.rs + j as isize * m.cs);
                let first = first.cast::<u8>();
                let mut at = 0;
                while at <= bytes {
                    prefetch(first.wrapping_offset(at), write);
                    at += 64;
                }
                prefetch(first.wrapping_offset(bytes), write);
            }
        }
    }
}

/// A hint to load the cache line holding `p`, to be written when `write` (no effect on other
/// targets; never faults).
#[inline(always)]
pub(super) fn prefetch(p: *const u8, write: bool) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch does not access memory architecturally and never faults.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_ET0, _MM_HINT_T0, _mm_prefetch};
        if write {
            _mm_prefetch::<_MM_HINT_ET0>(p.cast());
        } else {
            _mm_prefetch::<_MM_HINT_T0>(p.cast());
        }
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, write);
}

/// A block of `c` as lines: `lines` lines `between` elements apart from `out`, each of `len`
/// elements `along` apart; each step's operand from its pointer with its strides between
/// lines and along them.
pub struct Block<T> {
    out: *mut T,
    between: isize,
    along: isize,
    lines: usize,
    len: usize,
    steps: [Option<(Step, *const T, isize, isize)>; MAX_STEPS],
    upper: Option<T>,
    lower: Lower<T>,
}

/// An element type with an epilogue: vectorized where the ISA allows it.
pub trait Epilogued:
    Copy + PartialOrd + std::ops::Add<Output = Self> + std::ops::Mul<Output = Self>
{
    /// Applies the epilogue to `block`, with the vector instructions of `isa`.
    ///
    /// # Safety
    ///
    /// The block's elements are valid (`out` writable) and the CPU has `isa`.
    unsafe fn block(block: &Block<Self>, isa: Isa);

    /// `v` rounded to this type (a clamp's bound).
    fn from_f64(v: f64) -> Self;
}

impl Epilogued for f64 {
    unsafe fn block(block: &Block<f64>, _: Isa) {
        // SAFETY: forwarded.
        unsafe { scalar_block(block) }
    }

    fn from_f64(v: f64) -> f64 {
        v
    }
}

impl Epilogued for f32 {
    unsafe fn block(block: &Block<f32>, isa: Isa) {
        #[cfg(target_arch = "x86_64")]
        if block.along == 1
            && block
                .steps
                .iter()
                .flatten()
                .all(|&(.., a)| a == 0 || a == 1)
        {
            // SAFETY: forwarded; the CPU has `isa`; the lines and the operands are contiguous
            // or broadcast along them.
            match isa {
                Isa::Avx512 => return unsafe { x86::block_avx512(block) },
                Isa::Avx2 => return unsafe { x86::block_avx2(block) },
                Isa::Portable => {}
            }
        }
        // SAFETY: forwarded.
        unsafe { scalar_block(block) }
    }

    fn from_f64(v: f64) -> f32 {
        v as f32
    }
}

/// `v` through one step.
#[inline(always)]
pub(super) fn step<T: Epilogued>(kind: Step, v: T, x: T) -> T {
    match kind {
        Step::Mul => v * x,
        Step::Add => v + x,
    }
}

/// `v` through the clamps.
#[inline(always)]
pub(super) fn clamp<T: Epilogued>(v: T, upper: Option<T>, lower: Lower<T>) -> T {
    let v = match upper {
        Some(hi) if hi < v => hi,
        _ => v,
    };
    match lower {
        Lower::None => v,
        Lower::Relu(lo) => {
            if v > lo {
                v
            } else {
                lo
            }
        }
        Lower::Clip(lo) => {
            if v < lo {
                lo
            } else {
                v
            }
        }
    }
}

/// The epilogue over `block`, element by element.
///
/// # Safety
///
/// As [`Epilogued::block`].
unsafe fn scalar_block<T: Epilogued>(b: &Block<T>) {
    for l in 0..b.lines as isize {
        for x in 0..b.len as isize {
            // SAFETY: element `x` of line `l` of the block and of each operand is valid (the
            // contract).
            unsafe {
                let out = b.out.offset(l * b.between + x * b.along);
                let mut v = *out;
                for &(kind, p, between, along) in b.steps.iter().flatten() {
                    v = step(kind, v, *p.offset(l * between + x * along));
                }
                *out = clamp(v, b.upper, b.lower);
            }
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use super::{Block, Lower, MAX_STEPS, Step};

    /// An operand step of a line: its kind and operand, `(kind, pointer, between, along)`.
    type Steps = [(Step, *const f32, isize, isize); MAX_STEPS];

    /// The code of a step for [`block_code`]: bit 0 set for an add (else a multiply), bit 1
    /// for an operand contiguous along the lines (else broadcast: one value per line).
    const fn code(kind: Step, along: isize) -> u32 {
        (matches!(kind, Step::Add) as u32) | ((along != 0) as u32) << 1
    }

    /// [`super::scalar_block`] with AVX-512, sixteen lanes at a time (the last of a line
    /// masked): lines contiguous, each operand contiguous or broadcast along them. The
    /// common sequences of steps (a batch norm's multiply and add, with a residual add; a
    /// bias along either axis) run a loop compiled for them ([`block_code`]), others one
    /// that decodes each step.
    ///
    /// # Safety
    ///
    /// As [`super::Epilogued::block`]; the CPU has AVX-512F, `b.along == 1` and every
    /// operand's stride along the lines is 0 or 1.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn block_avx512(b: &Block<f32>) {
        let mut steps: Steps = [(Step::Add, std::ptr::null(), 0, 0); MAX_STEPS];
        let (mut n, mut codes) = (0, 0u32);
        for &s in b.steps.iter().flatten() {
            codes |= code(s.0, s.3) << (2 * n);
            steps[n] = s;
            n += 1;
        }
        let relu = matches!(b.lower, Lower::Relu(_));
        // SAFETY: forwarded (the steps are `b`'s).
        unsafe {
            macro_rules! known {
                ($(($n:literal, $code:expr)),*) => {
                    match (n, codes, relu) {
                        $(
                            ($n, c, false) if c == $code => block_code::<$n, { $code }, false>(b, &steps),
                            ($n, c, true) if c == $code => block_code::<$n, { $code }, true>(b, &steps),
                        )*
                        _ => block_steps(b, &steps[..n]),
                    }
                };
            }
            const MUL_B: u32 = 0;
            const ADD_B: u32 = 1;
            const ADD_C: u32 = 3;
            known!(
                (0, 0),
                (1, MUL_B),
                (1, ADD_B),
                (1, ADD_C),
                (2, MUL_B | ADD_B << 2),
                (2, ADD_B | ADD_C << 2),
                (2, ADD_C | ADD_C << 2),
                (3, MUL_B | ADD_B << 2 | ADD_C << 4)
            )
        }
    }

    /// The clamps of `b` as two vectors and how to apply them: `min(hi, v)` is `hi < v ? hi
    /// : v` and `max(lo, v)` is `v < lo ? lo : v` (x86's `min`/`max` return the second
    /// operand unless the comparison holds), `max(v, lo)` is `v > lo ? v : lo` (`relu`); no
    /// clamp is an infinite bound.
    #[target_feature(enable = "avx512f")]
    fn bounds(b: &Block<f32>) -> (__m512, __m512) {
        let (lo, _) = b.lower.as_max(f32::NEG_INFINITY);
        let hi = b.upper.unwrap_or(f32::INFINITY);
        (_mm512_set1_ps(hi), _mm512_set1_ps(lo))
    }

    /// `v` through the clamps of [`bounds`].
    #[inline(always)]
    unsafe fn clamp(v: __m512, hi: __m512, lo: __m512, relu: bool) -> __m512 {
        // SAFETY: the caller has AVX-512F.
        unsafe {
            let v = _mm512_min_ps(hi, v);
            if relu {
                _mm512_max_ps(v, lo)
            } else {
                _mm512_max_ps(lo, v)
            }
        }
    }

    /// The mask of the first `lanes` (at most 16) lanes.
    #[inline(always)]
    fn mask(lanes: usize) -> __mmask16 {
        if lanes >= 16 { !0 } else { (1 << lanes) - 1 }
    }

    /// [`block_avx512`] for `N` steps whose codes ([`code`]) are `CODES` (two bits each,
    /// the first step lowest): the steps unrolled, broadcast operands loaded once per line.
    ///
    /// # Safety
    ///
    /// As [`block_avx512`]; `steps` starts with `b`'s `N` steps.
    #[target_feature(enable = "avx512f")]
    unsafe fn block_code<const N: usize, const CODES: u32, const RELU: bool>(
        b: &Block<f32>,
        steps: &Steps,
    ) {
        let (hi, lo) = bounds(b);
        let add = |q: usize| CODES >> (2 * q) & 1 == 1;
        let contiguous = |q: usize| CODES >> (2 * q + 1) & 1 == 1;
        for l in 0..b.lines as isize {
            // SAFETY: line `l` is in the block and each operand (the contract).
            let (line, ptrs) = unsafe {
                (
                    b.out.offset(l * b.between),
                    std::array::from_fn::<_, N, _>(|q| steps[q].1.offset(l * steps[q].2)),
                )
            };
            let mut splat = [_mm512_setzero_ps(); N];
            for q in 0..N {
                if !contiguous(q) {
                    // SAFETY: a broadcast operand's element of the line.
                    splat[q] = _mm512_set1_ps(unsafe { *ptrs[q] });
                }
            }
            for x in (0..b.len).step_by(16) {
                let k = mask(b.len - x);
                // SAFETY: the line's lanes from `x` (masked past its end), and the
                // contiguous operands' likewise.
                unsafe {
                    let out = line.add(x);
                    let mut v = _mm512_maskz_loadu_ps(k, out.cast_const());
                    for q in 0..N {
                        let o = if contiguous(q) {
                            _mm512_maskz_loadu_ps(k, ptrs[q].add(x))
                        } else {
                            splat[q]
                        };
                        v = if add(q) {
                            _mm512_add_ps(v, o)
                        } else {
                            _mm512_mul_ps(v, o)
                        };
                    }
                    _mm512_mask_storeu_ps(out, k, clamp(v, hi, lo, RELU));
                }
            }
        }
    }

    /// [`block_avx512`] with AVX2: eight lanes at a time, each step decoded per vector.
    ///
    /// # Safety
    ///
    /// As [`block_avx512`], with AVX2 for AVX-512F.
    #[target_feature(enable = "avx2")]
    pub(super) unsafe fn block_avx2(b: &Block<f32>) {
        let (lo, relu) = b.lower.as_max(f32::NEG_INFINITY);
        let (hi, lo) = (
            _mm256_set1_ps(b.upper.unwrap_or(f32::INFINITY)),
            _mm256_set1_ps(lo),
        );
        let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for l in 0..b.lines as isize {
            // SAFETY: line `l` is in the block (the contract).
            let line = unsafe { b.out.offset(l * b.between) };
            for x in (0..b.len).step_by(8) {
                let k = _mm256_cmpgt_epi32(_mm256_set1_epi32((b.len - x).min(8) as i32), lane);
                // SAFETY: as in `block_code`, eight lanes at a time.
                unsafe {
                    let out = line.add(x);
                    let mut v = _mm256_maskload_ps(out, k);
                    for &(kind, p, between, along) in b.steps.iter().flatten() {
                        let p = p.offset(l * between);
                        let o = if along == 0 {
                            _mm256_set1_ps(*p)
                        } else {
                            _mm256_maskload_ps(p.add(x), k)
                        };
                        v = match kind {
                            Step::Mul => _mm256_mul_ps(v, o),
                            Step::Add => _mm256_add_ps(v, o),
                        };
                    }
                    let v = _mm256_min_ps(hi, v);
                    let v = if relu {
                        _mm256_max_ps(v, lo)
                    } else {
                        _mm256_max_ps(lo, v)
                    };
                    _mm256_maskstore_ps(out, k, v);
                }
            }
        }
    }

    /// [`block_avx512`] for any steps, each decoded per vector.
    ///
    /// # Safety
    ///
    /// As [`block_avx512`]; `steps` are `b`'s steps.
    #[target_feature(enable = "avx512f")]
    unsafe fn block_steps(b: &Block<f32>, steps: &[(Step, *const f32, isize, isize)]) {
        let (hi, lo) = bounds(b);
        let relu = matches!(b.lower, Lower::Relu(_));
        for l in 0..b.lines as isize {
            // SAFETY: line `l` is in the block (the contract).
            let line = unsafe { b.out.offset(l * b.between) };
            for x in (0..b.len).step_by(16) {
                let k = mask(b.len - x);
                // SAFETY: as in `block_code`.
                unsafe {
                    let out = line.add(x);
                    let mut v = _mm512_maskz_loadu_ps(k, out.cast_const());
                    for &(kind, p, between, along) in steps {
                        let p = p.offset(l * between);
                        let o = if along == 0 {
                            _mm512_set1_ps(*p)
                        } else {
                            _mm512_maskz_loadu_ps(k, p.add(x))
                        };
                        v = match kind {
                            Step::Mul => _mm512_mul_ps(v, o),
                            Step::Add => _mm512_add_ps(v, o),
                        };
                    }
                    _mm512_mask_storeu_ps(out, k, clamp(v, hi, lo, relu));
                }
            }
        }
    }
}

/// A step as a kernel passes it (`#[repr(C)]`, four 8-byte words): `kind` 0 (no step), 1
/// (multiply) or 2 (add), the operand's element `(0, 0)` and its row and column strides in
/// elements.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct StepCall {
    /// 0, 1 ([`Step::Mul`]) or 2 ([`Step::Add`]).
    pub kind: i64,
    /// The operand's element `(0, 0)`.
    pub ptr: *const u8,
    /// Its row stride.
    pub rs: i64,
    /// Its column stride.
    pub cs: i64,
}

/// An epilogue as a kernel passes it to the GEMM host functions (`#[repr(C)]`, twenty 8-byte
/// words): the steps (unused ones of kind 0), then the upper clamp (kind 0: none, 1: `clip`)
/// and its bound, then the lower clamp (kind 0: none, 1: `relu`'s, 2: `clip`'s) and its
/// bound, the bounds as `float64`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EpilogueCall {
    /// The steps, in order.
    pub steps: [StepCall; MAX_STEPS],
    /// The upper clamp's kind.
    pub upper_kind: i64,
    /// Its bound.
    pub upper: f64,
    /// The lower clamp's kind.
    pub lower_kind: i64,
    /// Its bound.
    pub lower: f64,
}

impl EpilogueCall {
    /// The epilogue this call describes for an `m × n` result of `T`, or `None` when a kind
    /// is unknown, a stride negative or an operand null.
    pub fn decode<T: Epilogued>(&self, m: usize, n: usize) -> Option<Epilogue<T>> {
        let (steps, upper, lower) = self.parts::<T, T>(m, n, T::from_f64)?;
        Some(Epilogue {
            steps,
            upper,
            lower,
        })
    }

    /// The steps (operands of element type `E`) and clamps (bounds of type `B`, from
    /// `bound`) of [`EpilogueCall::decode`].
    #[allow(clippy::type_complexity)]
    pub(super) fn parts<E: Copy, B>(
        &self,
        m: usize,
        n: usize,
        bound: impl Fn(f64) -> B,
    ) -> Option<([Option<(Step, Matrix<E>)>; MAX_STEPS], Option<B>, Lower<B>)> {
        let mut steps = [None; MAX_STEPS];
        for (out, s) in steps.iter_mut().zip(&self.steps) {
            let kind = match s.kind {
                0 => continue,
                1 => Step::Mul,
                2 => Step::Add,
                _ => return None,
            };
            if s.ptr.is_null() || s.rs < 0 || s.cs < 0 {
                return None;
            }
            let view = Matrix {
                ptr: s.ptr.cast::<E>(),
                rows: m,
                cols: n,
                rs: s.rs as isize,
                cs: s.cs as isize,
            };
            *out = Some((kind, view));
        }
        let upper = match self.upper_kind {
            0 => None,
            1 => Some(bound(self.upper)),
            _ => return None,
        };
        let lower = match self.lower_kind {
            0 => Lower::None,
            1 => Lower::Relu(bound(self.lower)),
            2 => Lower::Clip(bound(self.lower)),
            _ => return None,
        };
        Some((steps, upper, lower))
    }
}
