//! Prepacking: the constant weights of the products the kernel library computes at any shape
//! are packed when a VM is made, before its first call, as ONNX Runtime packs them when a
//! session is made (MLAS's prepacked B), instead of by the first call that reads them.

use std::collections::HashMap;

use relay_ir::NDArray;
use relay_linalg::KernelContext;

use crate::bytecode::{Instruction, Operand, Reg, VmFunction};
use crate::executable::Executable;

impl Executable {
    /// Packs the constant operands of the generic kernels' products (the kernel library's,
    /// `PackedFunc::prepack`) for calls with `ctx` (a VM's context: its instruction set and
    /// the executable's [`Executable::packed_constants`]): each kernel call whose input is a
    /// register only a `load_const` writes. A packed form is kept with the constants, so the
    /// VMs after the first find it made.
    pub fn prepack(&self, ctx: &KernelContext) {
        for f in &self.functions {
            let constants = constant_registers(f);
            if constants.is_empty() {
                continue;
            }
            for ins in &f.code {
                let (kernel, inputs) = match ins {
                    Instruction::InvokePacked { kernel, inputs, .. }
                    | Instruction::InvokePackedAlloc { kernel, inputs, .. }
                    | Instruction::InvokePackedUpdate { kernel, inputs, .. } => (kernel, inputs),
                    _ => continue,
                };
                let args: Vec<Option<&NDArray>> = inputs
                    .iter()
                    .map(|r| {
                        constants
                            .get(r)
                            .and_then(|&i| self.constants.get(i as usize))
                    })
                    .map(|c| c.map(|c| &**c))
                    .collect();
                let entry = self.kernels.get(*kernel as usize);
                if args.iter().all(Option::is_none) || !entry.is_some_and(|e| e.dynamic) {
                    continue;
                }
                let generic = entry.and_then(|e| e.generic_kernel());
                // Tuples are passed as their fields: a count that differs is one.
                if let Some(k) = generic.filter(|k| k.num_inputs() == args.len()) {
                    k.prepack(ctx, &args);
                }
            }
        }
    }
}

/// The registers of `f` that only a `load_const` writes, with the constant's index.
fn constant_registers(f: &VmFunction) -> HashMap<Reg, u32> {
    let mut writes: HashMap<Reg, u32> = HashMap::new();
    let mut loads = HashMap::new();
    for ins in &f.code {
        let _ = ins.try_for_each_operand(|op| {
            if let Operand::RegOut(r) = op {
                *writes.entry(r).or_default() += 1;
            }
            Ok::<(), ()>(())
        });
        if let Instruction::LoadConst { index, dst } = ins {
            loads.insert(*dst, *index);
        }
    }
    loads.retain(|r, _| writes.get(r) == Some(&1));
    loads
}
