//! Slicing: `strided_slice` (TVM's index canonicalization, every `slice_mode` and `axes`) with
//! its type relation, reference evaluation and compute definition; `strided_set`, which
//! writes a tensor into the region `strided_slice` would read, with its relation and
//! evaluation (the kernel library computes it, in place when its data is dead after the call);
//! and the table entry of `slice_like`.

use relay_ir::te::{TExpr, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, AttrValue, Attrs, Dim, NDArray, OpError,
    OpPattern as P, OpSchema, Symbol, Type, Value,
};

use super::{
    DATA, concrete, data_type, empty_output, ix_add_c, ix_mul_c, list_text, num_elements, strided,
};
use crate::compute::{self, ComputeResult};
use crate::support::{
    arg_tensor, attr_ints, attr_opt_ints, attr_str, axis_index, dims, inputs_n, tensor,
    tensor_type, value,
};
use crate::views::View;
use crate::{field, op, plain, required_nullable};

/// `StridedSliceAttrs`. Every array is an `Optional`, left `None` by `dyn.strided_slice`; TVM
/// always prints `axes`, as `axes=None` when it is unset.
pub(crate) const STRIDED_SLICE_ATTRS: &[AttrField] = &[
    required_nullable("begin", K::IntArray),
    required_nullable("end", K::IntArray),
    required_nullable("strides", K::IntArray),
    field("slice_mode", K::Str, D::Str("end")),
    required_nullable("axes", K::IntArray),
];

/// The slicing operators.
pub(super) static OPS: &[OpSchema] = &[
    // Slicing.
    op(
        "strided_slice",
        DATA,
        "relay.attrs.StridedSliceAttrs",
        STRIDED_SLICE_ATTRS,
    )
    .with(P::Injective, strided_slice_rel, strided_slice_eval)
    .with_compute(strided_slice_te),
    // TVM registers it injective; opaque here, so it is a kernel of its own, which may write
    // its result over its data (`updates_input`).
    plain("strided_set", &["data", "v", "begin", "end", "strides"]).with(
        P::Opaque,
        strided_set_rel,
        strided_set_eval,
    ),
    op(
        "slice_like",
        &["data", "shape_like"],
        "relay.attrs.SliceLikeAttrs",
        &[required_nullable("axes", K::IntArray)],
    ),
];

// ----- Type relations and reference evaluation -----

/// TVM's `CanonicalizeIndex`: a negative index counts from the end, then the index is
/// clamped to `0..=extent` (`-1..=extent - 1` for a negative stride).
fn canonical_index(index: i64, extent: i64, stride: i64) -> i64 {
    let (lo, hi) = if stride < 0 {
        (-1, extent - 1)
    } else {
        (0, extent)
    };
    let index = if index < 0 {
        index.saturating_add(extent)
    } else {
        index
    };
    index.clamp(lo, hi)
}

/// One sliced dimension: its first input index, its step and its length.
#[derive(Clone, Copy)]
struct SliceDim {
    begin: i64,
    step: i64,
    len: Dim,
}

/// What `strided_slice` takes from each dimension of a tensor of `shape` (TVM's
/// `StridedSliceRel` and `StridedSliceOutputShape`). With `axes=None`, `begin`, `end` and
/// `strides` cover the leading dimensions and the rest are taken whole; with
/// `slice_mode="size"`, `end` holds sizes (negative: to the end) and `strides` is ignored.
fn slice_dims(shape: &[Dim], attrs: &Attrs) -> Result<Vec<SliceDim>, OpError> {
    const MAX: i64 = i64::MAX;
    let rank = shape.len();
    let mut begin = attr_ints(attrs, "begin")?;
    let mut end = attr_ints(attrs, "end")?;
    let mut steps = attr_opt_ints(attrs, "strides")?.unwrap_or_default();
    let by_size = match attr_str(attrs, "slice_mode")? {
        "end" => false,
        "size" => true,
        other => {
            return Err(OpError::attribute(
                "slice_mode",
                format!("`slice_mode` must be \"end\" or \"size\", got \"{other}\""),
            ));
        }
    };
    let axes: Vec<usize> = match attr_opt_ints(attrs, "axes")? {
        Some(axes) => {
            if begin.len() != axes.len() || end.len() != axes.len() || steps.len() > axes.len() {
                return Err(OpError::attribute(
                    "begin",
                    format!(
                        "`begin`, `end` and `strides` must have one value per axis in `axes` ({}), got {}, {} and {}",
                        axes.len(),
                        begin.len(),
                        end.len(),
                        steps.len()
                    ),
                ));
            }
            steps.resize(axes.len(), 1);
            let mut seen = vec![false; rank];
            let mut out = Vec::with_capacity(axes.len());
            for &a in &axes {
                let d = axis_index(a, rank)?;
                if seen[d] {
                    return Err(OpError::attribute(
                        "axes",
                        format!("`axes` lists dimension {d} twice"),
                    ));
                }
                seen[d] = true;
                out.push(d);
            }
            out
        }
        None => {
            for (name, len) in [
                ("begin", begin.len()),
                ("end", end.len()),
                ("strides", steps.len()),
            ] {
                if len > rank {
                    return Err(OpError::attribute(
                        name,
                        format!("`{name}` has {len} values for a tensor of rank {rank}"),
                    ));
                }
            }
            steps.resize(rank, 1);
            let pad_begin = steps[begin.len()..]
                .iter()
                .map(|&s| if s > 0 { 0 } else { MAX });
            let pad_end = steps[end.len()..]
                .iter()
                .map(|&s| if s < 0 { 0 } else { MAX });
            begin.extend(pad_begin.collect::<Vec<_>>());
            end.extend(pad_end.collect::<Vec<_>>());
            (0..rank).collect()
        }
    };
    if by_size {
        steps.iter_mut().for_each(|s| *s = 1);
        for (e, &b) in end.iter_mut().zip(&begin) {
            *e = if *e < 0 { MAX } else { b.saturating_add(*e) };
        }
    } else if steps.contains(&0) {
        return Err(OpError::attribute(
            "strides",
            format!("`strides` must not contain 0, got {}", list_text(&steps)),
        ));
    }
    let mut out: Vec<SliceDim> = shape
        .iter()
        .map(|&len| SliceDim {
            begin: 0,
            step: 1,
            len,
        })
        .collect();
    for (i, &ax) in axes.iter().enumerate() {
        let (b, e, s) = (begin[i], end[i], steps[i]);
        out[ax] = match shape[ax] {
            Dim::Known(n) => {
                let cb = canonical_index(b, n, s);
                let ce = canonical_index(e, n, s);
                if (s < 0 && ce > cb) || (s > 0 && cb > ce) {
                    return Err(OpError::shape(format!(
                        "strided_slice `begin` {b} and `end` {e} are in the wrong order for stride {s} on axis {ax}"
                    )));
                }
                // In `i128`, so that a stride of `i64::MIN` cannot overflow.
                let step = i128::from(s).abs();
                let len = (i128::from(ce - cb).abs() + step - 1) / step;
                SliceDim {
                    begin: cb,
                    step: s,
                    len: Dim::Known(len as i64),
                }
            }
            Dim::Any => SliceDim {
                begin: 0,
                step: s,
                len: Dim::Any,
            },
        };
    }
    Ok(out)
}

/// What `strided_slice` with `attrs` takes from each dimension of a tensor of the static
/// `shape`: `(first index, step, length)` (the layout chains' view of a slice,
/// [`crate::views::LayoutChain`]).
pub(crate) fn slice_steps(shape: &[i64], attrs: &Attrs) -> Result<Vec<(i64, i64, i64)>, OpError> {
    let known: Vec<Dim> = shape.iter().map(|&n| Dim::Known(n)).collect();
    slice_dims(&known, attrs)?
        .into_iter()
        .map(|d| match d.len {
            Dim::Known(len) => Ok((d.begin, d.step, len)),
            Dim::Any => Err(OpError::shape("a slice of a dynamic dimension")),
        })
        .collect()
}

fn strided_slice_rel(inputs: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let (shape, dtype) = data_type(inputs)?;
    let plan = slice_dims(shape, attrs)?;
    Ok(tensor(plan.iter().map(|p| p.len).collect(), dtype))
}

fn strided_slice_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let x = arg_tensor(args, 0)?;
    let plan = slice_dims(&dims(x.shape()), attrs)?;
    let lens: Vec<Dim> = plan.iter().map(|p| p.len).collect();
    let begin: Vec<i64> = plan.iter().map(|p| p.begin).collect();
    let step: Vec<i64> = plan.iter().map(|p| p.step).collect();
    value(strided(x, &begin, &step, &concrete(&lens)?))
}

/// The region of a tensor of `shape` that `strided_set` with index vectors `begin`, `end` and
/// `strides` writes: the view `strided_slice` with those attributes reads (TVM's index
/// canonicalization; vectors shorter than the rank cover the leading dimensions, an empty
/// `strides` is all ones).
pub fn strided_set_region(
    shape: &[i64],
    begin: &[i64],
    end: &[i64],
    strides: &[i64],
) -> Result<View, OpError> {
    let ints = |v: &[i64]| AttrValue::Array(v.iter().map(|&i| AttrValue::Int(i)).collect());
    let attrs = Attrs::new(vec![
        (Symbol::intern("begin"), ints(begin)),
        (Symbol::intern("end"), ints(end)),
        (Symbol::intern("strides"), ints(strides)),
        (Symbol::intern("slice_mode"), AttrValue::Str("end".into())),
        (Symbol::intern("axes"), AttrValue::Null),
    ]);
    View::compact(shape).sliced(&attrs)
}

/// `strided_set(data, v, begin, end, strides)` (TVM's `StridedSetRel`): `data`'s type. `v`
/// has `data`'s dtype and rank (its shape is the region's, known only with the indices'
/// values); `begin`, `end` and `strides` are integer vectors of at most one value per
/// dimension.
fn strided_set_rel(inputs: &[Type], _: &Attrs) -> Result<Type, OpError> {
    let [data, v, indices @ ..] = inputs_n::<5>(inputs)?;
    let (shape, dtype) = tensor_type(data, "the data")?;
    let (v_shape, v_dtype) = tensor_type(v, "the value `v`")?;
    if v_dtype != dtype || v_shape.len() != shape.len() {
        return Err(OpError::shape(format!(
            "strided_set writes `v` of type `{v}` into data of type `{data}`: they need one dtype and one rank"
        )));
    }
    for (name, t) in ["begin", "end", "strides"].into_iter().zip(indices) {
        let (dims, index_dtype) = tensor_type(t, name)?;
        let too_long = matches!(dims.first(), Some(Dim::Known(n)) if *n > shape.len() as i64);
        if !index_dtype.is_int() || dims.len() != 1 || too_long {
            return Err(OpError::shape(format!(
                "strided_set `{name}` must be a vector of at most {} integers, got `{t}`",
                shape.len()
            )));
        }
    }
    Ok(data.clone())
}

fn strided_set_eval(args: &[Value], _: &Attrs) -> Result<Value, OpError> {
    let (data, v) = (arg_tensor(args, 0)?, arg_tensor(args, 1)?);
    let ints = |i: usize| -> Result<Vec<i64>, OpError> {
        arg_tensor(args, i)?
            .to_i128_vec()
            .into_iter()
            .map(|x| i64::try_from(x).map_err(|_| OpError::value("an index out of range")))
            .collect()
    };
    let region = strided_set_region(data.shape(), &ints(2)?, &ints(3)?, &ints(4)?)?;
    if region.shape != v.shape() || v.dtype() != data.dtype() {
        return Err(OpError::shape(format!(
            "strided_set writes `v` of shape {:?} into a region of shape {:?}",
            v.shape(),
            region.shape
        )));
    }
    let mut out: NDArray = (**data).clone();
    let width = data.dtype().size_bytes();
    let bytes = out.as_bytes_mut();
    for (k, element) in v.as_bytes().chunks_exact(width).enumerate() {
        // Element `k` of `v`, row-major, is at `offset + Σ index · stride` of the data.
        let (mut rest, mut at) = (k as i64, region.offset);
        for (&n, &stride) in region.shape.iter().zip(&region.strides).rev() {
            at += (rest % n) * stride;
            rest /= n;
        }
        let at = at as usize * width;
        bytes[at..at + width].copy_from_slice(element);
    }
    value(Ok::<_, OpError>(out))
}

// ----- Compute definitions -----

/// `strided_slice`: `begin + i * step` in every dimension, as the reference plans it.
fn strided_slice_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> ComputeResult {
    let (shape, dtype) = compute::static_tensor(out)?;
    let x = compute::input(inputs, 0)?;
    let plan = slice_dims(&dims(&x.shape), attrs)?;
    let lens = concrete(&plan.iter().map(|p| p.len).collect::<Vec<_>>())?;
    if lens != shape {
        return Err(OpError::shape(format!(
            "strided_slice makes shape {lens:?}, its output type is `{out}`"
        )));
    }
    if num_elements(&shape) == 0 {
        return Ok(empty_output("T_strided_slice", &shape, dtype));
    }
    let t = Tensor::compute("T_strided_slice", &shape, |i| {
        let at: Vec<TExpr> = plan
            .iter()
            .zip(i)
            .zip(&shape)
            .map(|((p, i), &n)| {
                if n == 1 {
                    TExpr::index(p.begin)
                } else {
                    ix_add_c(ix_mul_c(i.clone(), p.step), p.begin)
                }
            })
            .collect();
        x.at(&at)
    });
    compute::tensor_value(t)
}

#[cfg(test)]
mod tests {

    use relay_ir::{AttrValue, DType, Type, Value};

    use crate::compute::op_tests::{DTYPES, Rng, random};

    use crate::testing::{attrs, ints};
    use crate::transform::testing::*;

    #[test]
    fn strided_slice_shapes() {
        let x = f32ty(&[2, 3, 4]);
        let r = |set: &[(&str, AttrValue)]| rel("strided_slice", &[&x], set);
        assert_eq!(
            r(&slice_attrs(&[0, 2, 3], &[2, 0, 0], &[1, -1, -2])).unwrap(),
            "Tensor[(2, 2, 2), float32]"
        );
        // Short lists cover the leading axes; ends clamp.
        assert_eq!(
            r(&slice_attrs(&[1], &[100], &[1])).unwrap(),
            "Tensor[(1, 3, 4), float32]"
        );
        assert_eq!(
            r(&slice_attrs(&[0, -1], &[2, -4], &[1, -1])).unwrap(),
            "Tensor[(2, 3, 4), float32]"
        );
        assert_eq!(
            r(&slice_attrs(&[0, 0, 0], &[2, 3, 4], &[1, 2, 3])).unwrap(),
            "Tensor[(2, 2, 2), float32]"
        );
        // Axes.
        let mut with_axes = slice_attrs(&[1], &[3], &[1]);
        with_axes.push(("axes", ints(&[-1])));
        assert_eq!(r(&with_axes).unwrap(), "Tensor[(2, 3, 2), float32]");
        // Size mode: `end` holds sizes, -1 meaning to the end; strides are ignored.
        let mut sized = slice_attrs(&[1, 0, 1], &[1, -1, 2], &[1, 1, 5]);
        sized.push(("slice_mode", text("size")));
        assert_eq!(r(&sized).unwrap(), "Tensor[(1, 3, 2), float32]");
        // Errors.
        assert!(
            r(&slice_attrs(&[3], &[1], &[1]))
                .unwrap_err()
                .contains("wrong order")
        );
        assert!(
            r(&slice_attrs(&[0], &[1], &[0]))
                .unwrap_err()
                .contains("must not contain 0")
        );
        assert!(r(&slice_attrs(&[0, 0, 0, 0], &[1], &[1])).is_err());
        let mut bad_mode = slice_attrs(&[0], &[1], &[1]);
        bad_mode.push(("slice_mode", text("sizes")));
        assert!(r(&bad_mode).is_err());
        let mut bad_axes = slice_attrs(&[0, 0], &[1, 1], &[1]);
        bad_axes.push(("axes", ints(&[0])));
        assert!(r(&bad_axes).is_err());
        assert_eq!(
            rel(
                "strided_slice",
                &[&any_ty(&[-1, 4])],
                &slice_attrs(&[0, 1], &[1, 3], &[1, 1])
            )
            .unwrap(),
            "Tensor[(?, 2), float32]"
        );
    }

    #[test]
    fn strided_slice_values() {
        for dtype in SHAPE_DTYPES {
            let x = iota(dtype, &[2, 3, 4]);
            let (s, d, v) = parts(
                &eval(
                    "strided_slice",
                    &[&x],
                    &slice_attrs(&[0, 2, 3], &[2, 0, 0], &[1, -1, -2]),
                )
                .unwrap(),
            );
            assert_eq!((s, d), (vec![2, 2, 2], dtype));
            let expect: Vec<i128> = [11, 9, 7, 5, 23, 21, 19, 17]
                .iter()
                .map(|&i| if dtype == DType::BOOL { i % 2 } else { i })
                .collect();
            assert_eq!(v, expect);
        }
        let x = iota(DType::I32, &[2, 3, 4]);
        let (s, v) = shape_values(
            &eval(
                "strided_slice",
                &[&x],
                &slice_attrs(&[0, -1, 0], &[2, -4, 4], &[1, -1, 2]),
            )
            .unwrap(),
        );
        assert_eq!(s, vec![2, 3, 2]);
        assert_eq!(v, [8, 10, 4, 6, 0, 2, 20, 22, 16, 18, 12, 14]);
        let mut sized = slice_attrs(&[1, 0, 1], &[1, -1, 2], &[1]);
        sized.push(("slice_mode", text("size")));
        let (s, v) = shape_values(&eval("strided_slice", &[&x], &sized).unwrap());
        assert_eq!((s, v), (vec![1, 3, 2], vec![13, 14, 17, 18, 21, 22]));
        // An empty slice.
        let (s, v) =
            shape_values(&eval("strided_slice", &[&x], &slice_attrs(&[1], &[1], &[1])).unwrap());
        assert_eq!((s, v), (vec![0, 3, 4], vec![]));
    }

    /// `strided_set(data, v, begin, end, strides)` with integer index vectors.
    fn set(
        data: &Value,
        v: &Value,
        begin: &[i64],
        end: &[i64],
        strides: &[i64],
    ) -> Result<Value, String> {
        let vector = |x: &[i64]| {
            let x: Vec<i128> = x.iter().map(|&i| i128::from(i)).collect();
            typed(DType::I64, &[x.len() as i64], &x)
        };
        let (b, e, s) = (vector(begin), vector(end), vector(strides));
        eval("strided_set", &[data, v, &b, &e, &s], &[])
    }

    #[test]
    fn strided_set_types() {
        let index = |n: i64| ty(&[n], DType::I64);
        let (x, v) = (f32ty(&[2, 3, 4]), any_ty(&[2, -1, 4]));
        let r = |data: &Type, v: &Type, begin: &Type| {
            rel("strided_set", &[data, v, begin, &index(1), &index(1)], &[])
        };
        assert_eq!(r(&x, &v, &index(2)).unwrap(), "Tensor[(2, 3, 4), float32]");
        assert_eq!(
            r(&any_ty(&[-1, 4]), &f32ty(&[1, 4]), &index(1)).unwrap(),
            "Tensor[(?, 4), float32]"
        );
        // Another dtype or rank for `v`, an index vector too long or of floats.
        assert!(
            r(&x, &ty(&[2, 3, 4], DType::F16), &index(3))
                .unwrap_err()
                .contains("one dtype")
        );
        assert!(
            r(&x, &f32ty(&[2, 3]), &index(3))
                .unwrap_err()
                .contains("one rank")
        );
        assert!(
            r(&x, &v, &index(4))
                .unwrap_err()
                .contains("at most 3 integers")
        );
        assert!(r(&x, &v, &f32ty(&[3])).is_err());
        assert!(rel("strided_set", &[&x, &v, &index(3)], &[]).is_err());
    }

    #[test]
    fn strided_set_values() {
        for dtype in SHAPE_DTYPES {
            let x = iota(dtype, &[3, 4]);
            let wrap = |i: i128| if dtype == DType::BOOL { i % 2 } else { i };
            // Row 1, columns 1 and 3.
            let v = typed(dtype, &[1, 2], &[wrap(101), wrap(103)]);
            let (s, d, out) = parts(&set(&x, &v, &[1, 1], &[2, 4], &[1, 2]).unwrap());
            assert_eq!((s, d), (vec![3, 4], dtype));
            let expect: Vec<i128> = [0, 1, 2, 3, 4, 101, 6, 103, 8, 9, 10, 11]
                .into_iter()
                .map(wrap)
                .collect();
            assert_eq!(out, expect);
        }
        // Rows in reverse (a short vector covers the leading axis); the data is unchanged.
        let x = iota(DType::I32, &[3, 4]);
        let v = typed(DType::I32, &[3, 4], &(100..112).collect::<Vec<i128>>());
        let (_, out) = shape_values(&set(&x, &v, &[-1], &[-4], &[-1]).unwrap());
        assert_eq!(
            out,
            [108, 109, 110, 111, 104, 105, 106, 107, 100, 101, 102, 103]
        );
        assert_eq!(shape_values(&x).1, (0..12).collect::<Vec<i128>>());
        // An empty region writes nothing.
        let empty = typed(DType::I32, &[0, 4], &[]);
        assert_eq!(
            shape_values(&set(&x, &empty, &[2], &[2], &[1]).unwrap()).1,
            (0..12).collect::<Vec<i128>>()
        );
        // A `v` of another shape than the region, a zero stride.
        let err = set(&x, &v, &[0], &[2], &[1]).unwrap_err();
        assert!(
            err.contains("shape [3, 4] into a region of shape [2, 4]"),
            "{err}"
        );
        assert!(
            set(&x, &v, &[0], &[3], &[0])
                .unwrap_err()
                .contains("must not contain 0")
        );
    }

    #[test]
    fn strided_set_writes_what_strided_slice_reads() {
        let mut rng = Rng(0x5eed_0031);
        let shape = [4i64, 5, 3];
        let mut written = 0;
        for _ in 0..400 {
            let n = rng.below(4) as usize;
            let mut value = || rng.below(13) as i64 - 6;
            let begin: Vec<i64> = (0..n).map(|_| value()).collect();
            let end: Vec<i64> = (0..n).map(|_| value()).collect();
            let strides: Vec<i64> = (0..n)
                .map(|_| [1, 2, -1, -3][(value() & 3) as usize])
                .collect();
            let attrs = slice_attrs(&begin, &end, &strides);
            let x = iota(DType::I32, &shape);
            let Ok(region) = eval("strided_slice", &[&x], &attrs) else {
                assert!(set(&x, &x, &begin, &end, &strides).is_err());
                continue;
            };
            let (s, old) = shape_values(&region);
            let new: Vec<i128> = old.iter().map(|&i| 1000 + i).collect();
            let v = typed(DType::I32, &s, &new);
            let out = set(&x, &v, &begin, &end, &strides).unwrap();
            // The region reads back as `v`; every other element is the data's.
            assert_eq!(
                shape_values(&eval("strided_slice", &[&out], &attrs).unwrap()).1,
                new
            );
            let (_, all) = shape_values(&out);
            for (i, &e) in all.iter().enumerate() {
                assert!(
                    e == i as i128 || (e >= 1000 && old.contains(&(e - 1000))),
                    "{e} at {i}"
                );
                assert!(e != i as i128 || !old.contains(&e));
            }
            written += usize::from(!new.is_empty());
        }
        assert!(written > 100, "only {written} regions written");
    }

    #[test]
    fn strided_slice_fixed_cases() {
        let mut rng = Rng(0x5eed_0006);
        type Case<'a> = (
            &'a [i64],
            &'a [i64],
            &'a [i64],
            Option<&'a [i64]>,
            Option<&'a [i64]>,
            &'a str,
        );
        let cases: &[Case] = &[
            (&[4, 5, 3], &[1, 0], &[3, 5], Some(&[1, 2]), None, "end"),
            (&[4, 5, 3], &[0], &[4], None, None, "end"),
            (&[4, 5, 3], &[3, 4], &[0, 0], Some(&[-1, -2]), None, "end"),
            (
                &[4, 5, 3],
                &[-1, -1, -1],
                &[-10, -10, -10],
                Some(&[-1, -2, -3]),
                None,
                "end",
            ),
            (&[4, 5, 3], &[-10], &[100], None, None, "end"),
            (&[4, 5, 3], &[1, 1], &[2, 3], None, Some(&[2, 0]), "end"),
            (
                &[4, 5, 3],
                &[2, -3],
                &[1, -1],
                Some(&[-1, 1]),
                Some(&[-1, 1]),
                "end",
            ),
            (&[4, 5, 3], &[1, 2], &[2, -1], None, None, "size"),
            (
                &[4, 5, 3],
                &[-3, 0],
                &[2, 5],
                Some(&[-1, 1]),
                Some(&[0, 1]),
                "size",
            ),
            (&[4, 5, 3], &[0], &[0], None, None, "end"),
            (&[0, 3], &[0, 1], &[0, 3], None, None, "end"),
            (&[5], &[4], &[0], Some(&[i64::MIN]), None, "end"),
            (&[5], &[i64::MIN], &[i64::MAX], Some(&[3]), None, "end"),
            (&[1, 1], &[0, 0], &[1, 1], None, None, "end"),
            (&[], &[], &[], None, None, "end"),
        ];
        for &(shape, begin, end, strides, axes, mode) in cases {
            let set = [
                ("begin", ints(begin)),
                ("end", ints(end)),
                ("strides", strides.map_or(AttrValue::Null, ints)),
                ("axes", axes.map_or(AttrValue::Null, ints)),
                ("slice_mode", text(mode)),
            ];
            check_all(&mut rng, "strided_slice", shape, &set);
        }
    }

    #[test]
    fn strided_slice_random_attributes() {
        let mut rng = Rng(0x5eed_0007);
        let shapes: [&[i64]; 5] = [&[4, 5, 3], &[7], &[2, 0, 3], &[1, 6], &[3, 1, 2, 2]];
        let mut accepted = 0;
        for trial in 0..1500 {
            let shape = shapes[trial % shapes.len()];
            let rank = shape.len();
            let pick =
                |rng: &mut Rng, choices: &[i64]| choices[rng.below(choices.len() as u64) as usize];
            let value = |rng: &mut Rng| -> i64 {
                if rng.below(8) == 0 {
                    pick(rng, &[i64::MIN, i64::MAX, -100, 100])
                } else {
                    rng.below(17) as i64 - 8
                }
            };
            let axes: Option<Vec<i64>> = if rng.below(2) == 0 {
                None
            } else {
                let mut axes: Vec<i64> = Vec::new();
                for d in 0..rank as i64 {
                    match rng.below(3) {
                        0 => axes.push(d),
                        1 => axes.push(d - rank as i64),
                        _ => {}
                    }
                }
                // Shuffle.
                for k in (1..axes.len()).rev() {
                    axes.swap(k, rng.below(k as u64 + 1) as usize);
                }
                Some(axes)
            };
            let n = axes
                .as_ref()
                .map_or_else(|| rng.below(rank as u64 + 1) as usize, Vec::len);
            let begin: Vec<i64> = (0..n).map(|_| value(&mut rng)).collect();
            let end: Vec<i64> = (0..n).map(|_| value(&mut rng)).collect();
            let steps = rng.below(n as u64 + 2) as usize;
            let strides = if steps > n {
                AttrValue::Null
            } else {
                let s: Vec<i64> = (0..steps)
                    .map(|_| pick(&mut rng, &[1, 1, 2, 3, -1, -1, -2, -3, 7]))
                    .collect();
                ints(&s)
            };
            let mode = if rng.below(4) == 0 { "size" } else { "end" };
            let set = [
                ("begin", ints(&begin)),
                ("end", ints(&end)),
                ("strides", strides),
                ("axes", axes.as_deref().map_or(AttrValue::Null, ints)),
                ("slice_mode", text(mode)),
            ];
            let dtype = DTYPES[rng.below(DTYPES.len() as u64) as usize];
            let x = random(&mut rng, dtype, shape);
            accepted += usize::from(check_op(
                "strided_slice",
                &[x],
                &attrs("strided_slice", &set),
            ));
        }
        assert!(accepted > 500, "only {accepted} slices accepted");
    }
}
