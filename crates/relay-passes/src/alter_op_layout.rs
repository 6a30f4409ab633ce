//! `alter_op_layout`: TVM's `AlterOpLayout` for x86 (ONNX Runtime's NCHWc transformer) —
//! convolutions and what follows them move to the blocked layout `NCHW{B}c`, `B` the option
//! `block` (8 for AVX2, 16 for AVX-512; `-1`: the compiler sets it from the kernel library's
//! instruction set), so that the kernels read and write whole vectors of channels.
//!
//! On by default (`block = -1`, the kernel library's block); `block = 0` keeps every
//! convolution NCHW. Measured on a Zen 3 core with AVX2, ResNet-50 and MobileNetV2 run faster
//! blocked than in NCHW (`docs/design.md` §8.3.1).
//!
//! - `nn.conv2d` (`float32`, NCHW/OIHW, static shapes, one group, `B` dividing its output
//!   channels) becomes `nn.contrib_conv2d_NCHWc` with data `NCHW{B}c` (`NCHW` when its input
//!   channels are fewer than `B` and a block does not divide them: the stem), kernel
//!   `OIHW{B}i{B}o` (`OIHW{B}o` for the stem) — a `layout_transform` of the weight, which
//!   `fold_constant` folds once when it is a constant — and result `NCHW{B}c`; a depthwise one
//!   (`groups` = input = output channels, a multiple of `B`) becomes
//!   `nn.contrib_depthwise_conv2d_NCHWc` with data and result `NCHW{B}c` and kernel
//!   `OIHW1i{B}o`;
//! - on a blocked value, elementwise operators stay elementwise; broadcasting ones (`add`,
//!   `multiply`, ...) take their other operand blocked — a per-channel vector (a bias, a batch
//!   norm's scale) reshaped and moved to `[1, C/B, 1, 1, B]`, a tensor constant along the
//!   channels given a trailing axis, another blocked value as it is; `nn.bias_add` becomes such
//!   an `add`; 2-d pools and global pools take `layout="NCHW{B}c"`; `concatenate` on the
//!   channels of blocked values concatenates their blocks;
//! - anything else reads the value moved back to NCHW (a `layout_transform` bound right after
//!   the blocked value, which `eliminate_dead_code` drops when nothing reads it).
//!
//! Other grouped convolutions stay NCHW (their kernels are NCHW kernels). Primitive
//! functions are not entered. Statistics: `convolutions blocked`, `operators blocked`.

use std::collections::HashMap;

use relay_ir::visit::{is_primitive, map_children};
use relay_ir::{
    AttrValue, Attrs, Binding, BindingKind, DType, Expr, ExprKind, Module, OpPattern, Span,
    TypeKind, VarId, ensure_sufficient_stack,
};

use crate::util::{fresh_var, ints, op_call, reshape, shape, str_attr};
use crate::{OptionValue, Pass, PassContext, PassError, PassOption};

/// The `alter_op_layout` pass.
pub struct AlterOpLayout;

static OPTIONS: &[PassOption] = &[PassOption {
    name: "block",
    default: OptionValue::Int(-1),
    min: -1,
    doc: "the channel block of the NCHW{B}c layout: 8 (AVX2), 16 (AVX-512), -1 (the default) \
          the kernel library's (the compiler's instruction set; 8 without one), 0 no blocking",
}];

/// The block `-1` stands for where no compiler says which instruction set runs the kernels.
const AUTO_BLOCK: i64 = 8;

impl Pass for AlterOpLayout {
    fn name(&self) -> &'static str {
        "alter_op_layout"
    }

    fn description(&self) -> &'static str {
        "convolutions and their neighbours move to the blocked NCHW{B}c layout"
    }

    fn opt_level(&self) -> u32 {
        2
    }

    fn needs_types(&self) -> bool {
        true
    }

    fn options(&self) -> &'static [PassOption] {
        OPTIONS
    }

    fn run(&self, mut module: Module, cx: &mut PassContext) -> Result<Module, PassError> {
        let block = match cx.int_option("block") {
            -1 => AUTO_BLOCK,
            b => b,
        };
        if block < 2 {
            return Ok(module);
        }
        let mut a = Alter {
            block,
            env: HashMap::new(),
            moved: HashMap::new(),
            convolutions: 0,
            operators: 0,
        };
        for g in &mut module.functions {
            if is_primitive(&g.func) {
                continue;
            }
            g.func.body = a.plain(&g.func.body);
        }
        cx.stat("convolutions blocked", a.convolutions);
        cx.stat("operators blocked", a.operators);
        Ok(module)
    }
}

/// A rewritten value: in NCHW, or blocked (`[N, C/B, H, W, B]`) with its NCHW form.
#[derive(Clone)]
enum Val {
    Plain(Expr),
    Blocked { blocked: Expr, plain: Expr },
}

/// The walk's state.
struct Alter {
    block: i64,
    /// Let-bound variables whose values were blocked.
    env: HashMap<VarId, Val>,
    /// NCHW variables moved to the blocked layout, and their moves.
    moved: HashMap<VarId, Expr>,
    convolutions: i64,
    operators: i64,
}

impl Alter {
    /// `e` rewritten, in NCHW.
    fn plain(&mut self, e: &Expr) -> Expr {
        match self.value(e) {
            Val::Plain(x) | Val::Blocked { plain: x, .. } => x,
        }
    }

    /// `e` rewritten.
    fn value(&mut self, e: &Expr) -> Val {
        ensure_sufficient_stack(|| match e.kind() {
            ExprKind::Function(f) if is_primitive(f) => Val::Plain(e.clone()),
            ExprKind::Var(v) => self
                .env
                .get(&v.id())
                .cloned()
                .unwrap_or_else(|| Val::Plain(e.clone())),
            ExprKind::Let { bindings, body } => self.scope(bindings, body, e.span()),
            ExprKind::Call {
                callee,
                args,
                attrs,
            } => match callee.kind() {
                ExprKind::Op(op) => self.call(e, op.name, args, attrs),
                _ => Val::Plain(map_children(e, |c| self.plain(c))),
            },
            _ => Val::Plain(map_children(e, |c| self.plain(c))),
        })
    }

    /// A `let` scope: a binding whose value is blocked binds the blocked value to a fresh
    /// variable and the original variable to its NCHW form.
    fn scope(&mut self, bindings: &[Binding], body: &Expr, span: Span) -> Val {
        let mut out = Vec::with_capacity(bindings.len());
        for b in bindings {
            match self.value(&b.value) {
                Val::Plain(x) => out.push(Binding {
                    var: b.var.clone(),
                    value: x,
                    kind: b.kind,
                }),
                Val::Blocked { blocked, plain } => {
                    let name = format!("{}_nchwc", b.var.name());
                    let nc = fresh_var(&name, None);
                    let nc_expr = Expr::new(ExprKind::Var(nc.clone()), blocked.span());
                    out.push(Binding {
                        var: nc,
                        value: blocked.clone(),
                        kind: BindingKind::Let,
                    });
                    let plain = relink(&plain, &blocked, &nc_expr);
                    out.push(Binding {
                        var: b.var.clone(),
                        value: plain,
                        kind: b.kind,
                    });
                    let var = Expr::new(ExprKind::Var(b.var.clone()), b.var.span());
                    self.env.insert(
                        b.var.id(),
                        Val::Blocked {
                            blocked: nc_expr,
                            plain: var,
                        },
                    );
                }
            }
        }
        let body = self.value(body);
        let wrap = |x: Expr| {
            Expr::new(
                ExprKind::Let {
                    bindings: out,
                    body: x,
                },
                span,
            )
        };
        match body {
            Val::Plain(x) => Val::Plain(wrap(x)),
            // The scope's result is used as NCHW by whoever reads it.
            Val::Blocked { plain, .. } => Val::Plain(wrap(plain)),
        }
    }

    /// A call of operator `name`: blocked when a rule applies, else on NCHW arguments.
    fn call(&mut self, e: &Expr, name: &str, args: &[Expr], attrs: &Attrs) -> Val {
        if let ("concatenate", [t]) = (name, args)
            && let ExprKind::Tuple(fields) = t.kind()
        {
            // A concatenation's tuple is looked into.
            let fields: Vec<Val> = fields.iter().map(|f| self.value(f)).collect();
            if let Some(v) = self.concatenate(e, t, &fields, attrs) {
                return v;
            }
            let plain = fields.into_iter().map(plain_of).collect();
            let tuple = Expr::new(ExprKind::Tuple(plain), t.span());
            return Val::Plain(rebuild(e, vec![tuple], attrs.clone()));
        }
        let vals: Vec<Val> = args.iter().map(|a| self.value(a)).collect();
        let blocked = match name {
            "nn.conv2d" => self.conv2d(e, args, &vals, attrs),
            "nn.bias_add" => self.bias_add(e, args, &vals, attrs),
            "nn.max_pool2d" | "nn.avg_pool2d" | "nn.global_max_pool2d" | "nn.global_avg_pool2d" => {
                self.pool(e, &vals, attrs)
            }
            _ => self.elementwise(e, name, args, &vals, attrs),
        };
        if let Some(v) = blocked.and_then(|b| self.blocked(b, e)) {
            self.operators += 1;
            return v;
        }
        let plain = vals.into_iter().map(plain_of).collect();
        Val::Plain(rebuild(e, plain, attrs.clone()))
    }

    /// A blocked value and its NCHW form.
    fn blocked(&self, blocked: Expr, original: &Expr) -> Option<Val> {
        let plain = self.transform(&blocked, &self.nchwc(), "NCHW", original.span())?;
        Some(Val::Blocked { blocked, plain })
    }

    /// The NCHW value `p` moved to `NCHW{B}c`, once per variable (every convolution reading
    /// an NCHW input shares its move).
    fn block_of(&mut self, p: &Expr, span: Span) -> Option<Expr> {
        let ExprKind::Var(v) = p.kind() else {
            return self.transform(p, "NCHW", &self.nchwc(), span);
        };
        if let Some(moved) = self.moved.get(&v.id()) {
            return Some(moved.clone());
        }
        let moved = self.transform(p, "NCHW", &self.nchwc(), span)?;
        self.moved.insert(v.id(), moved.clone());
        Some(moved)
    }

    /// `NCHW{B}c`.
    fn nchwc(&self) -> String {
        format!("NCHW{}c", self.block)
    }

    /// `layout_transform(x, src, dst)`.
    fn transform(&self, x: &Expr, src: &str, dst: &str, span: Span) -> Option<Expr> {
        op_call(
            "layout_transform",
            vec![x.clone()],
            &[
                ("src_layout", AttrValue::Str(src.into())),
                ("dst_layout", AttrValue::Str(dst.into())),
            ],
            span,
        )
    }

    /// `nn.conv2d` blocked, when it is one the kernels take (see the module documentation).
    fn conv2d(&mut self, e: &Expr, args: &[Expr], vals: &[Val], attrs: &Attrs) -> Option<Expr> {
        let b = self.block;
        let [x, w] = args else { return None };
        let [_, c, _, _] = f32_shape(x)?[..] else {
            return None;
        };
        let [o, _, kh, kw] = f32_shape(w)?[..] else {
            return None;
        };
        let canonical = str_attr(attrs, "data_layout") == Some("NCHW")
            && str_attr(attrs, "kernel_layout") == Some("OIHW")
            && matches!(str_attr(attrs, "out_layout"), Some("" | "NCHW"))
            && matches!(str_attr(attrs, "out_dtype"), Some("" | "float32"));
        let depthwise = match attrs.get("groups") {
            Some(AttrValue::Int(1)) => false,
            Some(AttrValue::Int(g)) if *g == c && c == o && c > 1 => true,
            _ => return None,
        };
        if !canonical || o % b != 0 {
            return None;
        }
        let span = e.span();
        if depthwise {
            return self.depthwise(vals, attrs, [o, kh, kw], span);
        }
        let (data, data_layout, kernel_layout) = match &vals[0] {
            Val::Blocked { blocked, .. } => {
                (blocked.clone(), self.nchwc(), format!("OIHW{b}i{b}o"))
            }
            Val::Plain(p) if c % b == 0 => (
                self.block_of(p, span)?,
                self.nchwc(),
                format!("OIHW{b}i{b}o"),
            ),
            Val::Plain(p) if c < b => (p.clone(), "NCHW".to_string(), format!("OIHW{b}o")),
            Val::Plain(_) => return None,
        };
        let weight = self.transform(&plain_of(vals[1].clone()), "OIHW", &kernel_layout, span)?;
        let attrs = attrs
            .with("data_layout", AttrValue::Str(data_layout.into()))
            .with("kernel_layout", AttrValue::Str(kernel_layout.into()))
            .with("out_layout", AttrValue::Str(self.nchwc().into()))
            .with("channels", AttrValue::Int(o))
            .with("kernel_size", ints(&[kh, kw]));
        let conv = relay_ops::call("nn.contrib_conv2d_NCHWc", vec![data, weight], attrs, span)?;
        self.convolutions += 1;
        Some(conv)
    }

    /// A depthwise `nn.conv2d` (`groups` = input = output channels, a multiple of the block)
    /// as `nn.contrib_depthwise_conv2d_NCHWc`: data `NCHW{B}c`, kernel `OIHW1i{B}o`.
    fn depthwise(
        &mut self,
        vals: &[Val],
        attrs: &Attrs,
        [o, kh, kw]: [i64; 3],
        span: Span,
    ) -> Option<Expr> {
        let data = match &vals[0] {
            Val::Blocked { blocked, .. } => blocked.clone(),
            Val::Plain(p) => self.block_of(p, span)?,
        };
        let kernel_layout = format!("OIHW1i{}o", self.block);
        let weight = self.transform(&plain_of(vals[1].clone()), "OIHW", &kernel_layout, span)?;
        let attrs = attrs
            .with("data_layout", AttrValue::Str(self.nchwc().into()))
            .with("kernel_layout", AttrValue::Str(kernel_layout.into()))
            .with("out_layout", AttrValue::Str(self.nchwc().into()))
            .with("channels", AttrValue::Int(o))
            .with("kernel_size", ints(&[kh, kw]));
        let conv = relay_ops::call(
            "nn.contrib_depthwise_conv2d_NCHWc",
            vec![data, weight],
            attrs,
            span,
        )?;
        self.convolutions += 1;
        Some(conv)
    }

    /// `nn.bias_add(x, bias, axis=1)` of a blocked `x`: an `add` of the bias blocked.
    fn bias_add(&mut self, e: &Expr, args: &[Expr], vals: &[Val], attrs: &Attrs) -> Option<Expr> {
        let (Val::Blocked { blocked, .. }, [x, bias]) = (&vals[0], args) else {
            return None;
        };
        let rank = f32_shape(x)?.len() as i64;
        if !matches!(attrs.get("axis"), Some(AttrValue::Int(a)) if *a == 1 || *a == 1 - rank) {
            return None;
        }
        let [c] = f32_shape(bias)?[..] else {
            return None;
        };
        let b = self.channel_operand(&plain_of(vals[1].clone()), &[1, c, 1, 1], e.span())?;
        relay_ops::call("add", vec![blocked.clone(), b], Attrs::default(), e.span())
    }

    /// A 2-d or global pool of a blocked value, in the blocked layout.
    fn pool(&mut self, e: &Expr, vals: &[Val], attrs: &Attrs) -> Option<Expr> {
        let Val::Blocked { blocked, .. } = vals.first()? else {
            return None;
        };
        let plain_layout = str_attr(attrs, "layout") == Some("NCHW")
            && matches!(str_attr(attrs, "out_layout"), None | Some("" | "NCHW"));
        if !plain_layout {
            return None;
        }
        let attrs = attrs
            .with("layout", AttrValue::Str(self.nchwc().into()))
            .with("out_layout", AttrValue::Str("".into()));
        Some(rebuild(e, vec![blocked.clone()], attrs))
    }

    /// An elementwise or broadcasting operator with a blocked operand, whose result has that
    /// operand's shape: on the blocked value, the other operands blocked to broadcast alike.
    fn elementwise(
        &mut self,
        e: &Expr,
        name: &str,
        args: &[Expr],
        vals: &[Val],
        attrs: &Attrs,
    ) -> Option<Expr> {
        // An `axis` (`nn.prelu`'s) says how operands broadcast otherwise.
        let pattern = relay_ops::lookup(name)?.pattern;
        let pointwise = matches!(pattern, OpPattern::ElemWise | OpPattern::Broadcast);
        if !pointwise || args.len() > 2 || attrs.get("axis").is_some() {
            return None;
        }
        let result = shape(e)?;
        let lead = args.iter().zip(vals).position(|(a, v)| {
            matches!(v, Val::Blocked { .. }) && shape(a).as_ref() == Some(&result)
        })?;
        let mut operands = Vec::with_capacity(args.len());
        for (i, (a, v)) in args.iter().zip(vals).enumerate() {
            operands.push(match v {
                Val::Blocked { blocked, .. } if shape(a).as_ref() == Some(&result) => {
                    blocked.clone()
                }
                _ if i == lead => return None,
                _ => self.broadcast_operand(a, &plain_of(v.clone()), &result, e.span())?,
            });
        }
        Some(rebuild(e, operands, attrs.clone()))
    }

    /// An operand `x` (rewritten `p`) broadcast against the NCHW `result`, for its blocked form:
    /// a scalar as it is, a tensor along the channels moved to `NCHW{B}c`, one constant along
    /// them given a trailing axis of 1.
    fn broadcast_operand(&self, x: &Expr, p: &Expr, result: &[i64], span: Span) -> Option<Expr> {
        let s = shape(x)?;
        if s.len() > 4 || result.len() != 4 {
            return None;
        }
        if s.iter().all(|&d| d == 1) {
            return Some(p.clone());
        }
        let mut aligned = vec![1; 4 - s.len()];
        aligned.extend_from_slice(&s);
        if aligned[1] == 1 {
            let mut five = aligned.clone();
            five.push(1);
            return reshape(p, &five, span);
        }
        self.channel_operand(p, &aligned, span)
    }

    /// `x` reshaped to the 4-d `aligned` (its channels `C`) and moved to `NCHW{B}c`.
    fn channel_operand(&self, x: &Expr, aligned: &[i64], span: Span) -> Option<Expr> {
        if aligned.get(1)? % self.block != 0 {
            return None;
        }
        self.transform(&reshape(x, aligned, span)?, "NCHW", &self.nchwc(), span)
    }

    /// `concatenate` on the channels of blocked values: of their blocks.
    fn concatenate(&mut self, e: &Expr, t: &Expr, fields: &[Val], attrs: &Attrs) -> Option<Val> {
        let rank = shape(e)?.len() as i64;
        if rank != 4 || !matches!(attrs.get("axis"), Some(AttrValue::Int(a)) if *a == 1 || *a == -3)
        {
            return None;
        }
        let blocked: Option<Vec<Expr>> = fields
            .iter()
            .map(|f| match f {
                Val::Blocked { blocked, .. } => Some(blocked.clone()),
                Val::Plain(_) => None,
            })
            .collect();
        let tuple = Expr::new(ExprKind::Tuple(blocked?), t.span());
        let call = rebuild(e, vec![tuple], attrs.with("axis", AttrValue::Int(1)));
        let v = self.blocked(call, e)?;
        self.operators += 1;
        Some(v)
    }
}

/// The NCHW form of a value.
fn plain_of(v: Val) -> Expr {
    match v {
        Val::Plain(x) | Val::Blocked { plain: x, .. } => x,
    }
}

/// `plain` (a `layout_transform` of `blocked`) reading `var` instead.
fn relink(plain: &Expr, blocked: &Expr, var: &Expr) -> Expr {
    map_children(plain, |c| {
        if Expr::ptr_eq(c, blocked) {
            var.clone()
        } else {
            c.clone()
        }
    })
}

/// The call `e` with arguments `args` and attributes `attrs`.
fn rebuild(e: &Expr, args: Vec<Expr>, attrs: Attrs) -> Expr {
    let ExprKind::Call { callee, .. } = e.kind() else {
        return e.clone();
    };
    Expr::new(
        ExprKind::Call {
            callee: callee.clone(),
            args,
            attrs,
        },
        e.span(),
    )
}

/// The static shape of `e`'s `float32` tensor type.
fn f32_shape(e: &Expr) -> Option<Vec<i64>> {
    match e.checked_type()?.kind() {
        TypeKind::Tensor { shape, dtype } if *dtype == DType::F32 => {
            relay_ops::support::known(shape)
        }
        _ => None,
    }
}
