//! The VM's unboxed scalar kernels (`relay_vm::scalar`) compute exactly what the JIT-compiled
//! kernels and the reference interpreter compute: for every scalar operator and every dtype it
//! accepts, on edge values (zero, one, minus one, the dtype's extremes; for floats signed
//! zeros, infinities, NaN, subnormals) and seeded random ones, every pair for binary operators,
//! the three results must have identical bits (floats: or both be NaN), and an integer
//! division or modulo by zero must be an error in all three, with the same message.
//! `ScalarKernel::of` must recognize exactly the combinations `scalar.rs` documents (and none
//! the type checker accepts beyond them, such as `mod` on floats or `add` on booleans).
//! Operators with a constant operand (the kernel's one-operator fast path), composite kernels
//! nested up to depth 5 with constants, and kernels that fill the operand stack are held to
//! the same standard; scalar loops run by the VM end to end, under every pipeline
//! configuration, equal the interpreter for every integer dtype and both float dtypes.

mod common;

use std::fmt::Write as _;

use relay_ir::{DType, DTypeCode, Expr, ExprKind, Function, Module, NDArray, Symbol, Value};
use relay_kernel::PackedFunc;
use relay_vm::scalar::{Scalar, ScalarKernel};
use relay_vm::{Vm, VmErrorKind, VmOptions};

/// Every dtype a scalar kernel may compute in.
const DTYPES: [DType; 11] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
    DType::BOOL,
    DType::F32,
    DType::F64,
];

/// The integer dtypes.
const INT_DTYPES: [DType; 8] = [
    DType::I8,
    DType::I16,
    DType::I32,
    DType::I64,
    DType::U8,
    DType::U16,
    DType::U32,
    DType::U64,
];

/// How many seeded random values join the edge values of each dtype.
const RANDOM_VALUES: usize = 16;

/// The seed of the random values.
const SEED: u64 = 0x5ca1_a7ee;

/// The most mismatches printed in a failure message.
const SHOWN: usize = 40;

/// The text format's version header.
const VERSION: &str = "#[version = \"0.0.5\"]";

/// The class of a dtype, which decides which operators a scalar kernel accepts on it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Int,
    Bool,
    Float,
}

fn class(d: DType) -> Class {
    match d.code {
        DTypeCode::Bool => Class::Bool,
        DTypeCode::Float => Class::Float,
        _ => Class::Int,
    }
}

/// A scalar operator: its name, arity, and the classes of operand dtypes on which `scalar.rs`
/// evaluates it unboxed.
struct ScalarOp {
    name: &'static str,
    arity: usize,
    classes: &'static [Class],
}

const INT: &[Class] = &[Class::Int];
const INT_FLOAT: &[Class] = &[Class::Int, Class::Float];
const ALL: &[Class] = &[Class::Int, Class::Bool, Class::Float];
const BOOL: &[Class] = &[Class::Bool];

/// Every operator `ScalarKernel::compile` knows, with the dtype classes it accepts.
const OPS: &[ScalarOp] = &[
    op("add", 2, INT_FLOAT),
    op("subtract", 2, INT_FLOAT),
    op("multiply", 2, INT_FLOAT),
    op("divide", 2, INT_FLOAT),
    op("mod", 2, INT),
    op("floor_divide", 2, INT),
    op("floor_mod", 2, INT),
    op("equal", 2, ALL),
    op("not_equal", 2, ALL),
    op("less", 2, INT_FLOAT),
    op("less_equal", 2, INT_FLOAT),
    op("greater", 2, INT_FLOAT),
    op("greater_equal", 2, INT_FLOAT),
    op("logical_and", 2, BOOL),
    op("logical_or", 2, BOOL),
    op("maximum", 2, INT),
    op("minimum", 2, INT),
    op("negative", 1, INT_FLOAT),
    op("logical_not", 1, BOOL),
];

const fn op(name: &'static str, arity: usize, classes: &'static [Class]) -> ScalarOp {
    ScalarOp {
        name,
        arity,
        classes,
    }
}

/// SplitMix64: the seeded random values.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The test values of dtype `d`: its edge values, then seeded random ones.
fn values(d: DType, rng: &mut Rng) -> Vec<NDArray> {
    let ints = |vs: Vec<i128>| -> Vec<NDArray> {
        vs.into_iter()
            .map(|v| NDArray::scalar_i128(d, v).expect("an integer scalar"))
            .collect()
    };
    match (d.code, d.bits) {
        (DTypeCode::Bool, _) => ints(vec![0, 1]),
        (DTypeCode::Int, bits) => {
            let max = (1i128 << (bits - 1)) - 1;
            let min = -max - 1;
            let mut vs = vec![
                0,
                1,
                -1,
                2,
                -2,
                3,
                -3,
                7,
                -7,
                min,
                min + 1,
                max,
                max - 1,
                min / 2,
                max / 3,
            ];
            // Random values of every magnitude: a random bit pattern shifted right by a random
            // amount, wrapped to the dtype by `scalar_i128`.
            for _ in 0..RANDOM_VALUES {
                let shift = rng.next() % 64;
                vs.push(i128::from((rng.next() as i64) >> shift));
            }
            ints(vs)
        }
        (_, bits) if d.code == DTypeCode::UInt => {
            let max = (1i128 << bits) - 1;
            let half = 1i128 << (bits - 1);
            let mut vs = vec![
                0,
                1,
                2,
                3,
                7,
                max,
                max - 1,
                half,
                half - 1,
                half + 1,
                max / 3,
            ];
            for _ in 0..RANDOM_VALUES {
                let shift = rng.next() % 64;
                vs.push(i128::from(rng.next() >> shift));
            }
            ints(vs)
        }
        (_, 32) => {
            let mut vs: Vec<f32> = vec![
                0.0,
                -0.0,
                1.0,
                -1.0,
                2.0,
                -2.0,
                0.5,
                3.0,
                0.1,
                -0.1,
                1.0 / 3.0,
                1e38,
                -1e38,
                1e-38,
                f32::MAX,
                f32::MIN,
                f32::MIN_POSITIVE,
                f32::from_bits(1),
                f32::from_bits(0x8000_0001),
                f32::from_bits(0x007f_ffff),
                16_777_216.0,
                f32::INFINITY,
                f32::NEG_INFINITY,
                f32::NAN,
                -f32::NAN,
            ];
            for i in 0..RANDOM_VALUES {
                let bits = rng.next() as u32;
                vs.push(if i % 2 == 0 {
                    f32::from_bits(bits)
                } else {
                    // A moderate value with a random mantissa.
                    (bits as i32 as f32) / 65_536.0
                });
            }
            vs.into_iter()
                .map(|v| NDArray::from_bytes(d, &[], &v.to_ne_bytes()).expect("a float32 scalar"))
                .collect()
        }
        _ => {
            let mut vs: Vec<f64> = vec![
                0.0,
                -0.0,
                1.0,
                -1.0,
                2.0,
                -2.0,
                0.5,
                3.0,
                0.1,
                -0.1,
                1.0 / 3.0,
                1e38,
                -1e38,
                1e308,
                -1e308,
                1e-308,
                f64::MAX,
                f64::MIN,
                f64::MIN_POSITIVE,
                f64::from_bits(1),
                f64::from_bits(0x8000_0000_0000_0001),
                f64::from_bits(0x000f_ffff_ffff_ffff),
                9_007_199_254_740_992.0,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                -f64::NAN,
            ];
            for i in 0..RANDOM_VALUES {
                let bits = rng.next();
                vs.push(if i % 2 == 0 {
                    f64::from_bits(bits)
                } else {
                    (bits as i64 as f64) / 4_294_967_296.0
                });
            }
            vs.into_iter()
                .map(|v| NDArray::from_bytes(d, &[], &v.to_ne_bytes()).expect("a float64 scalar"))
                .collect()
        }
    }
}

/// A scalar as text, with its bits for floats.
fn show(t: &NDArray) -> String {
    let d = t.dtype();
    if d.is_float() {
        let v = t.to_f64_vec()[0];
        let bits: String = t
            .as_bytes()
            .iter()
            .rev()
            .map(|b| format!("{b:02x}"))
            .collect();
        format!(
            "{v:e}{} (0x{bits})",
            if d.bits == 32 { "f32" } else { "f64" }
        )
    } else {
        format!("{}:{d}", t.to_i128_vec()[0])
    }
}

/// Whether two results are the same scalar: dtype and shape equal, identical bytes, or both
/// NaN.
fn same(a: &NDArray, b: &NDArray) -> bool {
    if a.dtype() != b.dtype() || a.shape() != b.shape() {
        return false;
    }
    if a.as_bytes() == b.as_bytes() {
        return true;
    }
    a.dtype().is_float() && a.to_f64_vec()[0].is_nan() && b.to_f64_vec()[0].is_nan()
}

/// What one evaluation gave: a rank-0 tensor or an error message.
type Outcome = Result<NDArray, String>;

fn show_outcome(o: &Outcome) -> String {
    match o {
        Ok(t) => show(t),
        Err(e) => format!("error `{e}`"),
    }
}

/// Whether the scalar kernel's outcome agrees with `other`: the same scalar, or errors both,
/// `other`'s message containing the scalar kernel's (division vs modulo by zero).
fn agrees(scalar: &Outcome, other: &Outcome) -> bool {
    match (scalar, other) {
        (Ok(a), Ok(b)) => same(a, b),
        (Err(a), Err(b)) => b.contains(a.as_str()),
        _ => false,
    }
}

/// A program under test: the type-checked source module (for the interpreter), its one
/// primitive function after the default pipeline, and that primitive's JIT kernel and scalar
/// kernel.
struct Case {
    what: String,
    source: Module,
    primitive: Function,
    /// The JIT kernel, or why it does not compile (then every call is that error).
    kernel: Result<PackedFunc, String>,
    scalar: Option<ScalarKernel>,
    /// For each parameter of the primitive, the index of `@main`'s parameter passed to it
    /// (fusion orders a primitive's parameters by first use).
    order: Vec<usize>,
}

/// For each argument of the one `vm.invoke_tvm_op` call in `@main` of the lowered `module`,
/// the index of the `@main` parameter it is.
fn argument_order(module: &Module, what: &str) -> Vec<usize> {
    fn find(e: &Expr, out: &mut Vec<Vec<Expr>>) {
        if let ExprKind::Call { callee, args, .. } = e.kind()
            && let ExprKind::Op(op) = callee.kind()
            && op.name == "vm.invoke_tvm_op"
            && let Some(ExprKind::Tuple(inputs)) = args.get(1).map(Expr::kind)
        {
            out.push(inputs.clone());
        }
        relay_ir::visit::for_each_child(e, |c| find(c, out));
    }
    let main = module
        .function(Symbol::intern("main"))
        .unwrap_or_else(|| panic!("{what}: no @main after lowering"));
    let mut calls = Vec::new();
    find(&main.func.body, &mut calls);
    let [inputs] = calls.as_slice() else {
        panic!(
            "{what}: {} kernel calls in @main, expected one",
            calls.len()
        );
    };
    inputs
        .iter()
        .map(|e| match e.kind() {
            ExprKind::Var(v) => main
                .func
                .params
                .iter()
                .position(|p| p.id() == v.id())
                .unwrap_or_else(|| panic!("{what}: a kernel input is not a parameter of @main")),
            _ => panic!("{what}: a kernel input is not a variable"),
        })
        .collect()
}

impl Case {
    /// Parses, type-checks and lowers `text`, which must lower to exactly one primitive
    /// function. `Err` when it does not type-check (the type checker rejects the operator on
    /// the dtype).
    fn new(what: &str, text: &str) -> Result<Case, String> {
        Case::lower(what, text)?.ok_or_else(|| panic!("{what}: the pipeline made no kernel"))
    }

    /// [`Case::new`], or `None` when the pipeline removes every operator call (it simplified
    /// or folded the whole body).
    fn lower(what: &str, text: &str) -> Result<Option<Case>, String> {
        let text = format!("{VERSION}\n{text}");
        let text = text.as_str();
        let source = common::typed(text, "scalar.relay").inspect_err(|e| {
            assert!(!e.starts_with("does not parse"), "{what}: {e}\n{text}");
        })?;
        let lowered = common::lower(&source, common::Config::DEFAULT)
            .unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
        let primitives = relay_kernel::primitive_functions(&lowered);
        let (name, primitive) = match primitives.as_slice() {
            [] => return Ok(None),
            [(name, primitive)] => (name, primitive),
            _ => panic!(
                "{what}: expected one primitive function, the pipeline made {}:\n{}",
                primitives.len(),
                relay_ir::print_module(&lowered, &relay_ir::PrintOptions::default())
            ),
        };
        Ok(Some(Case {
            what: what.to_owned(),
            order: argument_order(&lowered, what),
            scalar: ScalarKernel::of(primitive),
            source,
            primitive: primitive.clone(),
            kernel: relay_kernel::compile_primitive(primitive, name).map_err(|e| e.to_string()),
        }))
    }

    /// The three outcomes on `inputs`: the scalar kernel's, the JIT kernel's and the
    /// interpreter's.
    fn run(&self, scalar: &ScalarKernel, main_inputs: &[&NDArray]) -> [Outcome; 3] {
        let inputs: Vec<&NDArray> = self.order.iter().map(|&i| main_inputs[i]).collect();
        let inputs = inputs.as_slice();
        let args: Vec<Scalar> = inputs
            .iter()
            .map(|t| {
                Scalar::of_tensor(t)
                    .unwrap_or_else(|| panic!("{}: no scalar of {}", self.what, show(t)))
            })
            .collect();
        let by_scalar = scalar.eval(&args).map_err(|e| e.0.to_owned()).map(|s| {
            s.to_tensor()
                .unwrap_or_else(|e| panic!("{}: the scalar's tensor: {e}", self.what))
        });
        let by_kernel = {
            let mut outputs = relay_kernel::output_arrays(&self.primitive)
                .unwrap_or_else(|e| panic!("{}: no output arrays: {e}", self.what));
            let [out] = outputs.as_mut_slice() else {
                panic!("{}: the kernel has {} outputs", self.what, outputs.len());
            };
            match &self.kernel {
                Ok(kernel) => kernel
                    .call(inputs, &mut [out])
                    .map(|()| out.clone())
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e.clone()),
            }
        };
        let by_interp = relay_interp::run(
            &self.source,
            "main",
            main_inputs
                .iter()
                .map(|t| Value::tensor((*t).clone()))
                .collect(),
            &relay_interp::InterpOptions::default(),
        )
        .map_err(|e| e.to_string())
        .and_then(|v| {
            v.as_tensor()
                .map(|t| t.as_ref().clone())
                .ok_or_else(|| format!("not a tensor: {}", v.kind_name()))
        });
        [by_scalar, by_kernel, by_interp]
    }

    /// Evaluates the case on every combination of `values` (one list per parameter), adding
    /// every disagreement to `mismatches`; returns how many evaluations were errors.
    fn check_all(&self, values: &[Vec<NDArray>], mismatches: &mut Vec<String>) -> usize {
        let scalar = self
            .scalar
            .as_ref()
            .unwrap_or_else(|| panic!("{}: not a scalar kernel", self.what));
        let mut errors = 0;
        let mut index = vec![0usize; values.len()];
        if values.iter().any(Vec::is_empty) {
            return 0;
        }
        loop {
            let inputs: Vec<&NDArray> = index.iter().zip(values).map(|(&i, v)| &v[i]).collect();
            let [s, k, i] = self.run(scalar, &inputs);
            errors += usize::from(s.is_err());
            if !agrees(&s, &k) || !agrees(&s, &i) {
                let args: Vec<String> = inputs.iter().map(|t| show(t)).collect();
                mismatches.push(format!(
                    "{} on ({}): scalar {}, kernel {}, interpreter {}",
                    self.what,
                    args.join(", "),
                    show_outcome(&s),
                    show_outcome(&k),
                    show_outcome(&i)
                ));
            }
            // The next combination, the last parameter fastest.
            let mut p = values.len();
            loop {
                if p == 0 {
                    return errors;
                }
                p -= 1;
                index[p] += 1;
                if index[p] < values[p].len() {
                    break;
                }
                index[p] = 0;
            }
        }
    }
}

/// Fails with the first [`SHOWN`] mismatches, if any.
fn assert_no_mismatches(mismatches: &[String]) {
    if mismatches.is_empty() {
        return;
    }
    let mut text = format!("{} mismatches:\n", mismatches.len());
    for m in mismatches.iter().take(SHOWN) {
        let _ = writeln!(text, "  {m}");
    }
    panic!("{text}");
}

#[test]
fn every_operator_on_every_dtype_matches_the_kernel_and_the_interpreter_bit_for_bit() {
    let mut rng = Rng(SEED);
    let mut mismatches = Vec::new();
    let mut checked = 0;
    let mut errors = 0;
    let (mut recognized, mut excluded, mut rejected) = (Vec::new(), Vec::new(), Vec::new());
    for d in DTYPES {
        let vals = values(d, &mut rng);
        for t in &vals {
            let s = Scalar::of_tensor(t).unwrap_or_else(|| panic!("no scalar of {}", show(t)));
            let back = s.to_tensor().expect("a scalar's tensor");
            assert!(
                same(&back, t),
                "{d}: {} round-trips to {}",
                show(t),
                show(&back)
            );
        }
        for o in OPS {
            let params: Vec<String> = (0..o.arity).map(|i| format!("%p{i}: {d}")).collect();
            let args: Vec<String> = (0..o.arity).map(|i| format!("%p{i}")).collect();
            let text = format!(
                "def @main({}) {{ {}({}) }}",
                params.join(", "),
                o.name,
                args.join(", ")
            );
            let what = format!("{}:{d}", o.name);
            let expected = o.classes.contains(&class(d));
            let case = match Case::new(&what, &text) {
                Ok(case) => case,
                Err(e) => {
                    assert!(
                        !expected,
                        "{what}: a scalar combination the type checker rejects: {e}"
                    );
                    rejected.push(what);
                    continue;
                }
            };
            assert_eq!(
                case.scalar.is_some(),
                expected,
                "{what}: ScalarKernel::of is {:?}, scalar.rs evaluates {} on {:?} unboxed",
                case.scalar.as_ref().map(|_| "Some"),
                o.name,
                o.classes
            );
            if !expected {
                excluded.push(what);
                continue;
            }
            recognized.push(what);
            let inputs = vec![vals.clone(); o.arity];
            checked += inputs.iter().map(Vec::len).product::<usize>();
            errors += case.check_all(&inputs, &mut mismatches);
        }
    }
    eprintln!(
        "{} operator/dtype pairs, {checked} evaluations ({errors} errors): {}",
        recognized.len(),
        recognized.join(" ")
    );
    eprintln!(
        "type-checked, not scalar kernels: {}\nrejected by the type checker: {}",
        excluded.join(" "),
        rejected.join(" ")
    );
    // Integer division and modulo by zero, four operators on eight dtypes, each with zero
    // among the values.
    assert!(errors > 0, "no evaluation divided by zero");
    assert_no_mismatches(&mismatches);
}

/// Literals of dtype `d` for constant operands: zero, one and extremes (floats: signed zeros,
/// infinities, NaN, a subnormal).
fn constants(d: DType) -> Vec<String> {
    match (d.code, d.bits) {
        (DTypeCode::Int, bits) => {
            let max = (1i128 << (bits - 1)) - 1;
            vec![
                format!("0i{bits}"),
                format!("1i{bits}"),
                format!("-1i{bits}"),
                format!("{}i{bits}", -max - 1),
                format!("{max}i{bits}"),
            ]
        }
        (DTypeCode::UInt, bits) => {
            let max = if bits == 64 { -1 } else { (1i64 << bits) - 1 };
            [0, 1, 7, max]
                .iter()
                .map(|v| format!("cast({v}i64, dtype=\"{d}\")"))
                .collect()
        }
        (DTypeCode::Float, bits) => {
            let w = if bits == 32 { "" } else { "64" };
            let tiny = if bits == 32 { "1e-45" } else { "5e-324" };
            ["0", "-0", "1", "1e-1", "1e38", "inf", "-inf", "nan", tiny]
                .iter()
                .map(|v| format!("{v}f{w}"))
                .collect()
        }
        _ => vec!["True".to_owned(), "False".to_owned()],
    }
}

#[test]
fn operators_with_a_constant_operand_match_the_kernel_and_the_interpreter_bit_for_bit() {
    let mut rng = Rng(SEED ^ 4);
    let mut mismatches = Vec::new();
    let (mut checked, mut folded) = (0, 0);
    for d in DTYPES {
        let vals = values(d, &mut rng);
        for o in OPS
            .iter()
            .filter(|o| o.arity == 2 && o.classes.contains(&class(d)))
        {
            for c in constants(d) {
                for text in [
                    format!("def @main(%a: {d}) {{ {}(%a, {c}) }}", o.name),
                    format!("def @main(%a: {d}) {{ {}({c}, %a) }}", o.name),
                ] {
                    let what = format!("{text} ({d})");
                    let Some(case) =
                        Case::lower(&what, &text).unwrap_or_else(|e| panic!("{what}: {e}"))
                    else {
                        folded += 1;
                        continue;
                    };
                    assert!(case.scalar.is_some(), "{what}: not a scalar kernel");
                    checked += vals.len();
                    case.check_all(std::slice::from_ref(&vals), &mut mismatches);
                }
            }
        }
    }
    eprintln!("{checked} evaluations with a constant operand ({folded} programs simplified away)");
    assert_no_mismatches(&mismatches);
}

/// A literal of dtype `d` with value `v` (unsigned ones through a `cast`, which the
/// pipeline folds into a constant).
fn lit(d: DType, v: i64) -> String {
    match (d.code, d.bits) {
        (DTypeCode::Int, bits) => format!("{v}i{bits}"),
        (DTypeCode::UInt, _) => format!("cast({v}i64, dtype=\"{d}\")"),
        (DTypeCode::Float, 32) => format!("{v}f"),
        (DTypeCode::Float, _) => format!("{v}f64"),
        _ => (if v == 0 { "False" } else { "True" }).to_owned(),
    }
}

/// Expands a composite template: `%a`, `%b`, `%c` are parameters of dtype `d`, `$0`, `$1`,
/// `$2`, `$3` and `$-1` literals of `d`.
fn expand(template: &str, d: DType) -> String {
    let mut body = template.to_owned();
    for v in [-1i64, 0, 1, 2, 3] {
        body = body.replace(&format!("${v}"), &lit(d, v));
    }
    let params: Vec<String> = ["%a", "%b", "%c"]
        .iter()
        .filter(|p| template.contains(*p))
        .map(|p| format!("{p}: {d}"))
        .collect();
    format!("def @main({}) {{ {body} }}", params.join(", "))
}

/// Composite kernels on integers (and floats where they use only float-scalar operators).
const INT_COMPOSITES: &[&str] = &[
    "multiply(add(%a, %b), subtract(%a, $1))",
    "logical_and(less(%a, %b), not_equal(%b, $0))",
    "logical_or(logical_not(equal(%a, %b)), greater_equal(maximum(%a, %b), minimum(%a, $2)))",
    "floor_mod(add(multiply(%a, $3), negative(%b)), add(%b, $1))",
    "subtract(multiply(add(divide(%a, add(%b, $1)), mod(%a, $2)), floor_divide(%b, $3)), \
     maximum(negative(%a), minimum(%b, %a)))",
    "add(multiply(%a, %b), floor_divide(%c, subtract(%a, %b)))",
    "logical_and(logical_or(less_equal(%a, %b), greater(%c, $-1)), \
     logical_not(equal(mod(%a, add(%c, $2)), $0)))",
    "minimum(maximum(%a, multiply(%b, $-1)), floor_mod(%c, $3))",
    "not_equal(less(%a, %b), equal(logical_not(greater(%b, %a)), less_equal(%a, $0)))",
];

const FLOAT_COMPOSITES: &[&str] = &[
    "multiply(add(%a, %b), subtract(%a, $1))",
    "logical_and(less(%a, %b), not_equal(%b, $0))",
    "divide(add(multiply(%a, %a), %b), subtract(%b, $2))",
    "less_equal(negative(divide(%a, %b)), add(%a, multiply(%b, $3)))",
    "subtract(multiply(add(divide(%a, add(%b, $1)), multiply(%a, $2)), divide(%b, $3)), \
     negative(subtract(%a, %b)))",
    "logical_or(logical_not(greater(add(%a, %c), %b)), equal(multiply(%a, %b), %c))",
];

const BOOL_COMPOSITES: &[&str] = &[
    "logical_or(logical_and(%a, logical_not(%b)), equal(%a, %b))",
    "not_equal(logical_not(logical_and(%a, %b)), logical_or(%c, $0))",
    "logical_and(logical_or(%a, logical_not(logical_and(%b, logical_not(%c)))), $1)",
];

#[test]
fn composite_kernels_match_the_kernel_and_the_interpreter_bit_for_bit() {
    let mut rng = Rng(SEED ^ 1);
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for d in DTYPES {
        let templates = match class(d) {
            Class::Int => INT_COMPOSITES,
            Class::Float => FLOAT_COMPOSITES,
            Class::Bool => BOOL_COMPOSITES,
        };
        let mut vals = values(d, &mut rng);
        for template in templates {
            let text = expand(template, d);
            let what = format!("{template}:{d}");
            let case = Case::new(&what, &text).unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
            assert!(
                case.scalar.is_some(),
                "{what}: ScalarKernel::of does not recognize the composite kernel:\n{}",
                relay_ir::print_expr(
                    &relay_ir::Expr::new(
                        relay_ir::ExprKind::Function(case.primitive.clone()),
                        relay_ir::Span::DUMMY
                    ),
                    &relay_ir::PrintOptions::default()
                )
            );
            let arity = case.primitive.params.len();
            // Three parameters: fewer values, so the product stays small.
            if arity == 3 {
                vals.truncate(14);
            }
            let inputs = vec![vals.clone(); arity];
            checked += inputs.iter().map(Vec::len).product::<usize>();
            case.check_all(&inputs, &mut mismatches);
        }
    }
    eprintln!("{checked} composite evaluations");
    assert_no_mismatches(&mismatches);
}

/// The program `@main(%a: int32, %b: int32)` computing `body`.
fn int32_program(body: &str) -> String {
    format!("def @main(%a: int32, %b: int32) {{ {body} }}")
}

#[test]
fn scalar_kernels_use_the_whole_operand_stack_and_no_more() {
    let mut rng = Rng(SEED ^ 2);
    let vals = values(DType::I32, &mut rng);
    let mut mismatches = Vec::new();
    // A left-nested chain needs two stack slots however long.
    let left = (0..20).fold("%a".to_owned(), |e, _| format!("subtract({e}, %b)"));
    let long = Case::new("left chain", &int32_program(&left)).expect("the chain type-checks");
    assert!(
        long.scalar.is_some(),
        "a left-nested chain of 20 subtracts is a scalar kernel"
    );
    long.check_all(&[vals.clone(), vals.clone()], &mut mismatches);
    // A right-nested chain of n operators needs n + 1 slots: 15 fill the 16 there are.
    let right = |n| (0..n).fold("%a".to_owned(), |e, _| format!("subtract(%b, {e})"));
    let full =
        Case::new("right chain of 15", &int32_program(&right(15))).expect("the chain type-checks");
    assert!(
        full.scalar.is_some(),
        "a right-nested chain of 15 subtracts is a scalar kernel"
    );
    full.check_all(&[vals.clone(), vals], &mut mismatches);
    assert_no_mismatches(&mismatches);
    let deep =
        Case::new("right chain of 16", &int32_program(&right(16))).expect("the chain type-checks");
    assert!(
        deep.scalar.is_none(),
        "a right-nested chain of 16 subtracts needs 17 stack slots, more than the 16 there are"
    );
}

#[test]
fn results_are_compared_bit_for_bit() {
    let f32s = |v: f32| NDArray::from_bytes(DType::F32, &[], &v.to_ne_bytes()).expect("a scalar");
    assert!(
        same(&f32s(f32::NAN), &f32s(-f32::NAN)),
        "NaNs are the same result"
    );
    assert!(!same(&f32s(0.0), &f32s(-0.0)), "+0 and -0 differ");
    assert!(!same(&f32s(1.0), &f32s(f32::NAN)), "a number is not NaN");
    let int = |d, v| NDArray::scalar_i128(d, v).expect("a scalar");
    assert!(
        !same(&int(DType::I32, 1), &int(DType::I64, 1)),
        "dtypes differ"
    );
    assert!(!same(&int(DType::U8, 255), &int(DType::U8, 254)));
    let div = Err("integer division by zero".to_owned());
    let modulo = Err("kernel k: integer modulo by zero".to_owned());
    assert!(!agrees(&div, &modulo), "division and modulo by zero differ");
    assert!(
        !agrees(&div, &Ok(int(DType::I32, 0))),
        "an error is not a value"
    );
    assert!(agrees(
        &div,
        &Err("operator `divide`: integer division by zero".to_owned())
    ));
}

/// A scalar loop in dtype `d`: `@main(%n, %acc, %k)` iterates `%n` times over arithmetic,
/// division, modulo, comparisons and `maximum`/`minimum` of its counter, accumulator and `%k`
/// (dividing by `%k + 1`: an error when `%k` is -1 or the dtype's maximum).
fn scalar_loop(d: DType) -> String {
    let l = |v| lit(d, v);
    format!(
        r#"{VERSION}
def @loop(%i: {d}, %n: {d}, %acc: {d}, %k: {d}) -> {d} {{
  if (greater_equal(%i, %n)) {{
    %acc
  }} else {{
    let %q = divide(%acc, add(%k, {one}));
    let %r = floor_mod(add(%acc, %i), add(%k, {one}));
    let %m = maximum(minimum(multiply(%acc, {three}), %q), subtract(%r, %i));
    let %next = if (logical_and(less(%q, %r), not_equal(%i, {two}))) {{
      add(%m, mod(%i, {three}))
    }} else {{
      subtract(floor_divide(%m, {two}), negative(%k))
    }};
    @loop(add(%i, {one}), %n, %next, %k)
  }}
}}

def @main(%n: {d}, %acc: {d}, %k: {d}) -> {d} {{
  @loop({zero}, %n, %acc, %k)
}}
"#,
        zero = l(0),
        one = l(1),
        two = l(2),
        three = l(3),
    )
}

/// Runs `@main` of `text` on each of `inputs` on the VM, with the executable built by every
/// pipeline configuration, and on the interpreter: the results must be the same scalars
/// (bit for bit, or both NaN), or both runs fail dividing by zero. Some kernel call must have
/// been evaluated unboxed. Returns how many inputs failed.
fn vm_equals_interpreter(what: &str, text: &str, inputs: &[Vec<Value>]) -> usize {
    let module =
        common::typed(text, "scalar_loop.relay").unwrap_or_else(|e| panic!("{what}: {e}\n{text}"));
    let expected: Vec<Result<Value, String>> = inputs
        .iter()
        .map(|args| {
            relay_interp::run(
                &module,
                "main",
                args.clone(),
                &relay_interp::InterpOptions::default(),
            )
            .map_err(|e| e.to_string())
        })
        .collect();
    let failures = expected.iter().filter(|r| r.is_err()).count();
    for config in common::Config::ALL {
        let exe = common::build_with(text, "scalar_loop.relay", config);
        let mut vm = Vm::with_options(
            &exe,
            VmOptions {
                profile: true,
                ..VmOptions::default()
            },
        );
        for (args, by_interp) in inputs.iter().zip(&expected) {
            let by_vm = vm.invoke("main", args);
            let shown: Vec<String> = args
                .iter()
                .map(|a| a.as_tensor().map_or_else(|| "?".to_owned(), |t| show(t)))
                .collect();
            let what = format!("{what} ({config}) on ({})", shown.join(", "));
            match (&by_vm, by_interp) {
                (Ok(v), Ok(i)) => {
                    let (v, i) = (
                        v.as_tensor().expect("the VM's result is a tensor"),
                        i.as_tensor().expect("the interpreter's result is a tensor"),
                    );
                    assert!(
                        same(v, i),
                        "{what}: the VM gives {}, the interpreter {}\n{}",
                        show(v),
                        show(i),
                        common::disassemble(&exe)
                    );
                }
                (Err(v), Err(i)) => {
                    assert_eq!(v.kind, VmErrorKind::Kernel, "{what}: {v}");
                    assert!(
                        v.message.contains("by zero") && i.contains("by zero"),
                        "{what}: the VM fails with `{v}`, the interpreter with `{i}`"
                    );
                }
                _ => panic!(
                    "{what}: the VM gives {:?}, the interpreter {:?}",
                    by_vm
                        .as_ref()
                        .map(|v| relay_interp::format_value(v, None, &module)),
                    by_interp
                        .as_ref()
                        .map(|v| relay_interp::format_value(v, None, &module))
                ),
            }
        }
        let profile = vm.take_profile().expect("profiling is on");
        assert!(
            profile
                .kernels
                .iter()
                .any(|k| k.calls > 0 && k.arg_shapes == "scalar (unboxed)"),
            "{what} ({config}): no kernel call was evaluated unboxed:\n{profile}\n{}",
            common::disassemble(&exe)
        );
    }
    failures
}

#[test]
fn scalar_loops_in_the_vm_equal_the_interpreter_for_every_integer_dtype() {
    let mut rng = Rng(SEED ^ 3);
    for d in INT_DTYPES {
        let signed = d.code == DTypeCode::Int;
        let mut ks: Vec<i128> = vec![0, 1, 2, 5, 100];
        if signed {
            ks.extend([-1, -2, -100]);
        } else {
            ks.push((1i128 << d.bits) - 1);
        }
        let mut accs: Vec<i128> = vec![0, 1, 7, 100];
        for _ in 0..4 {
            accs.push(i128::from(rng.next() as i64));
        }
        let scalar = |v: i128| Value::tensor(NDArray::scalar_i128(d, v).expect("a scalar"));
        let inputs: Vec<Vec<Value>> = ks
            .iter()
            .flat_map(|&k| accs.iter().map(move |&acc| (k, acc)))
            .map(|(k, acc)| vec![scalar(100), scalar(acc), scalar(k)])
            .collect();
        let failures = vm_equals_interpreter(&format!("{d} loop"), &scalar_loop(d), &inputs);
        // `%k` = -1 (signed) or the maximum (unsigned) divides by zero in the first iteration.
        assert_eq!(failures, accs.len(), "{d}: one value of %k divides by zero");
    }
}

/// A scalar loop in float dtype `d`: 50 iterations of arithmetic and comparisons on `%x`
/// and `%y`, with a branch on a comparison.
fn float_loop(d: DType) -> String {
    let l = |v| lit(d, v);
    format!(
        r#"{VERSION}
def @loop(%i: int64, %x: {d}, %y: {d}) -> {d} {{
  if (%i == 0i64) {{
    %x
  }} else {{
    let %z = divide(add(multiply(%x, %x), %y), add(%x, {one}));
    let %w = if (logical_and(less(%z, %y), not_equal(%x, {zero}))) {{
      subtract(%z, negative(%y))
    }} else {{
      divide(%z, {three})
    }};
    @loop(subtract(%i, 1i64), %w, %y)
  }}
}}

def @main(%x: {d}, %y: {d}) -> {d} {{
  @loop(50i64, %x, %y)
}}
"#,
        zero = l(0),
        one = l(1),
        three = l(3),
    )
}

#[test]
fn float_scalar_loops_in_the_vm_equal_the_interpreter_bit_for_bit() {
    let mut rng = Rng(SEED ^ 5);
    for d in [DType::F32, DType::F64] {
        let vals: Vec<Value> = values(d, &mut rng)
            .into_iter()
            .step_by(3)
            .map(Value::tensor)
            .collect();
        let inputs: Vec<Vec<Value>> = vals
            .iter()
            .flat_map(|x| vals.iter().map(move |y| vec![x.clone(), y.clone()]))
            .collect();
        let failures = vm_equals_interpreter(&format!("{d} loop"), &float_loop(d), &inputs);
        assert_eq!(failures, 0, "{d}: float arithmetic never fails");
    }
}
