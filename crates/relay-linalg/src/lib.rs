//! The host kernel library (MLAS's and tract-linalg's place in relayc): the routines compiled
//! kernels call for what a loop nest does poorly, and the machinery they run on. It knows
//! nothing of Relay: its inputs are pointers, strides and sizes.
//!
//! - [`gemm`]: the packed, cache-blocked GEMM with its microkernels, fused epilogues, implicit
//!   convolution windows and the packed forms of constant operands ([`gemm::prepacked`]);
//! - [`depthwise`]: depthwise and grouped convolutions with fused epilogues;
//! - [`rnn`]: the LSTM and GRU recurrences with fused gates;
//! - [`softmax`]: softmax and log-softmax over rows, one memory pass, with a fused scaling;
//! - [`pointwise`]: a function of one variable over every element (`gelu(x + bias)`), in
//!   blocks at the instruction set's width;
//! - [`reduce`]: sums, means, products and extremes over a run of axes at run-time sizes;
//! - [`copy`]: strided copies between views (transposes, slices, concatenations at run-time
//!   shapes), transposing a 4-byte tile at a time (`transpose`, which packing shares);
//! - [`isa`] and [`ops`]: the instruction sets the kernels have code for and the table of
//!   kernels per instruction set, chosen once at start-up (or by `RELAYC_ISA`, for testing and
//!   benchmarking every path on one machine);
//! - [`pool`] and [`context`]: the thread pool and the [`KernelContext`] a call runs with (its
//!   threads, its workspace, its instruction set, the packed constants of the executable).

pub mod context;
pub mod copy;
pub mod depthwise;
pub mod gemm;
pub mod isa;
pub mod math;
pub mod nchwc;
pub mod ops;
pub mod peak;
pub mod pointwise;
pub mod pool;
pub mod reduce;
pub mod rnn;
pub mod softmax;
mod transpose;

pub use context::{DATA_ALIGNMENT, KernelContext};
pub use isa::{Isa, IsaError};
pub use ops::Ops;
