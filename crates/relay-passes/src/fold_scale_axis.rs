//! `fold_scale_axis`: TVM's `BackwardFoldScaleAxis` for convolutions (ONNX Runtime's
//! `ConvMulFusion` and `ConvBNFusion`) — a constant scale per output channel applied to a
//! convolution's result moves into its weight, which is constant too:
//!
//! ```text
//! multiply(nn.conv2d(%x, W, ...), S)  ==>  nn.conv2d(%x, multiply(W, reshape(S, newshape=[-1, 1, 1, 1])), ...)
//! ```
//!
//! (either operand order), where the convolution is NCHW/OIHW with a static floating-point
//! result `[N, O, H, W]`, `W` and `S` are constant expressions (constants, and operators of
//! constants: `fold_constant` makes the new weight one constant), and `S` varies along the
//! channels only (`[O, 1, 1]`, `[1, O, 1, 1]`, one element). That is a batch norm after
//! `simplify_inference`, or a scale TVM's importer wrote: the kernel then computes the
//! convolution with the scaled weight and never multiplies its results. The products round
//! differently (`x · (w · s)` for `(x · w) · s`), within the tolerance of a convolution.
//!
//! The convolution may be nested in the multiply, or bound by a `let` (or a graph binding)
//! and read nowhere else than by a multiply among the calls of a later binding of the same
//! block or its body; its binding is then dropped. A convolution read twice, or whose only
//! reader is in a branch or a function (which may run other than once), stays. Primitive
//! functions are not entered. Statistics: `scales folded`.

use std::collections::{HashMap, HashSet};

use relay_ir::visit::{for_each_child, is_primitive, map_children};
use relay_ir::{
    Binding, DType, Expr, ExprKind, Module, Span, TypeKind, VarId, ensure_sufficient_stack,
};

use crate::util::{op_call, reshape, shape, str_attr};
use crate::{Pass, PassContext, PassError};

/// The `fold_scale_axis` pass.
pub struct FoldScaleAxis;

impl Pass for FoldScaleAxis {
    fn name(&self) -> &'static str {
        "fold_scale_axis"
    }

    fn description(&self) -> &'static str {
        "a constant per-channel scale of a convolution's result folded into its weight"
    }

    fn opt_level(&self) -> u32 {
        2
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let mut folded = 0;
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            let mut f = Fold {
                reads: Reads::of(&g.func.body),
                consts: HashSet::new(),
                convs: HashMap::new(),
                dropped: HashSet::new(),
                folded: 0,
            };
            g.func.body = f.expr(&g.func.body);
            folded += f.folded;
        }
        cx.stat("scales folded", folded);
        Ok(module)
    }
}

/// How often each variable and each call node is read in a function body.
#[derive(Default)]
struct Reads {
    vars: HashMap<VarId, usize>,
    calls: HashMap<*const (), usize>,
}

impl Reads {
    fn of(body: &Expr) -> Reads {
        let mut reads = Reads::default();
        reads.count(body);
        reads
    }

    fn count(&mut self, e: &Expr) {
        ensure_sufficient_stack(|| {
            match e.kind() {
                ExprKind::Var(v) => *self.vars.entry(v.id()).or_default() += 1,
                ExprKind::Call { .. } => {
                    let seen = self.calls.entry(node(e)).or_default();
                    *seen += 1;
                    if *seen > 1 {
                        return; // a shared node's children were counted at its first read
                    }
                }
                _ => {}
            }
            for_each_child(e, |c| self.count(c));
        })
    }

    /// Whether the call node `e` is read once.
    fn single_call(&self, e: &Expr) -> bool {
        self.calls.get(&node(e)) == Some(&1)
    }
}

/// A node's identity.
fn node(e: &Expr) -> *const () {
    std::ptr::from_ref::<relay_ir::ExprNode>(e).cast()
}

/// The walk: the convolutions bound in the current `let` block and read once, which a
/// multiply among the calls of its later bindings (or its body) may take; the bindings
/// folded away.
struct Fold {
    reads: Reads,
    /// Variables bound to constant expressions.
    consts: HashSet<VarId>,
    convs: HashMap<VarId, Expr>,
    dropped: HashSet<VarId>,
    folded: i64,
}

impl Fold {
    fn expr(&mut self, e: &Expr) -> Expr {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => e.clone(),
            ExprKind::Let { bindings, body } => {
                // Run once where it is: it may read the enclosing blocks' convolutions.
                let outer = self.convs.clone();
                let block = self.block(bindings, body, e.span());
                self.convs = outer;
                block
            }
            ExprKind::Call { .. } => {
                let call = map_children(e, |c| self.expr(c));
                self.fold(&call).unwrap_or(call)
            }
            ExprKind::Tuple(_) | ExprKind::Proj { .. } => map_children(e, |c| self.expr(c)),
            // A branch or a function may run other than once: it takes no binding.
            _ => {
                let outer = std::mem::take(&mut self.convs);
                let inner = map_children(e, |c| self.expr(c));
                self.convs = outer;
                inner
            }
        })
    }

    /// A `let` block with its convolutions folded into the multiplies that read them.
    fn block(&mut self, bindings: &[Binding], body: &Expr, span: Span) -> Expr {
        let mut out: Vec<Binding> = Vec::with_capacity(bindings.len());
        for b in bindings {
            let value = self.expr(&b.value);
            if self.constant(&value) {
                self.consts.insert(b.var.id());
            }
            if self.reads.vars.get(&b.var.id()) == Some(&1) && self.conv(&value).is_some() {
                self.convs.insert(b.var.id(), value.clone());
            }
            out.push(Binding { value, ..b.clone() });
        }
        let body = self.expr(body);
        out.retain(|b| !self.dropped.contains(&b.var.id()));
        if out.is_empty() {
            return body;
        }
        Expr::new(
            ExprKind::Let {
                bindings: out,
                body,
            },
            span,
        )
    }

    /// `e` folded, if it is a multiply of a convolution (nested and read once, or a variable
    /// of the block's, whose binding is then dropped) by a scale along its channels.
    fn fold(&mut self, e: &Expr) -> Option<Expr> {
        let (op, args, _) = e.op_call()?;
        if op.name != "multiply" || args.len() != 2 {
            return None;
        }
        (0..2).find_map(|i| {
            let (operand, scale) = (&args[i], &args[1 - i]);
            let (c, var) = match operand.kind() {
                ExprKind::Var(v) => (self.convs.get(&v.id())?.clone(), Some(v.id())),
                _ if self.reads.single_call(operand) => (operand.clone(), None),
                _ => return None,
            };
            let folded = self.scaled(&c, scale)?;
            self.dropped.extend(var);
            self.folded += 1;
            Some(folded)
        })
    }

    /// The convolution `c` with its weight multiplied by `scale`, if `scale` is a constant
    /// expression along the channels of `c`'s result.
    fn scaled(&self, c: &Expr, scale: &Expr) -> Option<Expr> {
        let (out, dtype) = self.conv(c)?;
        let (scale_shape, scale_dtype) = tensor(scale)?;
        if scale_dtype != dtype || scale_shape.len() > out.len() || !self.constant(scale) {
            return None;
        }
        // Aligned from the right with the result's `[N, O, H, W]`: 1 everywhere, or `O` on `O`.
        let skip = out.len() - scale_shape.len();
        let along_channels = scale_shape
            .iter()
            .enumerate()
            .all(|(i, &d)| d == 1 || (i + skip == 1 && d == out[1]));
        if !along_channels {
            return None;
        }
        let (_, args, attrs) = c.op_call()?;
        let span = c.span();
        let column = reshape(scale, &[-1, 1, 1, 1], span)?;
        let weight = op_call("multiply", vec![args[1].clone(), column], &[], span)?;
        Some(Expr::new(
            ExprKind::Call {
                callee: match c.kind() {
                    ExprKind::Call { callee, .. } => callee.clone(),
                    _ => return None,
                },
                args: vec![args[0].clone(), weight],
                attrs: attrs.clone(),
            },
            span,
        ))
    }

    /// The result shape and dtype of `e` if it is a convolution this pass folds into: NCHW data,
    /// an OIHW constant weight, a static `float32` or `float64` result in NCHW.
    fn conv(&self, e: &Expr) -> Option<(Vec<i64>, DType)> {
        let (op, args, attrs) = e.op_call()?;
        if op.name != "nn.conv2d" || args.len() != 2 || !self.constant(&args[1]) {
            return None;
        }
        let layouts = [
            ("data_layout", "NCHW"),
            ("kernel_layout", "OIHW"),
            ("out_layout", "NCHW"),
        ];
        let nchw = layouts.iter().all(|(name, want)| {
            str_attr(attrs, name).is_none_or(|given| given.is_empty() || given == *want)
        });
        let (out, dtype) = tensor(e)?;
        let float = matches!(dtype, DType::F32 | DType::F64);
        (nchw && float && out.len() == 4 && shape(&args[1])?.len() == 4).then_some((out, dtype))
    }

    /// Whether `e` is a constant expression: constants, variables bound to constant
    /// expressions, and operators applied to constant expressions.
    fn constant(&self, e: &Expr) -> bool {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Constant(_) => true,
            ExprKind::Var(v) => self.consts.contains(&v.id()),
            ExprKind::Tuple(fields) => fields.iter().all(|f| self.constant(f)),
            ExprKind::Call { callee, args, .. } => {
                matches!(callee.kind(), ExprKind::Op(_)) && args.iter().all(|a| self.constant(a))
            }
            _ => false,
        })
    }
}

/// The static shape and dtype of `e`'s tensor type.
fn tensor(e: &Expr) -> Option<(Vec<i64>, DType)> {
    match e.checked_type()?.kind() {
        TypeKind::Tensor { shape, dtype } => Some((relay_ops::support::known(shape)?, *dtype)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{parse_checked, printed, run_passes};

    /// A module whose `@f` binds the convolution `conv` of its parameter `%x` (`[1, 3, 5, 5]`;
    /// `%v`, `[4, 3, 3, 3]`, a weight that is not a constant) to `%c` and returns `body`, and
    /// whose `@main` calls it on data built from constants.
    fn program(conv: &str, body: &str) -> String {
        format!(
            r#"#[version = "0.0.5"]
def @f(%x: Tensor[(1, 3, 5, 5), float32], %v: Tensor[(4, 3, 3, 3), float32]) {{
  let %c = {conv};
  {body}
}}
def @main() {{
  @f(reshape(sin(arange(0f, 75f, 1f, dtype="float32")), newshape=[1, 3, 5, 5]), {WEIGHT})
}}
"#
        )
    }

    /// The program folded (printed) and the statistic, after checking that its result is
    /// the unfolded one's within a convolution's tolerance.
    fn folded(text: &str) -> (String, i64) {
        let m = parse_checked(text);
        let before = relay_interp::run(&m, "main", vec![], &Default::default()).expect("runs");
        let (after, stats) = run_passes(vec![&FoldScaleAxis], 2, m, true);
        let got = relay_interp::run(&after, "main", vec![], &Default::default()).expect("runs");
        let (a, b) = (before.tensor_leaves(), got.tensor_leaves());
        assert_eq!(a.len(), b.len());
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(x.shape(), y.shape());
            for (p, q) in x.to_f64_vec().iter().zip(y.to_f64_vec()) {
                assert!((p - q).abs() <= 1e-5 + 1e-4 * p.abs(), "{p} vs {q}\n{text}");
            }
        }
        let n = stats
            .iter()
            .find(|(k, _)| k == "scales folded")
            .map_or(0, |s| s.1);
        (printed(&after), n)
    }

    const CONV: &str = "nn.conv2d(%x, %v, padding=[1, 1, 1, 1], channels=4, kernel_size=[3, 3])";
    const WEIGHT: &str =
        "cos(reshape(arange(0f, 108f, 1f, dtype=\"float32\"), newshape=[4, 3, 3, 3]))";

    #[test]
    fn a_bound_convolution_read_once_takes_its_channel_scale() {
        let conv = CONV.replace("%v", WEIGHT);
        for scale in [
            "reshape(arange(1f, 5f, 1f, dtype=\"float32\"), newshape=[4, 1, 1])",
            "reshape(arange(1f, 5f, 1f, dtype=\"float32\"), newshape=[1, 4, 1, 1])",
            "2f",
        ] {
            for product in [
                format!("multiply(%c, {scale})"),
                format!("multiply({scale}, %c)"),
            ] {
                let (out, n) = folded(&program(&conv, &format!("add({product}, 1f)")));
                assert_eq!(n, 1, "{out}");
                assert!(!out.contains("let %c"), "the binding is dropped:\n{out}");
            }
        }
    }

    #[test]
    fn a_depthwise_convolution_takes_its_channel_scale() {
        let weight = "cos(reshape(arange(0f, 27f, 1f, dtype=\"float32\"), newshape=[3, 1, 3, 3]))";
        let conv = format!("nn.conv2d(%x, {weight}, groups=3, channels=3, kernel_size=[3, 3])");
        let scale = "reshape(arange(1f, 4f, 1f, dtype=\"float32\"), newshape=[3, 1, 1])";
        let (out, n) = folded(&program(&conv, &format!("multiply(%c, {scale})")));
        assert_eq!(n, 1, "{out}");
    }

    #[test]
    fn a_nested_convolution_is_folded() {
        let conv = CONV.replace("%v", WEIGHT);
        let scale = "reshape(arange(1f, 5f, 1f, dtype=\"float32\"), newshape=[4, 1, 1])";
        let text = program("0f", &format!("multiply({conv}, {scale})"));
        assert_eq!(folded(&text).1, 1);
    }

    #[test]
    fn what_is_not_a_constant_channel_scale_of_a_convolution_read_once_stays() {
        let conv = CONV.replace("%v", WEIGHT);
        let scale = "reshape(arange(1f, 5f, 1f, dtype=\"float32\"), newshape=[4, 1, 1])";
        let cases = [
            // read twice
            (conv.clone(), format!("(multiply(%c, {scale}), %c)")),
            // a scale read from a variable
            (conv.clone(), "multiply(%c, sum(%x))".into()),
            // a scale along the width
            (
                conv.clone(),
                "multiply(%c, arange(1f, 6f, 1f, dtype=\"float32\"))".into(),
            ),
            // a weight that is not constant
            (CONV.into(), format!("multiply(%c, {scale})")),
            // the only reader nested in a branch
            (
                conv.clone(),
                format!(
                    "if (True) {{ multiply(%c, {scale}) }} else {{ zeros(shape=[1, 4, 5, 5], dtype=\"float32\") }}"
                ),
            ),
        ];
        for (conv, body) in cases {
            let (out, n) = folded(&program(&conv, &body));
            assert_eq!(n, 0, "{out}");
        }
    }
}
