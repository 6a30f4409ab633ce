//! Decoding a corrupted executable file never allocates much more than the file's size: every
//! count is checked against the bytes left in its section before anything is allocated for
//! it. A global allocator that wraps the system's records the peak of the bytes allocated
//! while [`Executable::decode`] reads files whose counts and lengths were set to the largest
//! values that still pass that check, and to `u32::MAX`; the peak above what was allocated
//! before must stay under 16 times the file's size plus 1 MiB.
//!
//! The file is a real program's executable made about a megabyte long with large strings in
//! the globals, primitives and code sections (a global's name, a kernel's name, a `fatal`
//! message), so that counts early in those sections have a megabyte of bytes after them.
//! One test in this binary: the allocator's counters are global.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use common::{FieldKind, reseal, walk};
use relay_vm::{Executable, Instruction, Reg, VmFunction};

/// The system allocator, counting the bytes live and their peak.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grow(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: forwarded from the caller.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        grow(layout.size());
        // SAFETY: forwarded from the caller.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded from the caller.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if new_size >= layout.size() {
            grow(new_size - layout.size());
        } else {
            LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
        }
        // SAFETY: forwarded from the caller.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The bytes allocated at the peak of `decode(bytes)` beyond those live before it.
fn peak_of_decode(bytes: &[u8]) -> usize {
    let before = LIVE.load(Ordering::Relaxed);
    PEAK.store(before, Ordering::Relaxed);
    let result = Executable::decode(bytes);
    let peak = PEAK.load(Ordering::Relaxed);
    drop(result);
    peak - before
}

/// A program with a kernel, a global function, ADTs and closures, its executable padded to
/// about a megabyte.
fn big_file() -> Vec<u8> {
    let programs = common::bytecode_programs();
    let (name, text) = programs
        .iter()
        .find(|(name, _)| name == "closure_capture.relay")
        .expect("closure_capture.relay");
    let mut exe = common::build(text, name);
    const BIG: usize = 300_000;
    let main = exe.globals["main"];
    exe.globals.insert("g".repeat(BIG), main);
    let mut kernel = exe.kernels[0].clone();
    kernel.name = "k".repeat(BIG);
    exe.kernels.push(kernel);
    exe.functions.push(VmFunction {
        name: "pad".into(),
        params: vec![],
        register_count: 0,
        code: vec![Instruction::Fatal {
            message: "m".repeat(BIG),
        }],
        param_types: vec![],
        ret_type: None,
        locations: vec![],
    });
    // A second function after it, so the counts of the first have the message after them.
    exe.functions.push(VmFunction {
        name: "id".into(),
        params: vec!["x".into()],
        register_count: 1,
        code: vec![Instruction::Ret { result: Reg(0) }],
        param_types: vec![None],
        ret_type: None,
        locations: vec![],
    });
    exe.to_bytes().expect("saves")
}

#[test]
fn decoding_a_corrupted_file_allocates_at_most_a_multiple_of_its_size() {
    let bytes = big_file();
    Executable::decode(&bytes).expect("the padded file loads");
    let layout = walk(&bytes);
    let bound = 16 * bytes.len() + (1 << 20);
    let mut worst = (0, String::new());
    let mut cases = 0;
    let mut record = |corrupted: Vec<u8>, what: String| {
        let peak = peak_of_decode(&reseal(corrupted));
        if peak > worst.0 {
            worst = (peak, what.clone());
        }
        assert!(
            peak <= bound,
            "{what}: decoding allocated {peak} bytes at its peak, more than {bound} (file {} \
             bytes)",
            bytes.len()
        );
        cases += 1;
    };
    // Every count, set to the most items of 1 to 32 bytes that fit in the rest of its
    // section (what passes the reader's check for some item size), and to u32::MAX.
    for field in layout.of_kind(FieldKind::Count) {
        let section = layout.section(field.section);
        let remaining = (section.payload + section.len) - (field.at + 4);
        let mut values = vec![u32::MAX as usize];
        values.extend((1..=32).map(|size| remaining / size));
        values.dedup();
        for value in values {
            let value = value.min(u32::MAX as usize) as u32;
            let mut corrupted = bytes.clone();
            corrupted[field.at..field.at + 4].copy_from_slice(&value.to_le_bytes());
            record(
                corrupted,
                format!("{} at {} = {value}", field.what, field.at),
            );
        }
    }
    // Every section length at its maximum.
    for field in layout.of_kind(FieldKind::SectionLength) {
        let mut corrupted = bytes.clone();
        corrupted[field.at..field.at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
        record(corrupted, format!("{} = u64::MAX", field.what));
    }
    // The valid file itself.
    record(bytes.clone(), "the valid file".into());
    eprintln!(
        "{cases} files of {} bytes; the largest peak: {} bytes ({})",
        bytes.len(),
        worst.0,
        worst.1
    );
    assert!(cases > 500, "{cases} cases");
}
