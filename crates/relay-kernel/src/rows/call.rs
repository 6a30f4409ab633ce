//! Calling a row kernel: its arguments walked a chunk of rows at a time.
//!
//! Each chunk's batched arguments are `DLTensor`s of the chunk's shape at the rows' byte
//! offset (aligned, since chunks start every `align` rows); the others are passed as they
//! are. The rows left after the aligned chunks run a step at a time: in place where the step
//! starts aligned, else copied into aligned scratch buffers, run, and their results copied
//! back.

use std::ffi::c_void;

use relay_linalg::KernelContext;

use super::{RowArg, Rows};
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
    // SAFETY: by this function's contract.
    let shapes = unsafe { compact_shapes(tensors, rows.args.len()) }?;
    // Every output is batched: this checks the outputs' shapes too.
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
    let mut args = Chunks::new(rows, tensors);
    let mut scratch = None;
    let mut done = 0i64;
    for (chunk, kernel) in &rows.chunks {
        while total - done >= *chunk {
            if done % rows.align == 0 {
                args.at_rows(rows, done, *chunk);
                // SAFETY: rows `done..done + chunk` are within every batched argument.
                unsafe { args.run(kernel, ctx) }?;
            } else {
                let scratch = scratch.get_or_insert_with(|| Scratch::for_rows(rows, *chunk));
                let at = Copied {
                    inputs,
                    first: done,
                    n: *chunk,
                };
                // SAFETY: as above.
                unsafe { run_copied(rows, ctx, kernel, tensors, &mut args, scratch, at) }?;
            }
            done += chunk;
        }
    }
    if done < total {
        return Err(format!(
            "rows {lead:?} are not whole steps of the row kernel"
        ));
    }
    Ok(())
}

/// The arguments of one chunk call, made once per call and pointed at each chunk in turn:
/// the batched arguments' `DLTensor`s with their chunk shapes, the others as given.
struct Chunks {
    /// Each argument's shape in a chunk (empty for one passed as given).
    shapes: Vec<Vec<i64>>,
    /// The arguments; a batched one's shape points into `shapes`.
    views: Vec<DLTensor>,
    /// Each argument's byte offset as given.
    offsets: Vec<u64>,
}

impl Chunks {
    fn new(rows: &Rows, tensors: &[&DLTensor]) -> Chunks {
        let mut shapes: Vec<Vec<i64>> = rows
            .args
            .iter()
            .map(|a| match a.batched {
                true => rows.pattern.chunk_shape(rows.pattern.step, &a.trailing),
                false => Vec::new(),
            })
            .collect();
        let mut views = Vec::with_capacity(tensors.len());
        for (t, (a, shape)) in tensors.iter().zip(rows.args.iter().zip(&mut shapes)) {
            let mut view = **t;
            if a.batched {
                view.shape = shape.as_mut_ptr();
                view.strides = std::ptr::null_mut();
            }
            views.push(view);
        }
        let offsets = tensors.iter().map(|t| t.byte_offset).collect();
        Chunks {
            shapes,
            views,
            offsets,
        }
    }

    /// Points the batched arguments at rows `first..first + n` of the arguments as given.
    fn at_rows(&mut self, rows: &Rows, first: i64, n: i64) {
        for (i, a) in rows.args.iter().enumerate() {
            if a.batched {
                self.set_rows(rows, i, n);
                self.views[i].byte_offset = self.offsets[i] + first as u64 * a.row_bytes as u64;
            }
        }
    }

    /// Points the batched arguments at the `n` rows of `scratch`.
    fn at_scratch(&mut self, rows: &Rows, n: i64, scratch: &mut [Scratch]) {
        for (i, a) in rows.args.iter().enumerate() {
            if a.batched {
                self.set_rows(rows, i, n);
                self.views[i].data = scratch[i].aligned().cast::<c_void>();
                self.views[i].byte_offset = 0;
            }
        }
    }

    /// Sets the row count of argument `i`'s chunk shape to `n` (a multiple of the step).
    fn set_rows(&mut self, rows: &Rows, i: usize, n: i64) {
        if let Some(d) = self.shapes[i].get_mut(rows.pattern.carrier) {
            *d = n / rows.pattern.step;
        }
    }

    /// Calls `kernel` on the arguments as they point now.
    ///
    /// # Safety
    ///
    /// Each argument's rows are within its data, valid as [`call`] says.
    unsafe fn run(&mut self, kernel: &PackedFunc, ctx: &mut KernelContext) -> Result<(), String> {
        // SAFETY: forwarded.
        unsafe { call_views(kernel, &mut self.views, ctx) }
    }
}

/// Calls `kernel` on tensors `views` (a chunk's or a span's).
///
/// # Safety
///
/// Each view's shape pointer holds `ndim` extents and its data is valid for reads (inputs)
/// or writes (outputs) of the shape's bytes, with no other access to the outputs meanwhile.
pub(crate) unsafe fn call_views(
    kernel: &PackedFunc,
    views: &mut [DLTensor],
    ctx: &mut KernelContext,
) -> Result<(), String> {
    const ARGS: usize = 16;
    let null = TVMValue { v_int64: 0 };
    let n = views.len();
    let (mut on_stack, mut on_heap) = ([null; ARGS], Vec::new());
    let values: &mut [TVMValue] = match n <= ARGS {
        true => &mut on_stack[..n],
        false => {
            on_heap.resize(n, null);
            &mut on_heap
        }
    };
    for (v, t) in values.iter_mut().zip(views.iter_mut()) {
        *v = TVMValue {
            v_handle: (t as *mut DLTensor).cast(),
        };
    }
    let codes_on_stack = [TYPE_CODE_DLTENSOR_HANDLE; ARGS];
    let codes_on_heap;
    let codes: &[i32] = match n <= ARGS {
        true => &codes_on_stack[..n],
        false => {
            codes_on_heap = vec![TYPE_CODE_DLTENSOR_HANDLE; n];
            &codes_on_heap
        }
    };
    let num = i32::try_from(n).map_err(|_| "too many arguments")?;
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

/// The shapes of `tensors`, `expected` of them, each checked by [`compact_shape`].
///
/// # Safety
///
/// Each tensor's shape and strides are valid for `ndim` elements.
pub(crate) unsafe fn compact_shapes<'t>(
    tensors: &[&'t DLTensor],
    expected: usize,
) -> Result<Vec<&'t [i64]>, String> {
    if tensors.len() != expected {
        return Err(format!(
            "expected {expected} arguments, got {}",
            tensors.len()
        ));
    }
    let mut shapes = Vec::with_capacity(tensors.len());
    for (i, t) in tensors.iter().enumerate() {
        // SAFETY: by this function's contract.
        shapes.push(unsafe { compact_shape(t) }.map_err(|e| format!("argument {i}: {e}"))?);
    }
    Ok(shapes)
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

    /// A buffer of `n` rows for each batched argument of `rows` (none for the others).
    fn for_rows(rows: &Rows, n: i64) -> Vec<Scratch> {
        let bytes = |a: &RowArg| {
            if a.batched {
                a.row_bytes * n as usize
            } else {
                0
            }
        };
        rows.args.iter().map(|a| Scratch::new(bytes(a))).collect()
    }

    /// The first aligned byte.
    fn aligned(&mut self) -> *mut u8 {
        let at = self.bytes.as_ptr().align_offset(DATA_ALIGNMENT as usize);
        self.bytes.as_mut_ptr().wrapping_add(at)
    }
}

/// Rows run through scratch buffers: where their start is not aligned.
struct Copied {
    /// How many arguments are inputs.
    inputs: usize,
    /// The first row.
    first: i64,
    /// How many (the rows of the kernel that runs them).
    n: i64,
}

/// Runs the rows `at` says through `kernel` in `scratch` (which holds `at.n` rows of each
/// batched argument).
///
/// # Safety
///
/// As [`call`]'s, the rows `at.first..at.first + at.n` within every batched argument.
unsafe fn run_copied(
    rows: &Rows,
    ctx: &mut KernelContext,
    kernel: &PackedFunc,
    tensors: &[&DLTensor],
    args: &mut Chunks,
    scratch: &mut [Scratch],
    at: Copied,
) -> Result<(), String> {
    let Copied { inputs, first, n } = at;
    let each = tensors.iter().zip(&rows.args).zip(scratch.iter_mut());
    for (i, ((t, a), scratch)) in each.enumerate() {
        if a.batched && i < inputs {
            // SAFETY: `n` rows from `first` are in the argument; the scratch holds `n`.
            unsafe {
                let src = rows_at(t, a, first);
                std::ptr::copy_nonoverlapping(src, scratch.aligned(), n as usize * a.row_bytes);
            }
        }
    }
    args.at_scratch(rows, n, scratch);
    // SAFETY: every batched argument is in scratch, `n` rows each.
    unsafe { args.run(kernel, ctx) }?;
    let each = tensors.iter().zip(&rows.args).zip(scratch.iter_mut());
    for ((t, a), scratch) in each.skip(inputs) {
        if a.batched {
            // SAFETY: the output holds rows `first..first + n`.
            unsafe {
                let dst = rows_at(t, a, first).cast_mut();
                std::ptr::copy_nonoverlapping(scratch.aligned(), dst, n as usize * a.row_bytes);
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
