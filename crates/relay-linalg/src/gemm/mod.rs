//! The contraction core: a packed, cache-blocked GEMM in the style of BLIS and ONNX Runtime's
//! MLAS, with microkernels for AVX-512F, AVX2 + FMA and a portable fallback chosen at run time
//! (docs/design.md, "The contraction core").
//!
//! `c = a · b` runs, on each thread's share of `c` (MR/NR-aligned blocks of rows and columns,
//! [`split`]), the five loops of Goto's algorithm: columns in blocks of `NC`, the inner
//! dimension in blocks of `KC` (a `KC × NC` block of `b` packed into `NR`-column panels), rows
//! in blocks of `MC` (an `MC × KC` block of `a` packed into `MR`-row panels), then the
//! microkernel over the `MR × NR` tiles. Operands inside an executable's constants (weights)
//! are packed once, whole, and reused ([`prepacked`]).

#[cfg(target_arch = "x86_64")]
mod avx512;
pub mod epilogue;
pub mod gemv;
pub mod half_epilogue;
pub(crate) mod kernels;
pub mod narrow;
pub mod operand;
pub(crate) mod pack;
pub mod prepacked;

use kernels::MicroKernel;
pub use operand::{F16, Operand};

/// An element type the GEMM computes in.
pub trait Element:
    epilogue::Epilogued
    + Copy
    + Send
    + Sync
    + 'static
    + std::ops::Add<Output = Self>
    + std::ops::Mul<Output = Self>
    + PartialEq
    + std::fmt::Debug
{
    /// Zero.
    const ZERO: Self;
    /// A tag for the packed-operand cache's keys.
    const TAG: u8;
    /// The microkernel and blocking for `isa` (the portable one's if it has none), what
    /// [`Ops`](crate::Ops) tables hold.
    fn kernel(isa: Isa) -> &'static Kernel<Self>;
    /// The microkernel and blocking of a table.
    fn of(ops: &crate::Ops) -> &'static Kernel<Self>;
}

pub use crate::isa::Isa;

/// A microkernel with its tile (`mr × nr`) and cache blocking (`kc`, `mc`, `nc`).
pub struct Kernel<T> {
    /// The ISA the microkernel needs.
    pub isa: Isa,
    /// Rows of a tile.
    pub mr: usize,
    /// Columns of a tile.
    pub nr: usize,
    /// The inner dimension's block (a packed panel's depth).
    pub kc: usize,
    /// Rows of a packed block of `a` (a multiple of `mr`).
    pub mc: usize,
    /// Columns of a packed block of `b` (a multiple of `nr`).
    pub nc: usize,
    /// The rows an edge tile costs are its rows rounded up to a multiple of this (1 when
    /// the microkernel has a loop per row count, `mr` when it computes whole tiles).
    pub row_step: usize,
    /// As `row_step`, for columns (a vector when the microkernel has a one-vector loop).
    pub col_step: usize,
    /// Whether the microkernel can read `b` in place (rows `ldb` apart, masked at the edge)
    /// instead of from a packed panel.
    pub direct_b: bool,
    /// Whether the microkernel prefetches the packed panel of `b` it reads (else the driver
    /// prefetches the next panel, a part before each row tile of the current one).
    pub prefetches_b: bool,
    micro: MicroKernel<T>,
}

macro_rules! element {
    ($t:ty, $tag:literal, $field:ident, $avx512:ident, $avx2:ident, $mr512:literal, $nr512:literal,
     $mr2:literal, $nr2:literal) => {
        impl Element for $t {
            const ZERO: $t = 0.0;
            const TAG: u8 = $tag;

            fn of(ops: &crate::Ops) -> &'static Kernel<$t> {
                ops.$field
            }

            fn kernel(isa: Isa) -> &'static Kernel<$t> {
                static PORTABLE: Kernel<$t> = Kernel {
                    isa: Isa::Portable,
                    mr: 4,
                    nr: 8,
                    kc: 256,
                    mc: 128,
                    nc: 2048,
                    row_step: 4,
                    col_step: 8,
                    direct_b: false,
                    prefetches_b: false,
                    micro: kernels::portable::<$t, 4, 8>,
                };
                #[cfg(target_arch = "x86_64")]
                static AVX512: Kernel<$t> = Kernel {
                    isa: Isa::Avx512,
                    mr: $mr512,
                    nr: $nr512,
                    kc: 256,
                    mc: 16 * $mr512,
                    nc: 2048,
                    row_step: 1,
                    col_step: $nr512 / 2,
                    direct_b: true,
                    prefetches_b: true,
                    micro: kernels::x86::$avx512,
                };
                #[cfg(target_arch = "x86_64")]
                static AVX2: Kernel<$t> = Kernel {
                    isa: Isa::Avx2,
                    mr: $mr2,
                    nr: $nr2,
                    kc: 256,
                    mc: 24 * $mr2,
                    nc: 2048,
                    row_step: 1,
                    col_step: $nr2,
                    direct_b: false,
                    prefetches_b: false,
                    micro: kernels::x86::$avx2,
                };
                match isa {
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx512 => &AVX512,
                    #[cfg(target_arch = "x86_64")]
                    Isa::Avx2 => &AVX2,
                    _ => &PORTABLE,
                }
            }
        }
    };
}

element!(f32, 0, sgemm, sgemm_avx512, sgemm_avx2, 12, 32, 6, 16);
element!(f64, 1, dgemm, dgemm_avx512, dgemm_avx2, 12, 16, 6, 8);

/// A strided matrix view: element `(i, j)` at `ptr + i·rs + j·cs`.
#[derive(Clone, Copy, Debug)]
pub struct Matrix<T> {
    /// Element `(0, 0)`.
    pub ptr: *const T,
    /// Rows.
    pub rows: usize,
    /// Columns.
    pub cols: usize,
    /// Elements between rows.
    pub rs: isize,
    /// Elements between columns.
    pub cs: isize,
}

// SAFETY: a view only read (operands), or written in disjoint tiles (the result), by the
// threads of one GEMM; the caller keeps the memory alive for the call.
unsafe impl<T> Send for Matrix<T> {}
// SAFETY: as above.
unsafe impl<T> Sync for Matrix<T> {}

impl<T> Matrix<T> {
    /// The transposed view.
    pub fn transposed(&self) -> Matrix<T> {
        Matrix {
            ptr: self.ptr,
            rows: self.cols,
            cols: self.rows,
            rs: self.cs,
            cs: self.rs,
        }
    }

    /// The address of element `(i, j)`.
    ///
    /// # Safety
    ///
    /// `(i, j)` is inside the view.
    pub unsafe fn at(&self, i: usize, j: usize) -> *const T {
        // SAFETY: by the contract.
        unsafe { self.ptr.offset(i as isize * self.rs + j as isize * self.cs) }
    }
}

mod driver;
pub mod window;
pub use driver::{gemm, gemm_window, prepack};
pub use epilogue::Epilogue;
pub use window::Window;

#[cfg(test)]
mod tests;

#[cfg(test)]
mod window_tests;

#[cfg(test)]
mod epilogue_tests;
