//! The memory and VM dialect (`docs/passes.md`, "Explicit allocation"): `memory.alloc_storage`,
//! `memory.alloc_tensor`, `memory.kill`, `vm.invoke_tvm_op`, `vm.shape_of`, `vm.shape_func` and
//! `vm.reshape_tensor`, in TVM 0.12's form, with their type relations and evaluations.
//!
//! Storage has the opaque type `Storage` (an `extern type Storage` the module declares). The
//! evaluations make real byte buffers and tensor views into them (`relay_runtime::Storage`,
//! `NDArray::view`), so a wrong memory plan gives wrong results. `vm.invoke_tvm_op` (which calls
//! a function value) and `memory.kill` (which unbinds a variable) need the executor's machinery:
//! they have no evaluation here and the interpreter runs them itself.

use relay_ir::OpError;
use std::sync::Arc;

use relay_ir::OpPattern::Opaque;
use relay_ir::{AttrDefault as D, AttrKind as K, OpSchema};
use relay_ir::{Attrs, DType, Dim, NDArray, Symbol, Type, TypeKind, Value};

use crate::elementwise::SHAPE_OF_ATTRS;
use crate::support::{
    attr_dtype, attr_ints, attr_opt_ints, element_count, inputs_n, required_dtype, shape_text,
    tensor, tensor_type,
};
use crate::{field, nullable, op, plain, required};

/// What a type relation returns.
type RelResult = Result<Type, OpError>;

/// What a reference evaluation returns.
type EvalResult = Result<Value, OpError>;

/// The name of the storage type.
pub const STORAGE_TYPE: &str = "Storage";

pub(crate) static OPS: &[OpSchema] = &[
    op(
        "memory.alloc_storage",
        &["size", "alignment"],
        "relay.attrs.AllocStorageAttrs",
        &[
            field("dtype", K::DType, D::Str("float32")),
            nullable("virtual_device", K::Any),
        ],
    )
    .with(Opaque, alloc_storage_rel, alloc_storage_eval),
    op(
        "memory.alloc_tensor",
        &["storage", "offset", "shape"],
        "relay.attrs.AllocTensorAttrs",
        &[
            field("dtype", K::DType, D::Str("float32")),
            nullable("const_shape", K::Any),
            nullable("assert_shape", K::IntArray),
        ],
    )
    .with(Opaque, alloc_tensor_rel, alloc_tensor_eval),
    typed_only(plain("memory.kill", &["to_free"]), kill_rel),
    // TVM copies the primitive function's dictionary attributes onto `vm.invoke_tvm_op`; its
    // registration declares no attrs type.
    typed_only(
        plain("vm.invoke_tvm_op", &["func", "inputs", "outputs"]),
        invoke_tvm_op_rel,
    ),
    op(
        "vm.shape_of",
        &["tensor"],
        "relay.attrs.ShapeOfAttrs",
        SHAPE_OF_ATTRS,
    )
    .with(Opaque, shape_of_rel, shape_of_eval),
    op(
        "vm.shape_func",
        &["func", "inputs", "outputs"],
        "relay.attrs.ShapeFuncAttrs",
        &[required("is_input", K::IntArray)],
    ),
    op(
        "vm.reshape_tensor",
        &["data", "shape"],
        "relay.attrs.ReshapeTensorAttrs",
        &[required("newshape", K::IntArray)],
    )
    .with(Opaque, reshape_tensor_rel, reshape_tensor_eval),
];

/// An operator with a type relation but no evaluation here (the executor runs it).
const fn typed_only(schema: OpSchema, relation: relay_ir::RelationFn) -> OpSchema {
    OpSchema {
        pattern: Opaque,
        relation: Some(relation),
        ..schema
    }
}

/// The type `Storage`.
pub fn storage_type() -> Type {
    Type::from_kind(TypeKind::Adt {
        name: Symbol::intern(STORAGE_TYPE),
        args: Vec::new(),
    })
}

/// Whether `t` is the type `Storage`.
pub fn is_storage_type(t: &Type) -> bool {
    matches!(t.kind(), TypeKind::Adt { name, args } if name.as_str() == STORAGE_TYPE && args.is_empty())
}

// ----- Type relations -----

/// Checks that `t` is an `int64` scalar.
fn int64_scalar(t: &Type, what: &str) -> Result<(), OpError> {
    match tensor_type(t, what)? {
        ([], DType::I64) => Ok(()),
        _ => Err(OpError::dtype(format!(
            "{what} must be an int64 scalar, got `{t}`"
        ))),
    }
}

/// The length of a rank-1 `int64` shape tensor (`None` when it is `?`).
fn shape_tensor(t: &Type, what: &str) -> Result<Option<usize>, OpError> {
    match tensor_type(t, what)? {
        ([Dim::Known(n)], DType::I64) => Ok(Some(*n as usize)),
        ([Dim::Any], DType::I64) => Ok(None),
        _ => Err(OpError::dtype(format!(
            "{what} must be a rank-1 int64 tensor, got `{t}`"
        ))),
    }
}

fn alloc_storage_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [size, alignment] = inputs_n(inputs)?;
    int64_scalar(size, "the size")?;
    int64_scalar(alignment, "the alignment")?;
    attr_dtype(attrs, "dtype")?;
    Ok(storage_type())
}

/// The static shape of `memory.alloc_tensor`: its `assert_shape`.
fn assert_shape(attrs: &Attrs) -> Result<Vec<i64>, OpError> {
    let shape = attr_opt_ints(attrs, "assert_shape")?.ok_or_else(|| {
        OpError::attribute(
            "assert_shape",
            "attribute `assert_shape` must be set: it gives the tensor's static shape",
        )
    })?;
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        return Err(OpError::attribute(
            "assert_shape",
            format!("`assert_shape` must have non-negative dimensions, got {d}"),
        ));
    }
    Ok(shape)
}

fn alloc_tensor_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [storage, offset, shape] = inputs_n(inputs)?;
    if !is_storage_type(storage) {
        return Err(OpError::type_error(format!(
            "the storage must be of type `{STORAGE_TYPE}`, got `{storage}`"
        )));
    }
    int64_scalar(offset, "the offset")?;
    let rank = shape_tensor(shape, "the shape")?;
    let asserted = assert_shape(attrs)?;
    if let Some(rank) = rank
        && rank != asserted.len()
    {
        return Err(OpError::attribute(
            "assert_shape",
            format!(
                "`assert_shape` has {} dimensions, but the shape tensor `{shape}` has {rank}",
                asserted.len()
            ),
        ));
    }
    Ok(Type::tensor(&asserted, required_dtype(attrs)?))
}

fn kill_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    inputs_n::<1>(inputs)?;
    Ok(Type::tuple(Vec::new()))
}

/// The results of a function of result type `ret`: the fields of a tuple, else `ret` alone.
fn results(ret: &Type) -> Vec<Type> {
    match ret.kind() {
        TypeKind::Tuple(fields) => fields.clone(),
        _ => vec![ret.clone()],
    }
}

fn invoke_tvm_op_rel(inputs: &[Type], _: &Attrs) -> RelResult {
    let [func, args, outs] = inputs_n(inputs)?;
    let TypeKind::Func(f) = func.kind() else {
        return Err(OpError::type_error(format!(
            "the callee must be a function, got `{func}`"
        )));
    };
    if !f.type_params.is_empty() {
        return Err(OpError::type_error(format!(
            "the callee must not be polymorphic, got `{func}`"
        )));
    }
    let TypeKind::Tuple(args) = args.kind() else {
        return Err(OpError::type_error(format!(
            "the inputs must be a tuple, got `{args}`"
        )));
    };
    if args.len() != f.params.len() {
        return Err(OpError::shape(format!(
            "the callee takes {} arguments, but the inputs tuple has {} fields",
            f.params.len(),
            args.len()
        )));
    }
    // An argument may know dimensions the parameter leaves `?` (the kernel takes any).
    for (i, (arg, param)) in args.iter().zip(&f.params).enumerate() {
        if !relay_ir::type_refines(arg, param) {
            return Err(OpError::type_error(format!(
                "input {i} has type `{arg}`, but the callee's parameter {i} has type `{param}`"
            )));
        }
    }
    let TypeKind::Tuple(outs) = outs.kind() else {
        return Err(OpError::type_error(format!(
            "the outputs must be a tuple, got `{outs}`"
        )));
    };
    let expected = results(&f.ret);
    if outs.len() != expected.len() {
        return Err(OpError::shape(format!(
            "the callee returns `{}` ({} tensors), but the outputs tuple has {} fields",
            f.ret,
            expected.len(),
            outs.len()
        )));
    }
    for (i, (out, want)) in outs.iter().zip(&expected).enumerate() {
        tensor_type(want, &format!("result {i} of the callee"))?;
        if !relay_ir::type_eq(out, want) {
            return Err(OpError::type_error(format!(
                "output {i} has type `{out}`, but the callee's result {i} has type `{want}`"
            )));
        }
    }
    Ok(Type::tuple(Vec::new()))
}

fn shape_of_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [data] = inputs_n(inputs)?;
    let (shape, _) = tensor_type(data, "the input")?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(DType::I64);
    Ok(Type::tensor(&[shape.len() as i64], dtype))
}

/// `newshape` of `vm.reshape_tensor` as dimensions: `-1` is `?`.
fn new_shape(attrs: &Attrs) -> Result<Vec<Dim>, OpError> {
    attr_ints(attrs, "newshape")?
        .into_iter()
        .map(|d| match d {
            -1 => Ok(Dim::Any),
            d if d >= 0 => Ok(Dim::Known(d)),
            d => Err(OpError::attribute(
                "newshape",
                format!("`newshape` dimensions must be non-negative or -1, got {d}"),
            )),
        })
        .collect()
}

fn reshape_tensor_rel(inputs: &[Type], attrs: &Attrs) -> RelResult {
    let [data, shape] = inputs_n(inputs)?;
    let (dims, dtype) = tensor_type(data, "the data")?;
    let rank = shape_tensor(shape, "the shape")?;
    let newshape = new_shape(attrs)?;
    if let Some(rank) = rank
        && rank != newshape.len()
    {
        return Err(OpError::attribute(
            "newshape",
            format!(
                "`newshape` has {} dimensions, but the shape tensor `{shape}` has {rank}",
                newshape.len()
            ),
        ));
    }
    if let (Some(from), Some(to)) = (element_count(dims), element_count(&newshape))
        && from != to
    {
        return Err(OpError::shape(format!(
            "cannot reshape `{data}` ({from} elements) to {} ({to} elements)",
            shape_text(&newshape)
        )));
    }
    Ok(tensor(newshape, dtype))
}

// ----- Evaluation -----

/// Argument `i` as a tensor.
fn arg_tensor(args: &[Value], i: usize, what: &str) -> Result<Arc<NDArray>, OpError> {
    match args.get(i) {
        Some(Value::Tensor(t)) => Ok(t.clone()),
        Some(v) => Err(OpError::type_error(format!(
            "{what} must be a tensor, got {}",
            v.kind_name()
        ))),
        None => Err(OpError::type_error(format!("missing {what}"))),
    }
}

/// Argument `i`, an integer scalar, as a non-negative `usize`.
fn arg_usize(args: &[Value], i: usize, what: &str) -> Result<usize, OpError> {
    let t = arg_tensor(args, i, what)?;
    let values = t.to_i128_vec();
    match (t.is_scalar(), values.as_slice()) {
        (true, &[v]) => usize::try_from(v)
            .map_err(|_| OpError::value(format!("{what} must be non-negative, got {v}"))),
        _ => Err(OpError::shape(format!(
            "{what} must be a scalar, got shape {:?}",
            t.shape()
        ))),
    }
}

/// Argument `i`, a rank-1 integer tensor, as a shape.
fn arg_shape(args: &[Value], i: usize, what: &str) -> Result<Vec<i64>, OpError> {
    let t = arg_tensor(args, i, what)?;
    if t.ndim() != 1 {
        return Err(OpError::shape(format!(
            "{what} must have rank 1, got shape {:?}",
            t.shape()
        )));
    }
    t.to_i128_vec()
        .into_iter()
        .map(|d| {
            i64::try_from(d).ok().filter(|&d| d >= 0).ok_or_else(|| {
                OpError::shape(format!("{what} has a negative or too large dimension {d}"))
            })
        })
        .collect()
}

fn alloc_storage_eval(args: &[Value], _: &Attrs) -> EvalResult {
    let size = arg_usize(args, 0, "the size")?;
    let alignment = arg_usize(args, 1, "the alignment")?;
    Value::storage(size, alignment).map_err(OpError::from_runtime)
}

fn alloc_tensor_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    let storage = match args.first() {
        Some(Value::Storage(s)) => s.clone(),
        Some(v) => {
            return Err(OpError::type_error(format!(
                "the storage must be a storage, got {}",
                v.kind_name()
            )));
        }
        None => return Err(OpError::type_error("missing the storage")),
    };
    let offset = arg_usize(args, 1, "the offset")?;
    let shape = arg_shape(args, 2, "the shape")?;
    if let Some(asserted) = attr_opt_ints(attrs, "assert_shape")?
        && asserted != shape
    {
        return Err(OpError::shape(format!(
            "the shape {shape:?} differs from `assert_shape` {asserted:?}"
        )));
    }
    let dtype = required_dtype(attrs)?;
    // SAFETY: the aliasing contract of `NDArray::view`. The interpreter, which runs these
    // evaluations, uses views on one thread: operator evaluations read their inputs only for
    // the duration of the call, and the one writer, `vm.invoke_tvm_op`, writes its outputs
    // (with `write_view`) after the kernel has returned and released its inputs.
    let view = unsafe { NDArray::view(storage, offset, dtype, &shape) };
    view.map(Value::tensor).map_err(OpError::from_runtime)
}

fn shape_of_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    let t = arg_tensor(args, 0, "the input")?;
    let dtype = attr_dtype(attrs, "dtype")?.unwrap_or(DType::I64);
    let dims: Vec<i128> = t.shape().iter().map(|&d| i128::from(d)).collect();
    NDArray::from_i128_slice(dtype, &[dims.len() as i64], &dims)
        .map(Value::tensor)
        .map_err(OpError::from_runtime)
}

/// The shape of `vm.reshape_tensor` for `count` elements: argument `i`, a rank-1 integer
/// tensor, whose one `-1`, if any, is inferred from the element count (numpy's rule).
fn view_shape(args: &[Value], i: usize, count: usize) -> Result<Vec<i64>, OpError> {
    let t = arg_tensor(args, i, "the shape")?;
    if t.ndim() != 1 {
        return Err(OpError::shape(format!(
            "the shape must have rank 1, got shape {:?}",
            t.shape()
        )));
    }
    let values = t.to_i128_vec();
    let mut shape = Vec::with_capacity(values.len());
    let mut inferred = None;
    for (k, &d) in values.iter().enumerate() {
        match i64::try_from(d) {
            Ok(-1) if inferred.is_none() => {
                inferred = Some(k);
                shape.push(1);
            }
            Ok(-1) => {
                return Err(OpError::shape(format!(
                    "the shape {values:?} has more than one -1"
                )));
            }
            Ok(d) if d >= 0 => shape.push(d),
            _ => {
                return Err(OpError::shape(format!(
                    "the shape has a negative or too large dimension {d}"
                )));
            }
        }
    }
    if let Some(k) = inferred {
        let known = shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?));
        match known {
            Some(known) if known > 0 && count.is_multiple_of(known) => {
                shape[k] = i64::try_from(count / known)
                    .map_err(|_| OpError::shape("the inferred dimension is too large"))?;
            }
            _ => {
                return Err(OpError::shape(format!(
                    "cannot reshape {count} elements to {values:?}"
                )));
            }
        }
    }
    Ok(shape)
}

fn reshape_tensor_eval(args: &[Value], attrs: &Attrs) -> EvalResult {
    let data = arg_tensor(args, 0, "the data")?;
    let shape = view_shape(args, 1, data.num_elements())?;
    let newshape = new_shape(attrs)?;
    let fits = shape.len() == newshape.len()
        && shape.iter().zip(&newshape).all(|(&d, n)| match n {
            Dim::Known(k) => *k == d,
            Dim::Any => true,
        });
    if !fits {
        return Err(OpError::shape(format!(
            "the shape {shape:?} does not match `newshape` {}",
            shape_text(&newshape)
        )));
    }
    let count: Option<usize> = shape
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(usize::try_from(d).ok()?));
    if count != Some(data.num_elements()) {
        return Err(OpError::shape(format!(
            "cannot reshape a tensor of shape {:?} to {shape:?}",
            data.shape()
        )));
    }
    let array = match data.storage() {
        // A view stays a view of the same bytes, as the VM's reshape does.
        // SAFETY: as in `alloc_tensor_eval`; the new view covers the same bytes as `data`.
        Some((storage, offset)) => unsafe {
            NDArray::view(storage.clone(), offset, data.dtype(), &shape)
        },
        None => NDArray::from_bytes(data.dtype(), &shape, data.as_bytes()),
    };
    array.map(Value::tensor).map_err(OpError::from_runtime)
}

#[cfg(test)]
mod tests {
    use relay_ir::AttrValue;

    use super::*;
    use crate::testing::{attrs, ints};

    fn rel(name: &str, inputs: &[Type], attrs: &Attrs) -> Result<String, String> {
        let op = crate::lookup(name).unwrap();
        (op.relation.unwrap())(inputs, attrs)
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    fn eval(name: &str, args: &[Value], attrs: &Attrs) -> EvalResult {
        let op = crate::lookup(name).unwrap();
        (op.eval.unwrap())(args, attrs)
    }

    fn i64s(shape: &[i64], v: &[i128]) -> Value {
        Value::tensor(NDArray::from_i128_slice(DType::I64, shape, v).unwrap())
    }

    fn func(params: Vec<Type>, ret: Type) -> Type {
        Type::from_kind(TypeKind::Func(relay_ir::FuncType {
            type_params: Vec::new(),
            params,
            ret,
        }))
    }

    #[test]
    fn schemas() {
        let storage = crate::lookup("memory.alloc_storage").unwrap();
        assert_eq!(storage.inputs, ["size", "alignment"]);
        assert_eq!(
            storage.field("dtype").unwrap().1.default.value(),
            Some(AttrValue::Str("float32".into()))
        );
        let vd = storage.field("virtual_device").unwrap().1;
        assert!(vd.nullable && matches!(vd.default, D::Null));
        let tensor = crate::lookup("memory.alloc_tensor").unwrap();
        for name in ["const_shape", "assert_shape"] {
            let f = tensor.field(name).unwrap().1;
            assert!(f.nullable && matches!(f.default, D::Null), "{name}");
        }
        for name in [
            "memory.alloc_storage",
            "memory.alloc_tensor",
            "memory.kill",
            "vm.invoke_tvm_op",
            "vm.shape_of",
            "vm.reshape_tensor",
        ] {
            assert!(crate::lookup(name).unwrap().relation.is_some(), "{name}");
        }
    }

    #[test]
    fn allocation_relations() {
        let i64s = Type::scalar(DType::I64);
        let a = attrs("memory.alloc_storage", &[]);
        assert_eq!(
            rel("memory.alloc_storage", &[i64s.clone(), i64s.clone()], &a),
            Ok("Storage".into())
        );
        let err = rel(
            "memory.alloc_storage",
            &[Type::scalar(DType::I32), i64s.clone()],
            &a,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("the size must be an int64 scalar"),
            "{err}"
        );

        let shape = Type::tensor(&[2], DType::I64);
        let t = attrs(
            "memory.alloc_tensor",
            &[
                ("assert_shape", ints(&[2, 3])),
                ("dtype", AttrValue::Str("int8".into())),
            ],
        );
        let inputs = [storage_type(), i64s.clone(), shape.clone()];
        assert_eq!(
            rel("memory.alloc_tensor", &inputs, &t),
            Ok("Tensor[(2, 3), int8]".into())
        );
        let err = rel(
            "memory.alloc_tensor",
            &inputs,
            &attrs("memory.alloc_tensor", &[]),
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("`assert_shape` must be set"),
            "{err}"
        );
        let err = rel(
            "memory.alloc_tensor",
            &inputs,
            &attrs("memory.alloc_tensor", &[("assert_shape", ints(&[6]))]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("has 1 dimensions"), "{err}");
        let err = rel(
            "memory.alloc_tensor",
            &[Type::scalar(DType::F32), i64s.clone(), shape],
            &t,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("must be of type `Storage`"),
            "{err}"
        );
    }

    #[test]
    fn invoke_relation() {
        let t23 = Type::tensor(&[2, 3], DType::F32);
        let t3 = Type::tensor(&[3], DType::F32);
        let f = func(vec![t23.clone(), t3.clone()], t23.clone());
        let none = Attrs::empty();
        let ins = Type::tuple(vec![t23.clone(), t3.clone()]);
        let outs = Type::tuple(vec![t23.clone()]);
        assert_eq!(
            rel("vm.invoke_tvm_op", &[f.clone(), ins.clone(), outs], &none),
            Ok("()".into())
        );
        let err = rel(
            "vm.invoke_tvm_op",
            &[f.clone(), ins.clone(), Type::tuple(vec![t3.clone()])],
            &none,
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("output 0 has type `Tensor[(3), float32]`"),
            "{err}"
        );
        let err = rel(
            "vm.invoke_tvm_op",
            &[
                f.clone(),
                Type::tuple(vec![t23.clone()]),
                Type::tuple(vec![t23.clone()]),
            ],
            &none,
        )
        .unwrap_err();
        assert!(err.to_string().contains("takes 2 arguments"), "{err}");
        let err = rel(
            "vm.invoke_tvm_op",
            &[
                f,
                Type::tuple(vec![t3.clone(), t3.clone()]),
                Type::tuple(vec![t23.clone()]),
            ],
            &none,
        )
        .unwrap_err();
        assert!(err.to_string().contains("input 0 has type"), "{err}");
        let pair = func(vec![], Type::tuple(vec![t3.clone(), t23.clone()]));
        assert_eq!(
            rel(
                "vm.invoke_tvm_op",
                &[
                    pair.clone(),
                    Type::tuple(vec![]),
                    Type::tuple(vec![t3.clone(), t23.clone()])
                ],
                &none
            ),
            Ok("()".into())
        );
        let err = rel(
            "vm.invoke_tvm_op",
            &[pair, Type::tuple(vec![]), Type::tuple(vec![t3])],
            &none,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("the outputs tuple has 1 fields"),
            "{err}"
        );
    }

    #[test]
    fn shape_relations() {
        let t = Type::tensor(&[2, 3], DType::F32);
        assert_eq!(
            rel(
                "vm.shape_of",
                std::slice::from_ref(&t),
                &attrs("vm.shape_of", &[])
            ),
            Ok("Tensor[(2), int64]".into())
        );
        let a = attrs("vm.reshape_tensor", &[("newshape", ints(&[3, 2]))]);
        let shape = Type::tensor(&[2], DType::I64);
        assert_eq!(
            rel("vm.reshape_tensor", &[t.clone(), shape.clone()], &a),
            Ok("Tensor[(3, 2), float32]".into())
        );
        let a = attrs("vm.reshape_tensor", &[("newshape", ints(&[4, 2]))]);
        assert!(rel("vm.reshape_tensor", &[t.clone(), shape.clone()], &a).is_err());
        let a = attrs("vm.reshape_tensor", &[("newshape", ints(&[-1, 2]))]);
        assert_eq!(
            rel("vm.reshape_tensor", &[t, shape], &a),
            Ok("Tensor[(?, 2), float32]".into())
        );
    }

    #[test]
    fn views_share_storage() {
        let storage = eval(
            "memory.alloc_storage",
            &[i64s(&[], &[24]), i64s(&[], &[64])],
            &attrs("memory.alloc_storage", &[]),
        )
        .unwrap();
        assert!(matches!(&storage, Value::Storage(s) if s.size() == 24));
        let a = attrs("memory.alloc_tensor", &[("assert_shape", ints(&[2, 3]))]);
        let args = [storage.clone(), i64s(&[], &[0]), i64s(&[2], &[2, 3])];
        let x = eval("memory.alloc_tensor", &args, &a).unwrap();
        let y = eval("memory.alloc_tensor", &args, &a).unwrap();
        let (x, y) = (x.as_tensor().unwrap(), y.as_tensor().unwrap());
        let bytes: Vec<u8> = (0..24).collect();
        // SAFETY: no slice of the storage is alive.
        unsafe { x.write_view(&bytes).unwrap() };
        assert_eq!(y.as_bytes(), &bytes[..]);
        let r = eval(
            "vm.reshape_tensor",
            &[Value::Tensor(y.clone()), i64s(&[2], &[3, 2])],
            &attrs("vm.reshape_tensor", &[("newshape", ints(&[3, 2]))]),
        )
        .unwrap();
        let r = r.as_tensor().unwrap();
        assert!(r.is_view() && r.shape() == [3, 2]);
        assert_eq!(r.as_bytes(), &bytes[..]);
        // A `-1` is inferred from the element count.
        let minus = |shape: &[i128], newshape: &[i64]| {
            eval(
                "vm.reshape_tensor",
                &[Value::Tensor(y.clone()), i64s(&[shape.len() as i64], shape)],
                &attrs("vm.reshape_tensor", &[("newshape", ints(newshape))]),
            )
        };
        let inferred = minus(&[-1, 2], &[-1, 2]).unwrap();
        assert_eq!(inferred.as_tensor().unwrap().shape(), [3, 2]);
        for (shape, newshape, why) in [
            (&[-1, -1][..], &[-1, -1][..], "more than one -1"),
            (&[-1, 4], &[-1, 4], "cannot reshape 6 elements"),
            (&[-1, 0], &[-1, 0], "cannot reshape 6 elements"),
            (&[-2, 3], &[-1, 3], "negative"),
            (&[-1, 3], &[3, 2], "does not match"),
        ] {
            let err = minus(shape, newshape).unwrap_err();
            assert!(err.to_string().contains(why), "{shape:?}: {err}");
        }

        // Out of bounds, a wrong shape and a bad alignment are errors.
        let far = [storage.clone(), i64s(&[], &[4]), i64s(&[2], &[2, 3])];
        assert!(eval("memory.alloc_tensor", &far, &a).is_err());
        let wrong = [storage, i64s(&[], &[0]), i64s(&[2], &[3, 2])];
        let err = eval("memory.alloc_tensor", &wrong, &a).unwrap_err();
        assert!(
            err.to_string().contains("differs from `assert_shape`"),
            "{err}"
        );
        assert!(
            eval(
                "memory.alloc_storage",
                &[i64s(&[], &[8]), i64s(&[], &[3])],
                &Attrs::empty()
            )
            .is_err()
        );
        assert!(
            eval(
                "memory.alloc_storage",
                &[i64s(&[], &[-8]), i64s(&[], &[64])],
                &Attrs::empty()
            )
            .is_err()
        );
        let s = eval(
            "vm.shape_of",
            &[Value::Tensor(r.clone())],
            &attrs("vm.shape_of", &[]),
        )
        .unwrap();
        assert_eq!(s.as_tensor().unwrap().to_i128_vec(), [3, 2]);
    }
}
