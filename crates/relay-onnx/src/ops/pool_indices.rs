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

use crate::error::ConvertError;
use relay_runtime::DType;

use super::nn::{PoolWindow, pool, pool_window, spatial};
use crate::attrs::Attrs;
use crate::builder::{Value, attr};
use crate::graph::Graph;
use crate::proto::NodeProto;

/// The most taps a window may have here (one slice each).
const MAX_TAPS: i64 = 4096;

/// `MaxPool` with its indices output: the pooled values and the indices (int64).
pub(super) fn max_pool_with_indices(
    g: &mut Graph,
    node: &NodeProto,
    a: &Attrs<'_>,
) -> Result<Vec<Value>, ConvertError> {
    let x = g.input(node, 0)?;
    if !x.dtype.is_float() {
        return Err(format!("MaxPool's indices of {} elements", x.dtype).into());
    }
    let [h, w] = spatial(&x)?;
    let (n, c) = (x.shape[0], x.shape[1]);
    let window = pool_window(a, [h, w])?;
    let PoolWindow {
        kernel,
        strides,
        dilations,
        pads,
        out,
        ..
    } = window;
    let taps = kernel[0] * kernel[1];
    if taps > MAX_TAPS {
        return Err(format!("a window of {taps} taps for indices (at most {MAX_TAPS})").into());
    }
    let mut values = node.clone();
    values.output.truncate(1);
    let y = pool(g, &values, a)?;

    // Padded with the lowest value, and at the end as far as a ceil_mode window reaches.
    let reach = [0, 1].map(|d| (out[d] - 1) * strides[d] + (kernel[d] - 1) * dilations[d] + 1);
    let end = [0, 1].map(|d| (reach[d] - [h, w][d] - pads[d]).max(pads[d + 2]));
    let lowest = g.float(f64::NEG_INFINITY, x.dtype)?;
    let width = [
        vec![0, 0],
        vec![0, 0],
        vec![pads[0], end[0]],
        vec![pads[1], end[1]],
    ];
    let padded = g.call(
        "nn.pad",
        &[&x, &lowest],
        &[("pad_width", attr::int_lists(&width))],
    )?;
    // The first tap equal to the window's maximum (the pooled value): nested `where`s from
    // the last tap out, each slice read once, elementwise, so they fuse into one kernel.
    let mut tap = g.int(taps - 1, DType::I64)?;
    for k in (0..taps - 1).rev() {
        let slice = tap_slice(g, &padded, k, &window, [n, c])?;
        let hit = g.call("equal", &[&slice, &y], &[])?;
        let k = g.int(k, DType::I64)?;
        tap = g.call("where", &[&hit, &k, &tap], &[])?;
    }
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
    let origin = g.call("add", &[&planes, &rows], &[])?;
    let origin = g.call("add", &[&origin, &cols], &[])?;
    let offset = g.call("take", &[&offsets, &tap], &[("axis", attr::int(0))])?;
    let indices = g.call("add", &[&origin, &offset], &[])?;
    Ok(vec![y, indices])
}

/// Tap `k` (row-major in the kernel) of `window` over `padded`, of `n` batches and `c`
/// channels: the strided slice of the elements it reads, `[N, C, OH, OW]`.
fn tap_slice(
    g: &mut Graph,
    padded: &Value,
    k: i64,
    window: &PoolWindow,
    [n, c]: [i64; 2],
) -> Result<Value, ConvertError> {
    let PoolWindow {
        kernel,
        strides,
        dilations,
        out,
        ..
    } = *window;
    let (i, j) = (k / kernel[1], k % kernel[1]);
    let begin = [0, 0, i * dilations[0], j * dilations[1]];
    let stop = [
        n,
        c,
        begin[2] + (out[0] - 1) * strides[0] + 1,
        begin[3] + (out[1] - 1) * strides[1] + 1,
    ];
    g.call(
        "strided_slice",
        &[padded],
        &[
            ("begin", attr::ints(&begin)),
            ("end", attr::ints(&stop)),
            ("strides", attr::ints(&[1, 1, strides[0], strides[1]])),
            ("axes", attr::null()),
        ],
    )
}
