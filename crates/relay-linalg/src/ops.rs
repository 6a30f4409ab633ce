//! The table of host kernels per instruction set, as tract-linalg's `Ops`: one [`Ops`] for each
//! ISA this CPU runs, filled once at start-up, and the one a call uses picked by its
//! [`KernelContext`](crate::KernelContext) (the detected ISA, or the override). Every entry of
//! a table runs on its ISA, so a caller holding an `&Ops` may call any of them.

use std::sync::OnceLock;

use crate::gemm::Kernel;
use crate::gemm::gemv::{self, GemvFn};
use crate::gemm::narrow::{self, NarrowFn};
use crate::isa::{Isa, IsaError};
use crate::pointwise::{self, PointwiseFn};
use crate::rnn::{self, GruFn, LstmFn};
use crate::softmax::{self, ExpRowsFn, SoftmaxFn};

/// The host kernels of one instruction set.
pub struct Ops {
    /// The instruction set every entry runs on (the depthwise convolution picks its row
    /// kernels by it).
    pub isa: Isa,
    /// The float32 GEMM's microkernel and blocking.
    pub sgemm: &'static Kernel<f32>,
    /// The float64 GEMM's microkernel and blocking.
    pub dgemm: &'static Kernel<f64>,
    /// The float32 matrix-vector product over contiguous rows.
    pub sgemv: GemvFn<f32>,
    /// The float64 matrix-vector product.
    pub dgemv: GemvFn<f64>,
    /// The float32 product with a narrow result (at most 16 columns).
    pub snarrow: NarrowFn<f32>,
    /// The LSTM recurrence.
    pub lstm: LstmFn,
    /// The GRU recurrence.
    pub gru: GruFn,
    /// Softmax and log-softmax of rows.
    pub softmax: SoftmaxFn,
    /// A softmax's numerators and row sums, unnormalized.
    pub exp_rows: ExpRowsFn,
    /// A block of a function of one variable.
    pub pointwise: PointwiseFn,
}

impl std::fmt::Debug for Ops {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ops")
            .field("isa", &self.isa)
            .finish_non_exhaustive()
    }
}

impl Ops {
    /// The table of `isa`, or an error if this CPU cannot run it.
    pub fn for_isa(isa: Isa) -> Result<&'static Ops, IsaError> {
        let isa = isa.check()?;
        let tables = Ops::tables();
        Ok(tables
            .iter()
            .find(|ops| ops.isa == isa)
            .unwrap_or(&tables[0]))
    }

    /// The table kernels use unless told otherwise ([`Isa::process_default`]; found once).
    pub fn process_default() -> &'static Ops {
        static DEFAULT: OnceLock<&'static Ops> = OnceLock::new();
        DEFAULT.get_or_init(|| Ops::for_isa(Isa::process_default()).unwrap_or(&Ops::tables()[0]))
    }

    /// The tables of every ISA this CPU runs, portable first (filled on first use).
    fn tables() -> &'static [Ops] {
        static TABLES: OnceLock<Vec<Ops>> = OnceLock::new();
        TABLES.get_or_init(|| Isa::available().into_iter().map(Ops::fill).collect())
    }

    /// The kernels of `isa`, one this CPU runs.
    fn fill(isa: Isa) -> Ops {
        Ops {
            isa,
            sgemm: <f32 as crate::gemm::Element>::kernel(isa),
            dgemm: <f64 as crate::gemm::Element>::kernel(isa),
            sgemv: gemv::sgemv_for(isa),
            dgemv: gemv::dgemv_for(isa),
            snarrow: narrow::snarrow_for(isa),
            lstm: rnn::lstm_for(isa),
            gru: rnn::gru_for(isa),
            softmax: softmax::softmax_for(isa),
            exp_rows: softmax::exp_rows_for(isa),
            pointwise: pointwise::pointwise_for(isa),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_available_isa_has_a_table_of_its_own_kernels() {
        for isa in Isa::available() {
            let ops = Ops::for_isa(isa).unwrap();
            assert_eq!(ops.isa, isa);
            assert_eq!(ops.sgemm.isa, isa);
            assert_eq!(ops.dgemm.isa, isa);
        }
        for isa in Isa::ALL.into_iter().filter(|i| !i.runs_here()) {
            assert!(Ops::for_isa(isa).is_err());
        }
    }
}
