//! Calling a row kernel: its arguments walked a chunk of rows at a time.
//!
//! Each chunk's batched arguments are `DLTensor`s of the chunk's shape at the rows' byte
//! offset (aligned, since chunks start every `align` rows); the others are passed as they
//! are. The rows left after the whole chunks, fewer than the smallest chunk, are copied into
//! aligned scratch buffers padded to that chunk by repeating their last row (so the padding
//! computes what a real row does, errors included), run, and their results copied back.

use std::ffi::c_void;

use relay_linalg::KernelContext;

use super::{RowArg, Rows, chunk_shape};
use crate::abi::{DATA_ALIGNMENT, DLTensor, TVMValue, TYPE_CODE_DLTENSOR_HANDLE};
use crate::packed::PackedFunc;

/// Runs row kernel `rows` on `tensors` (its arguments, inputs first; `inputs` of them).
///
/// # Safety
///
/// Each tensor's shape is valid for `ndim` elements, and its data, when the tensor has the
/// shape the kernel expects, for reads (inputs) or writes (outputs) of its whole byte size,
/// with no other access to the outputs meanwhile.
pub(crate) unsafe fn call(
    rows: &Rows,
    ctx: &mut KernelContext,
    inputs: usize,
    tensors: &[&DLTensor],
) -> Result<(), String> {
    if tensors.len() != rows.args.len() {
        return Err(format!(
            "expected {} arguments, got {}",
            rows.args.len(),
            tensors.len()
        ));
    }
    let mut shapes = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        // SAFETY: by this function's contract.
        shapes.push(unsafe { compact_shape(t) }.map_err(|e| format!("argument {i}: {e}"))?);
    }
    let want = rows.output_shapes(&shapes[..inputs], inputs)?;
    if want.iter().zip(&shapes[inputs..]).any(|(w, s)| w != s) {
        return Err(format!(
            "outputs of shapes {:?}, want {want:?}",
            &shapes[inputs..]
        ));
    }
    let lead = rows.rows(&shapes)?;
    // The rows, and the bytes of every batched argument, must be addressable.
    let total = lead
        .iter()
        .try_fold(1i64, |n, &d| n.checked_mul(d))
        .filter(|&n| {
            let n = usize::try_from(n).unwrap_or(usize::MAX);
            rows.args.iter().all(|a| {
                n.checked_mul(a.row_bytes)
                    .is_some_and(|b| b <= isize::MAX as usize)
            })
        })
        .ok_or_else(|| format!("rows {lead:?} are too many"))?;
    let mut done = 0i64;
    for (chunk, kernel) in &rows.chunks {
        while total - done >= *chunk {
            // SAFETY: rows `done..done + chunk` are within every batched argument.
            unsafe { run_chunk(rows, ctx, kernel, tensors, done, *chunk, None) }?;
            done += chunk;
        }
    }
    if done < total {
        let (chunk, kernel) = rows.chunks.last().ok_or("a row kernel without chunks")?;
        // SAFETY: as above, for the rows left, padded in scratch.
        let padded = Padded {
            inputs,
            first: done,
            n: total - done,
            chunk: *chunk,
        };
        unsafe { run_padded(rows, ctx, kernel, tensors, padded) }?;
    }
    Ok(())
}

/// The shape of `t`, checked to be compact row-major with data where it has elements.
///
/// # Safety
///
/// `t`'s shape and strides are valid for `ndim` elements.
unsafe fn compact_shape(t: &DLTensor) -> Result<&[i64], String> {
    let ndim = usize::try_from(t.ndim).map_err(|_| "a negative rank")?;
    if ndim > 0 && t.shape.is_null() {
        return Err("a null shape".into());
    }
    // SAFETY: by this function's contract.
    let shape = match ndim {
        0 => &[][..],
        _ => unsafe { std::slice::from_raw_parts(t.shape, ndim) },
    };
    if !t.strides.is_null() {
        // SAFETY: as the shape.
        let strides = unsafe { std::slice::from_raw_parts(t.strides, ndim) };
        let mut step = 1i64;
        for (&d, &s) in shape.iter().zip(strides).rev() {
            if d != 1 && s != step {
                return Err(format!("strides {strides:?} are not compact for {shape:?}"));
            }
            step = step.saturating_mul(d);
        }
    }
    if shape.iter().any(|&d| d < 0) {
        return Err(format!("a negative extent in {shape:?}"));
    }
    if !shape.contains(&0) && t.data.is_null() {
        return Err("null data".into());
    }
    Ok(shape)
}

/// Calls `kernel` on rows `first..first + n` of the batched arguments (`n` is the kernel's
/// chunk), or on the `scratch` buffers standing for them.
///
/// # Safety
///
/// The rows are within every batched argument of `tensors` (or `scratch` holds `n` rows of
/// each), valid as [`call`] says.
unsafe fn run_chunk(
    rows: &Rows,
    ctx: &mut KernelContext,
    kernel: &PackedFunc,
    tensors: &[&DLTensor],
    first: i64,
    n: i64,
    scratch: Option<&mut [Scratch]>,
) -> Result<(), String> {
    let mut shapes: Vec<Vec<i64>> = rows
        .args
        .iter()
        .map(|a| match a.batched {
            true => chunk_shape(rows.lead, n, &a.trailing),
            false => Vec::new(),
        })
        .collect();
    let mut views = Vec::with_capacity(tensors.len());
    let mut scratch = scratch;
    for (i, (t, a)) in tensors.iter().zip(&rows.args).enumerate() {
        let mut view = **t;
        if a.batched {
            view.shape = shapes[i].as_mut_ptr();
            view.strides = std::ptr::null_mut();
            match scratch.as_deref_mut() {
                Some(s) => {
                    view.data = s[i].aligned().cast::<c_void>();
                    view.byte_offset = 0;
                }
                None => view.byte_offset += first as u64 * a.row_bytes as u64,
            }
        }
        views.push(view);
    }
    let values: Vec<TVMValue> = views
        .iter_mut()
        .map(|v| TVMValue {
            v_handle: (v as *mut DLTensor).cast(),
        })
        .collect();
    let codes = vec![TYPE_CODE_DLTENSOR_HANDLE; values.len()];
    let num = i32::try_from(values.len()).map_err(|_| "too many arguments")?;
    ctx.error = None;
    // SAFETY: the views are in bounds by this function's contract, and live (with their
    // shapes) through the call.
    let rc = unsafe { kernel.call_raw(values.as_ptr(), codes.as_ptr(), num, ctx) };
    match rc {
        0 => Ok(()),
        _ => Err(ctx
            .error
            .take()
            .unwrap_or_else(|| format!("a chunk failed with code {rc}"))),
    }
}

/// An aligned buffer of one chunk of one argument's rows.
struct Scratch {
    bytes: Vec<u8>,
}

impl Scratch {
    fn new(len: usize) -> Scratch {
        Scratch {
            bytes: vec![0; len + DATA_ALIGNMENT as usize],
        }
    }

    /// The first aligned byte.
    fn aligned(&mut self) -> *mut u8 {
        let at = self.bytes.as_ptr().align_offset(DATA_ALIGNMENT as usize);
        self.bytes.as_mut_ptr().wrapping_add(at)
    }
}

/// The rows left after the whole chunks.
struct Padded {
    /// How many arguments are inputs.
    inputs: usize,
    /// The first row left.
    first: i64,
    /// How many are left (fewer than `chunk`).
    n: i64,
    /// The rows of the kernel that runs them.
    chunk: i64,
}

/// Runs the rows `p` says through the `p.chunk`-row kernel in padded scratch.
///
/// # Safety
///
/// As [`run_chunk`], the rows `p.first..p.first + p.n` within every batched argument.
unsafe fn run_padded(
    rows: &Rows,
    ctx: &mut KernelContext,
    kernel: &PackedFunc,
    tensors: &[&DLTensor],
    p: Padded,
) -> Result<(), String> {
    let Padded {
        inputs,
        first,
        n,
        chunk,
    } = p;
    let mut scratch: Vec<Scratch> = rows
        .args
        .iter()
        .map(|a| {
            Scratch::new(if a.batched {
                a.row_bytes * chunk as usize
            } else {
                0
            })
        })
        .collect();
    for (i, (t, a)) in tensors.iter().zip(&rows.args).enumerate() {
        if !a.batched || i >= inputs || n == 0 {
            continue;
        }
        let dst = scratch[i].aligned();
        // SAFETY: `n` rows from `first` are in the argument; the scratch holds `chunk`.
        unsafe {
            let src = rows_at(t, a, first);
            std::ptr::copy_nonoverlapping(src, dst, n as usize * a.row_bytes);
            let last = dst.add((n as usize - 1) * a.row_bytes);
            for r in n..chunk {
                std::ptr::copy_nonoverlapping(last, dst.add(r as usize * a.row_bytes), a.row_bytes);
            }
        }
    }
    // SAFETY: every batched argument is in scratch, `chunk` rows each.
    unsafe { run_chunk(rows, ctx, kernel, tensors, 0, chunk, Some(&mut scratch)) }?;
    for (i, (t, a)) in tensors.iter().zip(&rows.args).enumerate().skip(inputs) {
        if a.batched {
            let src = scratch[i].aligned();
            // SAFETY: the output holds rows `first..first + n`.
            unsafe {
                let dst = rows_at(t, a, first).cast_mut();
                std::ptr::copy_nonoverlapping(src, dst, n as usize * a.row_bytes);
            }
        }
    }
    Ok(())
}

/// The address of row `row` of `t`.
///
/// # Safety
///
/// `t` has the row.
unsafe fn rows_at(t: &DLTensor, a: &RowArg, row: i64) -> *const u8 {
    t.data
        .cast::<u8>()
        .wrapping_add(t.byte_offset as usize + row as usize * a.row_bytes)
}
