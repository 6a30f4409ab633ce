//! Blocked pooling on [`relay_linalg::nchwc::pool_nchwc`]: a primitive whose body is
//! `nn.max_pool2d`, `nn.avg_pool2d`, `nn.global_max_pool2d` or `nn.global_avg_pool2d` (a
//! window of the whole image) of a `float32` parameter in the layout `NCHW{B}c` (`B` 8 or 16,
//! the result in the same layout), static shapes. The output shape is the type's, so
//! `ceil_mode` needs nothing more; anything else stays a loop nest.

use relay_ir::{ExprKind, Function};
use relay_linalg::KernelContext;
use relay_linalg::nchwc::{NchwcPool, PoolKind, pool_nchwc};
use relay_ops::support::{attr_bool, attr_str};
use relay_ops::{padding4, positive_pair};

use super::conv_nchwc::f32_shape;

/// A blocked pooling (see the module's documentation).
#[derive(Clone, Debug)]
pub struct PoolNchwc {
    shape: NchwcPool,
}

/// The blocked pooling `func` computes, when it is one.
pub(super) fn recognize(func: &Function) -> Option<PoolNchwc> {
    let (op, [x], attrs) = func.body.op_call()? else {
        return None;
    };
    let global = matches!(op.name, "nn.global_max_pool2d" | "nn.global_avg_pool2d");
    let kind = match op.name {
        "nn.max_pool2d" | "nn.global_max_pool2d" => PoolKind::Max,
        "nn.global_avg_pool2d" => PoolKind::Avg {
            count_include_pad: false,
        },
        "nn.avg_pool2d" => PoolKind::Avg {
            count_include_pad: attrs
                .get("count_include_pad")
                .map_or(Some(false), |_| attr_bool(attrs, "count_include_pad").ok())?,
        },
        _ => return None,
    };
    match x.kind() {
        ExprKind::Var(v) if func.params.first() == Some(v) && func.params.len() == 1 => {}
        _ => return None,
    }
    let input = f32_shape(x.checked_type()?)?;
    let output = f32_shape(func.body.checked_type()?)?;
    let (&[n, blocks, h, w, b], &[on, ob, oh, ow, o_b]) = (input.as_slice(), output.as_slice())
    else {
        return None;
    };
    let layout = attr_str(attrs, "layout").ok()?;
    let out_layout = attrs
        .get("out_layout")
        .map_or(Some(""), |_| attr_str(attrs, "out_layout").ok())?;
    if layout != format!("NCHW{b}c") || !(out_layout.is_empty() || out_layout == layout) {
        return None;
    }
    if (on, ob, o_b) != (n, blocks, b) {
        return None;
    }
    let size = |v: i64| usize::try_from(v).ok();
    let pair = |name: &str| {
        let [a, b] = positive_pair(attrs, name).ok()?;
        Some([size(a)?, size(b)?])
    };
    // A global pool's window is the whole image.
    let (kernel, stride, dilation, pad) = if global {
        ([size(h)?, size(w)?], [1, 1], [1, 1], [0; 4])
    } else {
        let [t, l, bottom, r] = padding4(attrs).ok()?;
        let pad = [size(t)?, size(l)?, size(bottom)?, size(r)?];
        (pair("pool_size")?, pair("strides")?, pair("dilation")?, pad)
    };
    let shape = NchwcPool {
        batch: size(n)?,
        blocks: size(blocks)?,
        block: size(b)?,
        input: [size(h)?, size(w)?],
        output: [size(oh)?, size(ow)?],
        kernel,
        stride,
        dilation,
        pad,
        kind,
    };
    let fits = !global || shape.output == [1, 1];
    (fits && shape.check().is_ok()).then_some(PoolNchwc { shape })
}

impl PoolNchwc {
    /// The output's shape: the static result's.
    pub fn output_shapes(&self, inputs: &[&[i64]]) -> Result<Vec<Vec<i64>>, String> {
        let p = &self.shape;
        let data = inputs.first().ok_or("no data")?;
        let want = [p.batch, p.blocks, p.input[0], p.input[1], p.block].map(|d| d as i64);
        if *data != want {
            return Err(format!("data of shape {data:?}, expected {want:?}"));
        }
        let [oh, ow] = p.output;
        Ok(vec![
            [p.batch, p.blocks, oh, ow, p.block]
                .map(|d| d as i64)
                .to_vec(),
        ])
    }

    /// Pools the data (`args`' first) into the output (`args`' last), their lengths checked
    /// against the shape.
    pub fn run(&self, ctx: &KernelContext, args: &mut [&mut [f32]]) -> Result<(), String> {
        let p = &self.shape;
        let ([x], out) = args.split_at_mut(1) else {
            return Err("no data".into());
        };
        let [out] = out else {
            return Err("no output".into());
        };
        let plane = p.batch * p.blocks * p.block;
        let (x_len, y_len) = (
            plane * p.input[0] * p.input[1],
            plane * p.output[0] * p.output[1],
        );
        if (x.len(), out.len()) != (x_len, y_len) {
            return Err(format!(
                "operands of {} and {} elements, expected {x_len} and {y_len}",
                x.len(),
                out.len()
            ));
        }
        // SAFETY: the operands hold the shape's elements (checked above) and are disjoint (the
        // caller's contract).
        unsafe { pool_nchwc(Some(ctx), p, x.as_ptr(), out.as_mut_ptr()) }.map_err(|e| e.to_string())
    }
}
