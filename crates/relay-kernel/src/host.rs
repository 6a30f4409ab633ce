//! Host functions kernels call for work that is not a loop nest: matrix products by the
//! contraction core ([`relay_linalg::gemm`]; dot products for matrix-vector products), and parallel
//! loops over the kernel context's threads. Registered with every JIT module by name (`jit::new_module`).

use std::ffi::c_void;

use crate::abi::KernelContext;
use relay_linalg::Ops;
use relay_linalg::gemm::epilogue::EpilogueCall;
use relay_linalg::gemm::gemv::{Gemv, GemvFn};
use relay_linalg::gemm::narrow::{MAX_NARROW, Narrow, NarrowFn};

/// The symbol of the `float32` GEMM ([`relay_kernel_sgemm`]).
pub const SGEMM_SYMBOL: &str = "relay_kernel_sgemm";
/// The symbol of the `float64` GEMM ([`relay_kernel_dgemm`]).
pub const DGEMM_SYMBOL: &str = "relay_kernel_dgemm";
/// The symbol of the `float16` GEMM ([`relay_kernel_hgemm`]).
pub const HGEMM_SYMBOL: &str = "relay_kernel_hgemm";
/// The symbol of the `float32` GEMM whose `b` is an image window
/// ([`relay_kernel_sgemm_window`]).
pub const SGEMM_WINDOW_SYMBOL: &str = "relay_kernel_sgemm_window";
/// The `float64` GEMM with an image window ([`relay_kernel_dgemm_window`]).
pub const DGEMM_WINDOW_SYMBOL: &str = "relay_kernel_dgemm_window";
/// The `float16` GEMM with an image window ([`relay_kernel_hgemm_window`]).
pub const HGEMM_WINDOW_SYMBOL: &str = "relay_kernel_hgemm_window";
/// The symbol of the parallel loop runner ([`relay_kernel_parallel_for`]).
pub const PARALLEL_FOR_SYMBOL: &str = "relay_kernel_parallel_for";

/// Below this many multiply-adds a matrix-vector product runs on the calling thread.
const PARALLEL_GEMM_WORK: i64 = 1 << 18;

/// The C signature of the GEMM host functions for element type `T`: the kernel context,
/// `m`, `k`, `n`, each of `a`, `b`, `c` with its row and column strides, then the epilogue
/// (null: none).
type GemmFn<T> = unsafe extern "C" fn(
    *mut c_void,
    i64,
    i64,
    i64,
    *const T,
    i64,
    i64,
    *const T,
    i64,
    i64,
    *mut T,
    i64,
    i64,
    *const EpilogueCall,
) -> i32;

/// The C signature of the GEMM-with-an-image-window host functions for element type `T`:
/// the kernel context, the call's shape, `a`, the image, `c`, then the epilogue (null:
/// none).
type WindowFn<T> = unsafe extern "C" fn(
    *mut c_void,
    *const GemmWindowCall,
    *const T,
    *const T,
    *mut T,
    *const EpilogueCall,
) -> i32;

/// Every host symbol of this module, with its address.
pub fn host_symbols() -> [(&'static str, *const u8); 8] {
    let sgemm: GemmFn<f32> = relay_kernel_sgemm;
    let dgemm: GemmFn<f64> = relay_kernel_dgemm;
    let hgemm: GemmFn<u16> = relay_kernel_hgemm;
    let swindow: WindowFn<f32> = relay_kernel_sgemm_window;
    let dwindow: WindowFn<f64> = relay_kernel_dgemm_window;
    let hwindow: WindowFn<u16> = relay_kernel_hgemm_window;
    let parallel: unsafe extern "C" fn(*mut c_void, ParallelBody, *const *mut u8, i64) -> i32 =
        relay_kernel_parallel_for;
    let depthwise: unsafe extern "C" fn(
        *mut c_void,
        *const relay_linalg::depthwise::DepthwiseParams,
        *const f32,
        *const f32,
        *mut f32,
        *const relay_linalg::depthwise::DepthwiseEpilogue,
    ) -> i32 = relay_linalg::depthwise::relay_kernel_depthwise_f32;
    [
        (SGEMM_SYMBOL, sgemm as *const u8),
        (DGEMM_SYMBOL, dgemm as *const u8),
        (HGEMM_SYMBOL, hgemm as *const u8),
        (SGEMM_WINDOW_SYMBOL, swindow as *const u8),
        (DGEMM_WINDOW_SYMBOL, dwindow as *const u8),
        (HGEMM_WINDOW_SYMBOL, hwindow as *const u8),
        (PARALLEL_FOR_SYMBOL, parallel as *const u8),
        (
            relay_linalg::depthwise::DEPTHWISE_F32_SYMBOL,
            depthwise as *const u8,
        ),
    ]
}

/// A raw pointer that may cross threads: the chunks of one product write disjoint rows.
#[derive(Clone, Copy)]
struct Shared<T>(T);
// SAFETY: used only for the disjoint row blocks of one GEMM, or for buffers the kernel's
// parallel iterations access as its loop nest says (each iteration its own elements).
unsafe impl<T> Send for Shared<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Shared<T> {}

/// An element type of the host GEMM, with its matrix-vector product and its narrow product,
/// if it has one.
trait Element: relay_linalg::gemm::Element + relay_linalg::gemm::Operand<Self> {
    /// The matrix-vector product of the instruction set of `ops`.
    fn gemv(ops: &Ops) -> GemvFn<Self>;
    /// The product with a narrow result of the instruction set of `ops`.
    fn narrow(ops: &Ops) -> Option<NarrowFn<Self>>;
}

impl Element for f32 {
    fn gemv(ops: &Ops) -> GemvFn<f32> {
        ops.sgemv
    }
    fn narrow(ops: &Ops) -> Option<NarrowFn<f32>> {
        Some(ops.snarrow)
    }
}

impl Element for f64 {
    fn gemv(ops: &Ops) -> GemvFn<f64> {
        ops.dgemv
    }
    fn narrow(_: &Ops) -> Option<NarrowFn<f64>> {
        None
    }
}

/// `c = a · b` (`m × k` times `k × n`) by the contraction core ([`relay_linalg::gemm::gemm`]), or
/// by dot products for a matrix-vector product whose vectors are contiguous, split across the
/// context's threads when large. Returns 0, or -1 for negative sizes or
/// strides (the kernel validated both, so this never happens for compiled kernels).
///
/// # Safety
///
/// The matrices are valid for every element their sizes and strides address, `c` does not
/// overlap `a` or `b`, and `ctx` is null or a live [`KernelContext`].
#[allow(clippy::too_many_arguments)]
unsafe fn gemm<T: Element>(
    ctx: *mut c_void,
    m: i64,
    k: i64,
    n: i64,
    a: *const T,
    rsa: i64,
    csa: i64,
    b: *const T,
    rsb: i64,
    csb: i64,
    c: *mut T,
    rsc: i64,
    csc: i64,
    epilogue: *const EpilogueCall,
) -> i32 {
    if [m, k, n, rsa, csa, rsb, csb, rsc, csc]
        .iter()
        .any(|&v| v < 0)
    {
        return -1;
    }
    if m == 0 || n == 0 {
        return 0;
    }
    // SAFETY: by the contract, `epilogue` is null or valid.
    let epilogue = match unsafe { epilogue.as_ref() } {
        None => None,
        Some(call) => match call.decode::<T>(m as usize, n as usize) {
            Some(e) => Some(e),
            None => return -1,
        },
    };
    // SAFETY: by the contract, `ctx` is null or a live context.
    let ctx = unsafe { ctx.cast::<KernelContext>().as_ref() };
    let ops = ctx.map_or_else(Ops::process_default, KernelContext::ops);
    let whole = relay_linalg::gemm::Matrix {
        ptr: c.cast_const(),
        rows: m as usize,
        cols: n as usize,
        rs: rsc as isize,
        cs: csc as isize,
    };
    // The epilogue over all of `c`, after a product computed without it.
    let finish = |rc: i32| {
        if let (0, Some(e)) = (rc, &epilogue) {
            let isa = ops.isa;
            // SAFETY: `c` and the epilogue's operands are `m × n` (the contract).
            unsafe { e.apply(isa, &whole, (0, whole.rows), (0, whole.cols)) };
        }
        rc
    };
    if k == 0 {
        for i in 0..m {
            for j in 0..n {
                // SAFETY: `(i, j)` is an element of `c`.
                unsafe { *c.offset((i * rsc + j * csc) as isize) = T::ZERO };
            }
        }
        return finish(0);
    }
    let threads = ctx.map_or(1, |c| c.threads()) as i64;
    let work = m.saturating_mul(n).saturating_mul(k);
    let (a, b, c) = (Shared(a), Shared(b), Shared(c));
    // Matrix-vector products whose rows are contiguous, one vector or a few (a decoder's
    // step, over the beams of a beam search): no packing, which would cost as much as the
    // product itself, and the matrix read once for every vector (GPT-2 small's head at 4
    // beams, AVX2, one thread: 17.9 ms through the GEMM's packed panels, 9.0 ms here).
    let gemv = if m <= FEW_ROWS as i64 && csa == 1 && rsb == 1 {
        // c[i, j] = a[i, :] · b[:, j]
        Some(Gemv {
            m: m as usize,
            ldx: rsa as usize,
            ldy: rsc as usize,
            n: n as usize,
            k: k as usize,
            x: a.0,
            rows: b.0,
            ld: csb as usize,
            y: c.0,
            incy: csc as usize,
        })
    } else if n == 1 && csa == 1 && rsb == 1 {
        // c[i, 0] = a[i, :] · b[:, 0]
        Some(Gemv {
            m: 1,
            ldx: 0,
            ldy: 0,
            n: m as usize,
            k: k as usize,
            x: b.0,
            rows: a.0,
            ld: rsa as usize,
            y: c.0,
            incy: rsc as usize,
        })
    } else {
        None
    };
    if let Some(p) = gemv {
        let (gemv, len) = (T::gemv(ops), p.n as i64);
        let run = move |j0: i64, j1: i64| {
            // SAFETY: the operands' views are valid (the contract), rows `j0..j1` are among
            // them, and `gemv` is of an instruction set this CPU runs (an `Ops` table).
            unsafe { gemv(p.rows_in(j0 as usize, j1 as usize)) };
            0
        };
        return finish(match ctx {
            // One range of rows per thread: the longest streams (its bands) for the
            // prefetchers (GPT-2 small's steps, two threads, AVX2: 7% faster than four
            // ranges per thread).
            Some(ctx) if threads > 1 && work >= PARALLEL_GEMM_WORK => {
                let chunks = threads.min(len);
                let step = (len + chunks - 1) / chunks;
                ctx.parallel(chunks, &|t| {
                    run((t * step).min(len), ((t + 1) * step).min(len))
                })
            }
            _ => run(0, len),
        });
    }
    // A narrow result with contiguous rows: `a` read in place, a row of `b` per step (no
    // packing, whose tiles a narrow `c` would fill a fraction of). A few rows of `a` times a
    // matrix `b` whose rows are contiguous (a decoder step's `probabilities · V`) are narrow
    // products over column blocks of `b`, each block's rows streamed once: packing `b` would
    // cost more than the product (GPT-2 small's `[1, 544] · [544, 64]` per head, AVX2: 245
    // µs for 12 heads through the GEMM). A constant `b` stays with the GEMM, which packs it
    // once for every call.
    let contiguous = csa == 1 && csb == 1 && csc == 1;
    let b_bytes = (((k - 1) * rsb + n) as usize).saturating_mul(std::mem::size_of::<T>());
    let constant_b = ctx
        .and_then(KernelContext::constants)
        .is_some_and(|c| c.holds(b.0, b_bytes));
    let narrow_blocks = n as usize <= MAX_NARROW || (m <= FEW_ROWS as i64 && !constant_b);
    if let Some(narrow) = T::narrow(ops).filter(|_| contiguous && narrow_blocks) {
        let run = move |i0: i64, i1: i64| {
            let (a, b, c) = (a, b, c);
            for j0 in (0..n).step_by(MAX_NARROW) {
                let p = Narrow {
                    m: (i1 - i0) as usize,
                    n: (n - j0).min(MAX_NARROW as i64) as usize,
                    k: k as usize,
                    // SAFETY: rows `i0..i1` of `a` and `c` (the contract).
                    a: unsafe { a.0.offset((i0 * rsa) as isize) },
                    rsa: rsa as usize,
                    // SAFETY: columns `j0..` of `b` and of rows `i0..i1` of `c`.
                    b: unsafe { b.0.offset(j0 as isize) },
                    rsb: rsb as usize,
                    // SAFETY: as above.
                    c: unsafe { c.0.offset((i0 * rsc + j0) as isize) },
                    rsc: rsc as usize,
                };
                // SAFETY: the blocks' views are valid (the contract), each at most
                // `MAX_NARROW` wide, and `narrow` is of an instruction set this CPU runs (an
                // `Ops` table).
                unsafe { narrow(p) };
            }
            0
        };
        return finish(match ctx {
            Some(ctx) if threads > 1 && work >= PARALLEL_GEMM_WORK => {
                let chunks = (threads * 4).min(m);
                let step = (m + chunks - 1) / chunks;
                ctx.parallel(chunks, &|t| run((t * step).min(m), ((t + 1) * step).min(m)))
            }
            _ => run(0, m),
        });
    }
    let view = |ptr: *const T, rows: i64, cols: i64, rs: i64, cs: i64| relay_linalg::gemm::Matrix {
        ptr,
        rows: rows as usize,
        cols: cols as usize,
        rs: rs as isize,
        cs: cs as isize,
    };
    // SAFETY: forwarded from this function's contract (sizes and strides non-negative,
    // `k > 0`).
    unsafe {
        relay_linalg::gemm::gemm(
            ctx,
            view(a.0, m, k, rsa, csa),
            view(b.0, k, n, rsb, csb),
            view(c.0, m, n, rsc, csc),
            epilogue.as_ref(),
        )
    }
}

/// The most rows of `a` a product computes as matrix-vector products (reading `b` once for
/// all of them) rather than by the GEMM.
const FEW_ROWS: usize = relay_linalg::gemm::gemv::VECTORS;

/// The `float32` GEMM kernels call: `c = a · b`, `a` `m × k` with row and column strides
/// `rsa`, `csa` (in elements), and so on, then the epilogue `epilogue` describes (null:
/// none; [`relay_linalg::gemm::Epilogue`]) applied to each tile. Returns 0, or -1 for a negative
/// size or stride or a malformed epilogue.
///
/// # Safety
///
/// As [`gemm`].
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn relay_kernel_sgemm(
    ctx: *mut c_void,
    m: i64,
    k: i64,
    n: i64,
    a: *const f32,
    rsa: i64,
    csa: i64,
    b: *const f32,
    rsb: i64,
    csb: i64,
    c: *mut f32,
    rsc: i64,
    csc: i64,
    epilogue: *const EpilogueCall,
) -> i32 {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        gemm(
            ctx, m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, csc, epilogue,
        )
    }
}

/// The `float64` GEMM kernels call, as [`relay_kernel_sgemm`].
///
/// # Safety
///
/// As [`gemm`].
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn relay_kernel_dgemm(
    ctx: *mut c_void,
    m: i64,
    k: i64,
    n: i64,
    a: *const f64,
    rsa: i64,
    csa: i64,
    b: *const f64,
    rsb: i64,
    csb: i64,
    c: *mut f64,
    rsc: i64,
    csc: i64,
    epilogue: *const EpilogueCall,
) -> i32 {
    // SAFETY: forwarded from this function's contract.
    unsafe {
        gemm(
            ctx, m, k, n, a, rsa, csa, b, rsb, csb, c, rsc, csc, epilogue,
        )
    }
}

/// The `float16` GEMM kernels call, as [`relay_kernel_sgemm`] on binary16 bits: the operands
/// are widened to `float32` while packed, the products accumulate in `float32`, and each result
/// is rounded once to `float16`, then goes through the epilogue as a kernel's `float16` loop
/// computes it ([`relay_linalg::gemm::half_epilogue`]). Returns 0, or -1 for a negative size or
/// stride, a result too large to accumulate or a malformed epilogue.
///
/// # Safety
///
/// As [`gemm`].
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn relay_kernel_hgemm(
    ctx: *mut c_void,
    m: i64,
    k: i64,
    n: i64,
    a: *const u16,
    rsa: i64,
    csa: i64,
    b: *const u16,
    rsb: i64,
    csb: i64,
    c: *mut u16,
    rsc: i64,
    csc: i64,
    epilogue: *const EpilogueCall,
) -> i32 {
    use relay_linalg::gemm::{F16, Matrix};
    if [m, k, n, rsa, csa, rsb, csb, rsc, csc]
        .iter()
        .any(|&v| v < 0)
    {
        return -1;
    }
    let (mu, ku, nu) = (m as usize, k as usize, n as usize);
    let Some(len) = mu.checked_mul(nu) else {
        return -1;
    };
    if len == 0 {
        return 0;
    }
    let Some(epilogue) = half_epilogue(epilogue, mu, nu) else {
        return -1;
    };
    let mut acc = vec![0f32; len];
    if ku > 0 {
        let view = |ptr: *const u16, rows, cols, rs: i64, cs: i64| Matrix {
            ptr: ptr.cast::<F16>(),
            rows,
            cols,
            rs: rs as isize,
            cs: cs as isize,
        };
        let out = Matrix {
            ptr: acc.as_mut_ptr().cast_const(),
            rows: mu,
            cols: nu,
            rs: nu as isize,
            cs: 1,
        };
        // SAFETY: forwarded from this function's contract; `acc` holds the `m × n` result.
        let rc = unsafe {
            relay_linalg::gemm::gemm(
                // SAFETY: by the contract, `ctx` is null or a live context.
                ctx.cast::<KernelContext>().as_ref(),
                view(a, mu, ku, rsa, csa),
                view(b, ku, nu, rsb, csb),
                out,
                None,
            )
        };
        if rc != 0 {
            return rc;
        }
    }
    // SAFETY: `acc` is the `m × n` result row by row; `c` is `m × n` with strides `rsc`, `csc`.
    unsafe { round_to_f16(&mut acc, mu, nu, (c, rsc, csc), epilogue.as_ref()) };
    0
}

/// The epilogue of a float16 GEMM with an `m × n` result: `Some(None)` for none (`call`
/// null), `None` when the call is malformed.
///
/// # Safety
///
/// `call` is null or valid.
fn half_epilogue(
    call: *const EpilogueCall,
    m: usize,
    n: usize,
) -> Option<Option<relay_linalg::gemm::half_epilogue::HalfEpilogue>> {
    // SAFETY: by the contract.
    match unsafe { call.as_ref() } {
        None => Some(None),
        Some(call) => relay_linalg::gemm::half_epilogue::HalfEpilogue::decode(call, m, n).map(Some),
    }
}

/// Rounds the `m × n` float32 result `acc` (row by row) once to float16 into `c` (its
/// address, row and column strides), each row through `epilogue` first: the last step of
/// the float16 GEMMs.
///
/// # Safety
///
/// `acc` holds `m·n` elements and every `(i, j)` with `i < m`, `j < n` is an element of `c`
/// and of the epilogue's operands.
unsafe fn round_to_f16(
    acc: &mut [f32],
    m: usize,
    n: usize,
    (c, rsc, csc): (*mut u16, i64, i64),
    epilogue: Option<&relay_linalg::gemm::half_epilogue::HalfEpilogue>,
) {
    for (i, row) in acc.chunks_exact_mut(n.max(1)).take(m).enumerate() {
        if let Some(e) = epilogue {
            // SAFETY: row `i` is inside the epilogue's operands (the contract).
            unsafe { e.apply_row(row, i) };
        }
        // SAFETY: row `i` of `c` is inside it.
        let out = unsafe { c.offset(i as isize * rsc as isize) };
        if csc == 1 {
            // SAFETY: the row's `n` elements are contiguous in `c` and in `acc`.
            unsafe { relay_linalg::gemm::operand::narrow(row.as_ptr(), out, n) };
            continue;
        }
        for (j, &v) in row.iter().enumerate() {
            // SAFETY: `(i, j)` is an element of `c`.
            unsafe {
                *out.offset(j as isize * csc as isize) = relay_runtime::half::f32_to_f16_bits(v)
            };
        }
    }
}

/// The outlined body of a parallel loop: `fn(buffers, ctx, lo, hi) -> i32` runs iterations
/// `lo..hi` and returns 0 or an error code.
pub type ParallelBody = unsafe extern "C" fn(*const *mut u8, *mut c_void, i64, i64) -> i32;

/// Chunks per thread of a parallel loop: more than one, so that a thread the OS delays, or a
/// worker that wakes late, leaves its share to the others (chunks are taken one at a time).
const CHUNKS_PER_THREAD: i64 = 4;

/// Runs `body` over `0..extent`, split into balanced chunks (their lengths differ by one at
/// most) taken by the context's threads (on the calling thread when `ctx` is null or has one
/// thread). Returns the first non-zero code a chunk returned, or 0.
///
/// # Safety
///
/// `body` is a compiled parallel loop body whose iterations touch disjoint elements of the
/// buffers `buffers` points to (valid for the kernel's buffer count), and `ctx` is null or a
/// live [`KernelContext`].
pub unsafe extern "C" fn relay_kernel_parallel_for(
    ctx: *mut c_void,
    body: ParallelBody,
    buffers: *const *mut u8,
    extent: i64,
) -> i32 {
    if extent <= 0 {
        return 0;
    }
    // SAFETY: by the contract, `ctx` is null or a live context.
    let context = unsafe { ctx.cast::<KernelContext>().as_ref() };
    let Some(context) = context.filter(|c| c.threads() > 1 && extent > 1) else {
        // SAFETY: by the contract.
        return unsafe { body(buffers, ctx, 0, extent) };
    };
    let chunks = (context.threads() as i64)
        .saturating_mul(CHUNKS_PER_THREAD)
        .min(extent);
    // Chunk `t` starts at `t * extent / chunks` (in 128 bits: no overflow).
    let start = move |t: i64| (i128::from(t) * i128::from(extent) / i128::from(chunks)) as i64;
    let (buffers, ctx_ptr) = (Shared(buffers), Shared(ctx));
    context.parallel(chunks, &move |t| {
        let (buffers, ctx_ptr) = (buffers, ctx_ptr);
        let (lo, hi) = (start(t), start(t + 1));
        if lo >= hi {
            return 0;
        }
        // SAFETY: by the contract; the chunks are disjoint ranges of iterations.
        unsafe { body(buffers.0, ctx_ptr.0, lo, hi) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        for i in 0..m {
            for j in 0..n {
                c[i * n + j] = (0..k).map(|l| a[i * k + l] * b[l * n + j]).sum();
            }
        }
        c
    }

    #[test]
    fn gemm_matches_naive_on_one_and_several_threads() {
        for threads in [1, 2] {
            let ctx = KernelContext::with_threads(threads);
            // A few rows by a wide matrix are narrow products over column blocks (partial
            // last blocks too).
            let few_rows = [
                (1, 544, 64),
                (2, 9, 17),
                (4, 33, 100),
                (3, 1, 40),
                (5, 20, 48),
            ];
            let shapes = [(1, 1, 1), (3, 0, 2), (0, 4, 4), (65, 70, 129), (200, 64, 3)];
            for &(m, k, n) in shapes.iter().chain(&few_rows) {
                let a: Vec<f32> = (0..m * k).map(|i| (i % 7) as f32 - 3.0).collect();
                let b: Vec<f32> = (0..k * n).map(|i| (i % 5) as f32 * 0.5).collect();
                let mut c = vec![f32::NAN; m * n];
                // SAFETY: the vectors hold the matrices the sizes and strides describe.
                let rc = unsafe {
                    relay_kernel_sgemm(
                        std::ptr::from_ref(&ctx).cast_mut().cast(),
                        m as i64,
                        k as i64,
                        n as i64,
                        a.as_ptr(),
                        k as i64,
                        1,
                        b.as_ptr(),
                        n as i64,
                        1,
                        c.as_mut_ptr(),
                        n as i64,
                        1,
                        std::ptr::null(),
                    )
                };
                assert_eq!(rc, 0);
                assert_eq!(
                    c,
                    naive(m, k, n, &a, &b),
                    "{m}x{k}x{n} on {threads} threads"
                );
            }
        }
    }

    #[test]
    fn matrix_vector_products_use_dot_products() {
        for threads in [1, 2] {
            let ctx = KernelContext::with_threads(threads);
            let ctx_ptr = std::ptr::from_ref(&ctx).cast_mut().cast();
            for &(k, n) in &[(1usize, 1usize), (7, 3), (784, 512), (33, 1000)] {
                let x: Vec<f32> = (0..k).map(|i| (i % 7) as f32 - 3.0).collect();
                // w is n × k row-major, used as the k × n matrix w^T (row stride 1).
                let w: Vec<f32> = (0..n * k).map(|i| (i % 5) as f32 * 0.5).collect();
                let want: Vec<f32> = (0..n)
                    .map(|j| (0..k).map(|l| x[l] * w[j * k + l]).sum())
                    .collect();
                let mut c = vec![f32::NAN; n];
                // SAFETY: the vectors hold the matrices the sizes and strides describe.
                let rc = unsafe {
                    relay_kernel_sgemm(
                        ctx_ptr,
                        1,
                        k as i64,
                        n as i64,
                        x.as_ptr(),
                        k as i64,
                        1,
                        w.as_ptr(),
                        1,
                        k as i64,
                        c.as_mut_ptr(),
                        n as i64,
                        1,
                        std::ptr::null(),
                    )
                };
                assert_eq!(rc, 0);
                for (g, w) in c.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "{g} vs {w}");
                }
                // The same as a column: c[j, 0] = w[j, :] · x.
                let mut c = vec![f32::NAN; n];
                // SAFETY: as above.
                let rc = unsafe {
                    relay_kernel_sgemm(
                        ctx_ptr,
                        n as i64,
                        k as i64,
                        1,
                        w.as_ptr(),
                        k as i64,
                        1,
                        x.as_ptr(),
                        1,
                        1,
                        c.as_mut_ptr(),
                        1,
                        1,
                        std::ptr::null(),
                    )
                };
                assert_eq!(rc, 0);
                for (g, w) in c.iter().zip(&want) {
                    assert!((g - w).abs() <= 1e-4 * w.abs().max(1.0), "{g} vs {w}");
                }
            }
        }
    }

    #[test]
    fn negative_sizes_are_refused() {
        // SAFETY: nothing is read or written for a negative size.
        let rc = unsafe {
            relay_kernel_dgemm(
                std::ptr::null_mut(),
                -1,
                1,
                1,
                std::ptr::null(),
                1,
                1,
                std::ptr::null(),
                1,
                1,
                std::ptr::null_mut(),
                1,
                1,
                std::ptr::null(),
            )
        };
        assert_eq!(rc, -1);
    }

    /// An epilogue adding a per-column bias and clamping to `[-1, 1]`.
    fn bias_clip(bias: &[f32]) -> EpilogueCall {
        use relay_linalg::gemm::epilogue::StepCall;
        let none = StepCall {
            kind: 0,
            ptr: std::ptr::null(),
            rs: 0,
            cs: 0,
        };
        let mut steps = [none; relay_linalg::gemm::epilogue::MAX_STEPS];
        steps[0] = StepCall {
            kind: 2,
            ptr: bias.as_ptr().cast(),
            rs: 0,
            cs: 1,
        };
        EpilogueCall {
            steps,
            upper_kind: 1,
            upper: 1.0,
            lower_kind: 2,
            lower: -1.0,
        }
    }

    /// The epilogue follows the products the host computes without the contraction core
    /// too — a matrix-vector product, an empty inner dimension — and a float16 GEMM's, with
    /// each step rounded to float16.
    #[test]
    fn epilogues_follow_every_kind_of_product() {
        let (k, n) = (300, 37);
        let x: Vec<f32> = (0..k).map(|i| ((i % 7) as f32 - 3.0) / 8.0).collect();
        let w: Vec<f32> = (0..k * n).map(|i| ((i % 5) as f32 - 2.0) / 16.0).collect();
        let bias: Vec<f32> = (0..n).map(|j| j as f32 / 10.0 - 1.5).collect();
        let call = bias_clip(&bias);
        // `w` holds the `k × n` matrix column by column (the contiguous columns a
        // matrix-vector product reads).
        let want: Vec<f32> = (0..n)
            .map(|j| (0..k).map(|l| x[l] * w[j * k + l]).sum::<f32>())
            .zip(&bias)
            .map(|(v, b)| (v + b).clamp(-1.0, 1.0))
            .collect();
        let mut c = vec![f32::NAN; n];
        // SAFETY: the vectors hold the matrices; `call` the epilogue of a `1 × n` result.
        let rc = unsafe {
            relay_kernel_sgemm(
                std::ptr::null_mut(),
                1,
                k as i64,
                n as i64,
                x.as_ptr(),
                k as i64,
                1,
                w.as_ptr(),
                1,
                k as i64,
                c.as_mut_ptr(),
                n as i64,
                1,
                &call,
            )
        };
        assert_eq!(rc, 0);
        for (g, w) in c.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5, "{g} vs {w}");
        }
        // k = 0: the product is zero, then the epilogue.
        // SAFETY: nothing of `a` or `b` is read; `c` and the bias hold `n` elements.
        let rc = unsafe {
            relay_kernel_sgemm(
                std::ptr::null_mut(),
                1,
                0,
                n as i64,
                x.as_ptr(),
                1,
                1,
                w.as_ptr(),
                1,
                1,
                c.as_mut_ptr(),
                n as i64,
                1,
                &call,
            )
        };
        assert_eq!(rc, 0);
        let zero: Vec<f32> = bias.iter().map(|b| b.clamp(-1.0, 1.0)).collect();
        assert_eq!(c, zero);
        // float16: the product rounded once, then each step rounded, as a kernel's loop.
        let half = |v: f32| relay_runtime::half::f32_to_f16_bits(v);
        let widen = relay_runtime::half::f16_bits_to_f32;
        let (hx, hw, hb): (Vec<u16>, Vec<u16>, Vec<u16>) = (
            x.iter().map(|&v| half(v)).collect(),
            w.iter().map(|&v| half(v)).collect(),
            bias.iter().map(|&v| half(v)).collect(),
        );
        let hcall = bias_clip_bits(&hb);
        let product = |epilogue: *const EpilogueCall| {
            let mut hc = vec![0u16; n];
            // SAFETY: as for float32 above.
            let rc = unsafe {
                relay_kernel_hgemm(
                    std::ptr::null_mut(),
                    1,
                    k as i64,
                    n as i64,
                    hx.as_ptr(),
                    k as i64,
                    1,
                    hw.as_ptr(),
                    1,
                    k as i64,
                    hc.as_mut_ptr(),
                    n as i64,
                    1,
                    epilogue,
                )
            };
            (rc, hc)
        };
        let (rc, plain) = product(std::ptr::null());
        assert_eq!(rc, 0);
        let (rc, fused) = product(&hcall);
        assert_eq!(rc, 0);
        for j in 0..n {
            let want = half(widen(half(widen(plain[j]) + widen(hb[j]))).clamp(-1.0, 1.0));
            assert_eq!(fused[j], want, "column {j}");
        }
        let mut bad = hcall;
        bad.upper_kind = 5;
        assert_eq!(product(&bad).0, -1);
    }

    /// [`bias_clip`] on float16 bits.
    fn bias_clip_bits(bias: &[u16]) -> EpilogueCall {
        let mut call = bias_clip(&[]);
        call.steps[0].ptr = bias.as_ptr().cast();
        call
    }
}

/// The shape of a [`relay_kernel_sgemm_window`] call, as the kernel stores it: `b`'s image
/// window (which gives `k` and `n`), `m`, and the row and column strides of `a` and `c`.
#[derive(Clone, Copy, Debug)]
#[repr(C)]
pub struct GemmWindowCall {
    /// `b`.
    pub window: crate::loops::ImageWindow,
    /// Rows of `a` and `c`.
    pub m: i64,
    /// `a`'s row stride.
    pub rsa: i64,
    /// `a`'s column stride.
    pub csa: i64,
    /// `c`'s row stride.
    pub rsc: i64,
    /// `c`'s column stride.
    pub csc: i64,
}

/// The `float32` GEMM kernels call for a convolution without its im2col copy: `c = a · b`
/// where `b` is the image window `call.window` of the image at `image` (implicit im2col,
/// [`relay_linalg::gemm::gemm_window`]), `a` `m × k` and `c` `m × n` strided as `call` says.
/// The epilogue `epilogue` describes (null: none) is applied to each tile, as
/// [`relay_kernel_sgemm`] does. Returns 0, or -1 for an invalid window, a negative size or
/// stride or a malformed epilogue.
///
/// # Safety
///
/// `ctx` is null or a live context, `call` is valid, `epilogue` null or valid, `a`, the
/// image (`C·H·W` elements), `c` and the epilogue's operands are valid for every element the
/// call addresses, and `c` overlaps no operand.
pub unsafe extern "C" fn relay_kernel_sgemm_window(
    ctx: *mut c_void,
    call: *const GemmWindowCall,
    a: *const f32,
    image: *const f32,
    c: *mut f32,
    epilogue: *const EpilogueCall,
) -> i32 {
    // SAFETY: by the contract.
    let (call, epilogue) = unsafe { (&*call, epilogue.as_ref()) };
    let out = |_, _| (c, [call.rsc, call.csc]);
    // SAFETY: forwarded from this function's contract; `c` is written in place.
    unsafe { gemm_window(ctx, call, a, image, out, epilogue) }
}

/// The `float64` GEMM with an image window, as [`relay_kernel_sgemm_window`].
///
/// # Safety
///
/// As [`relay_kernel_sgemm_window`].
pub unsafe extern "C" fn relay_kernel_dgemm_window(
    ctx: *mut c_void,
    call: *const GemmWindowCall,
    a: *const f64,
    image: *const f64,
    c: *mut f64,
    epilogue: *const EpilogueCall,
) -> i32 {
    // SAFETY: by the contract.
    let (call, epilogue) = unsafe { (&*call, epilogue.as_ref()) };
    let out = |_, _| (c, [call.rsc, call.csc]);
    // SAFETY: forwarded from this function's contract; `c` is written in place.
    unsafe { gemm_window(ctx, call, a, image, out, epilogue) }
}

/// The `float16` GEMM with an image window, as [`relay_kernel_sgemm_window`] on binary16
/// bits and as [`relay_kernel_hgemm`] computes: operands widened while packed, `float32`
/// accumulation, each result rounded once, then the epilogue.
///
/// # Safety
///
/// As [`relay_kernel_sgemm_window`].
pub unsafe extern "C" fn relay_kernel_hgemm_window(
    ctx: *mut c_void,
    call: *const GemmWindowCall,
    a: *const u16,
    image: *const u16,
    c: *mut u16,
    epilogue: *const EpilogueCall,
) -> i32 {
    use relay_linalg::gemm::F16;
    // SAFETY: by the contract.
    let call = unsafe { &*call };
    let mut acc = Vec::new();
    // SAFETY: forwarded from this function's contract; `acc` holds the `m × n` result, row
    // by row.
    let rc = unsafe {
        let out = |m: usize, n: usize| {
            acc = vec![0f32; m.saturating_mul(n)];
            (acc.as_mut_ptr(), [n as i64, 1])
        };
        gemm_window(ctx, call, a.cast::<F16>(), image.cast::<F16>(), out, None)
    };
    if rc != 0 || acc.is_empty() {
        return rc;
    }
    let (m, n) = (call.m as usize, acc.len() / call.m as usize);
    let Some(epilogue) = half_epilogue(epilogue, m, n) else {
        return -1;
    };
    let c = (c, call.rsc, call.csc);
    // SAFETY: `acc` is the `m × n` result row by row; `c` is `m × n` with `call`'s strides.
    unsafe { round_to_f16(&mut acc, m, n, c, epilogue.as_ref()) };
    0
}

/// The GEMM-with-an-image-window host functions' body: the call checked, then
/// [`relay_linalg::gemm::gemm_window`] into the result `out(m, n)` gives (its address and row and
/// column strides, `call`'s for a result written in place), `epilogue` applied.
///
/// # Safety
///
/// As [`relay_kernel_sgemm_window`], for the result `out` gives.
unsafe fn gemm_window<T: relay_linalg::gemm::Element, S: relay_linalg::gemm::Operand<T>>(
    ctx: *mut c_void,
    call: &GemmWindowCall,
    a: *const S,
    image: *const S,
    out: impl FnOnce(usize, usize) -> (*mut T, [i64; 2]),
    epilogue: Option<&EpilogueCall>,
) -> i32 {
    let w = call.window;
    let (Some(k), Some(n)) = (w.depth(), w.pixels()) else {
        return -1;
    };
    if !w.valid()
        || [call.m, call.rsa, call.csa, call.rsc, call.csc]
            .iter()
            .any(|&v| v < 0)
    {
        return -1;
    }
    if call.m == 0 {
        return 0;
    }
    let u = |v: i64| v as usize;
    let epilogue = match epilogue.map(|e| e.decode::<T>(u(call.m), u(n))) {
        Some(None) => return -1,
        Some(e) => e,
        None => None,
    };
    let (c, [rsc, csc]) = out(u(call.m), u(n));
    let window = relay_linalg::gemm::Window {
        ptr: image,
        channels: u(w.channels),
        size: [u(w.height), u(w.width)],
        kernel: [u(w.kernel_h), u(w.kernel_w)],
        stride: [u(w.stride_h), u(w.stride_w)],
        dilation: [u(w.dilation_h), u(w.dilation_w)],
        pad: [u(w.pad_top), u(w.pad_left)],
        out: [u(w.out_h), u(w.out_w)],
        transposed: false,
    };
    let view = |ptr, rows, cols, rs: i64, cs: i64| relay_linalg::gemm::Matrix {
        ptr,
        rows: u(rows),
        cols: u(cols),
        rs: rs as isize,
        cs: cs as isize,
    };
    // SAFETY: by the contract, `ctx` is null or a live context; the views are valid (sizes
    // and strides checked non-negative, `k > 0` as the window is valid).
    unsafe {
        relay_linalg::gemm::gemm_window(
            ctx.cast::<KernelContext>().as_ref(),
            view(a, call.m, k, call.rsa, call.csa),
            window,
            relay_linalg::gemm::Matrix {
                ptr: c.cast_const(),
                rows: u(call.m),
                cols: u(n),
                rs: rsc as isize,
                cs: csc as isize,
            },
            epilogue.as_ref(),
        )
    }
}
