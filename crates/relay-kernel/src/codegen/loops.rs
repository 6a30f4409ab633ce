//! Loops: serial, partitioned (run-time bounds), vectorized (with a scalar remainder) and
//! parallel (outlined into a chunk function the host's thread pool runs), and the statements
//! inside them.

use super::*;

impl Gen<'_, '_> {
    /// Whether a parallel loop's body can be outlined: it reads no local assigned outside it
    /// (other than its counter), so each chunk can start from zeroed locals.
    pub(super) fn outlinable(&self, var: LocalId, body: &Stmt) -> bool {
        let (mut read, mut assigned) = (Vec::new(), vec![var]);
        stmt_locals(body, &mut read, &mut assigned);
        read.iter().all(|l| assigned.contains(l))
    }

    /// Whether a loop of counter `var` over `body` with `lanes` lanes runs as vectors: the
    /// lanes are 2 to 64, the body allows it ([`vector_legal`]) and the target compiles vector
    /// types.
    fn vectorizes(&self, lanes: u32, var: LocalId, body: &Stmt) -> bool {
        self.vectors && (2..=64).contains(&lanes) && vector_legal(var, body)
    }

    /// A parallel loop: its iterations as a function of their range
    /// (`fn(buffers, ctx, lo, hi) -> i32`, vectorized over `lanes` when they allow it), handed
    /// to the host's `relay_kernel_parallel_for`; a chunk's error code fails the kernel.
    pub(super) fn parallel_loop(
        &mut self,
        var: LocalId,
        extent: i64,
        lanes: u32,
        body: &Stmt,
    ) -> R<()> {
        let codegen_err = |kernel: &str, e: &dyn std::fmt::Display| KernelError::Codegen {
            kernel: kernel.to_string(),
            message: e.to_string(),
        };
        let mut sig = self.module.make_signature();
        for ty in [self.ptr, self.ptr, types::I64, types::I64] {
            sig.params.push(AbiParam::new(ty));
        }
        sig.returns.push(AbiParam::new(types::I32));
        let name = format!("{}.par{}", self.symbol, self.outlined);
        self.outlined += 1;
        let id = self
            .module
            .declare_function(&name, Linkage::Local, &sig)
            .map_err(|e| codegen_err(&self.func.name, &e))?;
        let mut ctx = self.module.make_context();
        ctx.func.signature = sig;
        let mut fctx = FunctionBuilderContext::new();
        let mut texts = Vec::new();
        {
            let config = self.module.target_config();
            let b = FunctionBuilder::new(&mut ctx.func, &mut fctx);
            let mut g = Gen::new(self.func, b, &mut *self.module, self.ptr)?;
            g.symbol = name.clone();
            g.listing = self.listing;
            g.ranges = self.ranges.clone();
            let params = g.prologue()?;
            let (lo, hi) = (params[2], params[3]);
            g.loop_between(var, lo, hi, lanes, body)?;
            g.epilogue();
            g.b.seal_all_blocks();
            g.b.finalize(config);
            texts.append(&mut g.outlined_text);
        }
        let header = format!("; kernel {} parallel loop {name}\n", self.func.name);
        let text = compile_function(self.module, id, &mut ctx, self.listing, &header)
            .map_err(|e| codegen_err(&self.func.name, &e))?;
        if self.listing.is_some() {
            texts.push(text);
            self.outlined_text.extend(texts);
        }
        // The call.
        let fref = self.module.declare_func_in_func(id, self.b.func);
        let addr = self.b.ins().func_addr(self.ptr, fref);
        let (ctx_v, ptrs) = (
            self.ctx
                .ok_or_else(|| self.malformed("a parallel loop outside a body"))?,
            self.ptrs
                .ok_or_else(|| self.malformed("a parallel loop outside a body"))?,
        );
        let runner = match self.imports.get(PARALLEL_FOR_SYMBOL) {
            Some(f) => *f,
            None => {
                let mut sig = Signature::new(self.module.isa().default_call_conv());
                for ty in [self.ptr, self.ptr, self.ptr, types::I64] {
                    sig.params.push(AbiParam::new(ty));
                }
                sig.returns.push(AbiParam::new(types::I32));
                let fid = self
                    .module
                    .declare_function(PARALLEL_FOR_SYMBOL, Linkage::Import, &sig)
                    .map_err(|e| codegen_err(&self.func.name, &e))?;
                let f = self.module.declare_func_in_func(fid, self.b.func);
                self.imports.insert(PARALLEL_FOR_SYMBOL.to_string(), f);
                f
            }
        };
        let n = self.b.ins().iconst(types::I64, extent);
        let call = self.b.ins().call(runner, &[ctx_v, addr, ptrs, n]);
        let rc = self.b.inst_results(call)[0];
        self.fail_with(rc);
        Ok(())
    }

    // ----- Statements -----

    pub(super) fn stmt(&mut self, s: &Stmt) -> R<()> {
        match s {
            Stmt::Seq(items) => items.iter().try_for_each(|s| self.stmt(s)),
            Stmt::Gemm(g) => self.gemm(g),
            Stmt::Depthwise(d) => self.depthwise(d),
            Stmt::Range {
                var,
                start,
                end,
                extent,
                kind,
                body,
            } => self.range_loop(*var, start, end, *extent, *kind, body),
            Stmt::Assign { local, value } => {
                let (v, d) = self.expr(value)?;
                let want = self.local_dtype(*local)?;
                if d != want {
                    return Err(self.malformed(format!(
                        "assigning a {d} value to {want} local {}",
                        self.func.locals[local.0 as usize].name
                    )));
                }
                self.b.def_var(self.vars[local.0 as usize], v);
                Ok(())
            }
            Stmt::Store {
                buffer,
                index,
                value,
            } => {
                let (v, d) = self.expr(value)?;
                self.check_store_dtype(*buffer, d)?;
                let addr = self.address(*buffer, index)?;
                self.b
                    .ins()
                    .store(MemFlagsData::new().with_notrap(), v, addr, 0);
                Ok(())
            }
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => {
                if self.local_dtype(*var)?.code != DTypeCode::Int
                    || self.local_dtype(*var)?.bits != 64
                {
                    return Err(self.malformed("a loop counter must be an int64 local"));
                }
                if *extent <= 0 {
                    return Ok(());
                }
                let saved = self.ranges.enter(*var, *extent);
                let result = match kind {
                    ForKind::Parallel { lanes } if *extent > 1 && self.outlinable(*var, body) => {
                        self.parallel_loop(*var, *extent, *lanes, body)
                    }
                    // A parallel loop that cannot be outlined runs here, vectorized if it can be.
                    ForKind::Parallel { lanes } | ForKind::Vectorized { lanes }
                        if self.vectorizes(*lanes, *var, body) =>
                    {
                        let main = extent / i64::from(*lanes) * i64::from(*lanes);
                        if main > 0 {
                            self.vector_loop(*var, main, *lanes, body)?;
                        }
                        self.serial_loop(*var, main, *extent, body)
                    }
                    _ => self.serial_loop(*var, 0, *extent, body),
                };
                self.ranges.leave(*var, saved);
                result
            }
        }
    }

    /// A loop over `start..end`, bounds clamped to `0 <= start <= end <= extent` (so the
    /// counter's range is `0..extent` for bounds checks), vectorized like a `Vectorized` loop
    /// when asked and possible.
    pub(super) fn range_loop(
        &mut self,
        var: LocalId,
        start: &LExpr,
        end: &LExpr,
        extent: i64,
        kind: ForKind,
        body: &Stmt,
    ) -> R<()> {
        if self.local_dtype(var)? != DType::I64 {
            return Err(self.malformed("a loop counter must be an int64 local"));
        }
        if extent <= 0 {
            return Ok(());
        }
        let (s, sd) = self.expr(start)?;
        let (e, ed) = self.expr(end)?;
        if sd != DType::I64 || ed != DType::I64 {
            return Err(self.malformed("loop bounds must be int64"));
        }
        let (zero, max) = (
            self.b.ins().iconst(types::I64, 0),
            self.b.ins().iconst(types::I64, extent),
        );
        let s = self.b.ins().smax(s, zero);
        let s = self.b.ins().smin(s, max);
        let e = self.b.ins().smax(e, s);
        let e = self.b.ins().smin(e, max);
        let saved = self.ranges.enter(var, extent);
        let lanes = match kind {
            ForKind::Vectorized { lanes } => lanes,
            _ => 1,
        };
        let result = self.loop_between(var, s, e, lanes, body);
        self.ranges.leave(var, saved);
        result
    }

    /// `for var in start..end { body }`, one iteration after another.
    pub(super) fn serial_loop(&mut self, var: LocalId, start: i64, end: i64, body: &Stmt) -> R<()> {
        if start >= end {
            return Ok(());
        }
        let v = self.vars[var.0 as usize];
        if end - start == 1 {
            let i = self.b.ins().iconst(types::I64, start);
            self.b.def_var(v, i);
            return self.stmt(body);
        }
        let first = self.b.ins().iconst(types::I64, start);
        let end = self.b.ins().iconst(types::I64, end);
        self.serial_loop_between(var, first, end, body)
    }

    /// `for var in start..end { body }` with bounds known at run time: a vector main loop
    /// over `lanes` (when more than one and the body allows it) and a scalar tail.
    pub(super) fn loop_between(
        &mut self,
        var: LocalId,
        start: Value,
        end: Value,
        lanes: u32,
        body: &Stmt,
    ) -> R<()> {
        if !self.vectorizes(lanes, var, body) {
            return self.serial_loop_between(var, start, end, body);
        }
        let n = self.b.ins().isub(end, start);
        let whole = self.b.ins().sdiv_imm_s(n, i64::from(lanes));
        let len = self.b.ins().imul_imm_s(whole, i64::from(lanes));
        let main = self.b.ins().iadd(start, len);
        self.vector_loop_between(var, start, main, lanes, false, body)?;
        self.serial_loop_between(var, main, end, body)
    }

    /// Starts a loop `for i in first..end`: its header (the counter `i` a block parameter,
    /// tested against `end`) and its body block, where it leaves the builder. Returns the
    /// counter, the header (to jump back to) and the exit block.
    pub(super) fn loop_header(&mut self, first: Value, end: Value) -> (Value, Block, Block) {
        let (header, block, exit) = (
            self.b.create_block(),
            self.b.create_block(),
            self.b.create_block(),
        );
        let i = self.b.append_block_param(header, types::I64);
        self.b.ins().jump(header, &[BlockArg::Value(first)]);
        self.b.switch_to_block(header);
        let more = self.b.ins().icmp(IntCC::SignedLessThan, i, end);
        self.b.ins().brif(more, block, &[], exit, &[]);
        self.b.switch_to_block(block);
        (i, header, exit)
    }

    /// `for var in start..end { body }` with bounds known at run time only.
    pub(super) fn serial_loop_between(
        &mut self,
        var: LocalId,
        first: Value,
        end: Value,
        body: &Stmt,
    ) -> R<()> {
        let v = self.vars[var.0 as usize];
        let (i, header, exit) = self.loop_header(first, end);
        self.b.def_var(v, i);
        self.stmt(body)?;
        let next = self.b.ins().iadd_imm_s(i, 1);
        self.b.ins().jump(header, &[BlockArg::Value(next)]);
        self.b.switch_to_block(exit);
        Ok(())
    }

    /// The vector main loop: `for base in (0..main).step_by(lanes) { body on lanes }`.
    pub(super) fn vector_loop(
        &mut self,
        var: LocalId,
        main: i64,
        lanes: u32,
        body: &Stmt,
    ) -> R<()> {
        let first = self.b.ins().iconst(types::I64, 0);
        let main = self.b.ins().iconst(types::I64, main);
        self.vector_loop_between(var, first, main, lanes, true, body)
    }

    /// `for base in (first..main).step_by(lanes) { body on lanes }` (`main - first` a multiple
    /// of `lanes`), with bounds known at run time only; `aligned` when `first` is a multiple of
    /// `lanes`.
    pub(super) fn vector_loop_between(
        &mut self,
        var: LocalId,
        first: Value,
        main: Value,
        lanes: u32,
        aligned: bool,
        body: &Stmt,
    ) -> R<()> {
        // Accumulators: lane 0 starts from the accumulator's value, the others from the
        // operation's identity (set before the loop, so they enter it as block parameters);
        // every lane of a `max`/`min` (idempotent) from the accumulator's value.
        let mut accs = HashMap::new();
        for (local, op) in accumulators(var, body) {
            let d = self.local_dtype(local)?;
            let ty = scalar_type(&self.func.name, d)?;
            let identity = match op {
                BinaryOp::Mul | BinaryOp::LogicalAnd => {
                    if is_float(d) {
                        self.float_const(1.0, d)?
                    } else {
                        self.iconst(ty, 1)
                    }
                }
                _ => self.zero(d)?,
            };
            let mut inits = Vec::with_capacity(lanes as usize);
            for k in 0..lanes {
                inits.push(if k == 0 || matches!(op, BinaryOp::Max | BinaryOp::Min) {
                    self.b.use_var(self.vars[local.0 as usize])
                } else {
                    identity
                });
            }
            let acc = match self.vector_type(d, lanes) {
                Some(vty) if vector_op(op, d) => {
                    let init = self.vector_of(&VVal::Lanes(inits), vty, lanes)?;
                    let v = self.b.declare_var(vty);
                    self.b.def_var(v, init);
                    Acc::Vector(v)
                }
                _ => Acc::Lanes(
                    inits
                        .into_iter()
                        .map(|init| {
                            let v = self.b.declare_var(ty);
                            self.b.def_var(v, init);
                            v
                        })
                        .collect(),
                ),
            };
            accs.insert(local, (op, acc));
        }
        let (i, header, exit) = self.loop_header(first, main);
        let mut cx = VecCx {
            var,
            lanes,
            counter: i,
            aligned,
            locals: HashMap::new(),
            memo: HashMap::new(),
            accs,
        };
        self.vstmt(body, &mut cx)?;
        // The counter holds the last lane's value, as after the corresponding serial iterations.
        let last = self.b.ins().iadd_imm_s(i, i64::from(lanes) - 1);
        self.b.def_var(self.vars[var.0 as usize], last);
        let next = self.b.ins().iadd_imm_s(i, i64::from(lanes));
        self.b.ins().jump(header, &[BlockArg::Value(next)]);
        self.b.switch_to_block(exit);
        // Each accumulator: its lanes combined, in lane order.
        for (local, (op, acc)) in cx.accs {
            let d = self.local_dtype(local)?;
            let lanes = match acc {
                Acc::Vector(v) => {
                    let v = VVal::Vector(self.b.use_var(v));
                    self.lanes_of(&v, lanes)?
                }
                Acc::Lanes(vars) => vars.iter().map(|v| self.b.use_var(*v)).collect(),
            };
            let mut total = lanes[0];
            for &lane in &lanes[1..] {
                total = self.binary(op, total, lane, d)?;
            }
            self.b.def_var(self.vars[local.0 as usize], total);
        }
        Ok(())
    }
}
