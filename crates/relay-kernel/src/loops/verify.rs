//! The loop nest verifier: what codegen assumes of a [`LoopFunc`], checked before it runs.
//!
//! - **References**: every buffer and local exists; loop counters are `int64` locals.
//! - **Dtypes**: indices are integers, stored and assigned values have their target's dtype,
//!   binary operations, comparisons and selects combine operands of one dtype, GEMMs are on
//!   `float16`, `float32` or `float64` buffers of one dtype.
//! - **Bounds**: an element index whose range interval arithmetic over the loop bounds gives
//!   ([`Ranges`]) reaches into its buffer (an index that can never be in bounds is a lowering
//!   bug; one that may be out of bounds for some iterations is checked at run time by codegen,
//!   as a padded read under a `select` is: interval arithmetic cannot see the guard); every
//!   element of a GEMM matrix whose offset has a known range lies within its buffer (the host
//!   routine has no per-element check).
//! - **Vector lanes**: a vectorized loop has 2 to 16 lanes (a power of two) and is innermost
//!   (no loop or GEMM inside), and so is a parallel loop with lanes.
//! - **Aliasing**: no stage writes an input; a GEMM's result is neither of its operands (the
//!   host routine reads whole operands while it writes); every store and GEMM result inside a
//!   parallel loop is at an index that depends on the loop's counter (iterations write
//!   disjoint elements), and the body reads no local it does not assign itself.
//!
//! Codegen keeps its own checks of what it cannot compile (a dtype it has no instruction for);
//! the verifier runs on every kernel in debug builds and tests, and under `relayc build
//! --verify-each`.

use std::collections::HashSet;

use relay_ir::te::UnaryOp;
use relay_ir::{DType, DTypeCode};

use super::range::Ranges;
use super::{BufferId, BufferRole, ForKind, LExpr, LocalId, LoopFunc, MatrixRef, Stmt};
use crate::KernelError;

/// Checks `func` (see the module documentation); the error names the kernel and the first
/// problem found.
pub fn verify(func: &LoopFunc) -> Result<(), KernelError> {
    let mut v = Verifier {
        func,
        ranges: Ranges::of(func),
    };
    v.stmt(&func.body)
        .map_err(|message| KernelError::Malformed {
            kernel: func.name.clone(),
            message,
        })
}

struct Verifier<'f> {
    func: &'f LoopFunc,
    /// The ranges of the counters in scope and of the once-assigned locals.
    ranges: Ranges,
}

type R<T> = Result<T, String>;

impl Verifier<'_> {
    fn stmt(&mut self, s: &Stmt) -> R<()> {
        match s {
            Stmt::Seq(items) => items.iter().try_for_each(|s| self.stmt(s)),
            Stmt::For {
                var,
                extent,
                kind,
                body,
            } => {
                self.counter(*var)?;
                self.kind(*kind, *var, body)?;
                let saved = self.ranges.enter(*var, *extent);
                let r = self.stmt(body);
                self.ranges.leave(*var, saved);
                r
            }
            Stmt::Range {
                var,
                start,
                end,
                extent,
                kind,
                body,
            } => {
                self.counter(*var)?;
                for bound in [start, end] {
                    self.index(bound, "a loop bound")?;
                }
                if matches!(kind, ForKind::Parallel { .. }) {
                    return Err("a partitioned loop cannot be parallel".into());
                }
                self.kind(*kind, *var, body)?;
                // The bounds are clamped to `0 <= start <= end <= extent`.
                let lo = self
                    .ranges
                    .range(self.func, start)
                    .map_or(0, |r| r.0.max(0));
                let hi = self
                    .ranges
                    .range(self.func, end)
                    .map_or(i128::from(*extent), |r| r.1.min(i128::from(*extent)));
                let saved = self.ranges.enter_interval(*var, (lo, hi - 1));
                let r = self.stmt(body);
                self.ranges.leave(*var, saved);
                r
            }
            Stmt::Store {
                buffer,
                index,
                value,
            } => {
                let want = self.buffer(*buffer)?;
                if self.func.buffers[buffer.0 as usize].role == BufferRole::Input {
                    return Err(format!("a store to input {}", self.name(*buffer)));
                }
                self.element(*buffer, index)?;
                let d = self.expr(value)?;
                if d != want.dtype {
                    return Err(format!(
                        "storing a {d} value into {} buffer {}",
                        want.dtype,
                        self.name(*buffer)
                    ));
                }
                Ok(())
            }
            Stmt::Assign { local, value } => {
                let want = self.local(*local)?;
                let d = self.expr(value)?;
                if d != want {
                    return Err(format!("assigning a {d} value to a {want} local"));
                }
                Ok(())
            }
            Stmt::Gemm(g) => self.gemm(g),
            Stmt::Depthwise(d) => self.depthwise(d),
        }
    }

    fn counter(&self, var: LocalId) -> R<()> {
        if self.local(var)? != DType::I64 {
            return Err("a loop counter must be an int64 local".into());
        }
        Ok(())
    }

    /// The lanes of a loop and, for a parallel one, the disjointness of its iterations.
    fn kind(&self, kind: ForKind, var: LocalId, body: &Stmt) -> R<()> {
        let lanes = match kind {
            ForKind::Serial => return Ok(()),
            ForKind::Vectorized { lanes } => lanes,
            ForKind::Parallel { lanes } => {
                parallel_body(var, body)?;
                if lanes == 1 {
                    return Ok(());
                }
                lanes
            }
        };
        if !lanes.is_power_of_two() || !(2..=16).contains(&lanes) {
            return Err(format!("a loop vectorized over {lanes} lanes"));
        }
        if has_loop(body) {
            return Err("a loop or GEMM inside a vectorized loop".into());
        }
        if !crate::analysis::lanes::vector_legal(var, body) {
            return Err(format!(
                "a loop vectorized over {lanes} lanes whose body cannot run them at once"
            ));
        }
        Ok(())
    }

    fn gemm(&self, g: &super::Gemm) -> R<()> {
        let d = self.buffer(g.c.buffer)?.dtype;
        if d != DType::F16 && d != DType::F32 && d != DType::F64 {
            return Err(format!("a GEMM on {d} buffers"));
        }
        for m in [&g.a, &g.b] {
            if self.buffer(m.buffer)?.dtype != d {
                return Err("a GEMM's buffers have different dtypes".into());
            }
            if m.buffer == g.c.buffer {
                return Err(format!(
                    "a GEMM's result {} is also its operand: the product would read what it \
                     overwrites",
                    self.name(m.buffer)
                ));
            }
        }
        if self.func.buffers[g.c.buffer.0 as usize].role == BufferRole::Input {
            return Err(format!("a GEMM writes input {}", self.name(g.c.buffer)));
        }
        if [g.m, g.n, g.k].iter().any(|&x| x < 0) {
            return Err("a GEMM with a negative size".into());
        }
        self.matrix(&g.a, g.m, g.k)?;
        match &g.window {
            Some(w) => self.window(w, &g.b, g.k, g.n)?,
            None => self.matrix(&g.b, g.k, g.n)?,
        }
        self.matrix(&g.c, g.m, g.n)?;
        self.gemm_epilogue(g, d)
    }

    /// The epilogue of `g` (result dtype `d`): at most `MAX_STEPS` steps, each operand an
    /// `m × n` view of a buffer of `d` other than the result.
    fn gemm_epilogue(&self, g: &super::Gemm, d: DType) -> R<()> {
        let e = &g.epilogue;
        if e.is_empty() {
            return Ok(());
        }
        if e.steps.len() > relay_linalg::gemm::epilogue::MAX_STEPS {
            return Err(format!("a GEMM epilogue of {} steps", e.steps.len()));
        }
        for (_, m) in &e.steps {
            if self.buffer(m.buffer)?.dtype != d {
                return Err("a GEMM epilogue operand of another dtype".into());
            }
            if m.buffer == g.c.buffer {
                return Err(format!(
                    "a GEMM's result {} is also an operand of its epilogue",
                    self.name(m.buffer)
                ));
            }
            self.matrix(m, g.m, g.n)?;
        }
        Ok(())
    }

    fn depthwise(&self, d: &super::Depthwise) -> R<()> {
        if !d.params.valid() {
            return Err(format!("a depthwise convolution of shape {:?}", d.params));
        }
        for ((buffer, offset), len) in d.operands() {
            if self.buffer(buffer)?.dtype != DType::F32 {
                return Err(format!(
                    "a depthwise convolution on {} buffers",
                    self.buffer(buffer)?.dtype
                ));
            }
            let len = i128::from(len.unwrap_or(i64::MAX));
            if offset < 0 || len > 0 && i128::from(offset) + len > self.len(buffer) {
                return Err(format!(
                    "a depthwise operand of {len} elements from {offset} does not lie within {}",
                    self.name(buffer)
                ));
            }
        }
        let out = d.out.0;
        if d.data.0 == out || d.weight.0 == out {
            return Err(format!(
                "a depthwise convolution's result {} is also its operand",
                self.name(out)
            ));
        }
        if self.func.buffers[out.0 as usize].role == BufferRole::Input {
            return Err(format!(
                "a depthwise convolution writes input {}",
                self.name(out)
            ));
        }
        Ok(())
    }

    /// A GEMM's image window is `k × n`, `float32`, and its image lies within its buffer.
    fn window(&self, w: &super::ImageWindow, image: &MatrixRef, k: i64, n: i64) -> R<()> {
        if !w.valid() || w.depth() != Some(k) || w.pixels() != Some(n) {
            return Err(format!("a GEMM image window {w:?} for k={k}, n={n}"));
        }
        let span = MatrixRef {
            row_stride: 0,
            col_stride: 1,
            ..image.clone()
        };
        self.matrix(&span, 1, w.image_len().unwrap_or(i64::MAX))
    }

    /// A GEMM matrix of `rows × cols` lies within its buffer.
    fn matrix(&self, m: &MatrixRef, rows: i64, cols: i64) -> R<()> {
        if m.row_stride < 0 || m.col_stride < 0 {
            return Err("a GEMM with a negative stride".into());
        }
        self.index(&m.offset, "a GEMM offset")?;
        if rows == 0 || cols == 0 {
            return Ok(());
        }
        let Some((lo, hi)) = self.ranges.range(self.func, &m.offset) else {
            return Ok(());
        };
        let span = i128::from(rows - 1) * i128::from(m.row_stride)
            + i128::from(cols - 1) * i128::from(m.col_stride);
        self.within(m.buffer, (lo, hi + span), "a GEMM matrix")
    }

    /// `buffer[index]` can be an element of the buffer, as far as interval arithmetic tells.
    fn element(&self, buffer: BufferId, index: &LExpr) -> R<()> {
        self.index(index, "an index")?;
        let Some((lo, hi)) = self.ranges.range(self.func, index) else {
            return Ok(());
        };
        if hi < 0 || lo >= self.len(buffer) {
            return Err(format!(
                "an index of {} ranges over {lo}..={hi}, never within its {} elements",
                self.name(buffer),
                self.len(buffer)
            ));
        }
        Ok(())
    }

    fn len(&self, buffer: BufferId) -> i128 {
        self.func.buffers[buffer.0 as usize]
            .shape
            .iter()
            .map(|&d| i128::from(d))
            .product()
    }

    fn within(&self, buffer: BufferId, (lo, hi): (i128, i128), what: &str) -> R<()> {
        let len = self.len(buffer);
        if lo < 0 || hi >= len {
            return Err(format!(
                "{what} of {} ranges over {lo}..={hi}, outside its {len} elements",
                self.name(buffer)
            ));
        }
        Ok(())
    }

    /// An integer expression (`what` names it in the error).
    fn index(&self, e: &LExpr, what: &str) -> R<()> {
        let d = self.expr(e)?;
        if !d.is_int() && d.code != DTypeCode::Bool {
            return Err(format!("{what} of dtype {d}"));
        }
        Ok(())
    }

    /// The dtype of an expression whose operations are well typed and whose loads are in
    /// bounds where that can be told.
    fn expr(&self, e: &LExpr) -> R<DType> {
        relay_ir::ensure_sufficient_stack(|| {
            Ok(match e {
                LExpr::Local(l) => self.local(*l)?,
                LExpr::Int(_, d) | LExpr::Float(_, d) => *d,
                LExpr::Load { buffer, index } => {
                    let d = self.buffer(*buffer)?.dtype;
                    self.element(*buffer, index)?;
                    d
                }
                LExpr::Unary(op, a) => {
                    let d = self.expr(a)?;
                    match op {
                        UnaryOp::IsNan
                        | UnaryOp::IsInf
                        | UnaryOp::IsFinite
                        | UnaryOp::LogicalNot => DType::BOOL,
                        _ => d,
                    }
                }
                LExpr::Binary(op, a, b) => self.same(&format!("{op:?}"), a, b)?,
                LExpr::Compare(op, a, b) => {
                    self.same(&format!("{op:?}"), a, b)?;
                    DType::BOOL
                }
                LExpr::Select(c, a, b) => {
                    self.expr(c)?;
                    self.same("select", a, b)?
                }
                LExpr::Cast(d, a) => {
                    self.expr(a)?;
                    *d
                }
            })
        })
    }

    fn same(&self, what: &str, a: &LExpr, b: &LExpr) -> R<DType> {
        let (x, y) = (self.expr(a)?, self.expr(b)?);
        if x != y {
            return Err(format!("{what} of {x} and {y}"));
        }
        Ok(x)
    }

    fn local(&self, l: LocalId) -> R<DType> {
        self.func
            .locals
            .get(l.0 as usize)
            .map(|l| l.dtype)
            .ok_or_else(|| format!("local {} does not exist", l.0))
    }

    fn buffer(&self, b: BufferId) -> R<&super::Buffer> {
        self.func
            .buffers
            .get(b.0 as usize)
            .ok_or_else(|| format!("buffer {} does not exist", b.0))
    }

    fn name(&self, b: BufferId) -> &str {
        self.func
            .buffers
            .get(b.0 as usize)
            .map_or("?", |b| b.name.as_str())
    }
}

/// Whether a statement holds a loop or a GEMM.
fn has_loop(s: &Stmt) -> bool {
    match s {
        Stmt::Seq(items) => items.iter().any(has_loop),
        Stmt::For { .. } | Stmt::Range { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => true,
        Stmt::Store { .. } | Stmt::Assign { .. } => false,
    }
}

/// The body of a parallel loop over `var`: it reads only locals it sets itself (its counter,
/// its loops' counters, its assignments), and every store and GEMM result in it is at an
/// index that depends on `var`, so that iterations write disjoint elements.
fn parallel_body(var: LocalId, body: &Stmt) -> R<()> {
    let mut own = HashSet::from([var]);
    set_locals(body, &mut own);
    let mut problem = None;
    body.exprs(&mut |e| {
        e.visit(&mut |n| {
            if let LExpr::Local(l) = n
                && !own.contains(l)
                && problem.is_none()
            {
                problem = Some(format!(
                    "a parallel loop reads local {} assigned outside it",
                    l.0
                ));
            }
        })
    });
    if let Some(p) = problem {
        return Err(p);
    }
    let varying = varying_locals(var, body);
    let access = super::Accesses::of(body);
    for w in &access.writes {
        let depends = match &w.place {
            super::Place::At(index) => mentions(index, &varying),
            super::Place::Whole => {
                !depthwise_writes(body, w.buffer)
                    && gemm_offsets(body, w.buffer)
                        .iter()
                        .all(|o| mentions(o, &varying))
            }
        };
        if !depends {
            return Err(format!(
                "iterations of a parallel loop write buffer {} at the same elements",
                w.buffer.0
            ));
        }
    }
    Ok(())
}

/// Every local a statement sets: loop counters and assigned locals.
fn set_locals(s: &Stmt, out: &mut HashSet<LocalId>) {
    match s {
        Stmt::Seq(items) => items.iter().for_each(|s| set_locals(s, out)),
        Stmt::For { var, body, .. } | Stmt::Range { var, body, .. } => {
            out.insert(*var);
            set_locals(body, out);
        }
        Stmt::Assign { local, .. } => {
            out.insert(*local);
        }
        Stmt::Store { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => {}
    }
}

/// `var` and the locals of `body` assigned from values that depend on it.
fn varying_locals(var: LocalId, body: &Stmt) -> HashSet<LocalId> {
    let mut varying = HashSet::from([var]);
    loop {
        let before = varying.len();
        add_varying(body, &mut varying);
        if varying.len() == before {
            return varying;
        }
    }
}

fn add_varying(s: &Stmt, varying: &mut HashSet<LocalId>) {
    match s {
        Stmt::Seq(items) => items.iter().for_each(|s| add_varying(s, varying)),
        Stmt::For { body, .. } | Stmt::Range { body, .. } => add_varying(body, varying),
        Stmt::Assign { local, value } => {
            if mentions(value, varying) {
                varying.insert(*local);
            }
        }
        Stmt::Store { .. } | Stmt::Gemm(_) | Stmt::Depthwise(_) => {}
    }
}

/// Whether `e` reads one of `locals`.
fn mentions(e: &LExpr, locals: &HashSet<LocalId>) -> bool {
    let mut found = false;
    e.visit(&mut |n| found |= matches!(n, LExpr::Local(l) if locals.contains(l)));
    found
}

/// Whether a depthwise convolution in `s` writes `buffer` (always at the same elements).
fn depthwise_writes(s: &Stmt, buffer: BufferId) -> bool {
    match s {
        Stmt::Seq(items) => items.iter().any(|s| depthwise_writes(s, buffer)),
        Stmt::For { body, .. } | Stmt::Range { body, .. } => depthwise_writes(body, buffer),
        Stmt::Depthwise(d) => d.out.0 == buffer,
        _ => false,
    }
}

/// The offsets of the GEMM results written to `buffer` in `s`.
fn gemm_offsets(s: &Stmt, buffer: BufferId) -> Vec<&LExpr> {
    match s {
        Stmt::Seq(items) => items.iter().flat_map(|s| gemm_offsets(s, buffer)).collect(),
        Stmt::For { body, .. } | Stmt::Range { body, .. } => gemm_offsets(body, buffer),
        Stmt::Gemm(g) if g.c.buffer == buffer => vec![&g.c.offset],
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use relay_ir::DType;

    use super::verify;
    use crate::loops::{
        Buffer, BufferId, BufferRole, ForKind, Gemm, LExpr, Local, LocalId, LoopFunc, MatrixRef,
        Stmt,
    };

    fn buffer(name: &str, shape: &[i64], role: BufferRole) -> Buffer {
        Buffer {
            name: name.into(),
            dtype: DType::F32,
            shape: shape.to_vec(),
            role,
        }
    }

    fn matrix(b: u32, row_stride: i64) -> MatrixRef {
        MatrixRef {
            buffer: BufferId(b),
            offset: LExpr::Int(0, DType::I64),
            row_stride,
            col_stride: 1,
        }
    }

    /// `p0: [512, 512] in`, `out: [512, 196] out`, `col: [512, 196] scratch`, and `body`.
    fn kernel(body: Stmt) -> LoopFunc {
        LoopFunc {
            name: "k".into(),
            buffers: vec![
                buffer("p0", &[512, 512], BufferRole::Input),
                buffer("out", &[512, 196], BufferRole::Output),
                buffer("col", &[512, 196], BufferRole::Scratch),
            ],
            locals: vec![Local {
                name: "i0".into(),
                dtype: DType::I64,
            }],
            body,
        }
    }

    fn gemm(b: u32, c: u32) -> Stmt {
        Stmt::Gemm(Box::new(Gemm {
            m: 512,
            n: 196,
            k: 512,
            a: matrix(0, 512),
            b: matrix(b, 196),
            c: matrix(c, 196),
            window: None,
            epilogue: super::super::GemmEpilogue::NONE,
        }))
    }

    fn message(func: &LoopFunc) -> String {
        verify(func)
            .expect_err("the verifier accepts it")
            .to_string()
    }

    #[test]
    fn a_gemm_reading_its_own_result_is_rejected() {
        verify(&kernel(gemm(2, 1))).expect("a GEMM from scratch into the output is valid");
        let m = message(&kernel(gemm(1, 1)));
        assert!(m.contains("result out is also its operand"), "{m}");
    }

    #[test]
    fn gemm_matrices_must_fit_their_buffers() {
        let mut g = gemm(2, 1);
        if let Stmt::Gemm(g) = &mut g {
            g.c.offset = LExpr::Int(1, DType::I64);
        }
        let m = message(&kernel(g));
        assert!(
            m.contains("a GEMM matrix of out ranges over 1..=100352"),
            "{m}"
        );
    }

    fn store(buffer: u32, index: LExpr) -> Stmt {
        Stmt::Store {
            buffer: BufferId(buffer),
            index,
            value: LExpr::Float(0.0, DType::F32),
        }
    }

    fn counter() -> LExpr {
        LExpr::Local(LocalId(0))
    }

    fn for_loop(kind: ForKind, body: Stmt) -> Stmt {
        Stmt::For {
            var: LocalId(0),
            extent: 100_352,
            kind,
            body: Box::new(body),
        }
    }

    #[test]
    fn parallel_iterations_must_write_disjoint_elements() {
        let ok = for_loop(ForKind::Parallel { lanes: 4 }, store(1, counter()));
        verify(&kernel(ok)).expect("one element per iteration is valid");
        let same = for_loop(
            ForKind::Parallel { lanes: 1 },
            store(1, LExpr::Int(0, DType::I64)),
        );
        assert!(message(&kernel(same)).contains("at the same elements"));
    }

    #[test]
    fn stores_dtypes_lanes_and_bounds_are_checked() {
        let input = for_loop(ForKind::Serial, store(0, counter()));
        assert!(message(&kernel(input)).contains("a store to input p0"));
        let lanes = for_loop(ForKind::Vectorized { lanes: 3 }, store(1, counter()));
        assert!(message(&kernel(lanes)).contains("vectorized over 3 lanes"));
        let nested = for_loop(
            ForKind::Vectorized { lanes: 4 },
            for_loop(ForKind::Serial, store(1, counter())),
        );
        assert!(message(&kernel(nested)).contains("a loop or GEMM inside a vectorized loop"));
        let never = store(1, LExpr::Int(100_352, DType::I64));
        assert!(message(&kernel(never)).contains("never within its 100352 elements"));
        let dtype = Stmt::Store {
            buffer: BufferId(1),
            index: LExpr::Int(0, DType::I64),
            value: LExpr::Int(0, DType::I32),
        };
        assert!(message(&kernel(dtype)).contains("storing a int32 value into float32"));
        let float_index = store(1, LExpr::Float(0.0, DType::F32));
        assert!(message(&kernel(float_index)).contains("an index of dtype float32"));
    }
}
