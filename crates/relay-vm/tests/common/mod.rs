//! What the VM's integration tests share: parsing and type-checking a program, lowering it
//! with the pass pipeline at a given configuration, compiling it to an executable, and the
//! float tolerances results are compared with.

// Each test binary uses part of this module.
#![allow(dead_code)]

use std::fmt;

use relay_ir::{DType, Module, NDArray, Symbol, Value};
use relay_passes::{PassManager, PipelineConfig};
use relay_vm::Executable;

/// The seed of the random inputs for `@main` (the one the pass tests use).
pub const INPUT_SEED: u64 = 0x5eed;

/// SPEC §4's tolerance (rtol, atol) for elementwise results.
pub const STRICT: (f64, f64) = (1e-5, 1e-6);

/// SPEC §4's tolerance (rtol, atol) for reductions, contractions, convolutions, pools and
/// softmax, whose kernels sum in a different order than the reference operators.
pub const LOOSE: (f64, f64) = (1e-4, 1e-5);

/// Operators whose kernels may sum in a different order than the reference: a program that
/// calls one of them is compared within [`LOOSE`].
const ACCUMULATING_OPERATORS: &[&str] = &[
    "sum(",
    "mean(",
    "prod(",
    "variance(",
    "std(",
    "nn.dense",
    "nn.matmul",
    "nn.batch_matmul",
    "nn.conv2d",
    "pool2d",
    "nn.softmax",
    "nn.log_softmax",
    "nn.layer_norm",
    "nn.batch_norm",
    "logsumexp",
];

/// The tolerance SPEC §4 gives the results of the program `text`.
pub fn tolerance(text: &str) -> (f64, f64) {
    let accumulates = ACCUMULATING_OPERATORS.iter().any(|op| text.contains(op));
    if accumulates && text.contains("float16") {
        // A float16 contraction accumulates in float32 (the GEMM), the reference in float64:
        // a result may differ by one float16 ulp (a relative 2^-10).
        (1e-3, LOOSE.1)
    } else if accumulates {
        LOOSE
    } else {
        STRICT
    }
}

/// One pipeline configuration the VM is tested under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// The pipeline's opt level.
    pub opt_level: u32,
    /// Whether `plan_memory` runs (it is skipped through `[debug] skip` otherwise).
    pub plan_memory: bool,
}

impl Config {
    /// The default pipeline (`passes.toml`, opt level 2, every pass).
    pub const DEFAULT: Config = Config {
        opt_level: 2,
        plan_memory: true,
    };

    /// Every configuration: opt levels 0 and 2, with and without `plan_memory`.
    pub const ALL: [Config; 4] = [
        Config {
            opt_level: 0,
            plan_memory: true,
        },
        Config {
            opt_level: 0,
            plan_memory: false,
        },
        Config {
            opt_level: 2,
            plan_memory: true,
        },
        Config {
            opt_level: 2,
            plan_memory: false,
        },
    ];

    /// The pass manager of this configuration: the default pipeline at `opt_level`, with
    /// `plan_memory` in the skip list when it is off.
    pub fn manager(self) -> PassManager {
        let mut config = PipelineConfig::default_pipeline();
        config.opt_level = self.opt_level;
        if !self.plan_memory {
            config.debug.skip.push("plan_memory");
        }
        PassManager::from_config(&config)
    }
}

impl fmt::Display for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "opt-level={}", self.opt_level)?;
        if !self.plan_memory {
            f.write_str(" skip=plan_memory")?;
        }
        Ok(())
    }
}

/// Parses and type-checks `text` (named `name` in locations).
pub fn typed(text: &str, name: &str) -> Result<Module, String> {
    let module = relay_syntax::parse(text, name).map_err(|e| format!("does not parse: {e:?}"))?;
    relay_types::check_module(&module)
        .map_err(|e| format!("does not type-check: {}", relay_syntax::render_plain(&e)))?;
    Ok(module)
}

/// Runs `config`'s pipeline on the type-checked `module`.
pub fn lower(module: &Module, config: Config) -> Result<Module, String> {
    config
        .manager()
        .run(module.clone())
        .map(|(lowered, _)| lowered)
        .map_err(|e| format!("the pipeline fails: {}", relay_syntax::render_plain(&e)))
}

/// Lowers the type-checked `module` with `config` and compiles it to an executable, checked
/// with [`Executable::validate`].
pub fn compile(module: &Module, config: Config) -> Result<Executable, String> {
    let lowered = lower(module, config)?;
    let exe = relay_vm::compile(&lowered).map_err(|e| format!("does not compile: {e}"))?;
    exe.validate()
        .map_err(|e| format!("the executable does not validate: {e}"))?;
    Ok(exe)
}

/// Parses, type-checks, lowers (with the default pipeline) and compiles `text`, panicking
/// with the reason when any step fails: for the tests' own programs.
pub fn build(text: &str, name: &str) -> Executable {
    build_with(text, name, Config::DEFAULT)
}

/// [`build`] with the pipeline configuration `config`.
pub fn build_with(text: &str, name: &str, config: Config) -> Executable {
    let module = typed(text, name).unwrap_or_else(|e| panic!("{name}: {e}\n{text}"));
    compile(&module, config).unwrap_or_else(|e| panic!("{name} ({config}): {e}"))
}

/// The whole bytecode of `exe`, as `relayc build --emit bytecode` prints it.
pub fn disassemble(exe: &Executable) -> String {
    exe.functions
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A tensor of `dtype` and `shape` holding `values`.
pub fn tensor(dtype: DType, shape: &[i64], values: &[f64]) -> Value {
    Value::tensor(NDArray::from_f64_slice(dtype, shape, values).expect("a valid tensor"))
}

/// A scalar of `dtype`.
pub fn scalar(dtype: DType, value: f64) -> Value {
    Value::tensor(NDArray::scalar_f64(dtype, value).expect("a valid scalar"))
}

/// The integer in a scalar tensor value.
pub fn int_of(value: &Value) -> i128 {
    let tensor = value
        .as_tensor()
        .unwrap_or_else(|| panic!("a tensor, got a {}", value.kind_name()));
    let elements = tensor.to_i128_vec();
    assert_eq!(
        elements.len(),
        1,
        "a scalar, got shape {:?}",
        tensor.shape()
    );
    elements[0]
}

/// Random inputs for `@main` of the type-checked `module`, from [`INPUT_SEED`] + `offset`.
pub fn main_inputs(module: &Module, offset: u64) -> Vec<Value> {
    let main = module
        .function(Symbol::intern("main"))
        .expect("the program has @main");
    relay_interp::random_inputs(&main.func, INPUT_SEED + offset)
        .unwrap_or_else(|e| panic!("no random inputs for @main: {e}"))
}

/// `exe` saved to bytes and loaded again, checked: saving is deterministic, the loaded
/// executable has the same functions, constants, kernels (structurally equal primitive
/// functions), globals and type definitions, and saving it again gives the same bytes.
pub fn round_trip(exe: &Executable) -> Result<Executable, String> {
    let bytes = exe.to_bytes().map_err(|e| format!("does not save: {e}"))?;
    if exe.to_bytes().ok().as_ref() != Some(&bytes) {
        return Err("saving twice gives different bytes".into());
    }
    let loaded = Executable::from_bytes(&bytes).map_err(|e| format!("does not load: {e}"))?;
    if loaded.functions != exe.functions {
        let a = disassemble(exe);
        let b = disassemble(&loaded);
        return Err(format!(
            "the loaded functions differ:\n{a}\n-- loaded --\n{b}"
        ));
    }
    if loaded.globals != exe.globals {
        return Err(format!(
            "the loaded globals differ: {:?} vs {:?}",
            exe.globals, loaded.globals
        ));
    }
    let constants_equal = loaded.constants.len() == exe.constants.len()
        && loaded.constants.iter().zip(&exe.constants).all(|(a, b)| {
            a.dtype() == b.dtype() && a.shape() == b.shape() && a.as_bytes() == b.as_bytes()
        });
    if !constants_equal {
        return Err("the loaded constants differ".into());
    }
    let kernels_equal = loaded.kernels.len() == exe.kernels.len()
        && loaded.kernels.iter().zip(&exe.kernels).all(|(a, b)| {
            a.name == b.name
                && a.dynamic == b.dynamic
                && a.scalar.is_some() == b.scalar.is_some()
                && relay_ir::structural_eq(&a.func, &b.func)
        });
    if !kernels_equal {
        return Err("the loaded kernels differ".into());
    }
    let types_equal = loaded.types.len() == exe.types.len()
        && loaded.types.iter().zip(&exe.types).all(|(a, b)| {
            a.name == b.name
                && a.external == b.external
                && a.params.len() == b.params.len()
                && a.ctors.len() == b.ctors.len()
                && a.ctors.iter().zip(&b.ctors).all(|(x, y)| {
                    x.name == y.name
                        && x.fields.len() == y.fields.len()
                        && x.fields
                            .iter()
                            .zip(&y.fields)
                            .all(|(s, t)| s.to_string() == t.to_string())
                })
        });
    if !types_equal {
        return Err("the loaded type definitions differ".into());
    }
    match loaded.to_bytes() {
        Ok(again) if again == bytes => Ok(loaded),
        Ok(_) => Err("saving the loaded executable gives different bytes".into()),
        Err(e) => Err(format!("the loaded executable does not save: {e}")),
    }
}

/// The Relay programs of `ir-tests/bytecode/` (name and text up to the precise-output
/// block), sorted: small programs that together use every instruction kind — constants,
/// kernels, ADTs and `match`, closures, references, tuples, tail calls, a dynamic shape.
pub fn bytecode_programs() -> Vec<(String, String)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ir-tests/bytecode");
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|e| e == "relay"))
        .collect();
    paths.sort();
    paths
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let program = text.split("// output:").next().unwrap_or("").to_owned();
            let name = path
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            (name, program)
        })
        .collect()
}

/// `bytes` (an executable file, possibly edited) with its header's file-length field and its
/// trailing checksum made consistent with its contents again, so that a reader gets past
/// them to the edited field. A file shorter than a header and a checksum is returned as is.
pub fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
    use relay_vm::file::{CHECKSUM_LEN, HEADER_LEN, xxh64};
    if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
        return bytes;
    }
    let len = bytes.len() as u64;
    bytes[16..24].copy_from_slice(&len.to_le_bytes());
    let body = bytes.len() - CHECKSUM_LEN;
    let sum = xxh64(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
    bytes
}

/// What a field located by [`walk`] holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A section's `u64` payload length.
    SectionLength,
    /// A `u32` count of the items (or bytes) that follow.
    Count,
    /// A `u32` index into the function, kernel or constant table.
    Index,
    /// A `u32` register of an instruction.
    Register,
    /// A function's `u32` register count.
    RegisterCount,
    /// An `i32` jump offset of `if` or `goto`.
    Jump,
    /// An instruction's opcode byte.
    Opcode,
    /// The first byte (the type code) of a 4-byte dtype.
    Dtype,
    /// Anything else the walker names (hashes, flags, type tags, integers).
    Other,
}

/// A field of an executable file: where it is, its size in bytes, its kind, which section it
/// is in, and what it is.
#[derive(Clone, Debug)]
pub struct Field {
    pub at: usize,
    pub size: usize,
    pub kind: FieldKind,
    pub section: &'static str,
    pub what: String,
}

/// An executable file's sections: name, offset of the section header, offset and length of
/// the payload.
#[derive(Clone, Debug)]
pub struct SectionSpan {
    pub name: &'static str,
    pub header: usize,
    pub payload: usize,
    pub len: usize,
}

/// The layout of a valid executable file, found by the tests' own reader (independent of the
/// crate's): its sections and its fields.
#[derive(Clone, Debug, Default)]
pub struct FileLayout {
    pub sections: Vec<SectionSpan>,
    pub fields: Vec<Field>,
}

impl FileLayout {
    /// The fields of `kind`.
    pub fn of_kind(&self, kind: FieldKind) -> impl Iterator<Item = &Field> {
        self.fields.iter().filter(move |f| f.kind == kind)
    }

    /// The first field whose description contains `what`.
    pub fn find(&self, what: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.what.contains(what))
    }

    /// The section named `name`.
    pub fn section(&self, name: &str) -> &SectionSpan {
        self.sections
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no section {name}"))
    }
}

/// The tests' reader of a valid executable file.
struct Walker<'a> {
    bytes: &'a [u8],
    pos: usize,
    section: &'static str,
    fields: Vec<Field>,
}

impl Walker<'_> {
    fn field(&mut self, size: usize, kind: FieldKind, what: &str) -> u64 {
        let mut v = [0u8; 8];
        v[..size].copy_from_slice(&self.bytes[self.pos..self.pos + size]);
        self.fields.push(Field {
            at: self.pos,
            size,
            kind,
            section: self.section,
            what: what.to_owned(),
        });
        self.pos += size;
        u64::from_le_bytes(v)
    }

    fn count(&mut self, what: &str) -> usize {
        self.field(4, FieldKind::Count, what) as usize
    }

    fn str(&mut self, what: &str) -> String {
        let n = self.count(&format!("{what} length"));
        let s = String::from_utf8_lossy(&self.bytes[self.pos..self.pos + n]).into_owned();
        self.pos += n;
        s
    }

    fn dtype(&mut self, what: &str) {
        self.field(1, FieldKind::Dtype, &format!("{what} dtype"));
        self.pos += 3;
    }

    fn var(&mut self) {
        self.field(4, FieldKind::Other, "type variable index");
        self.str("type variable name");
    }

    fn ty(&mut self) {
        match self.field(1, FieldKind::Other, "type tag") {
            0 => {
                let n = self.count("tensor type dimensions");
                self.pos += 8 * n;
                self.dtype("tensor type");
            }
            1 => self.types("tuple fields"),
            2 => {
                let n = self.count("function type parameters");
                (0..n).for_each(|_| self.var());
                self.types("function type argument types");
                self.ty();
            }
            3 => self.var(),
            4 => {
                self.str("ADT name");
                self.types("ADT arguments");
            }
            5 => self.ty(),
            6 => {}
            tag => panic!("type tag {tag} at {}", self.pos - 1),
        }
    }

    fn types(&mut self, what: &str) {
        let n = self.count(what);
        (0..n).for_each(|_| self.ty());
    }

    fn opt_ty(&mut self) {
        if self.field(1, FieldKind::Other, "type present") == 1 {
            self.ty();
        }
    }

    fn regs(&mut self, what: &str) {
        let n = self.count(&format!("{what} registers"));
        for _ in 0..n {
            self.field(4, FieldKind::Register, &format!("{what} register"));
        }
    }

    fn i64s(&mut self, what: &str) {
        let n = self.count(what);
        self.pos += 8 * n;
    }

    fn instruction(&mut self, opcodes: &[String]) {
        let op = self.field(1, FieldKind::Opcode, "opcode") as usize;
        let name = opcodes[op].clone();
        // The operands, in file order: r register, R register list, f/k/c function, kernel,
        // constant index, u other u32, q u64, i i64, I i64 list, d dtype, j jump, s string,
        // a optional asserted shape.
        let operands = match name.as_str() {
            "move" | "get_tag" | "shape_of" | "alloc_ref" | "ref_read" => "rr",
            "ret" | "kill_register" => "r",
            "fatal" => "s",
            "invoke" | "alloc_closure" => "fRr",
            "invoke_closure" => "rRr",
            "tail_invoke" => "fR",
            "tail_invoke_closure" => "rR",
            "invoke_packed" => "kRR",
            "invoke_packed_alloc" | "invoke_packed_update" => "kRr",
            "alloc_tensor" => "rrIdr",
            "alloc_tensor_reg" => "rrrdar",
            "alloc_storage" => "rqdr",
            "alloc_data" => "uRr",
            "alloc_tuple" => "Rr",
            "get_field" => "rur",
            "if" => "rrjj",
            "goto" => "j",
            "load_const" => "cr",
            "load_consti" => "ir",
            "reshape_tensor" | "ref_write" => "rrr",
            other => panic!("the walker does not know `{other}`"),
        };
        for o in operands.chars() {
            match o {
                'r' => {
                    self.field(4, FieldKind::Register, &format!("{name} register"));
                }
                'R' => self.regs(&name),
                'f' => {
                    self.field(4, FieldKind::Index, &format!("{name} function index"));
                }
                'k' => {
                    self.field(4, FieldKind::Index, &format!("{name} kernel index"));
                }
                'c' => {
                    self.field(4, FieldKind::Index, &format!("{name} constant index"));
                }
                'u' => {
                    self.field(4, FieldKind::Other, &format!("{name} u32"));
                }
                'q' => {
                    self.field(8, FieldKind::Other, &format!("{name} u64"));
                }
                'i' => {
                    self.field(8, FieldKind::Other, &format!("{name} i64"));
                }
                'I' => self.i64s(&format!("{name} dimensions")),
                'd' => self.dtype(&name),
                'j' => {
                    self.field(4, FieldKind::Jump, &format!("{name} jump"));
                }
                's' => {
                    self.str(&format!("{name} message"));
                }
                'a' => {
                    if self.field(1, FieldKind::Other, "assert_shape present") == 1 {
                        self.i64s("asserted shape dimensions");
                    }
                }
                _ => unreachable!(),
            }
        }
    }
}

/// The sections and fields of the valid executable file `bytes`, as the tests' own reader
/// finds them (it panics on a file the writer would not produce).
pub fn walk(bytes: &[u8]) -> FileLayout {
    use relay_vm::file::{HEADER_LEN, SECTION_HEADER_LEN, SECTIONS};
    let mut w = Walker {
        bytes,
        pos: HEADER_LEN,
        section: "header",
        fields: Vec::new(),
    };
    let mut sections = Vec::new();
    for (_, name) in SECTIONS {
        w.section = name;
        let header = w.pos;
        w.pos += 8;
        let len = w.field(8, FieldKind::SectionLength, &format!("{name} length")) as usize;
        let payload = header + SECTION_HEADER_LEN;
        sections.push(SectionSpan {
            name,
            header,
            payload,
            len,
        });
        match name {
            "globals" => {
                let n = w.count("globals");
                for _ in 0..n {
                    w.str("global name");
                    w.field(4, FieldKind::Index, "global function index");
                    w.field(4, FieldKind::Other, "global arity");
                }
            }
            "constants" => {
                let n = w.count("constants");
                for _ in 0..n {
                    w.dtype("constant");
                    w.i64s("constant dimensions");
                    let len = w.field(8, FieldKind::Other, "constant byte length") as usize;
                    w.pos = w.pos.next_multiple_of(relay_vm::file::CONSTANT_ALIGNMENT) + len;
                }
            }
            "primitives" => {
                let n = w.count("primitives");
                for _ in 0..n {
                    w.str("primitive name");
                    w.field(8, FieldKind::Other, "primitive hash");
                    w.str("primitive text");
                }
            }
            "types" => {
                let n = w.count("type definitions");
                for _ in 0..n {
                    w.str("type name");
                    w.field(1, FieldKind::Other, "type external");
                    let n = w.count("type parameters");
                    (0..n).for_each(|_| w.var());
                    let n = w.count("constructors");
                    for _ in 0..n {
                        w.str("constructor name");
                        w.types("constructor fields");
                    }
                }
            }
            _ => {
                let n = w.count("opcodes");
                let opcodes: Vec<String> = (0..n).map(|_| w.str("opcode name")).collect();
                let n = w.count("functions");
                for _ in 0..n {
                    w.str("function name");
                    let n = w.count("parameters");
                    for _ in 0..n {
                        w.str("parameter name");
                        w.opt_ty();
                    }
                    w.opt_ty();
                    w.field(4, FieldKind::RegisterCount, "register count");
                    let n = w.count("instructions");
                    (0..n).for_each(|_| w.instruction(&opcodes));
                    let n = w.count("locations");
                    for _ in 0..n {
                        w.field(4, FieldKind::Other, "location instruction");
                        w.str("location");
                    }
                }
            }
        }
        assert_eq!(w.pos, payload + len, "section {name} walked to its end");
        w.pos = w.pos.next_multiple_of(8);
    }
    FileLayout {
        sections,
        fields: w.fields,
    }
}
