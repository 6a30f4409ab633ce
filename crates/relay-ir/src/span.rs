//! Source spans: byte ranges into the module's source text.

/// A half-open byte range `lo..hi` in the source the node came from. Synthesized nodes carry
/// [`Span::DUMMY`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    /// First byte.
    pub lo: u32,
    /// One past the last byte.
    pub hi: u32,
}

impl Span {
    /// The span of a node with no source text.
    pub const DUMMY: Span = Span { lo: 0, hi: 0 };

    /// A span from byte offsets (saturating at `u32::MAX`).
    pub fn new(lo: usize, hi: usize) -> Span {
        let clamp = |x: usize| u32::try_from(x).unwrap_or(u32::MAX);
        Span {
            lo: clamp(lo),
            hi: clamp(hi),
        }
    }

    /// The smallest span covering both.
    pub fn to(self, other: Span) -> Span {
        if self == Span::DUMMY {
            return other;
        }
        if other == Span::DUMMY {
            return self;
        }
        Span {
            lo: self.lo.min(other.lo),
            hi: self.hi.max(other.hi),
        }
    }

    /// Whether this is [`Span::DUMMY`].
    pub fn is_dummy(self) -> bool {
        self == Span::DUMMY
    }

    /// The byte length.
    pub fn len(self) -> usize {
        (self.hi - self.lo) as usize
    }

    /// Whether the span covers no bytes.
    pub fn is_empty(self) -> bool {
        self.hi == self.lo
    }
}

impl From<Span> for std::ops::Range<usize> {
    fn from(s: Span) -> Self {
        s.lo as usize..s.hi as usize
    }
}
