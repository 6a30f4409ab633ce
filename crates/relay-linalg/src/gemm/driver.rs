//! The GEMM driver: the thread split of `c` and, per thread, Goto's loops around the
//! microkernel with packing into per-thread scratch.

use std::cell::RefCell;
use std::sync::Arc;

use super::prepacked::{PackedConstants, PackedOperand, Side};
use super::window::{Source, Window, pack_source};
use super::{Element, Epilogue, Kernel, Matrix, Operand};
use crate::{KernelContext, Ops};

/// Below this many multiply-adds a product runs on the calling thread.
const PARALLEL_WORK: usize = 1 << 18;

/// The largest microkernel tile (`mr · nr`), for edge tiles computed into a local buffer.
const MAX_TILE: usize = 16 * 32;

/// A rectangle of `c` one thread computes: rows `r0..r1`, columns `c0..c1`.
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
    a: Source<SA>,
    b: Source<SB>,
    c: Matrix<T>,
    k: usize,
    packed_a: Option<Arc<PackedOperand>>,
    packed_b: Option<Arc<PackedOperand>>,
    epilogue: Option<Epilogue<T>>,
}

/// `c = a · b` (`a` `m × k`, `b` `k × n`, `c` `m × n` with `c.ptr` writable), computed in `T`
/// (the operands converted while packed), split over the threads of `ctx` when large, then
/// `epilogue` applied to each tile as it is completed. Returns 0 or the first non-zero code
/// of a thread's share.
///
/// # Safety
///
/// The views are valid for every element they address, `c` is writable and overlaps
/// neither operand nor an operand of the epilogue (each `m × n`), `a.cols == b.rows > 0`,
/// and the strides of `c` are non-negative.
pub unsafe fn gemm<T: Element, SA: Operand<T>, SB: Operand<T>>(
    ctx: Option<&KernelContext>,
    a: Matrix<SA>,
    b: Matrix<SB>,
    c: Matrix<T>,
    epilogue: Option<&Epilogue<T>>,
) -> i32 {
    // SAFETY: forwarded.
    unsafe { gemm_sources(ctx, Source::Dense(a), Source::Dense(b), c, epilogue) }
}

/// `c = a · b` where `b` is a convolution's image window (implicit im2col, [`Window`]):
/// `b`'s panels are packed straight from the image, as [`gemm`] otherwise.
///
/// # Safety
///
/// As [`gemm`]; `b` is untransposed, its image holds `b.span()` elements, and
/// `a.cols == b`'s rows `> 0`.
pub unsafe fn gemm_window<T: Element, SA: Operand<T>, SB: Operand<T>>(
    ctx: Option<&KernelContext>,
    a: Matrix<SA>,
    b: Window<SB>,
    c: Matrix<T>,
    epilogue: Option<&Epilogue<T>>,
) -> i32 {
    // SAFETY: forwarded.
    unsafe { gemm_sources(ctx, Source::Dense(a), Source::Window(b), c, epilogue) }
}

/// Packs the operands of `c = a · b` that lie in the constants of `ctx`
/// ([`PackedConstants`](super::prepacked::PackedConstants)) as [`gemm`] of these views would,
/// without computing the product: ONNX Runtime's prepacking when a session is made, so that
/// the first call does not pay for it. An operand elsewhere (`a` of rows not known yet: any
/// pointer, never read) is skipped, and so is a product [`gemm`] would not pack for (the
/// caller's matrix-vector products).
///
/// # Safety
///
/// An operand lying in a constant is a valid view of it (only such operands are read), and
/// the strides are non-negative.
pub unsafe fn prepack<T: Element, SA: Operand<T>, SB: Operand<T>>(
    ctx: &KernelContext,
    a: Matrix<SA>,
    b: Matrix<SB>,
    c: Matrix<T>,
) {
    let kern = T::of(ctx.ops());
    let (a, b) = (Source::Dense(a), Source::Dense(b));
    // SAFETY: forwarded; the transposed product packs the transposed operands.
    unsafe {
        if transposing_pays(kern, &c) {
            packed(Some(ctx), &b.transposed(), Side::A, kern);
            packed(Some(ctx), &a.transposed(), Side::B, kern);
        } else {
            packed(Some(ctx), &a, Side::A, kern);
            packed(Some(ctx), &b, Side::B, kern);
        }
    }
}

/// [`gemm`] on any operands.
///
/// # Safety
///
/// As [`gemm`].
unsafe fn gemm_sources<T: Element, SA: Operand<T>, SB: Operand<T>>(
    ctx: Option<&KernelContext>,
    a: Source<SA>,
    b: Source<SB>,
    c: Matrix<T>,
    epilogue: Option<&Epilogue<T>>,
) -> i32 {
    let kern = T::of(ctx.map_or_else(Ops::process_default, KernelContext::ops));
    let epilogue = epilogue.copied();
    if transposes(kern, ctx, (&a, &b), &c) {
        let (a, b, c) = (b.transposed(), a.transposed(), c.transposed());
        let epilogue = epilogue.map(|e| e.transposed());
        // SAFETY: the same product, transposed (forwarded contract).
        return unsafe { contract(kern, ctx, a, b, c, epilogue) };
    }
    // SAFETY: forwarded.
    unsafe { contract(kern, ctx, a, b, c, epilogue) }
}

/// Whether `cᵀ = bᵀ · aᵀ` costs clearly less than `c = a · b`: fewer multiply-adds on
/// padding — a narrow `c` (ResNet-50's 7 × 7 images, `n` = 49, fill 49 of the 64 columns of
/// two tiles) has its rows and columns exchanged — or rows that are contiguous (a result
/// whose rows are not goes through a local tile, which costs about a tenth of the tile's
/// multiply-adds to copy out).
fn transposing_pays<T>(kern: &Kernel<T>, c: &Matrix<T>) -> bool {
    let (given, transposed) = costs(kern, c);
    transposed < given
}

/// The cost of `c = a · b` as given and transposed (see [`transposing_pays`]).
fn costs<T>(kern: &Kernel<T>, c: &Matrix<T>) -> (usize, usize) {
    let cost = |rows: usize, cols: usize, contiguous: bool| {
        let rows = rows.div_ceil(kern.row_step) * kern.row_step;
        let cols = cols.div_ceil(kern.col_step) * kern.col_step;
        rows.saturating_mul(cols)
            .saturating_mul(if contiguous { 8 } else { 9 })
    };
    (
        cost(c.rows, c.cols, c.cs == 1),
        cost(c.cols, c.rows, c.rs == 1),
    )
}

/// Whether [`gemm_sources`] computes `cᵀ = bᵀ · aᵀ`: the cheaper way ([`costs`]), but the
/// way a constant operand is packed for already when only one is and the other saves less
/// than an eighth. The costs of the two ways are near equal at many shapes (GPT-2's
/// language-model head at 16 or 32 tokens on AVX2), and the other way would pack the
/// constant again on that call (its 51 MB: 40 ms) and keep both packings.
fn transposes<T: Element, SA: Operand<T>, SB: Operand<T>>(
    kern: &Kernel<T>,
    ctx: Option<&KernelContext>,
    (a, b): (&Source<SA>, &Source<SB>),
    c: &Matrix<T>,
) -> bool {
    let (given, transposed) = costs(kern, c);
    let clearly =
        |cheaper: usize, other: usize| cheaper.saturating_mul(8) < other.saturating_mul(7);
    // Only near-equal costs look the packings up (a lock and a hash each, on every call).
    let close = !clearly(transposed, given) && !clearly(given, transposed);
    let Some(constants) = ctx.and_then(KernelContext::constants).filter(|_| close) else {
        return transposed < given;
    };
    let packed_given =
        has_packed(constants, a, Side::A, kern) || has_packed(constants, b, Side::B, kern);
    let packed_transposed = has_packed(constants, &b.transposed(), Side::A, kern)
        || has_packed(constants, &a.transposed(), Side::B, kern);
    match (packed_given, packed_transposed) {
        (true, false) => false,
        (false, true) => true,
        _ => transposed < given,
    }
}

/// [`gemm`] as given (not transposed).
///
/// # Safety
///
/// As [`gemm`].
unsafe fn contract<T: Element, SA: Operand<T>, SB: Operand<T>>(
    kern: &'static Kernel<T>,
    ctx: Option<&KernelContext>,
    a: Source<SA>,
    b: Source<SB>,
    c: Matrix<T>,
    epilogue: Option<Epilogue<T>>,
) -> i32 {
    let job = Job {
        kern,
        a,
        b,
        c,
        k: a.cols(),
        // SAFETY: the operands are valid views (forwarded).
        packed_a: unsafe { packed(ctx, &a, Side::A, kern) },
        // SAFETY: as above.
        packed_b: unsafe { packed(ctx, &b, Side::B, kern) },
        epilogue,
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

/// The packing of `src` when it is a matrix inside one of the constants of `ctx`.
///
/// # Safety
///
/// `src` is a valid view.
unsafe fn packed<T: Element, S: Operand<T>>(
    ctx: Option<&KernelContext>,
    src: &Source<S>,
    side: Side,
    kern: &Kernel<T>,
) -> Option<Arc<PackedOperand>> {
    match src {
        // SAFETY: forwarded.
        Source::Dense(m) => unsafe { ctx?.constants()?.packed(m, side, kern) },
        Source::Window(_) => None,
    }
}

/// Whether `src` lies in a constant of `constants` and is packed already as operand `side`.
fn has_packed<T: Element, S: Operand<T>>(
    constants: &PackedConstants,
    src: &Source<S>,
    side: Side,
    kern: &Kernel<T>,
) -> bool {
    matches!(src, Source::Dense(m) if constants.has_packed(m, side, kern))
}

/// Rectangles of `c` on tile boundaries for `threads` threads, from the grid of `tr × tc`
/// blocks with the least estimated time: between `threads` and `4 · threads` parts (fewer
/// when there are fewer tiles), handed out one by one as threads free up, each costing its
/// multiply-adds plus its packing. The estimate is the rounds of parts a thread runs plus
/// one more part, the tail a late or descheduled core leaves (a grid of exactly `threads`
/// parts waits for the slowest thread's whole share: GPT-2 at 2 threads, 111–149 ms across
/// runs where 1 thread repeated within 3%).
fn split<T: Element, SA, SB>(job: &Job<'_, T, SA, SB>, threads: usize) -> Vec<Part> {
    let (mr, nr) = (job.kern.mr, job.kern.nr);
    let (m, n, k) = (job.c.rows, job.c.cols, job.k);
    let (um, un) = (m.div_ceil(mr), n.div_ceil(nr));
    let most = (4 * threads).min(um * un).max(1);
    let mut best = (usize::MAX, 1, 1);
    for tr in 1..=um.min(most) {
        for tc in (1..=un.min(most / tr)).filter(|tc| tr * tc >= threads.min(most)) {
            let rows = um.div_ceil(tr) * mr;
            let cols = un.div_ceil(tc) * nr;
            // A microkernel does about 16 multiply-adds in the time packing copies an element.
            let mut part = rows * cols * k / 16;
            if job.packed_a.is_none() {
                part += rows * k;
            }
            if job.packed_b.is_none() {
                part += cols * k;
            }
            let cost = ((tr * tc).div_ceil(threads) + 1) * part;
            if cost < best.0 {
                best = (cost, tr, tc);
            }
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
    let mut parts = Vec::with_capacity(tr * tc);
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

/// The block of `b` a microkernel reads: its panel `j / NR` at `ptr + j · step`, each panel's
/// rows `ld` apart (a packed block: `step = kcb`, `ld = NR`; `b` read in place: `step = 1`,
/// `ld` its row stride).
#[derive(Clone, Copy)]
struct PanelsB<T> {
    ptr: *const T,
    step: usize,
    ld: usize,
}

/// Whether the microkernel reads `b` in place for `part` rather than from packed panels: when
/// `b` is not a packed constant, its rows are contiguous and of the compute type, and the
/// kernel can (AVX-512: masked loads at the edge). Packing copies all of `b` once per call,
/// which pays off only when many row tiles reuse each panel from L1 and the product is deep;
/// measured on ResNet-50's and MobileNetV2's 1 × 1 convolutions (`gemm_shapes` example),
/// reading in place is 10–30% faster up to [`IN_PLACE_ROWS`] rows and [`IN_PLACE_DEPTH`]
/// deep (64 × 256 × 3136: 100 → 113 GFLOP/s; 24 × 96 × 3136: 84 → 112), and slower beyond
/// (64 × 576 × 3136: 83 → 66; 256 × 2304 × 196: 102 → 91).
fn reads_b_in_place<T: Element, SA, SB: Operand<T>>(job: &Job<'_, T, SA, SB>, part: Part) -> bool {
    let Source::Dense(b) = &job.b else {
        return false;
    };
    job.packed_b.is_none()
        && job.kern.direct_b
        && SB::IDENTITY
        && b.cs == 1
        // A row stride of `NR` would read as a packed, zero-padded panel (unmasked loads).
        && b.rs != job.kern.nr as isize
        && part.r1 - part.r0 <= IN_PLACE_ROWS
        && job.k <= IN_PLACE_DEPTH
}

/// The most rows of `c` for which `b` is read in place ([`reads_b_in_place`]).
const IN_PLACE_ROWS: usize = 256;

/// The deepest product for which `b` is read in place ([`reads_b_in_place`]).
const IN_PLACE_DEPTH: usize = 512;

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
    let (m_pad, n_pad) = (
        job.a.rows().div_ceil(mr) * mr,
        job.b.cols().div_ceil(nr) * nr,
    );
    let direct = match &job.b {
        Source::Dense(b) if reads_b_in_place(job, part) => Some(*b),
        _ => None,
    };
    for jc in (part.c0..part.c1).step_by(kern.nc) {
        let ncb = kern.nc.min(part.c1 - jc);
        for pc in (0..job.k).step_by(kern.kc) {
            let kcb = kern.kc.min(job.k - pc);
            let bp = if let Some(b) = direct {
                // SAFETY: `(pc, jc)` is inside `b`, whose elements are `T` (`SB::IDENTITY`).
                let ptr = unsafe { b.at(pc, jc).cast::<T>() };
                PanelsB {
                    ptr,
                    step: 1,
                    ld: b.rs as usize,
                }
            } else {
                let ptr: *const T = match &job.packed_b {
                    // SAFETY: block `pc` starts at `pc · n_pad`, panel `jc / nr` inside it.
                    Some(p) => unsafe { p.ptr::<T>().add(pc * n_pad + jc * kcb) },
                    None => {
                        let dst = region::<T>(&mut scratch.1, ncb.div_ceil(nr) * nr * kcb);
                        // SAFETY: the block lies inside `b`; `dst` has room for its panels.
                        unsafe { pack_source(&job.b, pc, kcb, jc, ncb, nr, dst) };
                        dst
                    }
                };
                PanelsB {
                    ptr,
                    step: kcb,
                    ld: nr,
                }
            };
            for ic in (part.r0..part.r1).step_by(kern.mc) {
                let mcb = kern.mc.min(part.r1 - ic);
                let ap: *const T = match &job.packed_a {
                    // SAFETY: as for `b`.
                    Some(p) => unsafe { p.ptr::<T>().add(pc * m_pad + ic * kcb) },
                    None => {
                        let dst = region::<T>(&mut scratch.0, mcb.div_ceil(mr) * mr * kcb);
                        // SAFETY: as for `b` (`a` packed as the `b` operand of the transposed
                        // product).
                        unsafe { pack_source(&job.a.transposed(), pc, kcb, ic, mcb, mr, dst) };
                        dst
                    }
                };
                // SAFETY: the panels hold the block; its tiles are inside `part`.
                let depth = Depth {
                    kcb,
                    accumulate: pc > 0,
                    last: pc + kcb == job.k,
                };
                unsafe { tiles(job, ap, bp, depth, (ic, mcb), (jc, ncb)) };
            }
        }
    }
}

/// Where a block of the inner dimension lies in it: `kcb` deep, after others (its products
/// are added to `c`), the last (the epilogue follows).
#[derive(Clone, Copy, Debug)]
struct Depth {
    kcb: usize,
    accumulate: bool,
    last: bool,
}

/// The microkernel over the tiles of the `rows × cols` block of `c` at `(i0, j0)`, from the
/// packed panels at `ap` and `bp` (`depth.kcb` deep); the microkernel computes edge tiles
/// too, a result whose columns are not contiguous goes through a local tile, and the
/// epilogue follows each tile of the last block of the inner dimension.
///
/// # Safety
///
/// As [`blocks`]; the panels hold the block.
unsafe fn tiles<T: Element, SA, SB>(
    job: &Job<'_, T, SA, SB>,
    ap: *const T,
    bp: PanelsB<T>,
    Depth {
        kcb,
        accumulate,
        last,
    }: Depth,
    (i0, rows): (usize, usize),
    (j0, cols): (usize, usize),
) {
    let (kern, c) = (job.kern, &job.c);
    let epilogue = job.epilogue.as_ref().filter(|_| last);
    let (mr, nr) = (kern.mr, kern.nr);
    let mut tile = [T::ZERO; MAX_TILE];
    // The last tile computed, whose epilogue is still to be applied.
    let mut pending = None;
    let row_tiles = rows.div_ceil(mr);
    for jr in (0..cols).step_by(nr) {
        let w = nr.min(cols - jr);
        // SAFETY: panel `jr / nr` of the block.
        let bpanel = unsafe { bp.ptr.add(jr * bp.step) };
        // The next packed panel, prefetched a part before each tile of this one: a constant's
        // panels come from memory, and the first tile of each would wait for them (GPT-2's
        // 32-token prefill, AVX2: 2.45 → 2.1 ms for a 768 × 3072 weight).
        let next = (!kern.prefetches_b && bp.ld == nr && jr + nr < cols)
            .then(|| bp.ptr.wrapping_add((jr + nr) * bp.step));
        for ir in (0..rows).step_by(mr) {
            let h = mr.min(rows - ir);
            if let Some(next) = next {
                prefetch_part(next.cast(), kcb * nr * size_of::<T>(), (ir / mr, row_tiles));
            }
            // SAFETY: panel `ir / mr` of the block; `(i0 + ir, j0 + jr)` is inside `c`.
            let (apanel, out) = unsafe { (ap.add(ir * kcb), c.at(i0 + ir, j0 + jr).cast_mut()) };
            if let Some(e) = epilogue {
                e.prefetch(c, (i0 + ir, h), (j0 + jr, w));
            }
            // The microkernel writes `c` itself when its rows are contiguous, else the local
            // tile, copied out after.
            let direct = c.cs == 1;
            let (dst, ldc, add) = match direct {
                true => (out, c.rs as usize, accumulate),
                false => (tile.as_mut_ptr(), nr, false),
            };
            // SAFETY: an `h × w` tile of `dst` (`tile` holds `mr · nr <= MAX_TILE` elements);
            // the kernel's ISA was detected.
            unsafe { (kern.micro)(kcb, apanel, bpanel, bp.ld, dst, ldc, add, h, w) };
            if !direct {
                // SAFETY: the `h × w` tile at `out` is inside `c`.
                unsafe { copy_out(&tile, nr, (h, w), c, out, accumulate) };
            }
            if let Some(e) = epilogue {
                // The previous tile's epilogue: its stores have left the store buffer while
                // this tile was computed (reading a tile just stored stalls on them).
                if let Some((rows, cols)) = pending.replace(((i0 + ir, h), (j0 + jr, w))) {
                    // SAFETY: the tile is inside `c` and the epilogue's operands (the contract).
                    unsafe { e.apply(kern.isa, c, rows, cols) };
                }
            }
        }
    }
    if let (Some(e), Some((rows, cols))) = (epilogue, pending) {
        // SAFETY: as above.
        unsafe { e.apply(kern.isa, c, rows, cols) };
    }
}

/// Prefetches part `i` of `parts` of the `bytes` at `p`, for reading.
fn prefetch_part(p: *const u8, bytes: usize, (i, parts): (usize, usize)) {
    let lines = bytes.div_ceil(64);
    let each = lines.div_ceil(parts);
    for l in i * each..((i + 1) * each).min(lines) {
        super::epilogue::prefetch(p.wrapping_add(l * 64), false);
    }
}

/// The `rows × cols` corner of `tile` (row stride `nr`) stored (or added, when
/// `accumulate`) to the tile of `c` at `out`, in the order of `c`'s memory: a transposed
/// product's `c` has contiguous columns.
///
/// # Safety
///
/// The tile at `out` is inside `c`.
unsafe fn copy_out<T: Element>(
    tile: &[T],
    nr: usize,
    (rows, cols): (usize, usize),
    c: &Matrix<T>,
    out: *mut T,
    accumulate: bool,
) {
    let by_columns = c.rs == 1;
    let (outer, inner) = if by_columns {
        (cols, rows)
    } else {
        (rows, cols)
    };
    for x in 0..outer {
        for y in 0..inner {
            let (i, j) = if by_columns { (y, x) } else { (x, y) };
            // SAFETY: `(i, j)` of the tile is inside `c`.
            unsafe {
                let e = out.offset(i as isize * c.rs + j as isize * c.cs);
                let v = tile[i * nr + j];
                *e = if accumulate { *e + v } else { v };
            }
        }
    }
}
