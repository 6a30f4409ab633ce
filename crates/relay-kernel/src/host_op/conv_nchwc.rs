//! A blocked convolution and its epilogue, on [`relay_linalg::nchwc`]: a primitive whose body
//! is `nn.contrib_conv2d_NCHWc` (or `nn.conv2d` in the same layouts) of a `float32`
//! parameter by a constant or parameter weight — data `NCHW{bi}c` (or `NCHW`: the stem),
//! kernel `OIHW{bi}i{B}o` (`OIHW{B}o` for `NCHW` data), result `NCHW{B}c` with `B` 8 or 16,
//! static shapes — followed by up to four `add`s and `multiply`s, each by a per-channel
//! constant (a bias, a batch norm's scale or shift: shape `[1, O/B, 1, 1, B]` or
//! `[O/B, 1, 1, B]`, or one element) or by a parameter of the result's shape (a residual),
//! then `relu` or `clip`. Each step is the IEEE operation of its operator, applied while the
//! output block is in registers. `nn.contrib_depthwise_conv2d_NCHWc` (data and result
//! `NCHW{B}c`, kernel `OIHW1i{B}o`) is the kernel's depthwise form, with the same epilogues.
//! Anything else (another layout, a broadcast the kernel does not know) stays a loop nest.

use std::sync::Arc;

use relay_ir::{Attrs, DType, Expr, ExprKind, Function, NDArray};
use relay_linalg::KernelContext;
use relay_linalg::gemm::epilogue::{Lower, Step};
use relay_linalg::nchwc::{MAX_STEPS, NchwcConv, NchwcEpilogue, StepOperand, conv_nchwc};
use relay_ops::support::{attr_float, attr_int, attr_ints, attr_str, scalar_f32_constant};

use super::resolve;

/// A blocked convolution with its epilogue (see the module's documentation).
#[derive(Clone, Debug)]
pub struct ConvNchwc {
    /// The shape.
    shape: NchwcConv,
    /// The data's parameter.
    data: usize,
    /// The weight: a parameter or a constant.
    weight: Operand,
    /// The epilogue's steps in order, and its clamps.
    steps: Vec<(Step, Source, Operand)>,
    upper: Option<f32>,
    lower: Lower<f32>,
}

/// How an epilogue operand is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Source {
    /// One value per output channel.
    Channel,
    /// An element per result element.
    Full,
}

/// An operand of the kernel.
#[derive(Clone, Debug)]
enum Operand {
    /// Kernel argument `i` (a parameter).
    Arg(usize),
    /// A constant of the primitive, in the kernel's order (a step's: one value per channel).
    Constant(Arc<NDArray>),
    /// Per-channel values made from a constant (a one-element constant repeated).
    Values(Arc<Vec<f32>>),
}

/// The blocked convolution `func` computes, when it is one.
pub(super) fn recognize(func: &Function) -> Option<ConvNchwc> {
    let (bindings, body) = match func.body.kind() {
        ExprKind::Let { bindings, body } => (bindings.as_slice(), body),
        _ => (&[][..], &func.body),
    };
    let param = |e: &Expr| match e.kind() {
        ExprKind::Var(v) => func.params.iter().position(|p| p == v),
        _ => None,
    };
    let result = f32_shape(body.checked_type()?)?;
    // The clamps, outermost.
    let mut e = resolve(bindings, body);
    let (mut upper, mut lower) = (None, Lower::None);
    if let Some((op, [x], attrs)) = e.op_call() {
        match op.name {
            "nn.relu" => lower = Lower::Relu(0.0),
            "clip" => {
                upper = Some(attr_float(attrs, "a_max").ok()? as f32);
                lower = Lower::Clip(attr_float(attrs, "a_min").ok()? as f32);
            }
            _ => {}
        }
        if lower != Lower::None {
            e = resolve(bindings, x);
        }
    }
    // The steps, outermost first; the convolution under them.
    let mut steps = Vec::new();
    let conv = loop {
        let (op, args, attrs) = e.op_call()?;
        let step = match op.name {
            "add" => Step::Add,
            "multiply" => Step::Mul,
            "nn.contrib_conv2d_NCHWc" | "nn.conv2d" => break (false, args, attrs),
            "nn.contrib_depthwise_conv2d_NCHWc" => break (true, args, attrs),
            _ => return None,
        };
        let [a, b] = args else { return None };
        let (inner, operand) = match (operand(b, &result, &param), operand(a, &result, &param)) {
            (Some(o), _) => (a, o),
            (None, Some(o)) => (b, o),
            (None, None) => return None,
        };
        if steps.len() == MAX_STEPS {
            return None;
        }
        steps.push((step, operand.0, operand.1));
        e = resolve(bindings, inner);
    };
    steps.reverse();
    let (depthwise, args, attrs) = conv;
    let [x, w] = args else { return None };
    let data = param(resolve(bindings, x))?;
    let w = resolve(bindings, w);
    let weight = match (w.kind(), param(w)) {
        (_, Some(i)) => Operand::Arg(i),
        (ExprKind::Constant(c), None) if c.dtype() == DType::F32 => Operand::Constant(c.clone()),
        _ => return None,
    };
    let x_shape = f32_shape(x.checked_type()?)?;
    let w_shape = f32_shape(w.checked_type()?)?;
    let shape = blocked(attrs, &x_shape, &w_shape, &result, depthwise)?;
    // Every binding is on the chain (a let-bound value nothing reads is not this function).
    let used = bindings.len() <= steps.len() + 2;
    (used && shape.check().is_ok()).then_some(ConvNchwc {
        shape,
        data,
        weight,
        steps,
        upper,
        lower,
    })
}

/// An epilogue operand: a tensor of the result's shape (a residual), or per-channel values of
/// a blocked result `[N, O/B, OH, OW, B]` (shape `[.., O/B, 1, 1, B]`, or one element of a
/// constant): a parameter or a constant.
fn operand(
    e: &Expr,
    result: &[i64],
    param: &dyn Fn(&Expr) -> Option<usize>,
) -> Option<(Source, Operand)> {
    let shape = f32_shape(e.checked_type()?)?;
    let source = match (param(e), e.kind()) {
        (Some(i), _) => Operand::Arg(i),
        (None, ExprKind::Constant(c)) => match scalar_f32_constant(e) {
            Some(v) => {
                let channels = result.get(1)? * result.get(4)?;
                let values = vec![v; usize::try_from(channels).ok()?];
                return Some((Source::Channel, Operand::Values(Arc::new(values))));
            }
            None => Operand::Constant(c.clone()),
        },
        _ => return None,
    };
    let (blocks, b) = (result.get(1).copied()?, result.get(4).copied()?);
    match shape.as_slice() {
        s if s == result => Some((Source::Full, source)),
        &[1, o, 1, 1, ob] | &[o, 1, 1, ob] if (o, ob) == (blocks, b) => {
            Some((Source::Channel, source))
        }
        _ => None,
    }
}

/// The shape of a blocked convolution (`depthwise`: `nn.contrib_depthwise_conv2d_NCHWc`, one
/// group per channel whatever `groups` says, as in TVM's compute) with `attrs` of data `x` by
/// weight `w` into `out`, when the kernel computes it.
fn blocked(attrs: &Attrs, x: &[i64], w: &[i64], out: &[i64], depthwise: bool) -> Option<NchwcConv> {
    let &[n, blocks, oh, ow, b] = out else {
        return None;
    };
    let data_layout = attr_str(attrs, "data_layout").ok()?;
    let out_layout = match attr_str(attrs, "out_layout").ok()? {
        "" => data_layout,
        l => l,
    };
    if out_layout != format!("NCHW{b}c") {
        return None;
    }
    let (c, bi, h, wd) = match *x {
        [xn, cb, h, wd, bi] if data_layout == format!("NCHW{bi}c") && xn == n => {
            (cb * bi, bi, h, wd)
        }
        [xn, c, h, wd] if data_layout == "NCHW" && xn == n => (c, 1, h, wd),
        _ => return None,
    };
    let kernel_layout = attr_str(attrs, "kernel_layout").ok()?;
    let (kh, kw) = match *w {
        [ob, 1, kh, kw, 1, wo]
            if depthwise
                && kernel_layout == format!("OIHW1i{b}o")
                && (ob, wo, bi, blocks * b) == (blocks, b, b, c) =>
        {
            (kh, kw)
        }
        _ if depthwise => return None,
        [ob, _, kh, kw, wi, wo]
            if kernel_layout == format!("OIHW{bi}i{b}o") && (ob, wi, wo) == (blocks, bi, b) =>
        {
            (kh, kw)
        }
        [ob, _, kh, kw, wo]
            if bi == 1 && kernel_layout == format!("OIHW{b}o") && (ob, wo) == (blocks, b) =>
        {
            (kh, kw)
        }
        _ => return None,
    };
    let pair = |name: &str| match attr_ints(attrs, name).ok()?.as_slice() {
        &[a, b] if a > 0 && b > 0 => Some([a as usize, b as usize]),
        _ => None,
    };
    let pad = match attr_ints(attrs, "padding").ok()?.as_slice() {
        &[p] => [p, p],
        &[t, l] | &[t, l, _, _] => [t, l],
        _ => return None,
    };
    let size = |v: i64| usize::try_from(v).ok();
    Some(NchwcConv {
        batch: size(n)?,
        groups: match depthwise {
            true => size(c)?,
            false => size(attr_int(attrs, "groups").ok()?)?,
        },
        channels: size(c)?,
        in_block: size(bi)?,
        out_channels: size(blocks.checked_mul(b)?)?,
        block: size(b)?,
        input: [size(h)?, size(wd)?],
        output: [size(oh)?, size(ow)?],
        kernel: [size(kh)?, size(kw)?],
        stride: pair("strides")?,
        dilation: pair("dilation")?,
        pad: [size(pad[0])?, size(pad[1])?],
    })
}

/// The static shape of a `float32` tensor type.
pub(super) fn f32_shape(t: &relay_ir::Type) -> Option<Vec<i64>> {
    match super::softmax::tensor_dims(t)? {
        (DType::F32, dims) => dims.into_iter().collect(),
        _ => None,
    }
}

impl ConvNchwc {
    /// The output's shape: the static result's (the spec holds it).
    pub fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let p = &self.shape;
        let data = inputs.get(self.data).ok_or("no data")?;
        if data.first().copied() != Some(p.batch as i64) {
            return Err(format!("data of shape {data:?} for {p:?}"));
        }
        Ok(vec![vec![
            p.batch as i64,
            (p.out_channels / p.block) as i64,
            p.output[0] as i64,
            p.output[1] as i64,
            p.block as i64,
        ]])
    }

    /// Computes the convolution into the output (`args`' last), the arguments checked
    /// against the spec (static shapes: the recognized ones).
    pub fn run(&self, ctx: &KernelContext, args: &mut [&mut [f32]]) -> Result<(), String> {
        let (out, inputs) = args.split_last_mut().ok_or("no output")?;
        let p = &self.shape;
        let [h, w] = p.input;
        let [oh, ow] = p.output;
        let [kh, kw] = p.kernel;
        let lens = [
            p.batch * p.channels * h * w,
            p.out_channels * p.channels / p.groups * kh * kw,
            p.batch * p.out_channels * oh * ow,
        ];
        let read = |o: &Operand, len: usize| -> Result<*const f32, String> {
            let s: &[f32] = match o {
                Operand::Arg(i) => inputs.get(*i).map(|a| &**a).ok_or("no argument")?,
                Operand::Constant(c) => super::matmul::floats(c).ok_or("a non-float constant")?,
                Operand::Values(v) => v,
            };
            (s.len() == len)
                .then_some(s.as_ptr())
                .ok_or_else(|| format!("an operand of {} elements, expected {len}", s.len()))
        };
        let x = read(&Operand::Arg(self.data), lens[0])?;
        let wt = read(&self.weight, lens[1])?;
        if out.len() != lens[2] {
            return Err(format!("an output of {} elements", out.len()));
        }
        let mut steps = [None; MAX_STEPS];
        for (slot, (step, source, o)) in steps.iter_mut().zip(&self.steps) {
            *slot = Some(match source {
                Source::Full => (*step, StepOperand::Full(read(o, lens[2])?)),
                Source::Channel => (*step, StepOperand::Channel(read(o, p.out_channels)?)),
            });
        }
        let epilogue = NchwcEpilogue {
            steps,
            upper: self.upper,
            lower: self.lower,
        };
        let e = (!self.steps.is_empty() || self.upper.is_some() || self.lower != Lower::None)
            .then_some(&epilogue);
        // SAFETY: the operands hold the shape's elements (checked above); the output is
        // disjoint from every input (the caller's contract).
        unsafe { conv_nchwc(Some(ctx), p, x, wt, out.as_mut_ptr(), e) }.map_err(|e| e.to_string())
    }
}
