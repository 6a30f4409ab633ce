//! Reading an executable file: every read is bounds-checked, every count is checked against
//! the bytes that remain before anything is allocated, and the decoded executable goes through
//! the bytecode validator before it is returned. Any inconsistency is an
//! [`ExeFileError::Malformed`] naming the section and the byte offset.

use std::collections::HashMap;
use std::sync::Arc;

use relay_ir::{
    CtorDef, DType, DTypeCode, Dim, ExprKind, FuncType, ModuleKind, NDArray, Span, Symbol, Type,
    TypeDef, TypeKind, TypeVar, structural_hash,
};
use relay_kernel::KernelCache;

use super::{
    CHECKSUM_LEN, CONSTANT_ALIGNMENT, ExeFileError, FORMAT_VERSION, HEADER_LEN, MAGIC,
    OLDEST_FORMAT_VERSION, SECTION_HEADER_LEN, SECTIONS, xxh64,
};
use crate::bytecode::{DecodeOperand, Instruction, Opcode, Reg, SourceLocation, VmFunction};
use crate::executable::{Executable, KernelEntry};

/// How deeply types may nest in a file (deeper is an error, not a stack overflow).
const MAX_TYPE_DEPTH: usize = 200;

/// A bounds-checked reader over one section's bytes.
struct Cursor<'a> {
    /// The whole file (offsets in errors are file offsets).
    file: &'a [u8],
    /// The next byte to read.
    pos: usize,
    /// The end of the section's payload.
    end: usize,
    /// The section's name, for errors.
    section: &'static str,
    /// The type variables of the current scope, by index.
    vars: Vec<TypeVar>,
}

type Result<T> = std::result::Result<T, ExeFileError>;

impl<'a> Cursor<'a> {
    /// A cursor over `file[pos..end]`, reporting errors in `section`.
    fn new(file: &'a [u8], pos: usize, end: usize, section: &'static str) -> Cursor<'a> {
        Cursor {
            file,
            pos,
            end,
            section,
            vars: Vec::new(),
        }
    }

    fn error_at(&self, offset: usize, message: impl Into<String>) -> ExeFileError {
        ExeFileError::Malformed {
            section: self.section,
            offset: offset as u64,
            message: message.into(),
        }
    }

    fn error(&self, message: impl Into<String>) -> ExeFileError {
        self.error_at(self.pos, message)
    }

    fn remaining(&self) -> usize {
        self.end - self.pos
    }

    fn bytes(&mut self, n: usize, what: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.error(format!(
                "{what}: needs {n} bytes, the section has {} left",
                self.remaining()
            )));
        }
        let bytes = &self.file[self.pos..self.pos + n];
        self.pos += n;
        Ok(bytes)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Result<[u8; N]> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, what)?);
        Ok(out)
    }

    fn u8(&mut self, what: &str) -> Result<u8> {
        Ok(self.array::<1>(what)?[0])
    }

    fn u16(&mut self, what: &str) -> Result<u16> {
        Ok(u16::from_le_bytes(self.array(what)?))
    }

    /// A count of items that take at least `min_size` bytes each, checked against the bytes
    /// left in the section before anything is allocated for them.
    fn count(&mut self, min_size: usize, what: &str) -> Result<usize> {
        let at = self.pos;
        let n = self.u32(what)? as usize;
        if n.saturating_mul(min_size.max(1)) > self.remaining() {
            return Err(self.error_at(
                at,
                format!(
                    "{n} {what} cannot fit in the {} bytes left in the section",
                    self.remaining()
                ),
            ));
        }
        Ok(n)
    }

    fn str(&mut self, what: &str) -> Result<&'a str> {
        let n = self.count(1, what)?;
        let at = self.pos;
        let bytes = self.bytes(n, what)?;
        std::str::from_utf8(bytes).map_err(|e| self.error_at(at, format!("{what}: {e}")))
    }

    /// Checks that the section's payload was read to its end.
    fn finish(&self) -> Result<()> {
        if self.pos != self.end {
            return Err(self.error(format!(
                "{} bytes after the section's last entry",
                self.end - self.pos
            )));
        }
        Ok(())
    }

    fn var(&mut self) -> Result<TypeVar> {
        let at = self.pos;
        let index = self.u32("a type variable")? as usize;
        let name = self.str("a type variable's name")?;
        match index.cmp(&self.vars.len()) {
            std::cmp::Ordering::Less => Ok(self.vars[index].clone()),
            std::cmp::Ordering::Equal => {
                let v = TypeVar::new(Symbol::intern(name), Span::DUMMY);
                self.vars.push(v.clone());
                Ok(v)
            }
            std::cmp::Ordering::Greater => Err(self.error_at(
                at,
                format!(
                    "type variable {index} before variable {} appeared",
                    self.vars.len()
                ),
            )),
        }
    }

    fn ty(&mut self, depth: usize) -> Result<Type> {
        if depth > MAX_TYPE_DEPTH {
            return Err(self.error(format!("types nest deeper than {MAX_TYPE_DEPTH} levels")));
        }
        let at = self.pos;
        let kind = match self.u8("a type")? {
            0 => {
                let n = self.count(8, "dimensions")?;
                let mut shape = Vec::with_capacity(n);
                for _ in 0..n {
                    let at = self.pos;
                    shape.push(match self.i64("a dimension")? {
                        -1 => Dim::Any,
                        d if d >= 0 => Dim::Known(d),
                        d => return Err(self.error_at(at, format!("dimension {d}"))),
                    });
                }
                TypeKind::Tensor {
                    shape,
                    dtype: self.dtype()?,
                }
            }
            1 => TypeKind::Tuple(self.types(depth)?),
            2 => {
                let n = self.count(5, "type parameters")?;
                let type_params = (0..n).map(|_| self.var()).collect::<Result<_>>()?;
                let params = self.types(depth)?;
                let ret = self.ty(depth + 1)?;
                TypeKind::Func(FuncType {
                    type_params,
                    params,
                    ret,
                })
            }
            3 => TypeKind::Var(self.var()?),
            4 => {
                let name = Symbol::intern(self.str("an ADT's name")?);
                TypeKind::Adt {
                    name,
                    args: self.types(depth)?,
                }
            }
            5 => TypeKind::Ref(self.ty(depth + 1)?),
            6 => TypeKind::Incomplete,
            tag => return Err(self.error_at(at, format!("unknown type tag {tag}"))),
        };
        Ok(Type::from_kind(kind))
    }

    fn types(&mut self, depth: usize) -> Result<Vec<Type>> {
        let n = self.count(1, "types")?;
        (0..n).map(|_| self.ty(depth + 1)).collect()
    }

    fn opt_ty(&mut self) -> Result<Option<Type>> {
        if self.bool("whether a type follows")? {
            self.ty(0).map(Some)
        } else {
            Ok(None)
        }
    }
}

/// The primitive reads, which the instruction table's operands decode with (and the rest of
/// the file uses too).
impl DecodeOperand for Cursor<'_> {
    type Error = ExeFileError;

    fn reg(&mut self) -> Result<Reg> {
        self.u32("a register").map(Reg)
    }

    fn regs(&mut self) -> Result<Vec<Reg>> {
        let n = self.count(4, "registers")?;
        (0..n).map(|_| self.reg()).collect()
    }

    fn bool(&mut self, what: &str) -> Result<bool> {
        let at = self.pos;
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            b => Err(self.error_at(at, format!("{what}: expected 0 or 1, found {b}"))),
        }
    }

    fn u32(&mut self, what: &str) -> Result<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn i32(&mut self, what: &str) -> Result<i32> {
        Ok(i32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    fn i64(&mut self, what: &str) -> Result<i64> {
        Ok(i64::from_le_bytes(self.array(what)?))
    }

    fn i64s(&mut self, what: &str) -> Result<Vec<i64>> {
        let n = self.count(8, what)?;
        (0..n).map(|_| self.i64(what)).collect()
    }

    fn dtype(&mut self) -> Result<DType> {
        let at = self.pos;
        let code = self.u8("a dtype code")?;
        let bits = self.u8("a dtype's bits")?;
        let lanes = self.u16("a dtype's lanes")?;
        let code = DTypeCode::from_u8(code);
        let dtype = code.map(|code| DType { code, bits, lanes });
        // Valid exactly when TVM's spelling of it reads back as itself.
        match dtype {
            Some(d) if DType::parse(&d.to_string()) == Some(d) => Ok(d),
            _ => Err(self.error_at(
                at,
                format!(
                    "not a dtype: code {}, {bits} bits, {lanes} lanes",
                    self.file[at]
                ),
            )),
        }
    }

    fn string(&mut self, what: &str) -> Result<String> {
        self.str(what).map(str::to_owned)
    }
}

/// The section of format version 1 at index `index`: checks its header at `pos` and returns a
/// cursor over its payload.
fn section<'a>(file: &'a [u8], pos: usize, index: usize, end: usize) -> Result<Cursor<'a>> {
    let (tag, name) = SECTIONS[index];
    let mut header = Cursor::new(file, pos, end, name);
    let found = header.array::<4>("the section tag")?;
    if found != tag {
        return Err(header.error_at(
            pos,
            format!(
                "expected section `{}` here, found tag {}",
                String::from_utf8_lossy(&tag),
                escape(&found)
            ),
        ));
    }
    let reserved = header.u32("the section's reserved word")?;
    if reserved != 0 {
        return Err(header.error_at(pos + 4, format!("reserved word is {reserved}, not 0")));
    }
    let length = header.u64("the section length")?;
    let start = pos + SECTION_HEADER_LEN;
    if length > (end - start) as u64 {
        return Err(header.error_at(
            pos + 8,
            format!(
                "the section is {length} bytes long, but only {} bytes remain before the checksum",
                end - start
            ),
        ));
    }
    Ok(Cursor::new(file, start, start + length as usize, name))
}

/// `bytes` printed for an error: printable ASCII as is, the rest as `\xNN`.
fn escape(bytes: &[u8]) -> String {
    let mut s = String::from("`");
    for &b in bytes {
        if b.is_ascii_graphic() || b == b' ' {
            s.push(b as char);
        } else {
            s.push_str(&format!("\\x{b:02x}"));
        }
    }
    s.push('`');
    s
}

/// Decodes and validates an executable file: the executable (kernels not compiled yet) and
/// the file offset of each kernel's entry, for errors.
pub(super) fn read(file: &[u8], cache: Arc<KernelCache>) -> Result<(Executable, Vec<u64>)> {
    let mut header = Cursor::new(file, 0, file.len(), "header");
    if file.len() < MAGIC.len() || file[..MAGIC.len()] != MAGIC {
        return Err(ExeFileError::Magic {
            found: escape(&file[..file.len().min(MAGIC.len())]),
        });
    }
    header.pos = MAGIC.len();
    let version = header.u32("the format version")?;
    if !(OLDEST_FORMAT_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(ExeFileError::Version { found: version });
    }
    let sections = header.u32("the section count")?;
    let length = header.u64("the file length")?;
    let reserved = header.u64("the reserved word")?;
    if length != file.len() as u64 {
        return Err(header.error_at(
            16,
            format!(
                "the header gives a file length of {length} bytes, the file has {}",
                file.len()
            ),
        ));
    }
    if file.len() < HEADER_LEN + CHECKSUM_LEN {
        return Err(header.error_at(0, "the file is too short for a header and a checksum"));
    }
    let body = file.len() - CHECKSUM_LEN;
    let mut stored = [0u8; 8];
    stored.copy_from_slice(&file[body..]);
    let stored = u64::from_le_bytes(stored);
    let computed = xxh64(&file[..body]);
    if stored != computed {
        return Err(ExeFileError::Checksum { stored, computed });
    }
    if reserved != 0 {
        return Err(header.error_at(24, format!("the reserved word is {reserved}, not 0")));
    }
    if sections as usize != SECTIONS.len() {
        return Err(header.error_at(
            12,
            format!(
                "format version {version} has {} sections, the header says {sections}",
                SECTIONS.len()
            ),
        ));
    }

    let mut pos = HEADER_LEN;
    let mut cursors = Vec::with_capacity(SECTIONS.len());
    for index in 0..SECTIONS.len() {
        let cursor = section(file, pos, index, body)?;
        let end = cursor.end;
        // The payload is padded with zeros to a multiple of 8 bytes.
        let padded = end.next_multiple_of(8);
        if padded > body {
            return Err(cursor.error_at(
                end,
                "the section's padding to 8 bytes runs into the checksum",
            ));
        }
        if let Some(i) = file[end..padded].iter().position(|&b| b != 0) {
            return Err(cursor.error_at(end + i, "padding after the section is not zero"));
        }
        pos = padded;
        cursors.push(cursor);
    }
    if pos != body {
        return Err(header.error_at(
            pos,
            format!(
                "{} bytes between the last section and the checksum",
                body - pos
            ),
        ));
    }
    let mut cursors = cursors.into_iter();
    let mut next = || {
        cursors
            .next()
            .ok_or_else(|| header.error_at(0, "missing section"))
    };
    let (mut g, mut c, mut p, mut t, mut code) = (next()?, next()?, next()?, next()?, next()?);

    let globals = read_globals(&mut g)?;
    let constants = read_constants(&mut c)?;
    let (kernels, offsets) = read_primitives(&mut p)?;
    let types = read_types(&mut t)?;
    let (functions, instruction_offsets) = read_code(&mut code)?;

    let exe = Executable {
        functions,
        constants,
        kernels,
        globals: HashMap::new(),
        types,
        cache,
        packed: std::sync::OnceLock::new(),
    };
    let globals = check_globals(&exe, globals, &g)?;
    let exe = Executable { globals, ..exe };
    // Every register, jump, index and arity, as the compiler's output is checked; an error
    // points at the instruction's bytes.
    let tables = exe.tables();
    for (f, offsets) in exe.functions.iter().zip(&instruction_offsets) {
        crate::bytecode::validate(f, &tables).map_err(|e| {
            let offset = offsets.get(e.pc).or(offsets.first()).copied();
            code.error_at(offset.unwrap_or(code.pos), e.to_string())
        })?;
    }
    Ok((exe, offsets))
}

/// A global as the file lists it: name, function index, arity, and where it is.
struct GlobalEntry {
    name: String,
    function: u32,
    arity: u32,
    offset: usize,
}

fn read_globals(c: &mut Cursor<'_>) -> Result<Vec<GlobalEntry>> {
    let n = c.count(12, "globals")?;
    let mut globals = Vec::with_capacity(n);
    for _ in 0..n {
        let offset = c.pos;
        let name = c.string("a global's name")?;
        let function = c.u32("a global's function index")?;
        let arity = c.u32("a global's arity")?;
        globals.push(GlobalEntry {
            name,
            function,
            arity,
            offset,
        });
    }
    c.finish()?;
    Ok(globals)
}

/// The globals map, each global checked against the function table.
fn check_globals(
    exe: &Executable,
    globals: Vec<GlobalEntry>,
    c: &Cursor<'_>,
) -> Result<HashMap<String, u32>> {
    let mut map = HashMap::with_capacity(globals.len());
    for g in globals {
        let Some(f) = exe.functions.get(g.function as usize) else {
            return Err(c.error_at(
                g.offset,
                format!(
                    "global @{} names function {} of {}",
                    g.name,
                    g.function,
                    exe.functions.len()
                ),
            ));
        };
        if f.params.len() != g.arity as usize {
            return Err(c.error_at(
                g.offset,
                format!(
                    "global @{} has arity {}, its function `{}` takes {} parameters",
                    g.name,
                    g.arity,
                    f.name,
                    f.params.len()
                ),
            ));
        }
        if map.insert(g.name.clone(), g.function).is_some() {
            return Err(c.error_at(g.offset, format!("global @{} is listed twice", g.name)));
        }
    }
    Ok(map)
}

fn read_constants(c: &mut Cursor<'_>) -> Result<Vec<Arc<NDArray>>> {
    let n = c.count(16, "constants")?;
    let mut constants = Vec::with_capacity(n);
    for i in 0..n {
        let at = c.pos;
        let dtype = c.dtype()?;
        let shape = c.i64s("a constant's dimensions")?;
        let length_at = c.pos;
        let length = c.u64("a constant's byte length")?;
        let expected = NDArray::byte_len(dtype, &shape)
            .map_err(|e| c.error_at(at, format!("constant {i}: {e}")))?;
        if length != expected as u64 {
            return Err(c.error_at(
                length_at,
                format!(
                    "constant {i} of type {dtype} and shape {shape:?} has {expected} bytes, \
                     the file says {length}"
                ),
            ));
        }
        let pad_at = c.pos;
        let pad = c.pos.next_multiple_of(CONSTANT_ALIGNMENT) - c.pos;
        let padding = c.bytes(pad, "the padding before a constant's data")?;
        if padding.iter().any(|&b| b != 0) {
            return Err(c.error_at(pad_at, "padding before a constant's data is not zero"));
        }
        let data = c.bytes(expected, "a constant's data")?;
        let array = NDArray::from_le_bytes(dtype, &shape, data)
            .map_err(|e| c.error_at(at, format!("constant {i}: {e}")))?;
        constants.push(Arc::new(array));
    }
    c.finish()?;
    Ok(constants)
}

fn read_primitives(c: &mut Cursor<'_>) -> Result<(Vec<KernelEntry>, Vec<u64>)> {
    let n = c.count(16, "primitives")?;
    let mut kernels = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.pos;
        let name = c.string("a primitive's name")?;
        let hash = c.u64("a primitive's hash")?;
        let text_at = c.pos;
        let text = c.str("a primitive's text")?;
        let fail = |message: String| c.error_at(text_at, format!("primitive `{name}`: {message}"));
        let module = relay_syntax::parse(text, &format!("{name}.relay")).map_err(|errors| {
            let first = errors
                .errors
                .first()
                .map_or_else(|| errors.to_string(), ToString::to_string);
            fail(format!("its text does not parse: {first}"))
        })?;
        let body = match (module.kind, module.functions.as_slice()) {
            (ModuleKind::Expr, [main]) if main.func.params.is_empty() => main.func.body.clone(),
            _ => {
                return Err(fail(
                    "its text is not one closed function expression".into(),
                ));
            }
        };
        match body.kind() {
            ExprKind::Function(f) if f.attrs.get("Primitive").is_some() => {}
            _ => return Err(fail("its text is not a `Primitive=1` function".into())),
        }
        relay_types::check_module(&module).map_err(|errors| {
            let messages: Vec<String> = errors.errors.iter().map(ToString::to_string).collect();
            fail(format!("it does not type-check: {}", messages.join("; ")))
        })?;
        let computed = structural_hash(&body);
        if computed != hash {
            return Err(c.error_at(
                at,
                format!(
                    "primitive `{name}`: the file gives hash {hash:#018x}, its text hashes to \
                     {computed:#018x}"
                ),
            ));
        }
        kernels.push(KernelEntry::new(name, body));
        offsets.push(at as u64);
    }
    c.finish()?;
    Ok((kernels, offsets))
}

fn read_types(c: &mut Cursor<'_>) -> Result<Vec<TypeDef>> {
    let n = c.count(13, "type definitions")?;
    let mut types: Vec<TypeDef> = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.pos;
        c.vars.clear();
        let name = Symbol::intern(c.str("a type's name")?);
        if types.iter().any(|t| t.name == name) {
            return Err(c.error_at(at, format!("type `{name}` is defined twice")));
        }
        let external = c.bool("whether a type is external")?;
        let nparams = c.count(5, "type parameters")?;
        let params = (0..nparams).map(|_| c.var()).collect::<Result<Vec<_>>>()?;
        let nctors = c.count(8, "constructors")?;
        let mut ctors = Vec::with_capacity(nctors);
        for _ in 0..nctors {
            let name = Symbol::intern(c.str("a constructor's name")?);
            let fields = c.types(0)?;
            ctors.push(CtorDef {
                name,
                fields,
                span: Span::DUMMY,
            });
        }
        types.push(TypeDef {
            name,
            params,
            ctors,
            external,
            span: Span::DUMMY,
        });
    }
    c.finish()?;
    Ok(types)
}

/// The functions, and the file offset of each one's instructions.
fn read_code(c: &mut Cursor<'_>) -> Result<(Vec<VmFunction>, Vec<Vec<usize>>)> {
    // The opcode table: the file's opcode numbers, by the name of the instruction each means.
    let n = c.count(4, "opcodes")?;
    if n > 256 {
        return Err(c.error(format!("{n} opcodes; an opcode is one byte")));
    }
    let mut opcodes = Vec::with_capacity(n);
    for i in 0..n {
        let at = c.pos;
        let name = c.str("an opcode's name")?;
        let opcode = Opcode::ALL
            .iter()
            .copied()
            .find(|opcode| opcode.name() == name)
            .ok_or_else(|| {
                c.error_at(
                    at,
                    format!("opcode {i} is `{name}`, an instruction this relayc does not know"),
                )
            })?;
        opcodes.push(opcode);
    }
    let n = c.count(18, "functions")?;
    let mut functions = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        let (f, at) = read_function(c, &opcodes)?;
        functions.push(f);
        offsets.push(at);
    }
    c.finish()?;
    Ok((functions, offsets))
}

fn read_function(c: &mut Cursor<'_>, opcodes: &[Opcode]) -> Result<(VmFunction, Vec<usize>)> {
    c.vars.clear();
    let name = c.string("a function's name")?;
    let n = c.count(5, "parameters")?;
    let mut params = Vec::with_capacity(n);
    let mut param_types = Vec::with_capacity(n);
    for _ in 0..n {
        params.push(c.string("a parameter's name")?);
        param_types.push(c.opt_ty()?);
    }
    let ret_type = c.opt_ty()?;
    let register_count_at = c.pos;
    let register_count = c.u32("the register count")?;
    let n = c.count(2, "instructions")?;
    let mut code = Vec::with_capacity(n);
    let mut offsets = Vec::with_capacity(n);
    for _ in 0..n {
        offsets.push(c.pos);
        code.push(read_instruction(c, opcodes)?);
    }
    let f = VmFunction {
        name,
        params,
        register_count,
        code,
        param_types,
        ret_type,
        locations: Vec::new(),
    };
    // A frame is as large as the register count says: a few bytes of file must not make the
    // VM allocate gigabytes per call (the validator checks this too; here the error points at
    // the count).
    let named = f.registers_named();
    if u64::from(register_count) > named {
        return Err(c.error_at(
            register_count_at,
            format!(
                "`{}` has a register count of {register_count}; its parameters and \
                 instructions name at most {named}",
                f.name
            ),
        ));
    }
    let n = c.count(8, "locations")?;
    let mut locations: Vec<(u32, SourceLocation)> = Vec::with_capacity(n);
    for _ in 0..n {
        let at = c.pos;
        let pc = c.u32("a location's instruction")?;
        if pc as usize >= f.code.len() || locations.last().is_some_and(|(p, _)| *p >= pc) {
            return Err(c.error_at(
                at,
                format!(
                    "location for instruction {pc} of `{}` ({} instructions; locations \
                     are sorted)",
                    f.name,
                    f.code.len()
                ),
            ));
        }
        // The file keeps the text; the span was into a source this process does not have.
        let text = c.string("a location")?;
        locations.push((pc, SourceLocation { text, span: None }));
    }
    Ok((VmFunction { locations, ..f }, offsets))
}

fn read_instruction(c: &mut Cursor<'_>, opcodes: &[Opcode]) -> Result<Instruction> {
    let at = c.pos;
    let opcode = c.u8("an opcode")?;
    let Some(&opcode) = opcodes.get(opcode as usize) else {
        return Err(c.error_at(
            at,
            format!(
                "opcode {opcode} is not in the file's opcode table of {}",
                opcodes.len()
            ),
        ));
    };
    Instruction::decode(opcode, c)
}
