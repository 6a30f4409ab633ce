//! Unboxed scalar kernels: a primitive function whose parameters and result are rank-0
//! tensors of integer, boolean, `float32` or `float64` type, computing with arithmetic,
//! comparison and logical operators only (`%i + 1i64`, `%i == %n`: the operators whose schema
//! declares a form on scalars, `OpSchema::scalar`, in their own file), is evaluated by the VM
//! directly on unboxed values instead of through a packed call on tensors in pooled storage.
//! This is what makes scalar control flow (loop counters, `fib`) cost nanoseconds rather than a
//! microsecond per operator. The results are exactly the kernels' (wrapping integer
//! arithmetic in the dtype's width, truncating division, IEEE `float32` rounding per
//! operation, an error for integer division by zero).

use relay_ir::{DType, DTypeCode, Expr, ExprKind, Function, NDArray, ScalarOp, TypeKind};
use relay_ir::{ScalarBinary as Bin, ScalarUnary as Un};

/// An unboxed scalar of a dtype: integers and booleans as `i64` (sign- or zero-extended),
/// floats as the bits of an `f64` (a `float32` holds a value exactly representable in `f32`).
/// Sixteen bytes, so registers holding scalars stay small.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Scalar {
    /// The dtype.
    pub dtype: DType,
    /// The integer, or the float's bits.
    bits: i64,
}

impl Scalar {
    /// An integer or boolean scalar (wrapped to the dtype's width).
    pub fn int(dtype: DType, value: i64) -> Scalar {
        Scalar {
            dtype,
            bits: wrap(dtype, value),
        }
    }

    /// A float scalar (rounded to `f32` for `float32`).
    pub fn float(dtype: DType, value: f64) -> Scalar {
        let value = if dtype.bits == 32 {
            f64::from(value as f32)
        } else {
            value
        };
        Scalar {
            dtype,
            bits: value.to_bits() as i64,
        }
    }

    /// The scalar a rank-0 (or one-element) tensor holds, if its dtype is supported.
    pub fn of_tensor(t: &NDArray) -> Option<Scalar> {
        if t.num_elements() != 1 || !supported(t.dtype()) {
            return None;
        }
        Some(if t.dtype().is_float() {
            Scalar::float(
                t.dtype(),
                relay_runtime::elements::read_f64(t.dtype(), t.as_bytes()),
            )
        } else {
            // A `uint64` above `i64::MAX` keeps its bit pattern.
            Scalar::int(
                t.dtype(),
                relay_runtime::elements::read_i128(t.dtype(), t.as_bytes()) as i64,
            )
        })
    }

    /// The rank-0 tensor holding this scalar.
    pub fn to_tensor(self) -> Result<NDArray, relay_runtime::NDArrayError> {
        if self.dtype.is_float() {
            NDArray::scalar_f64(self.dtype, self.as_f64())
        } else if self.dtype.code == DTypeCode::UInt && self.dtype.bits == 64 {
            NDArray::scalar_i128(self.dtype, i128::from(self.bits as u64))
        } else {
            NDArray::scalar_i128(self.dtype, i128::from(self.bits))
        }
    }

    /// The value as an integer (booleans 0 or 1; floats truncated), for tests and jumps.
    pub fn as_i64(self) -> i64 {
        if self.dtype.is_float() {
            self.as_f64() as i64
        } else {
            self.bits
        }
    }

    /// The value as a float.
    pub fn as_f64(self) -> f64 {
        if self.dtype.is_float() {
            f64::from_bits(self.bits as u64)
        } else {
            self.bits as f64
        }
    }
}

/// Whether scalars of `dtype` are evaluated unboxed.
fn supported(d: DType) -> bool {
    d.lanes == 1
        && match d.code {
            DTypeCode::Int | DTypeCode::UInt => matches!(d.bits, 8 | 16 | 32 | 64),
            DTypeCode::Bool => true,
            DTypeCode::Float => matches!(d.bits, 32 | 64),
            _ => false,
        }
}

/// One step of a [`ScalarKernel`], in postfix order.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Op {
    /// Pushes parameter `n`.
    Param(u8),
    /// Pushes a constant.
    Const(Scalar),
    /// Pops one operand, pushes the result (of dtype `DType`).
    Unary(Un, DType),
    /// Pops two operands of dtype `DType`, pushes the result.
    Binary(Bin, DType),
}

/// The deepest operand stack a scalar kernel may need.
const STACK: usize = 16;

/// A scalar primitive function, compiled to a postfix program.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalarKernel {
    ops: Vec<Op>,
    /// The number of parameters.
    params: usize,
    /// The common case, one binary operator on parameters and constants, evaluated without
    /// the operand stack.
    single: Option<(Bin, DType, Op, Op)>,
}

/// A scalar kernel failed (integer division by zero).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScalarError(pub &'static str);

impl ScalarKernel {
    /// The scalar kernel of primitive function `f`, if it is one (every parameter and the
    /// result a rank-0 tensor of a supported dtype, the body only supported operators).
    pub fn of(f: &Function) -> Option<ScalarKernel> {
        if f.params.len() > usize::from(u8::MAX) {
            return None;
        }
        for p in &f.params {
            scalar_type(p.checked_type().or(p.ty())?)?;
        }
        scalar_type(f.body.checked_type().or(f.ret_type.as_ref())?)?;
        let mut ops = Vec::new();
        let mut depth = 0;
        let mut max_depth = 0;
        compile(&f.body, f, &mut ops, &mut depth, &mut max_depth)?;
        let single = match ops.as_slice() {
            [
                a @ (Op::Param(_) | Op::Const(_)),
                b @ (Op::Param(_) | Op::Const(_)),
                Op::Binary(bin, d),
            ] => Some((*bin, *d, *a, *b)),
            _ => None,
        };
        (max_depth <= STACK).then_some(ScalarKernel {
            ops,
            params: f.params.len(),
            single,
        })
    }

    /// The number of parameters.
    pub fn params(&self) -> usize {
        self.params
    }

    /// Evaluates the kernel on `args` (one per parameter, of the parameters' dtypes).
    #[inline(always)]
    pub fn eval(&self, args: &[Scalar]) -> Result<Scalar, ScalarError> {
        if let Some((b, d, x, y)) = self.single {
            let operand = |op: Op| match op {
                Op::Param(n) => args
                    .get(usize::from(n))
                    .copied()
                    .ok_or(ScalarError("missing argument")),
                Op::Const(c) => Ok(c),
                _ => Err(ScalarError("malformed scalar kernel")),
            };
            return binary(b, d, operand(x)?, operand(y)?);
        }
        self.eval_stack(args)
    }

    /// Evaluates the postfix program on an operand stack.
    fn eval_stack(&self, args: &[Scalar]) -> Result<Scalar, ScalarError> {
        let zero = Scalar::int(DType::BOOL, 0);
        let mut stack = [zero; STACK];
        let mut top = 0usize;
        for op in &self.ops {
            match *op {
                Op::Param(n) => {
                    stack[top] = *args
                        .get(usize::from(n))
                        .ok_or(ScalarError("missing argument"))?;
                    top += 1;
                }
                Op::Const(c) => {
                    stack[top] = c;
                    top += 1;
                }
                Op::Unary(u, d) => {
                    let a = stack[top - 1];
                    stack[top - 1] = unary(u, d, a);
                }
                Op::Binary(b, d) => {
                    let (x, y) = (stack[top - 2], stack[top - 1]);
                    top -= 1;
                    stack[top - 1] = binary(b, d, x, y)?;
                }
            }
        }
        if top == 1 {
            Ok(stack[0])
        } else {
            Err(ScalarError("malformed scalar kernel"))
        }
    }
}

/// The dtype of a rank-0 tensor type of a supported dtype.
fn scalar_type(t: &relay_ir::Type) -> Option<DType> {
    match t.kind() {
        TypeKind::Tensor { shape, dtype } if shape.is_empty() && supported(*dtype) => Some(*dtype),
        _ => None,
    }
}

/// Appends the postfix program of `e` to `ops`.
fn compile(
    e: &Expr,
    f: &Function,
    ops: &mut Vec<Op>,
    depth: &mut usize,
    max_depth: &mut usize,
) -> Option<()> {
    let push = |ops: &mut Vec<Op>, op: Op, depth: &mut usize, max_depth: &mut usize| {
        ops.push(op);
        *depth += 1;
        *max_depth = (*max_depth).max(*depth);
    };
    match e.kind() {
        ExprKind::Var(v) => {
            let n = f.params.iter().position(|p| p.id() == v.id())?;
            push(ops, Op::Param(n as u8), depth, max_depth);
        }
        ExprKind::Constant(c) => {
            push(ops, Op::Const(Scalar::of_tensor(c)?), depth, max_depth);
        }
        ExprKind::Call {
            callee,
            args,
            attrs,
        } => {
            let ExprKind::Op(op) = callee.kind() else {
                return None;
            };
            if !attrs.is_empty() {
                return None;
            }
            let dtype = scalar_type(e.checked_type()?)?;
            match (op.scalar, args.as_slice()) {
                (Some(ScalarOp::Unary(u)), [a]) => {
                    compile(a, f, ops, depth, max_depth)?;
                    if u == Un::Not && dtype != DType::BOOL {
                        return None;
                    }
                    ops.push(Op::Unary(u, dtype));
                }
                (Some(ScalarOp::Binary(bin)), [a, b]) => {
                    let operand = scalar_type(a.checked_type()?)?;
                    if scalar_type(b.checked_type()?)? != operand {
                        return None;
                    }
                    let float = operand.is_float();
                    let bool_op = matches!(bin, Bin::And | Bin::Or);
                    // Floats: the operators whose IEEE result is plain; booleans: logic and
                    // comparisons only.
                    let ok = if float {
                        matches!(
                            bin,
                            Bin::Add
                                | Bin::Sub
                                | Bin::Mul
                                | Bin::Div
                                | Bin::Eq
                                | Bin::Ne
                                | Bin::Lt
                                | Bin::Le
                                | Bin::Gt
                                | Bin::Ge
                        )
                    } else if operand == DType::BOOL {
                        bool_op || matches!(bin, Bin::Eq | Bin::Ne)
                    } else {
                        !bool_op
                    };
                    if !ok {
                        return None;
                    }
                    compile(a, f, ops, depth, max_depth)?;
                    compile(b, f, ops, depth, max_depth)?;
                    ops.push(Op::Binary(bin, operand));
                    *depth -= 1;
                }
                _ => return None,
            }
        }
        _ => return None,
    }
    Some(())
}

/// `v` wrapped to the width of integer dtype `d` (sign-extended for signed, zero-extended
/// for unsigned types).
fn wrap(d: DType, v: i64) -> i64 {
    let bits = u32::from(d.bits);
    if bits >= 64 {
        return v;
    }
    let shift = 64 - bits;
    if d.code == DTypeCode::UInt {
        ((v as u64) << shift >> shift) as i64
    } else {
        (v << shift) >> shift
    }
}

fn int(s: Scalar) -> i64 {
    s.as_i64()
}

fn float(s: Scalar) -> f64 {
    s.as_f64()
}

/// A float result of dtype `d`, rounded to `f32` for `float32`.
fn round(d: DType, v: f64) -> Scalar {
    Scalar::float(d, v)
}

fn boolean(b: bool) -> Scalar {
    Scalar::int(DType::BOOL, i64::from(b))
}

fn integer(d: DType, v: i64) -> Scalar {
    Scalar::int(d, v)
}

fn unary(u: Un, d: DType, a: Scalar) -> Scalar {
    match u {
        Un::Neg if d.is_float() => round(d, -float(a)),
        Un::Neg => integer(d, int(a).wrapping_neg()),
        Un::Not => boolean(int(a) == 0),
    }
}

#[inline]
fn binary(b: Bin, d: DType, x: Scalar, y: Scalar) -> Result<Scalar, ScalarError> {
    if d.is_float() {
        let (a, c) = (float(x), float(y));
        return Ok(match b {
            Bin::Add => round(d, a + c),
            Bin::Sub => round(d, a - c),
            Bin::Mul => round(d, a * c),
            Bin::Div => round(d, a / c),
            Bin::Eq => boolean(a == c),
            Bin::Ne => boolean(a != c),
            Bin::Lt => boolean(a < c),
            Bin::Le => boolean(a <= c),
            Bin::Gt => boolean(a > c),
            Bin::Ge => boolean(a >= c),
            _ => return Err(ScalarError("unsupported float operator")),
        });
    }
    let (a, c) = (int(x), int(y));
    let unsigned64 = d.code == DTypeCode::UInt && d.bits == 64;
    let cmp = |a: i64, c: i64| {
        if unsigned64 {
            (a as u64).cmp(&(c as u64))
        } else {
            a.cmp(&c)
        }
    };
    use std::cmp::Ordering::{Greater, Less};
    Ok(match b {
        Bin::Add => integer(d, a.wrapping_add(c)),
        Bin::Sub => integer(d, a.wrapping_sub(c)),
        Bin::Mul => integer(d, a.wrapping_mul(c)),
        Bin::Div | Bin::Mod | Bin::FloorDiv | Bin::FloorMod => {
            if c == 0 {
                return Err(ScalarError(if matches!(b, Bin::Div | Bin::FloorDiv) {
                    "integer division by zero"
                } else {
                    "integer modulo by zero"
                }));
            }
            if unsigned64 {
                let (a, c) = (a as u64, c as u64);
                let v = if matches!(b, Bin::Div | Bin::FloorDiv) {
                    a / c
                } else {
                    a % c
                };
                integer(d, v as i64)
            } else {
                let q = a.wrapping_div(c);
                let r = a.wrapping_rem(c);
                let floor = r != 0 && ((r < 0) != (c < 0));
                integer(
                    d,
                    match b {
                        Bin::Div => q,
                        Bin::Mod => r,
                        Bin::FloorDiv => q.wrapping_sub(i64::from(floor)),
                        _ => {
                            if floor {
                                r.wrapping_add(c)
                            } else {
                                r
                            }
                        }
                    },
                )
            }
        }
        Bin::Eq => boolean(a == c),
        Bin::Ne => boolean(a != c),
        Bin::Lt => boolean(cmp(a, c) == Less),
        Bin::Le => boolean(cmp(a, c) != Greater),
        Bin::Gt => boolean(cmp(a, c) == Greater),
        Bin::Ge => boolean(cmp(a, c) != Less),
        Bin::And => boolean(a != 0 && c != 0),
        Bin::Or => boolean(a != 0 || c != 0),
        Bin::Max => integer(d, if cmp(a, c) == Less { c } else { a }),
        Bin::Min => integer(d, if cmp(a, c) == Greater { c } else { a }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn i(d: DType, v: i64) -> Scalar {
        integer(d, v)
    }

    #[test]
    fn integer_arithmetic_wraps_and_divides_like_the_kernels() {
        let d = DType::I8;
        assert_eq!(binary(Bin::Add, d, i(d, 127), i(d, 1)).unwrap(), i(d, -128));
        assert_eq!(
            binary(Bin::Div, DType::I64, i(DType::I64, -7), i(DType::I64, 2))
                .unwrap()
                .as_i64(),
            -3
        );
        assert_eq!(
            binary(
                Bin::FloorDiv,
                DType::I64,
                i(DType::I64, -7),
                i(DType::I64, 2)
            )
            .unwrap()
            .as_i64(),
            -4
        );
        assert_eq!(
            binary(Bin::Mod, DType::I64, i(DType::I64, -7), i(DType::I64, 2))
                .unwrap()
                .as_i64(),
            -1
        );
        assert_eq!(
            binary(
                Bin::FloorMod,
                DType::I64,
                i(DType::I64, -7),
                i(DType::I64, 2)
            )
            .unwrap()
            .as_i64(),
            1
        );
        assert_eq!(
            binary(Bin::Div, DType::I32, i(DType::I32, 1), i(DType::I32, 0)),
            Err(ScalarError("integer division by zero"))
        );
        let u = DType::U8;
        assert_eq!(binary(Bin::Sub, u, i(u, 0), i(u, 1)).unwrap().as_i64(), 255);
        let u64d = DType::U64;
        assert_eq!(
            binary(Bin::Lt, u64d, i(u64d, -1), i(u64d, 1))
                .unwrap()
                .as_i64(),
            0
        );
    }

    #[test]
    fn float32_rounds_every_operation() {
        let d = DType::F32;
        let a = round(d, 0.1);
        let b = round(d, 0.2);
        let sum = binary(Bin::Add, d, a, b).unwrap();
        assert_eq!(float(sum), f64::from(0.1f32 + 0.2f32));
        assert_eq!(
            float(binary(Bin::Div, d, a, round(d, 0.0)).unwrap()),
            f64::INFINITY
        );
    }

    #[test]
    fn scalar_tensors_round_trip() {
        for (d, v) in [
            (DType::I64, -5i64),
            (DType::U64, -1),
            (DType::BOOL, 1),
            (DType::I16, -300),
        ] {
            let s = i(d, v);
            let t = s.to_tensor().unwrap();
            assert_eq!(Scalar::of_tensor(&t), Some(s));
        }
        let f = round(DType::F32, 1.5);
        assert_eq!(Scalar::of_tensor(&f.to_tensor().unwrap()), Some(f));
    }
}
