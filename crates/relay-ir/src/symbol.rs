//! Interned names: a global, thread-safe interner mapping strings to `u32` symbols.

use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::{OnceLock, RwLock};

/// An interned string. Comparing and hashing symbols is comparing integers.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Symbol(u32);

/// The FxHash function (rustc's): a multiply-rotate hash, much faster than SipHash for short
/// identifiers. Interned names are not attacker-controlled keys of a long-lived server map, so
/// HashDoS resistance is not needed here.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        const SEED: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(SEED);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

struct Interner {
    map: HashMap<&'static str, u32, BuildHasherDefault<FxHasher>>,
    strings: Vec<&'static str>,
}

fn interner() -> &'static RwLock<Interner> {
    static INTERNER: OnceLock<RwLock<Interner>> = OnceLock::new();
    INTERNER.get_or_init(|| {
        RwLock::new(Interner {
            map: HashMap::default(),
            strings: Vec::new(),
        })
    })
}

impl Symbol {
    /// Interns `s`. Interned strings live for the rest of the process.
    pub fn intern(s: &str) -> Symbol {
        if let Some(sym) = Symbol::existing(s) {
            return sym;
        }
        let mut guard = interner().write().unwrap_or_else(|e| e.into_inner());
        if let Some(&id) = guard.map.get(s) {
            return Symbol(id);
        }
        let id = u32::try_from(guard.strings.len()).expect("fewer than 2^32 distinct names");
        let leaked: &'static str = Box::leak(s.to_owned().into_boxed_str());
        guard.strings.push(leaked);
        guard.map.insert(leaked, id);
        Symbol(id)
    }

    /// The symbol of `s` if it has been interned (one lookup, nothing interned).
    pub fn existing(s: &str) -> Option<Symbol> {
        let guard = interner().read().unwrap_or_else(|e| e.into_inner());
        guard.map.get(s).map(|&id| Symbol(id))
    }

    /// The interned text.
    pub fn as_str(self) -> &'static str {
        interner().read().unwrap_or_else(|e| e.into_inner()).strings[self.0 as usize]
    }
}

impl fmt::Debug for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

impl fmt::Display for Symbol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<&str> for Symbol {
    fn from(s: &str) -> Symbol {
        Symbol::intern(s)
    }
}
