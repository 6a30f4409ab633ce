//! Scalar expressions: loads and stores with their bounds checks, constants, numpy's
//! arithmetic, comparison and cast semantics per dtype, host math calls, run-time errors.

use super::*;

impl Gen<'_, '_> {
    // ----- Scalar expressions -----

    pub(super) fn local_dtype(&self, l: LocalId) -> R<DType> {
        self.func
            .locals
            .get(l.0 as usize)
            .map(|l| l.dtype)
            .ok_or_else(|| self.malformed(format!("local {} does not exist", l.0)))
    }

    pub(super) fn buffer_dtype(&self, b: BufferId) -> R<DType> {
        self.func
            .buffers
            .get(b.0 as usize)
            .map(|b| b.dtype)
            .ok_or_else(|| self.malformed(format!("buffer {} does not exist", b.0)))
    }

    pub(super) fn check_store_dtype(&self, b: BufferId, d: DType) -> R<()> {
        let want = self.buffer_dtype(b)?;
        if want != d {
            return Err(self.malformed(format!(
                "storing a {d} value into {want} buffer {}",
                self.func.buffers[b.0 as usize].name
            )));
        }
        Ok(())
    }

    /// The dtype of an expression.
    pub(super) fn dtype_of(&self, e: &LExpr) -> R<DType> {
        Ok(match e {
            LExpr::Local(l) => self.local_dtype(*l)?,
            LExpr::Int(_, d) | LExpr::Float(_, d) | LExpr::Cast(d, _) => *d,
            LExpr::Load { buffer, .. } => self.buffer_dtype(*buffer)?,
            LExpr::Unary(op, a) => match op {
                UnaryOp::IsNan | UnaryOp::IsInf | UnaryOp::IsFinite | UnaryOp::LogicalNot => {
                    DType::BOOL
                }
                _ => self.dtype_of(a)?,
            },
            LExpr::Binary(_, a, _) => self.dtype_of(a)?,
            LExpr::Compare(..) => DType::BOOL,
            LExpr::Select(_, a, _) => self.dtype_of(a)?,
        })
    }

    /// A scalar expression's value and dtype.
    pub(super) fn expr(&mut self, e: &LExpr) -> R<(Value, DType)> {
        let d = self.dtype_of(e)?;
        let v = match e {
            LExpr::Local(l) => self.b.use_var(self.vars[l.0 as usize]),
            LExpr::Int(v, d) => {
                if is_float(*d) || d.minifloat().is_some() {
                    self.float_const(*v as f64, *d)?
                } else {
                    let ty = scalar_type(&self.func.name, *d)?;
                    let v = if d.code == DTypeCode::Bool {
                        i128::from(*v != 0)
                    } else {
                        *v
                    };
                    self.iconst(ty, v)
                }
            }
            LExpr::Float(v, d) => {
                if is_float(*d) || d.minifloat().is_some() {
                    self.float_const(*v, *d)?
                } else {
                    let f = self.float_const(*v, DType::F64)?;
                    self.cast(*d, f, DType::F64)?
                }
            }
            LExpr::Load { buffer, index } => {
                let ty = scalar_type(&self.func.name, d)?;
                let addr = self.address(*buffer, index)?;
                self.b
                    .ins()
                    .load(ty, MemFlagsData::new().with_notrap(), addr, 0)
            }
            LExpr::Unary(op, a) => {
                let (x, ad) = self.expr(a)?;
                self.unary(*op, x, ad)?
            }
            LExpr::Binary(op, a, b) => {
                let (x, ad) = self.expr(a)?;
                if let Some(c) = (*op == BinaryOp::Pow)
                    .then(|| vmath::inline_power(b, ad))
                    .flatten()
                {
                    return Ok((self.power_inline(x, c, ad), d));
                }
                let (y, bd) = self.expr(b)?;
                if ad != bd {
                    return Err(self.malformed(format!("{op:?} of {ad} and {bd}")));
                }
                self.binary(*op, x, y, ad)?
            }
            LExpr::Compare(op, a, b) => {
                let (x, ad) = self.expr(a)?;
                let (y, bd) = self.expr(b)?;
                if ad != bd {
                    return Err(self.malformed(format!("{op:?} of {ad} and {bd}")));
                }
                self.no_f16_arithmetic(&format!("{op:?}"), ad)?;
                self.compare(*op, x, y, ad)
            }
            LExpr::Select(c, a, b) => {
                let (cv, cd) = self.expr(c)?;
                let (x, ad) = self.expr(a)?;
                let (y, bd) = self.expr(b)?;
                if ad != bd {
                    return Err(self.malformed(format!("select of {ad} and {bd}")));
                }
                self.select(cv, cd, x, y)?
            }
            // An `f32` rounded to float16 and widened again: rounded in place.
            LExpr::Cast(DType::F32, a) if self.rounds_f32_to_f16(a)? => {
                let LExpr::Cast(_, inner) = &**a else {
                    return Err(self.malformed("a float16 rounding without its operand"));
                };
                let (x, _) = self.expr(inner)?;
                half::f32_rounded_to_f16(&mut self.b, x)
            }
            LExpr::Cast(to, a) => {
                let (x, ad) = self.expr(a)?;
                self.cast(*to, x, ad)?
            }
        };
        Ok((v, d))
    }

    /// The address of `buffer[index]`, checked to be within the buffer unless provably so.
    pub(super) fn address(&mut self, buffer: BufferId, index: &LExpr) -> R<Value> {
        let d = self.buffer_dtype(buffer)?;
        let id = self.dtype_of(index)?;
        if !id.is_int() && id.code != DTypeCode::Bool {
            return Err(self.malformed(format!("a {id} index")));
        }
        let (i, _) = self.expr(index)?;
        let i = self.extend_index(i, id);
        if !self.index_in_bounds(buffer, index) {
            self.check_index(buffer, i)?;
        }
        let size = i64::from(scalar_type(&self.func.name, d)?.bytes());
        Ok(self.element_addr(self.bases[buffer.0 as usize], i, size))
    }

    /// `base + index * size`.
    pub(super) fn element_addr(&mut self, base: Value, index: Value, size: i64) -> Value {
        let offset = self.b.ins().imul_imm_s(index, size);
        self.b.ins().iadd(base, offset)
    }

    /// An integer index as `int64`.
    pub(super) fn extend_index(&mut self, i: Value, d: DType) -> Value {
        let ty = self.b.func.dfg.value_type(i);
        if ty == types::I64 {
            i
        } else if signed(d) {
            self.b.ins().sextend(types::I64, i)
        } else {
            self.b.ins().uextend(types::I64, i)
        }
    }

    /// Branches to the error return with `code` (an `i32` value) when it is non-zero.
    pub(super) fn fail_with(&mut self, code: Value) {
        let err = self.err_block();
        let cont = self.b.create_block();
        self.b
            .ins()
            .brif(code, err, &[BlockArg::Value(code)], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// The block returning an error code.
    pub(super) fn err_block(&mut self) -> Block {
        match self.err {
            Some(b) => b,
            None => {
                let b = self.b.create_block();
                self.b.append_block_param(b, types::I32);
                self.err = Some(b);
                b
            }
        }
    }

    /// Branches to the error return with `code` when `cond` is non-zero.
    pub(super) fn fail_if(&mut self, cond: Value, code: i32) {
        let err = self.err_block();
        let cont = self.b.create_block();
        let code = self.b.ins().iconst(types::I32, i64::from(code));
        self.b
            .ins()
            .brif(cond, err, &[BlockArg::Value(code)], cont, &[]);
        self.b.switch_to_block(cont);
    }

    /// An integer constant of type `ty` (wrapped to its width).
    pub(super) fn iconst(&mut self, ty: Type, v: i128) -> Value {
        let bits = ty.bits();
        let masked = if bits >= 64 {
            v as i64
        } else {
            ((v as i64 as u64) & ((1u64 << bits) - 1)) as i64
        };
        self.b.ins().iconst(ty, masked)
    }

    pub(super) fn float_const(&mut self, v: f64, d: DType) -> R<Value> {
        if let Some(format) = d.minifloat() {
            let ty = scalar_type(&self.func.name, d)?;
            return Ok(self.iconst(ty, format.from_f64(v).into()));
        }
        Ok(match d.bits {
            // Rounded once, as the reference rounds a `float16` constant.
            16 if d == DType::F16 => self.iconst(types::I16, math::f64_to_f16(v).into()),
            32 => self.b.ins().f32const(v as f32),
            64 => self.b.ins().f64const(v),
            _ => {
                return Err(KernelError::UnsupportedDType {
                    kernel: self.func.name.clone(),
                    dtype: d.to_string(),
                });
            }
        })
    }

    pub(super) fn zero(&mut self, d: DType) -> R<Value> {
        if is_float(d) {
            self.float_const(0.0, d)
        } else {
            let ty = scalar_type(&self.func.name, d)?;
            Ok(self.iconst(ty, 0))
        }
    }

    /// `x != 0` as a `bool` (an `i8` 0 or 1; NaN is true).
    pub(super) fn truthy(&mut self, x: Value, d: DType) -> Value {
        if d == DType::F16 {
            // Any bit but the sign's: not ±0 (NaN is true).
            let magnitude = self.b.ins().band_imm_u(x, 0x7fff);
            self.b.ins().icmp_imm_s(IntCC::NotEqual, magnitude, 0)
        } else if is_float(d) {
            let ty = self.b.func.dfg.value_type(x);
            let zero = if ty == types::F32 {
                self.b.ins().f32const(0.0)
            } else {
                self.b.ins().f64const(0.0)
            };
            self.b.ins().fcmp(FloatCC::NotEqual, x, zero)
        } else {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0)
        }
    }

    /// A 0/1 `i8` as a value of `d`.
    pub(super) fn bool_to(&mut self, b: Value, d: DType) -> R<Value> {
        let ty = scalar_type(&self.func.name, d)?;
        Ok(if is_float(d) {
            self.b.ins().fcvt_from_uint(ty, b)
        } else if ty == types::I8 {
            b
        } else {
            self.b.ins().uextend(ty, b)
        })
    }

    /// Calls a host function of the given arity and type.
    pub(super) fn call_host(&mut self, name: &str, args: &[Value], ty: Type) -> R<Value> {
        let f = self.import(name, &vec![ty; args.len()], ty)?;
        let call = self.b.ins().call(f, args);
        Ok(self.b.inst_results(call)[0])
    }

    /// A float math host function applied to `x` (of float dtype `d`).
    pub(super) fn math(&mut self, name: &str, args: &[Value], d: DType) -> R<Value> {
        let ty = scalar_type(&self.func.name, d)?;
        self.call_host(&math::symbol_for(name, d.bits == 32), args, ty)
    }

    /// Rejects arithmetic on the bits of a narrow float (`float16`, `bfloat16`, the 8-bit
    /// floats): lowering computes it in a wider float, so kernels only load, store, select
    /// and convert them.
    pub(super) fn no_f16_arithmetic(&self, what: &str, d: DType) -> R<()> {
        if d.is_narrow_float() {
            return Err(self.malformed(format!(
                "{what} of {d} values (lowering computes {d} operations in a wider float)"
            )));
        }
        Ok(())
    }

    pub(super) fn require_float(&self, what: &str, d: DType) -> R<()> {
        if is_float(d) {
            Ok(())
        } else {
            Err(self.malformed(format!("{what} of {d} (a float operation)")))
        }
    }

    pub(super) fn unary(&mut self, op: UnaryOp, x: Value, d: DType) -> R<Value> {
        self.no_f16_arithmetic(&format!("{op:?}"), d)?;
        let float = is_float(d);
        let ty = scalar_type(&self.func.name, d)?;
        let math_name = match op {
            UnaryOp::Exp => Some("exp"),
            UnaryOp::Log => Some("log"),
            UnaryOp::Log2 => Some("log2"),
            UnaryOp::Log10 => Some("log10"),
            UnaryOp::Erf => Some("erf"),
            UnaryOp::Sigmoid => Some("sigmoid"),
            UnaryOp::Tanh => Some("tanh"),
            UnaryOp::Sin => Some("sin"),
            UnaryOp::Cos => Some("cos"),
            UnaryOp::Tan => Some("tan"),
            UnaryOp::Asin => Some("asin"),
            UnaryOp::Acos => Some("acos"),
            UnaryOp::Atan => Some("atan"),
            UnaryOp::Sinh => Some("sinh"),
            UnaryOp::Cosh => Some("cosh"),
            UnaryOp::Asinh => Some("asinh"),
            UnaryOp::Acosh => Some("acosh"),
            UnaryOp::Atanh => Some("atanh"),
            _ => None,
        };
        if let Some(name) = math_name {
            self.require_float(name, d)?;
            if vmath::inline_unary(op, d, false) {
                return self.unary_inline(op, x);
            }
            return self.math(name, &[x], d);
        }
        Ok(match op {
            UnaryOp::Neg if float => self.b.ins().fneg(x),
            UnaryOp::Neg => {
                let r = self.b.ins().ineg(x);
                self.normalize(r, d)
            }
            UnaryOp::Abs if float => self.b.ins().fabs(x),
            UnaryOp::Abs if signed(d) => self.b.ins().iabs(x),
            UnaryOp::Abs => x,
            UnaryOp::Sign => {
                if float {
                    let zero = self.zero(d)?;
                    let one = self.float_const(1.0, d)?;
                    let minus_one = self.float_const(-1.0, d)?;
                    let gt = self.b.ins().fcmp(FloatCC::GreaterThan, x, zero);
                    let lt = self.b.ins().fcmp(FloatCC::LessThan, x, zero);
                    // Zero keeps its sign and NaN stays NaN: `x * 0`.
                    let same = self.b.ins().fmul(x, zero);
                    let r = self.b.ins().select(lt, minus_one, same);
                    self.b.ins().select(gt, one, r)
                } else if signed(d) {
                    let gt = self.b.ins().icmp_imm_s(IntCC::SignedGreaterThan, x, 0);
                    let lt = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, x, 0);
                    let (gt, lt) = (self.bool_to(gt, d)?, self.bool_to(lt, d)?);
                    self.b.ins().isub(gt, lt)
                } else {
                    let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, x, 0);
                    self.bool_to(nz, d)?
                }
            }
            UnaryOp::Sqrt => {
                self.require_float("sqrt", d)?;
                self.b.ins().sqrt(x)
            }
            UnaryOp::Rsqrt => {
                self.require_float("rsqrt", d)?;
                let wide = if ty == types::F32 {
                    self.b.ins().fpromote(types::F64, x)
                } else {
                    x
                };
                let s = self.b.ins().sqrt(wide);
                let one = self.b.ins().f64const(1.0);
                let r = self.b.ins().fdiv(one, s);
                if ty == types::F32 {
                    self.b.ins().fdemote(types::F32, r)
                } else {
                    r
                }
            }
            UnaryOp::Ceil if float => self.b.ins().ceil(x),
            UnaryOp::Floor if float => self.b.ins().floor(x),
            UnaryOp::Round if float => self.b.ins().nearest(x),
            UnaryOp::Trunc if float => self.b.ins().trunc(x),
            UnaryOp::Ceil | UnaryOp::Floor | UnaryOp::Round | UnaryOp::Trunc => x,
            UnaryOp::LogicalNot => {
                let t = self.truthy(x, d);
                self.b.ins().bxor_imm_s(t, 1)
            }
            UnaryOp::BitwiseNot if d.code == DTypeCode::Bool => {
                let t = self.truthy(x, d);
                self.b.ins().bxor_imm_s(t, 1)
            }
            UnaryOp::BitwiseNot => {
                self.require_int("bitwise_not", d)?;
                self.b.ins().bnot(x)
            }
            UnaryOp::IsNan if float => self.b.ins().fcmp(FloatCC::Unordered, x, x),
            UnaryOp::IsInf if float => {
                let a = self.b.ins().fabs(x);
                let inf = self.float_const(f64::INFINITY, d)?;
                self.b.ins().fcmp(FloatCC::Equal, a, inf)
            }
            UnaryOp::IsFinite if float => {
                let a = self.b.ins().fabs(x);
                let inf = self.float_const(f64::INFINITY, d)?;
                self.b.ins().fcmp(FloatCC::LessThan, a, inf)
            }
            UnaryOp::IsNan | UnaryOp::IsInf => self.b.ins().iconst(types::I8, 0),
            UnaryOp::IsFinite => self.b.ins().iconst(types::I8, 1),
            // The transcendental functions returned above.
            _ => return Err(self.malformed(format!("{op:?} of {d}"))),
        })
    }

    pub(super) fn require_int(&self, what: &str, d: DType) -> R<()> {
        if d.is_int() || d.code == DTypeCode::Bool {
            Ok(())
        } else {
            Err(self.malformed(format!("{what} of {d} (an integer operation)")))
        }
    }

    /// The minifloat conversion `symbol` of `d`'s format applied to `x`, giving a `ret`.
    fn minifloat_call(&mut self, symbol: &str, d: DType, x: Value, ret: Type) -> R<Value> {
        let code = self.iconst(types::I32, d.code as i128);
        let arg = self.b.func.dfg.value_type(x);
        let f = self.import(symbol, &[types::I32, arg], ret)?;
        let call = self.b.ins().call(f, &[code, x]);
        Ok(self.b.inst_results(call)[0])
    }

    /// `x` reduced to `ty` (unchanged if it has that type).
    fn narrow(&mut self, ty: Type, x: Value) -> Value {
        if self.b.func.dfg.value_type(x) == ty {
            x
        } else {
            self.b.ins().ireduce(ty, x)
        }
    }

    /// `x` zero-extended to `ty` (unchanged if it has that type).
    pub(super) fn uext(&mut self, ty: Type, x: Value) -> Value {
        if self.b.func.dfg.value_type(x) == ty {
            x
        } else {
            self.b.ins().uextend(ty, x)
        }
    }

    /// `x` sign-extended to `ty` (unchanged if it has that type).
    pub(super) fn sext(&mut self, ty: Type, x: Value) -> Value {
        if self.b.func.dfg.value_type(x) == ty {
            x
        } else {
            self.b.ins().sextend(ty, x)
        }
    }

    /// A `bool` result of integer arithmetic as 0 or 1; other dtypes unchanged.
    pub(super) fn normalize(&mut self, v: Value, d: DType) -> Value {
        if d.code == DTypeCode::Bool {
            self.b.ins().icmp_imm_s(IntCC::NotEqual, v, 0)
        } else {
            v
        }
    }

    /// `y` with -1 replaced by 1, and whether it was -1 (signed division overflows only for
    /// `INT_MIN / -1`, which wraps to `INT_MIN` in numpy and traps in Cranelift).
    pub(super) fn safe_divisor(&mut self, y: Value) -> (Value, Value) {
        let ty = self.b.func.dfg.value_type(y);
        let is_m1 = self.b.ins().icmp_imm_s(IntCC::Equal, y, -1);
        let one = self.b.ins().iconst(ty, 1);
        (self.b.ins().select(is_m1, one, y), is_m1)
    }

    /// Truncating quotient and remainder of signed or unsigned integers, after checking the
    /// divisor (`code` on zero).
    pub(super) fn divrem(&mut self, x: Value, y: Value, d: DType, code: i32) -> (Value, Value) {
        let zero = self.b.ins().icmp_imm_s(IntCC::Equal, y, 0);
        self.fail_if(zero, code);
        if signed(d) {
            let (ys, is_m1) = self.safe_divisor(y);
            let q = self.b.ins().sdiv(x, ys);
            let neg = self.b.ins().ineg(x);
            let q = self.b.ins().select(is_m1, neg, q);
            let r = self.b.ins().srem(x, ys);
            (q, r)
        } else {
            (self.b.ins().udiv(x, y), self.b.ins().urem(x, y))
        }
    }

    /// Whether a signed remainder `r` of division by `y` needs flooring: non-zero with a sign
    /// different from the divisor's.
    pub(super) fn needs_floor(&mut self, r: Value, y: Value) -> Value {
        let nz = self.b.ins().icmp_imm_s(IntCC::NotEqual, r, 0);
        let xor = self.b.ins().bxor(r, y);
        let differ = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, xor, 0);
        self.b.ins().band(nz, differ)
    }

    pub(super) fn binary(&mut self, op: BinaryOp, x: Value, y: Value, d: DType) -> R<Value> {
        self.no_f16_arithmetic(&format!("{op:?}"), d)?;
        let float = is_float(d);
        let ty = scalar_type(&self.func.name, d)?;
        let v = match op {
            BinaryOp::Add if float => self.b.ins().fadd(x, y),
            BinaryOp::Sub if float => self.b.ins().fsub(x, y),
            BinaryOp::Mul if float => self.b.ins().fmul(x, y),
            BinaryOp::Div if float => self.b.ins().fdiv(x, y),
            BinaryOp::Add => self.b.ins().iadd(x, y),
            BinaryOp::Sub => self.b.ins().isub(x, y),
            BinaryOp::Mul => self.b.ins().imul(x, y),
            BinaryOp::Div => self.divrem(x, y, d, ERR_DIV_BY_ZERO).0,
            BinaryOp::Mod if float => self.math("fmod", &[x, y], d)?,
            BinaryOp::Mod => self.divrem(x, y, d, ERR_MOD_BY_ZERO).1,
            BinaryOp::FloorDiv if float => {
                // In f64 for float32, as the reference: the f64 quotient of two f32s floors
                // exactly where the f32 quotient could round up to an integer.
                if ty == types::F32 {
                    let (a, b) = (
                        self.b.ins().fpromote(types::F64, x),
                        self.b.ins().fpromote(types::F64, y),
                    );
                    let q = self.b.ins().fdiv(a, b);
                    let q = self.b.ins().floor(q);
                    self.b.ins().fdemote(types::F32, q)
                } else {
                    let q = self.b.ins().fdiv(x, y);
                    self.b.ins().floor(q)
                }
            }
            BinaryOp::FloorDiv => {
                let (q, r) = self.divrem(x, y, d, ERR_DIV_BY_ZERO);
                if signed(d) {
                    let adjust = self.needs_floor(r, y);
                    let adjust = self.uext(ty, adjust);
                    self.b.ins().isub(q, adjust)
                } else {
                    q
                }
            }
            BinaryOp::FloorMod if float => self.math("floor_mod", &[x, y], d)?,
            BinaryOp::FloorMod => {
                let (_, r) = self.divrem(x, y, d, ERR_MOD_BY_ZERO);
                if signed(d) {
                    let adjust = self.needs_floor(r, y);
                    let plus = self.b.ins().iadd(r, y);
                    self.b.ins().select(adjust, plus, r)
                } else {
                    r
                }
            }
            BinaryOp::Pow if float => self.math("pow", &[x, y], d)?,
            BinaryOp::Pow => {
                let (base, exp) = if signed(d) {
                    let neg = self.b.ins().icmp_imm_s(IntCC::SignedLessThan, y, 0);
                    self.fail_if(neg, ERR_NEGATIVE_POWER);
                    (self.sext(types::I64, x), self.sext(types::I64, y))
                } else {
                    (self.uext(types::I64, x), self.uext(types::I64, y))
                };
                let r = self.call_host("relay_ipow", &[base, exp], types::I64)?;
                if ty == types::I64 {
                    r
                } else {
                    self.b.ins().ireduce(ty, r)
                }
            }
            BinaryOp::Max if float => self.b.ins().fmax(x, y),
            BinaryOp::Min if float => self.b.ins().fmin(x, y),
            BinaryOp::Max if signed(d) => self.b.ins().smax(x, y),
            BinaryOp::Min if signed(d) => self.b.ins().smin(x, y),
            BinaryOp::Max => self.b.ins().umax(x, y),
            BinaryOp::Min => self.b.ins().umin(x, y),
            BinaryOp::LogicalAnd | BinaryOp::LogicalOr | BinaryOp::LogicalXor => {
                let (a, b) = (self.truthy(x, d), self.truthy(y, d));
                let r = match op {
                    BinaryOp::LogicalAnd => self.b.ins().band(a, b),
                    BinaryOp::LogicalOr => self.b.ins().bor(a, b),
                    _ => self.b.ins().bxor(a, b),
                };
                return self.bool_to(r, d);
            }
            BinaryOp::BitAnd
            | BinaryOp::BitOr
            | BinaryOp::BitXor
            | BinaryOp::Shl
            | BinaryOp::Shr => {
                self.require_int(&format!("{op:?}"), d)?;
                let bits = i64::from(ty.bits());
                match op {
                    BinaryOp::BitAnd => self.b.ins().band(x, y),
                    BinaryOp::BitOr => self.b.ins().bor(x, y),
                    BinaryOp::BitXor => self.b.ins().bxor(x, y),
                    BinaryOp::Shl => {
                        // Shifting every bit out (or by a negative amount) gives 0.
                        let in_range = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, y, bits);
                        let r = self.b.ins().ishl(x, y);
                        let zero = self.b.ins().iconst(ty, 0);
                        self.b.ins().select(in_range, r, zero)
                    }
                    _ if signed(d) => {
                        // An arithmetic shift past every bit leaves the sign.
                        let in_range = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, y, bits);
                        let max = self.b.ins().iconst(ty, bits - 1);
                        let amount = self.b.ins().select(in_range, y, max);
                        self.b.ins().sshr(x, amount)
                    }
                    _ => {
                        let in_range = self.b.ins().icmp_imm_s(IntCC::UnsignedLessThan, y, bits);
                        let r = self.b.ins().ushr(x, y);
                        let zero = self.b.ins().iconst(ty, 0);
                        self.b.ins().select(in_range, r, zero)
                    }
                }
            }
        };
        Ok(if float { v } else { self.normalize(v, d) })
    }

    pub(super) fn compare(&mut self, op: CmpOp, x: Value, y: Value, d: DType) -> Value {
        if is_float(d) {
            let cc = match op {
                CmpOp::Eq => FloatCC::Equal,
                CmpOp::Ne => FloatCC::NotEqual,
                CmpOp::Lt => FloatCC::LessThan,
                CmpOp::Le => FloatCC::LessThanOrEqual,
                CmpOp::Gt => FloatCC::GreaterThan,
                CmpOp::Ge => FloatCC::GreaterThanOrEqual,
            };
            self.b.ins().fcmp(cc, x, y)
        } else {
            let s = signed(d);
            let cc = match op {
                CmpOp::Eq => IntCC::Equal,
                CmpOp::Ne => IntCC::NotEqual,
                CmpOp::Lt if s => IntCC::SignedLessThan,
                CmpOp::Le if s => IntCC::SignedLessThanOrEqual,
                CmpOp::Gt if s => IntCC::SignedGreaterThan,
                CmpOp::Ge if s => IntCC::SignedGreaterThanOrEqual,
                CmpOp::Lt => IntCC::UnsignedLessThan,
                CmpOp::Le => IntCC::UnsignedLessThanOrEqual,
                CmpOp::Gt => IntCC::UnsignedGreaterThan,
                CmpOp::Ge => IntCC::UnsignedGreaterThanOrEqual,
            };
            self.b.ins().icmp(cc, x, y)
        }
    }

    pub(super) fn select(&mut self, c: Value, cd: DType, x: Value, y: Value) -> R<Value> {
        let c = if cd.minifloat().is_some() {
            let wide = self.cast(DType::F64, c, cd)?;
            self.truthy(wide, DType::F64)
        } else if is_float(cd) {
            self.truthy(c, cd)
        } else {
            c
        };
        Ok(self.b.ins().select(c, x, y))
    }

    /// Whether `e` is `Cast(F16, x)` of an `f32` `x` (whose widening back to `f32` is then
    /// [`half::f32_rounded_to_f16`]).
    pub(super) fn rounds_f32_to_f16(&self, e: &LExpr) -> R<bool> {
        Ok(match e {
            LExpr::Cast(DType::F16, inner) => self.dtype_of(inner)? == DType::F32,
            _ => false,
        })
    }

    /// `x` (of `from`) converted to `to` with numpy's `astype` rules.
    pub(super) fn cast(&mut self, to: DType, x: Value, from: DType) -> R<Value> {
        if to == from {
            return Ok(x);
        }
        let tty = scalar_type(&self.func.name, to)?;
        let fty = scalar_type(&self.func.name, from)?;
        if from.minifloat().is_some() {
            // Exactly to `f64` (a host call, `math::relay_minifloat_to_f64`), then on.
            let bits = self.uext(types::I32, x);
            let wide = self.minifloat_call(math::MINIFLOAT_TO_F64, from, bits, types::F64)?;
            return self.cast(to, wide, DType::F64);
        }
        if to.minifloat().is_some() {
            // One rounding, from `f64` (exact from every float; integers convert as the
            // reference's `as f64`).
            let wide = self.cast(DType::F64, x, from)?;
            let bits = self.minifloat_call(math::F64_TO_MINIFLOAT, to, wide, types::I32)?;
            return Ok(self.narrow(tty, bits));
        }
        if from == DType::F16 {
            // Exactly to `f32` (inline, `half.rs`), then on from there.
            let h = self.b.ins().uextend(types::I32, x);
            let wide = half::f16_to_f32(&mut self.b, h);
            return self.cast(to, wide, DType::F32);
        }
        if to == DType::F16 {
            // One rounding, from `f32` or `f64` (integers convert to `f64` first, exactly up
            // to 2^53 and rounded to nearest beyond, as the reference's `as f64`).
            let wide = if from == DType::F32 {
                x
            } else {
                self.cast(DType::F64, x, from)?
            };
            let bits = half::to_f16(&mut self.b, wide);
            return Ok(self.b.ins().ireduce(types::I16, bits));
        }
        if to.code == DTypeCode::Bool {
            return Ok(self.truthy(x, from));
        }
        if is_float(from) {
            if is_float(to) {
                return Ok(if tty.bits() > fty.bits() {
                    self.b.ins().fpromote(tty, x)
                } else {
                    self.b.ins().fdemote(tty, x)
                });
            }
            // Truncate toward zero, saturate, NaN → 0 (the `_sat` conversions do all three).
            let bits = tty.bits();
            if bits >= 32 {
                return Ok(if signed(to) {
                    self.b.ins().fcvt_to_sint_sat(tty, x)
                } else {
                    self.b.ins().fcvt_to_uint_sat(tty, x)
                });
            }
            let wide = if signed(to) {
                let w = self.b.ins().fcvt_to_sint_sat(types::I32, x);
                let lo = self.b.ins().iconst(types::I32, -(1i64 << (bits - 1)));
                let hi = self.b.ins().iconst(types::I32, (1i64 << (bits - 1)) - 1);
                let w = self.b.ins().smax(w, lo);
                self.b.ins().smin(w, hi)
            } else {
                let w = self.b.ins().fcvt_to_uint_sat(types::I32, x);
                let hi = self.b.ins().iconst(types::I32, (1i64 << bits) - 1);
                self.b.ins().umin(w, hi)
            };
            return Ok(self.b.ins().ireduce(tty, wide));
        }
        // From an integer or bool (bool is unsigned 0/1).
        let from_signed = signed(from);
        if is_float(to) {
            let x = if fty.bits() < 32 {
                if from_signed {
                    self.b.ins().sextend(types::I32, x)
                } else {
                    self.b.ins().uextend(types::I32, x)
                }
            } else {
                x
            };
            return Ok(if from_signed {
                self.b.ins().fcvt_from_sint(tty, x)
            } else {
                self.b.ins().fcvt_from_uint(tty, x)
            });
        }
        Ok(match tty.bits().cmp(&fty.bits()) {
            std::cmp::Ordering::Less => self.b.ins().ireduce(tty, x),
            std::cmp::Ordering::Greater if from_signed => self.b.ins().sextend(tty, x),
            std::cmp::Ordering::Greater => self.b.ins().uextend(tty, x),
            std::cmp::Ordering::Equal => x,
        })
    }
}
