//! Loading a bad executable file is a typed [`ExeFileError`], never a panic: a corpus of
//! corrupted files, each checked for the specific error variant and, for
//! [`ExeFileError::Malformed`], the section and byte offset it names.
//!
//! The files are the executables of the programs of `ir-tests/bytecode/` (which together use
//! every instruction kind) and a few programs of this file. The corruptions: truncation at
//! every length; a wrong magic, an unsupported version, a flipped byte in every section (a
//! checksum mismatch); then, with the file-length field and the checksum made consistent
//! again ([`common::reseal`]) so the reader gets past them, every section length, count,
//! index, register, jump, opcode and dtype of the files set to a bad value, primitives that
//! do not parse, type-check or match their hash, bad globals, non-zero padding and trailing
//! bytes. Fields are located by the tests' own reader of the format ([`common::walk`]).

mod common;

use common::{Field, FieldKind, FileLayout, reseal, walk};
use relay_vm::file::{
    CHECKSUM_LEN, CONSTANT_ALIGNMENT, FORMAT_VERSION, HEADER_LEN, SECTION_HEADER_LEN, SECTIONS,
};
use relay_vm::{ExeFileError, Executable};

/// One valid executable file.
struct Fixture {
    name: String,
    bytes: Vec<u8>,
    layout: FileLayout,
}

/// A kernel with two float32 parameters (its primitive's text is edited below).
const ADD: &str = r#"#[version = "0.0.5"]
def @main(%x: Tensor[(2), float32], %y: Tensor[(2), float32]) -> Tensor[(2), float32] {
  add(%x, %y)
}
"#;

/// Two global functions.
const TWO_GLOBALS: &str = r#"#[version = "0.0.5"]
def @side(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {
  negative(%x)
}
def @main(%x: Tensor[(2), float32]) -> Tensor[(2), float32] {
  @side(%x)
}
"#;

fn fixture(name: &str, text: &str) -> Fixture {
    let exe = common::build(text, name);
    let bytes = exe.to_bytes().expect("the executable saves");
    let layout = walk(&bytes);
    Fixture {
        name: name.to_owned(),
        bytes,
        layout,
    }
}

/// The executables of `ir-tests/bytecode/` and of this file's programs.
fn fixtures() -> Vec<Fixture> {
    let mut out: Vec<Fixture> = common::bytecode_programs()
        .iter()
        .map(|(name, text)| fixture(name, text))
        .collect();
    out.push(fixture("add.relay", ADD));
    out.push(fixture("two_globals.relay", TWO_GLOBALS));
    out
}

/// The smallest fixture file.
fn smallest(fixtures: &[Fixture]) -> &Fixture {
    fixtures
        .iter()
        .min_by_key(|f| f.bytes.len())
        .expect("fixtures")
}

/// `bytes` with the little-endian `value` written over `size` bytes at `at`.
fn with(bytes: &[u8], at: usize, size: usize, value: u64) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at..at + size].copy_from_slice(&value.to_le_bytes()[..size]);
    out
}

/// The section, offset and message of a [`ExeFileError::Malformed`], or a panic naming what
/// came instead.
fn malformed(result: Result<Executable, ExeFileError>, case: &str) -> (&'static str, u64, String) {
    match result {
        Err(ExeFileError::Malformed {
            section,
            offset,
            message,
        }) => (section, offset, message),
        Err(other) => panic!("{case}: expected a malformed-file error, got {other:?}"),
        Ok(_) => panic!("{case}: the corrupted file loaded"),
    }
}

/// Decodes the resealed `bytes` and checks that the error is malformed-file in `section`
/// at `offset`, with a message containing `needle`.
fn expect_malformed_at(bytes: Vec<u8>, section: &str, offset: usize, needle: &str, case: &str) {
    let (s, o, message) = malformed(Executable::decode(&reseal(bytes)), case);
    assert_eq!(
        (s, o),
        (section, offset as u64),
        "{case}: wrong place ({message})"
    );
    assert!(
        message.contains(needle),
        "{case}: the message `{message}` does not mention `{needle}`"
    );
}

/// The offset of the opcode of the instruction that contains the field at `at`.
fn instruction_start(layout: &FileLayout, at: usize) -> usize {
    layout
        .of_kind(FieldKind::Opcode)
        .map(|f| f.at)
        .filter(|&o| o <= at)
        .max()
        .expect("an instruction before the field")
}

/// The first field of each description in every fixture (with the fixture's bytes).
fn distinct_fields(fixtures: &[Fixture]) -> Vec<(&Fixture, &Field)> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for f in fixtures {
        for field in &f.layout.fields {
            if seen.insert(field.what.clone()) {
                out.push((f, field));
            }
        }
    }
    out
}

#[test]
fn the_fixtures_load_and_the_walker_agrees_with_the_writer() {
    for f in fixtures() {
        Executable::from_bytes(&f.bytes).unwrap_or_else(|e| panic!("{}: {e}", f.name));
        assert_eq!(f.layout.sections.len(), SECTIONS.len());
        let last = f.layout.sections.last().expect("sections");
        assert_eq!(
            (last.payload + last.len).next_multiple_of(8) + CHECKSUM_LEN,
            f.bytes.len(),
            "{}",
            f.name
        );
        // Resealing a valid file changes nothing.
        assert_eq!(reseal(f.bytes.clone()), f.bytes, "{}", f.name);
    }
}

#[test]
fn a_file_truncated_anywhere_is_an_error() {
    let fixtures = fixtures();
    let f = smallest(&fixtures);
    for len in 0..f.bytes.len() {
        let cut = &f.bytes[..len];
        match Executable::decode(cut) {
            Err(ExeFileError::Magic { .. }) => assert!(len < 8, "length {len}: magic error"),
            Err(ExeFileError::Malformed {
                section: "header",
                offset,
                ..
            }) => assert!(offset <= 24, "length {len}: offset {offset}"),
            other => panic!("{} cut to {len} bytes: {other:?}", f.name),
        }
        // Resealed, the truncation reaches the sections: still an error, never a panic
        // (also when only the last section's padding was cut). Cutting just the checksum
        // and resealing gives back the original file.
        if len >= HEADER_LEN + CHECKSUM_LEN && len != f.bytes.len() - CHECKSUM_LEN {
            let mut sealed = cut.to_vec();
            sealed.extend_from_slice(&[0; CHECKSUM_LEN]);
            let result = Executable::decode(&reseal(sealed));
            let (section, offset, message) = malformed(result, &format!("resealed cut {len}"));
            assert!(
                offset <= len as u64 + CHECKSUM_LEN as u64,
                "cut {len}: {section} at {offset}: {message}"
            );
        }
    }
    // The file without its checksum, and the empty file, through `from_bytes` too.
    assert!(Executable::from_bytes(&[]).is_err());
    assert!(Executable::from_bytes(&f.bytes[..f.bytes.len() - 1]).is_err());
}

#[test]
fn a_wrong_magic_is_named() {
    let fixtures = fixtures();
    let f = smallest(&fixtures);
    let mut bytes = f.bytes.clone();
    bytes[..8].copy_from_slice(b"\x7fELF\x02\x01\x01\x00");
    match Executable::decode(&bytes) {
        Err(ExeFileError::Magic { found }) => assert_eq!(found, "`\\x7fELF\\x02\\x01\\x01\\x00`"),
        other => panic!("{other:?}"),
    }
    match Executable::decode(b"REL") {
        Err(ExeFileError::Magic { found }) => assert_eq!(found, "`REL`"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unsupported_version_names_the_supported_one() {
    let fixtures = fixtures();
    let f = smallest(&fixtures);
    for version in [0, FORMAT_VERSION + 1, u32::MAX] {
        let bytes = reseal(with(&f.bytes, 8, 4, u64::from(version)));
        match Executable::decode(&bytes) {
            Err(e @ ExeFileError::Version { found }) => {
                assert_eq!(found, version);
                let message = e.to_string();
                assert!(
                    message.contains(&format!("format version {FORMAT_VERSION}")),
                    "{message}"
                );
                assert_eq!(
                    message.contains("newer"),
                    version > FORMAT_VERSION,
                    "{message}"
                );
            }
            other => panic!("version {version}: {other:?}"),
        }
    }
}

#[test]
fn a_flipped_byte_in_any_section_fails_the_checksum() {
    let fixtures = fixtures();
    let f = smallest(&fixtures);
    // The header's reserved word, a byte of each section's header and payload, the checksum.
    let mut places = vec![24, 31];
    for s in &f.layout.sections {
        places.push(s.header + 5);
        places.push(s.payload);
        places.push(s.payload + s.len / 2);
        places.push(s.payload + s.len.saturating_sub(1));
    }
    places.push(f.bytes.len() - CHECKSUM_LEN);
    places.push(f.bytes.len() - 1);
    for at in places {
        for flip in [0x01, 0x80, 0xff] {
            let mut bytes = f.bytes.clone();
            bytes[at] ^= flip;
            match Executable::decode(&bytes) {
                Err(ExeFileError::Checksum { stored, computed }) => assert_ne!(stored, computed),
                other => panic!("byte {at} ^ {flip:#x}: {other:?}"),
            }
            assert!(matches!(
                Executable::from_bytes(&bytes),
                Err(ExeFileError::Checksum { .. })
            ));
        }
    }
}

#[test]
fn the_header_is_checked() {
    let fixtures = fixtures();
    let f = smallest(&fixtures);
    // A file length that is not the file's.
    for length in [0, f.bytes.len() as u64 + 1, u64::MAX] {
        let bytes = with(&f.bytes, 16, 8, length);
        let (section, offset, message) = malformed(Executable::decode(&bytes), "file length");
        assert_eq!((section, offset), ("header", 16), "{message}");
    }
    // A section count other than five.
    for count in [0, 4, 6, u32::MAX] {
        let bytes = with(&f.bytes, 12, 4, u64::from(count));
        expect_malformed_at(bytes, "header", 12, "sections", "section count");
    }
    // The header's reserved word.
    let bytes = with(&f.bytes, 24, 8, 1);
    expect_malformed_at(bytes, "header", 24, "reserved", "header reserved");
    // A section tag out of order, a section's reserved word.
    let s = &f.layout.sections[1];
    let mut bytes = f.bytes.clone();
    bytes[s.header..s.header + 4].copy_from_slice(b"PRIM");
    expect_malformed_at(bytes, "constants", s.header, "CNST", "tag");
    let bytes = with(&f.bytes, s.header + 4, 4, 1);
    expect_malformed_at(bytes, "constants", s.header + 4, "reserved", "reserved");
}

#[test]
fn a_section_length_past_the_file_is_an_error() {
    for f in fixtures() {
        for (i, s) in f.layout.sections.iter().enumerate() {
            let length_at = s.header + 8;
            let case = format!("{}: {} length u64::MAX", f.name, s.name);
            expect_malformed_at(
                with(&f.bytes, length_at, 8, u64::MAX),
                s.name,
                length_at,
                "remain before the checksum",
                &case,
            );
            // One byte more: the section swallows a padding byte or the next section's tag.
            let bytes = reseal(with(&f.bytes, length_at, 8, s.len as u64 + 1));
            let case = format!("{}: {} length + 1", f.name, s.name);
            let (section, offset, message) = malformed(Executable::decode(&bytes), &case);
            let next = f.layout.sections.get(i + 1);
            let this_or_next = section == s.name || next.is_some_and(|n| n.name == section);
            let end = next.map_or(f.bytes.len(), |n| n.payload);
            assert!(
                this_or_next && (s.header as u64..=end as u64).contains(&offset),
                "{case}: {section} at {offset}: {message}"
            );
            // One byte less: the section's last entry is cut.
            if s.len > 0 {
                let bytes = reseal(with(&f.bytes, length_at, 8, s.len as u64 - 1));
                let case = format!("{}: {} length - 1", f.name, s.name);
                let (section, offset, message) = malformed(Executable::decode(&bytes), &case);
                assert!(
                    (section == s.name && offset < (s.payload + s.len) as u64)
                        || section == "header"
                        || next.is_some_and(|n| n.name == section),
                    "{case}: {section} at {offset}: {message}"
                );
            }
        }
    }
}

#[test]
fn every_count_field_at_its_maximum_is_an_error_at_that_field() {
    let fixtures = fixtures();
    let mut checked = 0;
    let mut fields: Vec<(&Fixture, &Field)> = distinct_fields(&fixtures)
        .into_iter()
        .filter(|(_, field)| field.kind == FieldKind::Count)
        .collect();
    // Every count of the smallest file too.
    let small = smallest(&fixtures);
    fields.extend(
        small
            .layout
            .of_kind(FieldKind::Count)
            .map(|field| (small, field)),
    );
    for (f, field) in fields {
        for value in [u64::from(u32::MAX), u64::from(u32::MAX / 2), 1 << 28] {
            let case = format!("{}: {} at {} = {value}", f.name, field.what, field.at);
            expect_malformed_at(
                with(&f.bytes, field.at, 4, value),
                field.section,
                field.at,
                "cannot fit",
                &case,
            );
            checked += 1;
        }
    }
    // Globals, constants, dimensions, primitives, text lengths, types, opcodes, functions,
    // parameters, instructions, registers, locations: each kind of count was seen.
    let kinds = [
        "globals",
        "constants",
        "constant dimensions",
        "primitives",
        "primitive text length",
        "type definitions",
        "constructor fields",
        "tensor type dimensions",
        "opcodes",
        "opcode name length",
        "functions",
        "parameters",
        "instructions",
        "registers",
        "locations",
        "fatal message length",
    ];
    for kind in kinds {
        assert!(
            fixtures.iter().any(|f| f
                .layout
                .fields
                .iter()
                .any(|x| x.kind == FieldKind::Count && x.what.contains(kind))),
            "no fixture has a count of {kind}"
        );
    }
    assert!(checked > 100, "{checked} counts checked");
}

#[test]
fn out_of_range_indices_are_errors_at_their_instruction() {
    let fixtures = fixtures();
    let mut seen = std::collections::HashSet::new();
    for f in &fixtures {
        for field in f.layout.of_kind(FieldKind::Index) {
            for value in [0xffff_u64, u64::from(u32::MAX)] {
                let case = format!("{}: {} at {} = {value}", f.name, field.what, field.at);
                let bytes = with(&f.bytes, field.at, 4, value);
                if field.section == "globals" {
                    // The global's entry starts at its name's length.
                    let entry = f
                        .layout
                        .fields
                        .iter()
                        .filter(|x| x.what == "global name length" && x.at < field.at)
                        .map(|x| x.at)
                        .max()
                        .expect("the global's name");
                    expect_malformed_at(bytes, "globals", entry, "names function", &case);
                } else {
                    let needle = if field.what.contains("kernel") {
                        "kernel index"
                    } else if field.what.contains("constant") {
                        "constant index"
                    } else {
                        "function index"
                    };
                    let start = instruction_start(&f.layout, field.at);
                    expect_malformed_at(bytes, "code", start, needle, &case);
                }
                seen.insert(field.what.clone());
            }
        }
    }
    for what in [
        "global function index",
        "invoke function index",
        "alloc_closure function index",
        "tail_invoke function index",
        "invoke_packed kernel index",
        "invoke_packed_alloc kernel index",
        "load_const constant index",
    ] {
        assert!(seen.contains(what), "no fixture has a {what}: {seen:?}");
    }
}

#[test]
fn registers_outside_the_frame_are_errors_at_their_instruction() {
    for f in fixtures() {
        // The register count of each function, in order: a register's function is the last
        // register count before it.
        let counts: Vec<(usize, u64)> = f
            .layout
            .of_kind(FieldKind::RegisterCount)
            .map(|c| (c.at, read(&f.bytes, c.at, 4)))
            .collect();
        for field in f.layout.of_kind(FieldKind::Register) {
            let Some(&(_, count)) = counts.iter().rev().find(|(at, _)| *at < field.at) else {
                panic!("{}: a register before any function", f.name);
            };
            for value in [count, u64::from(u32::MAX)] {
                let case = format!("{}: {} at {} = {value}", f.name, field.what, field.at);
                let start = instruction_start(&f.layout, field.at);
                let bytes = with(&f.bytes, field.at, 4, value);
                expect_malformed_at(bytes, "code", start, "outside the", &case);
            }
        }
        // A register count of 0 leaves no room for the parameters or any register.
        for c in f.layout.of_kind(FieldKind::RegisterCount) {
            let bytes = reseal(with(&f.bytes, c.at, 4, 0));
            let (section, _, message) = malformed(Executable::decode(&bytes), "0 registers");
            assert_eq!(section, "code", "{message}");
        }
    }
}

/// The little-endian integer of `size` bytes at `at`.
fn read(bytes: &[u8], at: usize, size: usize) -> u64 {
    let mut v = [0u8; 8];
    v[..size].copy_from_slice(&bytes[at..at + size]);
    u64::from_le_bytes(v)
}

#[test]
fn jumps_outside_the_function_are_errors() {
    let fixtures = fixtures();
    let mut jumps = 0;
    for f in &fixtures {
        for field in f.layout.of_kind(FieldKind::Jump) {
            let start = instruction_start(&f.layout, field.at);
            for value in [0i32, 100_000, -100_000, i32::MIN, i32::MAX] {
                let case = format!("{}: {} at {} = {value}", f.name, field.what, field.at);
                let bytes = with(&f.bytes, field.at, 4, u64::from(value as u32));
                expect_malformed_at(bytes, "code", start, "lands outside", &case);
            }
            jumps += 1;
        }
    }
    assert!(jumps > 5, "{jumps} jumps");
}

#[test]
fn opcodes_are_checked_against_the_opcode_table() {
    let fixtures = fixtures();
    let f = smallest(&fixtures);
    // An opcode name this relayc does not know (same length, so the table still parses).
    let name = f
        .layout
        .find("opcode name length")
        .expect("an opcode table");
    let mut bytes = f.bytes.clone();
    bytes[name.at + 4] = b'#';
    expect_malformed_at(
        bytes,
        "code",
        name.at,
        "does not know",
        "unknown opcode name",
    );
    // More than 256 opcodes.
    let table = f.layout.find("opcodes").expect("the opcode count");
    let bytes = with(&f.bytes, table.at, 4, 257);
    let (section, _, message) = malformed(Executable::decode(&reseal(bytes)), "257 opcodes");
    assert_eq!(section, "code", "{message}");
    // An opcode byte outside the table, at every instruction.
    for op in f.layout.of_kind(FieldKind::Opcode) {
        for value in [Instructions::COUNT as u64, 0xff] {
            let bytes = with(&f.bytes, op.at, 1, value);
            let case = format!("opcode {value} at {}", op.at);
            expect_malformed_at(
                bytes,
                "code",
                op.at,
                "not in the file's opcode table",
                &case,
            );
        }
    }
    // The table reordered: the same instructions read back under the new numbering.
    let first = f.layout.find("opcode name length").expect("opcode");
    let mut bytes = f.bytes.clone();
    bytes[first.at + 4..first.at + 8].copy_from_slice(b"ret ");
    expect_malformed_at(
        bytes,
        "code",
        first.at,
        "does not know",
        "`ret ` is not `ret`",
    );
}

/// The number of instruction kinds.
struct Instructions;

impl Instructions {
    const COUNT: usize = relay_vm::Instruction::KINDS.len();
}

#[test]
fn bad_dtypes_are_errors() {
    let fixtures = fixtures();
    let mut checked = 0;
    for f in &fixtures {
        for field in f.layout.of_kind(FieldKind::Dtype) {
            for code in [5u64, 7, 0xff] {
                let case = format!("{}: {} at {} = {code}", f.name, field.what, field.at);
                expect_malformed_at(
                    with(&f.bytes, field.at, 1, code),
                    field.section,
                    field.at,
                    "not a dtype",
                    &case,
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 10, "{checked}");
}

#[test]
fn bad_constants_are_errors() {
    let fixtures = fixtures();
    let f = fixtures
        .iter()
        .find(|f| f.layout.find("constant byte length").is_some())
        .expect("a fixture with a constant");
    let length = f.layout.find("constant byte length").expect("a constant");
    for value in [0, read(&f.bytes, length.at, 8) + 1, u64::MAX] {
        let bytes = with(&f.bytes, length.at, 8, value);
        expect_malformed_at(bytes, "constants", length.at, "has", "constant length");
    }
    // Non-zero padding before the constant's data.
    let pad = length.at + 8;
    if pad % CONSTANT_ALIGNMENT != 0 {
        let mut bytes = f.bytes.clone();
        bytes[pad] = 1;
        expect_malformed_at(bytes, "constants", pad, "padding", "constant padding");
    }
}

#[test]
fn primitives_that_do_not_parse_type_check_or_match_their_hash_are_errors() {
    let f = fixture("add.relay", ADD);
    let text = f.layout.find("primitive text length").expect("a primitive");
    let len = read(&f.bytes, text.at, 4) as usize;
    let start = text.at + 4;
    let source = String::from_utf8(f.bytes[start..start + len].to_vec()).expect("utf-8");
    // Not parsing.
    let mut bytes = f.bytes.clone();
    bytes[start] = b'}';
    expect_malformed_at(bytes, "primitives", text.at, "does not parse", "parse");
    // Not UTF-8.
    let mut bytes = f.bytes.clone();
    bytes[start] = 0xff;
    expect_malformed_at(bytes, "primitives", start, "a primitive's text", "utf-8");
    // Not type-checking: the first parameter becomes an int32 added to a float32.
    let at = source.find("float32").expect("a float32 parameter");
    let mut bytes = f.bytes.clone();
    bytes[start + at..start + at + 7].copy_from_slice(b"int32  ");
    expect_malformed_at(bytes, "primitives", text.at, "does not type-check", "type");
    // Not a primitive function.
    let at = source.find("Primitive").expect("the Primitive attribute");
    let mut bytes = f.bytes.clone();
    bytes[start + at..start + at + 9].copy_from_slice(b"Primitivx");
    expect_malformed_at(bytes, "primitives", text.at, "Primitive", "attribute");
    // A hash that does not match.
    let hash = f.layout.find("primitive hash").expect("a hash");
    let entry = f.layout.find("primitive name length").expect("a name");
    let bytes = with(&f.bytes, hash.at, 8, read(&f.bytes, hash.at, 8) ^ 1);
    expect_malformed_at(bytes, "primitives", entry.at, "hashes to", "hash");
}

#[test]
fn bad_globals_are_errors() {
    let f = fixture("two_globals.relay", TWO_GLOBALS);
    let names: Vec<&Field> = f
        .layout
        .fields
        .iter()
        .filter(|x| x.what == "global name length")
        .collect();
    assert_eq!(names.len(), 2);
    // A wrong arity.
    let arity = f.layout.find("global arity").expect("an arity");
    let bytes = with(&f.bytes, arity.at, 4, 7);
    expect_malformed_at(bytes, "globals", names[0].at, "has arity 7", "arity");
    // Two globals of the same name: `@main` and `@side` are both four letters.
    let mut bytes = f.bytes.clone();
    let second = names[1].at + 4;
    let first = names[0].at + 4;
    let copy = bytes[first..first + 4].to_vec();
    bytes[second..second + 4].copy_from_slice(&copy);
    expect_malformed_at(bytes, "globals", names[1].at, "listed twice", "duplicate");
    // A global name that is not UTF-8.
    let mut bytes = f.bytes.clone();
    bytes[first] = 0xc0;
    expect_malformed_at(bytes, "globals", first, "global's name", "utf-8 name");
}

#[test]
fn non_zero_padding_and_trailing_bytes_are_errors() {
    let mut padded = 0;
    for f in fixtures() {
        for s in &f.layout.sections {
            let end = s.payload + s.len;
            if end % 8 != 0 {
                let mut bytes = f.bytes.clone();
                bytes[end] = 0x20;
                let case = format!("{}: {} padding", f.name, s.name);
                expect_malformed_at(bytes, s.name, end, "padding", &case);
                padded += 1;
            }
        }
        // Bytes between the last section and the checksum.
        let body = f.bytes.len() - CHECKSUM_LEN;
        for extra in [1usize, 8, 64] {
            let mut bytes = f.bytes[..body].to_vec();
            bytes.extend(std::iter::repeat_n(0u8, extra + CHECKSUM_LEN));
            let case = format!("{}: {extra} trailing bytes", f.name);
            // The last section ends, padded, where the checksum was: the error is there.
            let (section, offset, message) = malformed(Executable::decode(&reseal(bytes)), &case);
            assert!(
                section == "header" && message.contains("between the last section"),
                "{case}: {section} at {offset}: {message}"
            );
            assert_eq!(offset as usize, body, "{case}: {message}");
        }
        // Bytes after a section's last entry, inside its length.
        let s = &f.layout.sections[0];
        let end = s.payload + s.len;
        let mut bytes = f.bytes[..end].to_vec();
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&f.bytes[end..]);
        let bytes = with(&bytes, s.header + 8, 8, s.len as u64 + 8);
        let case = format!("{}: 8 bytes after the globals", f.name);
        expect_malformed_at(bytes, s.name, end, "after the section's last entry", &case);
    }
    assert!(padded > 0);
    assert_eq!(SECTION_HEADER_LEN, 16);
}

/// Regression: a register count larger than the registers a function names passed the
/// validator (which only checks that every named register is below it), and running the
/// function then made the VM allocate a frame of that many registers: 2^32 - 1 of them
/// aborted the process on allocation failure (`Vec::resize` in `Vm::push_frame`), from a
/// file of a few hundred bytes. The reader now rejects a register count above the function's
/// parameters and named registers, or above one register per parameter and register operand.
#[test]
fn a_register_count_beyond_the_registers_named_is_an_error() {
    for f in fixtures() {
        for c in f.layout.of_kind(FieldKind::RegisterCount) {
            let count = read(&f.bytes, c.at, 4);
            for value in [count + 1, 1 << 20, u64::from(u32::MAX)] {
                let case = format!("{}: register count at {} = {value}", f.name, c.at);
                expect_malformed_at(
                    with(&f.bytes, c.at, 4, value),
                    "code",
                    c.at,
                    "at most",
                    &case,
                );
            }
        }
    }
}

/// The fuzz target's seed corpus (`fuzz/README.md`): one file per fixture, written to the
/// directory `RELAY_FUZZ_SEED_DIR` when it is set. Without it, checks that every fixture
/// file loads, which is what makes it a useful seed.
#[test]
fn write_the_fuzz_seed_corpus() {
    let dir = std::env::var_os("RELAY_FUZZ_SEED_DIR");
    for f in fixtures() {
        assert!(Executable::decode(&f.bytes).is_ok(), "{}", f.name);
        if let Some(dir) = &dir {
            let dir = std::path::Path::new(dir);
            std::fs::create_dir_all(dir).expect("the seed directory");
            let path = dir.join(f.name.replace(".relay", ".ro"));
            std::fs::write(&path, &f.bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        }
    }
}

/// `f`'s file with its first primitive's text replaced by `text` (the text's length, the
/// section's length and padding adjusted; not resealed).
fn with_primitive_text(f: &Fixture, text: &[u8]) -> Vec<u8> {
    let field = f.layout.find("primitive text length").expect("a primitive");
    let old = read(&f.bytes, field.at, 4) as usize;
    let prim = f.layout.section("primitives");
    let end = prim.payload + prim.len;
    let mut payload = f.bytes[prim.payload..field.at].to_vec();
    payload.extend_from_slice(&(text.len() as u32).to_le_bytes());
    payload.extend_from_slice(text);
    payload.extend_from_slice(&f.bytes[field.at + 4 + old..end]);
    let mut out = f.bytes[..prim.header + 8].to_vec();
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&payload);
    out.resize(out.len().next_multiple_of(8), 0);
    out.extend_from_slice(&f.bytes[end.next_multiple_of(8)..]);
    out
}

#[test]
fn deeply_nested_primitive_text_and_types_are_errors_not_stack_overflows() {
    let f = fixture("add.relay", ADD);
    let text = f.layout.find("primitive text length").expect("a primitive");
    for depth in [1_000, 100_000] {
        for (open, close) in [("(", ")"), ("(", ",)"), ("fn () { ", " }"), ("[", "]")] {
            let nested = format!("{}%x{}", open.repeat(depth), close.repeat(depth));
            let bytes = reseal(with_primitive_text(&f, nested.as_bytes()));
            let (section, offset, message) =
                malformed(Executable::decode(&bytes), &format!("{open} x {depth}"));
            assert_eq!(
                (section, offset),
                ("primitives", text.at as u64),
                "{message}"
            );
        }
    }
    // The text of the primitive, unchanged but re-spliced, still loads.
    let len = read(&f.bytes, text.at, 4) as usize;
    let same = f.bytes[text.at + 4..text.at + 4 + len].to_vec();
    assert!(Executable::decode(&reseal(with_primitive_text(&f, &same))).is_ok());

    // A parameter type nested deeper than the reader allows.
    let mut exe = common::build(ADD, "add.relay");
    let nest = |depth: usize| {
        (0..depth).fold(
            relay_ir::Type::tensor(&[2], relay_ir::DType::F32),
            |t, _| relay_ir::Type::tuple(vec![t]),
        )
    };
    let main = exe.globals["main"] as usize;
    exe.functions[main].param_types[0] = Some(nest(150));
    assert!(Executable::decode(&exe.to_bytes().expect("saves")).is_ok());
    exe.functions[main].param_types[0] = Some(nest(5_000));
    let (section, _, message) = malformed(
        Executable::decode(&exe.to_bytes().expect("saves")),
        "deep type",
    );
    assert_eq!(section, "code");
    assert!(message.contains("nest deeper"), "{message}");
}

/// Regression, the same abort with a single register operand: `load_consti $4294967294 0;
/// ret $4294967294` with 2^32 - 1 registers validates (every register is below the count and
/// the count is the highest register plus one) but asks for a 4-billion-register frame. The
/// reader allows at most one register per parameter and register operand.
#[test]
fn one_high_register_does_not_make_a_huge_frame() {
    let high = relay_vm::Reg(u32::MAX - 1);
    let f = relay_vm::VmFunction {
        name: "main".into(),
        params: vec![],
        register_count: u32::MAX,
        code: vec![
            relay_vm::Instruction::LoadConsti {
                value: 0,
                dst: high,
            },
            relay_vm::Instruction::Ret { result: high },
        ],
        param_types: vec![],
        ret_type: None,
        locations: vec![],
    };
    let exe = Executable {
        functions: vec![f],
        globals: [("main".to_string(), 0)].into_iter().collect(),
        ..Executable::default()
    };
    // The validator refuses it in memory too (the compiler's output never asks for more).
    let err = exe.validate().expect_err("a frame of 2^32 - 1 registers");
    assert!(err.message.contains("name at most 2"), "{err}");
    let bytes = exe.to_bytes().expect("saves");
    let layout = walk(&bytes);
    let count = layout
        .of_kind(FieldKind::RegisterCount)
        .next()
        .expect("a register count");
    let (section, offset, message) = malformed(Executable::decode(&bytes), "high register");
    assert_eq!((section, offset), ("code", count.at as u64), "{message}");
    assert!(message.contains("name at most 2"), "{message}");
    // The same function with the registers it names: loads and runs.
    let low = relay_vm::Reg(0);
    let mut small = exe.clone();
    small.functions[0].register_count = 1;
    small.functions[0].code = vec![
        relay_vm::Instruction::LoadConsti { value: 7, dst: low },
        relay_vm::Instruction::Ret { result: low },
    ];
    let loaded = Executable::from_bytes(&small.to_bytes().expect("saves")).expect("loads");
    let result = relay_vm::Vm::new(&loaded)
        .invoke("main", &[])
        .expect("runs");
    assert_eq!(common::int_of(&result), 7);
}
