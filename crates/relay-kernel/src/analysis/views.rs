//! Which host routine a contraction or an operand is: a depthwise or small-group convolution
//! the host computes directly ([`host_depthwise`]), an im2col the GEMM reads as an image window
//! ([`conv_window`]), an input read in place ([`input_view`]). Recognized on the inlined
//! expression ([`super::inline`]); the schedule decides with them, lowering builds the calls.

use std::collections::HashMap;

use relay_ir::DType;
use relay_ir::te::{BinaryOp, CmpOp, Tensor};
use relay_linalg::depthwise::DepthwiseParams;

use super::inline::*;
use super::strides;
use crate::contract::{Contraction, Index};
use crate::loops::ImageWindow;

/// An im2col operand a GEMM reads as an image window (`relay_linalg::gemm::Window`, implicit
/// im2col) instead of materializing it ([`conv_window`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvWindow {
    /// The input holding the image.
    pub(crate) data: usize,
    /// The window of one group of one image.
    pub(crate) window: ImageWindow,
    /// The im2col's strides along its batch and group axes, and the image's.
    col_strides: [i64; 2],
    image_strides: [i64; 2],
}

impl ConvWindow {
    /// The image stride for a batch axis with im2col stride `s` (0: an axis it does not
    /// read), if the axis is the im2col's batch or group axis.
    pub(crate) fn image_stride(&self, s: i64) -> Option<i64> {
        match s {
            0 => Some(0),
            _ if s == self.col_strides[0] => Some(self.image_strides[0]),
            _ if s == self.col_strides[1] => Some(self.image_strides[1]),
            _ => None,
        }
    }
}

/// The image window `col` is, when it is a float `col[n, g, c, kh, kw, y, x]` of an NCHW
/// kernel input ([`im2col_window`], shared with the host depthwise convolution) whose group
/// `g` reads channels `g·C .. g·C + C` in order: the convolution's GEMM then packs its `b`
/// straight from the input, and `col` is not materialized (`schedule::materialized`).
pub(crate) fn conv_window(col: &Tensor, inputs: &[Tensor]) -> Option<ConvWindow> {
    let &[n, g, cg, kh, kw, oh, ow] = col.shape.as_slice() else {
        return None;
    };
    let Im2col {
        data,
        window: [sh, dh, pt, sw, dw, pl],
        channel: [per_group, per_channel],
    } = im2col_window(col, inputs)?;
    let x = inputs.get(data)?;
    let &[xn, xc, h, w] = x.shape.as_slice() else {
        return None;
    };
    let channels_ok = (g == 1 || per_group == cg)
        && (cg == 1 || per_channel == 1)
        && g.checked_mul(cg) == Some(xc)
        && xn == n;
    let float = [DType::F16, DType::F32, DType::F64].contains(&col.dtype);
    if !float || x.dtype != col.dtype || !channels_ok {
        return None;
    }
    let window = ImageWindow {
        channels: cg,
        height: h,
        width: w,
        kernel_h: kh,
        kernel_w: kw,
        stride_h: sh,
        stride_w: sw,
        dilation_h: dh,
        dilation_w: dw,
        pad_top: pt,
        pad_left: pl,
        out_h: oh,
        out_w: ow,
    };
    let st = strides(&col.shape);
    let hw = h.checked_mul(w)?;
    let image_strides = [xc.checked_mul(hw)?, cg.checked_mul(hw)?];
    window.valid().then_some(ConvWindow {
        data,
        window,
        col_strides: [st[0], st[1]],
        image_strides,
    })
}

/// A computed GEMM operand that is a kernel input read in place: `(input, offset)` when `t`'s
/// element at every index is the input's element at `offset` plus `t`'s own row-major flat
/// index — a convolution's `T_conv2d_weight` (OIHW weights are already the `[O, I·KH·KW]`
/// matrix, per group a sub-matrix) and the `T_conv2d_col` of a 1×1, stride-1, unpadded
/// convolution (the data's `[C, H·W]` per batch). The GEMM then reads the input itself and
/// the copy is not made. Padding conditions and index clamps that interval arithmetic proves
/// idle are dropped; anything else (a strided or padded window, a cast) is no view.
pub(crate) fn input_view(t: &Tensor, inputs: &[Tensor]) -> Option<(usize, i64)> {
    let no_buffers = HashMap::new();
    let rank = t.shape.len();
    let (inliner, mut v) = Inliner::elementwise(t, inputs, &no_buffers)?;
    // `select(cond, x, 0)` whose condition always holds is `x`.
    while let Val::Select(cond, then, _) = &v {
        let mut terms = Vec::new();
        conjuncts(cond, &mut terms);
        if !terms.iter().all(|c| always(&inliner, c)) {
            return None;
        }
        v = (**then).clone();
    }
    let Val::Load { buffer, dims } = v else {
        return None;
    };
    let input = inputs.get(buffer)?;
    if input.dtype != t.dtype {
        return None;
    }
    let st = strides(&input.shape);
    // The flat input index: per axis a coefficient, and a constant.
    let mut coef = vec![0i64; rank];
    let mut offset = 0i64;
    for (d, ix) in dims.iter().enumerate() {
        let mut rest = idle_clamps(&inliner, ix);
        for (k, c) in coef.iter_mut().enumerate() {
            let (ck, r) = split_axis(&rest, k)?;
            *c = c.checked_add(ck.checked_mul(st[d])?)?;
            rest = r;
        }
        let Ix::Const(r) = rest else {
            return None;
        };
        offset = offset.checked_add(r.checked_mul(st[d])?)?;
    }
    let own = strides(&t.shape);
    let same = (0..rank).all(|k| t.shape[k] == 1 || coef[k] == own[k]);
    same.then_some((buffer, offset))
}

/// Whether an index comparison holds for every value of the axes.
fn always(inliner: &Inliner<'_>, c: &Val) -> bool {
    let Val::Compare(op, a, b) = c else {
        return false;
    };
    let (Some(a), Some(b)) = (as_index(a), as_index(b)) else {
        return false;
    };
    let (Some((al, ah)), Some((bl, bh))) = (inliner.range(&a), inliner.range(&b)) else {
        return false;
    };
    match op {
        CmpOp::Ge => al >= bh,
        CmpOp::Gt => al > bh,
        CmpOp::Lt => ah < bl,
        CmpOp::Le => ah <= bl,
        CmpOp::Eq | CmpOp::Ne => false,
    }
}

/// `ix` with every `max(0, x)` and `min(x, m)` that cannot change `x` replaced by `x`.
fn idle_clamps(inliner: &Inliner<'_>, ix: &Ix) -> Ix {
    let Ix::Bin(op, a, b) = ix else {
        return ix.clone();
    };
    let (a, b) = (idle_clamps(inliner, a), idle_clamps(inliner, b));
    let idle = |x: &Ix, bound: &Ix| match (inliner.range(x), bound) {
        (Some((lo, _)), Ix::Const(c)) if *op == BinaryOp::Max => lo >= *c,
        (Some((_, hi)), Ix::Const(c)) if *op == BinaryOp::Min => hi <= *c,
        _ => false,
    };
    if matches!(op, BinaryOp::Max | BinaryOp::Min) {
        if idle(&a, &b) {
            return a;
        }
        if idle(&b, &a) {
            return b;
        }
    }
    fold(*op, a, b)
}

/// A depthwise convolution the host computes: its shape, and the data's and weights' input
/// buffers with the flat index of their first element.
#[derive(Clone, Debug)]
pub(crate) struct HostDepthwise {
    pub(crate) params: DepthwiseParams,
    pub(crate) data: (usize, i64),
    pub(crate) weight: (usize, i64),
}

/// The host direct convolution contraction `c` (computing tensor `t`) is, if it is one:
/// float32, `t[n, g, o, y, x] = Σ_{c, kh, kw} col[n, g, c, kh, kw, y, x] · wg[g, o, c, kh,
/// kw]` with `wg` an input read in place ([`input_view`]: OIHW weights) and `col` a window of
/// an NCHW input: `select(0 <= iy < H && 0 <= ix < W, data[n, g·C + c, iy, ix], 0)` with `iy =
/// y·sh + kh·dh - pad_top`, `ix = x·sw + kw·dw - pad_left` (indices clamped or not; bounds
/// interval arithmetic proves may be left out). It is one when the group has one input channel
/// (a depthwise convolution), or when it has several but few output channels whose rows fill
/// the vectors ([`few_outputs`]) — there a GEMM's tiles are mostly padding. Anything else —
/// other dtypes, a computed data operand — is `None` and keeps the GEMM or the direct window
/// ([`schedule::direct_window`]).
pub(crate) fn host_depthwise(
    t: &Tensor,
    c: &Contraction,
    inputs: &[Tensor],
) -> Option<HostDepthwise> {
    let &[n, g, og, oh, ow] = t.shape.as_slice() else {
        return None;
    };
    let (col, wg) = (&c.a.0, &c.b.0);
    let &[cg, kh, kw] = c.red_extents.as_slice() else {
        return None;
    };
    if cg != 1 && !few_outputs(og, ow) {
        return None;
    }
    let (o, r) = (Index::Out, Index::Red);
    let shapes_ok = t.dtype == DType::F32
        && col.shape == [n, g, cg, kh, kw, oh, ow]
        && wg.shape == [g, og, cg, kh, kw]
        && c.a.1 == [o(0), o(1), r(0), r(1), r(2), o(3), o(4)]
        && c.b.1 == [o(1), o(2), r(0), r(1), r(2)];
    if !shapes_ok {
        return None;
    }
    let weight = input_view(wg, inputs)?;
    let Im2col {
        data,
        window,
        channel,
    } = im2col_window(col, inputs)?;
    if channel != [if g > 1 { cg } else { 0 }, i64::from(cg > 1)] {
        return None;
    }
    let x = inputs.get(data)?;
    let &[xn, xc, h, w] = x.shape.as_slice() else {
        return None;
    };
    if x.dtype != DType::F32 || xn != n || Some(xc) != g.checked_mul(cg) {
        return None;
    }
    let [sh, dh, pt, sw, dw, pl] = window;
    let params = DepthwiseParams {
        batch: n,
        channels: g,
        multiplier: og,
        height: h,
        width: w,
        out_height: oh,
        out_width: ow,
        kernel_h: kh,
        kernel_w: kw,
        stride_h: sh,
        stride_w: sw,
        dilation_h: dh,
        dilation_w: dw,
        pad_top: pt,
        pad_left: pl,
        group_channels: cg,
    };
    params.valid().then_some(HostDepthwise {
        params,
        data: (data, 0),
        weight,
    })
}

/// Whether a convolution with several input channels per group and `og` output channels per
/// group, `ow` output columns, is computed directly (`depthwise::grouped`): at most 16 output
/// channels, and rows that fill at least three quarters of their 16-lane vectors (a 7-wide row
/// would waste over half of each multiply-add, where the GEMM wastes less).
fn few_outputs(og: i64, ow: i64) -> bool {
    og <= 16 && ow > 0 && ow * 4 >= (ow + 15) / 16 * 16 * 3
}

/// An im2col `col[n, g, c, kh, kw, y, x]` reading an NCHW kernel input through a zero-padded
/// window ([`im2col_window`]).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Im2col {
    /// The input.
    pub(crate) data: usize,
    /// `[sh, dh, pad_top, sw, dw, pad_left]`.
    pub(crate) window: [i64; 6],
    /// The input channel read is `g·channel[0] + c·channel[1]` (0 for an axis of extent 1).
    pub(crate) channel: [i64; 2],
}

/// For an im2col `col[n, g, c, kh, kw, y, x]` reading an NCHW kernel input through
/// a zero-padded window: the input, the window and how the channel is read.
pub(crate) fn im2col_window(col: &Tensor, inputs: &[Tensor]) -> Option<Im2col> {
    let no_buffers = HashMap::new();
    let (inliner, v) = Inliner::elementwise(col, inputs, &no_buffers)?;
    let (cond, load) = match &v {
        Val::Select(cond, then, zero) if matches!(**zero, Val::Float(z, d) if d == col.dtype && z.to_bits() == 0) => {
            (Some(&**cond), &**then)
        }
        other => (None, other),
    };
    let Val::Load { buffer, dims } = load else {
        return None;
    };
    let [dn, dc, dy, dx] = dims.as_slice() else {
        return None;
    };
    let (iy, ix) = (unclamp_index(dy), unclamp_index(dx));
    let (h, w) = (
        *inputs.get(*buffer)?.shape.get(2)?,
        *inputs.get(*buffer)?.shape.get(3)?,
    );
    if !guards_bounds(&inliner, cond, &[(&iy, h), (&ix, w)]) {
        return None;
    }
    // Each index as coefficients of col's seven axes and a constant.
    let (cn, kn) = linear(dn, 7)?;
    let (cc, kc) = linear(dc, 7)?;
    let (cy, ky) = linear(&iy, 7)?;
    let (cx, kx) = linear(&ix, 7)?;
    let only = |coef: &[i64], k: usize, want: i64| {
        coef.iter()
            .enumerate()
            .all(|(j, &v)| v == if j == k { want } else { 0 })
    };
    // An axis of extent 1 is the constant 0: its stride or dilation is immaterial (1).
    let step = |coef: &[i64], k: usize| if col.shape[k] == 1 { 1 } else { coef[k] };
    let window_ok = only(&cn, 0, i64::from(col.shape[0] > 1))
        && kn == 0
        && cc
            .iter()
            .enumerate()
            .all(|(j, &v)| v == 0 || j == 1 || j == 2)
        && cc[1] >= 0
        && cc[2] >= 0
        && kc == 0
        && cy
            .iter()
            .enumerate()
            .all(|(j, &v)| v == 0 || j == 3 || j == 5)
        && cx
            .iter()
            .enumerate()
            .all(|(j, &v)| v == 0 || j == 4 || j == 6);
    let (sh, dh, sw, dw) = (step(&cy, 5), step(&cy, 3), step(&cx, 6), step(&cx, 4));
    (window_ok && [sh, dh, sw, dw].iter().all(|&v| v > 0) && ky <= 0 && kx <= 0).then_some(Im2col {
        data: *buffer,
        window: [sh, dh, -ky, sw, dw, -kx],
        channel: [cc[1], cc[2]],
    })
}

/// `x` for a clamped index `max(0, min(x, m))` or `min(max(x, 0), m)` (either operand order),
/// else the index itself.
pub(crate) fn unclamp_index(i: &Ix) -> Ix {
    let Ix::Bin(op @ (BinaryOp::Max | BinaryOp::Min), a, b) = i else {
        return i.clone();
    };
    let inner_op = if *op == BinaryOp::Max {
        BinaryOp::Min
    } else {
        BinaryOp::Max
    };
    let inner = match (a.as_ref(), b.as_ref()) {
        (Ix::Const(_), other) | (other, Ix::Const(_)) => other,
        _ => return i.clone(),
    };
    match inner {
        Ix::Bin(iop, x, c) if *iop == inner_op && matches!(**c, Ix::Const(_)) => (**x).clone(),
        Ix::Bin(iop, c, x) if *iop == inner_op && matches!(**c, Ix::Const(_)) => (**x).clone(),
        _ => i.clone(),
    }
}

/// Whether `cond` (none: always true) is exactly `0 <= x < n` for each `(x, n)` of `bounds`,
/// bounds interval arithmetic proves left out: then, with the value 0 where it fails, the
/// clamps of the indices are idle and the window reads the data zero-padded.
fn guards_bounds(inliner: &Inliner<'_>, cond: Option<&Val>, bounds: &[(&Ix, i64)]) -> bool {
    let mut terms = Vec::new();
    if let Some(c) = cond {
        conjuncts(c, &mut terms);
    }
    let mut seen = vec![[false; 2]; bounds.len()];
    for t in terms {
        let Val::Compare(op, a, b) = t else {
            return false;
        };
        let (Some(a), Some(Ix::Const(c))) = (as_index(a), as_index(b)) else {
            return false;
        };
        let Some(k) = bounds.iter().position(|(x, _)| **x == a) else {
            return false;
        };
        match (op, c) {
            (CmpOp::Ge, 0) => seen[k][0] = true,
            (CmpOp::Lt, c) if c == bounds[k].1 => seen[k][1] = true,
            _ => return false,
        }
    }
    bounds.iter().zip(&seen).all(|((x, n), [lo, hi])| {
        let range = inliner.range(x);
        (*lo || range.is_some_and(|(l, _)| l >= 0)) && (*hi || range.is_some_and(|(_, h)| h < *n))
    })
}
