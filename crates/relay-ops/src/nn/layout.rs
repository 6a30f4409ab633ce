//! Layouts other than NCHW/OIHW for the 2-d convolutions and pools: TensorFlow's and TFLite's
//! NHWC data and HWIO (or OHWI, HWOI, ...) kernels, or any other order of the same letters.
//!
//! An operator's relation, evaluation and compute definition are written for NCHW data and
//! OIHW kernels. For another layout, [`Relayout`] moves each operand into that order (a
//! transpose), applies the NCHW definition with the canonical layout attributes, and moves the
//! result into `out_layout` (the data layout when empty). A compute definition's transposes
//! are injective stages the kernel compiler inlines into the contraction's operand reads or
//! the output's stores; weights that are constants are transposed once with them.
//! Layouts that split an axis (TVM's blocked `NCHW8c` data and `OIHW8i8o` kernels, the
//! layouts of `nn.contrib_conv2d_NCHWc`) move by `layout_transform`'s rules instead: the
//! definitions are the NCHW ones, whatever the layout.

use relay_ir::OpError;
use relay_ir::te::{TeValue, Tensor};
use relay_ir::{AttrValue, Attrs, Dim, Type, TypeKind, Value};

use crate::support::{attr_str, tensor};
use crate::transform::{Reblock, transposed};

/// A permutation of four axes: `pos[k]` is where canonical axis `k` is in the layout.
type Perm = [usize; 4];

/// How one operand (or the result) differs from its canonical layout.
enum Move {
    /// The same four axes in another order.
    Permute(Perm),
    /// A layout that splits an axis (`NCHW8c`, `OIHW8i8o`): to the canonical layout, and from
    /// it, by `layout_transform`'s rules.
    Reblock { to: Reblock, from: Reblock },
}

impl Move {
    /// How `layout` (attribute `attr`) differs from `canonical`, `None` when it does not.
    fn of(layout: &str, canonical: &str, attr: &str) -> Result<Option<Move>, OpError> {
        if !Reblock::splits(layout) {
            return Ok(permutation(layout, canonical, attr)?.map(Move::Permute));
        }
        Ok(Some(Move::Reblock {
            to: Reblock::new((layout, attr), (canonical, "the canonical layout"))?,
            from: Reblock::new((canonical, "the canonical layout"), (layout, attr))?,
        }))
    }

    /// A type in the layout, in the canonical one (or back, `back`).
    fn ty(&self, t: &Type, back: bool) -> Result<Type, OpError> {
        match self {
            Move::Permute(p) => Ok(permute_type(t, &axes(*p, back))),
            Move::Reblock { to, from } => if back { from } else { to }.ty(t),
        }
    }

    /// A value in the layout, in the canonical one (or back).
    fn value(&self, v: &Value, back: bool) -> Result<Value, OpError> {
        match (self, v) {
            (Move::Permute(p), Value::Tensor(t)) if t.ndim() == 4 => {
                Ok(Value::tensor(transposed(t, &axes(*p, back))?))
            }
            (Move::Reblock { to, from }, Value::Tensor(t)) => {
                Ok(Value::tensor(if back { from } else { to }.array(t)?))
            }
            _ => Ok(v.clone()),
        }
    }

    /// A compute value in the layout, in the canonical one (or back).
    fn tensor(&self, v: &TeValue, back: bool) -> Result<TeValue, OpError> {
        let name = if back { "T_layout_out" } else { "T_layout_in" };
        match (self, v) {
            (Move::Permute(p), TeValue::Tensor(t)) if t.shape.len() == 4 => {
                Ok(TeValue::Tensor(permute_tensor(t, &axes(*p, back), name)))
            }
            (Move::Reblock { to, from }, TeValue::Tensor(t)) => {
                Ok(TeValue::Tensor(if back { from } else { to }.tensor(t)?))
            }
            _ => Ok(v.clone()),
        }
    }
}

/// The axes moving a permuted layout to the canonical one ([`to`]) or back ([`from`]).
fn axes(pos: Perm, back: bool) -> Perm {
    if back { from(pos) } else { to(pos) }
}

/// How an operator's operands and result move between their layouts and NCHW/OIHW.
pub(super) struct Relayout {
    /// Per operand (data, then kernel), its move, `None` when it is canonical.
    inputs: Vec<Option<Move>>,
    /// The result's move.
    out: Option<Move>,
    /// The attributes with canonical layouts.
    canonical: Attrs,
}

impl Relayout {
    /// The relayout of an operator whose data layout is attribute `data` (over `NCHW`) and
    /// kernel layout `kernel` (over `OIHW`), or `None` when every layout is canonical. A layout
    /// that is neither an order of those letters nor such an order with split axes (`NCHW8c`,
    /// `OIHW8i8o`, TVM's `conv2d_NCHWc`) is an error.
    pub(super) fn of(
        attrs: &Attrs,
        data: &str,
        kernel: Option<&str>,
    ) -> Result<Option<Relayout>, OpError> {
        let data_layout = attr_str(attrs, data)?;
        let mut inputs = vec![Move::of(data_layout, "NCHW", data)?];
        let mut canonical = attrs.with(data, AttrValue::Str("NCHW".into()));
        if let Some(kernel) = kernel {
            inputs.push(Move::of(attr_str(attrs, kernel)?, "OIHW", kernel)?);
            canonical = canonical.with(kernel, AttrValue::Str("OIHW".into()));
        }
        let out_layout = match attr_str(attrs, "out_layout")? {
            "" => (data_layout, data),
            layout => (layout, "out_layout"),
        };
        let out = Move::of(out_layout.0, "NCHW", out_layout.1)?;
        canonical = canonical.with("out_layout", AttrValue::Str("".into()));
        if inputs.iter().all(Option::is_none) && out.is_none() {
            return Ok(None);
        }
        Ok(Some(Relayout {
            inputs,
            out,
            canonical,
        }))
    }

    /// The relation `rel` (of NCHW operands) applied to `types` in their layouts.
    pub(super) fn relation(
        &self,
        types: &[Type],
        rel: impl FnOnce(&[Type], &Attrs) -> Result<Type, OpError>,
    ) -> Result<Type, OpError> {
        let mut moved = Vec::with_capacity(types.len());
        for (i, t) in types.iter().enumerate() {
            moved.push(match self.input(i) {
                Some(m) => m.ty(t, false)?,
                None => t.clone(),
            });
        }
        let result = rel(&moved, &self.canonical)?;
        match &self.out {
            Some(m) => m.ty(&result, true),
            None => Ok(result),
        }
    }

    /// The evaluation `eval` (of NCHW operands) applied to `args` in their layouts.
    pub(super) fn evaluate(
        &self,
        args: &[Value],
        eval: impl FnOnce(&[Value], &Attrs) -> Result<Value, OpError>,
    ) -> Result<Value, OpError> {
        let mut moved = Vec::with_capacity(args.len());
        for (i, v) in args.iter().enumerate() {
            moved.push(match self.input(i) {
                Some(m) => m.value(v, false)?,
                None => v.clone(),
            });
        }
        let result = eval(&moved, &self.canonical)?;
        match &self.out {
            Some(m) => m.value(&result, true),
            None => Ok(result),
        }
    }

    /// The compute definition `te` (of NCHW operands, result type `out` in its layout) applied
    /// to `inputs` in their layouts.
    pub(super) fn compute(
        &self,
        inputs: &[TeValue],
        out: &Type,
        te: impl FnOnce(&[TeValue], &Attrs, &Type) -> Result<TeValue, OpError>,
    ) -> Result<TeValue, OpError> {
        let mut moved = Vec::with_capacity(inputs.len());
        for (i, v) in inputs.iter().enumerate() {
            moved.push(match self.input(i) {
                Some(m) => m.tensor(v, false)?,
                None => v.clone(),
            });
        }
        let canonical_out = match &self.out {
            Some(m) => m.ty(out, false)?,
            None => out.clone(),
        };
        let result = te(&moved, &self.canonical, &canonical_out)?;
        match &self.out {
            Some(m) => m.tensor(&result, true),
            None => Ok(result),
        }
    }

    /// The move of operand `i`, if it moves.
    fn input(&self, i: usize) -> Option<&Move> {
        self.inputs.get(i).and_then(Option::as_ref)
    }
}

/// Where each letter of `canonical` is in `layout`, or `None` when they are the same; an
/// error unless `layout` orders the same four letters.
fn permutation(layout: &str, canonical: &str, attr: &str) -> Result<Option<Perm>, OpError> {
    if layout == canonical {
        return Ok(None);
    }
    let mut pos = [0usize; 4];
    let mut seen = [false; 4];
    let letters: Vec<char> = layout.chars().collect();
    let ok = letters.len() == 4
        && canonical
            .chars()
            .enumerate()
            .all(|(k, c)| match letters.iter().position(|&l| l == c) {
                Some(p) if !seen[p] => {
                    seen[p] = true;
                    pos[k] = p;
                    true
                }
                _ => false,
            });
    if ok {
        Ok(Some(pos))
    } else {
        Err(OpError::attribute(
            attr,
            format!(
                "{attr}=\"{layout}\" is not supported: expected an order of the letters {canonical} \
             (such as \"{canonical}\" or \"{}\"), or one with split axes (such as \"{}\")",
                if canonical == "NCHW" { "NHWC" } else { "HWIO" },
                if canonical == "NCHW" {
                    "NCHW8c"
                } else {
                    "OIHW8i8o"
                }
            ),
        ))
    }
}

/// The axes that move a tensor in a layout to the canonical order: axis `k` of the result is
/// axis `pos[k]`.
fn to(pos: Perm) -> Perm {
    pos
}

/// The axes that move a canonical tensor into the layout: the inverse of [`to`].
fn from(pos: Perm) -> Perm {
    let mut inv = [0usize; 4];
    for (k, &p) in pos.iter().enumerate() {
        inv[p] = k;
    }
    inv
}

/// A rank-4 tensor type with its dimensions taken in the order `axes` (other types unchanged:
/// the relation then reports them).
fn permute_type(t: &Type, axes: &Perm) -> Type {
    match t.kind() {
        TypeKind::Tensor { shape, dtype } if shape.len() == 4 => {
            let dims: Vec<Dim> = axes.iter().map(|&a| shape[a]).collect();
            tensor(dims, *dtype)
        }
        _ => t.clone(),
    }
}

/// A rank-4 compute tensor with `t`'s axes in the order `axes`.
fn permute_tensor(t: &Tensor, axes: &Perm, name: &str) -> Tensor {
    let shape: Vec<i64> = axes.iter().map(|&a| t.shape[a]).collect();
    Tensor::compute(name, &shape, |i| {
        let mut at = i.to_vec();
        for (k, &a) in axes.iter().enumerate() {
            at[a] = i[k].clone();
        }
        t.at(&at)
    })
}

#[cfg(test)]
mod tests {
    use relay_ir::{AttrValue as V, DType, NDArray};

    use std::slice::from_ref;

    use super::*;
    use crate::compute::op_tests::{Rng, random};
    use crate::nn::testing::{eval, exact, s, small, verify};
    use crate::testing::{attrs, ints};

    /// The bits of each element (as `f64`): equal arrays compare equal, NaN included.
    fn bits(a: &NDArray) -> Vec<u64> {
        a.to_f64_vec().iter().map(|v| v.to_bits()).collect()
    }

    /// `op` on `inputs` in the layouts `set` names (beside the common `attrs`) agrees with `op`
    /// on the inputs moved to NCHW/OIHW (`to_nchw`: the axes moving each), its result moved by
    /// `from_nchw`, and its compute definition agrees with its evaluation.
    fn agrees_with_nchw(
        op: &str,
        inputs: &[NDArray],
        to_nchw: &[&[usize]],
        from_nchw: &[usize],
        common: &[(&str, V)],
        set: &[(&str, V)],
    ) {
        let canonical: Vec<Value> = inputs
            .iter()
            .zip(to_nchw)
            .map(|(x, p)| Value::tensor(transposed(x, p).unwrap()))
            .collect();
        let want = eval(op, &canonical, common).unwrap();
        let want = transposed(want.as_tensor().unwrap(), from_nchw).unwrap();
        let args: Vec<Value> = inputs.iter().cloned().map(Value::tensor).collect();
        let all: Vec<(&str, V)> = common.iter().chain(set).cloned().collect();
        let got = eval(op, &args, &all).unwrap();
        let got = got.as_tensor().unwrap();
        assert_eq!(got.shape(), want.shape(), "{op} {set:?}");
        // Bit for bit: the same arithmetic in the same order (NaN equal to NaN).
        assert_eq!(bits(got), bits(&want), "{op} {set:?}");
        assert!(verify(op, inputs, &attrs(op, &all), exact), "{op} {set:?}");
    }

    const NHWC_TO_NCHW: &[usize] = &[0, 3, 1, 2];
    const NCHW_TO_NHWC: &[usize] = &[0, 2, 3, 1];

    #[test]
    fn convolutions_in_nhwc_and_hwio_or_ohwi() {
        let mut rng = Rng(11);
        let x = small(&mut rng, DType::F32, &[2, 7, 6, 8], false);
        let hwio = small(&mut rng, DType::F32, &[3, 3, 8, 16], false);
        let common = [("padding", ints(&[1, 0, 1, 2])), ("strides", ints(&[2, 1]))];
        let nhwc_hwio = [("data_layout", s("NHWC")), ("kernel_layout", s("HWIO"))];
        agrees_with_nchw(
            "nn.conv2d",
            &[x.clone(), hwio],
            &[NHWC_TO_NCHW, &[3, 2, 0, 1]],
            NCHW_TO_NHWC,
            &common,
            &nhwc_hwio,
        );
        // Depthwise, TFLite's OHWI... as HWOI (TVM's NHWC depthwise), groups = channels.
        let hwoi = small(&mut rng, DType::F32, &[3, 3, 8, 1], false);
        let depthwise = [("padding", ints(&[1, 1, 1, 1])), ("groups", V::Int(8))];
        let set = [("data_layout", s("NHWC")), ("kernel_layout", s("HWOI"))];
        agrees_with_nchw(
            "nn.conv2d",
            &[x.clone(), hwoi],
            &[NHWC_TO_NCHW, &[2, 3, 0, 1]],
            NCHW_TO_NHWC,
            &depthwise,
            &set,
        );
        // OHWI weights, an NCHW result from NHWC data, integers.
        let xi = small(&mut rng, DType::I32, &[1, 5, 5, 3], false);
        let ohwi = small(&mut rng, DType::I32, &[4, 2, 2, 3], false);
        let set = [
            ("data_layout", s("NHWC")),
            ("kernel_layout", s("OHWI")),
            ("out_layout", s("NCHW")),
        ];
        agrees_with_nchw(
            "nn.conv2d",
            &[xi, ohwi],
            &[NHWC_TO_NCHW, &[0, 3, 1, 2]],
            &[0, 1, 2, 3],
            &[],
            &set,
        );
    }

    #[test]
    fn pools_in_nhwc() {
        let mut rng = Rng(12);
        for dtype in [DType::F32, DType::I8, DType::F16] {
            let x = random(&mut rng, dtype, &[2, 9, 7, 5]);
            let nhwc = [("layout", s("NHWC"))];
            let window = [
                ("pool_size", ints(&[3, 2])),
                ("strides", ints(&[2, 2])),
                ("padding", ints(&[1, 0, 1, 1])),
            ];
            for op in ["nn.max_pool2d", "nn.avg_pool2d"] {
                agrees_with_nchw(
                    op,
                    from_ref(&x),
                    &[NHWC_TO_NCHW],
                    NCHW_TO_NHWC,
                    &window,
                    &nhwc,
                );
            }
            for op in ["nn.global_max_pool2d", "nn.global_avg_pool2d"] {
                agrees_with_nchw(op, from_ref(&x), &[NHWC_TO_NCHW], NCHW_TO_NHWC, &[], &nhwc);
            }
            let size = [("output_size", ints(&[4, 3]))];
            for op in ["nn.adaptive_max_pool2d", "nn.adaptive_avg_pool2d"] {
                agrees_with_nchw(
                    op,
                    from_ref(&x),
                    &[NHWC_TO_NCHW],
                    NCHW_TO_NHWC,
                    &size,
                    &nhwc,
                );
            }
        }
    }

    /// `array` (in `src` layout) in the `dst` layout.
    fn moved(array: &NDArray, src: &str, dst: &str) -> NDArray {
        Reblock::new((src, "src"), (dst, "dst"))
            .unwrap()
            .array(array)
            .unwrap()
    }

    /// `op` on `inputs` (NCHW data, OIHW kernel) moved into `layouts` (one per input, then the
    /// result's) gives bit for bit `reference` on the inputs as they are, its result moved;
    /// and `op`'s compute definition agrees with its evaluation.
    fn blocked_agrees(
        (op, set): (&str, &[(&str, V)]),
        (reference, common): (&str, &[(&str, V)]),
        inputs: &[NDArray],
        layouts: &[&str],
    ) {
        let canonical = ["NCHW", "OIHW"];
        let args: Vec<NDArray> = inputs
            .iter()
            .zip(layouts)
            .zip(canonical)
            .map(|((x, l), c)| moved(x, c, l))
            .collect();
        let values = |a: &[NDArray]| a.iter().cloned().map(Value::tensor).collect::<Vec<_>>();
        let want = eval(reference, &values(inputs), common).unwrap();
        let out_layout = layouts[layouts.len() - 1];
        let want = moved(want.as_tensor().unwrap(), "NCHW", out_layout);
        let got = eval(op, &values(&args), set).unwrap();
        let got = got.as_tensor().unwrap();
        assert_eq!(got.shape(), want.shape(), "{op} {set:?}");
        assert_eq!(bits(got), bits(&want), "{op} {set:?}");
        assert!(verify(op, &args, &attrs(op, set), exact), "{op} {set:?}");
    }

    #[test]
    fn blocked_convolutions_as_tvm_writes_them() {
        let mut rng = Rng(13);
        // Grouped, strided and padded, blocks of 8 in and 4 out, a result in blocks of 4.
        let x = small(&mut rng, DType::F32, &[2, 16, 7, 6], false);
        let w = small(&mut rng, DType::F32, &[16, 8, 3, 3], false);
        let common = [
            ("padding", ints(&[1, 0, 1, 2])),
            ("strides", ints(&[2, 1])),
            ("groups", V::Int(2)),
        ];
        let layouts = [
            ("data_layout", s("NCHW8c")),
            ("kernel_layout", s("OIHW4i8o")),
            ("out_layout", s("NCHW4c")),
        ];
        let set: Vec<_> = common.iter().chain(&layouts).cloned().collect();
        let op = "nn.contrib_conv2d_NCHWc";
        let inputs = [x.clone(), w];
        let blocks = ["NCHW8c", "OIHW4i8o", "NCHW4c"];
        blocked_agrees((op, &set), ("nn.conv2d", &common), &inputs, &blocks);
        // The same layouts on nn.conv2d itself, integers, ResNet's 1×1 at real size.
        let xi = small(&mut rng, DType::I32, &[1, 64, 14, 14], false);
        let wi = small(&mut rng, DType::I32, &[32, 64, 1, 1], false);
        let set = [
            ("data_layout", s("NCHW16c")),
            ("kernel_layout", s("OIHW16i16o")),
        ];
        let blocks = ["NCHW16c", "OIHW16i16o", "NCHW16c"];
        blocked_agrees(("nn.conv2d", &set), ("nn.conv2d", &[]), &[xi, wi], &blocks);
        // Depthwise with a multiplier of 2 and no `groups`: TVM's compute is depthwise anyway.
        let x = small(&mut rng, DType::F32, &[1, 16, 9, 9], false);
        let w = small(&mut rng, DType::F32, &[32, 1, 3, 3], false);
        let common = [("padding", ints(&[1, 1, 1, 1])), ("strides", ints(&[2, 2]))];
        let set: Vec<_> = common
            .iter()
            .cloned()
            .chain([
                ("data_layout", s("NCHW8c")),
                ("kernel_layout", s("OIHW1i8o")),
                ("out_layout", s("NCHW8c")),
            ])
            .collect();
        let reference: Vec<_> = common
            .iter()
            .cloned()
            .chain([("groups", V::Int(16))])
            .collect();
        blocked_agrees(
            ("nn.contrib_depthwise_conv2d_NCHWc", &set),
            ("nn.conv2d", &reference),
            &[x, w],
            &["NCHW8c", "OIHW1i8o", "NCHW8c"],
        );
    }

    #[test]
    fn blocked_pools() {
        let mut rng = Rng(14);
        for dtype in [DType::F32, DType::I8] {
            let x = random(&mut rng, dtype, &[2, 16, 9, 7]);
            let window = [
                ("pool_size", ints(&[3, 2])),
                ("strides", ints(&[2, 2])),
                ("padding", ints(&[1, 0, 1, 1])),
            ];
            let set: Vec<_> = window
                .iter()
                .cloned()
                .chain([("layout", s("NCHW8c"))])
                .collect();
            for op in ["nn.max_pool2d", "nn.avg_pool2d"] {
                let input = from_ref(&x);
                blocked_agrees((op, &set), (op, &window), input, &["NCHW8c", "NCHW8c"]);
            }
            for op in ["nn.global_max_pool2d", "nn.global_avg_pool2d"] {
                let set = [("layout", s("NCHW4c"))];
                blocked_agrees((op, &set), (op, &[]), from_ref(&x), &["NCHW4c", "NCHW4c"]);
            }
        }
    }

    #[test]
    fn blocked_relations() {
        use crate::nn::testing::{err, f32s, ok};
        let op = "nn.contrib_conv2d_NCHWc";
        let nchw8c = [
            ("data_layout", s("NCHW8c")),
            ("kernel_layout", s("OIHW8i8o")),
            ("out_layout", s("NCHW8c")),
            ("padding", ints(&[1, 1, 1, 1])),
        ];
        assert_eq!(
            ok(
                op,
                &[f32s(&[1, 8, 56, 56, 8]), f32s(&[8, 8, 3, 3, 8, 8])],
                &nchw8c
            ),
            "Tensor[(1, 8, 56, 56, 8), float32]"
        );
        // The stem: 3 input channels in one block of 3.
        let stem = [
            ("data_layout", s("NCHW3c")),
            ("kernel_layout", s("OIHW3i8o")),
            ("out_layout", s("NCHW8c")),
            ("strides", ints(&[2, 2])),
            ("padding", ints(&[3, 3, 3, 3])),
        ];
        assert_eq!(
            ok(
                op,
                &[f32s(&[1, 1, 224, 224, 3]), f32s(&[8, 1, 7, 7, 3, 8])],
                &stem
            ),
            "Tensor[(1, 8, 112, 112, 8), float32]"
        );
        assert_eq!(
            err(
                op,
                &[f32s(&[1, 8, 56, 56, 4]), f32s(&[8, 8, 3, 3, 8, 8])],
                &nchw8c
            ),
            "the sub-axis of `C` has extent 4, but data_layout splits it by 8"
        );
        // 12 output channels do not split into blocks of 8.
        let twelve = [("data_layout", s("NCHW8c")), ("out_layout", s("NCHW8c"))];
        assert_eq!(
            err(op, &[f32s(&[1, 1, 5, 5, 8]), f32s(&[12, 8, 1, 1])], &twelve),
            "out_layout splits axis `C` of extent 12 by 8, which does not divide it"
        );
        assert!(
            err(
                op,
                &[f32s(&[1, 1, 5, 5, 8]), f32s(&[8, 8, 1, 1])],
                &[("data_layout", s("NCHW8x"))]
            )
            .starts_with("data_layout=\"NCHW8x\"")
        );
        assert!(
            err(
                "nn.contrib_depthwise_conv2d_NCHWc",
                &[f32s(&[1, 2, 5, 5, 8]), f32s(&[2, 1, 3, 3, 1, 8])],
                &[]
            )
            .contains("blocked layouts")
        );
    }

    #[test]
    fn relations_in_nhwc() {
        use crate::nn::testing::{err, f32s, ok};
        assert_eq!(
            ok(
                "nn.conv2d",
                &[f32s(&[1, 224, 224, 3]), f32s(&[7, 7, 3, 64])],
                &[
                    ("strides", ints(&[2, 2])),
                    ("padding", ints(&[3, 3, 3, 3])),
                    ("data_layout", s("NHWC")),
                    ("kernel_layout", s("HWIO")),
                ]
            ),
            "Tensor[(1, 112, 112, 64), float32]"
        );
        assert_eq!(
            ok(
                "nn.max_pool2d",
                &[f32s(&[1, 112, 112, 64])],
                &[
                    ("pool_size", ints(&[3, 3])),
                    ("strides", ints(&[2, 2])),
                    ("padding", ints(&[1, 1, 1, 1])),
                    ("layout", s("NHWC")),
                ]
            ),
            "Tensor[(1, 56, 56, 64), float32]"
        );
        // The channels are checked where the layout puts them.
        let e = err(
            "nn.conv2d",
            &[f32s(&[1, 8, 8, 3]), f32s(&[3, 3, 4, 16])],
            &[("data_layout", s("NHWC")), ("kernel_layout", s("HWIO"))],
        );
        assert!(e.contains("input channels"), "{e}");
        let e = err(
            "nn.conv2d",
            &[f32s(&[1, 8, 8, 16]), f32s(&[3, 3, 16, 16])],
            &[("data_layout", s("NCHW16c"))],
        );
        assert_eq!(e, "the data has 4 dimensions, but data_layout has 5 axes");
    }

    #[test]
    fn permutations_of_layout_letters() {
        assert_eq!(permutation("NCHW", "NCHW", "layout"), Ok(None));
        assert_eq!(
            permutation("NHWC", "NCHW", "layout"),
            Ok(Some([0, 3, 1, 2]))
        );
        assert_eq!(
            permutation("HWIO", "OIHW", "kernel_layout"),
            Ok(Some([3, 2, 0, 1]))
        );
        assert_eq!(from([0, 3, 1, 2]), [0, 2, 3, 1]);
        for bad in ["NCHW8c", "NCH", "NHHC", "NCDW", ""] {
            let err = permutation(bad, "NCHW", "data_layout").unwrap_err();
            assert!(
                err.to_string()
                    .contains("expected an order of the letters NCHW"),
                "{err}"
            );
        }
    }
}
