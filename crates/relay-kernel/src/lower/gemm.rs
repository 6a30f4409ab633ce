//! Contractions computed by the host GEMM: the axes of a contraction merged into matrix
//! dimensions and strides, the rest looped around one GEMM call.

use super::*;
use crate::analysis::epilogue::StageEpilogue;
use crate::loops::GemmEpilogue;
use relay_linalg::gemm::epilogue::MAX_STEPS;

/// One axis of a contraction with its strides in `a`, `b`, `c` and the operands of the
/// epilogue's steps.
#[derive(Clone, Copy, Debug)]
pub(super) struct GemmAxis {
    pub(super) extent: i64,
    pub(super) sa: i64,
    pub(super) sb: i64,
    pub(super) sc: i64,
    pub(super) se: [i64; MAX_STEPS],
}

/// The keys under which the axes of `c`'s rows (`sa`) or columns (`sb`) merge: their
/// operand's, `c`'s and each epilogue operand's strides.
const C_KEYS: [fn(&GemmAxis) -> i64; 2 + MAX_STEPS] = [
    |a| a.sa,
    |a| a.sc,
    |a| a.se[0],
    |a| a.se[1],
    |a| a.se[2],
    |a| a.se[3],
];

/// Splits `axes` (outermost first) into the longest innermost run whose strides merge into
/// one matrix dimension under each of `keys` (each axis's stride is the next inner one's
/// times its extent), returned as (extent, innermost axis), and the outer rest.
pub(super) fn merge(
    axes: &[GemmAxis],
    keys: &[fn(&GemmAxis) -> i64],
) -> (Option<(i64, GemmAxis)>, Vec<GemmAxis>) {
    let Some(&inner) = axes.last() else {
        return (None, Vec::new());
    };
    let mut start = axes.len() - 1;
    let mut extent = inner.extent;
    while start > 0 {
        let (outer, next) = (axes[start - 1], axes[start]);
        let fits = keys
            .iter()
            .all(|k| Some(k(&outer)) == k(&next).checked_mul(next.extent));
        match (fits, extent.checked_mul(outer.extent)) {
            (true, Some(e)) => {
                extent = e;
                start -= 1;
            }
            _ => break,
        }
    }
    (Some((extent, inner)), axes[..start].to_vec())
}

impl Nest<'_> {
    /// The statements computing the contraction `t` into buffer `id` with the host's GEMM:
    /// the output axes only `a` reads are the rows, those only `b` reads the columns, the
    /// reduction axes the inner dimension; other output axes (read by both, by neither, or
    /// not merging into the matrix dimensions) become loops around the call. `epilogue`, if
    /// any, is applied by the host to each tile.
    pub(super) fn gemm(
        &mut self,
        id: BufferId,
        t: &Tensor,
        c: &Contraction,
        epilogue: Option<&StageEpilogue>,
    ) -> Result<Stmt, Fail> {
        let shape = &t.shape;
        if shape.contains(&0) {
            return Ok(Stmt::Seq(Vec::new()));
        }
        // An im2col of a kernel input not materialized: read as an image window.
        let mut window = None;
        for (side, (tensor, _)) in [&c.a, &c.b].into_iter().enumerate() {
            let unbuffered = matches!(tensor.op, TensorOp::Compute { .. })
                && !self.buffers.contains_key(&key(tensor))
                && input_view(tensor, self.inputs).is_none();
            if unbuffered {
                let w = conv_window(tensor, self.inputs)
                    .ok_or_else(|| format!("`{}` is not materialized", tensor.name))?;
                window = Some((side, w));
            }
        }
        // Each operand's buffer, and where its matrix starts in it (a view of an input).
        let operand = |(tensor, _): &(Tensor, Vec<Index>)| -> Result<(usize, i64), String> {
            match tensor.op {
                TensorOp::Placeholder(i) => Ok((i, 0)),
                TensorOp::Compute { .. } => match self.buffers.get(&key(tensor)) {
                    Some(&b) => Ok((b, 0)),
                    None => input_view(tensor, self.inputs)
                        .or_else(|| conv_window(tensor, self.inputs).map(|w| (w.data, 0)))
                        .ok_or_else(|| format!("`{}` is not materialized", tensor.name)),
                },
            }
        };
        let ((abuf, aoff), (bbuf, boff)) = (operand(&c.a)?, operand(&c.b)?);
        // The window's operand: its matrix strides are the im2col's, its offsets the image's.
        let col_fail = |side: usize| Fail::Materialize([&c.a, &c.b][side].0.clone());
        let image_stride = |side: usize, s: i64| -> Result<i64, Fail> {
            match window {
                Some((w, cw)) if w == side => cw.image_stride(s).ok_or_else(|| col_fail(side)),
                _ => Ok(s),
            }
        };
        let (ast, bst) = (strides(&c.a.0.shape), strides(&c.b.0.shape));
        let konst = |ix: &[Index], st: &[i64]| -> i64 {
            ix.iter()
                .zip(st)
                .map(|(i, s)| match i {
                    Index::Const(v) => v * s,
                    _ => 0,
                })
                .sum()
        };
        if let Some((side, _)) = window
            && konst(&[&c.a, &c.b][side].1, [&ast, &bst][side]) != 0
        {
            return Err(col_fail(side));
        }
        let [rows, cols, mut batch, inner] = classify(c, shape, epilogue);
        let (m, rest) = merge(&rows, &C_KEYS);
        batch.extend(rest);
        let mut col_keys = C_KEYS;
        col_keys[0] = |a| a.sb;
        let (n, rest) = merge(&cols, &col_keys);
        batch.extend(rest);
        let k = if inner.iter().any(|a| a.extent == 0) {
            Some((
                0,
                GemmAxis {
                    extent: 0,
                    sa: 0,
                    sb: 0,
                    sc: 0,
                    se: [0; MAX_STEPS],
                },
            ))
        } else {
            let (k, rest) = merge(&inner, &[|a| a.sa, |a| a.sb]);
            if !rest.is_empty() {
                return Err(Fail::Error(
                    "the reduction axes do not merge into one".into(),
                ));
            }
            k
        };
        let one = GemmAxis {
            extent: 1,
            sa: 0,
            sb: 0,
            sc: 0,
            se: [0; MAX_STEPS],
        };
        let (m, mi) = m.unwrap_or((1, one));
        let (n, ni) = n.unwrap_or((1, one));
        let (k, ki) = k.unwrap_or((1, one));
        // The loops over the batch axes, and the offsets they give each matrix.
        let mut offsets = [
            vec![LExpr::Int((konst(&c.a.1, &ast) + aoff).into(), DType::I64)],
            vec![LExpr::Int((konst(&c.b.1, &bst) + boff).into(), DType::I64)],
            vec![],
        ];
        let mut counters = Vec::new();
        let mut epilogue_counters = Vec::new();
        for (g, axis) in batch.iter().enumerate() {
            let counter = self.local(format!("b{g}"), DType::I64);
            counters.push((counter, axis.extent));
            epilogue_counters.push((counter, axis.se));
            let (sa, sb) = (image_stride(0, axis.sa)?, image_stride(1, axis.sb)?);
            for (o, s) in offsets.iter_mut().zip([sa, sb, axis.sc]) {
                if s != 0 {
                    o.push(bin(
                        BinaryOp::Mul,
                        LExpr::Local(counter),
                        LExpr::Int(s.into(), DType::I64),
                    ));
                }
            }
        }
        let [oa, ob, oc] = offsets.map(|parts| {
            parts
                .into_iter()
                .filter(|e| !matches!(e, LExpr::Int(0, _)))
                .reduce(|x, y| bin(BinaryOp::Add, x, y))
                .unwrap_or(LExpr::Int(0, DType::I64))
        });
        let gemm = Gemm {
            m,
            n,
            k,
            a: MatrixRef {
                buffer: BufferId(abuf as u32),
                offset: oa,
                row_stride: mi.sa,
                col_stride: ki.sa,
            },
            b: MatrixRef {
                buffer: BufferId(bbuf as u32),
                offset: ob,
                row_stride: ki.sb,
                col_stride: ni.sb,
            },
            c: MatrixRef {
                buffer: id,
                offset: oc,
                row_stride: mi.sc,
                col_stride: ni.sc,
            },
            window: None,
            epilogue: epilogue.map_or(GemmEpilogue::NONE, |e| {
                e.gemm(&epilogue_counters, &mi.se, &ni.se)
            }),
        };
        let transposed = transposes(&gemm);
        let mut gemm = row_major(gemm);
        if let Some((side, cw)) = window {
            // The window must end up as `b`, the `[C·KH·KW, OH·OW]` matrix of one image.
            let w = cw.window;
            let fits = (side == 1) != transposed
                && gemm.b.row_stride == w.out_h * w.out_w
                && gemm.b.col_stride == 1
                && Some(gemm.k) == w.depth()
                && Some(gemm.n) == w.pixels();
            if !fits {
                return Err(col_fail(side));
            }
            gemm.window = Some(w);
        }
        let mut stmt = Stmt::Gemm(Box::new(gemm));
        for (counter, extent) in counters.into_iter().rev() {
            stmt = Stmt::For {
                var: counter,
                extent,
                kind: ForKind::Serial,
                body: Box::new(stmt),
            };
        }
        Ok(stmt)
    }
}

/// The axes of contraction `c` with output `shape` (extent-1 axes left out), each with its
/// strides (in the operands of `epilogue`'s steps too): rows (output axes only `a` reads),
/// columns (only `b` reads), batch (both or neither), and the reduction axes — rows, columns
/// and reduction axes outermost first.
fn classify(
    c: &Contraction,
    shape: &[i64],
    epilogue: Option<&StageEpilogue>,
) -> [Vec<GemmAxis>; 4] {
    let (ast, bst, cst) = (strides(&c.a.0.shape), strides(&c.b.0.shape), strides(shape));
    let stride = |ix: &[Index], st: &[i64], want: Index| -> i64 {
        ix.iter().position(|&i| i == want).map_or(0, |d| st[d])
    };
    let (mut rows, mut cols, mut batch, mut inner) = (vec![], vec![], vec![], vec![]);
    for (k, &extent) in shape.iter().enumerate() {
        if extent == 1 {
            continue;
        }
        let mut se = [0; MAX_STEPS];
        for (s, (_, x)) in se.iter_mut().zip(epilogue.map_or(&[][..], |e| &e.steps)) {
            *s = x.coef[k];
        }
        let axis = GemmAxis {
            extent,
            sa: stride(&c.a.1, &ast, Index::Out(k)),
            sb: stride(&c.b.1, &bst, Index::Out(k)),
            sc: cst[k],
            se,
        };
        let (in_a, in_b) = (
            c.a.1.contains(&Index::Out(k)),
            c.b.1.contains(&Index::Out(k)),
        );
        match (in_a, in_b) {
            (true, false) => rows.push(axis),
            (false, true) => cols.push(axis),
            _ => batch.push(axis),
        }
    }
    for (j, &extent) in c.red_extents.iter().enumerate() {
        if extent != 1 {
            inner.push(GemmAxis {
                extent,
                sa: stride(&c.a.1, &ast, Index::Red(j)),
                sb: stride(&c.b.1, &bst, Index::Red(j)),
                sc: 0,
                se: [0; MAX_STEPS],
            });
        }
    }
    rows.sort_by_key(|a| std::cmp::Reverse(a.sc));
    cols.sort_by_key(|a| std::cmp::Reverse(a.sc));
    inner.sort_by_key(|a| std::cmp::Reverse(a.sa));
    [rows, cols, batch, inner]
}

/// The GEMM is fastest writing rows of `c` contiguously: a column-major result is computed as
/// the transposed product `c^T = b^T a^T`.
fn row_major(gemm: Gemm) -> Gemm {
    if !transposes(&gemm) {
        return gemm;
    }
    let t = |m: MatrixRef| MatrixRef {
        row_stride: m.col_stride,
        col_stride: m.row_stride,
        ..m
    };
    Gemm {
        m: gemm.n,
        n: gemm.m,
        k: gemm.k,
        a: t(gemm.b),
        b: t(gemm.a),
        c: t(gemm.c),
        window: None,
        epilogue: GemmEpilogue {
            steps: gemm
                .epilogue
                .steps
                .into_iter()
                .map(|(k, m)| (k, t(m)))
                .collect(),
            ..gemm.epilogue
        },
    }
}

/// Whether [`row_major`] transposes `gemm`.
fn transposes(gemm: &Gemm) -> bool {
    gemm.c.row_stride < gemm.c.col_stride && gemm.m > 1
}
