//! TVM's packed-function C ABI over DLPack tensors (docs/design.md §7.8, `reference/tvm-vm.md` §4): the
//! `#[repr(C)]` types a kernel's entry receives, and the kernel context behind its
//! `resource_handle`.
//!
//! A compiled kernel's entry is a [`PackedCFunc`]:
//! `int32_t fn(TVMValue* args, int32_t* type_codes, int32_t num_args, TVMValue* ret,
//! int32_t* ret_type_code, void* resource_handle)`. Every argument is a tensor
//! (`type_codes[i] == TYPE_CODE_DLTENSOR_HANDLE`, `args[i].v_handle` a `*mut DLTensor`); inputs
//! come first, then outputs (destination passing). It returns 0 on success, or non-zero with a
//! message in the [`KernelContext`]'s error slot naming the kernel, the argument and the
//! mismatch.

use std::ffi::c_void;

/// DLPack's `DLDevice`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDevice {
    /// `kDLCPU` = 1.
    pub device_type: i32,
    /// 0.
    pub device_id: i32,
}

/// DLPack's `DLDataType`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DLDataType {
    /// `kDLInt` 0, `kDLUInt` 1, `kDLFloat` 2, `kDLBfloat` 4, `kDLBool` 6.
    pub code: u8,
    /// Bits per lane.
    pub bits: u8,
    /// Lanes (1).
    pub lanes: u16,
}

/// DLPack's `DLTensor`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct DLTensor {
    /// The data (64-byte aligned, plus `byte_offset`).
    pub data: *mut c_void,
    /// Where.
    pub device: DLDevice,
    /// Rank.
    pub ndim: i32,
    /// Element type.
    pub dtype: DLDataType,
    /// `ndim` extents.
    pub shape: *mut i64,
    /// `ndim` strides in elements, or null for compact row-major.
    pub strides: *mut i64,
    /// Offset of the first element from `data`, in bytes.
    pub byte_offset: u64,
}

/// TVM's `TVMValue` union (8 bytes).
#[repr(C)]
#[derive(Clone, Copy)]
pub union TVMValue {
    /// An integer.
    pub v_int64: i64,
    /// A float.
    pub v_float64: f64,
    /// A pointer (a `*mut DLTensor` for tensor arguments).
    pub v_handle: *mut c_void,
}

/// `kTVMDLTensorHandle`: the type code of a `DLTensor*` argument.
pub const TYPE_CODE_DLTENSOR_HANDLE: i32 = 7;

/// TVM's `TVMBackendPackedCFunc`.
pub type PackedCFunc = unsafe extern "C" fn(
    args: *const TVMValue,
    type_codes: *const i32,
    num_args: i32,
    ret: *mut TVMValue,
    ret_type_code: *mut i32,
    resource_handle: *mut c_void,
) -> i32;

pub use relay_linalg::KernelContext;

/// `kTVMNDArrayHandle`: an NDArray handle, which points at the `DLTensor` at the start of the
/// NDArray container (the VM passes tensors this way); accepted like a `DLTensor*`.
pub const TYPE_CODE_NDARRAY_HANDLE: i32 = 13;

/// `kDLCPU`.
pub const DEVICE_CPU: i32 = 1;

/// The alignment the entry requires of every non-empty tensor's first element, in bytes.
pub const DATA_ALIGNMENT: u64 = relay_linalg::DATA_ALIGNMENT;

/// A body's run-time error code: integer division by zero.
pub const ERR_DIV_BY_ZERO: i32 = 1;
/// A body's run-time error code: integer remainder by zero.
pub const ERR_MOD_BY_ZERO: i32 = 2;
/// A body's run-time error code: an integer raised to a negative power.
pub const ERR_NEGATIVE_POWER: i32 = 3;
/// A body's run-time error code: a flat index outside its buffer (a bug in lowering, caught by
/// the checks code generation inserts where it cannot prove an index in bounds).
pub const ERR_OUT_OF_BOUNDS: i32 = 4;
/// Error code: a host routine the kernel called (GEMM) refused its arguments.
pub const ERR_HOST: i32 = 5;

/// The message of a body's run-time error code.
pub fn body_error_message(code: i32) -> String {
    match code {
        ERR_DIV_BY_ZERO => "integer division by zero".into(),
        ERR_MOD_BY_ZERO => "integer modulo by zero".into(),
        ERR_NEGATIVE_POWER => "integers to negative integer powers are not allowed".into(),
        ERR_OUT_OF_BOUNDS => "buffer index out of bounds".into(),
        ERR_HOST => "a host routine refused its arguments".into(),
        other => format!("run-time error {other}"),
    }
}

/// What a kernel's packed entry expects of its arguments: owned by the compiled code (its
/// address is embedded in the entry as a constant) and read by [`relay_kernel_check_args`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// The kernel's name, for messages.
    pub name: String,
    /// One entry per tensor argument, inputs first.
    pub args: Vec<ArgSpec>,
    /// The byte sizes of the kernel's scratch buffers, which follow the arguments in the
    /// buffer array the body receives.
    pub scratch: Vec<u64>,
    /// The alignment in bytes the entry requires of every argument's data:
    /// [`DATA_ALIGNMENT`], or 1 for a kernel its caller points into the middle of tensors
    /// (a span of `crate::broadcast`; the code's loads and stores assume no alignment).
    pub alignment: u64,
}

/// What a kernel expects of one tensor argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ArgSpec {
    /// The buffer's name (`p0`, `T_add`).
    pub name: String,
    /// Its element type.
    pub dtype: DLDataType,
    /// Its shape.
    pub shape: Vec<i64>,
}

/// The Relay dtype of a DLPack one, if it is one.
pub fn dtype_of(d: DLDataType) -> Option<relay_ir::DType> {
    Some(relay_ir::DType {
        code: relay_ir::DTypeCode::from_u8(d.code)?,
        bits: d.bits,
        lanes: d.lanes,
    })
}

/// The name of a DLPack dtype as TVM spells it (`float32`), or its fields if it is not one.
pub fn dtype_name(d: DLDataType) -> String {
    let base = match d.code {
        0 => format!("int{}", d.bits),
        1 => format!("uint{}", d.bits),
        2 => format!("float{}", d.bits),
        4 => format!("bfloat{}", d.bits),
        6 => "bool".to_string(),
        c => format!("(code {c}, bits {})", d.bits),
    };
    if d.lanes == 1 {
        base
    } else {
        format!("{base}x{}", d.lanes)
    }
}

/// Row-major strides of `shape`, in elements.
fn compact_strides(shape: &[i64]) -> Vec<i64> {
    let mut strides = vec![1i64; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        strides[i] = strides[i + 1].wrapping_mul(shape[i + 1]);
    }
    strides
}

/// Whether `strides` are `shape`'s row-major strides, in elements (the stride of a dimension
/// of extent 1 never affects an address, so it may be anything).
fn strides_compact(shape: &[i64], strides: &[i64]) -> bool {
    let mut expected = 1i64;
    for d in (0..shape.len()).rev() {
        if shape[d] != 1 && strides[d] != expected {
            return false;
        }
        expected = expected.wrapping_mul(shape[d]);
    }
    true
}

/// Checks one packed call's arguments against `spec` and, if they match, writes each tensor's
/// first-element address (`data + byte_offset`) to `out[i]`, followed by the addresses of the
/// kernel's scratch buffers in the context's workspace (allocating nothing once the workspace
/// is large enough). Returns 0, or -1 after writing a
/// message naming the kernel, the argument and the mismatch to the [`KernelContext`] behind
/// `resource_handle` (when it is not null). Never reads or writes tensor data.
///
/// # Safety
///
/// `spec` points to a live `KernelSpec`; `args` and `type_codes` are valid for `num_args`
/// elements (or `num_args` differs from the spec's count); every tensor argument is null or
/// points to a `DLTensor` whose `shape` (and `strides`, when not null) are valid for `ndim`
/// elements; `resource_handle` is null or points to a `KernelContext` nothing else accesses
/// during the call; `out` is valid for `spec.args.len() + spec.scratch.len()` writes.
pub unsafe extern "C" fn relay_kernel_check_args(
    spec: *const KernelSpec,
    args: *const TVMValue,
    type_codes: *const i32,
    num_args: i32,
    resource_handle: *mut c_void,
    out: *mut *mut u8,
) -> i32 {
    // SAFETY: the caller guarantees `spec` is live.
    let Some(spec) = (unsafe { spec.as_ref() }) else {
        return -1;
    };
    // SAFETY: forwarded from this function's contract.
    let result = unsafe { check_args(spec, args, type_codes, num_args, resource_handle, out) };
    match result {
        Ok(()) => 0,
        Err(message) => {
            // SAFETY: forwarded from this function's contract.
            unsafe { set_error(resource_handle, format!("kernel {}: {message}", spec.name)) };
            -1
        }
    }
}

/// Writes a kernel body's run-time error (`code`, see [`body_error_message`]) to the
/// [`KernelContext`] behind `resource_handle`.
///
/// # Safety
///
/// As for [`relay_kernel_check_args`]: `spec` is live and `resource_handle` is null or an
/// exclusively used `KernelContext`.
pub unsafe extern "C" fn relay_kernel_report(
    spec: *const KernelSpec,
    code: i32,
    resource_handle: *mut c_void,
) {
    // SAFETY: the caller guarantees `spec` is live.
    let name = unsafe { spec.as_ref() }.map_or("?", |s| s.name.as_str());
    let message = format!("kernel {name}: {}", body_error_message(code));
    // SAFETY: forwarded from this function's contract.
    unsafe { set_error(resource_handle, message) };
}

/// Stores `message` in the context's error slot, if there is a context.
///
/// # Safety
///
/// `resource_handle` is null or points to a `KernelContext` nothing else accesses meanwhile.
unsafe fn set_error(resource_handle: *mut c_void, message: String) {
    // SAFETY: by the contract above.
    if let Some(ctx) = unsafe { resource_handle.cast::<KernelContext>().as_mut() } {
        ctx.error = Some(message);
    }
}

/// The checks of [`relay_kernel_check_args`], with the message on failure.
///
/// # Safety
///
/// As for [`relay_kernel_check_args`].
unsafe fn check_args(
    spec: &KernelSpec,
    args: *const TVMValue,
    type_codes: *const i32,
    num_args: i32,
    resource_handle: *mut c_void,
    out: *mut *mut u8,
) -> Result<(), String> {
    let n = spec.args.len();
    if usize::try_from(num_args).ok() != Some(n) {
        return Err(format!("expected {n} arguments, got {num_args}"));
    }
    if n > 0 && (args.is_null() || type_codes.is_null() || out.is_null()) {
        return Err("null argument array".into());
    }
    for (i, arg) in spec.args.iter().enumerate() {
        let at = |what: String| format!("argument {i} ({}): {what}", arg.name);
        // SAFETY: `i < num_args`, for which both arrays are valid.
        let (code, value) = unsafe { (*type_codes.add(i), *args.add(i)) };
        if code != TYPE_CODE_DLTENSOR_HANDLE && code != TYPE_CODE_NDARRAY_HANDLE {
            return Err(at(format!(
                "expected a tensor (type code {TYPE_CODE_DLTENSOR_HANDLE}), got type code {code}"
            )));
        }
        // SAFETY: a tensor argument's value is a handle, null or a valid `DLTensor*`.
        let Some(t) = (unsafe { value.v_handle.cast::<DLTensor>().as_ref() }) else {
            return Err(at("null tensor".into()));
        };
        if t.device.device_type != DEVICE_CPU {
            return Err(at(format!(
                "expected a CPU tensor (device type {DEVICE_CPU}), got device type {}",
                t.device.device_type
            )));
        }
        if t.dtype != arg.dtype {
            return Err(at(format!(
                "expected dtype {}, got {}",
                dtype_name(arg.dtype),
                dtype_name(t.dtype)
            )));
        }
        if usize::try_from(t.ndim).ok() != Some(arg.shape.len()) {
            return Err(at(format!(
                "expected rank {}, got {}",
                arg.shape.len(),
                t.ndim
            )));
        }
        let rank = arg.shape.len();
        let shape: &[i64] = if rank == 0 {
            &[]
        } else if t.shape.is_null() {
            return Err(at("null shape".into()));
        } else {
            // SAFETY: `shape` is valid for `ndim == rank` elements.
            unsafe { std::slice::from_raw_parts(t.shape, rank) }
        };
        if shape != arg.shape.as_slice() {
            return Err(at(format!("expected shape {:?}, got {shape:?}", arg.shape)));
        }
        if rank > 0 && !t.strides.is_null() {
            // SAFETY: `strides`, when not null, is valid for `ndim` elements.
            let strides = unsafe { std::slice::from_raw_parts(t.strides, rank) };
            if !strides_compact(shape, strides) {
                return Err(at(format!(
                    "expected compact row-major strides {:?}, got {strides:?}",
                    compact_strides(shape)
                )));
            }
        }
        let empty = shape.contains(&0);
        let first = (t.data as u64).checked_add(t.byte_offset);
        let Some(first) = first else {
            return Err(at("data pointer plus byte offset overflows".into()));
        };
        if !empty {
            if t.data.is_null() {
                return Err(at("null data".into()));
            }
            let alignment = spec.alignment.max(1);
            if first % alignment != 0 {
                return Err(at(format!(
                    "data at {first:#x} (byte offset {}) is not {alignment}-byte aligned",
                    t.byte_offset
                )));
            }
        }
        // SAFETY: `out` is valid for one write per argument.
        unsafe { *out.add(i) = t.data.cast::<u8>().wrapping_add(t.byte_offset as usize) };
    }
    if !spec.scratch.is_empty() {
        // SAFETY: by this function's contract, `resource_handle` is null or a live context.
        let Some(ctx) = (unsafe { resource_handle.cast::<KernelContext>().as_mut() }) else {
            return Err(
                "the kernel needs a kernel context (resource handle) for its scratch \
                        buffers, got null"
                    .into(),
            );
        };
        // SAFETY: `out` is valid for one write per argument and scratch buffer.
        if unsafe { ctx.scratch(&spec.scratch, out.add(n)) }.is_none() {
            let total: u64 = spec.scratch.iter().fold(0u64, |a, &b| a.saturating_add(b));
            return Err(format!(
                "cannot allocate {total} bytes of scratch workspace"
            ));
        }
    }
    Ok(())
}
