//! Runtime values shared by every layer of relayc: the DLPack data type ([`DType`]), the
//! 64-byte aligned, compact, row-major [`NDArray`], and the byte [`Storage`] that tensor views
//! are placed in.
//!
//! This crate is the bottom of the dependency graph, as TVM's runtime is: the IR holds constants
//! as `NDArray`s, and the interpreter, kernels and VM all read and write them.
//!
//! Invariants: an `NDArray` holds exactly `num_elements * dtype.size_bytes()` bytes laid out
//! compactly in row-major order; its own buffer is always 64-byte aligned, and a view into a
//! `Storage` (always 64-byte aligned) starts at an offset aligned to its element size and ends
//! within the storage.

mod dtype;
pub mod elements;
mod ndarray;
pub mod npy;
mod storage;
mod transpose;
mod value;

pub use dtype::{DType, DTypeCode};
pub use ndarray::{ALIGNMENT, Device, NDArray, NDArrayError};
pub use storage::{Home, Storage};
pub use value::{AdtValue, Value};

pub mod half;
pub mod minifloat;
