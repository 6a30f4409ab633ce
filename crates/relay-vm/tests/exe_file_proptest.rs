//! Random corruptions of valid executable files never make loading or running panic:
//! [`Executable::decode`] and [`Executable::from_bytes`] return `Ok` or a typed error, and a
//! file that loads runs `@main` to a value or a [`relay_vm::VmError`].
//!
//! The files are the executables of `ir-tests/bytecode/`. Each case applies one to four
//! mutations — a flipped byte, a random or boundary value written over a field the tests'
//! reader located ([`common::walk`]: counts, lengths, indices, registers, jumps, opcodes,
//! dtypes) or over any 4 or 8 bytes, an inserted or deleted byte range, a truncation — and
//! then, in nine cases of ten, reseals the file ([`common::reseal`]) so the decoder gets past
//! the checksum to the mutated bytes.
//!
//! Running a loaded file must terminate: a mutated jump or call can make a real infinite
//! loop, which is not an error. So a mutated file is run only when it is sure to stop: its
//! functions, constants and globals are the original's (the original program on its own
//! inputs), or its bytecode has no backward jump and its call graph (calls, tail calls, and
//! closure calls to any function a closure is made of) has no cycle.
//!
//! A second property scrambles only registers (within their frame) and kernel, constant and
//! function indices (within their table), so that almost every file loads and the VM meets
//! bytecode that validates but is semantically wrong.
//!
//! `PROPTEST_CASES` sets the number of cases of the first property (default 5000; the second
//! runs half as many).

mod common;

use std::collections::HashSet;
use std::sync::OnceLock;

use common::{FieldKind, FileLayout, reseal, walk};
use proptest::prelude::*;
use proptest::sample::Index;
use relay_ir::Value;
use relay_vm::{Executable, Instruction, Vm, VmOptions};

/// A valid file, its layout, the executable loaded from it and inputs for its `@main`.
struct Fixture {
    name: String,
    bytes: Vec<u8>,
    layout: FileLayout,
    loaded: Executable,
    inputs: Vec<Value>,
}

/// The fixtures, built once. The loaded executables stay alive, so a mutated file whose
/// primitives are unchanged finds its kernels in the shared kernel cache.
fn fixtures() -> &'static [Fixture] {
    static FIXTURES: OnceLock<Vec<Fixture>> = OnceLock::new();
    FIXTURES.get_or_init(|| {
        common::bytecode_programs()
            .into_iter()
            .map(|(name, text)| {
                let module = common::typed(&text, &name).unwrap_or_else(|e| panic!("{name}: {e}"));
                let exe = common::compile(&module, common::Config::DEFAULT)
                    .unwrap_or_else(|e| panic!("{name}: {e}"));
                let bytes = exe.to_bytes().expect("saves");
                let layout = walk(&bytes);
                let loaded = Executable::from_bytes(&bytes).expect("loads");
                // A `?` dimension of `@main` gets the extent 3.
                let inputs = if text.contains("(?,") {
                    let fixed = common::typed(&text.replace("(?,", "(3,"), &name)
                        .unwrap_or_else(|e| panic!("{name}: {e}"));
                    common::main_inputs(&fixed, 0)
                } else {
                    common::main_inputs(&module, 0)
                };
                Fixture {
                    name,
                    bytes,
                    layout,
                    loaded,
                    inputs,
                }
            })
            .collect()
    })
}

/// One edit of a file.
#[derive(Clone, Debug)]
enum Mutation {
    /// XOR a byte with a non-zero mask.
    Flip { at: Index, mask: u8 },
    /// Overwrite a field the walker located with a value (`delta` set: the field's value
    /// plus a small signed number).
    Field {
        field: Index,
        value: u64,
        delta: Option<i8>,
    },
    /// Overwrite 4 or 8 bytes anywhere.
    Word { at: Index, wide: bool, value: u64 },
    /// Insert bytes.
    Insert { at: Index, bytes: Vec<u8> },
    /// Delete up to 32 bytes.
    Delete { at: Index, len: usize },
    /// Cut the file.
    Truncate { at: Index },
}

/// Random values and the boundary values of 8-, 32- and 64-bit fields.
fn value() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1),
        Just(0x7f),
        Just(0xff),
        Just(0x7fff_ffff),
        Just(0x8000_0000),
        Just(u64::from(u32::MAX)),
        Just(u64::MAX),
        Just(i64::MAX as u64),
        0u64..64,
        any::<u64>(),
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => (any::<Index>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        5 => (any::<Index>(), value(), prop::option::of(-3i8..=3))
            .prop_map(|(field, value, delta)| Mutation::Field { field, value, delta }),
        2 => (any::<Index>(), any::<bool>(), value())
            .prop_map(|(at, wide, value)| Mutation::Word { at, wide, value }),
        1 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..16))
            .prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        1 => (any::<Index>(), 1usize..32).prop_map(|(at, len)| Mutation::Delete { at, len }),
        1 => any::<Index>().prop_map(|at| Mutation::Truncate { at }),
    ]
}

/// `bytes` after `m` (field positions from `layout`, the unedited file's; a field past the
/// end of an already shortened file is skipped).
fn apply(bytes: &mut Vec<u8>, layout: &FileLayout, m: &Mutation) {
    let len = bytes.len();
    if len == 0 {
        return;
    }
    match m {
        Mutation::Flip { at, mask } => bytes[at.index(len)] ^= mask,
        Mutation::Field {
            field,
            value,
            delta,
        } => {
            let f = &layout.fields[field.index(layout.fields.len())];
            if f.at + f.size > len {
                return;
            }
            let mut old = [0u8; 8];
            old[..f.size].copy_from_slice(&bytes[f.at..f.at + f.size]);
            let new = match delta {
                Some(d) => u64::from_le_bytes(old).wrapping_add(*d as i64 as u64),
                None => *value,
            };
            bytes[f.at..f.at + f.size].copy_from_slice(&new.to_le_bytes()[..f.size]);
        }
        Mutation::Word { at, wide, value } => {
            let size = if *wide { 8 } else { 4 };
            if len >= size {
                let at = at.index(len - size + 1);
                bytes[at..at + size].copy_from_slice(&value.to_le_bytes()[..size]);
            }
        }
        Mutation::Insert { at, bytes: new } => {
            let at = at.index(len + 1);
            bytes.splice(at..at, new.iter().copied());
        }
        Mutation::Delete { at, len: n } => {
            let at = at.index(len);
            bytes.drain(at..(at + n).min(len));
        }
        Mutation::Truncate { at } => bytes.truncate(at.index(len)),
    }
}

/// Whether running `exe` is sure to stop: the original program, or no backward jump and an
/// acyclic call graph.
fn terminates(exe: &Executable, original: &Executable) -> bool {
    let same_constants = exe.constants.len() == original.constants.len()
        && exe.constants.iter().zip(&original.constants).all(|(a, b)| {
            a.dtype() == b.dtype() && a.shape() == b.shape() && a.as_bytes() == b.as_bytes()
        });
    if exe.functions == original.functions && same_constants && exe.globals == original.globals {
        return true;
    }
    let n = exe.functions.len();
    let closures: Vec<u32> = exe
        .functions
        .iter()
        .flat_map(|f| &f.code)
        .filter_map(|i| match i {
            Instruction::AllocClosure { func, .. } => Some(*func),
            _ => None,
        })
        .collect();
    let mut calls: Vec<Vec<u32>> = vec![Vec::new(); n];
    for (caller, f) in exe.functions.iter().enumerate() {
        for instr in &f.code {
            match instr {
                Instruction::If {
                    true_offset,
                    false_offset,
                    ..
                } if *true_offset < 0 || *false_offset < 0 => return false,
                Instruction::Goto { offset } if *offset < 0 => return false,
                Instruction::Invoke { func, .. } | Instruction::TailInvoke { func, .. } => {
                    calls[caller].push(*func);
                }
                Instruction::InvokeClosure { .. } | Instruction::TailInvokeClosure { .. } => {
                    calls[caller].extend(&closures);
                }
                _ => {}
            }
        }
    }
    // Depth-first search for a cycle: 0 unvisited, 1 on the path, 2 done.
    fn cyclic(v: usize, calls: &[Vec<u32>], state: &mut [u8]) -> bool {
        state[v] = 1;
        for &w in &calls[v] {
            let w = w as usize;
            if w >= state.len() || state[w] == 1 || (state[w] == 0 && cyclic(w, calls, state)) {
                return true;
            }
        }
        state[v] = 2;
        false
    }
    let mut state = vec![0u8; n];
    (0..n).all(|v| state[v] != 0 || !cyclic(v, &calls, &mut state))
}

/// What happened to one mutated file, for the coverage check.
#[derive(Default)]
struct Outcomes {
    errors: usize,
    loaded: usize,
    ran: usize,
    /// Runs of bytecode that differs from the original's.
    ran_mutated: usize,
}

fn check(fixture: &Fixture, mutations: &[Mutation], sealed: bool, full: bool) -> Outcomes {
    let mut bytes = fixture.bytes.clone();
    for m in mutations {
        apply(&mut bytes, &fixture.layout, m);
    }
    if sealed {
        bytes = reseal(bytes);
    }
    let mut out = Outcomes::default();
    let decoded = Executable::decode(&bytes);
    let loaded = if full {
        let loaded = Executable::from_bytes(&bytes);
        // `from_bytes` is `decode` and a JIT compile: it fails where `decode` does, and
        // beyond that only on a kernel that does not compile.
        let consistent = match (&decoded, &loaded) {
            (Ok(_), Ok(_)) | (Err(_), Err(_)) => true,
            (Ok(_), Err(e)) => matches!(e, relay_vm::ExeFileError::Kernel { .. }),
            (Err(_), Ok(_)) => false,
        };
        assert!(
            consistent,
            "{}: decode and from_bytes disagree: {:?} / {:?}",
            fixture.name,
            decoded.as_ref().err(),
            loaded.as_ref().err()
        );
        loaded
    } else {
        decoded
    };
    let Ok(exe) = loaded else {
        out.errors += 1;
        return out;
    };
    out.loaded += 1;
    if terminates(&exe, &fixture.loaded) {
        let options = VmOptions {
            max_frames: 64,
            threads: 1,
            profile: false,
            trace: false,
            allocator_cap: 1 << 20,
            interrupt: None,
            ops: None,
        };
        let mut vm = Vm::with_options(&exe, options);
        // Ok or a VmError: either way, no panic.
        let _ = vm.invoke("main", &fixture.inputs);
        out.ran += 1;
        out.ran_mutated += usize::from(exe.functions != fixture.loaded.functions);
    }
    out
}

/// The first property's configuration: 5000 cases unless `PROPTEST_CASES` says otherwise,
/// a fixed seed under CI (`relay_testing::proptest_config`).
fn config() -> ProptestConfig {
    relay_testing::proptest_config(5000)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn mutated_files_load_or_fail_and_run_or_fail_without_panicking(
        fixture in any::<Index>(),
        mutations in prop::collection::vec(mutation(), 1..=4),
        sealed in prop::bool::weighted(0.9),
        full in prop::bool::weighted(0.25),
    ) {
        let fixtures = fixtures();
        let f = &fixtures[fixture.index(fixtures.len())];
        check(f, &mutations, sealed, full);
    }
}

/// What scrambling may rewrite in `fixture`: each instruction's registers, with the register
/// count of its function, and its function, kernel and constant indices, with the size of
/// the table they index (offset and exclusive bound).
fn scramble_targets(fixture: &Fixture) -> Vec<(usize, u32)> {
    let counts: Vec<(usize, u32)> = fixture
        .layout
        .of_kind(FieldKind::RegisterCount)
        .map(|c| {
            let mut v = [0u8; 4];
            v.copy_from_slice(&fixture.bytes[c.at..c.at + 4]);
            (c.at, u32::from_le_bytes(v))
        })
        .collect();
    let registers = fixture.layout.of_kind(FieldKind::Register).filter_map(|r| {
        let (_, count) = counts.iter().rev().find(|(at, _)| *at < r.at)?;
        Some((r.at, *count))
    });
    let exe = &fixture.loaded;
    let indices = fixture
        .layout
        .of_kind(FieldKind::Index)
        .filter(|i| i.section == "code")
        .map(|i| {
            let bound = if i.what.contains("kernel") {
                exe.kernels.len()
            } else if i.what.contains("constant") {
                exe.constants.len()
            } else {
                exe.functions.len()
            };
            (i.at, bound as u32)
        });
    registers.chain(indices).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: config().cases / 2, ..config() })]

    /// Bytecode that validates but is scrambled: registers replaced by other registers of
    /// the same frame, kernel, constant and function indices by other indices of their
    /// table. Such a file loads (unless no register names the frame's last one, or a call
    /// now passes the wrong number of arguments); running it must give a value or a VmError
    /// (a register of the wrong kind, an empty register, a kernel called on tensors of the
    /// wrong shape or dtype), never a panic or a crash.
    #[test]
    fn scrambled_bytecode_runs_or_fails_without_panicking(
        fixture in any::<Index>(),
        edits in prop::collection::vec((any::<Index>(), any::<Index>()), 1..=3),
    ) {
        let fixtures = fixtures();
        let f = &fixtures[fixture.index(fixtures.len())];
        let targets = scramble_targets(f);
        let mut bytes = f.bytes.clone();
        for (which, value) in &edits {
            let (at, bound) = targets[which.index(targets.len())];
            let v = value.index(bound as usize) as u32;
            bytes[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        let bytes = reseal(bytes);
        let exe = match Executable::decode(&bytes) {
            Ok(exe) => exe,
            // What scrambling may break: no register names the frame's last one, or an
            // arity.
            Err(relay_vm::ExeFileError::Malformed { message, .. })
                if ["at most", "arguments, the c"].iter().any(|m| message.contains(m)) =>
            {
                return Ok(());
            }
            Err(e) => return Err(TestCaseError::fail(format!("{}: {e}", f.name))),
        };
        if terminates(&exe, &f.loaded) {
            let options = VmOptions {
                max_frames: 64,
                threads: 1,
                profile: false,
                trace: false,
                allocator_cap: 1 << 20,
                interrupt: None,
                ops: None,
            };
            let _ = Vm::with_options(&exe, options).invoke("main", &f.inputs);
        }
    }
}

/// The mutations reach every stage: many files fail to load, some load, and some of those
/// run (a deterministic sample, so this cannot pass by luck of the draw).
#[test]
fn the_mutations_reach_loading_and_running() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &[7; 32]);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let mut total = Outcomes::default();
    let fixtures = fixtures();
    let mut names = HashSet::new();
    for i in 0..300 {
        let f = &fixtures[i % fixtures.len()];
        let mutation = mutation()
            .new_tree(&mut runner)
            .expect("a mutation")
            .current();
        let o = check(f, &[mutation], true, false);
        total.errors += o.errors;
        total.loaded += o.loaded;
        total.ran += o.ran;
        total.ran_mutated += o.ran_mutated;
        if o.ran > 0 {
            names.insert(f.name.clone());
        }
    }
    eprintln!(
        "{} errors, {} loaded, {} ran ({} with mutated bytecode), files run: {names:?}",
        total.errors, total.loaded, total.ran, total.ran_mutated
    );
    assert!(total.errors > 100, "{} errors", total.errors);
    assert!(total.loaded > 10, "{} loaded", total.loaded);
    assert!(total.ran > 5, "{} ran", total.ran);
    assert!(total.ran_mutated > 5, "{} ran mutated", total.ran_mutated);
    assert!(names.len() > 3, "ran files of {names:?}");
    // Every field kind the mutations target is present.
    for kind in [
        FieldKind::Count,
        FieldKind::Index,
        FieldKind::Register,
        FieldKind::Jump,
        FieldKind::Opcode,
        FieldKind::Dtype,
        FieldKind::SectionLength,
        FieldKind::RegisterCount,
    ] {
        assert!(
            fixtures
                .iter()
                .any(|f| f.layout.of_kind(kind).next().is_some()),
            "{kind:?}"
        );
    }
}
