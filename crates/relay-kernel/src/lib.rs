//! The kernel compiler (docs/design.md §7): every fused primitive function (`Primitive=1`) becomes a
//! native packed function.
//!
//! The pipeline, one module each, in order (each stage's output can be printed):
//! - `compose`: the primitive function's operator calls → tensor expressions
//!   (`relay_ir::te`), from each operator's compute definition in `relay-ops`;
//! - `schedule`: every decision about how they are computed — which tensors are materialized,
//!   GEMM or loops, vector lanes, parallel loops, vector legality — and, read back from a
//!   lowered kernel, the decisions as data (`relayc build --emit schedule`);
//! - `lower`: tensor expressions → the loop nest IR ([`loops`]) following those decisions,
//!   with injective producers inlined into their consumers (`relayc build --emit kernels`);
//! - `loops::verify`: the loop nest checked (bounds, dtypes, lanes, aliasing), in debug
//!   builds and tests, and under `relayc build --verify-each`;
//! - `codegen`: loop nest → Cranelift IR → machine code, behind TVM's packed C ABI ([`abi`])
//!   (`relayc build --emit clif|asm`);
//! - `listing`: every kernel of a module as text — its schedule, loop nest or Cranelift IR
//!   ([`print_kernels`]: `relayc build --emit schedule|kernels|clif|asm`, `ir-tests/kernels/`);
//! - `target`: the instruction set kernels compile for — the host's, or for listings another
//!   one named by a target triple and features (`relayc build --target TRIPLE --emit asm`);
//! - `jit`: ownership of JIT-compiled code (freed when the last kernel using it drops);
//! - `packed`: [`PackedFunc`], the safe wrapper the rest of relayc calls kernels through;
//! - `cache`: compiled kernels keyed by the structural hash of the primitive function and its
//!   argument types.
//!
//! [`compile_primitive`] runs the whole chain for one primitive function.
//!
//! Every Tier 1 operator has a compute definition and compiles (`docs/design.md` §12); the VM
//! calls the kernels through [`PackedFunc::call_views_with`].

pub mod abi;
mod analysis;
mod broadcast;
pub mod cache;
pub mod codegen;
pub mod compose;
pub mod contract;
pub mod error;
pub mod host;
pub mod host_op;
pub mod jit;
pub mod listing;
pub mod loops;
pub mod lower;
pub mod math;
pub mod packed;
mod rows;
pub mod schedule;
pub mod specialize;
pub mod target;

pub use cache::{KernelCache, KernelKey};
pub use error::KernelError;
pub use listing::{
    BROADCAST_NOTE, DYNAMIC_NOTE, GENERIC_NOTE, KernelText, ROWS_NOTE, print_kernels,
    print_kernels_for,
};
pub use packed::PackedFunc;
pub use target::{Target, TargetError};

use relay_ir::{Dim, Function, NDArray, Type, TypeKind};

/// Compiles a type-checked primitive function (`Primitive=1`) into a packed function named
/// `name`: its tensor arguments are the function's parameters (tuple parameters flattened),
/// then one output per tensor leaf of its result.
pub fn compile_primitive(func: &Function, name: &str) -> Result<PackedFunc, KernelError> {
    if let Some(op) = host_op::host_op(func) {
        return host_op::compile(func, name, op?);
    }
    packed::compile(&lower_primitive(func, name)?)
}

/// Compiles primitive function `func` for arguments of the concrete types `args` (its tensor
/// arguments in call order, tuple parameters flattened): a function with `?` dimensions in its
/// parameter types is first specialized to them ([`specialize::specialize`]), then compiled
/// like [`compile_primitive`]. The arguments are checked against the parameters either way; a
/// mismatch is a [`KernelError::Call`] naming the parameter.
pub fn compile_primitive_for(
    func: &Function,
    name: &str,
    args: &[Type],
) -> Result<PackedFunc, KernelError> {
    let specialized = specialize::specialize_named(func, args, name)?;
    compile_primitive(&specialized, name)
}

/// The one kernel of a primitive function with `?` dimensions that serves arguments of every
/// shape, its outputs shaped by [`PackedFunc::output_shapes`]: when the kernel library
/// computes it whole ([`host_op`]: a softmax, a matrix product, a copy, a reduction), or when
/// its `?` dimensions are rows it computes independently (`rows`: loop nests compiled once
/// for chunks of rows), or when its operators broadcast elementwise (`broadcast`: loop nests
/// compiled once for spans of the innermost dimension); `None` for a static function and for
/// one that is specialized per shape ([`compile_primitive_for`]).
pub fn compile_generic(func: &Function, name: &str) -> Option<Result<PackedFunc, KernelError>> {
    if !is_dynamic(func) {
        return None;
    }
    match host_op::host_op(func) {
        Some(Ok(op)) => Some(host_op::compile(func, name, op)),
        Some(Err(e)) => Some(Err(e)),
        None => rows::compile(func, name).or_else(|| broadcast::compile(func, name)),
    }
}

/// Whether a primitive function has a `?` dimension in a parameter type or its result type:
/// it compiles only once specialized to concrete argument types ([`compile_primitive_for`]).
pub fn is_dynamic(func: &Function) -> bool {
    func.params
        .iter()
        .filter_map(|p| p.checked_type().or(p.ty()))
        .chain(func.body.checked_type().or(func.ret_type.as_ref()))
        .any(specialize::has_dynamic_dim)
}

/// The decisions lowering made for a type-checked primitive function (`Primitive=1`), named
/// `name`: its stages, loops and GEMMs ([`schedule::Schedule`]), what `relayc build --emit
/// schedule` prints.
pub fn schedule_primitive(func: &Function, name: &str) -> Result<schedule::Schedule, KernelError> {
    Ok(schedule::Schedule::of(&lower_primitive(func, name)?))
}

/// Lowers a type-checked primitive function and checks its loop nest with the verifier
/// ([`loops::verify`]) whatever the build: what `relayc build --verify-each` runs on every
/// static kernel ([`lower_primitive`] verifies only in debug builds).
pub fn verify_primitive(func: &Function, name: &str) -> Result<(), KernelError> {
    if let Some(op) = host_op::host_op(func) {
        return op.map(|_| ());
    }
    let composed = compose::compose(func).map_err(|e| e.into_kernel_error(name))?;
    loops::verify(&lower_composed(name, &composed)?)
}

/// The loop nest of a type-checked primitive function (`Primitive=1`), named `name`: what
/// `relayc build --emit kernels` prints and codegen compiles.
pub fn lower_primitive(func: &Function, name: &str) -> Result<loops::LoopFunc, KernelError> {
    let composed = compose::compose(func).map_err(|e| e.into_kernel_error(name))?;
    let func = lower_composed(name, &composed)?;
    if cfg!(debug_assertions) {
        loops::verify(&func)?;
    }
    Ok(func)
}

/// The kernel pipeline after composition, run one way: the schedule plans the kernel
/// ([`schedule::Plan`]) and lowering carries the plan out. When lowering meets a reduction it
/// cannot inline, the schedule revises its plan with that reduction in a buffer
/// ([`schedule::Plan::materializing`]) and lowering starts again, at most once per tensor.
fn lower_composed(
    name: &str,
    composed: &compose::Composed,
) -> Result<loops::LoopFunc, KernelError> {
    let planned = |plan: Result<schedule::Plan, schedule::PlanError>| {
        plan.map_err(|error| match error {
            schedule::PlanError::Malformed(message) => KernelError::Malformed {
                kernel: name.to_owned(),
                message,
            },
            schedule::PlanError::Unschedulable(t) => KernelError::Unschedulable {
                kernel: name.to_owned(),
                tensor: t.name.clone(),
            },
        })
    };
    let mut plan = planned(schedule::Plan::of(composed))?;
    loop {
        match lower::lower(name, composed, &plan) {
            Ok(func) => return Ok(func),
            Err(lower::Lowering::Failed(error)) => return Err(error),
            Err(lower::Lowering::NeedsBuffer(t)) => {
                plan = planned(plan.materializing(composed, t))?;
            }
        }
    }
}

/// The kernel name of a primitive function, as TVM names them: `fused_` and the operators it
/// calls in order (dots become underscores; at most four, then `_etc`), then the first eight
/// hex digits of its `hash` attribute when it has one (`fused_nn_dense_add_nn_relu_1f2e3d4c`).
pub fn kernel_name(func: &Function) -> String {
    let mut ops: Vec<String> = Vec::new();
    call_ops(&func.body, &mut ops);
    let mut name = String::from("fused");
    for op in ops.iter().take(4) {
        name.push('_');
        name.push_str(op);
    }
    if ops.len() > 4 {
        name.push_str("_etc");
    }
    if let Some(relay_ir::AttrValue::Str(h)) = func.attrs.get("hash") {
        name.push('_');
        name.extend(h.chars().take(8));
    }
    name
}

/// Every distinct primitive function (`Primitive=1`) of a type-checked module, in the order
/// first met (global functions in order, each depth first), with its [`kernel_name`] (made
/// unique with a `_1`, `_2`, ... suffix). Structurally equal primitives are listed once.
pub fn primitive_functions(module: &relay_ir::Module) -> Vec<(String, Function)> {
    fn walk(e: &relay_ir::Expr, out: &mut Vec<Function>) {
        relay_ir::ensure_sufficient_stack(|| {
            if let relay_ir::ExprKind::Function(f) = e.kind()
                && relay_ir::visit::is_primitive(f)
            {
                out.push(f.clone());
                return;
            }
            relay_ir::visit::for_each_child(e, |c| walk(c, out));
        });
    }
    let mut found = Vec::new();
    for g in &module.functions {
        walk(&g.func.body, &mut found);
    }
    let mut seen: Vec<(u64, relay_ir::Expr)> = Vec::new();
    let mut names: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut out = Vec::new();
    for f in found {
        let e = relay_ir::Expr::new(relay_ir::ExprKind::Function(f.clone()), f.body.span());
        let h = relay_ir::structural::structural_hash(&e);
        if seen
            .iter()
            .any(|(k, o)| *k == h && relay_ir::structural::structural_eq(o, &e))
        {
            continue;
        }
        seen.push((h, e));
        let base = kernel_name(&f);
        let n = names.entry(base.clone()).or_insert(0);
        let name = if *n == 0 { base } else { format!("{base}_{n}") };
        *n += 1;
        out.push((name, f));
    }
    out
}

/// The operators `e` calls, arguments before their calls, with dots as underscores.
fn call_ops(e: &relay_ir::Expr, out: &mut Vec<String>) {
    relay_ir::ensure_sufficient_stack(|| {
        relay_ir::visit::for_each_child(e, |c| call_ops(c, out));
        if let relay_ir::ExprKind::Call { callee, .. } = e.kind()
            && let relay_ir::ExprKind::Op(op) = callee.kind()
        {
            out.push(op.name.replace('.', "_"));
        }
    });
}

/// The dimensions of a tensor type whose every dimension is known.
pub fn static_shape(ty: &Type) -> Option<Vec<i64>> {
    match ty.kind() {
        TypeKind::Tensor { shape, .. } => shape
            .iter()
            .map(|d| match d {
                Dim::Known(n) => Some(*n),
                Dim::Any => None,
            })
            .collect(),
        _ => None,
    }
}

/// Zero-filled arrays for the outputs of `func`'s kernel: one per tensor leaf of its result
/// type, depth first.
pub fn output_arrays(func: &Function) -> Result<Vec<NDArray>, KernelError> {
    let malformed = |message: String| KernelError::Lower { message };
    let ty = func
        .body
        .checked_type()
        .or(func.ret_type.as_ref())
        .ok_or_else(|| malformed("the primitive function's result type is unknown".into()))?;
    let mut leaves = Vec::new();
    let mut stack = vec![ty];
    while let Some(t) = stack.pop() {
        match t.kind() {
            TypeKind::Tuple(fields) => stack.extend(fields.iter().rev()),
            TypeKind::Tensor { dtype, .. } => {
                let shape = static_shape(t)
                    .ok_or_else(|| malformed(format!("the result type `{t}` is dynamic")))?;
                leaves.push(NDArray::zeros(*dtype, &shape).map_err(|e| malformed(e.to_string()))?);
            }
            _ => {
                return Err(malformed(format!(
                    "the result type `{t}` is not made of tensors"
                )));
            }
        }
    }
    Ok(leaves)
}
