//! Attention computed in cache: a primitive whose body is `nn.batch_matmul(q, k)`, views
//! (`reshape`, `reshape_like`), a scaling by a one-element `float32` constant, `nn.softmax`
//! over the last axis, views, then `nn.batch_matmul` of that by `v`, and views of the product
//! — the group `fuse_ops` makes of an attention (`relay_passes`' `fuse_ops/attention.rs`).
//!
//! Apart, the three kernels write the `[B, M, N]` scores to memory, read and write them in the
//! softmax, and read them again in the second product: at 512 tokens and four heads, 4 MB
//! three times over. Here the rows of the scores are computed a block at a time into scratch
//! that stays in cache — the block's scores by the GEMM, the softmax's numerators (scaling
//! fused) and row sums by the host softmax, the block's result by the GEMM into the output,
//! whose rows are then divided by the sums (flash attention's deferred normalization: a row of
//! the result is as wide as the head, a row of probabilities as long as the sequence) — and the
//! blocks are spread over the threads. The views only rename shapes: the shape function applies their relations
//! and every call checks that the rows of the softmax are those of both products.

use std::cell::RefCell;

use relay_ir::{Binding, DType, Expr, ExprKind, Function, TypeKind};
use relay_linalg::KernelContext;
use relay_linalg::softmax::{Prologue, Softmax};
use relay_ops::attention::{self, Role, Stage};
use relay_ops::support::scalar_f32_constant as scalar_constant;
use relay_ops::views::Link;

use super::ShapeMemo;
use super::matmul::{MatmulOp, Product, Sizes, batched, holds};

/// An attention the kernel library computes (see the module's documentation).
#[derive(Clone, Debug)]
pub struct AttentionOp {
    /// The parameters of `q`, `k` and `v`.
    params: [usize; 3],
    /// The first product (of `q` by `k`) and the second (of the probabilities by `v`).
    products: [Product; 2],
    /// The scores' scaling.
    scale: Prologue,
    /// Every step after the first product, in order.
    steps: Vec<Step>,
}

/// A step of an attention after its first product; each makes the next value.
#[derive(Clone, Debug)]
enum Step {
    /// A view: a reshape whose shape source, for `reshape_like`, is an input or an earlier
    /// value (see [`AttentionOp::shapes`]).
    View(Link),
    /// The scaling.
    Scale,
    /// The softmax.
    Softmax,
    /// The second product.
    Product,
}

/// The attention `func` computes, when its body is one (see the module's documentation) and
/// every parameter is a `float32` tensor.
pub(super) fn recognize(func: &Function) -> Option<AttentionOp> {
    let (bindings, body) = match func.body.kind() {
        ExprKind::Let { bindings, body } => (bindings.as_slice(), body),
        _ => (&[][..], &func.body),
    };
    let all_f32 = func
        .params
        .iter()
        .all(|p| p.checked_type().or(p.ty()).is_some_and(is_f32_type));
    if !all_f32 {
        return None;
    }
    let walk = Walk { func, bindings };
    let values = walk.values(body)?;
    let (first, rest) = values.split_first()?;
    if !attention::is_first(first) {
        return None;
    }
    let (call, qk, attrs) = first.op_call()?;
    let [q, k] = qk else { return None };
    let product = Product::of(call.name, attrs)?;
    let mut op = AttentionOp {
        params: [walk.param(q)?, walk.param(k)?, 0],
        products: [product, product],
        scale: Prologue::None,
        steps: Vec::with_capacity(rest.len()),
    };
    let mut stage = Stage::Scores;
    let mut prev = *first;
    for &e in rest {
        let (call, args, attrs) = e.op_call()?;
        let operand = args
            .iter()
            .position(|a| Expr::ptr_eq(walk.resolve(a), prev))?;
        let (role, after) = attention::step(stage, e, operand)?;
        let other = args.get(1 - operand.min(1));
        op.steps.push(match role {
            Role::View => {
                let like = match call.name {
                    "reshape_like" => Some(walk.source(other?, &values)?),
                    _ => None,
                };
                Step::View(view(call, attrs, like))
            }
            Role::Scale => {
                let k = scalar_constant(other?)?;
                op.scale = Prologue::scale(k, call.name == "divide");
                Step::Scale
            }
            Role::Softmax => Step::Softmax,
            Role::Product => {
                op.params[2] = walk.param(other?)?;
                op.products[1] = Product::of(call.name, attrs)?;
                Step::Product
            }
        });
        stage = after;
        prev = e;
    }
    (stage == Stage::Context).then_some(op)
}

/// A view step of operator `op` with `attrs`, its shape source `like`.
fn view(op: relay_ir::OpRef, attrs: &relay_ir::Attrs, like: Option<usize>) -> Link {
    Link {
        op,
        attrs: attrs.clone(),
        like,
        index: None,
    }
}

/// The body of a primitive function, its let-bound variables looked through.
struct Walk<'a> {
    func: &'a Function,
    bindings: &'a [Binding],
}

impl<'a> Walk<'a> {
    /// `e`, or the value its variable is bound to (repeatedly).
    fn resolve(&self, e: &'a Expr) -> &'a Expr {
        super::resolve(self.bindings, e)
    }

    /// The index of the parameter `e` is.
    fn param(&self, e: &Expr) -> Option<usize> {
        let ExprKind::Var(v) = self.resolve(e).kind() else {
            return None;
        };
        self.func.params.iter().position(|p| p.id() == v.id())
    }

    /// The values from the first product to the result (the operand each reads followed
    /// back from the result: a scaling's non-constant operand, every other call's first),
    /// stopping at the product before the softmax.
    fn values(&self, result: &'a Expr) -> Option<Vec<&'a Expr>> {
        let mut values = Vec::new();
        let mut e = self.resolve(result);
        let mut softmax = false;
        loop {
            values.push(e);
            let (op, args, _) = e.op_call()?;
            let next = match (op.name, args) {
                _ if softmax && attention::is_first(e) => break,
                ("multiply", [a, b]) if scalar_constant(a).is_some() => b,
                ("nn.softmax", [a]) => {
                    softmax = true;
                    a
                }
                (_, [a, ..]) => a,
                _ => return None,
            };
            e = self.resolve(next);
        }
        values.reverse();
        Some(values)
    }

    /// A `reshape_like`'s shape source `e`: a parameter's index, or the number of parameters
    /// plus the index of one of `values`.
    fn source(&self, e: &Expr, values: &[&Expr]) -> Option<usize> {
        if let Some(p) = self.param(e) {
            return Some(p);
        }
        let e = self.resolve(e);
        let at = values.iter().position(|v| Expr::ptr_eq(v, e))?;
        Some(self.func.params.len() + at)
    }
}

fn is_f32_type(t: &relay_ir::Type) -> bool {
    matches!(t.kind(), TypeKind::Tensor { dtype, .. } if *dtype == DType::F32)
}

/// The scores a block of rows holds at most, in floats (and as many probabilities): with the
/// operands' panels, well inside a core's L2.
const BLOCK_FLOATS: usize = 32 * 1024;

/// The scores of a whole batch that are one block however many rows they have: fewer blocks
/// pack the operands of the products fewer times, and these still fit in L2.
const BATCH_FLOATS: usize = 128 * 1024;

/// Rows of a block are a multiple of this when there are as many (the GEMM's tile height).
const ROW_TILE: usize = 12;

thread_local! {
    /// A thread's scores, probabilities and row sums of a block.
    static SCRATCH: RefCell<Vec<f32>> = const { RefCell::new(Vec::new()) };
}

/// The sizes of one call.
#[derive(Debug)]
pub(crate) struct Plan {
    first: Sizes,
    second: Sizes,
    /// The softmax's row length (its input's last extent).
    cols: usize,
    /// The result's shape.
    pub(super) out: Vec<i64>,
}

impl Plan {
    /// Whether the softmax's rows are the rows of both products (the views between them only
    /// regroup rows), so that a block of rows is computed start to end.
    fn rows_line_up(&self) -> bool {
        let (f, s) = (&self.first, &self.second);
        self.cols == f.n && s.k == f.n && f.batch * f.m == s.batch * s.m
    }
}

impl AttentionOp {
    /// The result's shape for inputs of shapes `inputs` (the shape function).
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        self.plan(inputs).map(|p| vec![p.out])
    }

    /// The sizes of `product` of operands of shapes `a` and `b`, and its result's shape.
    fn sizes(product: Product, a: &[i64], b: &[i64]) -> Result<(Sizes, Vec<i64>), String> {
        let op = MatmulOp {
            product,
            scale: None,
            weight: None,
        };
        op.sizes(&[a, b])
    }

    /// Every value's shape for inputs of shapes `inputs` (each view's relation applied), and the
    /// sizes of the products and the softmax.
    pub(super) fn plan(&self, inputs: &[&[i64]]) -> Result<Plan, String> {
        let [q, k, v] = self.params.map(|p| inputs.get(p).copied());
        let (Some(q), Some(k), Some(v)) = (q, k, v) else {
            return Err(format!("an attention of {} arguments", inputs.len()));
        };
        let (first, scores) = Self::sizes(self.products[0], q, k)?;
        let mut shapes = vec![scores];
        let mut second = None;
        let mut cols = None;
        for step in &self.steps {
            let last = shapes.last().ok_or("no value")?;
            let next = match step {
                Step::View(link) => {
                    let mut known: Vec<&[i64]> = inputs.to_vec();
                    known.extend(shapes.iter().map(Vec::as_slice));
                    link.output_shape(last, &known, DType::F32)
                        .map_err(|e| e.to_string())?
                }
                Step::Scale => last.clone(),
                Step::Softmax => {
                    cols = last.last().and_then(|&c| usize::try_from(c).ok());
                    last.clone()
                }
                Step::Product => {
                    let (s, out) = Self::sizes(self.products[1], last, v)?;
                    second = Some(s);
                    out
                }
            };
            shapes.push(next);
        }
        let (Some(second), Some(cols)) = (second, cols) else {
            return Err("an attention without its softmax or second product".into());
        };
        // The views keep the element count (their relations check it).
        let count = |s: &Sizes| s.batch.checked_mul(s.m)?.checked_mul(s.k);
        let scores = first
            .batch
            .checked_mul(first.m)
            .and_then(|r| r.checked_mul(first.n));
        if scores.is_none() || count(&second) != scores || cols == 0 && scores != Some(0) {
            return Err(format!(
                "an attention whose views change its size: {shapes:?}"
            ));
        }
        let out = shapes.pop().ok_or("no value")?;
        Ok(Plan {
            first,
            second,
            cols,
            out,
        })
    }

    /// Runs the attention on `args` (the inputs, then the output) of shapes `inputs`, its sizes
    /// from `memo`.
    pub(super) fn run(
        &self,
        ctx: &KernelContext,
        memo: &ShapeMemo,
        args: &mut [&mut [f32]],
        inputs: &[&[i64]],
    ) -> Result<(), String> {
        let plan = memo.plan(self, inputs)?;
        let (out, args) = args.split_last_mut().ok_or("an attention has an output")?;
        let [q, k, v] = self.params.map(|p| args.get(p).map(|a| &**a));
        let (Some(q), Some(k), Some(v)) = (q, k, v) else {
            return Err("an attention's operand is missing".into());
        };
        let (f, s) = (&plan.first, &plan.second);
        let fits = holds(q.len(), f.step_a, f.batch, f.m * f.k)
            && holds(k.len(), f.step_b, f.batch, f.k * f.n)
            && holds(v.len(), s.step_b, s.batch, s.k * s.n)
            && out.len() == s.batch * s.m * s.n;
        if !fits {
            return Err(format!("an attention's operands too short for {inputs:?}"));
        }
        if f.batch * f.m * f.n == 0 {
            // No scores (the plan checked the product): each result is an empty sum.
            out.fill(0.0);
            return Ok(());
        }
        if !plan.rows_line_up() {
            return self.unfused(ctx, &plan, [q, k, v], out);
        }
        let total = f.batch * f.m;
        let blocks = blocks(total, f.m, s.m, block_rows(f.m, f.n, total, ctx.threads()));
        let one = KernelContext::with_threads(1).with_ops(ctx.ops());
        let out = SharedOut(out.as_mut_ptr());
        let failed = std::sync::Mutex::new(None);
        ctx.parallel(blocks.len() as i64, &|i| {
            let (r0, r1) = blocks[i as usize];
            // SAFETY: block `i` writes rows `r0..r1` of the result only, disjoint from every
            // other block's; the operands hold every row and batch the plan reads (checked).
            match unsafe { self.block(&one, &plan, [q, k, v], &out, r0, r1) } {
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

    /// The attention one operator after another on the whole tensors, for views that regroup
    /// the softmax's rows differently from the products' (a valid program, if not one an
    /// exporter writes): the views do not move elements, so each step reads the flat scores
    /// with its own row length.
    fn unfused(
        &self,
        ctx: &KernelContext,
        plan: &Plan,
        [q, k, v]: [&[f32]; 3],
        out: &mut [f32],
    ) -> Result<(), String> {
        let (f, s) = (&plan.first, &plan.second);
        let ((ta, tb), (_, tv)) = (self.products[0].transposes(), self.products[1].transposes());
        let len = f.batch * f.m * f.n;
        let (mut scores, mut probs) = (Vec::new(), Vec::new());
        for v in [&mut scores, &mut probs] {
            v.try_reserve_exact(len)
                .map_err(|_| format!("an attention's {len} scores do not fit in memory"))?;
            v.resize(len, 0f32);
        }
        batched(ctx, f, (q, ta), (k, tb), &mut scores)?;
        let softmax = Softmax {
            rows: scores.len() / plan.cols,
            cols: plan.cols,
            prologue: self.scale,
            log: false,
        };
        relay_linalg::softmax::softmax(ctx, &softmax, &scores, &mut probs)?;
        batched(ctx, s, (&probs, false), (v, tv), out)
    }

    /// Rows `r0..r1` of the result (within one batch of each product): their scores, their
    /// softmax and their product by `v`, in this thread's scratch.
    ///
    /// # Safety
    ///
    /// The operands hold every element the plan addresses, and no other thread writes rows
    /// `r0..r1` of `out`, which holds the plan's result.
    unsafe fn block(
        &self,
        ctx: &KernelContext,
        plan: &Plan,
        [q, k, v]: [&[f32]; 3],
        out: &SharedOut,
        r0: usize,
        r1: usize,
    ) -> Result<(), String> {
        let (f, s) = (&plan.first, &plan.second);
        let ((ta, tb), (_, tv)) = (self.products[0].transposes(), self.products[1].transposes());
        let rows = r1 - r0;
        let (b1, b2) = (r0 / f.m, r0 / s.m);
        let n = f.n;
        SCRATCH.with_borrow_mut(|scratch| {
            let len = 2 * rows * n + rows;
            if scratch.len() < len {
                scratch.resize(len, 0.0);
            }
            let (scores, rest) = scratch[..len].split_at_mut(rows * n);
            let (probs, sums) = rest.split_at_mut(rows * n);
            // Row and column strides of `q` (m × k) and `k` (k × n) as stored.
            let (m, d) = (f.m as i64, f.k as i64);
            let (rsq, csq) = if ta { (1, m) } else { (d, 1) };
            let (rsk, csk) = if tb { (1, d) } else { (n as i64, 1) };
            let q0 = b1 * f.step_a + (r0 - b1 * f.m) * rsq as usize;
            let handle = std::ptr::from_ref(ctx)
                .cast_mut()
                .cast::<std::ffi::c_void>();
            // SAFETY: rows `r0..r1` of batch `b1` of `q` and that batch of `k` lie within
            // them (the caller's contract); `scores` is `rows × n`, apart from both.
            let rc = unsafe {
                crate::host::relay_kernel_sgemm(
                    handle,
                    rows as i64,
                    d,
                    n as i64,
                    q.as_ptr().add(q0),
                    rsq,
                    csq,
                    k.as_ptr().add(b1 * f.step_b),
                    rsk,
                    csk,
                    scores.as_mut_ptr(),
                    n as i64,
                    1,
                    std::ptr::null(),
                )
            };
            if rc != 0 {
                return Err(format!("an attention's scores: the GEMM failed ({rc})"));
            }
            let softmax = Softmax {
                rows,
                cols: n,
                prologue: self.scale,
                log: false,
            };
            (ctx.ops().exp_rows)(&softmax, scores, probs, sums)?;
            let dv = s.n as i64;
            let (rsv, csv) = if tv { (1, n as i64) } else { (dv, 1) };
            // SAFETY: batch `b2` of `v` lies within it, rows `r0..r1` of the result are this
            // block's (the caller's contract), and `probs` is `rows × n`.
            let rc = unsafe {
                crate::host::relay_kernel_sgemm(
                    handle,
                    rows as i64,
                    n as i64,
                    dv,
                    probs.as_ptr(),
                    n as i64,
                    1,
                    v.as_ptr().add(b2 * s.step_b),
                    rsv,
                    csv,
                    out.at(r0 * s.n),
                    dv,
                    1,
                    std::ptr::null(),
                )
            };
            if rc != 0 {
                return Err(format!("an attention's product: the GEMM failed ({rc})"));
            }
            // The softmax's normalization, on the product's rows (`dv` wide, not `n`).
            for (r, sum) in sums.iter().enumerate() {
                let inverse = 1.0 / sum;
                // SAFETY: row `r0 + r` of the result is this block's.
                let row = unsafe { std::slice::from_raw_parts_mut(out.at((r0 + r) * s.n), s.n) };
                row.iter_mut().for_each(|v| *v *= inverse);
            }
            Ok(())
        })
    }
}

/// Rows per block for batches of `m` rows of `n` scores, `total` rows in all, on `threads`
/// threads: a whole batch when its scores fit [`BATCH_FLOATS`], else [`BLOCK_FLOATS`] of them;
/// fewer when that leaves some thread less than two blocks.
fn block_rows(m: usize, n: usize, total: usize, threads: usize) -> usize {
    let tiles = |rows: usize| match rows >= ROW_TILE {
        true => rows / ROW_TILE * ROW_TILE,
        false => rows.max(1),
    };
    let rows = match m.saturating_mul(n) <= BATCH_FLOATS {
        true => m.max(1),
        false => tiles(BLOCK_FLOATS / n.max(1)),
    };
    let shared = total.div_ceil(2 * threads).div_ceil(ROW_TILE) * ROW_TILE;
    match threads > 1 && total.div_ceil(rows) < 2 * threads {
        true => rows.min(shared.max(ROW_TILE)),
        false => rows,
    }
}

/// The blocks of `total` rows, at most `per` each, none crossing a multiple of `m1` or `m2`
/// (a batch of either product).
fn blocks(total: usize, m1: usize, m2: usize, per: usize) -> Vec<(usize, usize)> {
    let mut blocks = Vec::with_capacity(total.div_ceil(per.max(1)));
    let mut r = 0;
    while r < total {
        let end = (r + per)
            .min((r / m1 + 1) * m1)
            .min((r / m2 + 1) * m2)
            .min(total);
        blocks.push((r, end));
        r = end;
    }
    blocks
}

/// The result's base pointer, shared by the blocks (each writes its own rows).
struct SharedOut(*mut f32);

// SAFETY: the blocks write disjoint rows.
unsafe impl Sync for SharedOut {}

impl SharedOut {
    fn at(&self, offset: usize) -> *mut f32 {
        self.0.wrapping_add(offset)
    }
}
