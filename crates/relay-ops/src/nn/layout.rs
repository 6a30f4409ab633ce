//! Layouts other than NCHW/OIHW for the 2-d convolutions and pools: TensorFlow's and TFLite's
//! NHWC data and HWIO (or OHWI, HWOI, ...) kernels, or any other order of the same letters.
//!
//! An operator's relation, evaluation and compute definition are written for NCHW data and
//! OIHW kernels. For another layout, [`Relayout`] moves each operand into that order (a
//! transpose), applies the NCHW definition with the canonical layout attributes, and moves the
//! result into `out_layout` (the data layout when empty). A compute definition's transposes
//! are injective stages the kernel compiler inlines into the contraction's operand reads or
//! the output's stores; weights that are constants are transposed once with them.
//! Layouts with split axes (`NCHW8c`) go through `layout_transform` first.

use relay_ir::OpError;
use relay_ir::te::{TeValue, Tensor};
use relay_ir::{AttrValue, Attrs, Dim, Type, TypeKind, Value};

use crate::support::{attr_str, tensor};
use crate::transform::transposed;

/// A permutation of four axes: `pos[k]` is where canonical axis `k` is in the layout.
type Perm = [usize; 4];

/// How an operator's operands and result move between their layouts and NCHW/OIHW.
pub(super) struct Relayout {
    /// Per operand (data, then kernel), its permutation, `None` when it is canonical.
    inputs: Vec<Option<Perm>>,
    /// The result's permutation.
    out: Option<Perm>,
    /// The attributes with canonical layouts.
    canonical: Attrs,
}

impl Relayout {
    /// The relayout of an operator whose data layout is attribute `data` (over `NCHW`) and
    /// kernel layout `kernel` (over `OIHW`), or `None` when every layout is canonical. A layout
    /// that is not an order of those letters is an error.
    pub(super) fn of(
        attrs: &Attrs,
        data: &str,
        kernel: Option<&str>,
    ) -> Result<Option<Relayout>, OpError> {
        let data_layout = attr_str(attrs, data)?;
        let data_perm = permutation(data_layout, "NCHW", data)?;
        let mut inputs = vec![data_perm];
        let mut canonical = attrs.with(data, AttrValue::Str("NCHW".into()));
        if let Some(kernel) = kernel {
            inputs.push(permutation(attr_str(attrs, kernel)?, "OIHW", kernel)?);
            canonical = canonical.with(kernel, AttrValue::Str("OIHW".into()));
        }
        let out_layout = attr_str(attrs, "out_layout")?;
        let out = if out_layout.is_empty() {
            data_perm
        } else {
            permutation(out_layout, "NCHW", "out_layout")?
        };
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
        let moved: Vec<Type> = types
            .iter()
            .enumerate()
            .map(|(i, t)| {
                self.input(i)
                    .map_or_else(|| t.clone(), |p| permute_type(t, &to(p)))
            })
            .collect();
        let result = rel(&moved, &self.canonical)?;
        Ok(match self.out {
            Some(p) => permute_type(&result, &from(p)),
            None => result,
        })
    }

    /// The evaluation `eval` (of NCHW operands) applied to `args` in their layouts.
    pub(super) fn evaluate(
        &self,
        args: &[Value],
        eval: impl FnOnce(&[Value], &Attrs) -> Result<Value, OpError>,
    ) -> Result<Value, OpError> {
        let mut moved = Vec::with_capacity(args.len());
        for (i, v) in args.iter().enumerate() {
            moved.push(match (self.input(i), v) {
                (Some(p), Value::Tensor(t)) if t.ndim() == 4 => {
                    Value::tensor(transposed(t, &to(p))?)
                }
                _ => v.clone(),
            });
        }
        let result = eval(&moved, &self.canonical)?;
        match (self.out, result) {
            (Some(p), Value::Tensor(t)) => Ok(Value::tensor(transposed(&t, &from(p))?)),
            (_, result) => Ok(result),
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
        let moved: Vec<TeValue> = inputs
            .iter()
            .enumerate()
            .map(|(i, v)| match (self.input(i), v) {
                (Some(p), TeValue::Tensor(t)) if t.shape.len() == 4 => {
                    TeValue::Tensor(permute_tensor(t, &to(p), "T_layout_in"))
                }
                _ => v.clone(),
            })
            .collect();
        let canonical_out = match self.out {
            Some(p) => permute_type(out, &to(p)),
            None => out.clone(),
        };
        let result = te(&moved, &self.canonical, &canonical_out)?;
        Ok(match (self.out, result) {
            (Some(p), TeValue::Tensor(t)) => {
                TeValue::Tensor(permute_tensor(&t, &from(p), "T_layout_out"))
            }
            (_, result) => result,
        })
    }

    /// The permutation of operand `i`, if it moves.
    fn input(&self, i: usize) -> Option<Perm> {
        self.inputs.get(i).copied().flatten()
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
             (such as \"{canonical}\" or \"{}\"); transform other layouts with layout_transform",
                if canonical == "NCHW" { "NHWC" } else { "HWIO" }
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
        let bits = |a: &NDArray| {
            a.to_f64_vec()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
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
        assert!(
            e.contains("data_layout=\"NCHW16c\" is not supported"),
            "{e}"
        );
        assert!(e.contains("layout_transform"), "{e}");
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
