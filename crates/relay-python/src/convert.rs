//! Tensors between numpy and the VM, without copies where the memory allows.
//!
//! In: a C-contiguous numpy array of a dtype relayc has, whose data is 64-byte aligned (what
//! every kernel reads), becomes an `NDArray` over the array's own memory, keeping the array
//! alive ([`relay::NDArray::from_foreign`]); any other array is copied once (made contiguous,
//! native byte order, aligned). An object with `__dlpack__` (a PyTorch tensor, a JAX array) is
//! taken through `numpy.from_dlpack`, which shares its memory. Python scalars and lists become
//! arrays of the parameter's dtype.
//!
//! Out: a result tensor becomes a numpy array over the VM's storage (no copy), whose base
//! object holds the storage; it is writeable when nothing else holds the tensor (a result that
//! is one of the executable's constants, or an input, is read-only). numpy's own `__dlpack__`
//! then hands it on to other libraries, still without a copy.

use std::ffi::c_void;
use std::ptr::NonNull;
use std::sync::Arc;

use numpy::npyffi::{
    self, NPY_ARRAY_ALIGNED, NPY_ARRAY_C_CONTIGUOUS, NPY_ARRAY_WRITEABLE, NPY_TYPES, NpyTypes,
    PY_ARRAY_API, npy_intp,
};
use numpy::{PyArrayDescr, PyArrayDescrMethods, PyUntypedArray, PyUntypedArrayMethods};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use relay::ir::{Type, TypeKind};
use relay::{ALIGNMENT, DType, NDArray};

use crate::errors::{Stage, usage};

/// Keeps a result tensor's memory alive: the base object of the numpy array over it.
#[pyclass(module = "relayc", frozen, name = "_Storage")]
struct Storage {
    _array: Arc<NDArray>,
}

/// Keeps an input array alive while a VM reads it in place.
struct Borrowed {
    _array: Py<PyAny>,
}

/// A numpy array of `shape` and `dtype` (any relayc dtype name, default float32) whose data is
/// 64-byte aligned and zero-filled: inputs made with it are read by the VM in place, never
/// copied (numpy's own allocations are 16-byte aligned, and are copied once per call).
///
/// >>> x = relayc.empty((1, 3, 224, 224))
/// >>> x[...] = image
#[pyfunction]
#[pyo3(signature = (shape, dtype = "float32"))]
pub fn empty<'py>(
    py: Python<'py>,
    shape: &Bound<'py, PyAny>,
    dtype: &str,
) -> PyResult<Bound<'py, PyAny>> {
    let shape: Vec<i64> = match shape.extract::<i64>() {
        Ok(n) => vec![n],
        Err(_) => shape.extract()?,
    };
    let dtype = DType::parse(dtype)
        .ok_or_else(|| usage(py, Stage::Usage, format!("unknown dtype `{dtype}`")))?;
    let array = NDArray::zeros(dtype, &shape)
        .map_err(|e| usage(py, Stage::Usage, format!("cannot make the array: {e}")))?;
    numpy_of(py, Arc::new(array))
}

/// A numpy array over `array`'s memory, writeable when `array` is held by nothing else.
pub(crate) fn numpy_of(py: Python<'_>, array: Arc<NDArray>) -> PyResult<Bound<'_, PyAny>> {
    let descr = descr_of(py, array.dtype())?;
    let writeable = Arc::strong_count(&array) == 1;
    let mut dims: Vec<npy_intp> = array.shape().iter().map(|&d| d as npy_intp).collect();
    let data = array.as_bytes().as_ptr().cast_mut().cast::<c_void>();
    let holder = Bound::new(py, Storage { _array: array })?;
    let mut flags = NPY_ARRAY_C_CONTIGUOUS | NPY_ARRAY_ALIGNED;
    if writeable {
        flags |= NPY_ARRAY_WRITEABLE;
    }
    // SAFETY: `descr` is a valid descriptor (the reference is stolen by the call); `dims` has
    // `nd` entries; null strides mean C-contiguous; `data` points to the tensor's bytes, which
    // `holder` keeps alive for as long as the array (its base object) lives.
    unsafe {
        let subtype = npyffi::get_type_object(py, NpyTypes::PyArray_Type);
        let raw = PY_ARRAY_API.PyArray_NewFromDescr(
            py,
            subtype,
            descr.into_dtype_ptr(),
            dims.len() as i32,
            dims.as_mut_ptr(),
            std::ptr::null_mut(),
            data,
            flags,
            std::ptr::null_mut(),
        );
        let array = Bound::from_owned_ptr_or_err(py, raw)?;
        // Steals the reference to `holder`, also on failure.
        let set = PY_ARRAY_API.PyArray_SetBaseObject(
            py,
            array.as_ptr().cast::<npyffi::PyArrayObject>(),
            holder.into_ptr(),
        );
        if set != 0 {
            return Err(PyErr::fetch(py));
        }
        Ok(array)
    }
}

/// numpy's descriptor for a relayc dtype; bfloat16 and the float8 types come from
/// `ml_dtypes` (numpy has none).
fn descr_of<'py>(py: Python<'py>, dtype: DType) -> PyResult<Bound<'py, PyArrayDescr>> {
    use relay::DTypeCode as C;
    let number = match (dtype.code, dtype.bits, dtype.lanes) {
        (_, _, lanes) if lanes != 1 => None,
        (C::Bool, _, _) => Some(NPY_TYPES::NPY_BOOL),
        (C::Float, 16, _) => Some(NPY_TYPES::NPY_HALF),
        (C::Float, 32, _) => Some(NPY_TYPES::NPY_FLOAT),
        (C::Float, 64, _) => Some(NPY_TYPES::NPY_DOUBLE),
        (C::Int, 8, _) => Some(NPY_TYPES::NPY_BYTE),
        (C::Int, 16, _) => Some(NPY_TYPES::NPY_SHORT),
        (C::Int, 32, _) => Some(NPY_TYPES::NPY_INT),
        (C::Int, 64, _) => Some(NPY_TYPES::NPY_LONGLONG),
        (C::UInt, 8, _) => Some(NPY_TYPES::NPY_UBYTE),
        (C::UInt, 16, _) => Some(NPY_TYPES::NPY_USHORT),
        (C::UInt, 32, _) => Some(NPY_TYPES::NPY_UINT),
        (C::UInt, 64, _) => Some(NPY_TYPES::NPY_ULONGLONG),
        _ => None,
    };
    if let Some(number) = number {
        // SAFETY: a built-in type number; the call returns a new reference.
        let raw = unsafe { PY_ARRAY_API.PyArray_DescrFromType(py, number as i32) };
        // SAFETY: a new reference to a descriptor, or null with an exception set.
        let descr = unsafe { Bound::from_owned_ptr_or_err(py, raw.cast())? };
        return Ok(descr.cast_into::<PyArrayDescr>()?);
    }
    let name = dtype.to_string();
    if dtype.lanes != 1 {
        return Err(usage(
            py,
            Stage::Run,
            format!("a {name} tensor (a vector dtype) has no numpy dtype"),
        ));
    }
    let extended = py
        .import("ml_dtypes")
        .and_then(|m| m.getattr(name.as_str()))
        .map_err(|_| {
            usage(
                py,
                Stage::Run,
                format!(
                    "a {name} tensor has no numpy dtype: install `ml_dtypes` (pip install \
                     ml_dtypes), which provides bfloat16 and the float8 types"
                ),
            )
        })?;
    PyArrayDescr::new(py, &extended)
}

/// The relayc dtype of a numpy dtype, or `None`.
fn dtype_of(descr: &Bound<'_, PyArrayDescr>) -> Option<DType> {
    let bits = u8::try_from(descr.itemsize() * 8).ok()?;
    let code = match descr.kind() {
        b'b' => return Some(DType::BOOL),
        b'f' => relay::DTypeCode::Float,
        b'i' => relay::DTypeCode::Int,
        b'u' => relay::DTypeCode::UInt,
        // ml_dtypes' bfloat16 and float8 types name themselves as relayc does.
        b'V' => return DType::parse(&descr.getattr("name").ok()?.extract::<String>().ok()?),
        _ => return None,
    };
    matches!(
        (code, bits),
        (relay::DTypeCode::Float, 16 | 32 | 64) | (_, 8 | 16 | 32 | 64)
    )
    .then(|| DType::scalar(code, bits))
}

/// An input tensor from a Python object: a numpy array, an object with `__dlpack__`, or a
/// scalar or (nested) list converted to `ty`'s dtype. `what` names the input in errors.
pub(crate) fn tensor_from(
    obj: &Bound<'_, PyAny>,
    ty: Option<&Type>,
    what: &dyn Fn() -> String,
) -> PyResult<Arc<NDArray>> {
    let py = obj.py();
    let array = if let Ok(array) = obj.cast::<PyUntypedArray>() {
        array.clone()
    } else if obj.hasattr("__dlpack__")? {
        py.import("numpy")?
            .call_method1("from_dlpack", (obj,))?
            .cast_into()?
    } else {
        let dtype = ty.and_then(tensor_dtype).map(|d| d.to_string());
        py.import("numpy")?
            .call_method1("asarray", (obj, dtype))
            .map_err(|e| {
                usage(
                    py,
                    Stage::Run,
                    format!("input {}: cannot make an array of {obj}: {e}", what()),
                )
            })?
            .cast_into()?
    };
    ndarray_of(&array, what)
}

/// The dtype of a tensor type.
pub(crate) fn tensor_dtype(ty: &Type) -> Option<DType> {
    match ty.kind() {
        TypeKind::Tensor { dtype, .. } => Some(*dtype),
        _ => None,
    }
}

/// An `NDArray` over a numpy array's memory when it is aligned and contiguous; a copy else.
fn ndarray_of(
    array: &Bound<'_, PyUntypedArray>,
    what: &dyn Fn() -> String,
) -> PyResult<Arc<NDArray>> {
    let py = array.py();
    let descr = array.dtype();
    let Some(dtype) = dtype_of(&descr) else {
        return Err(usage(
            py,
            Stage::Run,
            format!("input {}: numpy dtype {descr} has no relayc dtype", what()),
        ));
    };
    let shape: Vec<i64> = array.shape().iter().map(|&d| d as i64).collect();
    let native = descr.is_native_byteorder().unwrap_or(true);
    if !array.is_c_contiguous() || !native {
        // One copy into a contiguous, native-order array; then read in place if aligned.
        let numpy = py.import("numpy")?;
        let native_dtype = descr.call_method1("newbyteorder", ("=",))?;
        let copy = numpy
            .call_method1("ascontiguousarray", (array, native_dtype))?
            .cast_into::<PyUntypedArray>()?;
        return owned_copy(&copy, dtype, &shape, what);
    }
    // SAFETY: a live array object; `data` is its first element.
    let data = unsafe { (*array.as_array_ptr()).fields.data }.cast::<u8>();
    match NonNull::new(data) {
        Some(ptr) if (ptr.as_ptr() as usize).is_multiple_of(ALIGNMENT) => {
            let keep = Box::new(Borrowed {
                _array: array.clone().into_any().unbind(),
            });
            // SAFETY: the array is C-contiguous with `shape` and `dtype`, so `ptr` is valid for
            // its byte length; `keep` holds the array (and so its memory) for as long as the
            // NDArray lives. The caller must not write the array during a run (documented).
            let array = unsafe { NDArray::from_foreign(dtype, &shape, ptr, keep) }
                .map_err(|e| usage(py, Stage::Run, format!("input {}: {e}", what())))?;
            Ok(Arc::new(array))
        }
        _ => owned_copy(array, dtype, &shape, what),
    }
}

/// A copy of a C-contiguous array's bytes into an aligned NDArray.
fn owned_copy(
    array: &Bound<'_, PyUntypedArray>,
    dtype: DType,
    shape: &[i64],
    what: &dyn Fn() -> String,
) -> PyResult<Arc<NDArray>> {
    let py = array.py();
    let len = NDArray::byte_len(dtype, shape)
        .map_err(|e| usage(py, Stage::Run, format!("input {}: {e}", what())))?;
    // SAFETY: a live, C-contiguous array: its data holds `len` bytes (none when empty).
    let bytes: &[u8] = unsafe {
        let data = (*array.as_array_ptr()).fields.data.cast::<u8>();
        if len == 0 || data.is_null() {
            &[]
        } else {
            std::slice::from_raw_parts(data, len)
        }
    };
    let copy = NDArray::from_bytes(dtype, shape, bytes)
        .map_err(|e| usage(py, Stage::Run, format!("input {}: {e}", what())))?;
    Ok(Arc::new(copy))
}

/// `(a, b, ...)` of Python objects.
pub(crate) fn tuple_of<'py>(
    py: Python<'py>,
    items: Vec<Bound<'py, PyAny>>,
) -> PyResult<Bound<'py, PyAny>> {
    Ok(PyTuple::new(py, items)?.into_any())
}
