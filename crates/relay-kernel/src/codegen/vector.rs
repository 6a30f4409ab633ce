//! Vectorized loop bodies: values as vectors, splats, ramps or per-lane scalars ([`VVal`]),
//! vector loads and stores, vector arithmetic and selects, per-lane fallbacks.

use super::*;

/// A value of a vectorized loop body: what each of its lanes holds.
#[derive(Clone, Debug)]
pub(super) enum VVal {
    /// The same scalar in every lane (loop-invariant).
    Uniform(Value),
    /// `base + lane * stride` (`int64` indices).
    Ramp { base: Value, stride: i64 },
    /// A Cranelift vector of all the lanes.
    Vector(Value),
    /// One scalar per lane.
    Lanes(Vec<Value>),
}

/// The state of a vectorized loop body being emitted.
pub(super) struct VecCx {
    /// The loop counter's local.
    pub(super) var: LocalId,
    /// Lanes per iteration.
    pub(super) lanes: u32,
    /// The first lane's counter value.
    pub(super) counter: Value,
    /// Whether the counter is a multiple of `lanes` (the loop starts at 0).
    pub(super) aligned: bool,
    /// Locals assigned in the body so far.
    pub(super) locals: HashMap<LocalId, VVal>,
    /// The values of the compound expressions emitted since the last assignment:
    /// structurally equal pure subexpressions share their code.
    pub(super) memo: HashMap<LExpr, (VVal, DType)>,
    /// Accumulators (`acc = acc op v`), their lanes combined after the loop.
    pub(super) accs: HashMap<LocalId, (BinaryOp, Acc)>,
}

/// The variables of an accumulator of a vectorized loop: lane `k` accumulates the loop's
/// elements `k, k + lanes, ...`, either way, so the result is the same.
#[derive(Clone, Debug)]
pub(super) enum Acc {
    /// One vector variable (the operation has a vector instruction).
    Vector(Variable),
    /// One scalar variable per lane.
    Lanes(Vec<Variable>),
}

impl Gen<'_, '_> {
    // ----- Vectorized statements -----

    pub(super) fn vstmt(&mut self, s: &Stmt, cx: &mut VecCx) -> R<()> {
        match s {
            Stmt::Seq(items) => items.iter().try_for_each(|s| self.vstmt(s, cx)),
            Stmt::Assign { local, value } if cx.accs.contains_key(local) => {
                let Some((op, operand)) = accumulation(*local, value) else {
                    return Err(self.malformed("an accumulator assigned another way"));
                };
                let (v, d) = self.vexpr(operand, cx)?;
                if d != self.local_dtype(*local)? {
                    return Err(self.malformed("an accumulation of another dtype"));
                }
                match cx.accs.get(local).map(|(_, a)| a.clone()) {
                    Some(Acc::Vector(var)) => {
                        let acc = VVal::Vector(self.b.use_var(var));
                        let next = self
                            .vector_binary(op, &acc, &v, d, cx.lanes)?
                            .ok_or_else(|| self.malformed("a vector accumulation"))?;
                        self.b.def_var(var, next);
                    }
                    Some(Acc::Lanes(vars)) => {
                        let lanes = self.lanes_of(&v, cx.lanes)?;
                        for (lane, var) in lanes.into_iter().zip(vars) {
                            let acc = self.b.use_var(var);
                            let next = self.binary(op, acc, lane, d)?;
                            self.b.def_var(var, next);
                        }
                    }
                    None => {}
                }
                cx.memo.clear();
                Ok(())
            }
            Stmt::Assign { local, value } => {
                let (v, d) = self.vexpr(value, cx)?;
                let want = self.local_dtype(*local)?;
                if d != want {
                    return Err(self.malformed(format!("assigning a {d} value to a {want} local")));
                }
                // The variable holds the last lane's value, for code after the loop.
                let lanes = self.lanes_of(&v, cx.lanes)?;
                if let Some(&last) = lanes.last() {
                    self.b.def_var(self.vars[local.0 as usize], last);
                }
                cx.locals.insert(*local, v);
                // Memoized expressions may read the local's previous value.
                cx.memo.clear();
                Ok(())
            }
            Stmt::Store {
                buffer,
                index,
                value,
            } => {
                let (v, d) = self.vexpr(value, cx)?;
                self.check_store_dtype(*buffer, d)?;
                let (idx, _) = self.vexpr(index, cx)?;
                let idx = self.index_to_i64(idx, self.dtype_of(index)?, cx)?;
                let size = i64::from(scalar_type(&self.func.name, d)?.bytes());
                let base = self.bases[buffer.0 as usize];
                let in_bounds = self.index_in_bounds(*buffer, index);
                match idx {
                    VVal::Ramp {
                        base: first,
                        stride: 1,
                    } => {
                        if !in_bounds {
                            self.check_ramp(*buffer, first, cx.lanes)?;
                        }
                        let addr = self.element_addr(base, first, size);
                        match self.vector_type(d, cx.lanes) {
                            _ if d == DType::F16 && cx.lanes == half::F16_LANES => {
                                let vty = types::I16X8;
                                let vec = self.vector_of(&v, vty, cx.lanes)?;
                                self.store_f16x4(vec, addr);
                            }
                            Some(vty) => {
                                let vec = self.vector_of(&v, vty, cx.lanes)?;
                                self.b
                                    .ins()
                                    .store(MemFlagsData::new().with_notrap(), vec, addr, 0);
                            }
                            None => {
                                let lanes = self.lanes_of(&v, cx.lanes)?;
                                for (k, lane) in lanes.into_iter().enumerate() {
                                    let off = i32::try_from(k as i64 * size)
                                        .map_err(|_| self.malformed("vector too wide"))?;
                                    self.b.ins().store(
                                        MemFlagsData::new().with_notrap(),
                                        lane,
                                        addr,
                                        off,
                                    );
                                }
                            }
                        }
                    }
                    VVal::Uniform(i) => {
                        // Every lane stores to one element: the last one wins, as serially.
                        if !in_bounds {
                            self.check_index(*buffer, i)?;
                        }
                        let lanes = self.lanes_of(&v, cx.lanes)?;
                        let addr = self.element_addr(base, i, size);
                        if let Some(&last) = lanes.last() {
                            self.b
                                .ins()
                                .store(MemFlagsData::new().with_notrap(), last, addr, 0);
                        }
                    }
                    other => {
                        let idx = self.lanes_of(&other, cx.lanes)?;
                        let lanes = self.lanes_of(&v, cx.lanes)?;
                        for (i, lane) in idx.into_iter().zip(lanes) {
                            if !in_bounds {
                                self.check_index(*buffer, i)?;
                            }
                            let addr = self.element_addr(base, i, size);
                            self.b
                                .ins()
                                .store(MemFlagsData::new().with_notrap(), lane, addr, 0);
                        }
                    }
                }
                Ok(())
            }
            Stmt::For { .. } | Stmt::Range { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => {
                Err(self.malformed("a loop or host call inside a vectorized loop"))
            }
        }
    }

    // ----- Vectorized expressions -----

    /// The Cranelift vector type of `lanes` lanes of `d`, when it is 128 bits wide (and not
    /// `bool`, whose lanes need normalizing).
    pub(super) fn vector_type(&self, d: DType, lanes: u32) -> Option<Type> {
        if d.code == DTypeCode::Bool || d == DType::F16 {
            return None;
        }
        let ty = scalar_type(&self.func.name, d).ok()?;
        (ty.bits() * lanes == 128).then(|| ty.by(lanes)).flatten()
    }

    /// Every lane's scalar.
    pub(super) fn lanes_of(&mut self, v: &VVal, lanes: u32) -> R<Vec<Value>> {
        Ok(match v {
            VVal::Uniform(x) => vec![*x; lanes as usize],
            VVal::Ramp { base, stride } => (0..i64::from(lanes))
                .map(|k| {
                    if k == 0 {
                        *base
                    } else {
                        self.b.ins().iadd_imm_s(*base, k.wrapping_mul(*stride))
                    }
                })
                .collect(),
            VVal::Vector(x) => (0..lanes)
                .map(|k| self.b.ins().extractlane(*x, k as u8))
                .collect(),
            VVal::Lanes(xs) => xs.clone(),
        })
    }

    /// The lanes as one Cranelift vector of type `vty`.
    pub(super) fn vector_of(&mut self, v: &VVal, vty: Type, lanes: u32) -> R<Value> {
        match v {
            VVal::Vector(x) => Ok(*x),
            VVal::Uniform(x) => Ok(self.b.ins().splat(vty, *x)),
            other => {
                let xs = self.lanes_of(other, lanes)?;
                let mut vec = self.b.ins().splat(vty, xs[0]);
                for (k, x) in xs.iter().enumerate().skip(1) {
                    vec = self.b.ins().insertlane(vec, *x, k as u8);
                }
                Ok(vec)
            }
        }
    }

    /// An index value as `int64` lanes or a ramp.
    pub(super) fn index_to_i64(&mut self, v: VVal, d: DType, cx: &VecCx) -> R<VVal> {
        if d == DType::I64 || d == DType::U64 {
            return Ok(v);
        }
        if !d.is_int() && d.code != DTypeCode::Bool {
            return Err(self.malformed(format!("a {d} index")));
        }
        Ok(match v {
            VVal::Uniform(x) => VVal::Uniform(self.extend_index(x, d)),
            other => {
                let xs = self.lanes_of(&other, cx.lanes)?;
                VVal::Lanes(xs.into_iter().map(|x| self.extend_index(x, d)).collect())
            }
        })
    }

    /// A vectorized expression, its code shared with any structurally equal expression emitted
    /// earlier in the body since the last assignment. Sharing is sound because the body is a
    /// straight line that never writes a buffer it reads, every expression is pure (bounds and
    /// division checks fail on the first occurrence), and earlier values dominate later ones.
    pub(super) fn vexpr(&mut self, e: &LExpr, cx: &mut VecCx) -> R<(VVal, DType)> {
        if matches!(e, LExpr::Local(_) | LExpr::Int(..) | LExpr::Float(..)) {
            return self.vexpr_uncached(e, cx);
        }
        if let Some(v) = cx.memo.get(e) {
            return Ok(v.clone());
        }
        let v = self.vexpr_uncached(e, cx)?;
        cx.memo.insert(e.clone(), v.clone());
        Ok(v)
    }

    /// A vectorized expression emitted anew (its subexpressions may still be shared).
    pub(super) fn vexpr_uncached(&mut self, e: &LExpr, cx: &mut VecCx) -> R<(VVal, DType)> {
        let d = self.dtype_of(e)?;
        let lanes = cx.lanes;
        let v = match e {
            LExpr::Local(l) if *l == cx.var => VVal::Ramp {
                base: cx.counter,
                stride: 1,
            },
            LExpr::Local(l) => match cx.locals.get(l) {
                Some(v) => v.clone(),
                None => VVal::Uniform(self.expr(e)?.0),
            },
            LExpr::Int(..) | LExpr::Float(..) => VVal::Uniform(self.expr(e)?.0),
            LExpr::Load { buffer, index } => self.vload(*buffer, index, d, cx)?,
            LExpr::Unary(op, a) => {
                let (x, ad) = self.vexpr(a, cx)?;
                if let VVal::Uniform(x) = x {
                    VVal::Uniform(self.unary(*op, x, ad)?)
                } else if let Some(v) = self.vector_unary(*op, &x, ad, lanes)? {
                    VVal::Vector(v)
                } else {
                    let xs = self.lanes_of(&x, lanes)?;
                    let mut out = Vec::with_capacity(xs.len());
                    for x in xs {
                        out.push(self.unary(*op, x, ad)?);
                    }
                    VVal::Lanes(out)
                }
            }
            LExpr::Binary(op, a, b) => self.vbinary(*op, a, b, cx)?,
            LExpr::Compare(op, a, b) => {
                let (x, ad) = self.vexpr(a, cx)?;
                let (y, bd) = self.vexpr(b, cx)?;
                if ad != bd {
                    return Err(self.malformed(format!("{op:?} of {ad} and {bd}")));
                }
                self.no_f16_arithmetic(&format!("{op:?}"), ad)?;
                match (&x, &y) {
                    (VVal::Uniform(x), VVal::Uniform(y)) => {
                        VVal::Uniform(self.compare(*op, *x, *y, ad))
                    }
                    _ => {
                        let xs = self.lanes_of(&x, lanes)?;
                        let ys = self.lanes_of(&y, lanes)?;
                        VVal::Lanes(
                            xs.into_iter()
                                .zip(ys)
                                .map(|(x, y)| self.compare(*op, x, y, ad))
                                .collect(),
                        )
                    }
                }
            }
            LExpr::Select(c, a, b) => {
                if let Some(v) = self.vector_select(c, a, b, cx)? {
                    return Ok((v, d));
                }
                let (cv, cd) = self.vexpr(c, cx)?;
                let (x, ad) = self.vexpr(a, cx)?;
                let (y, bd) = self.vexpr(b, cx)?;
                if ad != bd {
                    return Err(self.malformed(format!("select of {ad} and {bd}")));
                }
                match (&cv, &x, &y) {
                    (VVal::Uniform(c), VVal::Uniform(x), VVal::Uniform(y)) => {
                        VVal::Uniform(self.select(*c, cd, *x, *y)?)
                    }
                    _ => {
                        let cs = self.lanes_of(&cv, lanes)?;
                        let xs = self.lanes_of(&x, lanes)?;
                        let ys = self.lanes_of(&y, lanes)?;
                        let mut out = Vec::with_capacity(xs.len());
                        for ((c, x), y) in cs.into_iter().zip(xs).zip(ys) {
                            out.push(self.select(c, cd, x, y)?);
                        }
                        VVal::Lanes(out)
                    }
                }
            }
            // An `f32` rounded to float16 and widened again (one float16 operation's result
            // read by the next): rounded in place.
            LExpr::Cast(DType::F32, a) if self.rounds_f32_to_f16(a)? => {
                let LExpr::Cast(_, inner) = &**a else {
                    return Err(self.malformed("a float16 rounding without its operand"));
                };
                let (x, _) = self.vexpr(inner, cx)?;
                match x {
                    VVal::Uniform(x) => VVal::Uniform(half::f32_rounded_to_f16(&mut self.b, x)),
                    VVal::Vector(x) => VVal::Vector(half::f32_rounded_to_f16(&mut self.b, x)),
                    other => {
                        let xs = self.lanes_of(&other, lanes)?;
                        let rounded = xs
                            .into_iter()
                            .map(|x| half::f32_rounded_to_f16(&mut self.b, x))
                            .collect();
                        VVal::Lanes(rounded)
                    }
                }
            }
            LExpr::Cast(to, a) => {
                let (x, ad) = self.vexpr(a, cx)?;
                match x {
                    VVal::Uniform(x) => VVal::Uniform(self.cast(*to, x, ad)?),
                    VVal::Ramp { .. } if *to == DType::I64 || *to == DType::U64 => x,
                    // Four float16 lanes (an `i16x8`'s low half) from and to `f32x4`.
                    VVal::Vector(x)
                        if ad == DType::F16 && *to == DType::F32 && lanes == half::F16_LANES =>
                    {
                        VVal::Vector(self.f16x4_to_f32x4(x))
                    }
                    VVal::Vector(x)
                        if ad == DType::F32 && *to == DType::F16 && lanes == half::F16_LANES =>
                    {
                        VVal::Vector(self.f32x4_to_f16x4(x))
                    }
                    other => {
                        let xs = self.lanes_of(&other, lanes)?;
                        let mut out = Vec::with_capacity(xs.len());
                        for x in xs {
                            out.push(self.cast(*to, x, ad)?);
                        }
                        VVal::Lanes(out)
                    }
                }
            }
        };
        Ok((v, d))
    }

    /// A load of `buffer[index]` (of dtype `d`) in every lane: one scalar load when the index
    /// is uniform, one vector load when it is the counter's ramp, else one load per lane.
    fn vload(&mut self, buffer: BufferId, index: &LExpr, d: DType, cx: &mut VecCx) -> R<VVal> {
        let lanes = cx.lanes;
        Ok({
            let (idx, _) = self.vexpr(index, cx)?;
            let idx = self.index_to_i64(idx, self.dtype_of(index)?, cx)?;
            let size = i64::from(scalar_type(&self.func.name, d)?.bytes());
            let ty = scalar_type(&self.func.name, d)?;
            let base = self.bases[buffer.0 as usize];
            let in_bounds = self.index_in_bounds(buffer, index);
            match idx {
                VVal::Uniform(i) => {
                    if !in_bounds {
                        self.check_index(buffer, i)?;
                    }
                    let addr = self.element_addr(base, i, size);
                    VVal::Uniform(
                        self.b
                            .ins()
                            .load(ty, MemFlagsData::new().with_notrap(), addr, 0),
                    )
                }
                VVal::Ramp {
                    base: first,
                    stride: 1,
                } => {
                    if !in_bounds {
                        self.check_ramp(buffer, first, lanes)?;
                    }
                    let addr = self.element_addr(base, first, size);
                    match self.vector_type(d, lanes) {
                        _ if d == DType::F16 && lanes == half::F16_LANES => {
                            VVal::Vector(self.load_f16x4(addr))
                        }
                        Some(vty) => VVal::Vector(self.b.ins().load(
                            vty,
                            MemFlagsData::new().with_notrap(),
                            addr,
                            0,
                        )),
                        None => {
                            let mut xs = Vec::with_capacity(lanes as usize);
                            for k in 0..i64::from(lanes) {
                                let off = i32::try_from(k * size)
                                    .map_err(|_| self.malformed("vector too wide"))?;
                                xs.push(self.b.ins().load(
                                    ty,
                                    MemFlagsData::new().with_notrap(),
                                    addr,
                                    off,
                                ));
                            }
                            VVal::Lanes(xs)
                        }
                    }
                }
                other => {
                    let idx = self.lanes_of(&other, lanes)?;
                    let mut xs = Vec::with_capacity(lanes as usize);
                    for i in idx {
                        if !in_bounds {
                            self.check_index(buffer, i)?;
                        }
                        let addr = self.element_addr(base, i, size);
                        xs.push(
                            self.b
                                .ins()
                                .load(ty, MemFlagsData::new().with_notrap(), addr, 0),
                        );
                    }
                    VVal::Lanes(xs)
                }
            }
        })
    }

    /// `a op b` in every lane: uniform operands once, a ramp kept a ramp where it can be, a
    /// vector instruction where there is one, else one operation per lane.
    fn vbinary(&mut self, op: BinaryOp, a: &LExpr, b: &LExpr, cx: &mut VecCx) -> R<VVal> {
        let lanes = cx.lanes;
        Ok({
            let (x, ad) = self.vexpr(a, cx)?;
            if let Some(v) = self.vector_power(op, &x, b, ad, lanes)? {
                return Ok(v);
            }
            let (y, bd) = self.vexpr(b, cx)?;
            if ad != bd {
                return Err(self.malformed(format!("{op:?} of {ad} and {bd}")));
            }
            if let Some(v) = self.counter_divmod(op, &x, b, ad, cx) {
                return Ok(v);
            }
            match (&x, &y) {
                (VVal::Uniform(x), VVal::Uniform(y)) => VVal::Uniform(self.binary(op, *x, *y, ad)?),
                _ => {
                    if let Some(r) = self.ramp_binary(op, &x, &y, a, b, ad) {
                        r
                    } else if let Some(v) = self.vector_binary(op, &x, &y, ad, lanes)? {
                        VVal::Vector(v)
                    } else {
                        let xs = self.lanes_of(&x, lanes)?;
                        let ys = self.lanes_of(&y, lanes)?;
                        let mut out = Vec::with_capacity(xs.len());
                        for (x, y) in xs.into_iter().zip(ys) {
                            out.push(self.binary(op, x, y, ad)?);
                        }
                        VVal::Lanes(out)
                    }
                }
            }
        })
    }

    /// `select(x op y, a, b)` as one vector comparison giving a lane mask (all ones or all
    /// zeros) and one `bitselect`, when the compared and the selected values are vectors of
    /// lanes of one width and not all uniform; `None` otherwise (the caller goes per lane).
    pub(super) fn vector_select(
        &mut self,
        c: &LExpr,
        a: &LExpr,
        b: &LExpr,
        cx: &mut VecCx,
    ) -> R<Option<VVal>> {
        let LExpr::Compare(op, ca, cb) = c else {
            return Ok(None);
        };
        let lanes = cx.lanes;
        let (cd, vd) = (self.dtype_of(ca)?, self.dtype_of(a)?);
        if cd != self.dtype_of(cb)? || vd != self.dtype_of(b)? {
            return Ok(None);
        }
        // Four float16 lanes (an `i16x8`'s low half) selected by a 32-bit comparison: the mask
        // narrowed to 16-bit lanes.
        let f16 = vd == DType::F16 && lanes == half::F16_LANES;
        let vty = if f16 {
            Some(types::I16X8)
        } else {
            self.vector_type(vd, lanes)
        };
        let (Some(cty), Some(vty)) = (self.vector_type(cd, lanes), vty) else {
            return Ok(None);
        };
        if cty.lane_bits() != vty.lane_bits() && !(f16 && cty.lane_bits() == 32) {
            return Ok(None);
        }
        let (x, _) = self.vexpr(ca, cx)?;
        let (y, _) = self.vexpr(cb, cx)?;
        let (t, _) = self.vexpr(a, cx)?;
        let (f, _) = self.vexpr(b, cx)?;
        if [&x, &y, &t, &f]
            .iter()
            .all(|v| matches!(v, VVal::Uniform(_)))
        {
            return Ok(None);
        }
        let xv = self.vector_of(&x, cty, lanes)?;
        let yv = self.vector_of(&y, cty, lanes)?;
        let mask = self.compare(*op, xv, yv, cd);
        let tv = self.vector_of(&t, vty, lanes)?;
        let fv = self.vector_of(&f, vty, lanes)?;
        let mask = if f16 {
            let m = if self.b.func.dfg.value_type(mask) == types::I32X4 {
                mask
            } else {
                self.b
                    .ins()
                    .bitcast(types::I32X4, MemFlagsData::new(), mask)
            };
            self.b.ins().snarrow(m, m)
        } else if self.b.func.dfg.value_type(mask) == vty {
            mask
        } else {
            self.b.ins().bitcast(vty, MemFlagsData::new(), mask)
        };
        Ok(Some(VVal::Vector(self.b.ins().bitselect(mask, tv, fv))))
    }

    /// The counter's ramp divided by (or modulo) a positive constant multiple of the lanes, in a
    /// loop whose counter is a multiple of the lanes: every lane is in one block of the
    /// divisor, so the quotient is uniform and the remainder a ramp (a transpose whose merged
    /// output axis reads `p[i / 64 * 8192 + i % 64]` loads vectors instead of lane by lane).
    /// The counter is not negative: truncating and flooring agree.
    fn counter_divmod(
        &mut self,
        op: BinaryOp,
        x: &VVal,
        b: &LExpr,
        d: DType,
        cx: &VecCx,
    ) -> Option<VVal> {
        let VVal::Ramp { base, stride: 1 } = x else {
            return None;
        };
        let LExpr::Int(c, _) = b else {
            return None;
        };
        let c = i64::try_from(*c).ok()?;
        let lanes = i64::from(cx.lanes);
        if d != DType::I64 || !cx.aligned || *base != cx.counter || c <= 0 || c % lanes != 0 {
            return None;
        }
        let divisor = self.b.ins().iconst(types::I64, c);
        match op {
            BinaryOp::Div | BinaryOp::FloorDiv => {
                Some(VVal::Uniform(self.b.ins().udiv(*base, divisor)))
            }
            BinaryOp::Mod | BinaryOp::FloorMod => Some(VVal::Ramp {
                base: self.b.ins().urem(*base, divisor),
                stride: 1,
            }),
            _ => None,
        }
    }

    /// Index arithmetic that keeps a ramp a ramp: `ramp ± uniform`, `ramp ± ramp`,
    /// `ramp * constant`.
    pub(super) fn ramp_binary(
        &mut self,
        op: BinaryOp,
        x: &VVal,
        y: &VVal,
        a: &LExpr,
        b: &LExpr,
        d: DType,
    ) -> Option<VVal> {
        if d != DType::I64 {
            return None;
        }
        let constant = |e: &LExpr| match e {
            LExpr::Int(v, _) => i64::try_from(*v).ok(),
            _ => None,
        };
        match (op, x, y) {
            (BinaryOp::Add, VVal::Ramp { base, stride }, VVal::Uniform(u))
            | (BinaryOp::Add, VVal::Uniform(u), VVal::Ramp { base, stride }) => Some(VVal::Ramp {
                base: self.b.ins().iadd(*base, *u),
                stride: *stride,
            }),
            (BinaryOp::Sub, VVal::Ramp { base, stride }, VVal::Uniform(u)) => Some(VVal::Ramp {
                base: self.b.ins().isub(*base, *u),
                stride: *stride,
            }),
            (
                BinaryOp::Add,
                VVal::Ramp {
                    base: b1,
                    stride: s1,
                },
                VVal::Ramp {
                    base: b2,
                    stride: s2,
                },
            ) => {
                let stride = s1.checked_add(*s2)?;
                Some(VVal::Ramp {
                    base: self.b.ins().iadd(*b1, *b2),
                    stride,
                })
            }
            (BinaryOp::Mul, VVal::Ramp { base, stride }, VVal::Uniform(_)) => {
                let c = constant(b)?;
                let stride = stride.checked_mul(c)?;
                Some(VVal::Ramp {
                    base: self.b.ins().imul_imm_s(*base, c),
                    stride,
                })
            }
            (BinaryOp::Mul, VVal::Uniform(_), VVal::Ramp { base, stride }) => {
                let c = constant(a)?;
                let stride = stride.checked_mul(c)?;
                Some(VVal::Ramp {
                    base: self.b.ins().imul_imm_s(*base, c),
                    stride,
                })
            }
            _ => None,
        }
    }

    /// `power(x, c)` by multiplications ([`vmath::inline_power`]) for a constant `c`: once
    /// for a uniform `x`, on the vector for a vector type, else per lane.
    fn vector_power(
        &mut self,
        op: BinaryOp,
        x: &VVal,
        exponent: &LExpr,
        d: DType,
        lanes: u32,
    ) -> R<Option<VVal>> {
        let Some(c) = (op == BinaryOp::Pow)
            .then(|| vmath::inline_power(exponent, d))
            .flatten()
        else {
            return Ok(None);
        };
        Ok(Some(match (x, self.vector_type(d, lanes)) {
            (VVal::Uniform(x), _) => VVal::Uniform(self.power_inline(*x, c, d)),
            (x, Some(vty)) => {
                let v = self.vector_of(x, vty, lanes)?;
                VVal::Vector(self.power_inline(v, c, d))
            }
            (x, None) => {
                let xs = self.lanes_of(x, lanes)?;
                VVal::Lanes(xs.into_iter().map(|x| self.power_inline(x, c, d)).collect())
            }
        }))
    }

    /// A unary operation with one vector instruction (or an inline math function), when there
    /// is one.
    pub(super) fn vector_unary(
        &mut self,
        op: UnaryOp,
        x: &VVal,
        d: DType,
        lanes: u32,
    ) -> R<Option<Value>> {
        let Some(vty) = self.vector_type(d, lanes) else {
            return Ok(None);
        };
        let float = is_float(d);
        if vmath::inline_unary(op, d, true) || (op == UnaryOp::Rsqrt && float) {
            let v = self.vector_of(x, vty, lanes)?;
            return Ok(Some(if op == UnaryOp::Rsqrt {
                self.rsqrt_vector(v)
            } else {
                self.unary_inline(op, v)?
            }));
        }
        let supported = match op {
            UnaryOp::Neg => true,
            UnaryOp::Abs | UnaryOp::Sqrt => float,
            UnaryOp::Ceil | UnaryOp::Floor | UnaryOp::Trunc | UnaryOp::Round => {
                float && self.vector_rounding
            }
            UnaryOp::BitwiseNot => !float,
            _ => false,
        };
        if !supported {
            return Ok(None);
        }
        let v = self.vector_of(x, vty, lanes)?;
        let ins = self.b.ins();
        Ok(Some(match op {
            UnaryOp::Neg if float => ins.fneg(v),
            UnaryOp::Neg => ins.ineg(v),
            UnaryOp::Abs => ins.fabs(v),
            UnaryOp::Sqrt => ins.sqrt(v),
            UnaryOp::Ceil => ins.ceil(v),
            UnaryOp::Floor => ins.floor(v),
            UnaryOp::Trunc => ins.trunc(v),
            UnaryOp::Round => ins.nearest(v),
            _ => ins.bnot(v),
        }))
    }

    /// A binary operation with one vector instruction, when there is one.
    pub(super) fn vector_binary(
        &mut self,
        op: BinaryOp,
        x: &VVal,
        y: &VVal,
        d: DType,
        lanes: u32,
    ) -> R<Option<Value>> {
        let Some(vty) = self.vector_type(d, lanes) else {
            return Ok(None);
        };
        let float = is_float(d);
        if !vector_op(op, d) {
            return Ok(None);
        }
        let a = self.vector_of(x, vty, lanes)?;
        let b = self.vector_of(y, vty, lanes)?;
        let ins = self.b.ins();
        Ok(Some(match (op, float) {
            (BinaryOp::Add, true) => ins.fadd(a, b),
            (BinaryOp::Add, false) => ins.iadd(a, b),
            (BinaryOp::Sub, true) => ins.fsub(a, b),
            (BinaryOp::Sub, false) => ins.isub(a, b),
            (BinaryOp::Mul, _) => ins.fmul(a, b),
            (BinaryOp::Div, _) => ins.fdiv(a, b),
            (BinaryOp::Max, _) => ins.fmax(a, b),
            (BinaryOp::Min, _) => ins.fmin(a, b),
            (BinaryOp::BitAnd, _) => ins.band(a, b),
            (BinaryOp::BitOr, _) => ins.bor(a, b),
            _ => ins.bxor(a, b),
        }))
    }
}

/// Whether `op` of `d` has a vector instruction (given a 128-bit vector type of `d`).
pub(super) fn vector_op(op: BinaryOp, d: DType) -> bool {
    let float = is_float(d);
    match op {
        BinaryOp::Add | BinaryOp::Sub => true,
        BinaryOp::Mul | BinaryOp::Div | BinaryOp::Max | BinaryOp::Min => float,
        BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor => !float,
        _ => false,
    }
}

/// The locals a statement reads and those it assigns (loop counters included).
pub(super) fn stmt_locals(s: &Stmt, read: &mut Vec<LocalId>, assigned: &mut Vec<LocalId>) {
    s.exprs(&mut |e| walk_locals(e, read));
    fn assigns(s: &Stmt, assigned: &mut Vec<LocalId>) {
        match s {
            Stmt::Seq(items) => items.iter().for_each(|s| assigns(s, assigned)),
            Stmt::For { var, body, .. } | Stmt::Range { var, body, .. } => {
                assigned.push(*var);
                assigns(body, assigned);
            }
            Stmt::Assign { local, .. } => assigned.push(*local),
            Stmt::Store { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => {}
        }
    }
    assigns(s, assigned);
}
