//! Lowering's tests: printed loop nests, and lowered kernels evaluated by a loop nest
//! interpreter against the reference interpreter.

use super::*;
use crate::KernelError;
use crate::compose::compose;
use crate::compose::tests::primitive;
use relay_ir::te::TExpr;

/// The kernel pipeline from composition to the loop nest: the schedule's plan, carried out.
fn lower(name: &str, composed: &Composed) -> Result<LoopFunc, KernelError> {
    crate::lower_composed(name, composed)
}

/// The printed loop nest of the primitive function in `@main` of a program with parameters
/// `params` whose primitive function has parameters `prim` and body `body`.
fn kernel(params: &str, prim: &str, body: &str, args: &str) -> String {
    let text = format!(
        "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({prim}, Primitive=1) {{\n    {body}\n  }};\n  %0({args})\n}}"
    );
    let f = primitive(&text);
    let composed = compose(&f).unwrap();
    lower("k", &composed).unwrap().to_string()
}

#[test]
fn broadcast_add_relu_hoists_the_row() {
    let got = kernel(
        "%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]",
        "%p0: Tensor[(2, 3), float32], %p1: Tensor[(3), float32]",
        "nn.relu(add(%p0, %p1))",
        "%x, %y",
    );
    assert_eq!(
        got,
        "kernel k(p0: float32[2, 3] in, p1: float32[3] in, T_relu: float32[2, 3] out) {
  for i0 in 0..2 {
    o2 = i0 * 3
    for i1 in 0..3 vectorized(4) {
      T_relu[o2 + i1] = select(p0[o2 + i1] + p1[i1] > 0f, p0[o2 + i1] + p1[i1], 0f)
    }
  }
}
"
    );
}

#[test]
fn reduction_with_an_epilogue_and_a_broadcast_consumer() {
    let got = kernel(
        "%x: Tensor[(2, 3), float32]",
        "%p0: Tensor[(2, 3), float32]",
        "sqrt(sum(%p0, axis=[1]))",
        "%x",
    );
    assert!(got.contains("for r0 in 0..3"), "{got}");
    let got = kernel(
        "%x: Tensor[(2, 3), float32], %m: Tensor[(3), float32]",
        "%p0: Tensor[(2, 3), float32], %p1: Tensor[(3), float32]",
        "%0 = max(%p1); subtract(%p0, %0)",
        "%x, %m",
    );
    // The max does not depend on the output's axes: computed once, before the loops.
    assert!(
        got.starts_with("kernel k(") && got.find("for r").unwrap() < got.find("for i0").unwrap(),
        "{got}"
    );
}

#[test]
fn same_shapes_give_one_flat_loop() {
    let got = kernel(
        "%x: Tensor[(4, 5), float32], %y: Tensor[(4, 5), float32]",
        "%p0: Tensor[(4, 5), float32], %p1: Tensor[(4, 5), float32]",
        "exp(multiply(%p0, %p1))",
        "%x, %y",
    );
    assert_eq!(
        got,
        "kernel k(p0: float32[4, 5] in, p1: float32[4, 5] in, T_exp: float32[4, 5] out) {
  for i0 in 0..20 vectorized(4) {
    T_exp[i0] = exp(p0[i0] * p1[i0])
  }
}
"
    );
    // Unit dimensions do not split loops; float64 is not vectorized.
    let got = kernel(
        "%x: Tensor[(2, 1, 3), float64]",
        "%p0: Tensor[(2, 1, 3), float64]",
        "add(%p0, 1f64)",
        "%x",
    );
    assert_eq!(
        got,
        "kernel k(p0: float64[2, 1, 3] in, T_add: float64[2, 1, 3] out) {
  for i0 in 0..6 {
    T_add[i0] = p0[i0] + 1f64
  }
}
"
    );
}

#[test]
fn broadcasts_collapse_what_they_share() {
    let got = kernel(
        "%x: Tensor[(2, 1), int32], %y: Tensor[(1, 4), int32]",
        "%p0: Tensor[(2, 1), int32], %p1: Tensor[(1, 4), int32]",
        "subtract(%p0, %p1)",
        "%x, %y",
    );
    assert_eq!(
        got,
        "kernel k(p0: int32[2, 1] in, p1: int32[1, 4] in, T_subtract: int32[2, 4] out) {
  for i0 in 0..2 {
    o2 = i0 * 4
    for i1 in 0..4 vectorized(4) {
      T_subtract[o2 + i1] = p0[i0] - p1[i1]
    }
  }
}
"
    );
    let got = kernel(
        "%x: Tensor[(4, 2, 3), float32], %y: Tensor[(2, 3), float32]",
        "%p0: Tensor[(4, 2, 3), float32], %p1: Tensor[(2, 3), float32]",
        "add(%p0, %p1)",
        "%x, %y",
    );
    assert_eq!(
        got,
        "kernel k(p0: float32[4, 2, 3] in, p1: float32[2, 3] in, T_add: float32[4, 2, 3] out) {
  for i0 in 0..4 {
    o2 = i0 * 6
    for i1 in 0..6 vectorized(4) {
      T_add[o2 + i1] = p0[o2 + i1] + p1[i1]
    }
  }
}
"
    );
    let got = kernel(
        "%x: Tensor[(2, 3, 4), float32], %b: Tensor[(3), float32]",
        "%p0: Tensor[(2, 3, 4), float32], %p1: Tensor[(3), float32]",
        "nn.bias_add(%p0, %p1)",
        "%x, %b",
    );
    assert_eq!(
        got,
        "kernel k(p0: float32[2, 3, 4] in, p1: float32[3] in, T_bias_add: float32[2, 3, 4] out) {
  for i0 in 0..2 {
    for i1 in 0..3 {
      o3 = i0 * 12 + i1 * 4
      for i2 in 0..4 vectorized(4) {
        T_bias_add[o3 + i2] = p0[o3 + i2] + p1[i1]
      }
    }
  }
}
"
    );
    // 8-bit elements are not vectorized.
    let got = kernel(
        "%x: Tensor[(3, 1), int8]",
        "%p0: Tensor[(3, 1), int8]",
        "broadcast_to(%p0, shape=[2, 3, 5])",
        "%x",
    );
    assert_eq!(
        got,
        "kernel k(p0: int8[3, 1] in, T_broadcast_to: int8[2, 3, 5] out) {
  for i0 in 0..2 {
    for i1 in 0..3 {
      o3 = i0 * 15 + i1 * 5
      for i2 in 0..5 {
        T_broadcast_to[o3 + i2] = p0[i1]
      }
    }
  }
}
"
    );
}

#[test]
fn tuples_scalars_and_empty_outputs() {
    let got = kernel(
        "%x: Tensor[(3, 4), float32]",
        "%p0: Tensor[(3, 4), float32]",
        "%1 = greater(%p0, 0f); (where(%1, %p0, 0f), %1)",
        "%x",
    );
    assert_eq!(
        got,
        "kernel k(p0: float32[3, 4] in, T_where: float32[3, 4] out, T_greater: bool[3, 4] out) {
  for i0 in 0..12 vectorized(4) {
    T_where[i0] = select(p0[i0] > 0f, p0[i0], 0f)
  }
  for i0 in 0..12 {
    T_greater[i0] = p0[i0] > 0f
  }
}
"
    );
    let got = kernel(
        "%x: Tensor[(), float32]",
        "%p0: Tensor[(), float32]",
        "(sqrt(%p0), %p0)",
        "%x",
    );
    assert_eq!(
        got,
        "kernel k(p0: float32[] in, T_sqrt: float32[] out, T_p0: float32[] out) {
  T_sqrt[0] = sqrt(p0[0])
  T_p0[0] = p0[0]
}
"
    );
    let got = kernel(
        "%x: Tensor[(0, 3), float32]",
        "%p0: Tensor[(0, 3), float32]",
        "negative(%p0)",
        "%x",
    );
    assert_eq!(
        got,
        "kernel k(p0: float32[0, 3] in, T_negative: float32[0, 3] out) {\n}\n"
    );
}

/// A reference interpreter of the loop nest IR for these tests: floats compute in `f64`
/// rounded to their dtype, integers in `i128` wrapped to their width.
mod run {
    use relay_ir::te::{BinaryOp, CmpOp, UnaryOp};
    use relay_ir::{DType, DTypeCode, NDArray};

    use crate::loops::{BufferRole, LExpr, LoopFunc, Stmt};
    use relay_linalg::gemm::epilogue::{Lower, Step};

    #[derive(Clone, Copy)]
    enum S {
        F(f64),
        I(i128),
    }

    impl S {
        fn f(self) -> f64 {
            match self {
                S::F(v) => v,
                S::I(v) => v as f64,
            }
        }
        fn i(self) -> i128 {
            match self {
                S::F(v) if v.is_nan() => 0,
                S::F(v) => v as i128,
                S::I(v) => v,
            }
        }
    }

    /// `v` stored as `dtype` and read back (numpy conversions).
    fn conv(v: S, d: DType) -> S {
        let a = match v {
            S::F(x) => NDArray::from_f64_slice(d, &[], &[x]),
            S::I(x) => NDArray::from_i128_slice(d, &[], &[x]),
        }
        .unwrap();
        if d.is_float() {
            S::F(a.to_f64_vec()[0])
        } else {
            S::I(a.to_i128_vec()[0])
        }
    }

    struct M<'a> {
        f: &'a LoopFunc,
        bufs: Vec<Vec<S>>,
        locals: Vec<S>,
    }

    /// Runs `f` on `inputs`; returns its outputs.
    pub fn run(f: &LoopFunc, inputs: &[NDArray]) -> Result<Vec<NDArray>, String> {
        let mut bufs = Vec::new();
        let mut k = 0;
        for b in &f.buffers {
            if b.role == BufferRole::Input {
                let a = &inputs[k];
                k += 1;
                bufs.push(if a.dtype().is_float() {
                    a.to_f64_vec().into_iter().map(S::F).collect()
                } else {
                    a.to_i128_vec().into_iter().map(S::I).collect()
                });
            } else {
                let n: i64 = b.shape.iter().product();
                bufs.push(vec![S::I(i128::MIN); n as usize]);
            }
        }
        let mut m = M {
            f,
            bufs,
            locals: vec![S::I(0); f.locals.len()],
        };
        m.stmt(&f.body)?;
        let mut outs = Vec::new();
        for (b, v) in f.buffers.iter().zip(&m.bufs) {
            if b.role == BufferRole::Output {
                if v.iter().any(|s| matches!(s, S::I(i128::MIN))) {
                    return Err(format!("`{}` not fully written", b.name));
                }
                outs.push(if b.dtype.is_float() {
                    let x: Vec<f64> = v.iter().map(|s| s.f()).collect();
                    NDArray::from_f64_slice(b.dtype, &b.shape, &x).unwrap()
                } else {
                    let x: Vec<i128> = v.iter().map(|s| s.i()).collect();
                    NDArray::from_i128_slice(b.dtype, &b.shape, &x).unwrap()
                });
            }
        }
        Ok(outs)
    }

    impl M<'_> {
        fn stmt(&mut self, s: &Stmt) -> Result<(), String> {
            match s {
                Stmt::For {
                    var, extent, body, ..
                } => {
                    for i in 0..*extent {
                        self.locals[var.0 as usize] = S::I(i.into());
                        self.stmt(body)?;
                    }
                }
                Stmt::Store {
                    buffer,
                    index,
                    value,
                } => {
                    let i = self.expr(index)?.0.i();
                    let b = &self.f.buffers[buffer.0 as usize];
                    let v = conv(self.expr(value)?.0, b.dtype);
                    let slot = self.bufs[buffer.0 as usize]
                        .get_mut(usize::try_from(i).map_err(|_| "negative index")?)
                        .ok_or("store out of bounds")?;
                    *slot = v;
                }
                Stmt::Assign { local, value } => {
                    self.locals[local.0 as usize] = self.expr(value)?.0;
                }
                Stmt::Seq(v) => {
                    for s in v {
                        self.stmt(s)?;
                    }
                }
                Stmt::Range {
                    var,
                    start,
                    end,
                    extent,
                    body,
                    ..
                } => {
                    let start = self.expr(start)?.0.i().clamp(0, i128::from(*extent));
                    let end = self.expr(end)?.0.i().clamp(start, i128::from(*extent));
                    for i in start..end {
                        self.locals[var.0 as usize] = S::I(i);
                        self.stmt(body)?;
                    }
                }
                Stmt::Gemm(g) => {
                    let base = |m: &crate::loops::MatrixRef| -> Result<i128, String> {
                        Ok(self.expr(&m.offset)?.0.i())
                    };
                    let (oa, ob, oc) = (base(&g.a)?, base(&g.b)?, base(&g.c)?);
                    let oe = (g.epilogue.steps.iter())
                        .map(|(_, m)| base(m))
                        .collect::<Result<Vec<i128>, String>>()?;
                    let at = |o: i128, r: i64, c: i64, rs: i64, cs: i64| -> Result<usize, String> {
                        usize::try_from(o + i128::from(r * rs + c * cs))
                            .map_err(|_| "negative GEMM index".to_string())
                    };
                    let d = self.f.buffers[g.c.buffer.0 as usize].dtype;
                    for i in 0..g.m {
                        for j in 0..g.n {
                            let mut acc = 0f64;
                            for l in 0..g.k {
                                let x = self.bufs[g.a.buffer.0 as usize]
                                    .get(at(oa, i, l, g.a.row_stride, g.a.col_stride)?)
                                    .ok_or("GEMM read out of bounds")?
                                    .f();
                                let y = match &g.window {
                                    Some(w) => match w.offset(l, j) {
                                        Some(o) => self.bufs[g.b.buffer.0 as usize]
                                            .get(at(ob, 0, o, 0, 1)?)
                                            .ok_or("GEMM window read out of bounds")?
                                            .f(),
                                        None => 0.0,
                                    },
                                    None => self.bufs[g.b.buffer.0 as usize]
                                        .get(at(ob, l, j, g.b.row_stride, g.b.col_stride)?)
                                        .ok_or("GEMM read out of bounds")?
                                        .f(),
                                };
                                acc += x * y;
                            }
                            let mut v = conv(S::F(acc), d).f();
                            for ((kind, m), &o) in g.epilogue.steps.iter().zip(&oe) {
                                let x = self.bufs[m.buffer.0 as usize]
                                    .get(at(o, i, j, m.row_stride, m.col_stride)?)
                                    .ok_or("GEMM epilogue read out of bounds")?
                                    .f();
                                v = conv(
                                    S::F(match kind {
                                        Step::Mul => v * x,
                                        Step::Add => v + x,
                                    }),
                                    d,
                                )
                                .f();
                            }
                            if let Some(hi) = g.epilogue.upper {
                                v = if hi < v { hi } else { v };
                            }
                            v = match g.epilogue.lower {
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
                            };
                            let slot = self.bufs[g.c.buffer.0 as usize]
                                .get_mut(at(oc, i, j, g.c.row_stride, g.c.col_stride)?)
                                .ok_or("GEMM write out of bounds")?;
                            *slot = S::F(v);
                        }
                    }
                }
                Stmt::Depthwise(d) => self.depthwise(d)?,
            }
            Ok(())
        }

        /// A depthwise convolution, naively (float64 sums rounded to float32).
        fn depthwise(&mut self, d: &crate::loops::Depthwise) -> Result<(), String> {
            let p = d.params;
            let read = |(b, o): (crate::loops::BufferId, i64), i: i64| -> Result<f64, String> {
                Ok(self.bufs[b.0 as usize]
                    .get(usize::try_from(o + i).map_err(|_| "negative index")?)
                    .ok_or("depthwise read out of bounds")?
                    .f())
            };
            let mut out = Vec::new();
            for b in 0..p.batch {
                for oc in 0..p.channels * p.multiplier {
                    let ic = b * p.channels + oc / p.multiplier;
                    for oy in 0..p.out_height {
                        for ox in 0..p.out_width {
                            let mut acc = 0f64;
                            for ky in 0..p.kernel_h {
                                for kx in 0..p.kernel_w {
                                    let iy = oy * p.stride_h + ky * p.dilation_h - p.pad_top;
                                    let ix = ox * p.stride_w + kx * p.dilation_w - p.pad_left;
                                    if (0..p.height).contains(&iy) && (0..p.width).contains(&ix) {
                                        let x = read(d.data, (ic * p.height + iy) * p.width + ix)?;
                                        let w = read(
                                            d.weight,
                                            (oc * p.kernel_h + ky) * p.kernel_w + kx,
                                        )?;
                                        acc += x * w;
                                    }
                                }
                            }
                            let o = oc;
                            let e = &d.epilogue;
                            let round = |v: f64| conv(S::F(v), DType::F32).f();
                            let mut v = round(acc);
                            if let Some(s) = e.scale {
                                v = round(v * read(s, o)?);
                            }
                            if let Some(b) = e.shift {
                                v = round(v + read(b, o)?);
                            }
                            let (lo, hi) = (f64::from(e.lo), f64::from(e.hi));
                            let v = if hi < v { hi } else { v };
                            out.push(S::F(if v < lo { lo } else { v }));
                        }
                    }
                }
            }
            let (b, o) = d.out;
            let o = usize::try_from(o).map_err(|_| "negative index")?;
            let slots = self.bufs[b.0 as usize]
                .get_mut(o..o + out.len())
                .ok_or("depthwise write out of bounds")?;
            slots.copy_from_slice(&out);
            Ok(())
        }

        fn expr(&self, e: &LExpr) -> Result<(S, DType), String> {
            Ok(match e {
                LExpr::Local(l) => (self.locals[l.0 as usize], self.f.locals[l.0 as usize].dtype),
                LExpr::Int(v, d) => (conv(S::I(*v), *d), *d),
                LExpr::Float(v, d) => (conv(S::F(*v), *d), *d),
                LExpr::Load { buffer, index } => {
                    let i = self.expr(index)?.0.i();
                    let v = *self.bufs[buffer.0 as usize]
                        .get(usize::try_from(i).map_err(|_| "negative index")?)
                        .ok_or("load out of bounds")?;
                    (v, self.f.buffers[buffer.0 as usize].dtype)
                }
                LExpr::Unary(op, a) => {
                    let (x, d) = self.expr(a)?;
                    let pred = |b: bool| (S::I(b.into()), DType::BOOL);
                    if d.is_float() {
                        let v = x.f();
                        let r = match op {
                            UnaryOp::IsNan => return Ok(pred(v.is_nan())),
                            UnaryOp::IsInf => return Ok(pred(v.is_infinite())),
                            UnaryOp::IsFinite => return Ok(pred(v.is_finite())),
                            UnaryOp::Neg => -v,
                            UnaryOp::Abs => v.abs(),
                            UnaryOp::Exp => v.exp(),
                            UnaryOp::Log => v.ln(),
                            UnaryOp::Sqrt => v.sqrt(),
                            UnaryOp::Rsqrt => 1.0 / v.sqrt(),
                            UnaryOp::Sigmoid => 1.0 / (1.0 + (-v).exp()),
                            UnaryOp::Tanh => v.tanh(),
                            UnaryOp::Floor => v.floor(),
                            UnaryOp::Round => v.round_ties_even(),
                            _ => return Err(format!("{op:?} not interpreted")),
                        };
                        (conv(S::F(r), d), d)
                    } else {
                        let v = x.i();
                        match op {
                            UnaryOp::LogicalNot => pred(v == 0),
                            UnaryOp::Neg => (conv(S::I(-v), d), d),
                            UnaryOp::BitwiseNot => (conv(S::I(!v), d), d),
                            UnaryOp::Abs => (conv(S::I(v.abs()), d), d),
                            _ => return Err(format!("{op:?} not interpreted")),
                        }
                    }
                }
                LExpr::Binary(op, a, b) => {
                    let ((x, d), (y, _)) = (self.expr(a)?, self.expr(b)?);
                    if d.is_float() {
                        let (a, b) = (x.f(), y.f());
                        let r = match op {
                            BinaryOp::Add => a + b,
                            BinaryOp::Sub => a - b,
                            BinaryOp::Mul => a * b,
                            BinaryOp::Div => a / b,
                            BinaryOp::Max => a.max(b),
                            BinaryOp::Min => a.min(b),
                            _ => return Err(format!("{op:?} not interpreted")),
                        };
                        (conv(S::F(r), d), d)
                    } else {
                        let (a, b) = (x.i(), y.i());
                        let r = match op {
                            BinaryOp::Add => a + b,
                            BinaryOp::Sub => a - b,
                            BinaryOp::Mul => a * b,
                            BinaryOp::Div | BinaryOp::Mod if b == 0 => {
                                return Err("integer division by zero".into());
                            }
                            BinaryOp::FloorDiv | BinaryOp::FloorMod if b == 0 => {
                                return Err("integer division by zero".into());
                            }
                            BinaryOp::Div => a / b,
                            BinaryOp::Mod => a % b,
                            BinaryOp::FloorDiv => {
                                a.div_euclid(b) - i128::from(b < 0 && a.rem_euclid(b) != 0)
                            }
                            BinaryOp::FloorMod => {
                                a - b
                                    * (a.div_euclid(b) - i128::from(b < 0 && a.rem_euclid(b) != 0))
                            }
                            BinaryOp::Max => a.max(b),
                            BinaryOp::Min => a.min(b),
                            BinaryOp::LogicalAnd => i128::from(a != 0 && b != 0),
                            BinaryOp::LogicalOr => i128::from(a != 0 || b != 0),
                            _ => return Err(format!("{op:?} not interpreted")),
                        };
                        (conv(S::I(r), d), d)
                    }
                }
                LExpr::Compare(op, a, b) => {
                    let ((x, d), (y, _)) = (self.expr(a)?, self.expr(b)?);
                    let o = if d.is_float() {
                        x.f().partial_cmp(&y.f())
                    } else {
                        Some(x.i().cmp(&y.i()))
                    };
                    use std::cmp::Ordering::*;
                    let r = match op {
                        CmpOp::Eq => o == Some(Equal),
                        CmpOp::Ne => o != Some(Equal),
                        CmpOp::Lt => o == Some(Less),
                        CmpOp::Le => matches!(o, Some(Less | Equal)),
                        CmpOp::Gt => o == Some(Greater),
                        CmpOp::Ge => matches!(o, Some(Greater | Equal)),
                    };
                    (S::I(r.into()), DType::BOOL)
                }
                LExpr::Select(c, a, b) => {
                    if self.expr(c)?.0.i() != 0 {
                        self.expr(a)?
                    } else {
                        self.expr(b)?
                    }
                }
                LExpr::Cast(d, a) => {
                    let (x, from) = self.expr(a)?;
                    let x = if from.code == DTypeCode::Bool {
                        S::I(x.i())
                    } else {
                        x
                    };
                    (conv(x, *d), *d)
                }
            })
        }
    }
}

/// Lowers the primitive function of `text` and runs it on the random inputs of `@main`,
/// comparing with the reference interpreter's result of `@main`.
fn agrees_with_interpreter(text: &str) {
    let m = crate::compose::tests::checked(text);
    let f = primitive(text);
    let lowered = lower("k", &compose(&f).unwrap()).unwrap();
    let main = m.function(relay_ir::Symbol::intern("main")).unwrap();
    for seed in 0..4 {
        let args = relay_interp::random_inputs(&main.func, seed).unwrap();
        let want = relay_interp::run(&m, "main", args.clone(), &Default::default());
        let arrays: Vec<relay_ir::NDArray> = args
            .iter()
            .map(|v| match v {
                relay_ir::Value::Tensor(t) => (**t).clone(),
                _ => panic!("tensor arguments only"),
            })
            .collect();
        let got = run::run(&lowered, &arrays);
        match (want, got) {
            (Ok(w), Ok(g)) => {
                let g: Vec<relay_ir::Value> = g
                    .into_iter()
                    .map(|a| relay_ir::Value::Tensor(std::sync::Arc::new(a)))
                    .collect();
                let g = if g.len() == 1 {
                    g[0].clone()
                } else {
                    relay_ir::Value::Tuple(g.into())
                };
                if let Err(e) = relay_interp::compare_values(&g, &w, 1e-5, 1e-6) {
                    panic!("{text}\n{lowered}\n{e}");
                }
            }
            (Err(_), Err(_)) => {}
            (w, g) => panic!("{text}\n{lowered}\nwant {w:?}\ngot {g:?}"),
        }
    }
}

#[test]
fn lowered_kernels_compute_what_the_interpreter_does() {
    let cases = [
        (
            "%x: Tensor[(2, 3, 4), float32]",
            "%0 = exp(%p0); %1 = sum(%0, axis=[1]); sqrt(%1)",
            "%x",
        ),
        (
            "%x: Tensor[(3, 4), float32], %y: Tensor[(4), float32]",
            "%0 = mean(%p0, axis=[0]); add(%0, %p1)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 5), float32], %y: Tensor[(3, 2), float32]",
            "%0 = max(%p0, axis=[1]); multiply(%p1, %0)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(3, 4), int8]",
            "(argmax(%p0, axis=[1]), argmin(%p0, axis=[0], keepdims=True), prod(%p0, exclude=True, axis=[1]))",
            "%x",
        ),
        (
            "%x: Tensor[(2, 3, 4), float64], %y: Tensor[(2, 1, 4), float64]",
            "variance(%p0, %p1, axis=[1], unbiased=True)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]",
            "nn.relu(add(%p0, %p1))",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 1, 3), float32], %y: Tensor[(4, 1), float32]",
            "multiply(%p0, exp(%p1))",
            "%x, %y",
        ),
        (
            "%x: Tensor[(4, 2, 3), int32], %y: Tensor[(2, 3), int32]",
            "%1 = subtract(%p0, %p1); maximum(%1, %p1)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 3, 4), float32], %y: Tensor[(3), float32]",
            "nn.bias_add(%p0, %p1)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 3, 4), float32], %y: Tensor[(4), float32]",
            "nn.prelu(%p0, %p1, axis=2)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(3, 1), int8], %y: Tensor[(2, 3, 5), int8]",
            "broadcast_to_like(%p0, %p1)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(5, 1, 2), float64], %y: Tensor[(1, 3, 1), float64]",
            "%1 = add(%p0, %p1); (sigmoid(%1), floor(%1), %p1)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(3, 4), float32], %y: Tensor[(3, 4), float32]",
            "%1 = greater(%p0, %p1); (where(%1, %p0, %p1), %1, cast(%1, dtype=\"int32\"))",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 2), float32], %y: Tensor[(2, 2), float32]",
            "clip(divide(%p0, %p1), a_min=-1f, a_max=1f)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(0, 3), float32], %y: Tensor[(3), float32]",
            "add(%p0, %p1)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(), int32], %y: Tensor[(7), int32]",
            "(multiply(%p0, %p1), negative(%p0))",
            "%x, %y",
        ),
        // Contractions (GEMM calls) with epilogues; materialized reductions.
        (
            "%x: Tensor[(3, 5), float32], %y: Tensor[(4, 5), float32]",
            "nn.relu(add(nn.dense(%p0, %p1, units=4), 1f))",
            "%x, %y",
        ),
        (
            "%x: Tensor[(5, 3), float64], %y: Tensor[(4, 5), float64]",
            "nn.matmul(%p0, %p1, units=None, transpose_a=True, transpose_b=True)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 3, 5), float32], %y: Tensor[(1, 5, 4), float32]",
            "nn.batch_matmul(%p0, %p1)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(3, 5), int32], %y: Tensor[(4, 5), int32]",
            "nn.dense(%p0, %p1, units=None)",
            "%x, %y",
        ),
        ("%x: Tensor[(2, 7), float32]", "nn.softmax(%p0)", "%x"),
        (
            "%x: Tensor[(1, 2, 5, 5), float32], %y: Tensor[(3, 2, 3, 3), float32]",
            "nn.conv2d(%p0, %p1, padding=[1, 1])",
            "%x, %y",
        ),
        (
            "%x: Tensor[(1, 4, 5, 5), float32], %y: Tensor[(4, 2, 3, 3), float32]",
            "nn.conv2d(%p0, %p1, strides=[2, 2], padding=[1, 0, 1, 2], groups=2)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 4, 9, 8), float32], %y: Tensor[(8, 1, 3, 3), float32]",
            "nn.conv2d(%p0, %p1, strides=[2, 1], padding=[0, 1, 2, 0], dilation=[2, 1], groups=4)",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 6, 9, 8), float32], %y: Tensor[(6, 1, 3, 3), float32], \
             %z: Tensor[(6, 1, 1), float32]",
            "clip(add(multiply(nn.conv2d(%p0, %p1, padding=[1, 1], groups=6), %z), %z), \
             a_min=-0.5f, a_max=0.5f)",
            "%x, %y, %z",
        ),
        (
            "%x: Tensor[(2, 4, 6, 5), float32], %y: Tensor[(6, 4, 3, 3), float32], \
             %z: Tensor[(6, 1, 1), float32], %w: Tensor[(2, 6, 6, 5), float32]",
            "nn.relu(add(add(multiply(nn.conv2d(%p0, %p1, padding=[1, 1]), %z), %z), %w))",
            "%x, %y, %z, %w",
        ),
        (
            "%x: Tensor[(5, 7), float64], %y: Tensor[(9, 7), float64], %z: Tensor[(9), float64]",
            "clip(nn.bias_add(nn.dense(%p0, %p1, units=None), %z), a_min=-1f64, a_max=1f64)",
            "%x, %y, %z",
        ),
        (
            "%x: Tensor[(5, 3), float32], %y: Tensor[(2, 4), int32]",
            "take(%p0, %p1, axis=0, mode=\"wrap\")",
            "%x, %y",
        ),
        (
            "%x: Tensor[(2, 3, 4), float32]",
            "variance(%p0, mean(%p0, axis=[1], keepdims=True), axis=[1])",
            "%x",
        ),
    ];
    for (params, body, args) in cases {
        let prim = params.replace("%x", "%p0").replace("%y", "%p1");
        let text = format!(
            "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({prim}, Primitive=1) {{\n    {body}\n  }};\n  %0({args})\n}}"
        );
        agrees_with_interpreter(&text);
    }
}

/// A primitive function over `%p0: Tensor[(2), float32]` with `body`, called on `%x`.
fn chain_program(body: &str) -> String {
    format!(
        "#[version = \"0.0.5\"]\ndef @main(%x: Tensor[(2), float32]) {{\n  %0 = fn (%p0: Tensor[(2), float32], Primitive=1) {{\n    {body}\n  }};\n  %0(%x)\n}}"
    )
}

#[test]
fn shared_subexpressions_are_computed_once() {
    // Each tensor reads the one before it twice: inlined, 2^21 operations; with the large
    // shared tensors computed once into buffers, a few stages.
    let mut body = String::from("%1 = add(%p0, %p0);");
    for i in 2..22 {
        body.push_str(&format!(" %{i} = add(%{}, %{});", i - 1, i - 1));
    }
    body.push_str(" %21");
    let text = chain_program(&body);
    let lowered = lower("k", &compose(&primitive(&text)).unwrap()).unwrap();
    let scratch = lowered.buffers.len() - 2;
    assert!((1..21).contains(&scratch), "{scratch} scratch buffers");
    agrees_with_interpreter(&text);

    // A Fibonacci chain the size of a fused group (`fuse_ops.max_depth`), each tensor reading
    // the two before it, in bounded arithmetic: linear, and the interpreter's result.
    let mut body = String::from("%1 = multiply(%p0, 0.5f); %2 = subtract(%1, %p0);");
    for i in 3..256 {
        let op = if i % 2 == 0 { "subtract" } else { "add" };
        body.push_str(&format!(
            " %{i} = multiply({op}(%{}, %{}), 0.75f);",
            i - 1,
            i - 2
        ));
    }
    body.push_str(" %255");
    let text = chain_program(&body);
    let lowered = lower("k", &compose(&primitive(&text)).unwrap()).unwrap();
    assert!(lowered.buffers.len() < 256, "{}", lowered.buffers.len());
    agrees_with_interpreter(&text);
}

#[test]
fn a_small_shared_subexpression_is_inlined() {
    // `%1` is read twice, but is two operations: recomputed, no buffer.
    let text = chain_program("%1 = exp(add(%p0, 1f)); multiply(%1, %1)");
    let lowered = lower("k", &compose(&primitive(&text)).unwrap()).unwrap();
    assert_eq!(lowered.buffers.len(), 2);
    agrees_with_interpreter(&text);
}

#[test]
fn float16_operations_compute_in_a_wider_float_and_round() {
    // Each operation widens its operands exactly and rounds its result; a constant is its
    // float16 value. `+ - * /`, `sqrt`, `min`/`max` and comparisons compute in float32 (the
    // same float16 results as float64) and vectorize.
    assert_eq!(
        kernel(
            "%x: Tensor[(4), float16]",
            "%p0: Tensor[(4), float16]",
            "multiply(%p0, 0.1f16)",
            "%x",
        ),
        "kernel k(p0: float16[4] in, T_multiply: float16[4] out) {
  for i0 in 0..4 vectorized(4) {
    T_multiply[i0] = float16(float32(p0[i0]) * 0.0999755859375f)
  }
}
"
    );
    // A reduction accumulates unrounded in float64, then rounds once.
    let sum = kernel(
        "%x: Tensor[(2, 3), float16]",
        "%p0: Tensor[(2, 3), float16]",
        "sum(%p0, axis=[1])",
        "%x",
    );
    assert!(sum.contains(" = 0f64\n"), "{sum}");
    assert!(sum.contains("T_sum[i0] = float16(acc"), "{sum}");
    // A contraction is a call of the float16 GEMM (float32 accumulation of exact products,
    // rounded once).
    let dense = kernel(
        "%x: Tensor[(2, 3), float16], %w: Tensor[(4, 3), float16]",
        "%p0: Tensor[(2, 3), float16], %p1: Tensor[(4, 3), float16]",
        "nn.dense(%p0, %p1, units=None)",
        "%x, %w",
    );
    assert!(dense.contains("gemm(T_dense"), "{dense}");
    // The transcendentals the JIT computes inline compute in float32 (within one float16
    // ulp); the others in float64, as the reference does.
    let exp = kernel(
        "%x: Tensor[(4), float16]",
        "%p0: Tensor[(4), float16]",
        "exp(%p0)",
        "%x",
    );
    assert!(exp.contains("float16(exp(float32(p0[i0])))"), "{exp}");
    let cos = kernel(
        "%x: Tensor[(4), float16]",
        "%p0: Tensor[(4), float16]",
        "cos(%p0)",
        "%x",
    );
    assert!(cos.contains("float16(cos(float64(p0[i0])))"), "{cos}");
    // float16 values are selected as they are: no conversion around a select.
    let relu = kernel(
        "%x: Tensor[(4), float16]",
        "%p0: Tensor[(4), float16]",
        "nn.relu(%p0)",
        "%x",
    );
    assert!(
        relu.contains("T_relu[i0] = select(float32(p0[i0]) > 0f, p0[i0], 0f16)"),
        "{relu}"
    );
}

#[test]
fn float16_kernels_compute_what_the_interpreter_does() {
    // Each kernel lowered, interpreted and compiled agrees with the reference evaluation
    // (which rounds after each operator): elementwise chains, casts both ways, reductions
    // accumulating in float64, a contraction, a padded convolution, pooling and softmax.
    // (The loop nest interpreter of these tests has no float `pow` or `%`: the second
    // case is only compiled.)
    let cases = [
        (
            "%x: Tensor[(3, 4), float16], %y: Tensor[(4), float16]",
            "%0 = add(%p0, %p1); %1 = exp(%0); nn.relu(subtract(%1, %p1))",
            true,
        ),
        (
            "%x: Tensor[(3, 4), float16], %y: Tensor[(4), float16]",
            "(divide(%p0, %p1), power(%p0, %p1), maximum(%p0, %p1), floor_mod(%p0, %p1))",
            false,
        ),
        (
            "%x: Tensor[(7), float16]",
            "(cast(%p0, dtype=\"int8\"), cast(%p0, dtype=\"float64\"), isnan(%p0), sigmoid(%p0))",
            true,
        ),
        (
            "%x: Tensor[(7), int32]",
            "cast(%p0, dtype=\"float16\")",
            true,
        ),
        (
            "%x: Tensor[(7), float64]",
            "cast(%p0, dtype=\"float16\")",
            true,
        ),
        (
            "%x: Tensor[(2, 3, 4), float16]",
            "(sum(%p0, axis=[1]), mean(%p0, axis=[0, 2]), max(%p0, axis=[2]), argmin(%p0, axis=[1]))",
            true,
        ),
        (
            "%x: Tensor[(2, 3), float16], %w: Tensor[(4, 3), float16]",
            "nn.dense(%p0, %p1, units=None)",
            true,
        ),
        (
            "%x: Tensor[(1, 2, 5, 5), float16], %w: Tensor[(3, 2, 3, 3), float16]",
            "nn.conv2d(%p0, %p1, padding=[1, 1, 1, 1])",
            true,
        ),
        (
            "%x: Tensor[(1, 2, 5, 5), float16]",
            "(nn.avg_pool2d(%p0, pool_size=[2, 2]), nn.max_pool2d(%p0, pool_size=[3, 3], padding=[1, 1, 1, 1]))",
            true,
        ),
        ("%x: Tensor[(2, 5), float16]", "nn.softmax(%p0)", true),
        (
            "%x: Tensor[(1, 2, 5, 5), float16], %w: Tensor[(3, 2, 3, 3), float16], \
             %s: Tensor[(3, 1, 1), float16], %r: Tensor[(1, 3, 5, 5), float16]",
            "nn.relu(add(add(multiply(nn.conv2d(%p0, %p1, padding=[1, 1, 1, 1]), %p2), %p2), %p3))",
            true,
        ),
        (
            "%x: Tensor[(3, 4), float16], %w: Tensor[(5, 4), float16], %b: Tensor[(5), float16]",
            "clip(nn.bias_add(nn.dense(%p0, %p1, units=None), %p2), a_min=-1f16, a_max=1f16)",
            true,
        ),
    ];
    for (params, body, interpretable) in cases {
        let n = params.matches("Tensor").count();
        let prim: Vec<String> = params
            .split(", %")
            .enumerate()
            .map(|(i, p)| format!("%p{i}{}", &p[p.find(':').unwrap_or(0)..]))
            .collect();
        let args: Vec<String> = params
            .split(", %")
            .map(|p| {
                format!(
                    "%{}",
                    p.trim_start_matches('%').split(':').next().unwrap_or("")
                )
            })
            .collect();
        assert_eq!((prim.len(), args.len()), (n, n));
        let text = format!(
            "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({}, Primitive=1) {{\n    {body}\n  }};\n  %0({})\n}}",
            prim.join(", "),
            args.join(", ")
        );
        if interpretable {
            agrees_with_interpreter(&text);
        }
        // Compiled: the same values bit for bit.
        let m = crate::compose::tests::checked(&text);
        let f = primitive(&text);
        let kernel = crate::compile_primitive(&f, "k").unwrap();
        let main = m.function(relay_ir::Symbol::intern("main")).unwrap();
        let args = relay_interp::random_inputs(&main.func, 7).unwrap();
        let want = relay_interp::run(&m, "main", args.clone(), &Default::default()).unwrap();
        let inputs: Vec<relay_ir::NDArray> = args
            .iter()
            .map(|v| match v {
                relay_ir::Value::Tensor(t) => (**t).clone(),
                _ => panic!("tensor arguments only"),
            })
            .collect();
        let mut outputs = crate::output_arrays(&f).unwrap();
        let refs: Vec<&relay_ir::NDArray> = inputs.iter().collect();
        let mut outs: Vec<&mut relay_ir::NDArray> = outputs.iter_mut().collect();
        kernel.call(&refs, &mut outs).unwrap();
        for (got, want) in outputs.iter().zip(want.tensor_leaves()) {
            if let Some(why) = relay_interp::compare_tensors(got, &want, 0.0, 0.0) {
                panic!("{text}\n{why}");
            }
        }
    }
}

#[test]
fn malformed_compositions_are_errors() {
    use relay_ir::te::ReduceOp;
    let p = Tensor::placeholder("p0", vec![4], DType::F32, 0);
    let k = relay_ir::te::IterVar::new(4);
    let sum = Tensor::compute("T_sum", &[], |_| {
        p.at(&[k.expr()]).reduce(ReduceOp::Sum, vec![k])
    });
    let composed = Composed {
        inputs: vec![p.clone()],
        outputs: vec![sum],
    };
    assert!(lower("k", &composed).is_ok());
    let twice = Tensor::compute("T_sum2", &[], |_| {
        let j = relay_ir::te::IterVar::new(4);
        let inner = Tensor::compute("T_inner", &[], |_| {
            p.at(&[j.expr()]).reduce(ReduceOp::Sum, vec![j])
        });
        let k = relay_ir::te::IterVar::new(4);
        inner.at(&[]).reduce(ReduceOp::Sum, vec![k])
    });
    let composed = Composed {
        inputs: vec![p.clone()],
        outputs: vec![twice],
    };
    // A reduction read inside another reduction is materialized first — here in the
    // output itself, which the outer reduction reads only at the element it then writes.
    let func = lower("k", &composed).unwrap();
    assert_eq!(
        func.to_string(),
        "kernel k(p0: float32[4] in, T_sum2: float32[] out) {\n  acc2 = 0f\n  \
             for r0 in 0..4 vectorized(4) {\n    v1 = p0[r0]\n    acc2 = acc2 + v1\n  }\n  \
             T_sum2[0] = acc2\n  acc5 = 0f\n  for r0 in 0..4 vectorized(4) {\n    \
             v4 = T_sum2[0]\n    acc5 = acc5 + v4\n  }\n  T_sum2[0] = acc5\n}\n"
    );
    let out = run::run(
        &func,
        &[relay_ir::NDArray::from_f64_slice(DType::F32, &[4], &[1.0, 2.0, 3.0, 4.5]).unwrap()],
    )
    .unwrap();
    assert_eq!(out[0].to_f64_vec(), [42.0]);
    let q = Tensor::placeholder("q", vec![4], DType::F32, 1);
    let composed = Composed {
        inputs: vec![q.clone()],
        outputs: vec![q],
    };
    assert_eq!(
        lower("k", &composed).unwrap_err(),
        KernelError::Malformed {
            kernel: "k".into(),
            message: "kernel input 0 (`q`) is not placeholder 0".into()
        }
    );
    let stray = Tensor::placeholder("r", vec![5], DType::F32, 0);
    let composed = Composed {
        inputs: vec![p.clone()],
        outputs: vec![Tensor::compute("T", &[5], |i| stray.at(i))],
    };
    assert_eq!(
        lower("k", &composed).unwrap_err(),
        KernelError::Malformed {
            kernel: "k".into(),
            message: "`r` does not match kernel input 0".into()
        }
    );
    let composed = Composed {
        inputs: vec![p.clone()],
        outputs: vec![Tensor::compute("T", &[2], |_| p.at(&[TExpr::index(7)]))],
    };
    assert_eq!(
        lower("k", &composed).unwrap_err(),
        KernelError::Malformed {
            kernel: "k".into(),
            message: "`p0` read at index 7 of 0..4".into()
        }
    );
}

/// Whether the loop nest of `prim`'s body calls the host depthwise convolution.
fn calls_depthwise(params: &str, body: &str) -> bool {
    let text = format!(
        "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({params}, Primitive=1) {{\n    {body}\n  }};\n  %0(%x, %w)\n}}"
    );
    let f = primitive(&text);
    let func = lower("k", &compose(&f).unwrap()).unwrap();
    if std::env::var_os("RELAY_PRINT_LOOPS").is_some() {
        eprintln!("{func}");
    }
    func.to_string().contains("depthwise(")
}

/// float32 depthwise convolutions (any stride, padding, dilation, multiplier; with an
/// epilogue) are host calls; other dtypes, groups of several channels and computed data keep
/// the direct window.
#[test]
fn depthwise_convolutions_are_host_calls() {
    let p = "%x: Tensor[(2, 8, 9, 9), float32], %w: Tensor[(8, 1, 3, 3), float32]";
    assert!(calls_depthwise(
        p,
        "nn.conv2d(%x, %w, padding=[1, 1], groups=8)"
    ));
    assert!(calls_depthwise(
        p,
        "nn.relu(nn.conv2d(%x, %w, strides=[2, 1], padding=[0, 1, 2, 0], dilation=[2, 1], groups=8))"
    ));
    let m = "%x: Tensor[(1, 4, 9, 9), float32], %w: Tensor[(8, 1, 5, 5), float32]";
    assert!(calls_depthwise(
        m,
        "nn.conv2d(%x, %w, padding=[2, 2], groups=4)"
    ));
    let f64s = "%x: Tensor[(1, 8, 9, 9), float64], %w: Tensor[(8, 1, 3, 3), float64]";
    assert!(!calls_depthwise(
        f64s,
        "nn.conv2d(%x, %w, padding=[1, 1], groups=8)"
    ));
    let grouped = "%x: Tensor[(1, 8, 9, 9), float32], %w: Tensor[(8, 2, 3, 3), float32]";
    assert!(!calls_depthwise(
        grouped,
        "nn.conv2d(%x, %w, padding=[1, 1], groups=4)"
    ));
    assert!(!calls_depthwise(
        p,
        "nn.conv2d(nn.relu(%x), %w, padding=[1, 1], groups=8)"
    ));
    // Few output channels per group, over rows that fill the vectors: the host's direct
    // convolution too (MNIST's second layer; a grouped layer of 16-wide rows).
    let mnist = "%x: Tensor[(1, 8, 14, 14), float32], %w: Tensor[(16, 8, 5, 5), float32]";
    assert!(calls_depthwise(mnist, "nn.conv2d(%x, %w, padding=[2, 2])"));
    let wide = "%x: Tensor[(1, 8, 16, 16), float32], %w: Tensor[(8, 2, 3, 3), float32]";
    assert!(calls_depthwise(
        wide,
        "nn.conv2d(%x, %w, padding=[1, 1], groups=4)"
    ));
    // Many output channels: a GEMM.
    let many = "%x: Tensor[(1, 8, 14, 14), float32], %w: Tensor[(32, 8, 3, 3), float32]";
    assert!(!calls_depthwise(many, "nn.conv2d(%x, %w, padding=[1, 1])"));
}

/// A depthwise convolution's batch-norm multiply/add and ReLU6 run inside the host call:
/// one statement, no second pass.
#[test]
fn depthwise_epilogues_fuse_into_the_host_call() {
    let params = "%x: Tensor[(1, 8, 9, 9), float32], %w: Tensor[(8, 1, 3, 3), float32], \
                  %s: Tensor[(8, 1, 1), float32], %b: Tensor[(8, 1, 1), float32]";
    let body = "clip(add(multiply(nn.conv2d(%x, %w, padding=[1, 1], groups=8), %s), %b), \
                a_min=0f, a_max=6f)";
    let text = format!(
        "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({params}, Primitive=1) {{\n    {body}\n  }};\n  %0(%x, %w, %s, %b)\n}}"
    );
    let func = lower("k", &compose(&primitive(&text)).unwrap()).unwrap();
    let printed = func.to_string();
    assert!(
        printed.contains("then y = clamp(y * s[0 + o] + b[0 + o], 0, 6)"),
        "{printed}"
    );
    assert!(!printed.contains("for "), "{printed}");
}

/// A float16 convolution's batch norm, residual add and `relu` (ResNet's block end, as TVM's
/// importer writes it) run inside the host GEMM call: one statement, no second pass. In
/// float32 they stay an in-place loop after the call (faster there, docs/design.md §7.4), as
/// does an epilogue that reads the product twice.
#[test]
fn gemm_epilogues_fuse_into_the_host_call() {
    let lowered = |dtype: &str, body: &str| {
        let params = format!(
            "%x: Tensor[(1, 4, 6, 5), {dtype}], %w: Tensor[(6, 4, 3, 3), {dtype}], \
             %s: Tensor[(6, 1, 1), {dtype}], %r: Tensor[(1, 6, 6, 5), {dtype}]"
        );
        let text = format!(
            "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({params}, Primitive=1) {{\n    {body}\n  }};\n  %0(%x, %w, %s, %r)\n}}"
        );
        lower("k", &compose(&primitive(&text)).unwrap())
            .unwrap()
            .to_string()
    };
    let conv = "nn.conv2d(%x, %w, padding=[1, 1])";
    let block = format!("nn.relu(add(add(multiply({conv}, %s), %s), %r))");
    let fused = lowered("float16", &block);
    assert!(
        fused.contains("epilogue(mul s[0; 1, 0], add s[0; 1, 0], add r[0; 30, 1], relu 0))"),
        "{fused}"
    );
    assert!(!fused.contains("for "), "{fused}");
    let single = lowered("float32", &block);
    assert!(!single.contains("epilogue("), "{single}");
    let twice = lowered("float16", &format!("%0 = {conv}; multiply(%0, %0)"));
    assert!(!twice.contains("epilogue("), "{twice}");
    assert!(twice.contains("for "), "{twice}");
}

#[test]
fn concatenations_store_each_input_into_its_own_slice() {
    // DenseNet's shape: a concatenation of channels with batch norm and relu after it.
    let got = kernel(
        "%a: Tensor[(1, 4, 3, 3), float32], %b: Tensor[(1, 2, 3, 3), float32], \
         %s: Tensor[(6, 1, 1), float32]",
        "%p0: Tensor[(1, 4, 3, 3), float32], %p1: Tensor[(1, 2, 3, 3), float32], \
         %p2: Tensor[(6, 1, 1), float32]",
        "%0 = (%p0, %p1); nn.relu(multiply(concatenate(%0, axis=1), %p2))",
        "%a, %b, %s",
    );
    // One loop nest per input, each reading that input alone, with no select between them
    // and no clamped index.
    assert_eq!(got.matches("for i0 in").count(), 2, "{got}");
    assert!(
        !got.contains("< 4") && !got.contains("min(") && !got.contains("max("),
        "{got}"
    );
    assert!(
        got.contains("for i0 in 0..4") && got.contains("for i0 in 0..2"),
        "{got}"
    );
    let agrees = |params: &str, body: &str, args: &str| {
        let prim = params
            .replace("%a", "%p0")
            .replace("%b", "%p1")
            .replace("%c", "%p2")
            .replace("%s", "%p3");
        agrees_with_interpreter(&format!(
            "#[version = \"0.0.5\"]\ndef @main({params}) {{\n  %0 = fn ({prim}, Primitive=1) {{\n    {body}\n  }};\n  %0({args})\n}}"
        ));
    };
    // Three inputs, one of a single channel, with a per-channel scale and shift.
    agrees(
        "%a: Tensor[(2, 3, 4, 5), float32], %b: Tensor[(2, 1, 4, 5), float32], \
         %c: Tensor[(2, 5, 4, 5), float32], %s: Tensor[(9, 1, 1), float32]",
        "%0 = (%p0, %p1, %p2); %1 = concatenate(%0, axis=1); \
         nn.relu(add(multiply(%1, %p3), %p3))",
        "%a, %b, %c, %s",
    );
    // Along the last axis, the first and an inner one; int32; an empty input.
    agrees(
        "%a: Tensor[(3, 2), int32], %b: Tensor[(3, 5), int32], %c: Tensor[(3, 0), int32], \
         %s: Tensor[(7), int32]",
        "%0 = (%p0, %p2, %p1); add(concatenate(%0, axis=1), %p3)",
        "%a, %b, %c, %s",
    );
    agrees(
        "%a: Tensor[(2, 3), float64], %b: Tensor[(4, 3), float64], %c: Tensor[(1, 3), float64], \
         %s: Tensor[(3), float64]",
        "%0 = (%p0, %p1, %p2); exp(subtract(concatenate(%0, axis=0), %p3))",
        "%a, %b, %c, %s",
    );
    agrees(
        "%a: Tensor[(2, 3, 4), float32], %b: Tensor[(2, 2, 4), float32], \
         %c: Tensor[(2, 1, 4), float32], %s: Tensor[(2, 6, 4), float32]",
        "%0 = (%p0, %p1, %p2); multiply(concatenate(%0, axis=1), %p3)",
        "%a, %b, %c, %s",
    );
}
