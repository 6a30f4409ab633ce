//! Composition: a primitive function's operator calls → tensor expressions (`relay_ir::te`),
//! from each operator's compute definition in `relay-ops`.
//!
//! The parameters become placeholders (a tuple-typed parameter one per tensor field, in order),
//! each call its operator's compute on the tensors of its arguments, scalar constants 0-d
//! computes, and tuples and projections stay structural. The kernel's outputs are the tensor
//! leaves of the function's result, in order.

use std::collections::HashMap;

use relay_ir::te::{TExpr, TExprKind, TeValue, Tensor, TensorOp};
use relay_ir::{Expr, ExprKind, Function, NDArray, OpError, Type, TypeKind, VarId};
use relay_ops::compute::static_tensor;
use thiserror::Error;

use crate::KernelError;

/// A primitive function as tensor expressions.
#[derive(Clone, Debug)]
pub struct Composed {
    /// The kernel's inputs, in argument order: placeholders with their shapes and dtypes
    /// (`TensorOp::Placeholder(i)` is the `i`-th).
    pub inputs: Vec<Tensor>,
    /// The kernel's outputs, one per tensor leaf of the function's result, in order.
    pub outputs: Vec<Tensor>,
}

/// Why a primitive function cannot be composed into tensor expressions.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum ComposeError {
    /// An operator's compute definition rejected the call.
    #[error("operator `{op}`: {error}")]
    Operator {
        /// The operator, e.g. `nn.conv2d`.
        op: &'static str,
        /// What its compute definition said.
        error: OpError,
    },
    /// A parameter's type has no static shape or a dtype the kernels do not handle.
    #[error("{0}")]
    Parameter(OpError),
    /// A construct the kernel compiler does not handle: an operator without a compute
    /// definition, a tensor constant, a nested function.
    #[error("{0}")]
    Unsupported(String),
}

impl ComposeError {
    /// The kernel compiler's error for kernel `kernel`: [`KernelError::Operator`] for an
    /// operator's error, [`KernelError::Unsupported`] otherwise.
    pub fn into_kernel_error(self, kernel: &str) -> KernelError {
        let kernel = kernel.to_owned();
        match self {
            ComposeError::Operator { op, error } => KernelError::Operator { kernel, op, error },
            other => KernelError::Unsupported {
                kernel,
                message: other.to_string(),
            },
        }
    }
}

/// A [`ComposeError::Unsupported`] with `message`.
fn unsupported(message: impl Into<String>) -> ComposeError {
    ComposeError::Unsupported(message.into())
}

/// The tensor expressions of a primitive function (`Primitive=1`) whose types have been
/// checked, or why it cannot be compiled: an operator without a compute definition, a dynamic
/// shape, a construct other than calls, lets, tuples, projections, variables and scalar
/// constants.
pub fn compose(func: &Function) -> Result<Composed, ComposeError> {
    let mut composer = Composer {
        env: HashMap::new(),
        inputs: Vec::new(),
    };
    for param in &func.params {
        let ty = param.checked_type().or(param.ty()).ok_or_else(|| {
            unsupported(format!(
                "parameter `%{}` has no type",
                param.name().as_str()
            ))
        })?;
        let value = composer.placeholders(ty, param.name().as_str())?;
        composer.env.insert(param.id(), value);
    }
    let result = composer.expr(&func.body)?;
    let mut outputs = Vec::new();
    flatten(&result, &mut outputs);
    Ok(Composed {
        inputs: composer.inputs,
        outputs,
    })
}

/// The tensors `e` reads.
pub(crate) fn reads(e: &TExpr) -> Vec<Tensor> {
    let mut out = Vec::new();
    walk(e, &mut |n| {
        if let TExprKind::Read { tensor, .. } = n.kind() {
            out.push(tensor.clone());
        }
    });
    out
}

/// Calls `f` on every node of `e` (not entering the tensors it reads).
pub(crate) fn walk(e: &TExpr, f: &mut dyn FnMut(&TExpr)) {
    relay_ir::ensure_sufficient_stack(|| {
        f(e);
        match e.kind() {
            TExprKind::Var(_) | TExprKind::Int(_) | TExprKind::Float(_) => {}
            TExprKind::Read { indices, .. } => indices.iter().for_each(|i| walk(i, f)),
            TExprKind::Unary(_, a) | TExprKind::Cast(a) => walk(a, f),
            TExprKind::Binary(_, a, b) | TExprKind::Compare(_, a, b) => {
                walk(a, f);
                walk(b, f);
            }
            TExprKind::Select(c, a, b) => {
                walk(c, f);
                walk(a, f);
                walk(b, f);
            }
            TExprKind::Reduce { body, .. } => walk(body, f),
        }
    })
}

/// The tensor leaves of a value, in order.
fn flatten(value: &TeValue, out: &mut Vec<Tensor>) {
    match value {
        TeValue::Tensor(t) => out.push(t.clone()),
        TeValue::Tuple(fields) => {
            for f in fields {
                flatten(f, out);
            }
        }
    }
}

/// The state of one composition.
struct Composer {
    /// The values of the variables in scope.
    env: HashMap<VarId, TeValue>,
    /// The placeholders made so far.
    inputs: Vec<Tensor>,
}

impl Composer {
    /// Placeholders for a parameter of type `ty`: one per tensor, in order.
    fn placeholders(&mut self, ty: &Type, name: &str) -> Result<TeValue, ComposeError> {
        match ty.kind() {
            TypeKind::Tensor { .. } => {
                let (shape, dtype) = static_tensor(ty).map_err(ComposeError::Parameter)?;
                let index = self.inputs.len();
                let t = Tensor::placeholder(name, shape, dtype, index);
                self.inputs.push(t.clone());
                Ok(TeValue::Tensor(t))
            }
            TypeKind::Tuple(fields) => {
                let values = fields
                    .iter()
                    .enumerate()
                    .map(|(i, f)| self.placeholders(f, &format!("{name}_{i}")))
                    .collect::<Result<_, _>>()?;
                Ok(TeValue::Tuple(values))
            }
            _ => Err(unsupported(format!(
                "parameter `%{name}` of type `{ty}` is not a tensor or a tuple of tensors"
            ))),
        }
    }

    /// The value of an expression.
    fn expr(&mut self, e: &Expr) -> Result<TeValue, ComposeError> {
        relay_ir::ensure_sufficient_stack(|| self.expr_inner(e))
    }

    fn expr_inner(&mut self, e: &Expr) -> Result<TeValue, ComposeError> {
        match e.kind() {
            ExprKind::Var(v) => {
                self.env.get(&v.id()).cloned().ok_or_else(|| {
                    unsupported(format!("unbound variable `%{}`", v.name().as_str()))
                })
            }
            ExprKind::Constant(c) => constant(c),
            ExprKind::Let { bindings, body } => {
                for b in bindings {
                    let value = self.expr(&b.value)?;
                    self.env.insert(b.var.id(), value);
                }
                self.expr(body)
            }
            ExprKind::Tuple(fields) => {
                let values = fields
                    .iter()
                    .map(|f| self.expr(f))
                    .collect::<Result<_, _>>()?;
                Ok(TeValue::Tuple(values))
            }
            ExprKind::Proj { tuple, index } => match self.expr(tuple)? {
                TeValue::Tuple(fields) => fields
                    .get(*index as usize)
                    .cloned()
                    .ok_or_else(|| unsupported(format!("projection .{index} out of range"))),
                TeValue::Tensor(_) => Err(unsupported(format!("projection .{index} of a tensor"))),
            },
            ExprKind::Call {
                callee,
                args,
                attrs,
            } => {
                let ExprKind::Op(op) = callee.kind() else {
                    return Err(unsupported(
                        "only operator calls can be compiled into a kernel",
                    ));
                };
                let compute = op.compute.ok_or_else(|| {
                    unsupported(format!(
                        "operator `{}` has no compute definition yet",
                        op.name
                    ))
                })?;
                let values = args
                    .iter()
                    .map(|a| self.expr(a))
                    .collect::<Result<Vec<_>, _>>()?;
                let out = e.checked_type().ok_or_else(|| {
                    unsupported(format!("the call to `{}` has no checked type", op.name))
                })?;
                compute(&values, attrs, out)
                    .map_err(|error| ComposeError::Operator { op: op.name, error })
            }
            other => Err(unsupported(format!(
                "{} cannot be compiled into a kernel",
                construct_name(other)
            ))),
        }
    }
}

/// How an error names an expression form.
fn construct_name(kind: &ExprKind) -> &'static str {
    match kind {
        ExprKind::Global(_) => "a global function reference",
        ExprKind::Op(_) => "an operator used as a value",
        ExprKind::Ctor(_) => "a constructor",
        ExprKind::Function(_) => "a nested function",
        ExprKind::If { .. } => "`if`",
        ExprKind::Match { .. } => "`match`",
        ExprKind::RefNew(_) | ExprKind::RefRead(_) | ExprKind::RefWrite(..) => "a reference",
        _ => "this expression",
    }
}

/// A constant with at most one element: a compute of its shape whose every element is that
/// value.
fn constant(c: &NDArray) -> Result<TeValue, ComposeError> {
    let dtype = c.dtype();
    if c.num_elements() > 1 {
        return Err(unsupported(format!(
            "tensor constants of shape {:?} cannot be compiled into a kernel yet",
            c.shape()
        )));
    }
    let value = if dtype.is_float() {
        TExpr::float(c.to_f64_vec().first().copied().unwrap_or(0.0), dtype)
    } else {
        TExpr::int(c.to_i128_vec().first().copied().unwrap_or(0), dtype)
    };
    let t = Tensor::compute("c", c.shape(), |_| value);
    Ok(TeValue::Tensor(t))
}

/// Whether a tensor is a kernel input.
pub fn is_placeholder(t: &Tensor) -> bool {
    matches!(t.op, TensorOp::Placeholder(_))
}

#[cfg(test)]
pub(crate) mod tests {
    use relay_ir::{DType, Module, OpErrorKind, Symbol};

    use super::*;

    /// The type-checked module of `text`.
    pub(crate) fn checked(text: &str) -> Module {
        let m = relay_syntax::parse(text, "test.relay").unwrap_or_else(|e| panic!("{e:?}"));
        relay_types::check_module(&m).unwrap_or_else(|e| panic!("{e:?}"));
        m
    }

    /// The first primitive function literal of `@main` in `text` (bound by a let or called).
    pub(crate) fn primitive(text: &str) -> Function {
        let m = checked(text);
        let main = m
            .function(Symbol::intern("main"))
            .map(|g| g.func.clone())
            .expect("a @main");
        find_primitive(&main.body).expect("a primitive function")
    }

    /// The reference interpreter's outputs (tensor leaves) of primitive `func` on `values`.
    pub(crate) fn interpret(
        func: &Function,
        values: Vec<relay_ir::Value>,
    ) -> Vec<std::sync::Arc<relay_ir::NDArray>> {
        let module = Module {
            functions: vec![relay_ir::GlobalFunc {
                name: Symbol::intern("main"),
                func: func.clone(),
                span: relay_ir::Span::DUMMY,
            }],
            types: Vec::new(),
            kind: relay_ir::ModuleKind::Definitions,
            source: None,
        };
        relay_interp::run(
            &module,
            "main",
            values,
            &relay_interp::InterpOptions::default(),
        )
        .unwrap_or_else(|e| panic!("{e:?}"))
        .tensor_leaves()
    }

    fn find_primitive(e: &Expr) -> Option<Function> {
        match e.kind() {
            ExprKind::Function(f) if relay_ir::visit::is_primitive(f) => Some(f.clone()),
            ExprKind::Let { bindings, body } => bindings
                .iter()
                .find_map(|b| find_primitive(&b.value))
                .or_else(|| find_primitive(body)),
            ExprKind::Call { callee, args, .. } => {
                find_primitive(callee).or_else(|| args.iter().find_map(find_primitive))
            }
            _ => None,
        }
    }

    #[test]
    fn params_calls_and_tuples() {
        let f = primitive(
            r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32], %y: Tensor[(3), float32]) {
  %0 = fn (%p0: Tensor[(2, 3), float32], %p1: (Tensor[(3), float32], Tensor[(3), float32]), Primitive=1) {
    %1 = add(%p0, %p1.0);
    (nn.relu(%1), multiply(%p1.1, 2f))
  };
  %0(%x, (%y, %y))
}"#,
        );
        let c = compose(&f).unwrap();
        let names: Vec<&str> = c.inputs.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["p0", "p1_0", "p1_1"]);
        assert_eq!(c.inputs[2].shape, [3]);
        assert!(matches!(c.inputs[1].op, TensorOp::Placeholder(1)));
        let outs: Vec<(&str, &[i64], DType)> = c
            .outputs
            .iter()
            .map(|t| (t.name.as_str(), t.shape.as_slice(), t.dtype))
            .collect();
        assert_eq!(
            outs,
            [
                ("T_relu", &[2i64, 3][..], DType::F32),
                ("T_multiply", &[3][..], DType::F32)
            ]
        );
    }

    #[test]
    fn reductions_reading_reductions_compose() {
        let f = primitive(
            r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2, 3), float32]) {
  %0 = fn (%p0: Tensor[(2, 3), float32], Primitive=1) {
    %1 = max(%p0, axis=[1], keepdims=True);
    sum(subtract(%p0, %1), axis=[1])
  };
  %0(%x)
}"#,
        );
        let composed = compose(&f).unwrap();
        assert_eq!(composed.outputs.len(), 1);
        assert_eq!(composed.outputs[0].shape, [2]);
    }

    #[test]
    fn missing_compute_is_named() {
        // Not type-checked: only Tier 1 operators have relations, and all have computes.
        let m = relay_syntax::parse(
            r#"#[version = "0.0.5"]
def @main(%x: Tensor[(1, 3, 4, 4), float32], %w: Tensor[(3, 2, 3, 3), float32]) {
  %0 = fn (%p0: Tensor[(1, 3, 4, 4), float32], %p1: Tensor[(3, 2, 3, 3), float32], Primitive=1) {
    nn.conv2d_transpose(%p0, %p1)
  };
  %0(%x, %w)
}"#,
            "test.relay",
        )
        .unwrap();
        let main = m.function(Symbol::intern("main")).unwrap();
        let f = find_primitive(&main.func.body).unwrap();
        assert_eq!(
            compose(&f).err().map(|e| e.to_string()).as_deref(),
            Some("operator `nn.conv2d_transpose` has no compute definition yet")
        );
    }

    #[test]
    fn compute_errors_are_typed() {
        // 64-bit integer windows of more than 2^30 taps are refused by the compute definition.
        let f = primitive(
            r#"#[version = "0.0.5"]
def @main(%x: Tensor[(1, 1, 1, 1), int64]) {
  %0 = fn (%p0: Tensor[(1, 1, 1, 1), int64], Primitive=1) {
    nn.avg_pool2d(%p0, pool_size=[40000, 40000], padding=[40000])
  };
  %0(%x)
}"#,
        );
        let Err(ComposeError::Operator { op, error }) = compose(&f) else {
            panic!("the window composes")
        };
        assert_eq!(op, "nn.avg_pool2d");
        assert_eq!(error.kind(), OpErrorKind::Unsupported);
        let e = ComposeError::Operator { op, error }.into_kernel_error("k");
        assert!(matches!(&e, KernelError::Operator { .. }) && e.is_unsupported());
        assert!(
            e.to_string()
                .starts_with("kernel k: operator `nn.avg_pool2d`: "),
            "{e}"
        );
    }

    #[test]
    fn dynamic_shapes_and_large_constants_are_errors() {
        let f = primitive(
            r#"#[version = "0.0.5"]
def @main(%x: Tensor[(?, 3), float32]) {
  %0 = fn (%p0: Tensor[(?, 3), float32], Primitive=1) {
    exp(%p0)
  };
  %0(%x)
}"#,
        );
        assert_eq!(
            compose(&f).err().map(|e| e.to_string()).as_deref(),
            Some("dynamic shape `Tensor[(?, 3), float32]` is not supported")
        );
        assert!(
            matches!(compose(&f), Err(ComposeError::Parameter(e)) if e.kind() == OpErrorKind::Unsupported)
        );
        let big = NDArray::zeros(DType::F32, &[2]).unwrap();
        assert!(constant(&big).is_err());
        let one = NDArray::zeros(DType::I8, &[1, 1]).unwrap();
        let TeValue::Tensor(t) = constant(&one).unwrap() else {
            panic!("a tensor")
        };
        assert_eq!((t.shape.as_slice(), t.dtype), (&[1i64, 1][..], DType::I8));
    }
}
