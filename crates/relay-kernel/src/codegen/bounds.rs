//! Bounds checks: an index interval arithmetic proves within its buffer ([`Ranges`]) needs no
//! run-time check; any other gets one returning `ERR_OUT_OF_BOUNDS`.

use super::*;

impl Gen<'_, '_> {
    /// Whether interval arithmetic proves `index` within `buffer`.
    pub(super) fn index_in_bounds(&self, buffer: BufferId, index: &LExpr) -> bool {
        let n = i128::from(self.lens[buffer.0 as usize]);
        self.ranges
            .range(self.func, index)
            .is_some_and(|(lo, hi)| lo >= 0 && hi < n)
    }

    /// Returns `ERR_OUT_OF_BOUNDS` unless `0 <= index < len(buffer)`.
    pub(super) fn check_index(&mut self, buffer: BufferId, index: Value) -> R<()> {
        let n = self.lens[buffer.0 as usize];
        let out = self
            .b
            .ins()
            .icmp_imm_s(IntCC::UnsignedGreaterThanOrEqual, index, n);
        self.fail_if(out, ERR_OUT_OF_BOUNDS);
        Ok(())
    }

    /// Checks `first .. first + lanes` within `buffer`.
    pub(super) fn check_ramp(&mut self, buffer: BufferId, first: Value, lanes: u32) -> R<()> {
        self.check_index(buffer, first)?;
        let last = self.b.ins().iadd_imm_s(first, i64::from(lanes) - 1);
        self.check_index(buffer, last)
    }
}
