//! `nn.softmax` and `nn.log_softmax` over the last axis of a contiguous `float32` tensor, as
//! MLAS's `MlasComputeSoftmax` computes them: each row read from memory once, three passes over
//! it in the cache — `v = prologue(x)` written to the output with the maximum, then each `v`
//! replaced by `e = exp(v - max)` with their sum, then the scaling by `1 / sum` (softmax) or
//! `v - max - ln(sum)` (log-softmax) — so the tensor costs one read and one write of memory.
//! The optional [`Prologue`] is an attention score's scaling, fused in, applied once per
//! element.
//!
//! The rows are split across the kernel context's threads. The exponentials are written with
//! intrinsics on AVX-512 (`avx512.rs`) and AVX2 (`avx2.rs`); the portable path is the host
//! kernels' scalar `exp` ([`crate::math::exp_clamped`], within 2 ulp) in loops of `W` = 16
//! lanes that the compiler vectorizes, as are the other passes on every path.

#[cfg(target_arch = "x86_64")]
mod avx2;
#[cfg(target_arch = "x86_64")]
mod avx512;
#[cfg(test)]
mod tests;

use crate::context::{KernelContext, SharedOut};
use crate::isa::Isa;
use crate::math::{clamp, exp_clamped};

/// What is applied to each input element before the softmax.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Prologue {
    /// Nothing.
    None,
    /// `x · s`.
    Mul(f32),
    /// `x / s`.
    Div(f32),
}

impl Prologue {
    /// `x / k` when `divide`, else `x · k`.
    pub fn scale(k: f32, divide: bool) -> Prologue {
        if divide {
            Prologue::Div(k)
        } else {
            Prologue::Mul(k)
        }
    }
}

/// The shape and kind of a softmax: `rows` rows of `cols` elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Softmax {
    /// Rows (the product of every axis but the last).
    pub rows: usize,
    /// Elements per row (the last axis).
    pub cols: usize,
    /// Applied to each input element first.
    pub prologue: Prologue,
    /// `log_softmax` instead of `softmax`.
    pub log: bool,
}

/// What a masked attention's softmax adds (an ONNX export of PyTorch's
/// `scaled_dot_product_attention`: `where(isnan(y), 0, y)` of `softmax(x + mask_bias)`): a bias
/// added to each row after the prologue, and a value for the NaN results (a row masked whole).
#[derive(Clone, Debug, Default)]
pub struct Extras<'a> {
    /// Added to each element of a row.
    pub bias: Option<Bias<'a>>,
    /// Replaces every NaN of the result.
    pub nan_to: Option<f32>,
}

/// A bias added to the rows of a softmax, broadcast over some of its row dimensions.
#[derive(Clone, Debug)]
pub struct Bias<'a> {
    /// The bias rows, each `cols` long.
    pub values: BiasValues<'a>,
    /// The extents of the softmax's row dimensions (every dimension but the last).
    pub dims: Vec<usize>,
    /// Per row dimension, the step in bias rows (0 where the bias broadcasts).
    pub strides: Vec<usize>,
}

/// The elements of a [`Bias`].
#[derive(Clone, Copy, Debug)]
pub enum BiasValues<'a> {
    /// Floats added as they are.
    Add(&'a [f32]),
    /// A boolean mask (a byte per element): `keep` where non-zero, else `drop`.
    Mask {
        /// The mask.
        mask: &'a [u8],
        /// Added where the mask is set.
        keep: f32,
        /// Added where it is not (`-inf` masks the element out).
        drop: f32,
    },
}

impl Bias<'_> {
    /// The bias row of softmax row `r`, as floats into `row`; an error when it lies outside
    /// the bias.
    fn row(&self, r: usize, row: &mut [f32]) -> Result<(), String> {
        let mut rest = r;
        let mut at = 0usize;
        for (&d, &s) in self.dims.iter().zip(&self.strides).rev() {
            at += (rest % d.max(1)) * s;
            rest /= d.max(1);
        }
        let n = row.len();
        let span = at.checked_mul(n).map(|a| a..a + n);
        match self.values {
            BiasValues::Add(v) => {
                let src = span
                    .and_then(|s| v.get(s))
                    .ok_or("a bias row out of range")?;
                row.copy_from_slice(src);
            }
            BiasValues::Mask { mask, keep, drop } => {
                let src = span
                    .and_then(|s| mask.get(s))
                    .ok_or("a mask row out of range")?;
                for (o, &m) in row.iter_mut().zip(src) {
                    *o = if m != 0 { keep } else { drop };
                }
            }
        }
        Ok(())
    }
}

/// The softmax of whole rows on one instruction set's path: `x` and `y` hold the same number
/// of rows of `s.cols` elements (`s.rows` is not read), the first being row `first` of the
/// whole (for the bias of `extras`). [`Ops::softmax`](crate::Ops::softmax) is the one of a
/// table.
pub type SoftmaxFn = fn(
    s: &Softmax,
    extras: &Extras<'_>,
    first: usize,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), String>;

/// The numerators of a softmax without the normalization, on one instruction set's path:
/// `y = exp(prologue(x) - max)` per row of `s.cols` elements, each row's sum of them in
/// `sums` (one per row; `s.rows` and `s.log` are not read). A caller that multiplies the
/// rows by a matrix divides the product's rows by the sums instead, a fraction of the work
/// when the product is narrow (flash attention's deferred normalization).
/// [`Ops::exp_rows`](crate::Ops::exp_rows) is the one of a table.
pub type ExpRowsFn =
    fn(s: &Softmax, x: &[f32], y: &mut [f32], sums: &mut [f32]) -> Result<(), String>;

/// Rows per chunk of work handed to a thread: enough elements to pay for the hand-off.
const CHUNK_ELEMENTS: usize = 16 * 1024;

/// Computes softmax `s` of `x` into `y` (each `s.rows · s.cols` elements) with the kernels and
/// threads of `ctx`; an error if the lengths do not fit the shape.
pub fn softmax(ctx: &KernelContext, s: &Softmax, x: &[f32], y: &mut [f32]) -> Result<(), String> {
    softmax_with(ctx, s, &Extras::default(), x, y)
}

/// [`softmax`] with a masked attention's [`Extras`].
pub fn softmax_with(
    ctx: &KernelContext,
    s: &Softmax,
    extras: &Extras<'_>,
    x: &[f32],
    y: &mut [f32],
) -> Result<(), String> {
    let len = s.rows.checked_mul(s.cols);
    if len != Some(x.len()) || len != Some(y.len()) {
        return Err(format!(
            "softmax of {} rows of {}: got {} input and {} output elements",
            s.rows,
            s.cols,
            x.len(),
            y.len()
        ));
    }
    if x.is_empty() {
        return Ok(());
    }
    let f = ctx.ops().softmax;
    let per_chunk = (CHUNK_ELEMENTS / s.cols).max(1);
    let chunks = s.rows.div_ceil(per_chunk);
    if chunks <= 1 || ctx.threads() == 1 {
        return f(s, extras, 0, x, y);
    }
    let out = SharedOut(y.as_mut_ptr());
    let failed = std::sync::Mutex::new(None);
    ctx.parallel(chunks as i64, &|c| {
        let first = c as usize * per_chunk;
        let rows = per_chunk.min(s.rows - first);
        let span = first * s.cols..(first + rows) * s.cols;
        // SAFETY: chunk `c` writes rows `first..first + rows` of `y` only, disjoint from every
        // other chunk's, and `y` outlives the parallel call.
        let y = unsafe { std::slice::from_raw_parts_mut(out.at(span.start), span.len()) };
        match f(s, extras, first, &x[span], y) {
            Ok(()) => 0,
            Err(e) => {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = Some(e);
                1
            }
        }
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// The softmax of `isa` (the portable one if the CPU lacks it).
pub(crate) fn softmax_for(isa: Isa) -> SoftmaxFn {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked).
        Isa::Avx512 if Isa::detected() == Isa::Avx512 => {
            |s, e, first, x, y| unsafe { rows_avx512(s, e, first, x, y, None) }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA (checked).
        Isa::Avx2 if Isa::detected() != Isa::Portable => {
            |s, e, first, x, y| unsafe { rows_avx2(s, e, first, x, y, None) }
        }
        _ => |s, e, first, x, y| rows::<false, 16, PORTABLE>(s, e, first, x, y, None),
    }
}

/// The unnormalized softmax of `isa` (the portable one if the CPU lacks it).
pub(crate) fn exp_rows_for(isa: Isa) -> ExpRowsFn {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked).
        Isa::Avx512 if Isa::detected() == Isa::Avx512 => {
            |s, x, y, sums| unsafe { rows_avx512(s, &Extras::default(), 0, x, y, Some(sums)) }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA (checked).
        Isa::Avx2 if Isa::detected() != Isa::Portable => {
            |s, x, y, sums| unsafe { rows_avx2(s, &Extras::default(), 0, x, y, Some(sums)) }
        }
        _ => {
            |s, x, y, sums| rows::<false, 16, PORTABLE>(s, &Extras::default(), 0, x, y, Some(sums))
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn rows_avx512(
    s: &Softmax,
    e: &Extras<'_>,
    first: usize,
    x: &[f32],
    y: &mut [f32],
    sums: Option<&mut [f32]>,
) -> Result<(), String> {
    rows::<true, 16, AVX512>(s, e, first, x, y, sums)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn rows_avx2(
    s: &Softmax,
    e: &Extras<'_>,
    first: usize,
    x: &[f32],
    y: &mut [f32],
    sums: Option<&mut [f32]>,
) -> Result<(), String> {
    rows::<true, 16, AVX2>(s, e, first, x, y, sums)
}

/// An instruction set's path through [`rows`]: which `exp_row` computes the exponentials.
type Path = u8;
/// The loops of 16-lane arrays the compiler vectorizes.
const PORTABLE: Path = 0;
/// `avx2::exp_row` (only on a CPU with AVX2 and FMA).
const AVX2: Path = 1;
/// `avx512::exp_row` (only on a CPU with AVX-512F).
const AVX512: Path = 2;

/// Every row of `x` into `y`, the prologue chosen once; the exponentials by `PATH`'s
/// `exp_row`. With `sums`, the rows are
/// left unnormalized and their sums written there ([`ExpRowsFn`]).
#[inline(always)]
fn rows<const FMA: bool, const W: usize, const PATH: Path>(
    s: &Softmax,
    e: &Extras<'_>,
    first: usize,
    x: &[f32],
    y: &mut [f32],
    sums: Option<&mut [f32]>,
) -> Result<(), String> {
    if s.cols == 0 || x.len() != y.len() {
        return match x.len() == y.len() {
            true => Ok(()),
            false => Err(format!("{} inputs, {} outputs", x.len(), y.len())),
        };
    }
    if let Some(sums) = &sums
        && sums.len() != x.len() / s.cols
    {
        return Err(format!(
            "{} row sums for {} elements in rows of {}",
            sums.len(),
            x.len(),
            s.cols
        ));
    }
    match s.prologue {
        Prologue::None => rows_with::<FMA, W, PATH>(s, e, first, x, y, sums, |v| v),
        Prologue::Mul(k) => rows_with::<FMA, W, PATH>(s, e, first, x, y, sums, |v| v * k),
        // A multiply by the reciprocal: a vector divide costs ten times a multiply, and the
        // result differs from `v / k` by at most an ulp.
        Prologue::Div(k) => {
            let r = 1.0 / k;
            rows_with::<FMA, W, PATH>(s, e, first, x, y, sums, move |v| v * r)
        }
    }
}

#[inline(always)]
fn rows_with<const FMA: bool, const W: usize, const PATH: Path>(
    s: &Softmax,
    e: &Extras<'_>,
    first: usize,
    x: &[f32],
    y: &mut [f32],
    mut sums: Option<&mut [f32]>,
    pro: impl Fn(f32) -> f32 + Copy,
) -> Result<(), String> {
    // The row's bias, as floats (a mask's selected once per row).
    let mut bias = vec![0f32; if e.bias.is_some() { s.cols } else { 0 }];
    let rows = x.chunks_exact(s.cols).zip(y.chunks_exact_mut(s.cols));
    for (r, (x_row, y)) in rows.enumerate() {
        let next = x
            .get((r + 1) * s.cols..(r + 2) * s.cols)
            .unwrap_or_default();
        let max = match &e.bias {
            Some(b) => {
                b.row(first + r, &mut bias)?;
                prologue_max::<W, true>(x_row, y, pro, &bias)
            }
            None => prologue_max::<W, false>(x_row, y, pro, &[]),
        };
        prefetch(next);
        if let Some(sums) = sums.as_deref_mut() {
            sums[r] = exp_row::<FMA, W, PATH>(y, max, true);
            continue;
        }
        let sum = exp_row::<FMA, W, PATH>(y, max, !s.log);
        if s.log {
            let shift = max + sum.ln();
            y.iter_mut().for_each(|y| *y -= shift);
        } else {
            let r = 1.0 / sum;
            y.iter_mut().for_each(|y| *y *= r);
        }
        if let Some(c) = e.nan_to {
            y.iter_mut()
                .for_each(|y| *y = if y.is_nan() { c } else { *y });
        }
    }
    Ok(())
}

/// Writes `v = pro(x)` to `y` (plus the row's `bias` when `BIAS`, which then has the row's
/// length) and returns the largest (NaN elements are skipped here and make the row NaN in
/// [`exp_row`]).
#[inline(always)]
fn prologue_max<const W: usize, const BIAS: bool>(
    x: &[f32],
    y: &mut [f32],
    pro: impl Fn(f32) -> f32,
    bias: &[f32],
) -> f32 {
    let max = |a: f32, b: f32| if b > a { b } else { a };
    let value = |c: f32, b: f32| if BIAS { pro(c) + b } else { pro(c) };
    // Without a bias, `x` stands in for it (never read as one).
    let bias = if BIAS { bias } else { x };
    let mut m = [[f32::NEG_INFINITY; W]; UNROLL];
    let (xb, yb, xt, yt) = blocks::<W>(x, y);
    let (bb, bt) = bias.split_at(xb.len().min(bias.len()));
    for ((c, d), b) in xb
        .chunks_exact(W * UNROLL)
        .zip(yb.chunks_exact_mut(W * UNROLL))
        .zip(bb.chunks_exact(W * UNROLL))
    {
        for u in 0..UNROLL {
            for l in 0..W {
                let v = value(c[u * W + l], b[u * W + l]);
                d[u * W + l] = v;
                m[u][l] = max(m[u][l], v);
            }
        }
    }
    let vectors = xt.len() / W * W;
    for ((c, d), b) in xt[..vectors]
        .chunks_exact(W)
        .zip(yt[..vectors].chunks_exact_mut(W))
        .zip(bt.chunks_exact(W))
    {
        for l in 0..W {
            let v = value(c[l], b[l]);
            d[l] = v;
            m[0][l] = max(m[0][l], v);
        }
    }
    let mut top = f32::NEG_INFINITY;
    let tail = bt.get(vectors..).unwrap_or_default();
    for ((&x, d), &b) in xt[vectors..].iter().zip(&mut yt[vectors..]).zip(tail) {
        let v = value(x, b);
        *d = v;
        top = max(top, v);
    }
    max(top, fold_lanes(&m, max))
}

/// The fold of `acc`'s accumulators by `f`: lane by lane across the blocks, then a tree
/// across the lanes (inline, in the caller's instruction set; an iterator's fold here was a
/// call per row and most of a short row's time).
#[inline(always)]
fn fold_lanes<const W: usize>(acc: &[[f32; W]; UNROLL], f: impl Fn(f32, f32) -> f32) -> f32 {
    let mut v = acc[0];
    for block in &acc[1..] {
        for l in 0..W {
            v[l] = f(v[l], block[l]);
        }
    }
    let mut width = W / 2;
    while width > 0 {
        for l in 0..width {
            v[l] = f(v[l], v[l + width]);
        }
        width /= 2;
    }
    v[0]
}

/// `Σ exp(v - max)` over the row `y` of values `v`, replacing each by its term when `store`
/// (softmax's numerators; log-softmax keeps `v`).
#[inline(always)]
fn exp_row<const FMA: bool, const W: usize, const PATH: Path>(
    y: &mut [f32],
    max: f32,
    store: bool,
) -> f32 {
    #[cfg(target_arch = "x86_64")]
    match PATH {
        // SAFETY: `AVX512` is the path of a CPU with AVX-512F.
        AVX512 => return unsafe { avx512::exp_row(y, max, store) },
        // SAFETY: `AVX2` is the path of a CPU with AVX2 and FMA.
        AVX2 => return unsafe { avx2::exp_row(y, max, store) },
        _ => {}
    }
    let e = |v: f32| exp_clamped::<FMA>(clamp(v - max, -104.0, 0.0), true);
    let mut acc = [[0f32; W]; UNROLL];
    let split = y.len() / (W * UNROLL) * (W * UNROLL);
    let (yb, yt) = y.split_at_mut(split);
    for d in yb.chunks_exact_mut(W * UNROLL) {
        for u in 0..UNROLL {
            for l in 0..W {
                let t = e(d[u * W + l]);
                if store {
                    d[u * W + l] = t;
                }
                acc[u][l] += t;
            }
        }
    }
    let vectors = yt.len() / W * W;
    let (yv, yt) = yt.split_at_mut(vectors);
    for d in yv.chunks_exact_mut(W) {
        for l in 0..W {
            let t = e(d[l]);
            if store {
                d[l] = t;
            }
            acc[0][l] += t;
        }
    }
    let mut sum = 0.0;
    for d in yt {
        let t = e(*d);
        if store {
            *d = t;
        }
        sum += t;
    }
    fold_lanes(&acc, |a, b| a + b) + sum
}

/// Asks the cache for the lines of `x` (the next row, read while this one's exponentials are
/// computed, so that memory and arithmetic overlap).
#[inline(always)]
fn prefetch(x: &[f32]) {
    #[cfg(target_arch = "x86_64")]
    for line in x.chunks(16) {
        // SAFETY: a prefetch of a valid address has no effect but on the caches.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                line.as_ptr().cast(),
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// Independent accumulators per lane, so that a sum or maximum is not one chain of latencies.
const UNROLL: usize = 4;

/// `x` and `y` split into their whole blocks of `UNROLL` vectors of `W` lanes and the rest.
#[inline(always)]
fn blocks<'a, 'b, const W: usize>(
    x: &'a [f32],
    y: &'b mut [f32],
) -> (&'a [f32], &'b mut [f32], &'a [f32], &'b mut [f32]) {
    let split = x.len() / (W * UNROLL) * (W * UNROLL);
    let (xb, xt) = x.split_at(split);
    let (yb, yt) = y.split_at_mut(split);
    (xb, yb, xt, yt)
}
