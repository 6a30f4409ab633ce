//! Relay values other than tensors, in Python: tuples are Python tuples; ADT values are
//! `relayc.ADT` (constructor name, tag, fields); references are `relayc.Ref` (the cell, shared
//! with the VM: `.value` reads it now); closures are `relayc.Closure`. Each keeps the VM's
//! value, so it can be passed back as an argument unchanged.

use std::sync::Arc;

use numpy::PyUntypedArray;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use relay::ir::{Module, Type, TypeKind};
use relay::{AdtValue, Value};

use crate::convert::{numpy_of, tensor_from, tuple_of};
use crate::errors::{Stage, usage};

/// An ADT value (`Cons(1f, Nil)`): its constructor's name, its tag (the constructor's position
/// in the type definition) and its fields, converted as results are. It keeps the VM's value
/// so that it can be passed back unchanged; the arrays among its fields are therefore
/// read-only views of that value.
#[pyclass(module = "relayc", frozen)]
#[allow(clippy::upper_case_acronyms)]
pub struct ADT {
    /// The constructor's name (`#TAG` when the result type is not known).
    #[pyo3(get)]
    constructor: String,
    /// The constructor's tag.
    #[pyo3(get)]
    tag: u32,
    /// The fields.
    #[pyo3(get)]
    fields: Py<PyTuple>,
    value: Value,
}

#[pymethods]
impl ADT {
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let fields = self.fields.bind(py);
        if fields.is_empty() {
            return Ok(self.constructor.clone());
        }
        let parts: Vec<String> = fields
            .iter()
            .map(|f| f.repr().map(|r| r.to_string()))
            .collect::<PyResult<_>>()?;
        Ok(format!("{}({})", self.constructor, parts.join(", ")))
    }

    fn __len__(&self, py: Python<'_>) -> usize {
        self.fields.bind(py).len()
    }

    fn __getitem__<'py>(&self, py: Python<'py>, i: isize) -> PyResult<Bound<'py, PyAny>> {
        self.fields.bind(py).as_any().get_item(i)
    }
}

/// A reference cell (`ref(v)`) a run returned. `.value` is its content now (a later run that
/// writes the cell changes it); passed back as an argument, it is the same cell.
#[pyclass(module = "relayc", frozen)]
pub struct Ref {
    cell: Value,
    inner: Option<Type>,
    types: Arc<Module>,
}

#[pymethods]
impl Ref {
    /// The cell's content now.
    #[getter]
    fn value<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let Value::Ref(cell) = &self.cell else {
            unreachable!("a Ref holds a reference")
        };
        let content = cell.lock().unwrap_or_else(|e| e.into_inner()).clone();
        to_python(py, content, self.inner.as_ref(), &self.types)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        Ok(format!("relayc.Ref({})", self.value(py)?.repr()?))
    }
}

/// A closure a run returned: pass it back as an argument (to a function taking a function) to
/// a VM of the same executable.
#[pyclass(module = "relayc", frozen)]
pub struct Closure {
    value: Value,
    /// The executable that made it (its type definitions stand for it): a closure names a
    /// function of its own executable only.
    origin: Arc<Module>,
}

#[pymethods]
impl Closure {
    fn __repr__(&self) -> &'static str {
        "<relayc.Closure>"
    }
}

/// A result value in Python. `ty` (the value's type, when known) names ADT constructors.
pub(crate) fn to_python<'py>(
    py: Python<'py>,
    value: Value,
    ty: Option<&Type>,
    types: &Arc<Module>,
) -> PyResult<Bound<'py, PyAny>> {
    relay::ir::ensure_sufficient_stack(|| match value {
        Value::Tensor(array) => numpy_of(py, array),
        Value::Tuple(mut fields) => {
            let tys = field_types(ty, fields.len());
            // Fields taken out of a tuple nothing else holds leave their tensors held only by
            // the arrays made over them, which are then writeable.
            let owned: Vec<Value> = match Arc::get_mut(&mut fields) {
                Some(unique) => unique
                    .iter_mut()
                    .map(|f| std::mem::replace(f, Value::Tuple(Vec::new().into())))
                    .collect(),
                None => fields.to_vec(),
            };
            let items = owned
                .into_iter()
                .zip(tys)
                .map(|(f, t)| to_python(py, f, t.as_ref(), types))
                .collect::<PyResult<Vec<_>>>()?;
            tuple_of(py, items)
        }
        Value::Adt(ref adt) => adt_to_python(py, adt, value.clone(), ty, types),
        Value::Ref(_) => {
            let inner = ty.and_then(|t| match t.kind() {
                TypeKind::Ref(inner) => Some(inner.clone()),
                _ => None,
            });
            let cell = Ref {
                cell: value,
                inner,
                types: types.clone(),
            };
            Ok(Bound::new(py, cell)?.into_any())
        }
        Value::Closure(_) => {
            let closure = Closure {
                value,
                origin: types.clone(),
            };
            Ok(Bound::new(py, closure)?.into_any())
        }
        Value::Storage(_) => Err(usage(
            py,
            Stage::Run,
            "the result is a raw storage (`memory.alloc_storage`), which has no Python value",
        )),
    })
}

fn adt_to_python<'py>(
    py: Python<'py>,
    adt: &AdtValue,
    value: Value,
    ty: Option<&Type>,
    types: &Arc<Module>,
) -> PyResult<Bound<'py, PyAny>> {
    let resolved = ty.and_then(|t| types.constructor_of(t, adt.tag));
    let (constructor, tys) = match resolved {
        Some((name, tys)) if tys.len() == adt.fields.len() => {
            (name, tys.into_iter().map(Some).collect())
        }
        Some((name, _)) => (name, vec![None; adt.fields.len()]),
        None => (format!("#{}", adt.tag), vec![None; adt.fields.len()]),
    };
    let fields = adt
        .fields
        .iter()
        .zip(tys)
        .map(|(f, t): (&Value, Option<Type>)| to_python(py, f.clone(), t.as_ref(), types))
        .collect::<PyResult<Vec<_>>>()?;
    let adt = ADT {
        constructor,
        tag: adt.tag,
        fields: PyTuple::new(py, fields)?.unbind(),
        value,
    };
    Ok(Bound::new(py, adt)?.into_any())
}

/// The field types of a tuple type of `n` fields, or `None`s.
fn field_types(ty: Option<&Type>, n: usize) -> Vec<Option<Type>> {
    match ty.map(Type::kind) {
        Some(TypeKind::Tuple(ts)) if ts.len() == n => ts.iter().cloned().map(Some).collect(),
        _ => vec![None; n],
    }
}

/// An argument from Python, for a parameter of type `ty` (when known), to a VM of the
/// executable whose type definitions are `exe`. `what` names it in errors.
pub(crate) fn from_python(
    obj: &Bound<'_, PyAny>,
    ty: Option<&Type>,
    exe: &Arc<Module>,
    what: &dyn Fn() -> String,
) -> PyResult<Value> {
    if obj.cast::<PyUntypedArray>().is_ok() {
        // The common case first.
        return Ok(Value::Tensor(tensor_from(obj, ty, what)?));
    }
    if let Ok(adt) = obj.cast::<ADT>() {
        return Ok(adt.get().value.clone());
    }
    if let Ok(cell) = obj.cast::<Ref>() {
        return Ok(cell.get().cell.clone());
    }
    if let Ok(closure) = obj.cast::<Closure>() {
        let closure = closure.get();
        if !Arc::ptr_eq(&closure.origin, exe) {
            return Err(usage(
                obj.py(),
                Stage::Run,
                format!(
                    "input {}: a closure made by another executable (closures run only on \
                     VMs of the executable that made them)",
                    what()
                ),
            ));
        }
        return Ok(closure.value.clone());
    }
    if let Ok(tuple) = obj.cast::<PyTuple>()
        && !matches!(ty.map(Type::kind), Some(TypeKind::Tensor { .. }))
    {
        let tys = field_types(ty, tuple.len());
        let fields = tuple
            .iter()
            .zip(tys)
            .enumerate()
            .map(|(i, (f, t))| from_python(&f, t.as_ref(), exe, &|| format!("{}[{i}]", what())))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Value::Tuple(fields.into()));
    }
    Ok(Value::Tensor(tensor_from(obj, ty, what)?))
}
