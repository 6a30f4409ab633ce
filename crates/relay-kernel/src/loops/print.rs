//! The loop nest IR as text (`relayc build --emit kernels`): stable, one statement a line,
//! expressions infix with C precedence and the fewest parentheses.
//!
//! ```text
//! kernel fused_add_relu(p0: float32[2, 3] in, p1: float32[3] in, T_relu: float32[2, 3] out) {
//!   for i0 in 0..2 {
//!     o2 = i0 * 3
//!     for i1 in 0..3 vectorized(4) {
//!       T_relu[o2 + i1] = select(p0[o2 + i1] + p1[i1] > 0f, p0[o2 + i1] + p1[i1], 0f)
//!     }
//!   }
//! }
//! ```
//!
//! Constants carry their dtype as a suffix unless it is `int64` (indices): `0f` (`float32`),
//! `2.5f64`, `3i32`, `255u8`, `true`.

use std::fmt::{self, Display, Formatter, Write};

use relay_ir::te::{BinaryOp, CmpOp, UnaryOp};
use relay_ir::{DType, DTypeCode};

use crate::loops::{BufferRole, ForKind, LExpr, LoopFunc, Stmt};

/// How a loop runs, as the loop nest and the schedule print it: `serial`, `vectorized(4)`,
/// `parallel`, `parallel vectorized(4)`.
impl Display for ForKind {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self {
            ForKind::Serial => f.write_str("serial"),
            ForKind::Vectorized { lanes } => write!(f, "vectorized({lanes})"),
            ForKind::Parallel { lanes: 1 } => f.write_str("parallel"),
            ForKind::Parallel { lanes } => write!(f, "parallel vectorized({lanes})"),
        }
    }
}

/// A loop header's kind after its bounds: nothing for a serial loop, else ` ` and the kind.
fn kind_suffix(kind: ForKind) -> String {
    match kind {
        ForKind::Serial => String::new(),
        kind => format!(" {kind}"),
    }
}

impl Display for LoopFunc {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "kernel {}(", self.name)?;
        for (i, b) in self.buffers.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            let role = match b.role {
                BufferRole::Input => "in",
                BufferRole::Output => "out",
                BufferRole::Scratch => "scratch",
            };
            let dims: Vec<String> = b.shape.iter().map(|d| d.to_string()).collect();
            write!(f, "{}: {}[{}] {role}", b.name, b.dtype, dims.join(", "))?;
        }
        f.write_str(") {\n")?;
        let mut out = String::new();
        self.stmt(&mut out, &self.body, 1)?;
        f.write_str(&out)?;
        f.write_str("}\n")
    }
}

/// Binding strength of an expression's outermost operator (larger binds tighter).
fn precedence(e: &LExpr) -> u8 {
    match e {
        LExpr::Binary(op, ..) => match op {
            BinaryOp::LogicalOr => 1,
            BinaryOp::LogicalAnd => 2,
            BinaryOp::BitOr => 3,
            BinaryOp::BitXor => 4,
            BinaryOp::BitAnd => 5,
            BinaryOp::Shl | BinaryOp::Shr => 7,
            BinaryOp::Add | BinaryOp::Sub => 8,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod => 9,
            _ => 11,
        },
        LExpr::Compare(..) => 6,
        LExpr::Unary(UnaryOp::Neg | UnaryOp::LogicalNot | UnaryOp::BitwiseNot, _) => 10,
        LExpr::Float(v, _) if v.is_sign_negative() => 10,
        LExpr::Int(v, _) if *v < 0 => 10,
        _ => 11,
    }
}

/// The infix spelling of a binary operator, or `None` for those printed as calls.
fn infix(op: BinaryOp) -> Option<&'static str> {
    Some(match op {
        BinaryOp::Add => "+",
        BinaryOp::Sub => "-",
        BinaryOp::Mul => "*",
        BinaryOp::Div => "/",
        BinaryOp::Mod => "%",
        BinaryOp::LogicalAnd => "&&",
        BinaryOp::LogicalOr => "||",
        BinaryOp::BitAnd => "&",
        BinaryOp::BitOr => "|",
        BinaryOp::BitXor => "^",
        BinaryOp::Shl => "<<",
        BinaryOp::Shr => ">>",
        _ => return None,
    })
}

/// The call spelling of a binary operator printed as a function.
fn call_name(op: BinaryOp) -> &'static str {
    match op {
        BinaryOp::FloorDiv => "floordiv",
        BinaryOp::FloorMod => "floormod",
        BinaryOp::Pow => "pow",
        BinaryOp::Max => "max",
        BinaryOp::Min => "min",
        BinaryOp::LogicalXor => "xor",
        _ => "op",
    }
}

fn cmp_text(op: CmpOp) -> &'static str {
    match op {
        CmpOp::Eq => "==",
        CmpOp::Ne => "!=",
        CmpOp::Lt => "<",
        CmpOp::Le => "<=",
        CmpOp::Gt => ">",
        CmpOp::Ge => ">=",
    }
}

fn unary_name(op: UnaryOp) -> &'static str {
    match op {
        UnaryOp::Neg => "-",
        UnaryOp::LogicalNot => "!",
        UnaryOp::BitwiseNot => "~",
        UnaryOp::Abs => "abs",
        UnaryOp::Sign => "sign",
        UnaryOp::Exp => "exp",
        UnaryOp::Log => "log",
        UnaryOp::Log2 => "log2",
        UnaryOp::Log10 => "log10",
        UnaryOp::Sqrt => "sqrt",
        UnaryOp::Rsqrt => "rsqrt",
        UnaryOp::Erf => "erf",
        UnaryOp::Sigmoid => "sigmoid",
        UnaryOp::Tanh => "tanh",
        UnaryOp::Sin => "sin",
        UnaryOp::Cos => "cos",
        UnaryOp::Tan => "tan",
        UnaryOp::Asin => "asin",
        UnaryOp::Acos => "acos",
        UnaryOp::Atan => "atan",
        UnaryOp::Sinh => "sinh",
        UnaryOp::Cosh => "cosh",
        UnaryOp::Asinh => "asinh",
        UnaryOp::Acosh => "acosh",
        UnaryOp::Atanh => "atanh",
        UnaryOp::Ceil => "ceil",
        UnaryOp::Floor => "floor",
        UnaryOp::Round => "round",
        UnaryOp::Trunc => "trunc",
        UnaryOp::IsNan => "isnan",
        UnaryOp::IsInf => "isinf",
        UnaryOp::IsFinite => "isfinite",
    }
}

/// The suffix of a constant of `dtype`.
fn suffix(dtype: DType) -> String {
    match (dtype.code, dtype.bits) {
        (DTypeCode::Int, 64) => String::new(),
        (DTypeCode::Float, 32) => "f".into(),
        (DTypeCode::Float, b) => format!("f{b}"),
        (DTypeCode::Int, b) => format!("i{b}"),
        (DTypeCode::UInt, b) => format!("u{b}"),
        _ => format!(":{dtype}"),
    }
}

impl LoopFunc {
    fn local_name(&self, id: crate::loops::LocalId) -> &str {
        self.locals
            .get(id.0 as usize)
            .map_or("?local", |l| l.name.as_str())
    }

    fn buffer_name(&self, id: crate::loops::BufferId) -> &str {
        self.buffers
            .get(id.0 as usize)
            .map_or("?buffer", |b| b.name.as_str())
    }

    fn stmt(&self, out: &mut String, s: &Stmt, depth: usize) -> fmt::Result {
        relay_ir::ensure_sufficient_stack(|| {
            let pad = "  ".repeat(depth);
            match s {
                Stmt::For {
                    var,
                    extent,
                    kind,
                    body,
                } => {
                    let kind = kind_suffix(*kind);
                    writeln!(
                        out,
                        "{pad}for {} in 0..{extent}{kind} {{",
                        self.local_name(*var)
                    )?;
                    self.stmt(out, body, depth + 1)?;
                    writeln!(out, "{pad}}}")
                }
                Stmt::Store {
                    buffer,
                    index,
                    value,
                } => {
                    write!(out, "{pad}{}[", self.buffer_name(*buffer))?;
                    self.expr(out, index)?;
                    out.push_str("] = ");
                    self.expr(out, value)?;
                    out.push('\n');
                    Ok(())
                }
                Stmt::Assign { local, value } => {
                    write!(out, "{pad}{} = ", self.local_name(*local))?;
                    self.expr(out, value)?;
                    out.push('\n');
                    Ok(())
                }
                Stmt::Seq(stmts) => {
                    for s in stmts {
                        self.stmt(out, s, depth)?;
                    }
                    Ok(())
                }
                Stmt::Range {
                    var,
                    start,
                    end,
                    extent,
                    kind,
                    body,
                } => {
                    let kind = kind_suffix(*kind);
                    write!(out, "{pad}for {} in ", self.local_name(*var))?;
                    self.expr(out, start)?;
                    out.push_str("..");
                    self.expr(out, end)?;
                    writeln!(out, " (of 0..{extent}){kind} {{")?;
                    self.stmt(out, body, depth + 1)?;
                    writeln!(out, "{pad}}}")
                }
                Stmt::Gemm(g) => {
                    // `gemm(c[off; rs, cs] = a[...] * b[...], m=.., n=.., k=..)`
                    write!(out, "{pad}gemm(")?;
                    for (i, m) in [&g.c, &g.a, &g.b].into_iter().enumerate() {
                        out.push_str(["", " = ", " * "][i]);
                        write!(out, "{}[", self.buffer_name(m.buffer))?;
                        self.expr(out, &m.offset)?;
                        write!(out, "; {}, {}]", m.row_stride, m.col_stride)?;
                    }
                    write!(out, ", m={}, n={}, k={}", g.m, g.n, g.k)?;
                    if let Some(w) = &g.window {
                        write!(
                            out,
                            ", window(c={}, in={}x{}, kernel={}x{}, strides={}x{}, \
                             dilation={}x{}, pad={}x{}, out={}x{})",
                            w.channels,
                            w.height,
                            w.width,
                            w.kernel_h,
                            w.kernel_w,
                            w.stride_h,
                            w.stride_w,
                            w.dilation_h,
                            w.dilation_w,
                            w.pad_top,
                            w.pad_left,
                            w.out_h,
                            w.out_w
                        )?;
                    }
                    if !g.epilogue.is_empty() {
                        self.gemm_epilogue(out, &g.epilogue)?;
                    }
                    writeln!(out, ")")
                }
                Stmt::Depthwise(d) => {
                    // `depthwise(y[off] = x[off] * w[off], n=.., c=.., ...)`
                    let p = &d.params;
                    write!(out, "{pad}depthwise(")?;
                    for (i, (b, off)) in [d.out, d.data, d.weight].into_iter().enumerate() {
                        out.push_str(["", " = ", " * "][i]);
                        write!(out, "{}[{off}]", self.buffer_name(b))?;
                    }
                    writeln!(
                        out,
                        ", n={}, c={}, group_channels={}, multiplier={}, in={}x{}, out={}x{}, \
                         kernel={}x{}, strides={}x{}, dilation={}x{}, pad={}x{})",
                        p.batch,
                        p.channels,
                        p.group_channels,
                        p.multiplier,
                        p.height,
                        p.width,
                        p.out_height,
                        p.out_width,
                        p.kernel_h,
                        p.kernel_w,
                        p.stride_h,
                        p.stride_w,
                        p.dilation_h,
                        p.dilation_w,
                        p.pad_top,
                        p.pad_left
                    )?;
                    let e = &d.epilogue;
                    if *e != super::DepthwiseEpilogue::NONE {
                        // `  then y = clamp(y * s[off] + b[off], lo, hi)`
                        write!(out, "{pad}  then y = clamp(y")?;
                        if let Some((b, off)) = e.scale {
                            write!(out, " * {}[{off} + o]", self.buffer_name(b))?;
                        }
                        if let Some((b, off)) = e.shift {
                            write!(out, " + {}[{off} + o]", self.buffer_name(b))?;
                        }
                        writeln!(out, ", {}, {})", e.lo, e.hi)?;
                    }
                    Ok(())
                }
            }
        })
    }

    /// `e`, parenthesized when it binds less tightly than `min`.
    fn operand(&self, out: &mut String, e: &LExpr, min: u8) -> fmt::Result {
        if precedence(e) < min {
            out.push('(');
            self.expr(out, e)?;
            out.push(')');
            Ok(())
        } else {
            self.expr(out, e)
        }
    }

    /// `, epilogue(mul s[off; rs, cs], add b[...], min 6, relu 0)`: a GEMM's epilogue.
    fn gemm_epilogue(&self, out: &mut String, e: &crate::loops::GemmEpilogue) -> fmt::Result {
        use relay_linalg::gemm::epilogue::{Lower, Step};
        out.push_str(", epilogue(");
        let mut parts = Vec::new();
        for (kind, m) in &e.steps {
            let mut p = String::new();
            p.push_str(if *kind == Step::Mul { "mul " } else { "add " });
            write!(p, "{}[", self.buffer_name(m.buffer))?;
            self.expr(&mut p, &m.offset)?;
            write!(p, "; {}, {}]", m.row_stride, m.col_stride)?;
            parts.push(p);
        }
        if let Some(hi) = e.upper {
            parts.push(format!("min {hi}"));
        }
        match e.lower {
            Lower::None => {}
            Lower::Relu(lo) => parts.push(format!("relu {lo}")),
            Lower::Clip(lo) => parts.push(format!("max {lo}")),
        }
        out.push_str(&parts.join(", "));
        out.push(')');
        Ok(())
    }

    fn args(&self, out: &mut String, name: &str, args: &[&LExpr]) -> fmt::Result {
        write!(out, "{name}(")?;
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            self.expr(out, a)?;
        }
        out.push(')');
        Ok(())
    }

    fn expr(&self, out: &mut String, e: &LExpr) -> fmt::Result {
        relay_ir::ensure_sufficient_stack(|| match e {
            LExpr::Local(id) => {
                out.push_str(self.local_name(*id));
                Ok(())
            }
            LExpr::Int(v, d) if d.code == DTypeCode::Bool => {
                out.push_str(if *v != 0 { "true" } else { "false" });
                Ok(())
            }
            LExpr::Int(v, d) => write!(out, "{v}{}", suffix(*d)),
            LExpr::Float(v, d) => write!(out, "{v}{}", suffix(*d)),
            LExpr::Load { buffer, index } => {
                write!(out, "{}[", self.buffer_name(*buffer))?;
                self.expr(out, index)?;
                out.push(']');
                Ok(())
            }
            LExpr::Unary(op @ (UnaryOp::Neg | UnaryOp::LogicalNot | UnaryOp::BitwiseNot), a) => {
                out.push_str(unary_name(*op));
                self.operand(out, a, 11)
            }
            LExpr::Unary(op, a) => self.args(out, unary_name(*op), &[a]),
            LExpr::Binary(op, a, b) => match infix(*op) {
                Some(text) => {
                    let p = precedence(e);
                    self.operand(out, a, p)?;
                    write!(out, " {text} ")?;
                    self.operand(out, b, p + 1)
                }
                None => self.args(out, call_name(*op), &[a, b]),
            },
            LExpr::Compare(op, a, b) => {
                self.operand(out, a, 7)?;
                write!(out, " {} ", cmp_text(*op))?;
                self.operand(out, b, 7)
            }
            LExpr::Select(c, a, b) => self.args(out, "select", &[c, a, b]),
            LExpr::Cast(d, a) => self.args(out, &d.to_string(), &[a]),
        })
    }
}

#[cfg(test)]
mod tests {
    use relay_ir::DType;

    use super::*;
    use crate::loops::{Buffer, BufferId, Local, LocalId};

    #[test]
    fn prints_loops_and_precedence() {
        let l = |i| Box::new(LExpr::Local(LocalId(i)));
        let i64c = |v| Box::new(LExpr::Int(v, DType::I64));
        let index = LExpr::Binary(
            BinaryOp::Add,
            Box::new(LExpr::Binary(BinaryOp::Mul, l(0), i64c(3))),
            l(1),
        );
        let load = |b| {
            Box::new(LExpr::Load {
                buffer: BufferId(b),
                index: Box::new(index.clone()),
            })
        };
        let sum = LExpr::Binary(BinaryOp::Add, load(0), load(0));
        let value = LExpr::Binary(
            BinaryOp::Mul,
            Box::new(sum),
            Box::new(LExpr::Binary(
                BinaryOp::Max,
                Box::new(LExpr::Unary(UnaryOp::Neg, load(0))),
                Box::new(LExpr::Float(0.0, DType::F32)),
            )),
        );
        let f = LoopFunc {
            name: "k".into(),
            buffers: vec![
                Buffer {
                    name: "p0".into(),
                    dtype: DType::F32,
                    shape: vec![2, 3],
                    role: BufferRole::Input,
                },
                Buffer {
                    name: "T".into(),
                    dtype: DType::F32,
                    shape: vec![2, 3],
                    role: BufferRole::Output,
                },
            ],
            locals: vec![
                Local {
                    name: "i0".into(),
                    dtype: DType::I64,
                },
                Local {
                    name: "i1".into(),
                    dtype: DType::I64,
                },
            ],
            body: Stmt::For {
                var: LocalId(0),
                extent: 2,
                kind: ForKind::Serial,
                body: Box::new(Stmt::For {
                    var: LocalId(1),
                    extent: 3,
                    kind: ForKind::Vectorized { lanes: 4 },
                    body: Box::new(Stmt::Store {
                        buffer: BufferId(1),
                        index: index.clone(),
                        value,
                    }),
                }),
            },
        };
        assert_eq!(
            f.to_string(),
            "kernel k(p0: float32[2, 3] in, T: float32[2, 3] out) {
  for i0 in 0..2 {
    for i1 in 0..3 vectorized(4) {
      T[i0 * 3 + i1] = (p0[i0 * 3 + i1] + p0[i0 * 3 + i1]) * max(-p0[i0 * 3 + i1], 0f)
    }
  }
}
"
        );
    }

    #[test]
    fn prints_constants_casts_and_comparisons() {
        let f = LoopFunc {
            name: "c".into(),
            buffers: vec![Buffer {
                name: "T".into(),
                dtype: DType::BOOL,
                shape: vec![],
                role: BufferRole::Output,
            }],
            locals: vec![],
            body: Stmt::Store {
                buffer: BufferId(0),
                index: LExpr::Int(0, DType::I64),
                value: LExpr::Binary(
                    BinaryOp::LogicalAnd,
                    Box::new(LExpr::Compare(
                        CmpOp::Lt,
                        Box::new(LExpr::Cast(
                            DType::I32,
                            Box::new(LExpr::Float(2.5, DType::F64)),
                        )),
                        Box::new(LExpr::Binary(
                            BinaryOp::Sub,
                            Box::new(LExpr::Int(255, DType::U8)),
                            Box::new(LExpr::Binary(
                                BinaryOp::Sub,
                                Box::new(LExpr::Int(-1, DType::I32)),
                                Box::new(LExpr::Int(1, DType::I32)),
                            )),
                        )),
                    )),
                    Box::new(LExpr::Int(1, DType::BOOL)),
                ),
            },
        };
        assert_eq!(
            f.to_string(),
            "kernel c(T: bool[] out) {\n  T[0] = int32(2.5f64) < 255u8 - (-1i32 - 1i32) && true\n}\n"
        );
    }
}
