//! Runtime values shared by every layer of relayc: the DLPack data type ([`DType`]) and the
//! 64-byte aligned, compact, row-major [`NDArray`].
//!
//! This crate is the bottom of the dependency graph, as TVM's runtime is: the IR holds constants
//! as `NDArray`s, and the interpreter, kernels and VM all read and write them.
//!
//! Invariants: an `NDArray`'s storage is always 64-byte aligned, holds exactly
//! `num_elements * dtype.size_bytes()` bytes, and is laid out compactly in row-major order.

mod dtype;
pub mod elements;
mod ndarray;
pub mod npy;
mod value;

pub use dtype::{DType, DTypeCode};
pub use ndarray::{Device, NDArray, NDArrayError};
pub use value::{AdtValue, Value};

pub mod half;
