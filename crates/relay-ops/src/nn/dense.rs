//! Dense and matrix products: `nn.dense`, `nn.matmul` and `nn.batch_matmul` (type relation,
//! reference evaluation and compute definition each), and the table entries of the packed,
//! bit-serial and sparse products and of `nn.fifo_buffer`.

use relay_ir::OpError;
use relay_ir::te::{IterVar, TeValue, Tensor};
use relay_ir::{
    AttrDefault as D, AttrField, AttrKind as K, Attrs, DType, Dim, NDArray, OpPattern as P,
    OpSchema, Type, Value,
};

use super::{
    DATA, DATA_WEIGHT, Num, arg, checked, concrete, contraction, contraction_dtype, count, differ,
    ix, read_as, unify,
};
use crate::compute;
use crate::support::{
    attr_bool, attr_opt_int, broadcast_shapes, dim_text, inputs_n, tensor, tensor_type,
};
use crate::{dtype, field, op, plain, required_nullable};

const SPARSE_INPUTS: &[&str] = &[
    "dense_data",
    "sparse_data",
    "sparse_indices",
    "sparse_indptr",
];

/// `DenseAttrs`, also used by `qnn.dense`. `units` has no default; TVM prints `units=None`.
pub(crate) const DENSE_ATTRS: &[AttrField] =
    &[required_nullable("units", K::Int), dtype("out_dtype")];

/// `BatchMatmulAttrs`, also used by `qnn.batch_matmul`. Python's default is
/// `transpose_b=True`, so text usually shows it.
pub(crate) const BATCH_MATMUL_ATTRS: &[AttrField] = &[
    dtype("out_dtype"),
    field("transpose_a", K::Bool, D::Bool(false)),
    field("transpose_b", K::Bool, D::Bool(false)),
];

/// `SparseDenseAttrs`.
const SPARSE_DENSE_ATTRS: &[AttrField] = &[field("sparse_lhs", K::Bool, D::Bool(false))];

/// The dense and matrix products.
pub(super) static OPS: &[OpSchema] = &[
    // Dense and matrix products.
    op(
        "nn.dense",
        DATA_WEIGHT,
        "relay.attrs.DenseAttrs",
        DENSE_ATTRS,
    )
    .with(P::OutEWiseFusable, dense_rel, dense_eval)
    .with_compute(dense_te),
    op(
        "nn.matmul",
        &["tensor_a", "tensor_b"],
        "relay.attrs.MatmulAttrs",
        &[
            required_nullable("units", K::Int),
            dtype("out_dtype"),
            field("transpose_a", K::Bool, D::Bool(false)),
            field("transpose_b", K::Bool, D::Bool(false)),
        ],
    )
    .with(P::OutEWiseFusable, matmul_rel, matmul_eval)
    .with_compute(matmul_te),
    op(
        "nn.batch_matmul",
        &["tensor_a", "tensor_b"],
        "relay.attrs.BatchMatmulAttrs",
        BATCH_MATMUL_ATTRS,
    )
    .with(P::OutEWiseFusable, batch_matmul_rel, batch_matmul_eval)
    .with_compute(batch_matmul_te),
    // TVM registers `nn.contrib_dense_pack` with `DenseAttrs` but builds `DensePackAttrs`; the
    // fields here are those of the struct the calls carry.
    op(
        "nn.contrib_dense_pack",
        DATA_WEIGHT,
        "relay.attrs.DensePackAttrs",
        &[
            required_nullable("units", K::Int),
            dtype("out_dtype"),
            field("weight_layout", K::Str, D::Str("NC")),
        ],
    ),
    op(
        "nn.bitserial_dense",
        DATA_WEIGHT,
        "relay.attrs.BinaryDenseAttrs",
        &[
            required_nullable("units", K::Int),
            field("data_bits", K::Int, D::Int(1)),
            field("weight_bits", K::Int, D::Int(1)),
            dtype("pack_dtype"),
            dtype("out_dtype"),
            field("unipolar", K::Bool, D::Bool(true)),
        ],
    ),
    op(
        "nn.bitpack",
        DATA,
        "relay.attrs.BitPackAttrs",
        &[
            field("bits", K::Int, D::Int(1)),
            field("pack_axis", K::Int, D::Int(1)),
            field("bit_axis", K::Int, D::Int(-1)),
            dtype("pack_type"),
            field("name", K::Str, D::Str("BitPack")),
        ],
    ),
    op(
        "nn.sparse_dense",
        SPARSE_INPUTS,
        "relay.attrs.SparseDenseAttrs",
        SPARSE_DENSE_ATTRS,
    ),
    op(
        "nn.internal.sparse_dense_padded",
        &["data", "weight_data", "weight_indices", "weight_indptr"],
        "relay.attrs.SparseDenseAttrs",
        SPARSE_DENSE_ATTRS,
    ),
    // `SparseTransposeAttrs` declares no fields.
    op(
        "nn.sparse_transpose",
        &["sparse_data", "sparse_indices", "sparse_indptr"],
        "relay.attrs.SparseTransposeAttrs",
        &[],
    ),
    plain("nn.sparse_add", SPARSE_INPUTS),
    op(
        "nn.sparse_conv2d",
        SPARSE_INPUTS,
        "relay.attrs.SparseConv2DAttrs",
        &[
            field("layout", K::Str, D::Str("NHWC")),
            field("kernel_size", K::IntArray, D::Ints(&[1, 1])),
        ],
    ),
    op(
        "nn.fifo_buffer",
        &["data", "buffer"],
        "relay.attrs.FIFOBufferAttrs",
        &[field("axis", K::Int, D::Int(0))],
    ),
];

// ----- Type relations and reference evaluation -----

/// A boolean as Relay's text writes it.
fn py_bool(b: bool) -> &'static str {
    if b { "True" } else { "False" }
}

/// Checks `units` against the weight's output dimension and returns the output dimension.
fn units_dim(attrs: &Attrs, n: Dim, weight: &Type, what: &str) -> Result<Dim, OpError> {
    match attr_opt_int(attrs, "units")? {
        Some(u) if differ(n, Dim::Known(u)) => Err(OpError::attribute(
            "units",
            format!(
                "`units`={u} does not match {what} `{weight}` with {} output units",
                dim_text(n)
            ),
        )),
        Some(u) => Ok(unify(n, Dim::Known(u))),
        None => Ok(n),
    }
}

/// `nn.dense(data[..., k], weight[units, k]) -> [..., units]`: data times weight transposed.
fn dense_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [data, weight] = inputs_n::<2>(types)?;
    let (ds, dd) = tensor_type(data, "dense data")?;
    let (ws, wd) = tensor_type(weight, "dense weight")?;
    let dtype = contraction_dtype(
        attrs,
        (data, dd, "dense data"),
        (weight, wd, "dense weight"),
    )?;
    let Some(&k) = ds.last() else {
        return Err(OpError::shape(format!(
            "dense data must have rank at least 1, got `{data}`"
        )));
    };
    let &[units, wk] = ws else {
        return Err(OpError::shape(format!(
            "dense weight must have rank 2 (units, k), got `{weight}`"
        )));
    };
    if differ(wk, k) {
        return Err(OpError::shape(format!(
            "dense weight `{weight}` does not match data `{data}`: reduction dims {} and {} differ",
            dim_text(wk),
            dim_text(k)
        )));
    }
    let mut shape = ds.to_vec();
    let last = shape.len() - 1;
    shape[last] = units_dim(attrs, units, weight, "dense weight")?;
    Ok(tensor(shape, dtype))
}

/// Operand layout for [`contract`]: element strides per batch, per output row or column, and
/// per step along the reduction.
#[derive(Clone, Copy)]
struct Operand {
    batch: usize,
    outer: usize,
    k: usize,
}

/// `out[b, i, j] = Σ_k a[b, i, k] · b[b, k, j]` over the operands' layouts.
fn contract<T: Num>(
    (a, la): (&[T], Operand),
    (b, lb): (&[T], Operand),
    [batch, m, n, k]: [usize; 4],
) -> Vec<T> {
    let mut out = Vec::with_capacity(batch * m * n);
    for bi in 0..batch {
        for i in 0..m {
            for j in 0..n {
                let mut acc = T::ZERO;
                for kk in 0..k {
                    let x = a[bi * la.batch + i * la.outer + kk * la.k];
                    let y = b[bi * lb.batch + j * lb.outer + kk * lb.k];
                    acc = acc.plus(x.times(y));
                }
                out.push(acc);
            }
        }
    }
    out
}

/// Runs [`contract`] in the number type of `dtype` and wraps the result.
fn contract_to(
    dtype: DType,
    shape: &[i64],
    (a, la): (&NDArray, Operand),
    (b, lb): (&NDArray, Operand),
    sizes: [usize; 4],
) -> Result<Value, OpError> {
    if dtype.is_float() {
        let out = contract::<f64>((&f64::read(a), la), (&f64::read(b), lb), sizes);
        f64::array(dtype, shape, &out)
    } else {
        let out = contract::<i128>((&i128::read(a), la), (&i128::read(b), lb), sizes);
        i128::array(dtype, shape, &out)
    }
}

fn dense_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, result) = checked(args, attrs, dense_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    let (x, w) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let k = x.shape().last().map_or(0, |&d| d as usize);
    let rows = count(&x.shape()[..x.ndim() - 1]);
    let units = w.shape()[0] as usize;
    let layout = Operand {
        batch: 0,
        outer: k,
        k: 1,
    };
    contract_to(dtype, &shape, (x, layout), (w, layout), [1, rows, units, k])
}

/// `nn.matmul(a, b)`: `a` is `[..., m, k]` (`[..., k, m]` with `transpose_a`) and `b` is
/// `[k, n]` (`[n, k]` with `transpose_b`); the result is `[..., m, n]`.
fn matmul_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [a, b] = inputs_n::<2>(types)?;
    let (sa, da) = tensor_type(a, "matmul tensor_a")?;
    let (sb, db) = tensor_type(b, "matmul tensor_b")?;
    let dtype = contraction_dtype(
        attrs,
        (a, da, "matmul tensor_a"),
        (b, db, "matmul tensor_b"),
    )?;
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let min_rank = if ta { 2 } else { 1 };
    if sa.len() < min_rank {
        return Err(OpError::shape(format!(
            "matmul tensor_a must have rank at least {min_rank}, got `{a}`"
        )));
    }
    let &[b0, b1] = sb else {
        return Err(OpError::shape(format!(
            "matmul tensor_b must have rank 2, got `{b}`"
        )));
    };
    let r = sa.len();
    let mut shape = sa.to_vec();
    let ka = if ta {
        shape[r - 2] = sa[r - 1];
        sa[r - 2]
    } else {
        sa[r - 1]
    };
    let (kb, n) = if tb { (b1, b0) } else { (b0, b1) };
    if differ(ka, kb) {
        return Err(OpError::shape(format!(
            "matmul reduction dims {} and {} differ: tensor_a `{a}`, tensor_b `{b}`, \
             transpose_a={}, transpose_b={}",
            dim_text(ka),
            dim_text(kb),
            py_bool(ta),
            py_bool(tb)
        )));
    }
    shape[r - 1] = units_dim(attrs, n, b, "matmul tensor_b")?;
    Ok(tensor(shape, dtype))
}

fn matmul_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, result) = checked(args, attrs, matmul_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    let (a, b) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let sa = a.shape();
    let r = sa.len();
    let dim = |i: usize| sa[i] as usize;
    let (m, k, la) = if ta {
        let (k, m) = (dim(r - 2), dim(r - 1));
        (
            m,
            k,
            Operand {
                batch: m * k,
                outer: 1,
                k: m,
            },
        )
    } else {
        let k = dim(r - 1);
        let m = if r >= 2 { dim(r - 2) } else { 1 };
        (
            m,
            k,
            Operand {
                batch: m * k,
                outer: k,
                k: 1,
            },
        )
    };
    let batch = count(&sa[..r.saturating_sub(2)]);
    let (b0, b1) = (b.shape()[0] as usize, b.shape()[1] as usize);
    let (n, lb) = if tb {
        (
            b0,
            Operand {
                batch: 0,
                outer: b1,
                k: 1,
            },
        )
    } else {
        (
            b1,
            Operand {
                batch: 0,
                outer: 1,
                k: b1,
            },
        )
    };
    contract_to(dtype, &shape, (a, la), (b, lb), [batch, m, n, k])
}

/// `nn.batch_matmul(a[b, m, k], b[b, k, n])`, with `transpose_a` reading `a` as `[b, k, m]` and
/// `transpose_b` reading `b` as `[b, n, k]`; a batch dimension of 1 broadcasts.
fn batch_matmul_rel(types: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let [a, b] = inputs_n::<2>(types)?;
    let (sa, da) = tensor_type(a, "batch_matmul tensor_a")?;
    let (sb, db) = tensor_type(b, "batch_matmul tensor_b")?;
    let dtype = contraction_dtype(
        attrs,
        (a, da, "batch_matmul tensor_a"),
        (b, db, "batch_matmul tensor_b"),
    )?;
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let &[a0, a1, a2] = sa else {
        return Err(OpError::shape(format!(
            "batch_matmul tensor_a must have rank 3, got `{a}`"
        )));
    };
    let &[b0, b1, b2] = sb else {
        return Err(OpError::shape(format!(
            "batch_matmul tensor_b must have rank 3, got `{b}`"
        )));
    };
    let (m, ka) = if ta { (a2, a1) } else { (a1, a2) };
    let (kb, n) = if tb { (b2, b1) } else { (b1, b2) };
    if differ(ka, kb) {
        return Err(OpError::shape(format!(
            "batch_matmul reduction dims {} and {} differ: tensor_a `{a}`, tensor_b `{b}`, \
             transpose_a={}, transpose_b={}",
            dim_text(ka),
            dim_text(kb),
            py_bool(ta),
            py_bool(tb)
        )));
    }
    let batch = match broadcast_shapes(&[a0], &[b0]).as_deref() {
        Some(&[d]) => d,
        _ => {
            return Err(OpError::shape(format!(
                "batch_matmul batch dims {} and {} differ and neither is 1: `{a}` and `{b}`",
                dim_text(a0),
                dim_text(b0)
            )));
        }
    };
    Ok(tensor(vec![batch, m, n], dtype))
}

fn batch_matmul_eval(args: &[Value], attrs: &Attrs) -> Result<Value, OpError> {
    let (arrays, result) = checked(args, attrs, batch_matmul_rel)?;
    let (shape, dtype) = concrete(&result, None)?;
    let (a, b) = (arg(&arrays, 0)?, arg(&arrays, 1)?);
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let d = |t: &NDArray, i: usize| t.shape()[i] as usize;
    let (a0, a1, a2) = (d(a, 0), d(a, 1), d(a, 2));
    let (b0, b1, b2) = (d(b, 0), d(b, 1), d(b, 2));
    let a_batch = if a0 == 1 { 0 } else { a1 * a2 };
    let b_batch = if b0 == 1 { 0 } else { b1 * b2 };
    let (m, k, la) = if ta {
        (
            a2,
            a1,
            Operand {
                batch: a_batch,
                outer: 1,
                k: a2,
            },
        )
    } else {
        (
            a1,
            a2,
            Operand {
                batch: a_batch,
                outer: a2,
                k: 1,
            },
        )
    };
    let (n, lb) = if tb {
        (
            b1,
            Operand {
                batch: b_batch,
                outer: b2,
                k: 1,
            },
        )
    } else {
        (
            b2,
            Operand {
                batch: b_batch,
                outer: 1,
                k: b2,
            },
        )
    };
    let batch = shape[0] as usize;
    contract_to(dtype, &shape, (a, la), (b, lb), [batch, m, n, k])
}

// ----- Compute definitions -----

/// A contraction operand in `dtype`: `t` itself, or its elements converted as the reference
/// evaluation reads them (see [`read_as`]), so that the contraction reads plain tensors of its
/// own dtype (the form the kernel compiler hands to its GEMM).
fn contraction_operand(t: &Tensor, dtype: DType) -> Tensor {
    if t.dtype == dtype {
        t.clone()
    } else {
        Tensor::compute(format!("{}_{dtype}", t.name), &t.shape, |i| {
            read_as(t.at(i), dtype)
        })
    }
}

/// `nn.dense`: `out[..., u] = Σ_k data[..., k] · weight[u, k]`.
fn dense_te(inputs: &[TeValue], _: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (x, w) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let k = x.shape.last().copied();
    let fits = matches!((k, w.shape.as_slice()), (Some(k), &[u, wk])
        if wk == k && shape.len() == x.shape.len() && shape.last() == Some(&u));
    let (true, Some(k)) = (fits, k) else {
        return Err(OpError::shape(format!(
            "nn.dense expects data [..., k] and weight [units, k] giving {shape:?}, got {:?} \
             and {:?}",
            x.shape, w.shape
        )));
    };
    let (x, w) = (contraction_operand(x, dtype), contraction_operand(w, dtype));
    let r = IterVar::new(k);
    let last = shape.len() - 1;
    compute::tensor_value(contraction("T_dense", &shape, (&x, &w), &[r], |i| {
        let mut ia = i[..last].to_vec();
        ia.push(r.expr());
        (ia, vec![i[last].clone(), r.expr()])
    }))
}

/// `nn.matmul`: `out[..., m, n] = Σ_k a[..., m, k] · b[k, n]`, with `transpose_a` reading `a`
/// as `[..., k, m]` and `transpose_b` reading `b` as `[n, k]`; a vector `a` is one row.
fn matmul_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (a, b) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let r = a.shape.len();
    let k = match (ta, r) {
        (true, 2..) => a.shape[r - 2],
        (false, 1..) => a.shape[r - 1],
        _ => -1,
    };
    let kb = match (tb, b.shape.as_slice()) {
        (true, &[_, k]) | (false, &[k, _]) => k,
        _ => -2,
    };
    if k != kb || shape.len() != r {
        return Err(OpError::shape(format!(
            "nn.matmul cannot contract {:?} with {:?} (transpose_a={ta}, transpose_b={tb})",
            a.shape, b.shape
        )));
    }
    let (a, b) = (contraction_operand(a, dtype), contraction_operand(b, dtype));
    let red = IterVar::new(k);
    compute::tensor_value(contraction("T_matmul", &shape, (&a, &b), &[red], |i| {
        let (kk, n) = (red.expr(), i[r - 1].clone());
        let mut ia = i[..r - 1].to_vec();
        if ta {
            // [..., k, m]: the output's row index `m` is last.
            let m = ia.pop().unwrap_or_else(|| ix(0));
            ia.push(kk.clone());
            ia.push(m);
        } else {
            ia.push(kk.clone());
        }
        let ib = if tb { vec![n, kk] } else { vec![kk, n] };
        (ia, ib)
    }))
}

/// `nn.batch_matmul`: `out[b, m, n] = Σ_k a[b, m, k] · b[b, k, n]` (transposes as
/// `nn.matmul`), an operand with one batch broadcasting to every batch.
fn batch_matmul_te(inputs: &[TeValue], attrs: &Attrs, out: &Type) -> Result<TeValue, OpError> {
    let (shape, dtype) = compute::static_tensor(out)?;
    let (a, b) = (compute::input(inputs, 0)?, compute::input(inputs, 1)?);
    let (ta, tb) = (
        attr_bool(attrs, "transpose_a")?,
        attr_bool(attrs, "transpose_b")?,
    );
    let (&[a0, a1, a2], &[b0, b1, b2], &[batch, _, _]) =
        (a.shape.as_slice(), b.shape.as_slice(), shape.as_slice())
    else {
        return Err(OpError::shape(format!(
            "nn.batch_matmul expects rank-3 operands and result, got {:?}, {:?} and {shape:?}",
            a.shape, b.shape
        )));
    };
    let k = if ta { a1 } else { a2 };
    let kb = if tb { b2 } else { b1 };
    let batch_ok = |d: i64| d == batch || d == 1;
    if k != kb || !batch_ok(a0) || !batch_ok(b0) {
        return Err(OpError::shape(format!(
            "nn.batch_matmul cannot contract {:?} with {:?} (transpose_a={ta}, transpose_b={tb})",
            a.shape, b.shape
        )));
    }
    let (a, b) = (contraction_operand(a, dtype), contraction_operand(b, dtype));
    let red = IterVar::new(k);
    compute::tensor_value(contraction(
        "T_batch_matmul",
        &shape,
        (&a, &b),
        &[red],
        |i| {
            let pick = |d: i64| if d == batch { i[0].clone() } else { ix(0) };
            let (m, n, kk) = (i[1].clone(), i[2].clone(), red.expr());
            let ia = if ta {
                vec![pick(a0), kk.clone(), m]
            } else {
                vec![pick(a0), m, kk.clone()]
            };
            let ib = if tb {
                vec![pick(b0), n, kk]
            } else {
                vec![pick(b0), kk, n]
            };
            (ia, ib)
        },
    ))
}

#[cfg(test)]
mod tests {

    use relay_ir::AttrValue as V;

    use super::*;

    use crate::compute::op_tests::Rng;
    use crate::nn::testing::*;
    use crate::testing::attrs;

    #[test]
    fn dense_and_matmul_relations() {
        assert_eq!(
            ok(
                "nn.dense",
                &[f32s(&[2, 3]), f32s(&[4, 3])],
                &[("units", V::Int(4))]
            ),
            "Tensor[(2, 4), float32]"
        );
        assert_eq!(
            ok(
                "nn.dense",
                &[f32s(&[5, 2, 3]), f32s(&[-1, 3])],
                &[("units", V::Int(7))]
            ),
            "Tensor[(5, 2, 7), float32]"
        );
        assert_eq!(
            ok("nn.dense", &[f32s(&[-1, -1]), f32s(&[4, 3])], &[]),
            "Tensor[(?, 4), float32]"
        );
        assert_eq!(
            err("nn.dense", &[f32s(&[2, 3]), f32s(&[4, 5])], &[]),
            "dense weight `Tensor[(4, 5), float32]` does not match data `Tensor[(2, 3), float32]`: \
             reduction dims 5 and 3 differ"
        );
        assert_eq!(
            err(
                "nn.dense",
                &[f32s(&[2, 3]), f32s(&[4, 3])],
                &[("units", V::Int(5))]
            ),
            "`units`=5 does not match dense weight `Tensor[(4, 3), float32]` with 4 output units"
        );
        assert_eq!(
            err("nn.dense", &[f32s(&[2, 3]), f32s(&[4, 3, 1])], &[]),
            "dense weight must have rank 2 (units, k), got `Tensor[(4, 3, 1), float32]`"
        );
        assert_eq!(
            ok(
                "nn.dense",
                &[ty(&[2, 3], "int8"), ty(&[4, 3], "int8")],
                &[("out_dtype", s("int32"))]
            ),
            "Tensor[(2, 4), int32]"
        );

        let matmul = |a: &[i64], b: &[i64], ta: bool, tb: bool| {
            rel(
                "nn.matmul",
                &[f32s(a), f32s(b)],
                &[("transpose_a", V::Bool(ta)), ("transpose_b", V::Bool(tb))],
            )
        };
        assert_eq!(
            matmul(&[2, 3], &[3, 4], false, false).unwrap(),
            "Tensor[(2, 4), float32]"
        );
        assert_eq!(
            matmul(&[3, 2], &[3, 4], true, false).unwrap(),
            "Tensor[(2, 4), float32]"
        );
        assert_eq!(
            matmul(&[2, 3], &[4, 3], false, true).unwrap(),
            "Tensor[(2, 4), float32]"
        );
        assert_eq!(
            matmul(&[3, 2], &[4, 3], true, true).unwrap(),
            "Tensor[(2, 4), float32]"
        );
        assert!(
            matmul(&[2, 3], &[4, 3], false, false)
                .unwrap_err()
                .starts_with("matmul reduction dims 3 and 4 differ")
        );

        let bmm = |a: &[i64], b: &[i64], ta: bool, tb: bool| {
            rel(
                "nn.batch_matmul",
                &[f32s(a), f32s(b)],
                &[("transpose_a", V::Bool(ta)), ("transpose_b", V::Bool(tb))],
            )
        };
        assert_eq!(
            bmm(&[2, 3, 4], &[2, 5, 4], false, true).unwrap(),
            "Tensor[(2, 3, 5), float32]"
        );
        assert_eq!(
            bmm(&[1, 3, 4], &[6, 4, 5], false, false).unwrap(),
            "Tensor[(6, 3, 5), float32]"
        );
        assert_eq!(
            bmm(&[6, 4, 3], &[1, 4, 5], true, false).unwrap(),
            "Tensor[(6, 3, 5), float32]"
        );
        assert_eq!(
            bmm(&[-1, 3, 4], &[2, 5, 4], false, true).unwrap(),
            "Tensor[(2, 3, 5), float32]"
        );
        assert_eq!(
            bmm(&[2, 3, 4], &[3, 5, 4], false, true).unwrap_err(),
            "batch_matmul batch dims 2 and 3 differ and neither is 1: `Tensor[(2, 3, 4), float32]` \
             and `Tensor[(3, 5, 4), float32]`"
        );
        assert!(
            bmm(&[2, 3, 4], &[2, 5, 4], false, false)
                .unwrap_err()
                .starts_with("batch_matmul reduction dims 4 and 5 differ")
        );
        assert!(
            bmm(&[3, 4], &[2, 5, 4], false, true)
                .unwrap_err()
                .contains("rank 3")
        );
    }

    #[test]
    fn dense_and_matmul_evaluation() {
        let x = t(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        let w = t(&[2, 3], &[1., 0., 0., 0., 1., 1.]);
        assert_eq!(
            run("nn.dense", &[x.clone(), w.clone()], &[("units", V::Int(2))]),
            (vec![2, 2], vec![1., 5., 4., 11.])
        );
        let xi = t_of("int8", &[1, 3], &[100., 100., 100.]);
        let wi = t_of("int8", &[1, 3], &[100., 100., 100.]);
        let v = eval("nn.dense", &[xi, wi], &[("out_dtype", s("int32"))]).unwrap();
        assert_eq!(v.as_tensor().unwrap().to_i128_vec(), [30000]);

        // matmul with each transpose combination computes x · y for x = [[1, 2], [3, 4]] and
        // y = [[5, 6], [7, 8]].
        let a = [1., 2., 3., 4.];
        let at = [1., 3., 2., 4.];
        let b = [5., 6., 7., 8.];
        let bt = [5., 7., 6., 8.];
        for (ta, tb, av, bv) in [
            (false, false, a, b),
            (true, false, at, b),
            (false, true, a, bt),
            (true, true, at, bt),
        ] {
            let out = run(
                "nn.matmul",
                &[t(&[2, 2], &av), t(&[2, 2], &bv)],
                &[("transpose_a", V::Bool(ta)), ("transpose_b", V::Bool(tb))],
            );
            assert_eq!(out, (vec![2, 2], vec![19., 22., 43., 50.]), "{ta} {tb}");
        }
        // batch_matmul broadcasts a batch of 1.
        let left = t(&[1, 2, 2], &a);
        let right = t(&[2, 2, 2], &[5., 7., 6., 8., 1., 0., 0., 1.]);
        assert_eq!(
            run(
                "nn.batch_matmul",
                &[left.clone(), right],
                &[("transpose_b", V::Bool(true))]
            ),
            (vec![2, 2, 2], vec![19., 22., 43., 50., 1., 2., 3., 4.])
        );
        let right = t(&[1, 2, 2], &b);
        assert_eq!(
            run(
                "nn.batch_matmul",
                &[t(&[1, 2, 2], &at), right],
                &[("transpose_a", V::Bool(true))]
            )
            .1,
            [19., 22., 43., 50.]
        );
        assert!(eval("nn.dense", &[x, t(&[2, 2], &a)], &[]).is_err());
    }

    #[test]
    fn dense_matmul_batch_matmul_compute() {
        let mut rng = Rng(0x5eed_0001);
        for (dtype, out) in contraction_dtypes() {
            let od = out_dtype(out);
            let result = out.unwrap_or(dtype);
            let accepted = dtype != DType::BOOL;
            for (data, units) in [
                (&[2, 3][..], 4),
                (&[3], 1),
                (&[1, 1], 1),
                (&[2, 1, 5], 3),
                (&[0, 3], 2),
                (&[2, 0], 3),
                (&[2, 3], 0),
            ] {
                let k = *data.last().unwrap();
                let x = operand(&mut rng, dtype, result, data, true);
                let w = operand(&mut rng, dtype, result, &[units, k], true);
                for set in [
                    vec![("out_dtype", od.clone())],
                    vec![("out_dtype", od.clone()), ("units", V::Int(units))],
                ] {
                    let a = attrs("nn.dense", &set);
                    let ok = verify("nn.dense", &[x.clone(), w.clone()], &a, close);
                    assert_eq!(ok, accepted, "nn.dense {dtype} {data:?}");
                }
            }
            for (a_shape, b_shape, ta, tb) in [
                (&[2, 3][..], &[3, 4][..], false, false),
                (&[2, 3], &[4, 3], false, true),
                (&[3, 2], &[3, 4], true, false),
                (&[3, 2], &[4, 3], true, true),
                (&[3], &[3, 2], false, false),
                (&[2, 1, 3], &[3, 1], false, false),
                (&[2, 3, 3, 2], &[5, 3], true, true),
                (&[0, 2], &[2, 3], false, false),
                (&[2, 0], &[0, 3], false, false),
            ] {
                let a = operand(&mut rng, dtype, result, a_shape, true);
                let b = operand(&mut rng, dtype, result, b_shape, true);
                let set = attrs(
                    "nn.matmul",
                    &[
                        ("out_dtype", od.clone()),
                        ("transpose_a", V::Bool(ta)),
                        ("transpose_b", V::Bool(tb)),
                    ],
                );
                let ok = verify("nn.matmul", &[a, b], &set, close);
                assert_eq!(ok, accepted, "nn.matmul {dtype} {a_shape:?} {b_shape:?}");
            }
            for (a_shape, b_shape, ta, tb) in [
                (&[2, 2, 3][..], &[2, 3, 4][..], false, false),
                (&[1, 2, 3], &[3, 4, 3], false, true),
                (&[3, 3, 2], &[1, 3, 4], true, false),
                (&[2, 3, 2], &[2, 4, 3], true, true),
                (&[1, 1, 1], &[1, 1, 1], false, false),
                (&[0, 2, 3], &[1, 3, 2], false, false),
                (&[2, 2, 0], &[2, 0, 3], false, false),
            ] {
                let a = operand(&mut rng, dtype, result, a_shape, true);
                let b = operand(&mut rng, dtype, result, b_shape, true);
                let set = attrs(
                    "nn.batch_matmul",
                    &[
                        ("out_dtype", od.clone()),
                        ("transpose_a", V::Bool(ta)),
                        ("transpose_b", V::Bool(tb)),
                    ],
                );
                let ok = verify("nn.batch_matmul", &[a, b], &set, close);
                assert_eq!(
                    ok, accepted,
                    "nn.batch_matmul {dtype} {a_shape:?} {b_shape:?}"
                );
            }
        }
    }

    #[test]
    fn floats_contracted_in_integers_wrap_as_the_reference_reads_them() {
        // Large, infinite and NaN floats contracted in an integer dtype: truncated into i128
        // (saturating), then wrapped — not saturated at the integer dtype's range.
        let values = [
            1e30,
            -1e30,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            3e38,
            -3e38,
            1.8446744073709552e19,
            9.3e18,
            -9.3e18,
            300.7,
            -129.5,
            4294967296.0 * 3.0 + 5.0,
        ];
        for dtype in [DType::F32, DType::F64] {
            for out in [
                DType::I8,
                DType::U8,
                DType::I32,
                DType::U32,
                DType::I64,
                DType::U64,
            ] {
                let n = values.len() as i64;
                let x = NDArray::from_f64_slice(dtype, &[n, 1], &values).unwrap();
                let one = NDArray::from_f64_slice(dtype, &[1, 1], &[1.0]).unwrap();
                let a = attrs("nn.dense", &[("out_dtype", s(&out.to_string()))]);
                assert!(verify("nn.dense", &[x, one], &a, exact), "{dtype} -> {out}");
            }
        }
    }
}
