//! `MaxPool`'s second output, the indices of the maxima: for each output position, the
//! position in the input (flattened over N, C, H, W, row-major, or with H and W swapped for
//! `storage_order` 1) of the window's first largest element.
//!
//! Relay's `nn.max_pool2d` has no indices, so they are computed from the window's taps: the
//! input padded with the lowest value, one strided slice per tap (each `[N, C, OH, OW]`), and
//! the first tap equal to the pooled maximum, as ONNX Runtime reports the first of equal
//! maxima (nested `where(equal(slice, max), k, ...)`, elementwise, so it fuses into one
//! kernel that reads each slice once); the tap
//! number becomes the index through small constant vectors (the batch-channel plane offsets,
//! each output row's and column's origin, each tap's offset), added by broadcasting.

use relay_runtime::DType;

use super::nn::{PoolWindow, pool, pool_window, spatial};
use super::{Attrs, float_text, list};
use crate::graph::{Graph, Value};
use crate::proto::NodeProto;

/// The most taps a window may have here (one slice each).
const MAX_TAPS: i64 = 4096;

/// `MaxPool` with its indices output: the pooled values and the indices (int64).
pub(super) fn max_pool_with_indices(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, String> {
    let x = g.input(node, 0)?;
    if !x.dtype.is_float() {
        return Err(format!("MaxPool's indices of {} elements", x.dtype));
    }
    let [h, w] = spatial(&x)?;
    let (n, c) = (x.shape[0], x.shape[1]);
    let PoolWindow {
        kernel,
        strides,
        dilations,
        pads,
        out,
        ..
    } = pool_window(a, [h, w])?;
    let taps = kernel[0] * kernel[1];
    if taps > MAX_TAPS {
        return Err(format!(
            "a window of {taps} taps for indices (at most {MAX_TAPS})"
        ));
    }
    let mut values = node.clone();
    values.output.truncate(1);
    let y = pool(g, &values, a)?;

    // Padded with the lowest value, and at the end as far as a ceil_mode window reaches.
    let reach = [0, 1].map(|d| (out[d] - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1);
    let end = [0, 1].map(|d| (reach[d] - [h, w][d] - pads[d]).max(pads[d + 2]));
    let lowest = float_text(f64::NEG_INFINITY, x.dtype);
    let padded = g.bind(
        format!(
            "nn.pad({}, {lowest}, pad_width=[[0, 0], [0, 0], [{}, {}], [{}, {}]])",
            x.expr, pads[0], end[0], pads[1], end[1]
        ),
        vec![n, c, h + pads[0] + end[0], w + pads[1] + end[1]],
        x.dtype,
    );
    let slices: Vec<String> = (0..taps)
        .map(|k| {
            let (i, j) = (k / kernel[1], k % kernel[1]);
            let begin = [0, 0, i * dilations[0], j * dilations[1]];
            let stop = [
                n,
                c,
                begin[2] + (out[0] - 1) * strides[0] + 1,
                begin[3] + (out[1] - 1) * strides[1] + 1,
            ];
            format!(
                "strided_slice({}, begin={}, end={}, strides={}, axes=None)",
                padded.expr,
                list(&begin),
                list(&stop),
                list(&[1, 1, strides[0], strides[1]])
            )
        })
        .collect();
    // The first tap equal to the window's maximum (the pooled value): nested `where`s from
    // the last tap out, each slice read once, elementwise, so it fuses into one kernel.
    let mut tap = format!("{}i64", taps - 1);
    for (k, slice) in slices.iter().enumerate().rev().skip(1) {
        tap = format!("where(equal({slice}, {}), {k}i64, {tap})", y.expr);
    }
    let tap = g.bind(tap, vec![n, c, out[0], out[1]], DType::I64);
    // Index = plane(n, c) + row origin + column origin + the tap's offset.
    let column_major = a.int("storage_order", 0)? != 0;
    let (row_step, col_step) = if column_major { (1, h) } else { (w, 1) };
    let planes = g.int64_constant("planes", &[n, c, 1, 1], (0..n * c).map(|p| p * h * w))?;
    let rows = g.int64_constant(
        "rows",
        &[1, 1, out[0], 1],
        (0..out[0]).map(|r| (r * strides[0] - pads[0]) * row_step),
    )?;
    let cols = g.int64_constant(
        "cols",
        &[1, 1, 1, out[1]],
        (0..out[1]).map(|q| (q * strides[1] - pads[1]) * col_step),
    )?;
    let offsets = g.int64_constant(
        "taps",
        &[taps],
        (0..taps).map(|k| {
            let (i, j) = (k / kernel[1], k % kernel[1]);
            i * dilations[0] * row_step + j * dilations[1] * col_step
        }),
    )?;
    let indices = g.bind(
        format!(
            "add(add(add({}, {}), {}), take({}, {}, axis=0))",
            planes.expr, rows.expr, cols.expr, offsets.expr, tap.expr
        ),
        vec![n, c, out[0], out[1]],
        DType::I64,
    );
    Ok(vec![y, indices])
}
