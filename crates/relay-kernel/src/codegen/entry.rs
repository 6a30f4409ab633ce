//! The packed entry: TVM's packed C ABI around a kernel's body function — argument checks
//! against the buffers' dtypes and shapes, the workspace of scratch buffers, the error slot.

use super::*;

/// Defines the packed entry of a kernel whose body is `body_id`.
#[allow(clippy::too_many_arguments)]
pub(super) fn define_entry(
    module: &mut JITModule,
    func: &LoopFunc,
    index: usize,
    body_id: FuncId,
    spec: &Arc<KernelSpec>,
    ctx: &mut Context,
    fctx: &mut FunctionBuilderContext,
    listing: Option<&mut Listing>,
) -> Result<FuncId, KernelError> {
    let codegen_err = |e: String| KernelError::Codegen {
        kernel: func.name.clone(),
        message: e,
    };
    let ptr = module.target_config().pointer_type();
    let mut sig = module.make_signature();
    for ty in [ptr, ptr, types::I32, ptr, ptr, ptr] {
        sig.params.push(AbiParam::new(ty));
    }
    sig.returns.push(AbiParam::new(types::I32));
    let name = format!("k{index}.{}", func.name);
    let id = module
        .declare_function(&name, Linkage::Export, &sig)
        .map_err(|e| codegen_err(e.to_string()))?;

    let mut check_sig = module.make_signature();
    for ty in [ptr, ptr, ptr, types::I32, ptr, ptr] {
        check_sig.params.push(AbiParam::new(ty));
    }
    check_sig.returns.push(AbiParam::new(types::I32));
    let check_id = module
        .declare_function(CHECK_ARGS_SYMBOL, Linkage::Import, &check_sig)
        .map_err(|e| codegen_err(e.to_string()))?;
    let mut report_sig = module.make_signature();
    for ty in [ptr, types::I32, ptr] {
        report_sig.params.push(AbiParam::new(ty));
    }
    let report_id = module
        .declare_function(REPORT_SYMBOL, Linkage::Import, &report_sig)
        .map_err(|e| codegen_err(e.to_string()))?;

    ctx.func.signature = sig;
    {
        let config = module.target_config();
        let mut b = FunctionBuilder::new(&mut ctx.func, fctx);
        let check = module.declare_func_in_func(check_id, b.func);
        let report = module.declare_func_in_func(report_id, b.func);
        let body = module.declare_func_in_func(body_id, b.func);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        let params = b.block_params(entry).to_vec();
        let (args, codes, num, rh) = (params[0], params[1], params[2], params[5]);
        let slot_size = u32::try_from(func.buffers.len().max(1) * 8)
            .map_err(|_| codegen_err("too many buffers".into()))?;
        let slot = b.create_sized_stack_slot(StackSlotData::new(
            StackSlotKind::ExplicitSlot,
            slot_size,
            3,
        ));
        let ptrs = b.ins().stack_addr(ptr, slot, 0);
        // A listing (`--emit clif|asm`) is of code never run: it shows 0 instead of the
        // spec's address, so that it is the same from run to run.
        let address = if listing.is_some() {
            0
        } else {
            Arc::as_ptr(spec) as usize as i64
        };
        let spec_addr = b.ins().iconst(ptr, address);
        let call = b
            .ins()
            .call(check, &[spec_addr, args, codes, num, rh, ptrs]);
        let rc = b.inst_results(call)[0];
        let (fail, ok, report_block, done) = (
            b.create_block(),
            b.create_block(),
            b.create_block(),
            b.create_block(),
        );
        b.ins().brif(rc, fail, &[], ok, &[]);
        b.switch_to_block(ok);
        let call = b.ins().call(body, &[ptrs, rh]);
        let code = b.inst_results(call)[0];
        b.ins()
            .brif(code, report_block, &[BlockArg::Value(code)], done, &[]);
        b.append_block_param(report_block, types::I32);
        b.switch_to_block(report_block);
        let code = b.block_params(report_block)[0];
        b.ins().call(report, &[spec_addr, code, rh]);
        let minus_one = b.ins().iconst(types::I32, -1);
        b.ins().return_(&[minus_one]);
        b.switch_to_block(done);
        let zero = b.ins().iconst(types::I32, 0);
        b.ins().return_(&[zero]);
        b.switch_to_block(fail);
        let minus_one = b.ins().iconst(types::I32, -1);
        b.ins().return_(&[minus_one]);
        b.seal_all_blocks();
        b.finalize(config);
    }
    let what = listing.as_ref().map(|l| l.what);
    let imports = if what == Some(CodeText::Clif) {
        format!("; fn0 = {CHECK_ARGS_SYMBOL}\n; fn1 = {REPORT_SYMBOL}\n; fn2 = the body\n")
    } else {
        String::new()
    };
    let header = format!(
        "; kernel {} packed entry\n{imports}; (the KernelSpec's address shows as 0)\n",
        func.name
    );
    let text = compile_function(module, id, ctx, what, &header).map_err(codegen_err)?;
    if let Some(listing) = listing {
        listing.text.push_str(&text);
    }
    Ok(id)
}
