//! TVM's packed-function C ABI over DLPack tensors (DESIGN §5, `reference/tvm-vm.md` §4): the
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
#[derive(Debug)]
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

/// The kernel context a kernel's `resource_handle` points to (tvm-rfcs #34): where it reports
/// errors, and (later) its thread pool and scratch workspace.
#[derive(Debug, Default)]
pub struct KernelContext {
    /// The message of the last failed call (`kernel fused_add: argument 1 (p1): expected shape
    /// [2, 3], got [3, 2]`).
    pub error: Option<String>,
}
