//! The loop nest IR: what a kernel does, as loops over flat buffers. Lowering
//! (`lower`) produces it from tensor expressions; [`verify`] checks it; codegen (`codegen`)
//! turns it into Cranelift IR; `relayc build --emit kernels` prints it (`Display`, in
//! `print`). [`access`] tells which buffers a statement reads and writes, and where.
//!
//! Buffers are the kernel's tensor arguments, compact row-major, indexed by a flat element
//! index, and its scratch buffers (intermediate tensors lowering chose to materialize: the
//! result of a contraction before its epilogue, an im2col matrix, a reduction another
//! reduction reads), which live in the kernel context's workspace for one call. Scalar
//! expressions reuse the tensor expression operators (`relay_ir::te`).

pub mod access;
mod print;
pub mod range;
pub mod verify;

use std::hash::{Hash, Hasher};

use relay_ir::DType;
use relay_ir::te::{BinaryOp, CmpOp, UnaryOp};

pub use access::{Access, Accesses, Place};
pub use verify::verify;

/// One kernel: its buffers (inputs first, then outputs, in the packed call's argument order,
/// then scratch buffers, which are not arguments) and its body.
#[derive(Clone, Debug)]
pub struct LoopFunc {
    /// The kernel's name (`fused_add_relu_<hash>`).
    pub name: String,
    /// The tensor arguments, in call order.
    pub buffers: Vec<Buffer>,
    /// Scalar locals (accumulators, hoisted indices), indexed by [`LocalId`].
    pub locals: Vec<Local>,
    /// What it does.
    pub body: Stmt,
}

/// A tensor argument of a kernel.
#[derive(Clone, Debug)]
pub struct Buffer {
    /// Its name for printing (`p0`, `T_relu`).
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Shape (static; the packed entry checks the argument against it).
    pub shape: Vec<i64>,
    /// Whether the kernel reads or writes it.
    pub role: BufferRole,
}

/// How a kernel uses a buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BufferRole {
    /// Read only.
    Input,
    /// Written (every element, exactly once per call, unless the kernel fails).
    Output,
    /// Written, then read, within one call: an intermediate tensor in the workspace of the
    /// kernel context (64-byte aligned), not a packed argument.
    Scratch,
}

/// A scalar local variable of a kernel: a loop counter, an accumulator or a hoisted value.
#[derive(Clone, Debug)]
pub struct Local {
    /// A name for printing (`i0`, `acc`).
    pub name: String,
    /// Its type (`int64` for loop counters and indices).
    pub dtype: DType,
}

/// Index of a [`Local`] in [`LoopFunc::locals`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LocalId(pub u32);

/// Index of a [`Buffer`] in [`LoopFunc::buffers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct BufferId(pub u32);

/// A statement.
#[derive(Clone, Debug)]
pub enum Stmt {
    /// `for var in 0..extent { body }`; `var` is an `int64` local.
    For {
        /// The counter.
        var: LocalId,
        /// The trip count.
        extent: i64,
        /// How the loop runs.
        kind: ForKind,
        /// The body.
        body: Box<Stmt>,
    },
    /// `buffer[index] = value` (flat element index).
    Store {
        /// The buffer written.
        buffer: BufferId,
        /// The flat element index (`int64`).
        index: LExpr,
        /// The value (of the buffer's dtype).
        value: LExpr,
    },
    /// `local = value`.
    Assign {
        /// The local set.
        local: LocalId,
        /// Its new value (of the local's dtype).
        value: LExpr,
    },
    /// Statements in order.
    Seq(Vec<Stmt>),
    /// `for var in start..end { body }` with bounds computed at run time (a partitioned
    /// loop: the part of an inner loop where a padded read is in bounds, and the parts before
    /// and after it). The bounds are clamped to `0 <= start <= end <= extent`; `kind` is
    /// `Serial` or `Vectorized`.
    Range {
        /// The counter.
        var: LocalId,
        /// The first iteration (`int64`).
        start: LExpr,
        /// One past the last iteration (`int64`).
        end: LExpr,
        /// The greatest trip count: the loop's full extent.
        extent: i64,
        /// How the loop runs.
        kind: ForKind,
        /// The body.
        body: Box<Stmt>,
    },
    /// A matrix product by the host's GEMM routine (the contraction core, `relay_linalg::gemm`):
    /// `c[i, j] = sum_l a[i, l] * b[l, j]` for `i < m`, `j < n`, `l < k`, where element
    /// `(i, l)` of `a` is `a[a.offset + i * a.row_stride + l * a.col_stride]` (flat index into
    /// the buffer), and so on. `c` is overwritten (with zeros when `k` is 0). The three
    /// buffers have the statement's float dtype (`float32` or `float64`); `c` is not read, and
    /// must not overlap `a` or `b`. The host splits large products across the kernel
    /// context's threads.
    Gemm(Box<Gemm>),
    /// A direct convolution by the host (`relay_linalg::depthwise`): depthwise, grouped, or ordinary
    /// with few output channels; `float32` NCHW data, weights `[C·multiplier,
    /// group_channels, kh, kw]` and result, each from a flat index of its buffer, shapes in
    /// [`Depthwise::params`]. The result is overwritten (not read) and must not overlap the
    /// data or weights. The host splits it across the kernel context's threads.
    Depthwise(Box<Depthwise>),
}

/// The operands of a [`Stmt::Depthwise`].
#[derive(Clone, Debug)]
pub struct Depthwise {
    /// The shape of the convolution.
    pub params: relay_linalg::depthwise::DepthwiseParams,
    /// The data's buffer and the flat index of its first element.
    pub data: (BufferId, i64),
    /// The weights' buffer and first element.
    pub weight: (BufferId, i64),
    /// The result's buffer and first element.
    pub out: (BufferId, i64),
    /// What is applied to each result (`relay_linalg::depthwise::DepthwiseEpilogue`).
    pub epilogue: DepthwiseEpilogue,
}

/// The epilogue of a [`Stmt::Depthwise`]: `y = clamp(y·scale[o] + shift[o], lo, hi)` per
/// output channel `o`, `scale` and `shift` (one `float32` per output channel, from a flat
/// index of their buffers) optional, `lo`/`hi` infinite when there is no clamp.
#[derive(Clone, Debug, PartialEq)]
pub struct DepthwiseEpilogue {
    /// The multipliers' buffer and first element.
    pub scale: Option<(BufferId, i64)>,
    /// The addends' buffer and first element.
    pub shift: Option<(BufferId, i64)>,
    /// The clamp's lower bound.
    pub lo: f32,
    /// The clamp's upper bound.
    pub hi: f32,
}

impl DepthwiseEpilogue {
    /// No epilogue.
    pub const NONE: DepthwiseEpilogue = DepthwiseEpilogue {
        scale: None,
        shift: None,
        lo: f32::NEG_INFINITY,
        hi: f32::INFINITY,
    };
}

impl Depthwise {
    /// Each operand (data, weights, result, then the epilogue's) with its element count.
    pub fn operands(&self) -> Vec<((BufferId, i64), Option<i64>)> {
        let p = &self.params;
        let channels = p.channels.checked_mul(p.multiplier);
        let mut out = vec![
            (self.data, p.data_len()),
            (self.weight, p.weight_len()),
            (self.out, p.out_len()),
        ];
        for e in [self.epilogue.scale, self.epilogue.shift]
            .into_iter()
            .flatten()
        {
            out.push((e, channels));
        }
        out
    }
}

/// The operands of a [`Stmt::Gemm`].
#[derive(Clone, Debug)]
pub struct Gemm {
    /// Rows of `a` and `c`.
    pub m: i64,
    /// Columns of `b` and `c`.
    pub n: i64,
    /// Columns of `a`, rows of `b`.
    pub k: i64,
    /// The left operand, `m × k`.
    pub a: MatrixRef,
    /// The right operand, `k × n`.
    pub b: MatrixRef,
    /// The result, `m × n`.
    pub c: MatrixRef,
    /// When present, `b` is this image window of `b.buffer` from `b.offset` (implicit
    /// im2col: `k = C·KH·KW`, `n = OH·OW`; `b`'s strides are unused), which the host packs
    /// straight from the image.
    pub window: Option<ImageWindow>,
    /// What the host applies to each tile of `c` once it is computed.
    pub epilogue: GemmEpilogue,
}

impl Gemm {
    /// Its matrices: `a`, `b`, `c`, then the epilogue's operands.
    pub fn matrices(&self) -> impl Iterator<Item = &MatrixRef> {
        [&self.a, &self.b, &self.c]
            .into_iter()
            .chain(self.epilogue.steps.iter().map(|(_, m)| m))
    }

    /// As [`Gemm::matrices`], mutably.
    pub fn matrices_mut(&mut self) -> impl Iterator<Item = &mut MatrixRef> {
        [&mut self.a, &mut self.b, &mut self.c]
            .into_iter()
            .chain(self.epilogue.steps.iter_mut().map(|(_, m)| m))
    }
}

/// The epilogue of a [`Gemm`] (`relay_linalg::gemm::Epilogue`): each element `v` of `c` becomes
/// `lower(upper(steps(v)))`, each step multiplying or adding the element of its operand
/// at the same `(i, j)` — an `m × n` view whose strides may be 0 (broadcast) — `upper`
/// `clip`'s `hi < v ? hi : v`. Empty: the product is stored as it is. On `float16`, each
/// step computes in `float32` and rounds to `float16`, as the loops it replaces do.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmEpilogue {
    /// The steps, in order (at most `relay_linalg::gemm::epilogue::MAX_STEPS`).
    pub steps: Vec<(relay_linalg::gemm::epilogue::Step, MatrixRef)>,
    /// The upper clamp's bound.
    pub upper: Option<f64>,
    /// The lower clamp.
    pub lower: relay_linalg::gemm::epilogue::Lower<f64>,
}

impl GemmEpilogue {
    /// No epilogue.
    pub const NONE: GemmEpilogue = GemmEpilogue {
        steps: Vec::new(),
        upper: None,
        lower: relay_linalg::gemm::epilogue::Lower::None,
    };

    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == GemmEpilogue::NONE
    }
}

/// A convolution's image window as a GEMM's `b` operand (`relay_linalg::gemm::Window`): element
/// `((c·KH + ky)·KW + kx, y·OW + x)` is the image (`[C, H, W]`, row-major) at
/// `(c, y·SH − PT + ky·DH, x·SW − PL + kx·DW)`, zero outside it. Passed to the host as is
/// (`#[repr(C)]`, thirteen `int64`s in this order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct ImageWindow {
    /// Channels `C`.
    pub channels: i64,
    /// Image rows `H`.
    pub height: i64,
    /// Image columns `W`.
    pub width: i64,
    /// Kernel rows `KH`.
    pub kernel_h: i64,
    /// Kernel columns `KW`.
    pub kernel_w: i64,
    /// Vertical stride `SH`.
    pub stride_h: i64,
    /// Horizontal stride `SW`.
    pub stride_w: i64,
    /// Vertical dilation `DH`.
    pub dilation_h: i64,
    /// Horizontal dilation `DW`.
    pub dilation_w: i64,
    /// Padding above `PT`.
    pub pad_top: i64,
    /// Padding on the left `PL`.
    pub pad_left: i64,
    /// Output rows `OH`.
    pub out_h: i64,
    /// Output columns `OW`.
    pub out_w: i64,
}

impl ImageWindow {
    /// The fields in order.
    pub fn to_array(&self) -> [i64; 13] {
        [
            self.channels,
            self.height,
            self.width,
            self.kernel_h,
            self.kernel_w,
            self.stride_h,
            self.stride_w,
            self.dilation_h,
            self.dilation_w,
            self.pad_top,
            self.pad_left,
            self.out_h,
            self.out_w,
        ]
    }

    /// Whether every size, stride and dilation is positive, the paddings are not negative,
    /// and the window's dimensions (`k`, `n`, the image's length and every coordinate it
    /// reaches) fit in `int64`.
    pub fn valid(&self) -> bool {
        let a = self.to_array();
        let positive = a[..9].iter().chain(&a[11..]).all(|&v| v > 0);
        let reach = |o: i64, s: i64, k: i64, d: i64, p: i64| {
            o.checked_mul(s)
                .zip(k.checked_mul(d))
                .and_then(|(x, y)| x.checked_add(y))
                .and_then(|v| v.checked_add(p))
        };
        positive
            && self.pad_top >= 0
            && self.pad_left >= 0
            && self.depth().is_some()
            && self.pixels().is_some()
            && self.image_len().is_some()
            && reach(
                self.out_h,
                self.stride_h,
                self.kernel_h,
                self.dilation_h,
                self.height,
            )
            .is_some()
            && reach(
                self.out_w,
                self.stride_w,
                self.kernel_w,
                self.dilation_w,
                self.width,
            )
            .is_some()
    }

    /// The window's rows `C·KH·KW` (the GEMM's `k`).
    pub fn depth(&self) -> Option<i64> {
        self.channels
            .checked_mul(self.kernel_h)?
            .checked_mul(self.kernel_w)
    }

    /// The window's columns `OH·OW` (the GEMM's `n`).
    pub fn pixels(&self) -> Option<i64> {
        self.out_h.checked_mul(self.out_w)
    }

    /// The image's elements `C·H·W`.
    pub fn image_len(&self) -> Option<i64> {
        self.channels
            .checked_mul(self.height)?
            .checked_mul(self.width)
    }

    /// The image offset of window element `(q, pixel)`, or `None` in the padding.
    pub fn offset(&self, q: i64, pixel: i64) -> Option<i64> {
        let (kh, kw) = (self.kernel_h, self.kernel_w);
        let (c, ky, kx) = (q / (kh * kw), q / kw % kh, q % kw);
        let (y, x) = (pixel / self.out_w, pixel % self.out_w);
        let iy = y * self.stride_h + ky * self.dilation_h - self.pad_top;
        let ix = x * self.stride_w + kx * self.dilation_w - self.pad_left;
        ((0..self.height).contains(&iy) && (0..self.width).contains(&ix))
            .then_some((c * self.height + iy) * self.width + ix)
    }
}

/// A strided matrix view of a buffer, for [`Gemm`].
#[derive(Clone, Debug, PartialEq)]
pub struct MatrixRef {
    /// The buffer.
    pub buffer: BufferId,
    /// The flat index of element `(0, 0)` (`int64`; may depend on enclosing loop counters).
    pub offset: LExpr,
    /// Elements between rows (non-negative).
    pub row_stride: i64,
    /// Elements between columns (non-negative).
    pub col_stride: i64,
}

/// How a `for` loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ForKind {
    /// One iteration after another.
    Serial,
    /// The body runs `lanes` iterations at once in SIMD registers (`f32x4`, `i32x4`): loads
    /// contiguous in the counter become vector loads, loads that do not depend on it are
    /// splatted, others gathered; a scalar loop runs the remainder (`extent % lanes`). Only
    /// innermost loops whose body stores at an index contiguous in the counter.
    Vectorized {
        /// Lanes per vector (4 for 32-bit elements).
        lanes: u32,
    },
    /// Iterations may run on different threads of the kernel context's thread pool: the loop
    /// is outlined into a function running a range of iterations (vectorized over `lanes` as
    /// [`ForKind::Vectorized`] when `lanes > 1`), which the host splits into chunks. The body
    /// must touch disjoint elements per iteration and read no local assigned outside the loop.
    Parallel {
        /// Lanes per vector in each chunk (1: scalar iterations).
        lanes: u32,
    },
}

/// A scalar expression of a loop nest. Equality and hashing are structural, with float
/// constants compared by their bits (so `NaN == NaN` with the same payload, `0.0 != -0.0`).
#[derive(Clone, Debug)]
pub enum LExpr {
    /// A local's current value.
    Local(LocalId),
    /// An integer (or boolean 0/1) constant of `dtype`.
    Int(i128, DType),
    /// A float constant of `dtype`.
    Float(f64, DType),
    /// `buffer[index]` (flat element index, `int64`).
    Load {
        /// The buffer read.
        buffer: BufferId,
        /// The flat element index.
        index: Box<LExpr>,
    },
    /// A unary operation (result dtype as in `relay_ir::te::TExpr::unary`).
    Unary(UnaryOp, Box<LExpr>),
    /// A binary operation on operands of one dtype.
    Binary(BinaryOp, Box<LExpr>, Box<LExpr>),
    /// A comparison (`bool`).
    Compare(CmpOp, Box<LExpr>, Box<LExpr>),
    /// `cond ? then : else`.
    Select(Box<LExpr>, Box<LExpr>, Box<LExpr>),
    /// Conversion to `dtype` (numpy `astype` rules).
    Cast(DType, Box<LExpr>),
}

impl LoopFunc {
    /// The dtype of an expression of this kernel (as codegen computes it: an operation has
    /// its first operand's dtype, a predicate `bool`); `None` when it names a local or buffer
    /// the kernel does not have.
    pub fn dtype_of(&self, e: &LExpr) -> Option<DType> {
        Some(match e {
            LExpr::Local(l) => self.locals.get(l.0 as usize)?.dtype,
            LExpr::Int(_, d) | LExpr::Float(_, d) | LExpr::Cast(d, _) => *d,
            LExpr::Load { buffer, .. } => self.buffers.get(buffer.0 as usize)?.dtype,
            LExpr::Unary(op, a) => match op {
                UnaryOp::IsNan | UnaryOp::IsInf | UnaryOp::IsFinite | UnaryOp::LogicalNot => {
                    DType::BOOL
                }
                _ => self.dtype_of(a)?,
            },
            LExpr::Binary(_, a, _) | LExpr::Select(_, a, _) => self.dtype_of(a)?,
            LExpr::Compare(..) => DType::BOOL,
        })
    }
}

impl PartialEq for LExpr {
    fn eq(&self, other: &LExpr) -> bool {
        use LExpr as E;
        match (self, other) {
            (E::Local(a), E::Local(b)) => a == b,
            (E::Int(a, d), E::Int(b, e)) => a == b && d == e,
            (E::Float(a, d), E::Float(b, e)) => a.to_bits() == b.to_bits() && d == e,
            (
                E::Load { buffer, index },
                E::Load {
                    buffer: b,
                    index: i,
                },
            ) => buffer == b && index == i,
            (E::Unary(o, a), E::Unary(p, b)) => o == p && a == b,
            (E::Binary(o, a, b), E::Binary(p, c, d)) => o == p && a == c && b == d,
            (E::Compare(o, a, b), E::Compare(p, c, d)) => o == p && a == c && b == d,
            (E::Select(c, a, b), E::Select(d, x, y)) => c == d && a == x && b == y,
            (E::Cast(d, a), E::Cast(e, b)) => d == e && a == b,
            _ => false,
        }
    }
}

impl Eq for LExpr {}

impl Hash for LExpr {
    fn hash<H: Hasher>(&self, state: &mut H) {
        std::mem::discriminant(self).hash(state);
        match self {
            LExpr::Local(l) => l.hash(state),
            LExpr::Int(v, d) => (v, d).hash(state),
            LExpr::Float(v, d) => (v.to_bits(), d).hash(state),
            LExpr::Load { buffer, index } => (buffer, index).hash(state),
            LExpr::Unary(op, a) => (op, a).hash(state),
            LExpr::Binary(op, a, b) => (op, a, b).hash(state),
            LExpr::Compare(op, a, b) => (op, a, b).hash(state),
            LExpr::Select(c, a, b) => (c, a, b).hash(state),
            LExpr::Cast(d, a) => (d, a).hash(state),
        }
    }
}

impl LExpr {
    /// Calls `f` on this expression and each of its subexpressions, parents first.
    pub fn visit(&self, f: &mut dyn FnMut(&LExpr)) {
        f(self);
        match self {
            LExpr::Local(_) | LExpr::Int(..) | LExpr::Float(..) => {}
            LExpr::Load { index, .. } => index.visit(f),
            LExpr::Unary(_, a) | LExpr::Cast(_, a) => a.visit(f),
            LExpr::Binary(_, a, b) | LExpr::Compare(_, a, b) => {
                a.visit(f);
                b.visit(f);
            }
            LExpr::Select(c, a, b) => {
                c.visit(f);
                a.visit(f);
                b.visit(f);
            }
        }
    }

    /// Calls `f` on this expression and each of its subexpressions, parents first, mutably.
    pub fn visit_mut(&mut self, f: &mut dyn FnMut(&mut LExpr)) {
        f(self);
        match self {
            LExpr::Local(_) | LExpr::Int(..) | LExpr::Float(..) => {}
            LExpr::Load { index, .. } => index.visit_mut(f),
            LExpr::Unary(_, a) | LExpr::Cast(_, a) => a.visit_mut(f),
            LExpr::Binary(_, a, b) | LExpr::Compare(_, a, b) => {
                a.visit_mut(f);
                b.visit_mut(f);
            }
            LExpr::Select(c, a, b) => {
                c.visit_mut(f);
                a.visit_mut(f);
                b.visit_mut(f);
            }
        }
    }
}

impl Stmt {
    /// Calls `f` on every top-level expression of this statement and of the statements inside
    /// it (indices, values, loop bounds, GEMM offsets), in order.
    pub fn exprs(&self, f: &mut dyn FnMut(&LExpr)) {
        match self {
            Stmt::Seq(items) => items.iter().for_each(|s| s.exprs(f)),
            Stmt::For { body, .. } => body.exprs(f),
            Stmt::Range {
                start, end, body, ..
            } => {
                f(start);
                f(end);
                body.exprs(f);
            }
            Stmt::Store { index, value, .. } => {
                f(index);
                f(value);
            }
            Stmt::Assign { value, .. } => f(value),
            Stmt::Gemm(g) => {
                for m in g.matrices() {
                    f(&m.offset);
                }
            }
            Stmt::Depthwise(_) => {}
        }
    }
}
