//! `strided_set(data, v, begin, end, strides)`: the data with the region `strided_slice` would
//! read replaced by `v`, any dtype, any shape. The kernel copies the data into the output,
//! then `v` into the output's region; when the output *is* the data (the VM passes one buffer
//! as both when the data is dead after the call and nothing else holds it,
//! [`relay_ops::updates_input`]) the first copy is skipped and only the region is written, so a
//! preallocated key/value cache takes one row per step in place.
//!
//! The indices may be kernel arguments or constants of the primitive; the result's shape is
//! the data's, so the VM allocates the output from shapes alone.

use std::sync::Arc;

use relay_ir::{ExprKind, Function, NDArray};
use relay_linalg::copy::Strided;

use super::dynamic::copy_bytes;
use super::{count, ints};
use crate::abi::{DLTensor, KernelSpec};

/// A primitive computing one `strided_set`.
#[derive(Clone, Debug)]
pub struct StridedSet {
    /// `begin`, `end` and `strides`: kernel arguments or constants.
    indices: [Index; 3],
}

/// One index vector of the call.
#[derive(Clone, Debug)]
enum Index {
    /// Kernel argument `i`.
    Arg(usize),
    /// A constant of the primitive.
    Constant(Arc<NDArray>),
}

/// The primitive `func` is, when its body is `strided_set` of its first two parameters in
/// order (the data, then `v`) and of parameters or constants.
pub(super) fn recognize(func: &Function) -> Option<StridedSet> {
    let (op, args, _) = func.body.op_call()?;
    if op.name != "strided_set" || args.len() != 5 {
        return None;
    }
    let param = |k: usize| match args[k].kind() {
        ExprKind::Var(v) => func.params.iter().position(|p| p == v),
        _ => None,
    };
    if (param(0), param(1)) != (Some(0), Some(1)) {
        return None;
    }
    let index = |k: usize| match args[k].kind() {
        ExprKind::Constant(c) => Some(Index::Constant(c.clone())),
        _ => param(k).map(Index::Arg),
    };
    Some(StridedSet {
        indices: [index(2)?, index(3)?, index(4)?],
    })
}

impl StridedSet {
    /// The output's shape: the data's.
    pub fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let data = inputs.first().ok_or("no data")?;
        Ok(vec![data.to_vec()])
    }

    /// Writes the result into the output (`tensors`' last, of shape `shapes[0]`), which may
    /// be the data's own buffer.
    ///
    /// # Safety
    ///
    /// `tensors` were checked against `spec` (of shapes `shapes`) and are valid for reads
    /// (inputs) or writes (the output) of their sizes; the output overlaps no argument but the
    /// data, which it either is exactly or does not overlap.
    pub(super) unsafe fn run(
        &self,
        spec: &KernelSpec,
        tensors: &[&DLTensor],
        shapes: &[&[i64]],
    ) -> Result<(), String> {
        let (data, v, out) = match tensors {
            [data, v, .., out] => (*data, *v, *out),
            _ => return Err("strided_set takes data, a value and an output".into()),
        };
        let (Some(&shape), Some(&v_shape), Some(a)) =
            (shapes.first(), shapes.get(1), spec.args.first())
        else {
            return Err("strided_set takes data and a value".into());
        };
        let width = usize::from(a.dtype.bits).div_ceil(8);
        let len = count(shape)
            .and_then(|n| n.checked_mul(width))
            .ok_or("too large")?;
        let v_len = count(v_shape)
            .and_then(|n| n.checked_mul(width))
            .ok_or("too large")?;
        let [begin, end, strides] = [0, 1, 2].map(|k| self.index(k, spec, tensors, shapes));
        let region = relay_ops::strided_set_region(shape, &begin?, &end?, &strides?)
            .map_err(|e| e.to_string())?;
        if region.shape != v_shape {
            return Err(format!(
                "strided_set writes `v` of shape {v_shape:?} into a region of shape {:?}",
                region.shape
            ));
        }
        let (from, into, v_at) = (address(data), address(out), address(v));
        if from != into {
            if from < into + len && into < from + len {
                return Err("an output that partly overlaps the data".into());
            }
            // SAFETY: both valid for `len` bytes by the contract, and disjoint (checked).
            unsafe { std::ptr::copy_nonoverlapping(from as *const u8, into as *mut u8, len) };
        }
        // `v` overlaps the output only in a call the VM never donates to; read a copy then.
        // SAFETY: `v` is valid for reads of `v_len` bytes by the contract.
        let v_bytes = unsafe { std::slice::from_raw_parts(v_at as *const u8, v_len) };
        let v_bytes: std::borrow::Cow<[u8]> = match v_at < into + len && into < v_at + v_len {
            true => v_bytes.to_vec().into(),
            false => v_bytes.into(),
        };
        let extents: Vec<usize> = v_shape.iter().map(|&d| d as usize).collect();
        let target = Strided {
            strides: region.strides.iter().map(|&s| s as isize).collect(),
            offset: usize::try_from(region.offset).map_err(|_| "a negative offset")?,
            shape: extents.clone(),
        };
        if v_len == 0 {
            return Ok(());
        }
        // SAFETY: the output is valid for writes of `len` bytes, and no slice of `v` aliases
        // it (a copy was taken where they overlap).
        let out_bytes = unsafe { std::slice::from_raw_parts_mut(into as *mut u8, len) };
        copy_bytes(
            &v_bytes,
            &Strided::compact(&extents, 0),
            out_bytes,
            &target,
            width,
        )
    }

    /// Index vector `k` (`begin`, `end`, `strides`) for these arguments.
    fn index(
        &self,
        k: usize,
        spec: &KernelSpec,
        tensors: &[&DLTensor],
        shapes: &[&[i64]],
    ) -> Result<Vec<i64>, String> {
        let values = match &self.indices[k] {
            Index::Constant(c) => c
                .to_i128_vec()
                .into_iter()
                .map(|x| i64::try_from(x).ok())
                .collect(),
            Index::Arg(i) => {
                let (t, a, s) = (tensors.get(*i), spec.args.get(*i), shapes.get(*i));
                let (Some(t), Some(a), Some(s)) = (t, a, s) else {
                    return Err(format!("no argument {i}"));
                };
                // SAFETY: checked against the spec, of shape `s`, valid for reads.
                unsafe { ints(t, a, count(s).unwrap_or(0)) }
            }
        };
        values.ok_or_else(|| "an index vector of non-integers or out of range".into())
    }
}

/// The address of `t`'s first element.
fn address(t: &DLTensor) -> usize {
    (t.data as usize).wrapping_add(t.byte_offset as usize)
}
