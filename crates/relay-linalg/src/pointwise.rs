//! A function of one variable applied to every element of a `float32` tensor, written as a
//! small program of vector steps — `gelu(x + bias)` as `erf`, adds and multiplies, SiLU as
//! `x · sigmoid(x)` — the operators MLAS computes whole (`MlasComputeErf`,
//! `MlasComputeTanh`, `MlasComputeLogistic`) and ONNX Runtime fuses (`BiasGelu`,
//! `FastGelu`). The kernel compiler's loops are at most 4 lanes wide (Cranelift's vectors),
//! and its `erf` and `tanh` are most of such a kernel's time; here each step runs over a block
//! of [`BLOCK`] elements in the cache, in loops the compiler vectorizes for the table's
//! instruction set (8 lanes with AVX2, 16 with AVX-512), with the method and coefficients of
//! the inline math ([`crate::math`]).
//!
//! A [`Program`] reads the variable `x`, rows of biases broadcast along `x`'s leading axes
//! (element `i` reads element `i mod len` of a bias: a bias has the extents of `x`'s last
//! axes), and scalars; every step writes a block register. The blocks are spread over the
//! context's threads.

use crate::context::{KernelContext, SharedOut};
use crate::isa::Isa;
use crate::math::{erf, exp_clamped};
use crate::rnn::activation::{sigmoid, tanh};

/// Elements per block: every register of a program's block stays in L1.
pub const BLOCK: usize = 256;

/// A function of one element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unary {
    /// `-v`.
    Negative,
    /// `e^v`.
    Exp,
    /// `tanh(v)`.
    Tanh,
    /// `1 / (1 + e^-v)`.
    Sigmoid,
    /// `erf(v)`.
    Erf,
    /// `√v`.
    Sqrt,
}

/// A function of two elements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Binary {
    /// `a + b`.
    Add,
    /// `a - b`.
    Subtract,
    /// `a · b`.
    Multiply,
    /// `a / b`.
    Divide,
    /// `a^b` (by a scalar 2 or 3: products).
    Power,
}

/// Where a step reads an operand.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Src {
    /// The variable.
    X,
    /// Bias `i` of the call's biases.
    Bias(usize),
    /// Scalar `i` of the call's scalars.
    Scalar(usize),
    /// The result of step `i` (an earlier one).
    Step(usize),
}

/// A step of a [`Program`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// `f(a)`.
    Unary(Unary, Src),
    /// `f(a, b)`.
    Binary(Binary, Src, Src),
}

/// Steps in order, each reading the variable, biases, scalars or earlier steps; the last is
/// the result.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Program {
    /// The steps.
    pub steps: Vec<Step>,
}

impl Program {
    /// An error unless every step reads only earlier steps, biases below `biases` and scalars
    /// below `scalars`, and there is a step.
    pub fn check(&self, biases: usize, scalars: usize) -> Result<(), String> {
        if self.steps.is_empty() {
            return Err("a pointwise program without steps".into());
        }
        let ok = |s: &Src, at: usize| match *s {
            Src::X => true,
            Src::Bias(i) => i < biases,
            Src::Scalar(i) => i < scalars,
            Src::Step(i) => i < at,
        };
        for (at, step) in self.steps.iter().enumerate() {
            let fine = match step {
                Step::Unary(_, a) => ok(a, at),
                Step::Binary(_, a, b) => ok(a, at) && ok(b, at),
            };
            if !fine {
                return Err(format!("step {at} of a pointwise program reads {step:?}"));
            }
        }
        Ok(())
    }
}

/// The operands of one call.
#[derive(Clone, Copy, Debug)]
pub struct Operands<'a> {
    /// The variable, as many elements as the result.
    pub x: &'a [f32],
    /// The biases, each read at `i mod len` (none empty when the result is not).
    pub biases: &'a [&'a [f32]],
    /// The scalars.
    pub scalars: &'a [f32],
}

/// `program` on elements `first..first + y.len()` of `ops` into `y` (at most [`BLOCK`]), its
/// registers in `regs` (a block per bias, then per step), on one instruction set's path.
/// [`Ops::pointwise`](crate::Ops::pointwise) is the one of a table.
pub type PointwiseFn =
    fn(program: &Program, ops: &Operands<'_>, first: usize, y: &mut [f32], regs: &mut [f32]);

/// Blocks per chunk of work handed to a thread.
const CHUNK_BLOCKS: usize = 16;

/// Computes `program` of `ops` into `y` with the kernels and threads of `ctx`; an error if
/// the program reads what `ops` lacks, or the lengths do not fit.
pub fn pointwise(
    ctx: &KernelContext,
    program: &Program,
    ops: &Operands<'_>,
    y: &mut [f32],
) -> Result<(), String> {
    program.check(ops.biases.len(), ops.scalars.len())?;
    if ops.x.len() != y.len() {
        return Err(format!(
            "a pointwise function of {} elements into {}",
            ops.x.len(),
            y.len()
        ));
    }
    if y.is_empty() {
        return Ok(());
    }
    if ops.biases.iter().any(|b| b.is_empty()) {
        return Err("an empty bias".into());
    }
    let f = ctx.ops().pointwise;
    let regs_len = (ops.biases.len() + program.steps.len()) * BLOCK;
    let chunk = CHUNK_BLOCKS * BLOCK;
    let chunks = y.len().div_ceil(chunk);
    let run = |first: usize, y: &mut [f32]| {
        REGS.with_borrow_mut(|regs| {
            if regs.len() < regs_len {
                regs.resize(regs_len, 0.0);
            }
            for (b, y) in y.chunks_mut(BLOCK).enumerate() {
                f(program, ops, first + b * BLOCK, y, &mut regs[..regs_len]);
            }
        })
    };
    if chunks <= 1 || ctx.threads() == 1 {
        run(0, y);
        return Ok(());
    }
    let out = SharedOut(y.as_mut_ptr());
    let len = y.len();
    ctx.parallel(chunks as i64, &|c| {
        let first = c as usize * chunk;
        let n = chunk.min(len - first);
        // SAFETY: chunk `c` writes elements `first..first + n` of `y` only, disjoint from
        // every other chunk's, and `y` outlives the parallel call.
        let y = unsafe { std::slice::from_raw_parts_mut(out.at(first), n) };
        run(first, y);
        0
    });
    Ok(())
}

thread_local! {
    /// A thread's block registers.
    static REGS: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The pointwise block function of `isa` (the portable one if the CPU lacks it).
pub(crate) fn pointwise_for(isa: Isa) -> PointwiseFn {
    match isa {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX-512F, AVX2 and FMA (checked).
        Isa::Avx512 if Isa::detected() == Isa::Avx512 => {
            |p, o, first, y, regs| unsafe { block_avx512(p, o, first, y, regs) }
        }
        #[cfg(target_arch = "x86_64")]
        // SAFETY: the CPU has AVX2 and FMA (checked).
        Isa::Avx2 if Isa::detected() != Isa::Portable => {
            |p, o, first, y, regs| unsafe { block_avx2(p, o, first, y, regs) }
        }
        _ => block::<false>,
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn block_avx512(p: &Program, o: &Operands<'_>, first: usize, y: &mut [f32], r: &mut [f32]) {
    block::<true>(p, o, first, y, r)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn block_avx2(p: &Program, o: &Operands<'_>, first: usize, y: &mut [f32], r: &mut [f32]) {
    block::<true>(p, o, first, y, r)
}

/// One block: the biases' elements, then each step over its `n = y.len()` elements into its
/// register (after the biases'), the last copied to `y`.
#[inline(always)]
fn block<const FMA: bool>(
    program: &Program,
    ops: &Operands<'_>,
    first: usize,
    y: &mut [f32],
    regs: &mut [f32],
) {
    let n = y.len();
    let biases = ops.biases.len();
    for (i, bias) in ops.biases.iter().enumerate() {
        fill_bias(bias, first, &mut regs[i * BLOCK..i * BLOCK + n]);
    }
    let x = &ops.x[first..first + n];
    for (at, step) in program.steps.iter().enumerate() {
        // Biases and earlier steps lie before this step's register.
        let (before, after) = regs.split_at_mut((biases + at) * BLOCK);
        let out = &mut after[..n];
        let read = |s: Src| match s {
            Src::X => Operand::Row(x),
            Src::Bias(i) => Operand::Row(&before[i * BLOCK..i * BLOCK + n]),
            Src::Scalar(i) => Operand::Scalar(ops.scalars[i]),
            Src::Step(i) => Operand::Row(&before[(biases + i) * BLOCK..(biases + i) * BLOCK + n]),
        };
        match *step {
            Step::Unary(f, a) => unary::<FMA>(f, read(a), out),
            Step::Binary(f, a, b) => binary::<FMA>(f, read(a), read(b), out),
        }
    }
    let last = (biases + program.steps.len() - 1) * BLOCK;
    y.copy_from_slice(&regs[last..last + n]);
}

/// A step's operand: a block of elements or one scalar.
#[derive(Clone, Copy)]
enum Operand<'a> {
    Row(&'a [f32]),
    Scalar(f32),
}

/// Elements `first..first + out.len()` of the periodic `bias` into `out`.
#[inline(always)]
fn fill_bias(bias: &[f32], first: usize, out: &mut [f32]) {
    let mut at = first % bias.len();
    let mut done = 0;
    while done < out.len() {
        let n = (bias.len() - at).min(out.len() - done);
        out[done..done + n].copy_from_slice(&bias[at..at + n]);
        done += n;
        at = 0;
    }
}

#[inline(always)]
fn unary<const FMA: bool>(f: Unary, a: Operand<'_>, out: &mut [f32]) {
    match f {
        Unary::Negative => each(a, out, |v| -v),
        Unary::Exp => each(a, out, |v| exp_clamped::<FMA>(v.clamp(-104.0, 89.0), true)),
        Unary::Tanh => each(a, out, tanh::<FMA>),
        Unary::Sigmoid => each(a, out, sigmoid::<FMA>),
        Unary::Erf => each(a, out, erf::<FMA>),
        Unary::Sqrt => each(a, out, f32::sqrt),
    }
}

/// `out[i] = g(a[i])`, inlined so that the loop vectorizes.
#[inline(always)]
fn each(a: Operand<'_>, out: &mut [f32], g: impl Fn(f32) -> f32) {
    match a {
        Operand::Row(a) => out.iter_mut().zip(a).for_each(|(o, &v)| *o = g(v)),
        Operand::Scalar(s) => out.fill(g(s)),
    }
}

#[inline(always)]
fn binary<const FMA: bool>(f: Binary, a: Operand<'_>, b: Operand<'_>, out: &mut [f32]) {
    match f {
        Binary::Add => both(a, b, out, |x, y| x + y),
        Binary::Subtract => both(a, b, out, |x, y| x - y),
        Binary::Multiply => both(a, b, out, |x, y| x * y),
        Binary::Divide => both(a, b, out, |x, y| x / y),
        // A cube in `f64`, rounded once more to `f32`, as the inline math and the reference.
        Binary::Power => match b {
            Operand::Scalar(2.0) => each(a, out, |x| x * x),
            Operand::Scalar(3.0) => each(a, out, |x| {
                let x = f64::from(x);
                (x * x * x) as f32
            }),
            _ => both(a, b, out, f32::powf),
        },
    }
}

/// `out[i] = g(a[i], b[i])` with scalars broadcast, inlined so that the loop vectorizes.
#[inline(always)]
fn both(a: Operand<'_>, b: Operand<'_>, out: &mut [f32], g: impl Fn(f32, f32) -> f32) {
    match (a, b) {
        (Operand::Row(a), Operand::Row(b)) => out
            .iter_mut()
            .zip(a.iter().zip(b))
            .for_each(|(o, (&x, &y))| *o = g(x, y)),
        (Operand::Row(a), Operand::Scalar(y)) => {
            out.iter_mut().zip(a).for_each(|(o, &x)| *o = g(x, y))
        }
        (Operand::Scalar(x), Operand::Row(b)) => {
            out.iter_mut().zip(b).for_each(|(o, &y)| *o = g(x, y))
        }
        (Operand::Scalar(x), Operand::Scalar(y)) => out.fill(g(x, y)),
    }
}

#[cfg(test)]
mod tests;
