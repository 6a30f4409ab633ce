//! Specialization of a primitive function with dynamic dimensions to the concrete types of
//! the arguments it is called with.
//!
//! The kernel compiler generates code for static shapes only. TVM compiles a primitive whose
//! parameters have `?` dimensions (`Tensor[(?, 3), float32]`) into one kernel with symbolic
//! shapes; relayc specializes instead: the VM compiles such a primitive when it is first
//! called, for the concrete types of that call's arguments, and caches the kernel under those
//! types ([`KernelKey`](crate::KernelKey) includes them, see
//! [`KernelCache::get_or_compile_for`](crate::KernelCache::get_or_compile_for)).
//!
//! [`specialize`] checks each argument type against its parameter's type, rebuilds the
//! function with every parameter annotated with its concrete type and fresh expression nodes
//! (checked types are set once per node), and type-checks the copy with `relay-types`, so that
//! every `checked_type` inside it is static. Errors are [`KernelError::Call`]: the arguments of
//! the call do not fit the function.

use std::collections::HashMap;

use relay_ir::{
    Binding, Dim, Expr, ExprKind, ExprNode, Function, GlobalFunc, Module, ModuleKind, Span, Symbol,
    Type, TypeKind, Var, VarId,
};

use crate::error::KernelError;

/// `func` (a primitive function) specialized to arguments of types `args`: the concrete types
/// of the kernel's tensor arguments in call order (the parameters, tuple parameters flattened
/// depth first, as `compose` flattens them).
///
/// The result is `func` with every parameter annotated with its concrete type (tuple types
/// rebuilt) and its body type-checked again, so that every checked type inside it is static;
/// its attributes (`Primitive=1`, ...) are kept. A function whose parameter and result types
/// are already static (and checked) is returned unchanged once the arguments are checked
/// against it.
///
/// Fails with [`KernelError::Call`] when the number of arguments is wrong, when an argument is
/// not a tensor type with known dimensions, when it does not match its parameter's type (rank,
/// dtype, a known dimension that differs; the message names the parameter), or when type
/// inference fails on the concrete types (the relation's message, e.g. a `reshape` whose sizes
/// do not fit).
pub fn specialize(func: &Function, args: &[Type]) -> Result<Function, KernelError> {
    specialize_named(func, args, &crate::kernel_name(func))
}

/// [`specialize`], with errors naming the kernel `kernel`.
pub(crate) fn specialize_named(
    func: &Function,
    args: &[Type],
    kernel: &str,
) -> Result<Function, KernelError> {
    let fail = |message: String| KernelError::Call {
        kernel: kernel.to_owned(),
        message: format!("kernel {kernel}: {message}"),
    };
    let mut declared = Vec::with_capacity(func.params.len());
    let mut expected = 0usize;
    for p in &func.params {
        let ty = p.checked_type().or(p.ty()).ok_or_else(|| {
            fail(format!(
                "parameter `%{}` has no type annotation",
                p.name().as_str()
            ))
        })?;
        expected += tensor_leaves(ty).ok_or_else(|| {
            fail(format!(
                "parameter `%{}` of type `{ty}` is not a tensor or a tuple of tensors",
                p.name().as_str()
            ))
        })?;
        declared.push(ty);
    }
    if args.len() != expected {
        return Err(fail(format!(
            "expected {expected} tensor argument{}, got {}",
            if expected == 1 { "" } else { "s" },
            args.len()
        )));
    }
    let mut next = 0usize;
    let mut concrete = Vec::with_capacity(func.params.len());
    for (p, ty) in func.params.iter().zip(declared) {
        let what = format!("%{}", p.name().as_str());
        concrete.push(bind(ty, args, &mut next, &what).map_err(&fail)?);
    }
    if !crate::is_dynamic(func) && func.body.checked_type().is_some() {
        return Ok(func.clone());
    }

    let mut copier = Copier::default();
    let params: Vec<Var> = func
        .params
        .iter()
        .zip(concrete)
        .map(|(p, ty)| copier.rename(p, Some(ty)))
        .collect();
    // No return annotation while checking: a declared `?` would keep the result dynamic
    // (a `?` unifies with any size and stays `?`).
    let candidate = Function {
        type_params: func.type_params.clone(),
        params,
        ret_type: None,
        body: copier.copy(&func.body),
        attrs: func.attrs.clone(),
    };
    let module = Module {
        functions: vec![GlobalFunc {
            name: Symbol::intern("main"),
            func: candidate.clone(),
            span: Span::DUMMY,
        }],
        types: Vec::new(),
        kind: ModuleKind::Definitions,
        source: None,
    };
    if let Err(errors) = relay_types::check_module(&module) {
        let messages: Vec<String> = errors.errors.iter().map(|e| e.to_string()).collect();
        let types: Vec<String> = args.iter().map(|t| format!("`{t}`")).collect();
        return Err(fail(format!(
            "arguments of types {} do not fit: {}",
            types.join(", "),
            messages.join("; ")
        )));
    }
    let ret = candidate.body.checked_type().cloned().ok_or_else(|| {
        fail("type checking the specialized function gave its body no type".into())
    })?;
    Ok(Function {
        ret_type: func.ret_type.as_ref().map(|_| ret),
        ..candidate
    })
}

/// Whether a type has a `?` dimension anywhere in it.
pub fn has_dynamic_dim(ty: &Type) -> bool {
    match ty.kind() {
        TypeKind::Tensor { shape, .. } => shape.contains(&Dim::Any),
        TypeKind::Tuple(fields) => fields.iter().any(has_dynamic_dim),
        TypeKind::Func(f) => f.params.iter().any(has_dynamic_dim) || has_dynamic_dim(&f.ret),
        TypeKind::Adt { args, .. } => args.iter().any(has_dynamic_dim),
        TypeKind::Ref(t) => has_dynamic_dim(t),
        TypeKind::Var(_) | TypeKind::Incomplete => false,
    }
}

/// The number of tensors in a tensor or (nested) tuple of tensors; `None` for other types.
fn tensor_leaves(ty: &Type) -> Option<usize> {
    match ty.kind() {
        TypeKind::Tensor { .. } => Some(1),
        TypeKind::Tuple(fields) => fields.iter().map(tensor_leaves).sum(),
        _ => None,
    }
}

/// The concrete type of a parameter (or tuple field) `what` of type `declared`, taking its
/// tensors' types from `args[*next..]`.
fn bind(declared: &Type, args: &[Type], next: &mut usize, what: &str) -> Result<Type, String> {
    match declared.kind() {
        TypeKind::Tensor { shape, dtype } => {
            let index = *next;
            let arg = args
                .get(index)
                .ok_or_else(|| format!("no argument for `{what}`"))?;
            *next += 1;
            let mismatch = |why: String| {
                format!("argument {index} (`{what}`): expected `{declared}`, got `{arg}` ({why})")
            };
            let TypeKind::Tensor {
                shape: arg_shape,
                dtype: arg_dtype,
            } = arg.kind()
            else {
                return Err(mismatch("not a tensor type".into()));
            };
            if let Some(d) = arg_shape
                .iter()
                .position(|d| !matches!(d, Dim::Known(n) if *n >= 0))
            {
                return Err(mismatch(format!(
                    "dimension {d} is not a known size: arguments must have static types"
                )));
            }
            if arg_shape.len() != shape.len() {
                return Err(mismatch(format!(
                    "rank {}, not {}",
                    arg_shape.len(),
                    shape.len()
                )));
            }
            if arg_dtype != dtype {
                return Err(mismatch(format!("dtype {arg_dtype}, not {dtype}")));
            }
            for (d, (want, got)) in shape.iter().zip(arg_shape).enumerate() {
                if let (Dim::Known(want), Dim::Known(got)) = (want, got)
                    && want != got
                {
                    return Err(mismatch(format!("dimension {d} is {got}, not {want}")));
                }
            }
            Ok(arg.clone())
        }
        TypeKind::Tuple(fields) => {
            let fields = fields
                .iter()
                .enumerate()
                .map(|(i, f)| bind(f, args, next, &format!("{what}.{i}")))
                .collect::<Result<Vec<_>, _>>()?;
            Ok(Type::tuple(fields))
        }
        _ => Err(format!(
            "`{what}` of type `{declared}` is not a tensor or a tuple of tensors"
        )),
    }
}

/// A deep copy of an expression with fresh nodes (no checked types) and fresh binding
/// variables. Shared nodes stay shared.
#[derive(Default)]
struct Copier {
    /// The copies of the variables bound so far.
    vars: HashMap<VarId, Var>,
    /// The copies of the nodes copied so far.
    memo: HashMap<*const ExprNode, Expr>,
}

impl Copier {
    /// A fresh variable standing for `v`, annotated with `ty`.
    fn rename(&mut self, v: &Var, ty: Option<Type>) -> Var {
        let w = Var::new(v.name(), ty, v.span());
        self.vars.insert(v.id(), w.clone());
        w
    }

    /// A fresh variable standing for `v`, keeping its annotation unless it has a `?`
    /// dimension (inference then gives it its concrete type).
    fn rename_keeping_static(&mut self, v: &Var) -> Var {
        let ty = v.ty().filter(|t| !has_dynamic_dim(t)).cloned();
        self.rename(v, ty)
    }

    fn copy(&mut self, e: &Expr) -> Expr {
        relay_ir::ensure_sufficient_stack(|| {
            let key = &**e as *const ExprNode;
            if let Some(done) = self.memo.get(&key) {
                return done.clone();
            }
            let out = self.copy_inner(e);
            self.memo.insert(key, out.clone());
            out
        })
    }

    fn copy_inner(&mut self, e: &Expr) -> Expr {
        let kind = match e.kind() {
            ExprKind::Var(v) => ExprKind::Var(self.vars.get(&v.id()).unwrap_or(v).clone()),
            ExprKind::Constant(c) => ExprKind::Constant(c.clone()),
            ExprKind::Global(g) => ExprKind::Global(*g),
            ExprKind::Op(op) => ExprKind::Op(op),
            ExprKind::Ctor(c) => ExprKind::Ctor(*c),
            ExprKind::Let { bindings, body } => {
                let bindings = bindings
                    .iter()
                    .map(|b| {
                        // Only a function literal may refer to its own binding variable.
                        let var = self.rename_keeping_static(&b.var);
                        Binding {
                            value: self.copy(&b.value),
                            var,
                            kind: b.kind,
                        }
                    })
                    .collect();
                ExprKind::Let {
                    bindings,
                    body: self.copy(body),
                }
            }
            ExprKind::Function(f) => {
                let params = f
                    .params
                    .iter()
                    .map(|p| self.rename(p, p.ty().cloned()))
                    .collect();
                ExprKind::Function(Function {
                    params,
                    body: self.copy(&f.body),
                    ..f.clone()
                })
            }
            // Every other form has children, copied into fresh nodes, so `map_children`
            // rebuilds the node (an empty tuple, childless, keeps its static type `()`).
            _ => return relay_ir::visit::map_children(e, |c| self.copy(c)),
        };
        Expr::new(kind, e.span())
    }
}

#[cfg(test)]
mod tests {
    use relay_interp::{SplitMix64, compare_tensors, random_tensor};
    use relay_ir::{DType, NDArray, Value};

    use super::*;
    use crate::compose::tests::primitive;

    /// The text of a module whose `@main` calls one primitive function with parameters
    /// `params` (declarations such as `%p0: Tensor[(?, 3), float32]`) and body `body`.
    fn module_text(params: &[&str], body: &str) -> String {
        let outer: Vec<String> = params.iter().map(|p| p.replacen("%p", "%a", 1)).collect();
        let args: Vec<String> = (0..params.len()).map(|i| format!("%a{i}")).collect();
        format!(
            "#[version = \"0.0.5\"]\ndef @main({}) {{\n  %0 = fn ({}, Primitive=1) {{\n    {body}\n  }};\n  %0({})\n}}\n",
            outer.join(", "),
            params.join(", "),
            args.join(", ")
        )
    }

    fn prim(params: &[&str], body: &str) -> Function {
        primitive(&module_text(params, body))
    }

    fn f32s(shape: &[i64]) -> Type {
        Type::tensor(shape, DType::F32)
    }

    /// The interpreter's value of a parameter of type `ty` made of `leaves` (tuples rebuilt).
    fn value_of(ty: &Type, leaves: &mut std::slice::Iter<'_, NDArray>) -> Value {
        match ty.kind() {
            TypeKind::Tuple(fields) => {
                Value::tuple(fields.iter().map(|f| value_of(f, leaves)).collect())
            }
            _ => Value::tensor(leaves.next().expect("one input per tensor leaf").clone()),
        }
    }

    /// Compiles `func` for arguments of types `args` and runs it on random inputs, against the
    /// interpreter's run of `func` itself (the dynamic function) on the same inputs.
    fn check_against_interpreter(func: &Function, args: &[Type], seed: u64) {
        let kernel = crate::compile_primitive_for(func, "k", args)
            .unwrap_or_else(|e| panic!("does not compile for {args:?}: {e}"));
        let mut rng = SplitMix64::new(seed);
        let inputs: Vec<NDArray> = args
            .iter()
            .map(|t| random_tensor(Some(t), &mut rng).unwrap())
            .collect();
        let mut leaves = inputs.iter();
        let values: Vec<Value> = func
            .params
            .iter()
            .map(|p| value_of(p.checked_type().unwrap(), &mut leaves))
            .collect();
        let expected = crate::compose::tests::interpret(func, values);
        let specialized = specialize(func, args).unwrap();
        let mut outputs = crate::output_arrays(&specialized).unwrap();
        let refs: Vec<&NDArray> = inputs.iter().collect();
        let mut outs: Vec<&mut NDArray> = outputs.iter_mut().collect();
        kernel.call(&refs, &mut outs).unwrap();
        assert_eq!(outputs.len(), expected.len());
        for (got, want) in outputs.iter().zip(&expected) {
            if let Some(why) = compare_tensors(got, want, 1e-4, 1e-5) {
                panic!("for {args:?}: {why}");
            }
        }
    }

    /// Every expression node of `e` with its checked type (walking binding values, bodies
    /// and call arguments).
    fn all_types(e: &Expr, out: &mut Vec<Option<Type>>) {
        out.push(e.checked_type().cloned());
        relay_ir::visit::for_each_child(e, |c| all_types(c, out));
    }

    fn call_error(r: Result<Function, KernelError>) -> String {
        match r {
            Err(KernelError::Call { message, .. }) => message,
            other => panic!("expected a call error, got {other:?}"),
        }
    }

    #[test]
    fn dynamic_add_specializes_to_static_types() {
        let f = prim(
            &["%p0: Tensor[(?, 3), float32]", "%p1: Tensor[(3), float32]"],
            "%1 = add(%p0, %p1);\n    exp(%1)",
        );
        assert!(crate::is_dynamic(&f));
        let s = specialize(&f, &[f32s(&[5, 3]), f32s(&[3])]).unwrap();
        assert!(!crate::is_dynamic(&s));
        assert!(relay_ir::visit::is_primitive(&s));
        assert_eq!(s.attrs.len(), f.attrs.len());
        let params: Vec<String> = s
            .params
            .iter()
            .map(|p| p.ty().unwrap().to_string())
            .collect();
        assert_eq!(params, ["Tensor[(5, 3), float32]", "Tensor[(3), float32]"]);
        let mut types = Vec::new();
        all_types(&s.body, &mut types);
        for t in &types {
            let t = t.as_ref().expect("every node has a checked type");
            if matches!(t.kind(), TypeKind::Tensor { .. }) {
                assert!(!has_dynamic_dim(t), "{t}");
            }
        }
        assert_eq!(
            s.body.checked_type().unwrap().to_string(),
            "Tensor[(5, 3), float32]"
        );
        // The original keeps its dynamic types.
        assert_eq!(
            f.body.checked_type().unwrap().to_string(),
            "Tensor[(?, 3), float32]"
        );
        for (seed, n) in [(1, 5), (2, 1), (3, 0)] {
            check_against_interpreter(&f, &[f32s(&[n, 3]), f32s(&[3])], seed);
        }
    }

    #[test]
    fn dynamic_reshape_specializes() {
        let f = prim(
            &["%p0: Tensor[(?, 4), float32]"],
            "%1 = reshape(%p0, newshape=[-1, 2]);\n    multiply(%1, 2f)",
        );
        check_against_interpreter(&f, &[f32s(&[3, 4])], 4);
        check_against_interpreter(&f, &[f32s(&[1, 4])], 5);
        let s = specialize(&f, &[f32s(&[3, 4])]).unwrap();
        assert_eq!(
            s.body.checked_type().unwrap().to_string(),
            "Tensor[(6, 2), float32]"
        );
        // A reshape whose sizes do not fit the concrete type is the relation's error.
        let g = prim(
            &["%p0: Tensor[(?, 2), float32]"],
            "reshape(%p0, newshape=[3, -1])",
        );
        check_against_interpreter(&g, &[f32s(&[6, 2])], 6);
        let message = call_error(specialize(&g, &[f32s(&[5, 2])]));
        assert!(message.contains("do not fit"), "{message}");
        assert!(message.contains("in `reshape`"), "{message}");
    }

    #[test]
    fn dynamic_concatenate_specializes() {
        let f = prim(
            &[
                "%p0: Tensor[(?, 3), float32]",
                "%p1: Tensor[(?, 3), float32]",
            ],
            "%1 = (%p0, %p1);\n    concatenate(%1, axis=0)",
        );
        check_against_interpreter(&f, &[f32s(&[2, 3]), f32s(&[4, 3])], 7);
        check_against_interpreter(&f, &[f32s(&[1, 3]), f32s(&[1, 3])], 8);
        let s = specialize(&f, &[f32s(&[2, 3]), f32s(&[4, 3])]).unwrap();
        assert_eq!(
            s.body.checked_type().unwrap().to_string(),
            "Tensor[(6, 3), float32]"
        );
    }

    #[test]
    fn dynamic_dense_specializes() {
        let f = prim(
            &[
                "%p0: Tensor[(?, 8), float32]",
                "%p1: Tensor[(4, 8), float32]",
                "%p2: Tensor[(4), float32]",
            ],
            "%1 = nn.dense(%p0, %p1, units=4);\n    %2 = nn.bias_add(%1, %p2);\n    nn.relu(%2)",
        );
        for (seed, n) in [(9, 1), (10, 7)] {
            check_against_interpreter(&f, &[f32s(&[n, 8]), f32s(&[4, 8]), f32s(&[4])], seed);
        }
    }

    #[test]
    fn tuple_parameters_are_rebuilt() {
        let f = prim(
            &[
                "%p0: (Tensor[(?, 2), float32], Tensor[(?), float32])",
                "%p1: Tensor[(2), float32]",
            ],
            "%1 = add(%p0.0, %p1);\n    %2 = sum(%1, axis=[1]);\n    (subtract(%2, %p0.1), %1)",
        );
        let args = [f32s(&[3, 2]), f32s(&[3]), f32s(&[2])];
        let s = specialize(&f, &args).unwrap();
        assert_eq!(
            s.params[0].ty().unwrap().to_string(),
            "(Tensor[(3, 2), float32], Tensor[(3), float32])"
        );
        assert_eq!(
            s.body.checked_type().unwrap().to_string(),
            "(Tensor[(3), float32], Tensor[(3, 2), float32])"
        );
        check_against_interpreter(&f, &args, 11);
        check_against_interpreter(&f, &[f32s(&[6, 2]), f32s(&[6]), f32s(&[2])], 12);
        // A tuple field that does not match is named by its path.
        let message = call_error(specialize(&f, &[f32s(&[3, 2]), f32s(&[3, 1]), f32s(&[2])]));
        assert_eq!(
            message,
            "kernel fused_add_sum_subtract: argument 1 (`%p0.1`): expected `Tensor[(?), float32]`, \
             got `Tensor[(3, 1), float32]` (rank 2, not 1)"
        );
    }

    #[test]
    fn mismatched_arguments_are_errors() {
        let f = prim(
            &[
                "%p0: Tensor[(?, 3), float32]",
                "%p1: Tensor[(?, 3), float32]",
            ],
            "add(%p0, %p1)",
        );
        let cases: [(Vec<Type>, &str); 6] = [
            (vec![f32s(&[2, 3])], "expected 2 tensor arguments, got 1"),
            (
                vec![f32s(&[2, 3]), f32s(&[2, 4])],
                "argument 1 (`%p1`): expected `Tensor[(?, 3), float32]`, got \
                 `Tensor[(2, 4), float32]` (dimension 1 is 4, not 3)",
            ),
            (
                vec![Type::tensor(&[2, 3], DType::I32), f32s(&[2, 3])],
                "argument 0 (`%p0`): expected `Tensor[(?, 3), float32]`, got \
                 `Tensor[(2, 3), int32]` (dtype int32, not float32)",
            ),
            (
                vec![f32s(&[2, 3]), f32s(&[3])],
                "argument 1 (`%p1`): expected `Tensor[(?, 3), float32]`, got \
                 `Tensor[(3), float32]` (rank 1, not 2)",
            ),
            (
                vec![
                    f32s(&[2, 3]),
                    Type::from_kind(TypeKind::Tensor {
                        shape: vec![Dim::Any, Dim::Known(3)],
                        dtype: DType::F32,
                    }),
                ],
                "argument 1 (`%p1`): expected `Tensor[(?, 3), float32]`, got \
                 `Tensor[(?, 3), float32]` (dimension 0 is not a known size: arguments must \
                 have static types)",
            ),
            (
                vec![f32s(&[2, 3]), Type::tuple(vec![f32s(&[2, 3])])],
                "argument 1 (`%p1`): expected `Tensor[(?, 3), float32]`, got \
                 `(Tensor[(2, 3), float32],)` (not a tensor type)",
            ),
        ];
        for (args, want) in cases {
            let message = call_error(specialize(&f, &args));
            assert_eq!(message, format!("kernel fused_add: {want}"));
            // The kernel compiler reports the same error under the kernel's name.
            match crate::compile_primitive_for(&f, "k", &args) {
                Err(KernelError::Call { kernel, message }) => {
                    assert_eq!(kernel, "k");
                    assert_eq!(message, format!("kernel k: {want}"));
                }
                Err(e) => panic!("{e}"),
                Ok(_) => panic!("compiled for {args:?}"),
            }
        }
        // Types that match each parameter but not each other: the relation's error.
        let message = call_error(specialize(&f, &[f32s(&[2, 3]), f32s(&[4, 3])]));
        assert!(message.contains("in `add`"), "{message}");
        assert!(
            message.starts_with(
                "kernel fused_add: arguments of types `Tensor[(2, 3), float32]`, \
                 `Tensor[(4, 3), float32]` do not fit: "
            ),
            "{message}"
        );
    }

    #[test]
    fn static_functions_are_returned_unchanged() {
        let f = prim(
            &["%p0: Tensor[(2, 3), float32]", "%p1: Tensor[(3), float32]"],
            "add(%p0, %p1)",
        );
        assert!(!crate::is_dynamic(&f));
        let args = [f32s(&[2, 3]), f32s(&[3])];
        let s = specialize(&f, &args).unwrap();
        assert!(Expr::ptr_eq(&s.body, &f.body));
        assert_eq!(s.params, f.params);
        check_against_interpreter(&f, &args, 13);
        // The arguments are still checked.
        let message = call_error(specialize(&f, &[f32s(&[4, 3]), f32s(&[3])]));
        assert!(message.contains("dimension 0 is 4, not 2"), "{message}");
    }

    #[test]
    fn dynamic_results_and_dims_are_detected() {
        assert!(has_dynamic_dim(&Type::tuple(vec![
            f32s(&[2]),
            Type::from_kind(TypeKind::Tensor {
                shape: vec![Dim::Any],
                dtype: DType::F32,
            }),
        ])));
        assert!(!has_dynamic_dim(&Type::tuple(vec![f32s(&[2]), f32s(&[])])));
        assert_eq!(tensor_leaves(&Type::tuple(vec![])), Some(0));
        // A dynamic function is not compiled as it is, but compiles once specialized.
        let f = prim(&["%p0: Tensor[(?), int32]"], "negative(%p0)");
        assert!(
            crate::compile_primitive(&f, "k")
                .err()
                .is_some_and(|e| e.is_unsupported())
        );
        let args = [Type::tensor(&[17], DType::I32)];
        assert!(crate::compile_primitive_for(&f, "k", &args).is_ok());
        check_against_interpreter(&f, &args, 14);
    }
}
