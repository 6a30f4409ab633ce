//! The read and write sets of a statement: which buffers it loads and stores, and where.
//!
//! An element access names its flat index expression; a GEMM reads its operands and writes
//! its result as whole matrices ([`Place::Whole`]), so no index comparison can ever prove a
//! GEMM elementwise. Lowering aliases a scratch buffer onto an output only when these sets
//! prove the stage reading it elementwise in place ([`Accesses::elementwise_store`]), and the
//! verifier checks GEMM operands against them.

use super::{BufferId, LExpr, Stmt};

/// Where a statement touches a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Place {
    /// One element per evaluation, at this flat index.
    At(LExpr),
    /// The whole buffer, or a strided matrix of it (a GEMM operand or result).
    Whole,
}

/// One load or store of a buffer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Access {
    /// The buffer touched.
    pub buffer: BufferId,
    /// Where.
    pub place: Place,
}

/// Every load and store of a statement (and the statements inside it), in order.
#[derive(Clone, Debug, Default)]
pub struct Accesses {
    /// The loads: element loads in expressions (values, indices, loop bounds, GEMM offsets)
    /// and GEMM operands.
    pub reads: Vec<Access>,
    /// The stores: element stores and GEMM results.
    pub writes: Vec<Access>,
}

impl Accesses {
    /// The read and write sets of `stmt`.
    pub fn of(stmt: &Stmt) -> Accesses {
        let mut out = Accesses::default();
        out.collect(stmt);
        out
    }

    fn collect(&mut self, stmt: &Stmt) {
        match stmt {
            Stmt::Seq(items) => items.iter().for_each(|s| self.collect(s)),
            Stmt::For { body, .. } => self.collect(body),
            Stmt::Range {
                start, end, body, ..
            } => {
                self.loads(start);
                self.loads(end);
                self.collect(body);
            }
            Stmt::Store {
                buffer,
                index,
                value,
            } => {
                self.loads(index);
                self.loads(value);
                self.writes.push(Access {
                    buffer: *buffer,
                    place: Place::At(index.clone()),
                });
            }
            Stmt::Assign { value, .. } => self.loads(value),
            Stmt::Gemm(g) => {
                for m in g.matrices() {
                    self.loads(&m.offset);
                }
                let epilogue = g.epilogue.steps.iter().map(|(_, m)| m);
                for m in [&g.a, &g.b].into_iter().chain(epilogue) {
                    self.reads.push(Access {
                        buffer: m.buffer,
                        place: Place::Whole,
                    });
                }
                self.writes.push(Access {
                    buffer: g.c.buffer,
                    place: Place::Whole,
                });
            }
            Stmt::Depthwise(d) => {
                let e = &d.epilogue;
                let epilogue = [e.scale, e.shift].into_iter().flatten();
                for (buffer, _) in [d.data, d.weight].into_iter().chain(epilogue) {
                    self.reads.push(Access {
                        buffer,
                        place: Place::Whole,
                    });
                }
                self.writes.push(Access {
                    buffer: d.out.0,
                    place: Place::Whole,
                });
            }
        }
    }

    fn loads(&mut self, e: &LExpr) {
        e.visit(&mut |n| {
            if let LExpr::Load { buffer, index } = n {
                self.reads.push(Access {
                    buffer: *buffer,
                    place: Place::At((**index).clone()),
                });
            }
        });
    }

    /// Whether the statement loads buffer `b`.
    pub fn reads(&self, b: BufferId) -> bool {
        self.reads.iter().any(|a| a.buffer == b)
    }

    /// Whether the statement stores to buffer `b`.
    pub fn writes(&self, b: BufferId) -> bool {
        self.writes.iter().any(|a| a.buffer == b)
    }

    /// Whether the statement loads or stores buffer `b`.
    pub fn touches(&self, b: BufferId) -> bool {
        self.reads(b) || self.writes(b)
    }

    /// The one buffer and flat index every store of the statement goes to, when there is
    /// one: the statement computes one element per evaluation of that index. `None` when it
    /// stores to several buffers or indices, runs a GEMM, or stores nothing.
    pub fn elementwise_store(&self) -> Option<(BufferId, &LExpr)> {
        let first = self.writes.first()?;
        let Place::At(index) = &first.place else {
            return None;
        };
        self.writes
            .iter()
            .all(|a| a == first)
            .then_some((first.buffer, index))
    }

    /// Whether every load of buffer `b` is at flat index `index` (true when it is not read).
    pub fn reads_only_at(&self, b: BufferId, index: &LExpr) -> bool {
        self.reads
            .iter()
            .filter(|a| a.buffer == b)
            .all(|a| matches!(&a.place, Place::At(i) if i == index))
    }

    /// The buffers the statement touches, each once, in first-use order.
    pub fn buffers(&self) -> Vec<BufferId> {
        let mut out = Vec::new();
        for a in self.reads.iter().chain(&self.writes) {
            if !out.contains(&a.buffer) {
                out.push(a.buffer);
            }
        }
        out
    }
}
