//! `layout_transform`: moves a tensor between TVM layouts such as `NCHW`, `NHWC` and the
//! blocked `NCHW8c` (TVM's `conv2d_NCHWc` data), `OIHW16i16o` (its weights).
//!
//! A layout names each axis by a letter: an upper-case letter is a *primal* axis, a number
//! and the lower-case letter of a primal axis is a *sub-axis*, the inner part of that axis
//! split by the number (`NCHW8c`: C split into C/8 outer channels and 8 inner ones, the inner
//! ones last). Both layouts must have the same primal axes; an axis a layout splits must divide
//! by the factor (TVM pads instead; here it is a type error naming the axis). An element's
//! primal coordinates are `outer * factor + inner` where split, the coordinate otherwise; the
//! source element is where those coordinates are in the source layout.

use relay_ir::OpError;
use relay_ir::te::{BinaryOp, TExpr, TeValue, Tensor};
use relay_ir::{Attrs, Dim, NDArray, Type, Value};

use super::{concrete, data_type, gather};
use crate::compute::{self, ComputeResult};
use crate::support::{arg_tensor, attr_str, dim_text, dims, strides, tensor, value};

/// One axis of a layout: its primal letter (upper-case) and, for a sub-axis, its factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Axis {
    primal: char,
    factor: Option<i64>,
}

/// A parsed layout: its axes in order.
#[derive(Debug)]
struct Layout(Vec<Axis>);

impl Layout {
    /// Parses `text` (`NCHW`, `NCHW8c`, `OIHW16i16o`), checking that every letter appears
    /// once as a primal axis and at most once as a sub-axis of a primal axis present.
    fn parse(text: &str, attr: &str) -> Result<Layout, OpError> {
        let bad = |why: &str| OpError::attribute(attr, format!("{attr}=\"{text}\": {why}"));
        let mut axes = Vec::new();
        let mut digits = String::new();
        for c in text.chars() {
            match c {
                '0'..='9' => digits.push(c),
                'A'..='Z' if digits.is_empty() => axes.push(Axis {
                    primal: c,
                    factor: None,
                }),
                'a'..='z' if !digits.is_empty() => {
                    let factor: i64 = digits.parse().map_err(|_| bad("a factor too large"))?;
                    if factor < 1 {
                        return Err(bad("a sub-axis factor must be positive"));
                    }
                    axes.push(Axis {
                        primal: c.to_ascii_uppercase(),
                        factor: Some(factor),
                    });
                    digits.clear();
                }
                _ => return Err(bad("expected upper-case axes and sub-axes such as `8c`")),
            }
        }
        if !digits.is_empty() || axes.is_empty() {
            return Err(bad("expected upper-case axes and sub-axes such as `8c`"));
        }
        for (i, a) in axes.iter().enumerate() {
            let twice = axes[..i]
                .iter()
                .any(|b| b.primal == a.primal && b.factor.is_some() == a.factor.is_some());
            let primal = axes
                .iter()
                .any(|b| b.primal == a.primal && b.factor.is_none());
            if twice || !primal {
                return Err(bad(&format!(
                    "axis `{}` must appear once, with at most one sub-axis",
                    a.primal
                )));
            }
        }
        Ok(Layout(axes))
    }

    /// The primal letters, sorted.
    fn primals(&self) -> Vec<char> {
        let mut p: Vec<char> = self
            .0
            .iter()
            .filter(|a| a.factor.is_none())
            .map(|a| a.primal)
            .collect();
        p.sort_unstable();
        p
    }

    /// The factor `primal` is split by, if it is.
    fn factor(&self, primal: char) -> Option<i64> {
        self.0
            .iter()
            .find(|a| a.primal == primal && a.factor.is_some())
            .and_then(|a| a.factor)
    }

    /// The position of `primal`'s outer axis, and of its sub-axis if any.
    fn positions(&self, primal: char) -> (usize, Option<usize>) {
        let outer = self
            .0
            .iter()
            .position(|a| a.primal == primal && a.factor.is_none());
        let inner = self
            .0
            .iter()
            .position(|a| a.primal == primal && a.factor.is_some());
        (outer.unwrap_or(0), inner)
    }
}

/// The source and destination layouts of a call, and the attributes naming them in errors.
struct Transform {
    src: Layout,
    dst: Layout,
    names: [String; 2],
}

impl Transform {
    fn of(attrs: &Attrs) -> Result<Transform, OpError> {
        let src = (attr_str(attrs, "src_layout")?, "src_layout");
        Transform::between(src, (attr_str(attrs, "dst_layout")?, "dst_layout"))
    }

    /// The transform from layout `src.0` to `dst.0`, each named in errors by its attribute.
    fn between(src: (&str, &str), dst: (&str, &str)) -> Result<Transform, OpError> {
        let (src_attr, dst_attr) = (src.1, dst.1);
        let src = Layout::parse(src.0, src_attr)?;
        let dst = Layout::parse(dst.0, dst_attr)?;
        if src.primals() != dst.primals() {
            return Err(OpError::shape(format!(
                "{src_attr} and {dst_attr} must have the same primal axes, got {:?} and {:?}",
                src.primals(),
                dst.primals()
            )));
        }
        Ok(Transform {
            src,
            dst,
            names: [src_attr.to_string(), dst_attr.to_string()],
        })
    }

    /// The extent of each primal axis of a tensor of `shape` in the source layout.
    fn primal_extents(&self, shape: &[Dim]) -> Result<Vec<(char, Dim)>, OpError> {
        if shape.len() != self.src.0.len() {
            return Err(OpError::shape(format!(
                "the data has {} dimensions, but {} has {} axes",
                shape.len(),
                self.names[0],
                self.src.0.len()
            )));
        }
        let mut out = Vec::new();
        for p in self.src.primals() {
            let (outer, inner) = self.src.positions(p);
            let extent = match (
                shape[outer],
                inner.map(|i| (shape[i], self.src.0[i].factor)),
            ) {
                (d, None) => d,
                (Dim::Known(o), Some((Dim::Known(i), Some(f)))) if i == f => o
                    .checked_mul(f)
                    .map(Dim::Known)
                    .ok_or_else(|| OpError::shape("a dimension too large"))?,
                (Dim::Any, Some((Dim::Known(i), Some(f)))) if i == f => Dim::Any,
                (_, Some((d, f))) => {
                    return Err(OpError::shape(format!(
                        "the sub-axis of `{p}` has extent {}, but {} splits it by {}",
                        dim_text(d),
                        self.names[0],
                        f.unwrap_or(0)
                    )));
                }
            };
            out.push((p, extent));
        }
        Ok(out)
    }

    /// The destination shape of a source tensor of `shape`.
    fn dst_shape(&self, shape: &[Dim]) -> Result<Vec<Dim>, OpError> {
        let extents = self.primal_extents(shape)?;
        let extent = |p: char| {
            extents
                .iter()
                .find(|(q, _)| *q == p)
                .map_or(Dim::Any, |e| e.1)
        };
        self.dst
            .0
            .iter()
            .map(|a| match (a.factor, extent(a.primal)) {
                (Some(f), _) => Ok(Dim::Known(f)),
                (None, Dim::Any) => Ok(Dim::Any),
                (None, Dim::Known(n)) => match self.dst.factor(a.primal) {
                    None => Ok(Dim::Known(n)),
                    Some(f) if n % f == 0 => Ok(Dim::Known(n / f)),
                    Some(f) => Err(OpError::shape(format!(
                        "{} splits axis `{}` of extent {n} by {f}, which does not divide it",
                        self.names[1], a.primal
                    ))),
                },
            })
            .collect()
    }

    /// How each source axis's index follows from a destination index: the destination axes
    /// holding its primal coordinate (outer, and inner with the destination's factor), then
    /// the source's split of it. The one rule both the evaluation and the compute apply.
    fn recipe(&self) -> Vec<SourceAxis> {
        self.src
            .0
            .iter()
            .map(|a| {
                let (outer, inner) = self.dst.positions(a.primal);
                SourceAxis {
                    outer,
                    inner: inner.zip(self.dst.factor(a.primal)),
                    split: match (a.factor, self.src.factor(a.primal)) {
                        (Some(f), _) => Split::Inner(f),
                        (None, Some(f)) => Split::Outer(f),
                        (None, None) => Split::Whole,
                    },
                }
            })
            .collect()
    }
}

/// The index of one source axis as a function of the destination index (see
/// [`Transform::recipe`]).
#[derive(Clone, Copy, Debug)]
struct SourceAxis {
    /// The destination axis of the primal coordinate, or of its outer part.
    outer: usize,
    /// The destination axis of its inner part, and the destination's factor.
    inner: Option<(usize, i64)>,
    /// What part of the primal coordinate the source axis is.
    split: Split,
}

/// The part of a primal coordinate a source axis holds.
#[derive(Clone, Copy, Debug)]
enum Split {
    Whole,
    /// The outer part of an axis split by the factor (`c / 8`).
    Outer(i64),
    /// The inner part (`c % 8`).
    Inner(i64),
}

pub(super) fn layout_transform_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    Ok(tensor(Transform::of(attrs)?.dst_shape(shape)?, dtype))
}

pub(super) fn layout_transform_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    value(Transform::of(attrs)?.array(arg_tensor(args, 0)?))
}

pub(super) fn layout_transform_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, _) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    compute::tensor_value(Transform::of(attrs)?.tensor(x, &shape))
}

impl Transform {
    /// `x` moved into the destination layout.
    fn array(&self, x: &NDArray) -> Result<NDArray, OpError> {
        let out = concrete(&self.dst_shape(&dims(x.shape()))?)?;
        // The recipe is computed once, so that each element costs a few multiply-adds (a
        // network's weights are millions of elements, moved when their layout_transform is
        // folded).
        let recipe: Vec<(SourceAxis, i64)> =
            self.recipe().into_iter().zip(strides(x.shape())).collect();
        gather(x, &out, |idx| {
            let mut at = 0;
            for &(a, stride) in &recipe {
                let mut v = idx[a.outer];
                if let Some((i, f)) = a.inner {
                    v = v * f + idx[i];
                }
                v = match a.split {
                    Split::Whole => v,
                    Split::Outer(f) => v / f,
                    Split::Inner(f) => v % f,
                };
                at += v * stride;
            }
            Ok(at)
        })
    }

    /// The compute tensor of `x` moved into the destination layout (`shape`, its extents).
    fn tensor(&self, x: &Tensor, shape: &[i64]) -> Tensor {
        let recipe = self.recipe();
        Tensor::compute("T_layout_trans", shape, |i| {
            let at: Vec<TExpr> = recipe
                .iter()
                .map(|a| {
                    let mut v = i[a.outer].clone();
                    if let Some((k, f)) = a.inner {
                        let outer = compute::bin(BinaryOp::Mul, &v, &TExpr::index(f));
                        v = compute::bin(BinaryOp::Add, &outer, &i[k]);
                    }
                    match a.split {
                        Split::Whole => v,
                        Split::Outer(f) => compute::bin(BinaryOp::Div, &v, &TExpr::index(f)),
                        Split::Inner(f) => compute::bin(BinaryOp::Mod, &v, &TExpr::index(f)),
                    }
                })
                .collect();
            x.at(&at)
        })
    }
}

/// A layout other than an operator's canonical one (`NCHW8c` data, `OIHW8i8o` weights, of a
/// convolution written for `NCHW` and `OIHW`): its operands moved to the canonical layout and
/// its result back by `layout_transform`'s rules. Each side is `(layout, attribute)`, the
/// attribute naming it in errors.
pub(crate) struct Reblock(Transform);

impl Reblock {
    /// The move from layout `src` to `dst`.
    pub(crate) fn new(src: (&str, &str), dst: (&str, &str)) -> Result<Reblock, OpError> {
        Transform::between(src, dst).map(Reblock)
    }

    /// Whether `layout` splits an axis (`NCHW8c`), so that only a reblocking reaches it.
    pub(crate) fn splits(layout: &str) -> bool {
        layout.bytes().any(|b| b.is_ascii_digit())
    }

    /// A tensor type moved (its dtype kept); other types are an error.
    pub(crate) fn ty(&self, t: &Type) -> Result<Type, OpError> {
        let (shape, dtype) = data_type(std::slice::from_ref(t))?;
        Ok(tensor(self.0.dst_shape(shape)?, dtype))
    }

    /// An array moved.
    pub(crate) fn array(&self, x: &NDArray) -> Result<NDArray, OpError> {
        self.0.array(x)
    }

    /// A compute tensor moved.
    pub(crate) fn tensor(&self, x: &Tensor) -> Result<Tensor, OpError> {
        let shape = concrete(&self.0.dst_shape(&dims(&x.shape))?)?;
        Ok(self.0.tensor(x, &shape))
    }
}

#[cfg(test)]
mod tests {
    use relay_ir::{AttrValue, DType, NDArray};

    use super::*;
    use crate::compute::op_tests::{Rng, check, random};
    use crate::testing::attrs;

    fn set(src: &str, dst: &str) -> Attrs {
        attrs(
            "layout_transform",
            &[
                ("src_layout", AttrValue::Str(src.into())),
                ("dst_layout", AttrValue::Str(dst.into())),
            ],
        )
    }

    fn rel(shape: &[i64], src: &str, dst: &str) -> Result<String, String> {
        layout_transform_rel(&[Type::tensor(shape, DType::F32)], &set(src, dst))
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    #[test]
    fn shapes_of_layout_transforms() {
        assert_eq!(
            rel(&[1, 32, 7, 5], "NCHW", "NCHW8c").unwrap(),
            "Tensor[(1, 4, 7, 5, 8), float32]"
        );
        assert_eq!(
            rel(&[1, 4, 7, 5, 8], "NCHW8c", "NHWC").unwrap(),
            "Tensor[(1, 7, 5, 32), float32]"
        );
        assert_eq!(
            rel(&[64, 32, 3, 3], "OIHW", "OIHW16i16o").unwrap(),
            "Tensor[(4, 2, 3, 3, 16, 16), float32]"
        );
        assert_eq!(
            rel(&[1, 32, 7, 5], "NCHW", "NHWC").unwrap(),
            "Tensor[(1, 7, 5, 32), float32]"
        );
        for (shape, src, dst, why) in [
            (&[1, 30, 7, 5][..], "NCHW", "NCHW8c", "does not divide"),
            (&[1, 32, 7, 5], "NCHW", "NCDW", "same primal axes"),
            (&[1, 32, 7], "NCHW", "NHWC", "dimensions"),
            (&[1, 4, 7, 5, 4], "NCHW8c", "NCHW", "splits it by 8"),
            (&[1, 32, 7, 5], "NCHW", "NCHW8", "sub-axes such as"),
            (&[1, 32, 7, 5], "NCHW", "NCHW4c4c", "at most one sub-axis"),
            (&[1, 32, 7, 5], "NCHW", "NHW8c", "must appear once"),
        ] {
            let e = rel(shape, src, dst).unwrap_err();
            assert!(e.contains(why), "{src} -> {dst}: {e}");
        }
    }

    #[test]
    fn blocked_layouts_round_trip_and_compute_agrees() {
        let mut rng = Rng(5);
        let x = random(&mut rng, DType::F32, &[2, 16, 5, 3]);
        let blocked =
            layout_transform_eval(&[Value::tensor(x.clone())], &set("NCHW", "NCHW4c")).unwrap();
        let b = blocked.as_tensor().unwrap();
        assert_eq!(b.shape(), [2, 4, 5, 3, 4]);
        // Element (n, c, h, w) is at (n, c / 4, h, w, c % 4).
        let (xs, bs) = (x.to_f64_vec(), b.to_f64_vec());
        let (n, c, h, w) = (1usize, 13usize, 2usize, 1usize);
        let at_x = ((n * 16 + c) * 5 + h) * 3 + w;
        let at_b = (((n * 4 + c / 4) * 5 + h) * 3 + w) * 4 + c % 4;
        assert_eq!(xs[at_x].to_bits(), bs[at_b].to_bits());
        let back =
            layout_transform_eval(std::slice::from_ref(&blocked), &set("NCHW4c", "NCHW")).unwrap();
        let bits = |a: &NDArray| {
            a.to_f64_vec()
                .iter()
                .map(|v| v.to_bits())
                .collect::<Vec<_>>()
        };
        assert_eq!(bits(back.as_tensor().unwrap()), bits(&x));
        // Compute definitions agree with the evaluation, every dtype, real sizes included.
        for (dtype, shape, src, dst) in [
            (DType::F32, &[2, 16, 5, 3][..], "NCHW", "NCHW4c"),
            (DType::I8, &[1, 4, 5, 3, 8], "NCHW8c", "NHWC"),
            (DType::F16, &[32, 16, 3, 3], "OIHW", "OIHW8i4o"),
            (DType::I64, &[2, 3, 4], "NCW", "NWC"),
            (DType::F32, &[1, 256, 14, 14], "NCHW", "NCHW16c"),
        ] {
            let x = random(&mut rng, dtype, shape);
            assert!(
                check("layout_transform", &[x], &set(src, dst)),
                "{dtype} {src} -> {dst}"
            );
        }
    }
}
