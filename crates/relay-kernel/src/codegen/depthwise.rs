//! A [`Depthwise`] statement: its operands checked against their buffers (when the kernel is
//! compiled: offsets and shapes are constants), its shape stored in a stack slot, then a call
//! of the host's depthwise convolution.

use super::*;
use crate::loops::Depthwise;
use relay_linalg::depthwise::{DEPTHWISE_F32_SYMBOL, PARAM_COUNT};

impl Gen<'_, '_> {
    /// A [`Depthwise`]: calls the host's depthwise convolution with the kernel context, the
    /// shape and the three operands' addresses, returning its error code if it fails.
    pub(super) fn depthwise(&mut self, d: &Depthwise) -> R<()> {
        if !d.params.valid() {
            return Err(self.malformed(format!("a depthwise convolution of shape {:?}", d.params)));
        }
        let mut addrs = Vec::with_capacity(3);
        for ((buffer, offset), len) in d.operands() {
            if self.buffer_dtype(buffer)? != DType::F32 {
                return Err(self.malformed("a depthwise convolution on other than float32"));
            }
            let len = len.unwrap_or(i64::MAX);
            let end = offset.checked_add(len);
            if offset < 0 || len > 0 && end.is_none_or(|e| e > self.lens[buffer.0 as usize]) {
                return Err(self.malformed("a depthwise operand outside its buffer"));
            }
            let base = self.bases[buffer.0 as usize];
            let first = self.b.ins().iconst(types::I64, offset);
            addrs.push(self.element_addr(base, first, 4));
        }
        let ctx = self
            .ctx
            .ok_or_else(|| self.malformed("a depthwise convolution outside the body"))?;
        let slot = self.b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            (PARAM_COUNT * 8) as u32,
            3,
        ));
        let params = self.b.ins().stack_addr(self.ptr, slot, 0);
        for (i, v) in d.params.to_array().into_iter().enumerate() {
            let v = self.b.ins().iconst(types::I64, v);
            let flags = MemFlagsData::new().with_notrap();
            self.b.ins().store(flags, v, params, (i * 8) as i32);
        }
        let epilogue = self.depthwise_epilogue(d, &addrs[3..])?;
        let f = self.host_import(DEPTHWISE_F32_SYMBOL, 6)?;
        let args = [ctx, params, addrs[0], addrs[1], addrs[2], epilogue];
        let call = self.b.ins().call(f, &args);
        let rc = self.b.inst_results(call)[0];
        let failed = self.b.ins().icmp_imm_s(IntCC::NotEqual, rc, 0);
        self.fail_if(failed, ERR_HOST);
        Ok(())
    }

    /// The address of `d`'s epilogue (a `DepthwiseEpilogue` in a stack slot: the scale's and
    /// shift's addresses, null when absent, then `lo` and `hi`), or null when it has none;
    /// `addrs` are the scale's and shift's addresses, those present, in that order.
    fn depthwise_epilogue(&mut self, d: &Depthwise, addrs: &[Value]) -> R<Value> {
        let e = &d.epilogue;
        if *e == crate::loops::DepthwiseEpilogue::NONE {
            return Ok(self.b.ins().iconst(self.ptr, 0));
        }
        let slot =
            self.b
                .create_sized_stack_slot(StackSlotData::new(StackSlotKind::ExplicitSlot, 24, 3));
        let at = self.b.ins().stack_addr(self.ptr, slot, 0);
        let flags = MemFlagsData::new().with_notrap();
        let mut given = addrs.iter();
        for (i, present) in [e.scale.is_some(), e.shift.is_some()]
            .into_iter()
            .enumerate()
        {
            let v = match present.then(|| given.next()) {
                Some(Some(&a)) => a,
                Some(None) => {
                    return Err(self.malformed("a depthwise epilogue without its operand"));
                }
                None => self.b.ins().iconst(self.ptr, 0),
            };
            self.b.ins().store(flags, v, at, (i * 8) as i32);
        }
        for (i, bound) in [e.lo, e.hi].into_iter().enumerate() {
            let v = self.b.ins().f32const(bound);
            self.b.ins().store(flags, v, at, (16 + i * 4) as i32);
        }
        Ok(at)
    }

    /// The host function `symbol` taking `pointers` pointer arguments and returning an
    /// `int32` code, imported once per kernel.
    pub(super) fn host_import(&mut self, symbol: &str, pointers: usize) -> R<FuncRef> {
        let params = vec![self.ptr; pointers];
        self.import(symbol, &params, types::I32)
    }

    /// The host function `symbol` with these parameter types and one result of type `ret`,
    /// imported once per kernel.
    pub(super) fn import(&mut self, symbol: &str, params: &[Type], ret: Type) -> R<FuncRef> {
        if let Some(f) = self.imports.get(symbol) {
            return Ok(*f);
        }
        let mut sig = Signature::new(self.module.isa().default_call_conv());
        sig.params.extend(params.iter().map(|&t| AbiParam::new(t)));
        sig.returns.push(AbiParam::new(ret));
        let id = self
            .module
            .declare_function(symbol, Linkage::Import, &sig)
            .map_err(|e| KernelError::Codegen {
                kernel: self.func.name.clone(),
                message: e.to_string(),
            })?;
        let f = self.module.declare_func_in_func(id, self.b.func);
        self.imports.insert(symbol.to_string(), f);
        Ok(f)
    }
}
