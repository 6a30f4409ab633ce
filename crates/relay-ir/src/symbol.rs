//! Interned names: a global, thread-safe interner mapping strings to `u32` symbols.

use std::cell::Cell;
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

/// Slots of the per-thread table of names found ([`Symbol::existing`]).
const RECENT_SLOTS: usize = 64;

thread_local! {
    /// Names found lately, with their interned text ([`Symbol::existing`]).
    static RECENT: [Cell<Option<(&'static str, Symbol)>>; RECENT_SLOTS] =
        const { [const { Cell::new(None) }; RECENT_SLOTS] };
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

    /// The symbol of `s` if it has been interned (nothing interned). Shape functions look
    /// attributes up by name on every call at a new shape, so the names found are kept in a
    /// small per-thread table, indexed by the text's address and checked by its content,
    /// before the interner (a shared lock and a hash) is asked.
    pub fn existing(s: &str) -> Option<Symbol> {
        let slot = (s.as_ptr() as usize >> 3 ^ s.len()) % RECENT_SLOTS;
        let recent = RECENT.with(|r| r[slot].get());
        if let Some((text, sym)) = recent
            && text == s
        {
            return Some(sym);
        }
        let guard = interner().read().unwrap_or_else(|e| e.into_inner());
        let found = guard
            .map
            .get_key_value(s)
            .map(|(&text, &id)| (text, Symbol(id)));
        drop(guard);
        if let Some(found) = found {
            RECENT.with(|r| r[slot].set(Some(found)));
        }
        found.map(|(_, sym)| sym)
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

#[cfg(test)]
mod tests {
    use super::Symbol;

    /// A name found once is found again from the per-thread table, and a different name at the
    /// same address (a buffer rewritten in place) is looked up for what it says.
    #[test]
    fn existing_names_are_checked_by_their_text() {
        let found = Symbol::intern("symbol_test_alpha");
        let mut buf = String::from("symbol_test_alpha");
        assert_eq!(Symbol::existing(&buf), Some(found));
        assert_eq!(Symbol::existing(&buf), Some(found));
        // Same address and length, another text never interned.
        buf.replace_range(..6, "zzzzzz");
        assert_eq!(Symbol::existing(&buf), None);
        let other = Symbol::intern(&buf);
        assert_ne!(other, found);
        assert_eq!(Symbol::existing(&buf), Some(other));
        assert_eq!(other.as_str(), buf);
    }
}
