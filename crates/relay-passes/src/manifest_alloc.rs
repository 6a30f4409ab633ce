//! `manifest_alloc`: explicit storage and tensor allocation and destination-passing kernel calls.
//!
//! Its contract is in `docs/passes.md` ("Explicit allocation"); its tests are in
//! `ir-tests/manifest_alloc/`. Every call of a primitive function whose checked result type is a
//! static tensor, or a non-empty tuple of static tensors, becomes
//!
//! ```text
//! let %storage = memory.alloc_storage(24i64, 64i64, dtype="float32");
//! let %y = memory.alloc_tensor(%storage, 0i64, meta[relay.Constant][0], dtype="float32", assert_shape=[2, 3]);
//! let %_ = vm.invoke_tvm_op(fn (…, Primitive=1) {…}, (%a, %b), (%y,));
//! ```
//!
//! The callee is a primitive function literal or a variable bound to one (directly or through
//! other variables) by a `let` anywhere in the same global, as before `inline_primitives`; it is
//! passed to `vm.invoke_tvm_op` as it was written. A call bound by a `let` binding is expanded in
//! place, reusing the bound variable for the (single) output tensor or for the tuple of output
//! tensors. A call anywhere else (a let-chain's body, a branch, an argument, when the program is
//! not in A-normal form) is bound first: in a let-chain's body the bindings join the chain,
//! elsewhere the call becomes `let … ; %tensor`. Calls with a dynamic (`?`) or otherwise
//! non-tensor result type are left alone, and so are calls of a primitive that may write its
//! result over an input ([`relay_ops::updated_param`]: `strided_set`), whose output the VM
//! chooses; nothing inside a primitive function changes. The
//! pass adds `extern type Storage` to the module when it allocates anything and the module
//! does not declare it yet.
//!
//! A call of a reshape-only primitive ([`crate::util::reshape_only`]: `reshape`, `squeeze`,
//! `expand_dims`, ... of one parameter) whose result is a tensor with at most one `?`
//! dimension allocates nothing and runs no kernel: it is a view of its argument's bytes, TVM's
//! `vm.reshape_tensor`, with the result's shape as an `int64` constant and as `newshape` (a
//! `?` written `-1`, which the VM infers from the element count):
//!
//! ```text
//! let %y = vm.reshape_tensor(%x, meta[relay.Constant][0], newshape=[1, 4, 40, 40]);
//! ```
//!
//! The other arguments (a `reshape_like`'s shape source) are dropped; those that are not atoms
//! are bound first, in order, so what they do still happens. Running the pass twice changes
//! nothing the second time: after it, the primitive functions it handled are only
//! `vm.invoke_tvm_op` arguments, never called directly.

use std::collections::HashMap;

use relay_ir::visit::{is_atom, is_primitive, map_children};
use relay_ir::{
    AttrValue, Attrs, Binding, BindingKind, DType, Dim, Expr, ExprKind, Function, Module, NDArray,
    OpRef, Span, Symbol, Type, TypeDef, TypeKind, VarId,
};
use relay_ops::memory::{STORAGE_TYPE, storage_type};

use crate::util::{fresh_var, reshape_only, view_shape};
use crate::{Invariants, Pass, PassContext, PassError};

/// The alignment of every storage the pass allocates, in bytes (TVM's `kAllocAlignment`).
const ALIGNMENT: i64 = 64;

/// The pass's name, for errors.
const NAME: &str = "manifest_alloc";

/// The `manifest_alloc` pass.
pub struct ManifestAlloc;

impl Pass for ManifestAlloc {
    fn name(&self) -> &'static str {
        NAME
    }

    fn description(&self) -> &'static str {
        "explicit storage and tensor allocation and destination-passing kernel calls"
    }

    fn required(&self) -> bool {
        true
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn establishes(&self) -> Invariants {
        Invariants {
            manifested: true,
            ..Invariants::default()
        }
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut rw = Rewriter::new()?;
        for global in &mut module.functions {
            if is_primitive(&global.func) {
                continue;
            }
            rw.prim_vars.clear();
            let body = rw.expr(&global.func.body);
            if let Some(error) = rw.error.take() {
                return Err(error);
            }
            global.func.body = body;
        }
        if rw.invocations > 0 {
            declare_storage(&mut module)?;
        }
        cx.stat("kernel calls made explicit", rw.invocations);
        cx.stat("reshapes made views", rw.views);
        cx.stat("tensors allocated", rw.tensors);
        cx.stat("storage bytes", rw.bytes);
        Ok(module)
    }
}

/// Adds `extern type Storage` to `module` unless it declares it already; an error if the module
/// defines a different type of that name.
fn declare_storage(module: &mut Module) -> Result<(), PassError> {
    let name = Symbol::intern(STORAGE_TYPE);
    match module.type_def(name) {
        Some(def) if def.external && def.params.is_empty() => Ok(()),
        Some(def) => Err(PassError::new(
            NAME,
            format!(
                "the module defines its own type `{STORAGE_TYPE}`, but the memory dialect needs \
                 `extern type {STORAGE_TYPE}`"
            ),
            def.span,
        )),
        None => {
            module.types.push(TypeDef {
                name,
                params: Vec::new(),
                ctors: Vec::new(),
                external: true,
                span: Span::DUMMY,
            });
            Ok(())
        }
    }
}

/// The dialect operators the pass emits.
struct Ops {
    alloc_storage: OpRef,
    alloc_tensor: OpRef,
    invoke: OpRef,
    reshape_tensor: OpRef,
}

/// The rewriting walk over one global function at a time.
struct Rewriter {
    ops: Ops,
    /// Variables bound to primitive function literals (or to such variables) in this global,
    /// with the literal.
    prim_vars: HashMap<VarId, Expr>,
    /// The first error met; the walk finishes without changes after it.
    error: Option<PassError>,
    /// Statistics.
    invocations: i64,
    views: i64,
    tensors: i64,
    bytes: i64,
}

/// One output tensor of a kernel call.
struct Output {
    shape: Vec<i64>,
    dtype: DType,
    ty: Type,
}

/// Whether a kernel returns one tensor or a tuple of them.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ResultKind {
    Tensor,
    Tuple,
}

/// The output tensors of a kernel call.
struct Outputs {
    kind: ResultKind,
    tensors: Vec<Output>,
}

/// How a primitive call is made explicit.
enum Lowering {
    /// Allocate the outputs and invoke the kernel into them.
    Invoke(Outputs),
    /// A reshape-only call: a view of one argument.
    View(View),
}

/// A `vm.reshape_tensor` view of argument `data` with `newshape` (`-1` for a `?`).
struct View {
    data: usize,
    newshape: Vec<i64>,
}

impl Rewriter {
    fn new() -> Result<Rewriter, PassError> {
        let op = |name: &str| {
            relay_ops::lookup(name).ok_or_else(|| {
                PassError::new(
                    NAME,
                    format!("the operator `{name}` is not registered"),
                    Span::DUMMY,
                )
            })
        };
        Ok(Rewriter {
            ops: Ops {
                alloc_storage: op("memory.alloc_storage")?,
                alloc_tensor: op("memory.alloc_tensor")?,
                invoke: op("vm.invoke_tvm_op")?,
                reshape_tensor: op("vm.reshape_tensor")?,
            },
            prim_vars: HashMap::new(),
            error: None,
            invocations: 0,
            views: 0,
            tensors: 0,
            bytes: 0,
        })
    }

    /// The primitive function `callee` is: a literal, or a variable bound to one.
    fn primitive_callee<'a>(&'a self, callee: &'a Expr) -> Option<&'a Function> {
        let literal = match callee.kind() {
            ExprKind::Var(v) => self.prim_vars.get(&v.id())?,
            _ => callee,
        };
        match literal.kind() {
            ExprKind::Function(f) if is_primitive(f) => Some(f),
            _ => None,
        }
    }

    /// The callee, arguments and lowering of `e` if it is a primitive call to expand.
    fn kernel_call<'e>(&self, e: &'e Expr) -> Option<(&'e Expr, &'e [Expr], Lowering)> {
        let ExprKind::Call { callee, args, .. } = e.kind() else {
            return None;
        };
        let f = self.primitive_callee(callee)?;
        let ty = e.checked_type()?;
        if let Some(data) = reshape_only(f)
            && data < args.len()
            && let Some(newshape) = view_shape(ty)
        {
            return Some((callee, args, Lowering::View(View { data, newshape })));
        }
        // A kernel that may write over its input is left to the VM, which passes the input as
        // the output when nothing else holds it (`invoke_packed_update`).
        if relay_ops::updated_param(f).is_some() {
            return None;
        }
        let outputs = static_outputs(ty)?;
        Some((callee, args, Lowering::Invoke(outputs)))
    }

    /// Rewrites `e` (never the inside of a primitive function).
    fn expr(&mut self, e: &Expr) -> Expr {
        if self.error.is_some() {
            return e.clone();
        }
        relay_ir::ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Let { bindings, body } => self.let_chain(e, bindings, body),
            _ => {
                if let Some((callee, args, lowering)) = self.kernel_call(e) {
                    // A kernel call outside a binding: bind it, then return the result.
                    let var = fresh_var("tensor", e.checked_type().cloned());
                    let mut out = Vec::new();
                    self.expand(&var, BindingKind::Let, callee, args, lowering, &mut out);
                    return Expr::new(
                        ExprKind::Let {
                            bindings: out,
                            body: Expr::var(&var),
                        },
                        e.span(),
                    );
                }
                map_children(e, |c| self.expr(c))
            }
        })
    }

    /// Rewrites the let-chain `e`, expanding kernel calls in place.
    fn let_chain(&mut self, e: &Expr, bindings: &[Binding], body: &Expr) -> Expr {
        let mut out = Vec::with_capacity(bindings.len());
        for b in bindings {
            match b.value.kind() {
                ExprKind::Function(f) if is_primitive(f) => {
                    self.prim_vars.insert(b.var.id(), b.value.clone());
                }
                ExprKind::Var(v) => {
                    if let Some(literal) = self.prim_vars.get(&v.id()).cloned() {
                        self.prim_vars.insert(b.var.id(), literal);
                    }
                }
                _ => {}
            }
            if let Some((callee, args, lowering)) = self.kernel_call(&b.value) {
                self.expand(&b.var, b.kind, callee, args, lowering, &mut out);
            } else {
                out.push(Binding {
                    value: self.expr(&b.value),
                    ..b.clone()
                });
            }
        }
        let body = match self.kernel_call(body) {
            Some((callee, args, lowering)) => {
                let var = fresh_var("tensor", body.checked_type().cloned());
                self.expand(&var, BindingKind::Let, callee, args, lowering, &mut out);
                Expr::var(&var)
            }
            None => self.expr(body),
        };
        Expr::new(
            ExprKind::Let {
                bindings: out,
                body,
            },
            e.span(),
        )
    }

    /// Appends the bindings that make `callee(args)` explicit as `lowering` says, binding
    /// `var` (of kind `kind`) to its result.
    fn expand(
        &mut self,
        var: &relay_ir::Var,
        kind: BindingKind,
        callee: &Expr,
        args: &[Expr],
        lowering: Lowering,
        out: &mut Vec<Binding>,
    ) {
        let args: Vec<Expr> = args.iter().map(|a| self.expr(a)).collect();
        match lowering {
            Lowering::Invoke(outputs) => self.invoke(var, kind, callee, args, outputs, out),
            Lowering::View(view) => self.view(var, kind, callee, args, view, out),
        }
    }

    /// Appends `let var = vm.reshape_tensor(args[data], shape, newshape=…)`, after bindings of
    /// the other arguments that are not atoms (evaluated in order, their results unused).
    fn view(
        &mut self,
        var: &relay_ir::Var,
        kind: BindingKind,
        callee: &Expr,
        mut args: Vec<Expr>,
        View { data, newshape }: View,
        out: &mut Vec<Binding>,
    ) {
        if args
            .iter()
            .enumerate()
            .any(|(i, a)| i != data && !is_atom(a))
        {
            for a in args.iter_mut().filter(|a| !is_atom(a)) {
                let v = fresh_var("arg", a.checked_type().cloned());
                out.push(let_binding(&v, a.clone()));
                *a = Expr::var(&v);
            }
        }
        let dims: Vec<i128> = newshape.iter().map(|&d| i128::from(d)).collect();
        let Ok(shape) = NDArray::from_i128_slice(DType::I64, &[dims.len() as i64], &dims) else {
            self.error = Some(PassError::new(
                NAME,
                format!("cannot build the shape constant {newshape:?}"),
                callee.span(),
            ));
            return;
        };
        let reshape = call(
            self.ops.reshape_tensor,
            vec![args.swap_remove(data), Expr::constant(shape)],
            &[(
                "newshape",
                AttrValue::Array(newshape.iter().map(|&d| AttrValue::Int(d)).collect()),
            )],
        );
        out.push(Binding {
            var: var.clone(),
            value: reshape,
            kind,
        });
        self.views += 1;
    }

    /// Appends the bindings that allocate `outputs` and invoke `callee` on `args` into them,
    /// binding `var` (of kind `kind`) to the output tensor or the tuple of them.
    fn invoke(
        &mut self,
        var: &relay_ir::Var,
        kind: BindingKind,
        callee: &Expr,
        args: Vec<Expr>,
        outputs: Outputs,
        out: &mut Vec<Binding>,
    ) {
        let single = outputs.kind == ResultKind::Tensor;
        let outputs = outputs.tensors;
        let mut tensors = Vec::with_capacity(outputs.len());
        for (i, output) in outputs.iter().enumerate() {
            let Some(size) = byte_size(&output.shape, output.dtype) else {
                self.error = Some(PassError::new(
                    NAME,
                    format!("a tensor of type `{}` is too large to allocate", output.ty),
                    callee.span(),
                ));
                return;
            };
            let storage = fresh_var("storage", Some(storage_type()));
            let dtype = AttrValue::Str(output.dtype.to_string().into());
            out.push(let_binding(
                &storage,
                call(
                    self.ops.alloc_storage,
                    vec![int64(size), int64(ALIGNMENT)],
                    &[("dtype", dtype.clone())],
                ),
            ));
            let tensor = if single && kind != BindingKind::Seq {
                var.clone()
            } else if single {
                // A `prim(args);` statement: its variable is never used, so the tensor gets
                // its own.
                fresh_var("tensor", Some(output.ty.clone()))
            } else {
                let base = match var.name().as_str() {
                    "" => "tensor".to_owned(),
                    name => name.to_owned(),
                };
                fresh_var(&format!("{base}{i}"), Some(output.ty.clone()))
            };
            let shape: Vec<i128> = output.shape.iter().map(|&d| i128::from(d)).collect();
            let Ok(shape_const) =
                NDArray::from_i128_slice(DType::I64, &[output.shape.len() as i64], &shape)
            else {
                self.error = Some(PassError::new(
                    NAME,
                    format!("cannot build the shape constant of `{}`", output.ty),
                    callee.span(),
                ));
                return;
            };
            let alloc = call(
                self.ops.alloc_tensor,
                vec![Expr::var(&storage), int64(0), Expr::constant(shape_const)],
                &[
                    ("dtype", dtype),
                    (
                        "assert_shape",
                        AttrValue::Array(output.shape.iter().map(|&d| AttrValue::Int(d)).collect()),
                    ),
                ],
            );
            out.push(Binding {
                var: tensor.clone(),
                value: alloc,
                kind: if single && kind != BindingKind::Seq {
                    kind
                } else {
                    BindingKind::Let
                },
            });
            tensors.push(tensor);
            self.tensors += 1;
            self.bytes = self.bytes.saturating_add(size);
        }
        let unit = fresh_var("_", Some(Type::tuple(Vec::new())));
        out.push(let_binding(
            &unit,
            call(
                self.ops.invoke,
                vec![
                    callee.clone(),
                    Expr::new(ExprKind::Tuple(args), Span::DUMMY),
                    Expr::new(
                        ExprKind::Tuple(tensors.iter().map(Expr::var).collect()),
                        Span::DUMMY,
                    ),
                ],
                &[],
            ),
        ));
        if !single {
            out.push(Binding {
                var: var.clone(),
                value: Expr::new(
                    ExprKind::Tuple(tensors.iter().map(Expr::var).collect()),
                    Span::DUMMY,
                ),
                kind,
            });
        }
        self.invocations += 1;
    }
}

/// The shape and dtype of `t` if it is a tensor type with known dimensions.
fn static_tensor(t: &Type) -> Option<(Vec<i64>, DType)> {
    match t.kind() {
        TypeKind::Tensor { shape, dtype } => {
            let dims = shape
                .iter()
                .map(|d| match d {
                    Dim::Known(n) => Some(*n),
                    Dim::Any => None,
                })
                .collect::<Option<Vec<i64>>>()?;
            Some((dims, *dtype))
        }
        _ => None,
    }
}

/// The output tensors of a kernel call of result type `ty`: one for a static tensor, one per
/// field of a non-empty tuple of static tensors; `None` for anything else.
fn static_outputs(ty: &Type) -> Option<Outputs> {
    let output = |t: &Type| {
        static_tensor(t).map(|(shape, dtype)| Output {
            shape,
            dtype,
            ty: t.clone(),
        })
    };
    match ty.kind() {
        TypeKind::Tuple(fields) if !fields.is_empty() => Some(Outputs {
            kind: ResultKind::Tuple,
            tensors: fields.iter().map(output).collect::<Option<_>>()?,
        }),
        TypeKind::Tensor { .. } => Some(Outputs {
            kind: ResultKind::Tensor,
            tensors: vec![output(ty)?],
        }),
        _ => None,
    }
}

/// The bytes a compact tensor of `shape` and `dtype` occupies, if it fits in an `int64`.
fn byte_size(shape: &[i64], dtype: DType) -> Option<i64> {
    let bytes = NDArray::byte_len(dtype, shape).ok()?;
    i64::try_from(bytes).ok()
}

/// The `int64` scalar constant `n`.
fn int64(n: i64) -> Expr {
    // An `int64` scalar always builds (8 bytes, and every `i64` fits).
    Expr::constant(NDArray::scalar_i128(DType::I64, i128::from(n)).expect("an int64 scalar"))
}

/// A call of `op` on `args` with every attribute of its schema in declaration order: those in
/// `set` as given, the others at their defaults (`None` when the field has none), as the
/// parser builds call attributes.
fn call(op: OpRef, args: Vec<Expr>, set: &[(&str, AttrValue)]) -> Expr {
    let attrs = Attrs::new(
        op.attrs
            .iter()
            .map(|f| {
                let value = set
                    .iter()
                    .find(|(name, _)| *name == f.name)
                    .map(|(_, v)| v.clone())
                    .or_else(|| f.default.value())
                    .unwrap_or(AttrValue::Null);
                (Symbol::intern(f.name), value)
            })
            .collect(),
    );
    Expr::new(
        ExprKind::Call {
            callee: Expr::new(ExprKind::Op(op), Span::DUMMY),
            args,
            attrs,
        },
        Span::DUMMY,
    )
}

/// `let %var = value;`.
fn let_binding(var: &relay_ir::Var, value: Expr) -> Binding {
    Binding {
        var: var.clone(),
        value,
        kind: BindingKind::Let,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PassManager;
    use relay_ir::{PrintOptions, print_module};

    fn parse(text: &str) -> Module {
        crate::testing::parse_checked(text)
    }

    fn run_pass(m: Module, verify: bool) -> Result<Module, crate::PassManagerError> {
        PassManager::new(vec![&ManifestAlloc], 0)
            .verify_each(verify)
            .run(m)
            .map(|(m, _)| m)
    }

    #[test]
    fn a_module_with_its_own_storage_type_is_an_error() {
        let m = parse(
            "#[version = \"0.0.5\"]\n\
             type Storage { MkStorage }\n\
             def @main(%x: Tensor[(2), float32]) {\n\
             fn (%p0: Tensor[(2), float32], Primitive=1) -> Tensor[(2), float32] { exp(%p0) }(%x)\n\
             }\n",
        );
        let Err(err) = run_pass(m, true) else {
            panic!("the pass fails");
        };
        assert!(
            err.to_string().contains("defines its own type `Storage`"),
            "{err}"
        );
    }

    #[test]
    fn the_view_written_by_the_kernel_is_the_result() {
        let m = parse(
            "#[version = \"0.0.5\"]\n\
             def @main() {\n\
             let %x = stack((1f, 4f, 9f), axis=0);\n\
             let %y = fn (%p0: Tensor[(3), float32], Primitive=1) -> (Tensor[(3), float32], float32) {\n\
             (sqrt(%p0), sum(%p0))\n\
             }(%x);\n\
             %y\n\
             }\n",
        );
        let out = run_pass(m, true).expect("the pass succeeds");
        let text = print_module(&out, &PrintOptions::default());
        let again = relay_syntax::parse(&text, "<printed>").expect("output re-parses");
        relay_types::check_module(&again).expect("output type-checks");
        let value = relay_interp::run(&again, "main", vec![], &Default::default()).expect("runs");
        let fields = value.as_tuple().expect("a tuple");
        let sqrt = fields[0].as_tensor().expect("a tensor");
        assert!(sqrt.is_view());
        assert_eq!(sqrt.to_f64_vec(), [1.0, 2.0, 3.0]);
        assert_eq!(
            fields[1].as_tensor().expect("a tensor").to_f64_vec(),
            [14.0]
        );
    }

    #[test]
    fn long_binding_chains() {
        const N: usize = 100_000;
        let mut text = String::from(
            "#[version = \"0.0.5\"]\n\
             def @main(%x0: Tensor[(2), float32]) {\n\
             let %p = fn (%p0: Tensor[(2), float32], Primitive=1) -> Tensor[(2), float32] { exp(%p0) };\n",
        );
        for i in 1..=N {
            text.push_str(&format!("let %x{i} = %p(%x{});\n", i - 1));
        }
        text.push_str(&format!("%x{N}\n}}\n"));
        let m = parse(&text);
        let start = std::time::Instant::now();
        let out = run_pass(m, false).expect("the pass succeeds");
        assert!(start.elapsed().as_secs() < 60, "took {:?}", start.elapsed());
        let main = out.function(Symbol::intern("main")).expect("@main");
        let ExprKind::Let { bindings, .. } = main.func.body.kind() else {
            panic!("the body is a let-chain");
        };
        assert_eq!(bindings.len(), 1 + 3 * N);
        assert!(out.type_def(Symbol::intern(STORAGE_TYPE)).is_some());
    }
}
