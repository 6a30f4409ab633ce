//! Calling a broadcast kernel: the result walked a row (its innermost dimension, with the
//! dimensions merged into it) at a time, each row covered by spans, longest first.

use relay_linalg::KernelContext;

use super::{Broadcast, Role};
use crate::abi::DLTensor;
use crate::rows::{call_views, compact_shapes};

/// One dimension of the walk: its extent and each argument's byte step along it.
struct Axis {
    extent: i64,
    steps: Vec<isize>,
}

/// Runs broadcast kernel `b` on `tensors` (its inputs, then its result).
///
/// # Safety
///
/// Each tensor's shape is valid for `ndim` elements, and its data, when the tensor has the
/// shape the kernel expects, for reads (inputs) or writes (the result) of its whole byte size,
/// with no other access to the result meanwhile.
pub(crate) unsafe fn call(
    b: &Broadcast,
    ctx: &mut KernelContext,
    tensors: &[&DLTensor],
) -> Result<(), String> {
    // SAFETY: by this function's contract.
    let shapes = unsafe { compact_shapes(tensors, b.args.len()) }?;
    let (result, inputs) = shapes.split_last().ok_or("no result")?;
    let out = b.served_shape(inputs)?;
    if **result != out[..] {
        return Err(format!("a result of shape {result:?}, expected {out:?}"));
    }
    let elements = out.iter().try_fold(1i64, |n, &d| n.checked_mul(d));
    let addressable = elements.is_some_and(|n| {
        let n = usize::try_from(n).unwrap_or(usize::MAX);
        b.bytes
            .iter()
            .all(|&w| n.checked_mul(w).is_some_and(|x| x <= isize::MAX as usize))
    });
    if !addressable {
        return Err(format!("a result of shape {out:?} is too large"));
    }
    if elements == Some(0) {
        return Ok(());
    }
    let (row, outer) = b.walk(&shapes, &out);
    let mut views: Vec<DLTensor> = tensors.iter().map(|t| **t).collect();
    let bases: Vec<*mut u8> = tensors
        .iter()
        .map(|t| t.data.cast::<u8>().wrapping_add(t.byte_offset as usize))
        .collect();
    for (v, role) in views.iter_mut().zip(&b.args) {
        if role.walked().is_some() {
            v.strides = std::ptr::null_mut();
            v.byte_offset = 0;
        }
    }
    let rows: i64 = outer.iter().map(|a| a.extent).product();
    let mut index = vec![0i64; outer.len()];
    let mut offsets = vec![0isize; b.args.len()];
    for _ in 0..rows {
        let mut pos = 0i64;
        for ((length, kernel), shapes) in b.spans.iter().zip(&b.span_shapes) {
            while *length > 0 && row.extent - pos >= *length {
                for (i, (v, role)) in views.iter_mut().zip(&b.args).enumerate() {
                    if role.walked().is_some() {
                        let at = offsets[i] + pos as isize * row.steps[i];
                        v.data = bases[i].wrapping_offset(at).cast();
                        // The kernel reads the shape, never writes it.
                        v.shape = shapes[i].as_ptr().cast_mut();
                    }
                }
                // SAFETY: the span's elements are within every argument (the walk follows
                // their shapes, checked above).
                unsafe { call_views(kernel, &mut views, ctx) }?;
                pos += length;
            }
        }
        // The next row: an odometer over the outer dimensions.
        for (d, axis) in outer.iter().enumerate().rev() {
            index[d] += 1;
            for (o, s) in offsets.iter_mut().zip(&axis.steps) {
                *o += s;
            }
            if index[d] < axis.extent {
                break;
            }
            for (o, s) in offsets.iter_mut().zip(&axis.steps) {
                *o -= s * axis.extent as isize;
            }
            index[d] = 0;
        }
    }
    Ok(())
}

impl Broadcast {
    /// The walk of a call with arguments of shapes `shapes` and result `out`: the row (its
    /// extent and each argument's step along it, as the span kernels read it) and the outer
    /// dimensions of more than one element, outermost first.
    fn walk(&self, shapes: &[&[i64]], out: &[i64]) -> (Axis, Vec<Axis>) {
        let mut dims: Vec<Axis> = (0..self.rank)
            .map(|o| Axis {
                extent: out[o],
                steps: self.steps_at(shapes, o),
            })
            .collect();
        let mut row = dims.pop().unwrap_or(Axis {
            extent: 1,
            steps: vec![0; self.args.len()],
        });
        row.steps.clone_from(&self.along);
        let mut outer: Vec<Axis> = Vec::with_capacity(dims.len());
        let mut merging = !self.fixed;
        while let Some(axis) = dims.pop() {
            if axis.extent == 1 {
                continue;
            }
            let continues = axis
                .steps
                .iter()
                .zip(&self.along)
                .all(|(&s, &a)| s == a * row.extent as isize);
            if merging && continues {
                row.extent *= axis.extent;
            } else {
                merging = false;
                outer.push(axis);
            }
        }
        outer.reverse();
        (row, outer)
    }

    /// Each argument's byte step along dimension `o` of the result: 0 where it has extent 1
    /// (repeated) or no such dimension, and for an argument passed whole.
    fn steps_at(&self, shapes: &[&[i64]], o: usize) -> Vec<isize> {
        let step = |(role, (shape, &w)): (&Role, (&&[i64], &usize))| {
            let Some(rank) = role.walked() else { return 0 };
            let Some(k) = (o + rank).checked_sub(self.rank) else {
                return 0;
            };
            match shape[k] {
                1 => 0,
                _ => shape[k + 1..].iter().product::<i64>() as isize * w as isize,
            }
        };
        self.args
            .iter()
            .zip(shapes.iter().zip(&self.bytes))
            .map(step)
            .collect()
    }
}
