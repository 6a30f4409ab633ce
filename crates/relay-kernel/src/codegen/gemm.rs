//! A [`Gemm`] statement: the matrices checked against their buffers, then a call of the
//! host's GEMM routine.

use super::*;
use crate::host::{DGEMM_WINDOW_SYMBOL, HGEMM_WINDOW_SYMBOL, SGEMM_WINDOW_SYMBOL};
use crate::loops::{GemmEpilogue, ImageWindow, MatrixRef};
use relay_linalg::gemm::epilogue::{EpilogueCall, Lower, Step, StepCall};

impl Gen<'_, '_> {
    /// A [`Gemm`]: checks that the three matrices lie within their buffers and calls the
    /// host's GEMM, returning its error code if it fails.
    pub(super) fn gemm(&mut self, g: &Gemm) -> R<()> {
        let d = self.buffer_dtype(g.c.buffer)?;
        if !is_float(d) || ![16, 32, 64].contains(&d.bits) {
            return Err(self.malformed(format!("a GEMM on {d} buffers")));
        }
        for m in g.matrices() {
            if self.buffer_dtype(m.buffer)? != d {
                return Err(self.malformed("a GEMM's buffers have different dtypes"));
            }
        }
        let steps = g.epilogue.steps.len();
        if steps > relay_linalg::gemm::epilogue::MAX_STEPS {
            return Err(self.malformed(format!("a GEMM epilogue of {steps} steps")));
        }
        if [
            g.m,
            g.n,
            g.k,
            g.a.row_stride,
            g.a.col_stride,
            g.b.row_stride,
            g.b.col_stride,
            g.c.row_stride,
            g.c.col_stride,
        ]
        .iter()
        .any(|&v| v < 0)
        {
            return Err(self.malformed("a GEMM with a negative size or stride"));
        }
        if g.m == 0 || g.n == 0 {
            return Ok(());
        }
        let size = i64::from(d.bits / 8);
        // An image window's `b` is its image, one row of `C·H·W` elements.
        let b = match &g.window {
            Some(w) => (
                &MatrixRef {
                    row_stride: 0,
                    col_stride: 1,
                    ..g.b.clone()
                },
                1,
                w.image_len()
                    .ok_or_else(|| self.malformed("a GEMM image window too large"))?,
            ),
            None => (&g.b, g.k, g.n),
        };
        let mut addrs = Vec::with_capacity(3 + steps);
        let epilogue = g.epilogue.steps.iter().map(|(_, m)| (m, g.m, g.n));
        for (m, rows, cols) in [(&g.a, g.m, g.k), b, (&g.c, g.m, g.n)]
            .into_iter()
            .chain(epilogue)
        {
            let (first, fd) = self.expr(&m.offset)?;
            if fd != DType::I64 {
                return Err(self.malformed("a GEMM offset must be int64"));
            }
            if rows > 0 && cols > 0 {
                let span = (rows - 1)
                    .checked_mul(m.row_stride)
                    .and_then(|r| {
                        (cols - 1)
                            .checked_mul(m.col_stride)
                            .and_then(|c| r.checked_add(c))
                    })
                    .ok_or_else(|| self.malformed("a GEMM matrix is too large"))?;
                self.check_index(m.buffer, first)?;
                let last = self.b.ins().iadd_imm_s(first, span);
                self.check_index(m.buffer, last)?;
            }
            let base = self.bases[m.buffer.0 as usize];
            addrs.push(self.element_addr(base, first, size));
        }
        let ctx = self
            .ctx
            .ok_or_else(|| self.malformed("a GEMM outside the body"))?;
        let epilogue = self.gemm_epilogue(&g.epilogue, &addrs[3..])?;
        if let Some(w) = &g.window {
            return self.gemm_window(g, w, ctx, &addrs, epilogue);
        }
        let symbol = match d.bits {
            16 => HGEMM_SYMBOL,
            32 => SGEMM_SYMBOL,
            _ => DGEMM_SYMBOL,
        };
        let (ptr, int) = (self.ptr, types::I64);
        let params = [
            ptr, int, int, int, ptr, int, int, ptr, int, int, ptr, int, int, ptr,
        ];
        let f = self.import(symbol, &params, types::I32)?;
        let mut args = vec![ctx];
        for v in [g.m, g.k, g.n] {
            args.push(self.b.ins().iconst(types::I64, v));
        }
        for (m, addr) in [&g.a, &g.b, &g.c].into_iter().zip(addrs) {
            args.push(addr);
            args.push(self.b.ins().iconst(types::I64, m.row_stride));
            args.push(self.b.ins().iconst(types::I64, m.col_stride));
        }
        args.push(epilogue);
        let call = self.b.ins().call(f, &args);
        let rc = self.b.inst_results(call)[0];
        let failed = self.b.ins().icmp_imm_s(IntCC::NotEqual, rc, 0);
        self.fail_if(failed, ERR_HOST);
        Ok(())
    }

    /// A [`Gemm`] whose `b` is image window `w` (`addrs`: the addresses of `a`, the image
    /// and `c`; `epilogue` the epilogue's address or null): the call's shape
    /// (`host::GemmWindowCall`) in a stack slot, then a call of the host's GEMM with an image
    /// window for the dtype ([`SGEMM_WINDOW_SYMBOL`], ...).
    fn gemm_window(
        &mut self,
        g: &Gemm,
        w: &ImageWindow,
        ctx: Value,
        addrs: &[Value],
        epilogue: Value,
    ) -> R<()> {
        if !w.valid() || w.depth() != Some(g.k) || w.pixels() != Some(g.n) {
            return Err(self.malformed(format!("a GEMM image window {w:?}")));
        }
        let fields: Vec<i64> = w
            .to_array()
            .into_iter()
            .chain([
                g.m,
                g.a.row_stride,
                g.a.col_stride,
                g.c.row_stride,
                g.c.col_stride,
            ])
            .collect();
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (fields.len() * 8) as u32,
            3,
        ));
        let call = self.b.ins().stack_addr(self.ptr, slot, 0);
        for (i, v) in fields.into_iter().enumerate() {
            let v = self.b.ins().iconst(types::I64, v);
            let flags = MemFlagsData::new().with_notrap();
            self.b.ins().store(flags, v, call, (i * 8) as i32);
        }
        let symbol = match self.buffer_dtype(g.c.buffer)?.bits {
            16 => HGEMM_WINDOW_SYMBOL,
            32 => SGEMM_WINDOW_SYMBOL,
            _ => DGEMM_WINDOW_SYMBOL,
        };
        let f = self.host_import(symbol, 6)?;
        let args = [ctx, call, addrs[0], addrs[1], addrs[2], epilogue];
        let call = self.b.ins().call(f, &args);
        let rc = self.b.inst_results(call)[0];
        let failed = self.b.ins().icmp_imm_s(IntCC::NotEqual, rc, 0);
        self.fail_if(failed, ERR_HOST);
        Ok(())
    }

    /// The address of epilogue `e` as the host reads it ([`EpilogueCall`], in a stack slot;
    /// `operands` the addresses of its steps' operands), or null when it is empty.
    fn gemm_epilogue(&mut self, e: &GemmEpilogue, operands: &[Value]) -> R<Value> {
        if e.is_empty() {
            return Ok(self.b.ins().iconst(self.ptr, 0));
        }
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            size_of::<EpilogueCall>() as u32,
            3,
        ));
        let base = self.b.ins().stack_addr(self.ptr, slot, 0);
        let flags = MemFlagsData::new().with_notrap();
        let steps = std::mem::offset_of!(EpilogueCall, steps);
        let step = size_of::<StepCall>();
        for q in 0..relay_linalg::gemm::epilogue::MAX_STEPS {
            let at = (steps + q * step) as i32;
            let (kind, ptr, rs, cs) = match (e.steps.get(q), operands.get(q)) {
                (Some((kind, m)), Some(&addr)) => {
                    let kind = if *kind == Step::Mul { 1 } else { 2 };
                    (kind, addr, m.row_stride, m.col_stride)
                }
                _ => (0, self.b.ins().iconst(self.ptr, 0), 0, 0),
            };
            let words = [
                (std::mem::offset_of!(StepCall, kind), kind),
                (std::mem::offset_of!(StepCall, rs), rs),
                (std::mem::offset_of!(StepCall, cs), cs),
            ];
            for (off, v) in words {
                let v = self.b.ins().iconst(types::I64, v);
                self.b.ins().store(flags, v, base, at + off as i32);
            }
            let off = at + std::mem::offset_of!(StepCall, ptr) as i32;
            self.b.ins().store(flags, ptr, base, off);
        }
        let (lower_kind, lower) = match e.lower {
            Lower::None => (0, 0.0),
            Lower::Relu(lo) => (1, lo),
            Lower::Clip(lo) => (2, lo),
        };
        let clamps = [
            (
                std::mem::offset_of!(EpilogueCall, upper_kind),
                std::mem::offset_of!(EpilogueCall, upper),
                i64::from(e.upper.is_some()),
                e.upper.unwrap_or(0.0),
            ),
            (
                std::mem::offset_of!(EpilogueCall, lower_kind),
                std::mem::offset_of!(EpilogueCall, lower),
                lower_kind,
                lower,
            ),
        ];
        for (kind_at, bound_at, kind, bound) in clamps {
            let kind = self.b.ins().iconst(types::I64, kind);
            self.b.ins().store(flags, kind, base, kind_at as i32);
            let bound = self.b.ins().f64const(bound);
            self.b.ins().store(flags, bound, base, bound_at as i32);
        }
        Ok(base)
    }
}
