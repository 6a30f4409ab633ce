//! Tensor expressions (TVM's TE): what an operator computes, written as a scalar expression
//! over the indices of its output. An operator's compute definition ([`ComputeFn`], next to its
//! type relation in `relay-ops`) builds one from its inputs; the kernel compiler (`relay-kernel`)
//! composes the definitions of a primitive function's operators, inlines injective producers
//! into their consumers, and lowers the result to a loop nest.
//!
//! `out[i, j] = exp(a[i, j]) + b[j]` is a [`Tensor`] whose [`TensorOp::Compute`] has two
//! [`IterVar`]s and a body reading the tensors `a` and `b` at index expressions.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::{Attrs, DType, Type};

/// A loop variable: an index of a compute's output, or a reduction axis. Ranges over
/// `0..extent`. Unique by id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IterVar {
    /// Identity.
    pub id: u32,
    /// The number of values it takes.
    pub extent: i64,
}

impl IterVar {
    /// A fresh variable over `0..extent`.
    pub fn new(extent: i64) -> IterVar {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        IterVar {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            extent,
        }
    }

    /// The variable as an `int64` expression.
    pub fn expr(self) -> TExpr {
        TExpr::new(TExprKind::Var(self), DType::I64)
    }
}

/// A tensor of a tensor expression program: a kernel input or a computed tensor.
#[derive(Clone, Debug)]
pub struct Tensor(Arc<TensorNode>);

/// The data behind a [`Tensor`].
#[derive(Debug)]
pub struct TensorNode {
    /// A name for printing (`p0`, `T_add`, ...).
    pub name: String,
    /// Its shape (static).
    pub shape: Vec<i64>,
    /// Its element type.
    pub dtype: DType,
    /// What it is.
    pub op: TensorOp,
}

/// How a [`Tensor`] is defined.
#[derive(Debug)]
pub enum TensorOp {
    /// The `n`-th tensor argument of the kernel (the primitive function's parameters with tuple
    /// parameters flattened, in order).
    Placeholder(usize),
    /// `tensor[axes] = body`: one [`IterVar`] per output dimension (extent = that dimension).
    /// The body may contain one [`TExprKind::Reduce`], at its root.
    Compute {
        /// The output indices, outermost first.
        axes: Vec<IterVar>,
        /// The value at those indices.
        body: TExpr,
    },
}

impl Tensor {
    /// A new tensor.
    pub fn new(name: impl Into<String>, shape: Vec<i64>, dtype: DType, op: TensorOp) -> Tensor {
        Tensor(Arc::new(TensorNode {
            name: name.into(),
            shape,
            dtype,
            op,
        }))
    }

    /// The `index`-th kernel argument, of `shape` and `dtype`.
    pub fn placeholder(
        name: impl Into<String>,
        shape: Vec<i64>,
        dtype: DType,
        index: usize,
    ) -> Tensor {
        Tensor::new(name, shape, dtype, TensorOp::Placeholder(index))
    }

    /// `name[i0, i1, ...] = body(&[i0, i1, ...])` over `shape`; the body's dtype is the
    /// tensor's.
    pub fn compute(
        name: impl Into<String>,
        shape: &[i64],
        body: impl FnOnce(&[TExpr]) -> TExpr,
    ) -> Tensor {
        let axes: Vec<IterVar> = shape.iter().map(|&d| IterVar::new(d)).collect();
        let indices: Vec<TExpr> = axes.iter().map(|a| a.expr()).collect();
        let body = body(&indices);
        let dtype = body.dtype();
        Tensor::new(
            name,
            shape.to_vec(),
            dtype,
            TensorOp::Compute { axes, body },
        )
    }

    /// The value at `indices` (one `int64` expression per dimension).
    pub fn at(&self, indices: &[TExpr]) -> TExpr {
        TExpr::new(
            TExprKind::Read {
                tensor: self.clone(),
                indices: indices.to_vec(),
            },
            self.dtype,
        )
    }

    /// Whether two handles name the same tensor.
    pub fn ptr_eq(a: &Tensor, b: &Tensor) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl std::ops::Deref for Tensor {
    type Target = TensorNode;

    fn deref(&self) -> &TensorNode {
        &self.0
    }
}

/// A scalar expression of a tensor expression program, with its dtype. Index expressions are
/// `int64`; comparisons and logical operations are `bool`.
#[derive(Clone, Debug)]
pub struct TExpr(Arc<TExprNode>);

/// The data behind a [`TExpr`].
#[derive(Debug)]
pub struct TExprNode {
    /// What it computes.
    pub kind: TExprKind,
    /// Its element type (a scalar dtype, lanes 1).
    pub dtype: DType,
}

/// The forms of a [`TExpr`].
#[derive(Debug)]
pub enum TExprKind {
    /// A loop variable (`int64`).
    Var(IterVar),
    /// An integer or boolean constant (booleans are 0 and 1), of the node's dtype.
    Int(i128),
    /// A float constant, of the node's (float) dtype.
    Float(f64),
    /// `tensor[indices]`.
    Read {
        /// The tensor read.
        tensor: Tensor,
        /// One `int64` index per dimension.
        indices: Vec<TExpr>,
    },
    /// A unary operation; the result has the argument's dtype except for the predicates
    /// (`IsNan`, `IsInf`, `IsFinite`, `LogicalNot`: `bool`).
    Unary(UnaryOp, TExpr),
    /// A binary operation on two operands of one dtype, with that dtype.
    Binary(BinaryOp, TExpr, TExpr),
    /// A comparison of two operands of one dtype (`bool`).
    Compare(CmpOp, TExpr, TExpr),
    /// `cond ? then : else` (`cond` is `bool`; both branches have the node's dtype).
    Select(TExpr, TExpr, TExpr),
    /// The argument converted to the node's dtype with numpy's `astype` rules (float to int
    /// truncates toward zero and saturates; to `bool` is `!= 0`).
    Cast(TExpr),
    /// A reduction of `body` over `axes` (only at the root of a compute's body). The node has
    /// the body's dtype, except for `ArgMax`/`ArgMin` (an integer position).
    Reduce {
        /// How values combine.
        op: ReduceOp,
        /// The reduction axes.
        axes: Vec<IterVar>,
        /// The value reduced, in terms of the compute's axes and `axes`.
        body: TExpr,
    },
}

/// Unary operations. Float-only ones (`Exp`, `Sqrt`, ...) follow the C library's definitions
/// and SPEC §4's accuracy; `Round` rounds half to even (numpy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum UnaryOp {
    Neg,
    Abs,
    Sign,
    Exp,
    Log,
    Log2,
    Log10,
    Sqrt,
    Rsqrt,
    Erf,
    Sigmoid,
    Tanh,
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Asinh,
    Acosh,
    Atanh,
    Ceil,
    Floor,
    Round,
    Trunc,
    LogicalNot,
    BitwiseNot,
    IsNan,
    IsInf,
    IsFinite,
}

/// Binary operations on operands of one dtype. Integer `Div` and `Mod` truncate toward zero
/// (C); `FloorDiv` and `FloorMod` round toward negative infinity (numpy's `//` and `%`);
/// integer division by zero is the operator's run-time error (the kernel reports it through
/// its error slot). `Shl`/`Shr` shift integers (`Shr` is arithmetic for signed types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    FloorDiv,
    FloorMod,
    Pow,
    Max,
    Min,
    LogicalAnd,
    LogicalOr,
    LogicalXor,
    BitAnd,
    BitOr,
    BitXor,
    Shl,
    Shr,
}

/// Comparisons (`bool` results; any NaN operand compares unequal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// How a reduction combines values. An empty reduction gives the identity: 0 for `Sum`, 1 for
/// `Prod`, the dtype's lowest (highest) value or -inf (+inf) for `Max` (`Min`), true for
/// `All`, false for `Any`, position 0 for `ArgMax`/`ArgMin`. Float `Max`/`Min` propagate NaN
/// (the first NaN met wins, as numpy's). Values combine in row-major order over the axes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum ReduceOp {
    Sum,
    Prod,
    Max,
    Min,
    All,
    Any,
    /// The position (row-major over the reduction axes, the node's integer dtype) of the
    /// greatest value: the first one, or the last one of equal values when `last`. NaN counts
    /// as greater than every number (a later NaN replaces an earlier one only when `last`).
    ArgMax {
        /// Whether ties select the last position.
        last: bool,
    },
    /// As [`ReduceOp::ArgMax`] for the least value (NaN counts as less than every number).
    ArgMin {
        /// Whether ties select the last position.
        last: bool,
    },
}

impl TExpr {
    /// A node.
    pub fn new(kind: TExprKind, dtype: DType) -> TExpr {
        TExpr(Arc::new(TExprNode { kind, dtype }))
    }

    /// An integer (or boolean) constant of `dtype`.
    pub fn int(value: i128, dtype: DType) -> TExpr {
        TExpr::new(TExprKind::Int(value), dtype)
    }

    /// An `int64` index constant.
    pub fn index(value: i64) -> TExpr {
        TExpr::int(i128::from(value), DType::I64)
    }

    /// A float constant of `dtype`.
    pub fn float(value: f64, dtype: DType) -> TExpr {
        TExpr::new(TExprKind::Float(value), dtype)
    }

    /// The constant `value` in `dtype` (a float dtype gets a float constant).
    pub fn constant(value: f64, dtype: DType) -> TExpr {
        if dtype.is_float() {
            TExpr::float(value, dtype)
        } else {
            TExpr::int(value as i128, dtype)
        }
    }

    /// Its element type.
    pub fn dtype(&self) -> DType {
        self.0.dtype
    }

    /// What it computes.
    pub fn kind(&self) -> &TExprKind {
        &self.0.kind
    }

    /// `op(self)`.
    pub fn unary(self, op: UnaryOp) -> TExpr {
        let dtype = match op {
            UnaryOp::IsNan | UnaryOp::IsInf | UnaryOp::IsFinite | UnaryOp::LogicalNot => {
                DType::BOOL
            }
            _ => self.dtype(),
        };
        TExpr::new(TExprKind::Unary(op, self), dtype)
    }

    /// `self op rhs` (both of one dtype).
    pub fn binary(self, op: BinaryOp, rhs: TExpr) -> TExpr {
        let dtype = self.dtype();
        TExpr::new(TExprKind::Binary(op, self, rhs), dtype)
    }

    /// `self op rhs` as a `bool`.
    pub fn compare(self, op: CmpOp, rhs: TExpr) -> TExpr {
        TExpr::new(TExprKind::Compare(op, self, rhs), DType::BOOL)
    }

    /// `self ? then : otherwise`.
    pub fn select(self, then: TExpr, otherwise: TExpr) -> TExpr {
        let dtype = then.dtype();
        TExpr::new(TExprKind::Select(self, then, otherwise), dtype)
    }

    /// `self` converted to `dtype` (itself when it already has it).
    pub fn cast(self, dtype: DType) -> TExpr {
        if self.dtype() == dtype {
            self
        } else {
            TExpr::new(TExprKind::Cast(self), dtype)
        }
    }

    /// The position (`int32`) of the extreme value of `self` over `axes` (`op` is
    /// [`ReduceOp::ArgMax`] or [`ReduceOp::ArgMin`]).
    pub fn arg_reduce(self, op: ReduceOp, axes: Vec<IterVar>) -> TExpr {
        TExpr::new(
            TExprKind::Reduce {
                op,
                axes,
                body: self,
            },
            DType::I32,
        )
    }

    /// A reduction of `self` over `axes`.
    pub fn reduce(self, op: ReduceOp, axes: Vec<IterVar>) -> TExpr {
        let dtype = self.dtype();
        TExpr::new(
            TExprKind::Reduce {
                op,
                axes,
                body: self,
            },
            dtype,
        )
    }
}

/// A value of a tensor expression program: an operator's inputs and outputs are tensors or
/// tuples of them (`concatenate` takes a tuple, `split` returns one).
#[derive(Clone, Debug)]
pub enum TeValue {
    /// One tensor.
    Tensor(Tensor),
    /// A tuple.
    Tuple(Vec<TeValue>),
}

impl TeValue {
    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            TeValue::Tensor(t) => Some(t),
            TeValue::Tuple(_) => None,
        }
    }
}

/// An operator's compute definition: its output from its inputs (as the type relation accepted
/// them: static shapes), its attributes and its output type; or why it cannot be compiled
/// (a dynamic shape, an unsupported dtype), as an [`OpError`](crate::OpError).
pub type ComputeFn =
    fn(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, crate::OpError>;
