//! Matrix products of `float32` tensors with `?` dimensions — `nn.dense`, `nn.matmul` by a
//! matrix and `nn.batch_matmul` on their primitive's parameters in order (or a dense layer of
//! its one parameter by a constant weight, an imported model's initializer), alone or scaled by a scalar constant (`multiply`
//! or `divide`: an attention score's scaling) — computed by the host GEMM with the sizes of
//! the call's arguments, all rows in one product, so one kernel serves every shape. A
//! constant weight is read in place, where the GEMM finds it packed once when it is one of the
//! executable's constants (`relay_linalg::gemm::prepacked`).
//! A static product is lowered as ever (a GEMM stage with its epilogue fused and constant
//! operands packed once).

use std::sync::Arc;

use relay_ir::{Binding, DType, Expr, ExprKind, Function, NDArray};
use relay_linalg::KernelContext;
use relay_ops::support::attr_bool;

/// A matrix product the kernel library computes at any shape, and the scaling of its result.
#[derive(Clone, Debug, PartialEq)]
pub struct MatmulOp {
    /// The product.
    pub product: Product,
    /// `c · k` (`false`) or `c / k` (`true`) applied to each element of the result.
    pub scale: Option<(f32, bool)>,
    /// A dense layer's constant weight (`[N, K]` `float32`), when it is not a parameter.
    pub weight: Option<Weight>,
}

/// A constant weight, compared by identity.
#[derive(Clone, Debug)]
pub struct Weight(pub Arc<NDArray>);

impl PartialEq for Weight {
    fn eq(&self, other: &Weight) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// The operator of a [`MatmulOp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Product {
    /// `nn.dense(x [..., K], w [N, K])`: `[..., N]` (also `nn.matmul` with `transpose_b`).
    Dense,
    /// `nn.matmul(x [..., K], w [K, N])`: `[..., N]`.
    Matmul,
    /// `nn.batch_matmul(a, b)`: `a` `[B, M, K]` (`[B, K, M]` transposed), `b` `[B, K, N]`
    /// (`[B, N, K]` transposed), either batch 1 broadcast: `[B, M, N]`.
    Batch {
        transpose_a: bool,
        transpose_b: bool,
    },
}

impl Product {
    /// The product a call of operator `name` with `attrs` computes, if it is one.
    pub(super) fn of(name: &str, attrs: &relay_ir::Attrs) -> Option<Product> {
        let flag = |name| attr_bool(attrs, name).ok();
        Some(match name {
            "nn.dense" => Product::Dense,
            "nn.matmul" if !flag("transpose_a")? => match flag("transpose_b")? {
                true => Product::Dense,
                false => Product::Matmul,
            },
            "nn.batch_matmul" => Product::Batch {
                transpose_a: flag("transpose_a")?,
                transpose_b: flag("transpose_b")?,
            },
            _ => return None,
        })
    }

    /// Whether its first and second operands are stored transposed (`[K, M]`, `[N, K]`).
    pub(super) fn transposes(self) -> (bool, bool) {
        match self {
            Product::Dense => (false, true),
            Product::Matmul => (false, false),
            Product::Batch {
                transpose_a,
                transpose_b,
            } => (transpose_a, transpose_b),
        }
    }
}

/// The product `func` computes when its body (after `bindings`) is one on its two parameters
/// in order (or a dense layer of its one parameter by a constant `[N, K]` weight), or one
/// scaled by a one-element `float32` constant, `float32` throughout, and some dimension is `?`.
pub(super) fn recognize(func: &Function, bindings: &[Binding], body: &Expr) -> Option<MatmulOp> {
    if !crate::is_dynamic(func) || !(1..=2).contains(&func.params.len()) || bindings.len() > 1 {
        return None;
    }
    let (scaling, scaled, _) = body.op_call()?;
    let (call, scale) = match (scaling.name, scaled) {
        ("multiply" | "divide", [x, k]) => {
            let value = super::scalar_constant(k)?;
            let x = match (x.kind(), bindings) {
                (ExprKind::Var(v), [b]) if b.var.id() == v.id() => &b.value,
                _ if bindings.is_empty() => x,
                _ => return None,
            };
            (x, Some((value, scaling.name == "divide")))
        }
        _ if bindings.is_empty() => (body, None),
        _ => return None,
    };
    let (op, args, attrs) = call.op_call()?;
    let product = Product::of(op.name, attrs)?;
    let out_dtype = attrs.get("out_dtype").and_then(|v| v.as_str());
    if out_dtype.is_some_and(|d| !d.is_empty() && d != "float32") {
        return None;
    }
    let weight = match (product, func.params.len(), args.get(1).map(|w| w.kind())) {
        (Product::Dense | Product::Matmul, 1, Some(ExprKind::Constant(w)))
            if w.dtype() == DType::F32 && w.shape().len() == 2 =>
        {
            Some(Weight(w.clone()))
        }
        (_, 2, _) => None,
        _ => return None,
    };
    let in_order = args.len() == 2
        && args.iter().zip(&func.params).all(|(a, p)| match a.kind() {
            ExprKind::Var(v) => v.id() == p.id(),
            _ => false,
        });
    let f32_tensors = func.params.iter().all(|p| {
        p.checked_type().is_some_and(|t| {
            matches!(t.kind(), relay_ir::TypeKind::Tensor { dtype, .. } if *dtype == DType::F32)
        })
    });
    (in_order && f32_tensors).then_some(MatmulOp {
        product,
        scale,
        weight,
    })
}

/// The rows a product is prepacked for when its data's rows are not known (`?`).
const PREPACK_ROWS: usize = 64;

impl MatmulOp {
    /// Packs its constant weight — `weight`, a constant argument, or its own — as a call
    /// with data of declared shape `data` (`-1` for `?`; [`PREPACK_ROWS`] rows then) would,
    /// where `ctx`'s constants hold it (`relay_linalg::gemm::prepack`).
    pub(crate) fn prepack(&self, ctx: &KernelContext, data: &[i64], weight: Option<&NDArray>) {
        let weight = match (&self.weight, weight) {
            (Some(w), _) => &*w.0,
            (None, Some(w)) => w,
            (None, None) => return,
        };
        let (Some(w), &[d0, d1]) = (floats(weight), weight.shape()) else {
            return;
        };
        let (Ok(d0), Ok(d1)) = (usize::try_from(d0), usize::try_from(d1)) else {
            return;
        };
        let (k, n, rs, cs) = match self.product {
            Product::Dense => (d1, d0, 1, d1 as isize),
            Product::Matmul => (d0, d1, d1 as isize, 1),
            Product::Batch { .. } => return,
        };
        let rows = data.split_last().map_or(Some(1), |(_, lead)| {
            lead.iter()
                .try_fold(1usize, |m, &d| m.checked_mul(usize::try_from(d).ok()?))
        });
        let m = rows.unwrap_or(PREPACK_ROWS);
        // A matrix-vector product reads its operands in place.
        if m < 2 || n < 2 || k == 0 {
            return;
        }
        let view = |ptr: *const f32, rows, cols, rs, cs| relay_linalg::gemm::Matrix {
            ptr,
            rows,
            cols,
            rs,
            cs,
        };
        let a = view(std::ptr::null(), m, k, k as isize, 1);
        let b = view(w.as_ptr(), k, n, rs, cs);
        let c = view(std::ptr::null(), m, n, n as isize, 1);
        // SAFETY: `b` is the weight's `k × n` view (its elements); `a` and `c` are not read.
        unsafe { relay_linalg::gemm::prepack(ctx, a, b, c) };
    }
}

/// The elements of a `float32` array.
pub(super) fn floats(a: &NDArray) -> Option<&[f32]> {
    // SAFETY: every bit pattern is an `f32`; `align_to` gives the aligned middle part, which
    // is the whole array when its data is aligned (an array's always is).
    let (head, floats, tail) = unsafe { a.as_bytes().align_to::<f32>() };
    (head.is_empty() && tail.is_empty() && a.dtype() == DType::F32).then_some(floats)
}

/// The sizes of one product and how the batches step through the operands.
#[derive(Debug)]
pub(super) struct Sizes {
    pub(super) batch: usize,
    pub(super) m: usize,
    pub(super) k: usize,
    pub(super) n: usize,
    /// Elements between batches of `a` and `b` (0: broadcast).
    pub(super) step_a: usize,
    pub(super) step_b: usize,
}

impl MatmulOp {
    /// The result's shape for operands of shapes `inputs`, checked against each other.
    pub(super) fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        self.sizes(&self.operands(inputs)).map(|(_, out)| vec![out])
    }

    /// The operands' shapes: the arguments', and the constant weight's after them.
    fn operands<'a>(&'a self, inputs: &[&'a [i64]]) -> Vec<&'a [i64]> {
        let mut shapes = inputs.to_vec();
        if let Some(w) = &self.weight {
            shapes.push(w.0.shape());
        }
        shapes
    }

    /// The sizes of the product of operands of shapes `inputs` (checked against each other)
    /// and the result's shape.
    pub(super) fn sizes(&self, inputs: &[&[i64]]) -> Result<(Sizes, Vec<i64>), String> {
        let bad = || format!("{:?} of operands {inputs:?}", self.product);
        let &[a, b] = inputs else { return Err(bad()) };
        let u = |d: i64| usize::try_from(d).map_err(|_| bad());
        match self.product {
            Product::Dense | Product::Matmul => {
                let (&k, lead) = a.split_last().ok_or_else(bad)?;
                let (n, kw) = match (self.product, b) {
                    (Product::Dense, &[n, kw]) => (n, kw),
                    (_, &[kw, n]) => (n, kw),
                    _ => return Err(bad()),
                };
                if k != kw {
                    return Err(bad());
                }
                let m = lead
                    .iter()
                    .try_fold(1i64, |p, &d| p.checked_mul(d))
                    .ok_or_else(bad)?;
                let mut out = lead.to_vec();
                out.push(n);
                let s = Sizes {
                    batch: 1,
                    m: u(m)?,
                    k: u(k)?,
                    n: u(n)?,
                    step_a: 0,
                    step_b: 0,
                };
                Ok((s, out))
            }
            Product::Batch {
                transpose_a,
                transpose_b,
            } => {
                let (&[ba, a1, a2], &[bb, b1, b2]) = (a, b) else {
                    return Err(bad());
                };
                let (m, k) = if transpose_a { (a2, a1) } else { (a1, a2) };
                let (kb, n) = if transpose_b { (b2, b1) } else { (b1, b2) };
                let batch = match (ba, bb) {
                    _ if ba == bb => ba,
                    (1, _) => bb,
                    (_, 1) => ba,
                    _ => return Err(bad()),
                };
                if k != kb {
                    return Err(bad());
                }
                let s = Sizes {
                    batch: u(batch)?,
                    m: u(m)?,
                    k: u(k)?,
                    n: u(n)?,
                    step_a: if ba == 1 { 0 } else { u(a1 * a2)? },
                    step_b: if bb == 1 { 0 } else { u(b1 * b2)? },
                };
                Ok((s, vec![batch, m, n]))
            }
        }
    }

    /// Runs the product on `args` (`a`, `b`, then the result) of shapes `inputs`.
    pub(super) fn run(
        &self,
        ctx: &KernelContext,
        args: &mut [&mut [f32]],
        inputs: &[&[i64]],
    ) -> Result<(), String> {
        let (s, _) = self.sizes(&self.operands(inputs))?;
        let (a, b, c): (&[f32], &[f32], &mut [f32]) = match (args, &self.weight) {
            ([a, b, c], None) => (a, b, c),
            ([a, c], Some(w)) => (a, floats(&w.0).ok_or("an unaligned weight")?, c),
            _ => return Err("a matrix product takes 3 arguments".into()),
        };
        let (ta, tb) = self.product.transposes();
        if !holds(a.len(), s.step_a, s.batch, s.m * s.k)
            || !holds(b.len(), s.step_b, s.batch, s.k * s.n)
            || c.len() != s.batch * s.m * s.n
        {
            return Err(format!("{self:?}: operands too short for {inputs:?}"));
        }
        batched(ctx, &s, (a, ta), (b, tb), c)?;
        match self.scale {
            Some((k, false)) => c.iter_mut().for_each(|v| *v *= k),
            Some((k, true)) => c.iter_mut().for_each(|v| *v /= k),
            None => {}
        }
        Ok(())
    }
}

/// Whether an operand of `len` elements holds `batch` matrices of `one` elements, `step`
/// apart (0: one matrix broadcast).
pub(super) fn holds(len: usize, step: usize, batch: usize, one: usize) -> bool {
    step.checked_mul(batch.saturating_sub(1))
        .and_then(|v| v.checked_add(one))
        .is_some_and(|end| end <= len)
}

/// `c = a · b` batch by batch for the sizes `s`, each operand with its transposition.
pub(super) fn batched(
    ctx: &KernelContext,
    s: &Sizes,
    (a, ta): (&[f32], bool),
    (b, tb): (&[f32], bool),
    c: &mut [f32],
) -> Result<(), String> {
    let (m, k, n) = (s.m as i64, s.k as i64, s.n as i64);
    let (rsa, csa) = if ta { (1, m) } else { (k, 1) };
    let (rsb, csb) = if tb { (1, k) } else { (n, 1) };
    let handle = std::ptr::from_ref(ctx)
        .cast_mut()
        .cast::<std::ffi::c_void>();
    for i in 0..s.batch {
        // SAFETY: each batch's matrices lie within the operands (the caller checked their
        // lengths against the sizes), `c`, apart from both, holds every batch's result, and
        // `handle` is a live context that the GEMM only reads.
        let rc = unsafe {
            crate::host::relay_kernel_sgemm(
                handle,
                m,
                k,
                n,
                a.as_ptr().add(i * s.step_a),
                rsa,
                csa,
                b.as_ptr().add(i * s.step_b),
                rsb,
                csb,
                c.as_mut_ptr().add(i * s.m * s.n),
                n,
                1,
                std::ptr::null(),
            )
        };
        if rc != 0 {
            return Err(format!("the GEMM failed ({rc})"));
        }
    }
    Ok(())
}
