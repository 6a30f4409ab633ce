//! Deterministic generators of large Relay programs in TVM printer style, for the parse and
//! print benchmarks and for scale tests elsewhere in the workspace.
//!
//! Every generator is a pure function of its arguments: the same call always returns the same
//! text, so benchmark numbers from different runs measure the same input.

use std::fmt::Write;

/// The activation type every generated block computes on.
pub const ACTIVATION: &str = "Tensor[(1, 64, 56, 56), float32]";

/// The weight type of the generated convolutions.
pub const WEIGHT: &str = "Tensor[(64, 64, 3, 3), float32]";

/// Graph bindings per generated `def` in [`tvm_style_module`].
pub const BINDINGS_PER_DEF: usize = 400;

/// A module of roughly `target_bytes` bytes (never less) that looks like what TVM's printer
/// writes for a convolutional network after type inference: an `Option` ADT, then many
/// `def @block<i>`s, each with [`BINDINGS_PER_DEF`] graph bindings (`nn.conv2d`, `add`,
/// `nn.relu`, `multiply`, tuples and projections, `let`s) carrying `/* ty=... */` comments, and
/// every eighth block followed by a `def @select<i>` that `match`es over the ADT; `@main` calls
/// the first block.
pub fn tvm_style_module(target_bytes: usize) -> String {
    let mut out = String::with_capacity(target_bytes + 64 * 1024);
    out.push_str("#[version = \"0.0.5\"]\n");
    out.push_str("type Option[A] {\n  Some(A),\n  None,\n}\n\n");
    let mut index = 0;
    while out.len() < target_bytes || index == 0 {
        block(&mut out, index, BINDINGS_PER_DEF);
        if index % 8 == 7 {
            select(&mut out, index);
        }
        index += 1;
    }
    let _ = writeln!(
        out,
        "def @main(%data: {ACTIVATION}, %weight: {WEIGHT}) -> {ACTIVATION} {{\n  \
         @block0(%data, %weight) /* ty={ACTIVATION} */\n}}"
    );
    out
}

/// Writes `def @block<index>` with `bindings` graph bindings.
fn block(out: &mut String, index: usize, bindings: usize) {
    let t = ACTIVATION;
    let _ = writeln!(out, "def @block{index}(%x: {t}, %w: {WEIGHT}) -> {t} {{");
    // `current` is the value the next binding consumes; `residual` the input of the last
    // convolution, added back after it as in a residual network.
    let mut current = "%x".to_owned();
    let mut residual = "%x".to_owned();
    let mut graph = 0;
    for k in 0..bindings {
        let name = format!("%{graph}");
        let line = match k % 8 {
            0 => {
                residual = current.clone();
                format!(
                    "{name} = nn.conv2d({current}, %w, padding=[1, 1, 1, 1], channels=64, \
                     kernel_size=[3, 3]) /* ty={t} */;"
                )
            }
            1 => format!("{name} = add({current}, {residual}) /* ty={t} */;"),
            2 | 7 => format!("{name} = nn.relu({current}) /* ty={t} */;"),
            3 => format!("{name} = ({current}, {residual}) /* ty=({t}, {t}) */;"),
            4 => format!("{name} = {current}.0 /* ty={t} */;"),
            5 => {
                // A `let` in the middle of the graph bindings, as the printer writes for
                // let-bound values.
                let var = format!("%y{graph}");
                let line =
                    format!("let {var}: {t} = multiply({current}, {residual}) /* ty={t} */;");
                let _ = writeln!(out, "  {line}");
                current = var;
                continue;
            }
            _ => format!("{name} = add({current}, 1f /* ty=float32 */) /* ty={t} */;"),
        };
        let _ = writeln!(out, "  {line}");
        current = name;
        graph += 1;
    }
    let _ = writeln!(out, "  {current}\n}}\n");
}

/// Writes `def @select<index>`, a `match` over `Option` whose `Some` clause calls a block.
fn select(out: &mut String, index: usize) {
    let t = ACTIVATION;
    let _ = writeln!(
        out,
        "def @select{index}(%o: Option[{t}], %d: {t}, %w: {WEIGHT}) -> {t} {{\n  \
         match (%o) {{\n    \
         Some(%v) => {{\n      \
         %0 = @block{index}(%v, %w) /* ty={t} */;\n      \
         %1 = add(%0, %d) /* ty={t} */;\n      \
         nn.relu(%1) /* ty={t} */\n    \
         }},\n    \
         None => {{\n      \
         %d\n    \
         }},\n  \
         }}\n}}\n"
    );
}

/// A module whose `@main` is one chain of `n` graph bindings, each adding the previous value to
/// the input: `%0 = add(%x, %x); %1 = add(%0, %x); ...`. SPEC §1 requires 100,000 of them to go
/// through every stage without stack overflow.
pub fn chained_bindings(n: usize) -> String {
    let mut out = String::with_capacity(32 * n + 128);
    out.push_str("#[version = \"0.0.5\"]\n");
    out.push_str("def @main(%x: Tensor[(4), float32]) -> Tensor[(4), float32] {\n");
    let mut previous = "%x".to_owned();
    for i in 0..n {
        let _ = writeln!(out, "  %{i} = add({previous}, %x);");
        previous = format!("%{i}");
    }
    let _ = writeln!(out, "  {previous}\n}}");
    out
}

/// Whether a benchmark binary is measuring (`cargo bench`) rather than running once as a test
/// (`cargo test --benches`): the same rule criterion uses, `--bench` without `--test`.
pub fn bench_mode() -> bool {
    let mut bench = false;
    let mut test = false;
    for arg in std::env::args() {
        match arg.as_str() {
            "--bench" => bench = true,
            "--test" => test = true,
            _ => {}
        }
    }
    bench && !test
}

/// The text of `benches/programs/<file>`, or why it cannot be read.
pub fn program(file: &str) -> Result<String, String> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("programs")
        .join(file);
    std::fs::read_to_string(&path).map_err(|err| format!("cannot read {}: {err}", path.display()))
}

/// `text` (the contents of `file`) parsed and type-checked, or a message saying why not.
pub fn typed(text: &str, file: &str) -> Result<relay_ir::Module, String> {
    let module = relay_syntax::parse(text, file).map_err(|errors| {
        format!(
            "{file} does not parse:\n{}",
            relay_syntax::render_plain(&errors)
        )
    })?;
    relay_types::check_module(&module).map_err(|errors| {
        format!(
            "{file} does not type-check:\n{}",
            relay_syntax::render_plain(&errors)
        )
    })?;
    Ok(module)
}

/// `text` parsed, type-checked and lowered by the default pass pipeline, as `relayc opt` and
/// `relayc build` lower a file for the VM: the module [`relay_vm::compile`] takes.
pub fn lowered(text: &str, file: &str) -> Result<relay_ir::Module, String> {
    lower(typed(text, file)?, file)
}

/// A type-checked `module` (from `file`) lowered by the default pass pipeline, as [`lowered`]
/// lowers a parsed one.
pub fn lower(module: relay_ir::Module, file: &str) -> Result<relay_ir::Module, String> {
    let manager =
        relay_passes::PassManager::from_config(&relay_passes::PipelineConfig::default_pipeline());
    let (module, _timings) = manager
        .run(module)
        .map_err(|err| format!("{file}: the default pipeline fails: {err}"))?;
    Ok(module)
}

/// Program text to a runnable VM executable: [`lowered`], compiled to bytecode, and every
/// static kernel JIT-compiled ([`relay_vm::Executable::jit`]), so the first call pays no
/// compile time. Every call compiles afresh: a new executable owns new kernels.
pub fn executable(text: &str, file: &str) -> Result<relay_vm::Executable, String> {
    let module = lowered(text, file)?;
    let exe = relay_vm::compile(&module)
        .map_err(|err| format!("{file}: the VM compiler fails: {err}"))?;
    exe.jit().map_err(|errors| {
        let messages: Vec<String> = errors.iter().map(ToString::to_string).collect();
        format!(
            "{file}: {} kernel(s) do not compile:\n{}",
            messages.len(),
            messages.join("\n")
        )
    })?;
    Ok(exe)
}

/// `module` (type-checked) with every parameter of `@main` except `inputs` bound to a constant:
/// a seeded random tensor of the parameter's type ([`relay_interp::random_inputs`]), bound by
/// `relay::bind_params` (TVM's `bind_params_by_name`) as `relayc build --params` binds a
/// model's weights. The result is type-checked again, so its types reflect the constants.
pub fn bind_random_params(
    module: relay_ir::Module,
    inputs: &[&str],
    seed: u64,
) -> Result<relay_ir::Module, String> {
    let main = module
        .function(relay_ir::Symbol::intern("main"))
        .ok_or("the module has no @main")?;
    let values = relay_interp::random_inputs(&main.func, seed)?;
    let mut params = std::collections::HashMap::new();
    for (param, value) in main.func.params.iter().zip(values) {
        let name = param.name().as_str();
        if inputs.contains(&name) {
            continue;
        }
        let array = value
            .as_tensor()
            .ok_or_else(|| format!("`%{name}` is not a tensor"))?;
        params.insert(name.to_owned(), (**array).clone());
    }
    relay::bind_params(module, "main", &params)
        .map_err(|error| format!("cannot bind the parameters: {error}"))
}
