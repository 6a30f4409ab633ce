//! The GEMM driver: the thread split of `c` and, per thread, Goto's loops around the
//! microkernel with packing into per-thread scratch.

use std::cell::RefCell;
use std::sync::Arc;

use super::cache::{self, PackedOperand, Side};
use super::pack::{pack_a, pack_b};
use super::{Element, Isa, Kernel, Matrix, Operand};
use crate::abi::KernelContext;

/// Below this many multiply-adds a product runs on the calling thread.
const PARALLEL_WORK: usize = 1 << 18;

/// The largest microkernel tile (`mr · nr`), for edge tiles computed into a local buffer.
const MAX_TILE: usize = 8 * 32;

/// One thread's rectangle of `c`: rows `r0..r1`, columns `c0..c1`.
#[derive(Clone, Copy, Debug)]
struct Part {
    r0: usize,
    r1: usize,
    c0: usize,
    c1: usize,
}

/// The operands of one call, as every thread reads them.
struct Job<'a, T: Element, SA, SB> {
    kern: &'a Kernel<T>,
    a: Matrix<SA>,
    b: Matrix<SB>,
    c: Matrix<T>,
    k: usize,
    packed_a: Option<Arc<PackedOperand>>,
    packed_b: Option<Arc<PackedOperand>>,
}

/// `c = a · b` (`a` `m × k`, `b` `k × n`, `c` `m × n` with `c.ptr` writable), computed in `T`
/// (the operands converted while packed), split over the threads of `ctx` when large. Returns 0 or the first non-zero code of a thread's share.
///
/// # Safety
///
/// The views are valid for every element they address, `c` is writable and overlaps
/// neither operand, `a.cols == b.rows > 0`, and the strides of `c` are non-negative.
pub unsafe fn gemm<T: Element, SA: Operand<T>, SB: Operand<T>>(
    ctx: Option<&KernelContext>,
    a: Matrix<SA>,
    b: Matrix<SB>,
    c: Matrix<T>,
) -> i32 {
    let kern = T::kernel(Isa::current());
    let job = Job {
        kern,
        a,
        b,
        c,
        k: a.cols,
        // SAFETY: the operands are valid views (forwarded).
        packed_a: unsafe { cache::packed(&a, Side::A, kern) },
        // SAFETY: as above.
        packed_b: unsafe { cache::packed(&b, Side::B, kern) },
    };
    let threads = ctx.map_or(1, |c| c.threads());
    let work = c.rows.saturating_mul(c.cols).saturating_mul(job.k);
    let parts = match ctx {
        Some(_) if threads > 1 && work >= PARALLEL_WORK => split(&job, threads),
        _ => vec![Part {
            r0: 0,
            r1: c.rows,
            c0: 0,
            c1: c.cols,
        }],
    };
    let run = |t: i64| {
        // SAFETY: the parts are disjoint rectangles of `c` (forwarded contract).
        unsafe { run_part(&job, parts[t as usize]) };
        0
    };
    match ctx {
        Some(ctx) if parts.len() > 1 => ctx.parallel(parts.len() as i64, &run),
        _ => run(0),
    }
}

/// `threads` rectangles of `c` (fewer when there are fewer tiles), on tile boundaries, from
/// the grid of `tr × tc` blocks that minimizes a thread's multiply-adds plus its packing.
fn split<T: Element, SA, SB>(job: &Job<'_, T, SA, SB>, threads: usize) -> Vec<Part> {
    let (mr, nr) = (job.kern.mr, job.kern.nr);
    let (m, n, k) = (job.c.rows, job.c.cols, job.k);
    let (um, un) = (m.div_ceil(mr), n.div_ceil(nr));
    let threads = threads.min(um * un).max(1);
    let mut best = (usize::MAX, 1, 1);
    for tr in (1..=threads).filter(|t| threads % t == 0) {
        let tc = threads / tr;
        if tr > um || tc > un {
            continue;
        }
        let rows = um.div_ceil(tr) * mr;
        let cols = un.div_ceil(tc) * nr;
        // A microkernel does about 16 multiply-adds in the time packing copies an element.
        let mut cost = rows * cols * k / 16;
        if job.packed_a.is_none() {
            cost += rows * k;
        }
        if job.packed_b.is_none() {
            cost += cols * k;
        }
        if cost < best.0 {
            best = (cost, tr, tc);
        }
    }
    let (_, tr, tc) = best;
    let bounds = |units: usize, parts: usize, step: usize, len: usize| -> Vec<(usize, usize)> {
        (0..parts)
            .map(|p| {
                let lo = (units * p / parts * step).min(len);
                let hi = (units * (p + 1) / parts * step).min(len);
                (lo, hi)
            })
            .filter(|(lo, hi)| lo < hi)
            .collect()
    };
    let mut parts = Vec::with_capacity(threads);
    for &(r0, r1) in &bounds(um, tr, mr, m) {
        for &(c0, c1) in &bounds(un, tc, nr, n) {
            parts.push(Part { r0, r1, c0, c1 });
        }
    }
    parts
}

thread_local! {
    /// Each thread's packing buffers for `a` and `b` blocks (bytes, kept between calls).
    static SCRATCH: RefCell<(Vec<u64>, Vec<u64>)> = const { RefCell::new((Vec::new(), Vec::new())) };
}

/// A 64-byte aligned region of `elems` elements of `T` inside `buf`, growing it if needed.
fn region<T>(buf: &mut Vec<u64>, elems: usize) -> *mut T {
    let words = (elems * size_of::<T>()).div_ceil(8) + 8;
    if buf.len() < words {
        buf.resize(words, 0);
    }
    let p = buf.as_mut_ptr().cast::<u8>();
    let skip = p.align_offset(64);
    // SAFETY: `skip < 64` bytes, and `buf` has 64 bytes beyond the region's size.
    unsafe { p.add(skip).cast() }
}

/// Goto's loops for the rectangle `part` of `c`.
///
/// # Safety
///
/// As [`gemm`]; no other thread writes `part`.
unsafe fn run_part<T: Element, SA: Operand<T>, SB: Operand<T>>(
    job: &Job<'_, T, SA, SB>,
    part: Part,
) {
    let mut fallback = (Vec::new(), Vec::new());
    SCRATCH.with(|s| match s.try_borrow_mut() {
        // SAFETY: forwarded.
        Ok(mut s) => unsafe { blocks(job, part, &mut s) },
        // SAFETY: forwarded.
        Err(_) => unsafe { blocks(job, part, &mut fallback) },
    });
}

/// The loops over blocks of columns, depth and rows of `part`, packing what is not packed.
///
/// # Safety
///
/// As [`run_part`].
unsafe fn blocks<T: Element, SA: Operand<T>, SB: Operand<T>>(
    job: &Job<'_, T, SA, SB>,
    part: Part,
    scratch: &mut (Vec<u64>, Vec<u64>),
) {
    let kern = job.kern;
    let (mr, nr) = (kern.mr, kern.nr);
    let (m_pad, n_pad) = (job.a.rows.div_ceil(mr) * mr, job.b.cols.div_ceil(nr) * nr);
    for jc in (part.c0..part.c1).step_by(kern.nc) {
        let ncb = kern.nc.min(part.c1 - jc);
        for pc in (0..job.k).step_by(kern.kc) {
            let kcb = kern.kc.min(job.k - pc);
            let bp: *const T = match &job.packed_b {
                // SAFETY: block `pc` starts at `pc · n_pad`, panel `jc / nr` inside it.
                Some(p) => unsafe { p.ptr::<T>().add(pc * n_pad + jc * kcb) },
                None => {
                    let dst = region::<T>(&mut scratch.1, ncb.div_ceil(nr) * nr * kcb);
                    // SAFETY: the block lies inside `b`; `dst` has room for its panels.
                    unsafe { pack_b(&job.b, pc, kcb, jc, ncb, nr, dst) };
                    dst
                }
            };
            for ic in (part.r0..part.r1).step_by(kern.mc) {
                let mcb = kern.mc.min(part.r1 - ic);
                let ap: *const T = match &job.packed_a {
                    // SAFETY: as for `b`.
                    Some(p) => unsafe { p.ptr::<T>().add(pc * m_pad + ic * kcb) },
                    None => {
                        let dst = region::<T>(&mut scratch.0, mcb.div_ceil(mr) * mr * kcb);
                        // SAFETY: as for `b`.
                        unsafe { pack_a(&job.a, ic, mcb, pc, kcb, mr, dst) };
                        dst
                    }
                };
                // SAFETY: the panels hold the block; its tiles are inside `part`.
                unsafe { tiles(job, ap, bp, kcb, (ic, mcb), (jc, ncb), pc > 0) };
            }
        }
    }
}

/// The microkernel over the tiles of the `rows × cols` block of `c` at `(i0, j0)`, from the
/// packed panels at `ap` and `bp` (`kcb` deep); edge tiles go through a local tile.
///
/// # Safety
///
/// As [`blocks`]; the panels hold the block.
unsafe fn tiles<T: Element, SA, SB>(
    job: &Job<'_, T, SA, SB>,
    ap: *const T,
    bp: *const T,
    kcb: usize,
    (i0, rows): (usize, usize),
    (j0, cols): (usize, usize),
    accumulate: bool,
) {
    let (kern, c) = (job.kern, &job.c);
    let (mr, nr) = (kern.mr, kern.nr);
    let mut tile = [T::ZERO; MAX_TILE];
    for jr in (0..cols).step_by(nr) {
        let w = nr.min(cols - jr);
        // SAFETY: panel `jr / nr` of the block.
        let bpanel = unsafe { bp.add(jr * kcb) };
        for ir in (0..rows).step_by(mr) {
            let h = mr.min(rows - ir);
            // SAFETY: panel `ir / mr` of the block; `(i0 + ir, j0 + jr)` is inside `c`.
            let (apanel, out) = unsafe { (ap.add(ir * kcb), c.at(i0 + ir, j0 + jr).cast_mut()) };
            if h == mr && w == nr && c.cs == 1 {
                // SAFETY: a whole tile of contiguous rows; the kernel's ISA was detected.
                unsafe { (kern.micro)(kcb, apanel, bpanel, out, c.rs as usize, accumulate) };
                continue;
            }
            // SAFETY: `tile` holds `mr · nr <= MAX_TILE` elements.
            unsafe { (kern.micro)(kcb, apanel, bpanel, tile.as_mut_ptr(), nr, false) };
            for i in 0..h {
                for j in 0..w {
                    // SAFETY: `(i, j)` of the tile is inside `c`.
                    unsafe {
                        let e = out.offset(i as isize * c.rs + j as isize * c.cs);
                        let v = tile[i * nr + j];
                        *e = if accumulate { *e + v } else { v };
                    }
                }
            }
        }
    }
}
