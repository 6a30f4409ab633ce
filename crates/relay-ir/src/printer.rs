//! The printer: canonical Relay text (TVM's text format, version `0.0.5`) for modules and
//! expressions, which the `relay-syntax` parser reads back.
//!
//! Layout, fixed so that printing is a fixpoint (`print(parse(print(m))) == print(m)`):
//!
//! - The text starts with `#[version = "0.0.5"]`. A module then lists its type definitions
//!   sorted by name, then its `def`s sorted by name, each starting on a new line with no blank
//!   lines between them, then the `#[metadata]` section if any constant went there.
//! - A module of kind [`ModuleKind::Expr`] is printed as an expression program: one
//!   `free_var %p: T;` line per parameter of `@main`, then the body at top level.
//! - Bodies are indented two spaces per level. A binding chain prints one binding per line:
//!   `%N = v;` (graph form, numbered from 0 in each `def` and continuing into nested functions),
//!   `let %x: T = v;`, or `v;` (sequencing); then the body. Used anywhere but in a body
//!   position, a chain is wrapped in parentheses.
//! - Every local variable gets a printed name unique within its `def` (its hint, or the hint
//!   with the smallest free numeric suffix), so no name is ever shadowed.
//! - Scalar constants of `bool`, `int8`..`int64` and `float16`..`float64` are written inline
//!   (floats exactly, in the spellings `float.rs` describes); every other constant is
//!   `meta[relay.Constant][i]` and goes to the `#[metadata]` section.
//!
//! Binding vectors are iterated, never recursed over, so long chains print on a small stack;
//! recursion follows only the nesting of expressions, types and patterns.

mod float;
#[cfg(test)]
pub(crate) mod tests;

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use relay_runtime::{DTypeCode, NDArray};

use crate::{
    AttrValue, Attrs, Binding, BindingKind, Dim, Expr, ExprKind, Function, GlobalFunc, Module,
    ModuleKind, Pattern, PatternKind, Symbol, Type, TypeDef, TypeKind, TypeVar, TypeVarId, Var,
    VarId, metadata,
};

/// The first line of every printed program.
pub const VERSION_HEADER: &str = "#[version = \"0.0.5\"]";

/// What the printer adds beyond the program itself.
#[derive(Clone, Debug, Default)]
pub struct PrintOptions {
    /// Write `/* ty=... */` comments (needs checked types).
    pub show_types: bool,
}

/// Prints a whole module as canonical text, header included.
pub fn print_module(module: &Module, opts: &PrintOptions) -> String {
    let mut p = Printer::new(Some(module));
    p.show_types = opts.show_types;
    p.module(module);
    p.finish()
}

/// Prints one expression (with `free_var` lines for its free variables), header included.
pub fn print_expr(expr: &Expr, opts: &PrintOptions) -> String {
    let mut p = Printer::new(None);
    p.show_types = opts.show_types;
    p.out.push_str(VERSION_HEADER);
    p.out.push('\n');
    let scan = Scan::expr(expr, &[]);
    p.begin_scope(scan.referenced, scan.self_ref);
    for var in &scan.free {
        p.free_var_line(var);
    }
    p.expr(expr, Ctx::Block);
    p.out.push('\n');
    p.finish()
}

/// Prints a type as the text format writes it (`Tensor[(2, 3), float32]`, `float32`,
/// `(int32, List[A])`, `fn (A) -> B`), without a header. Type variables print by name.
pub fn print_type(ty: &crate::Type) -> String {
    let mut p = Printer::new(None);
    p.ty(ty);
    p.finish()
}

impl std::fmt::Display for crate::Type {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&print_type(self))
    }
}

/// Where an expression is printed, which decides the parentheses it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ctx {
    /// A body: top level, or inside the braces of a `def`, `fn`, `if` branch or match clause.
    /// A binding chain prints flat here.
    Block,
    /// A full expression between delimiters: call argument, tuple field, `if` condition,
    /// `ref(...)` operand, match scrutinee. A binding chain needs parentheses.
    Expr,
    /// The value of a binding (the grammar's binary-operator expression): binding chains and
    /// matches need parentheses.
    Value,
    /// The operand of a call or projection: anything but a variable, global, operator,
    /// constructor, meta constant, call, tuple, projection or `ref` form needs parentheses.
    Postfix,
}

/// How a bound variable is printed.
enum Name {
    /// `%name`.
    Local(Box<str>),
    /// `%N`.
    Graph(u32),
}

/// The printer state: the output buffer, the indentation level, the names given to variables
/// in the current `def`, and the constants sent to the metadata section.
struct Printer {
    out: String,
    indent: usize,
    /// Field counts of the module's constructors, by ADT and tag (empty without a module).
    ctor_fields: HashMap<(Symbol, u32), usize>,
    /// Names of the module's types, which type variables must not take.
    type_names: Vec<String>,
    names: HashMap<VarId, Name>,
    used: HashSet<String>,
    next_suffix: HashMap<String, u32>,
    next_graph: u32,
    type_var_names: HashMap<TypeVarId, Box<str>>,
    used_type_names: HashSet<String>,
    next_type_suffix: HashMap<String, u32>,
    /// Variables referenced anywhere in the current scope (a sequencing binding whose variable
    /// is used must print as a `let`).
    referenced: HashSet<VarId>,
    /// Variables whose function value refers to them (a recursive graph binding prints as a
    /// `let`, since only `let` makes a variable visible in its own value).
    self_ref: HashSet<VarId>,
    constants: Vec<Arc<NDArray>>,
    constant_index: HashMap<*const NDArray, usize>,
    /// Write `/* ty=... */` after calls, variable references, tuples, projections, constants
    /// and functions that have a checked type.
    show_types: bool,
    /// Printing a type inside a `/* ty=... */` comment: type variables not in scope print by
    /// their name hint without taking a name.
    in_comment: bool,
}

impl Printer {
    fn new(module: Option<&Module>) -> Printer {
        let mut ctor_fields = HashMap::new();
        let mut type_names = Vec::new();
        if let Some(m) = module {
            for t in &m.types {
                type_names.push(t.name.as_str().to_owned());
                for (tag, c) in t.ctors.iter().enumerate() {
                    ctor_fields.insert((t.name, tag as u32), c.fields.len());
                }
            }
        }
        Printer {
            out: String::new(),
            indent: 0,
            ctor_fields,
            type_names,
            names: HashMap::new(),
            used: HashSet::new(),
            next_suffix: HashMap::new(),
            next_graph: 0,
            type_var_names: HashMap::new(),
            used_type_names: HashSet::new(),
            next_type_suffix: HashMap::new(),
            referenced: HashSet::new(),
            self_ref: HashSet::new(),
            constants: Vec::new(),
            constant_index: HashMap::new(),
            show_types: false,
            in_comment: false,
        }
    }

    /// Appends the metadata section, if any constant needs one, and returns the text.
    fn finish(mut self) -> String {
        if !self.constants.is_empty() {
            let refs: Vec<&NDArray> = self.constants.iter().map(|c| &**c).collect();
            self.out.push_str("#[metadata]\n");
            self.out.push_str(&metadata::encode_constants(&refs));
            self.out.push('\n');
        }
        self.out
    }

    /// Starts a naming scope (a `def`, a type definition, or a whole expression).
    fn begin_scope(&mut self, referenced: HashSet<VarId>, self_ref: HashSet<VarId>) {
        self.names.clear();
        self.used.clear();
        self.next_suffix.clear();
        self.next_graph = 0;
        self.type_var_names.clear();
        self.used_type_names.clear();
        self.used_type_names.extend(self.type_names.iter().cloned());
        self.next_type_suffix.clear();
        self.referenced = referenced;
        self.self_ref = self_ref;
    }

    fn newline(&mut self) {
        self.out.push('\n');
        for _ in 0..self.indent {
            self.out.push_str("  ");
        }
    }

    // ----- Modules -----

    fn module(&mut self, m: &Module) {
        self.out.push_str(VERSION_HEADER);
        self.out.push('\n');
        if let Some(main) = expression_main(m) {
            let scan = Scan::expr(&main.func.body, &main.func.params);
            self.begin_scope(scan.referenced, scan.self_ref);
            for p in &main.func.params {
                self.free_var_line(p);
            }
            self.expr(&main.func.body, Ctx::Block);
            self.out.push('\n');
            return;
        }
        let mut types: Vec<&TypeDef> = m.types.iter().collect();
        types.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        for t in types {
            self.type_def(t);
            self.out.push('\n');
        }
        let mut funcs: Vec<&GlobalFunc> = m.functions.iter().collect();
        funcs.sort_by(|a, b| a.name.as_str().cmp(b.name.as_str()));
        for f in funcs {
            let scan = Scan::expr(&f.func.body, &f.func.params);
            self.begin_scope(scan.referenced, scan.self_ref);
            self.out.push_str("def @");
            self.out.push_str(f.name.as_str());
            self.function(&f.func);
            self.out.push('\n');
        }
    }

    fn type_def(&mut self, t: &TypeDef) {
        self.begin_scope(HashSet::new(), HashSet::new());
        if t.external {
            self.out.push_str("extern ");
        }
        self.out.push_str("type ");
        self.out.push_str(t.name.as_str());
        self.type_params(&t.params);
        if t.external {
            return;
        }
        self.out.push_str(" {");
        self.indent += 1;
        for c in &t.ctors {
            self.newline();
            self.out.push_str(c.name.as_str());
            if !c.fields.is_empty() {
                self.out.push('(');
                for (i, f) in c.fields.iter().enumerate() {
                    self.sep(i);
                    self.ty(f);
                }
                self.out.push(')');
            }
            self.out.push(',');
        }
        self.indent -= 1;
        self.newline();
        self.out.push('}');
    }

    fn free_var_line(&mut self, var: &Var) {
        self.out.push_str("free_var ");
        self.bind_local(var);
        self.annotation(var);
        self.out.push(';');
        self.newline();
    }

    /// Writes `[A, B](params, attrs) -> R {\n body\n}` (everything after `def @f` / `fn `).
    fn function(&mut self, f: &Function) {
        self.type_params(&f.type_params);
        self.out.push('(');
        for (i, p) in f.params.iter().enumerate() {
            self.sep(i);
            self.bind_local(p);
            self.annotation(p);
        }
        for (i, (key, value)) in f.attrs.iter().enumerate() {
            self.sep(i + f.params.len());
            self.attr(*key, value);
        }
        self.out.push(')');
        if let Some(ret) = &f.ret_type {
            self.out.push_str(" -> ");
            self.ty(ret);
        }
        self.out.push_str(" {");
        self.braced_body(&f.body);
        self.out.push('}');
    }

    /// Writes a body on its own indented lines, then a newline at the outer indentation.
    fn braced_body(&mut self, body: &Expr) {
        self.indent += 1;
        self.newline();
        self.expr(body, Ctx::Block);
        self.indent -= 1;
        self.newline();
    }

    fn sep(&mut self, i: usize) {
        if i > 0 {
            self.out.push_str(", ");
        }
    }

    // ----- Expressions -----

    fn expr(&mut self, e: &Expr, ctx: Ctx) {
        crate::ensure_sufficient_stack(|| self.expr_inner(e, ctx))
    }

    fn expr_inner(&mut self, e: &Expr, ctx: Ctx) {
        self.expr_text(e, ctx);
        if self.show_types
            && matches!(
                e.kind(),
                ExprKind::Call { .. }
                    | ExprKind::Var(_)
                    | ExprKind::Tuple(_)
                    | ExprKind::Proj { .. }
                    | ExprKind::Constant(_)
                    | ExprKind::Function(_)
            )
            && let Some(ty) = e.checked_type()
        {
            self.type_comment(ty);
        }
    }

    /// Writes ` /* ty=T */`.
    fn type_comment(&mut self, ty: &Type) {
        self.out.push_str(" /* ty=");
        self.in_comment = true;
        self.ty(ty);
        self.in_comment = false;
        self.out.push_str(" */");
    }

    fn expr_text(&mut self, e: &Expr, ctx: Ctx) {
        match e.kind() {
            ExprKind::Let { .. } => self.let_chain(e, ctx),
            ExprKind::Constant(c) => self.constant(c, ctx),
            ExprKind::Var(v) => self.var_ref(v),
            ExprKind::Global(name) => {
                self.out.push('@');
                self.out.push_str(name.as_str());
            }
            ExprKind::Op(op) => self.out.push_str(op.name),
            ExprKind::Ctor(c) => self.out.push_str(c.name.as_str()),
            ExprKind::Call {
                callee,
                args,
                attrs,
            } => self.call(callee, args, attrs, ctx),
            ExprKind::Function(f) => {
                self.open_paren_if(ctx == Ctx::Postfix);
                self.out.push_str("fn ");
                self.function(f);
                self.close_paren_if(ctx == Ctx::Postfix);
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                self.open_paren_if(ctx == Ctx::Postfix);
                self.out.push_str("if (");
                self.expr(cond, Ctx::Expr);
                self.out.push_str(") {");
                self.braced_body(then_branch);
                self.out.push_str("} else {");
                self.braced_body(else_branch);
                self.out.push('}');
                self.close_paren_if(ctx == Ctx::Postfix);
            }
            ExprKind::Match {
                scrutinee,
                clauses,
                complete,
            } => {
                let parens = matches!(ctx, Ctx::Value | Ctx::Postfix);
                self.open_paren_if(parens);
                self.out
                    .push_str(if *complete { "match (" } else { "match? (" });
                self.expr(scrutinee, Ctx::Expr);
                self.out.push_str(") {");
                self.indent += 1;
                for clause in clauses {
                    self.newline();
                    self.pattern(&clause.pattern);
                    self.out.push_str(" => {");
                    self.braced_body(&clause.body);
                    self.out.push_str("},");
                }
                self.indent -= 1;
                self.newline();
                self.out.push('}');
                self.close_paren_if(parens);
            }
            ExprKind::Tuple(fields) => {
                self.out.push('(');
                for (i, f) in fields.iter().enumerate() {
                    self.sep(i);
                    self.expr(f, Ctx::Expr);
                }
                if fields.len() == 1 {
                    self.out.push(',');
                }
                self.out.push(')');
            }
            ExprKind::Proj { tuple, index } => {
                self.expr(tuple, Ctx::Postfix);
                self.out.push('.');
                self.push_display(index);
            }
            ExprKind::RefNew(v) => {
                self.out.push_str("ref(");
                self.expr(v, Ctx::Expr);
                self.out.push(')');
            }
            ExprKind::RefRead(r) => {
                self.out.push_str("ref_read(");
                self.expr(r, Ctx::Expr);
                self.out.push(')');
            }
            ExprKind::RefWrite(r, v) => {
                self.out.push_str("ref_write(");
                self.expr(r, Ctx::Expr);
                self.out.push_str(", ");
                self.expr(v, Ctx::Expr);
                self.out.push(')');
            }
        }
    }

    fn open_paren_if(&mut self, cond: bool) {
        if cond {
            self.out.push('(');
        }
    }

    fn close_paren_if(&mut self, cond: bool) {
        if cond {
            self.out.push(')');
        }
    }

    /// Prints a (possibly nested) binding chain: flat in a body, parenthesised elsewhere. A
    /// chain without bindings prints as its body.
    fn let_chain(&mut self, e: &Expr, ctx: Ctx) {
        let mut body = e;
        let mut empty = true;
        while let ExprKind::Let {
            bindings,
            body: next,
        } = body.kind()
        {
            empty &= bindings.is_empty();
            body = next;
        }
        if empty {
            self.expr(body, ctx);
            return;
        }
        let parens = ctx != Ctx::Block;
        if parens {
            self.out.push('(');
            self.indent += 1;
            self.newline();
        }
        let mut cur = e;
        while let ExprKind::Let {
            bindings,
            body: next,
        } = cur.kind()
        {
            for b in bindings {
                self.binding(b);
                self.newline();
            }
            cur = next;
        }
        self.expr(cur, Ctx::Block);
        if parens {
            self.indent -= 1;
            self.newline();
            self.out.push(')');
        }
    }

    fn binding(&mut self, b: &Binding) {
        let id = b.var.id();
        let kind = match b.kind {
            BindingKind::Graph if b.var.ty().is_some() || self.self_ref.contains(&id) => {
                BindingKind::Let
            }
            BindingKind::Seq if b.var.ty().is_some() || self.referenced.contains(&id) => {
                BindingKind::Let
            }
            kind => kind,
        };
        match kind {
            BindingKind::Graph => {
                let n = self.next_graph;
                self.next_graph += 1;
                self.names.insert(id, Name::Graph(n));
                self.out.push('%');
                self.push_display(n);
                self.out.push_str(" = ");
            }
            BindingKind::Let => {
                self.out.push_str("let ");
                self.bind_local(&b.var);
                self.annotation(&b.var);
                self.out.push_str(" = ");
            }
            BindingKind::Seq => {}
        }
        self.expr(&b.value, Ctx::Value);
        self.out.push(';');
    }

    fn call(&mut self, callee: &Expr, args: &[Expr], attrs: &Attrs, ctx: Ctx) {
        if let ExprKind::Ctor(c) = callee.kind()
            && args.is_empty()
            && attrs.is_empty()
            && self.ctor_fields.get(&(c.adt, c.tag)) == Some(&0)
        {
            // A nullary constructor call is written bare; the parser reads `Nil` as `Nil()`. As a
            // callee or projection operand it is written `Nil()`, because the parser gives a
            // constructor name directly before `(` its call meaning (`Nil()()` calls the result).
            self.out.push_str(c.name.as_str());
            if ctx == Ctx::Postfix {
                self.out.push_str("()");
            }
            return;
        }
        self.expr(callee, Ctx::Postfix);
        self.out.push('(');
        for (i, a) in args.iter().enumerate() {
            self.sep(i);
            self.expr(a, Ctx::Expr);
        }
        let mut count = args.len();
        let schema = match callee.kind() {
            ExprKind::Op(op) => Some(*op),
            _ => None,
        };
        for (key, value) in attrs.iter() {
            if let Some(op) = schema
                && let Some((_, field)) = op.field(key.as_str())
                && field.default.value().as_ref() == Some(value)
            {
                continue;
            }
            self.sep(count);
            count += 1;
            self.attr(*key, value);
        }
        self.out.push(')');
    }

    fn attr(&mut self, key: Symbol, value: &AttrValue) {
        self.out.push_str(key.as_str());
        self.out.push('=');
        self.attr_value(value);
    }

    fn attr_value(&mut self, value: &AttrValue) {
        match value {
            AttrValue::Null => self.out.push_str("None"),
            AttrValue::Bool(b) => self.out.push_str(if *b { "True" } else { "False" }),
            AttrValue::Int(i) => self.push_display(i),
            AttrValue::Float(f) => float::push_f64(&mut self.out, *f, float::FloatWidth::F32),
            AttrValue::Str(s) => push_string(&mut self.out, s),
            AttrValue::Array(items) => {
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    self.sep(i);
                    self.attr_value(item);
                }
                self.out.push(']');
            }
        }
    }

    #[inline(never)]
    fn constant(&mut self, c: &Arc<NDArray>, ctx: Ctx) {
        let mark = self.out.len();
        self.open_paren_if(ctx == Ctx::Postfix);
        if push_scalar(&mut self.out, c) {
            self.close_paren_if(ctx == Ctx::Postfix);
            return;
        }
        self.out.truncate(mark);
        let key = Arc::as_ptr(c);
        let index = match self.constant_index.get(&key) {
            Some(&i) => i,
            None => {
                let i = self.constants.len();
                self.constants.push(c.clone());
                self.constant_index.insert(key, i);
                i
            }
        };
        self.out.push_str("meta[relay.Constant][");
        self.push_display(index);
        self.out.push(']');
    }

    fn push_display(&mut self, value: impl std::fmt::Display) {
        use std::fmt::Write;
        // Writing to a String cannot fail.
        let _ = write!(self.out, "{value}");
    }

    // ----- Variables -----

    fn var_ref(&mut self, v: &Var) {
        match self.names.get(&v.id()) {
            Some(Name::Local(name)) => {
                self.out.push('%');
                self.out.push_str(name);
            }
            Some(Name::Graph(n)) => {
                let n = *n;
                self.out.push('%');
                self.push_display(n);
            }
            // A variable used outside any binding (ill-formed, or free in a `def`).
            None => self.bind_local(v),
        }
    }

    /// Gives `v` a fresh printed name and writes `%name`.
    fn bind_local(&mut self, v: &Var) {
        let base = sanitize(v.name().as_str(), 'v', |_| false);
        let name = fresh(&base, &mut self.used, &mut self.next_suffix);
        self.out.push('%');
        self.out.push_str(&name);
        self.names
            .insert(v.id(), Name::Local(name.into_boxed_str()));
    }

    fn annotation(&mut self, v: &Var) {
        if let Some(t) = v.ty() {
            self.out.push_str(": ");
            self.ty(t);
        }
    }

    // ----- Patterns -----

    fn pattern(&mut self, p: &Pattern) {
        crate::ensure_sufficient_stack(|| self.pattern_inner(p))
    }

    fn pattern_inner(&mut self, p: &Pattern) {
        match &p.kind {
            PatternKind::Wildcard => self.out.push('_'),
            PatternKind::Var(v) => {
                self.bind_local(v);
                self.annotation(v);
            }
            PatternKind::Ctor(c, fields) => {
                self.out.push_str(c.name.as_str());
                if !fields.is_empty() {
                    self.out.push('(');
                    for (i, f) in fields.iter().enumerate() {
                        self.sep(i);
                        self.pattern(f);
                    }
                    self.out.push(')');
                }
            }
            PatternKind::Tuple(fields) => {
                self.out.push('(');
                for (i, f) in fields.iter().enumerate() {
                    self.sep(i);
                    self.pattern(f);
                }
                if fields.len() == 1 {
                    self.out.push(',');
                }
                self.out.push(')');
            }
        }
    }

    // ----- Types -----

    fn ty(&mut self, t: &Type) {
        crate::ensure_sufficient_stack(|| self.ty_inner(t))
    }

    fn ty_inner(&mut self, t: &Type) {
        match t.kind() {
            TypeKind::Tensor { shape, dtype } => {
                // `bfloat16` and `handle` are not read as scalar types, so they take the long form.
                if shape.is_empty() && !matches!(dtype.code, DTypeCode::BFloat | DTypeCode::Handle)
                {
                    self.push_display(dtype);
                    return;
                }
                self.out.push_str("Tensor[(");
                for (i, d) in shape.iter().enumerate() {
                    self.sep(i);
                    match d {
                        Dim::Known(n) => self.push_display(n),
                        Dim::Any => self.out.push('?'),
                    }
                }
                self.out.push_str("), ");
                self.push_display(dtype);
                self.out.push(']');
            }
            TypeKind::Tuple(fields) => {
                self.out.push('(');
                for (i, f) in fields.iter().enumerate() {
                    self.sep(i);
                    self.ty(f);
                }
                if fields.len() == 1 {
                    self.out.push(',');
                }
                self.out.push(')');
            }
            TypeKind::Func(f) => {
                self.out.push_str("fn ");
                self.type_params(&f.type_params);
                self.out.push('(');
                for (i, p) in f.params.iter().enumerate() {
                    self.sep(i);
                    self.ty(p);
                }
                self.out.push_str(") -> ");
                self.ty(&f.ret);
            }
            TypeKind::Var(tv) => match self.type_var_names.get(&tv.id()) {
                Some(name) => {
                    let name: &str = name;
                    self.out.push_str(name);
                }
                None if self.in_comment => {
                    let name = sanitize(tv.name().as_str(), 'T', is_reserved_type_name);
                    self.out.push_str(&name);
                }
                None => self.bind_type_var(tv),
            },
            TypeKind::Adt { name, args } => {
                self.out.push_str(name.as_str());
                if !args.is_empty() {
                    self.out.push('[');
                    for (i, a) in args.iter().enumerate() {
                        self.sep(i);
                        self.ty(a);
                    }
                    self.out.push(']');
                }
            }
            TypeKind::Ref(inner) => {
                self.out.push_str("ref(");
                self.ty(inner);
                self.out.push(')');
            }
            TypeKind::Incomplete => self.out.push('_'),
        }
    }

    /// Writes `[A, B]` (nothing when empty), giving each type variable a fresh name.
    fn type_params(&mut self, params: &[TypeVar]) {
        if params.is_empty() {
            return;
        }
        self.out.push('[');
        for (i, tv) in params.iter().enumerate() {
            self.sep(i);
            // A type comment names the parameters it repeats as the header that bound them.
            match self.type_var_names.get(&tv.id()) {
                Some(name) if self.in_comment => {
                    let name = name.clone();
                    self.out.push_str(&name);
                }
                _ => self.bind_type_var(tv),
            }
        }
        self.out.push(']');
    }

    fn bind_type_var(&mut self, tv: &TypeVar) {
        let base = sanitize(tv.name().as_str(), 'T', is_reserved_type_name);
        let name = fresh(&base, &mut self.used_type_names, &mut self.next_type_suffix);
        self.out.push_str(&name);
        self.type_var_names.insert(tv.id(), name.into_boxed_str());
    }
}

/// The `@main` of a module printed as an expression program: one of kind
/// [`ModuleKind::Expr`] holding nothing but a plain `@main` (no type parameters, attributes or
/// return type). Anything else prints as definitions so nothing is lost.
fn expression_main(m: &Module) -> Option<&GlobalFunc> {
    if m.kind != ModuleKind::Expr || !m.types.is_empty() || m.functions.len() != 1 {
        return None;
    }
    let main = &m.functions[0];
    let f = &main.func;
    let plain = f.type_params.is_empty() && f.attrs.is_empty() && f.ret_type.is_none();
    (main.name.as_str() == "main" && plain).then_some(main)
}

/// A name hint turned into a valid identifier: characters other than `[A-Za-z0-9_/]` become
/// `_`, and a name that is empty, reserved, or does not start with a letter or `_` gets
/// `prefix` in front.
fn sanitize(hint: &str, prefix: char, reserved: fn(&str) -> bool) -> String {
    let mut name = String::with_capacity(hint.len() + 1);
    let starts_well = hint.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_');
    if !starts_well || reserved(hint) {
        name.push(prefix);
    }
    name.extend(hint.chars().map(|c| {
        if c.is_ascii_alphanumeric() || c == '_' || c == '/' {
            c
        } else {
            '_'
        }
    }));
    name
}

/// Whether a type variable name would be read as something else in type position.
fn is_reserved_type_name(name: &str) -> bool {
    const WORDS: &[&str] = &[
        "_",
        "Tensor",
        "True",
        "False",
        "None",
        "nullptr",
        "fn",
        "ref",
        "ref_read",
        "ref_write",
        "let",
        "def",
        "if",
        "else",
        "type",
        "match",
        "extern",
        "free_var",
        "meta",
    ];
    WORDS.contains(&name)
        || ["int", "uint", "float", "bool", "inff", "nanf"]
            .iter()
            .any(|p| name.starts_with(p))
}

/// `base` if unused, else `base` with the smallest free numeric suffix; marks it used.
fn fresh(base: &str, used: &mut HashSet<String>, next: &mut HashMap<String, u32>) -> String {
    if used.insert(base.to_owned()) {
        return base.to_owned();
    }
    // Names are never released within a scope, so suffixes below the remembered one stay taken.
    let counter = next.entry(base.to_owned()).or_insert(1);
    loop {
        let candidate = format!("{base}{counter}");
        *counter += 1;
        if used.insert(candidate.clone()) {
            return candidate;
        }
    }
}

/// Writes a double-quoted string with `\"`, `\\`, `\n` and `\t` escaped.
fn push_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Writes a rank-0 constant of an inline dtype as a literal and returns `true`; returns
/// `false` (writing nothing) for constants that belong in the metadata section.
fn push_scalar(out: &mut String, c: &NDArray) -> bool {
    use std::fmt::Write;
    let dtype = c.dtype();
    if !c.is_scalar() || dtype.lanes != 1 {
        return false;
    }
    let bytes = c.as_bytes();
    // `NDArray` stores elements in native byte order.
    let b2 = || bytes.get(..2).and_then(|b| <[u8; 2]>::try_from(b).ok());
    let b4 = || bytes.get(..4).and_then(|b| <[u8; 4]>::try_from(b).ok());
    let b8 = || bytes.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok());
    // Writing to a String cannot fail, so the results below are ignored.
    match (dtype.code, dtype.bits) {
        (DTypeCode::Bool, 8) => match bytes.first() {
            Some(&b) => out.push_str(if b != 0 { "True" } else { "False" }),
            None => return false,
        },
        (DTypeCode::Int, 8) => match bytes.first() {
            Some(&b) => {
                let _ = write!(out, "{}i8", b as i8);
            }
            None => return false,
        },
        (DTypeCode::Int, 16) => match b2() {
            Some(b) => {
                let _ = write!(out, "{}i16", i16::from_ne_bytes(b));
            }
            None => return false,
        },
        (DTypeCode::Int, 32) => match b4() {
            Some(b) => {
                let _ = write!(out, "{}", i32::from_ne_bytes(b));
            }
            None => return false,
        },
        (DTypeCode::Int, 64) => match b8() {
            Some(b) => {
                let _ = write!(out, "{}i64", i64::from_ne_bytes(b));
            }
            None => return false,
        },
        (DTypeCode::Float, 16) => match b2() {
            Some(b) => float::push_f16(out, u16::from_ne_bytes(b)),
            None => return false,
        },
        (DTypeCode::Float, 32) => match b4() {
            Some(b) => float::push_f32(out, f32::from_ne_bytes(b)),
            None => return false,
        },
        (DTypeCode::Float, 64) => match b8() {
            Some(b) => float::push_f64(out, f64::from_ne_bytes(b), float::FloatWidth::F64),
            None => return false,
        },
        _ => return false,
    }
    true
}

/// What the printer needs to know about a scope before printing it: which variables are
/// referenced, which function-valued bindings refer to their own variable, and the free
/// variables in order of first occurrence.
struct Scan {
    referenced: HashSet<VarId>,
    bound: HashSet<VarId>,
    self_ref: HashSet<VarId>,
    free: Vec<Var>,
}

impl Scan {
    /// Scans `body` with `params` already bound.
    fn expr(body: &Expr, params: &[Var]) -> Scan {
        let mut scan = Scan {
            referenced: HashSet::new(),
            bound: params.iter().map(Var::id).collect(),
            self_ref: HashSet::new(),
            free: Vec::new(),
        };
        scan.walk(body);
        scan
    }

    fn walk(&mut self, e: &Expr) {
        crate::ensure_sufficient_stack(|| self.walk_inner(e))
    }

    fn walk_inner(&mut self, e: &Expr) {
        match e.kind() {
            ExprKind::Constant(_) | ExprKind::Global(_) | ExprKind::Op(_) | ExprKind::Ctor(_) => {}
            ExprKind::Var(v) => {
                if self.referenced.insert(v.id()) && !self.bound.contains(&v.id()) {
                    self.free.push(v.clone());
                }
            }
            ExprKind::Call { callee, args, .. } => {
                self.walk(callee);
                args.iter().for_each(|a| self.walk(a));
            }
            ExprKind::Function(f) => {
                self.bound.extend(f.params.iter().map(Var::id));
                self.walk(&f.body);
            }
            ExprKind::Let { .. } => {
                let mut cur = e;
                while let ExprKind::Let { bindings, body } = cur.kind() {
                    for b in bindings {
                        let id = b.var.id();
                        self.bound.insert(id);
                        self.walk(&b.value);
                        if matches!(b.value.kind(), ExprKind::Function(_))
                            && self.referenced.contains(&id)
                        {
                            self.self_ref.insert(id);
                        }
                    }
                    cur = body;
                }
                self.walk(cur);
            }
            ExprKind::If {
                cond,
                then_branch,
                else_branch,
            } => {
                self.walk(cond);
                self.walk(then_branch);
                self.walk(else_branch);
            }
            ExprKind::Match {
                scrutinee, clauses, ..
            } => {
                self.walk(scrutinee);
                for c in clauses {
                    self.bind_pattern(&c.pattern);
                    self.walk(&c.body);
                }
            }
            ExprKind::Tuple(fields) => fields.iter().for_each(|f| self.walk(f)),
            ExprKind::Proj { tuple, .. } => self.walk(tuple),
            ExprKind::RefNew(x) | ExprKind::RefRead(x) => self.walk(x),
            ExprKind::RefWrite(r, v) => {
                self.walk(r);
                self.walk(v);
            }
        }
    }

    fn bind_pattern(&mut self, p: &Pattern) {
        match &p.kind {
            PatternKind::Wildcard => {}
            PatternKind::Var(v) => {
                self.bound.insert(v.id());
            }
            PatternKind::Ctor(_, fields) | PatternKind::Tuple(fields) => {
                fields.iter().for_each(|f| self.bind_pattern(f));
            }
        }
    }
}
