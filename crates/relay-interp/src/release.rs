//! Dropping values without deep native recursion.
//!
//! ADT values drop iteratively by themselves (`relay_runtime::AdtValue`'s `Drop`), but tuples,
//! references and closures nest too: a closure capturing a closure capturing ... is as deep as
//! the program made it. Every value the interpreter lets go of passes through
//! [`Releaser::release`], which takes apart the values it holds the last reference to with a
//! heap stack, whatever they are.

use std::sync::Arc;

use relay_ir::Value;

use crate::closure::Closure;

/// An explicit stack for taking apart uniquely-owned values.
pub(crate) struct Releaser {
    stack: Vec<Value>,
    /// The empty tuple, put in place of a uniquely-owned tuple's fields as they are taken out.
    empty: Value,
}

impl Releaser {
    /// A releaser with an empty stack.
    pub(crate) fn new() -> Releaser {
        Releaser {
            stack: Vec::new(),
            empty: Value::tuple(Vec::new()),
        }
    }

    /// Drops `value`: shared payloads just lose a reference; payloads this was the last
    /// reference to are taken apart one level at a time.
    pub(crate) fn release(&mut self, value: Value) {
        self.stack.push(value);
        while let Some(v) = self.stack.pop() {
            match v {
                Value::Tensor(_) | Value::Storage(_) => {}
                Value::Adt(adt) => {
                    if let Ok(mut adt) = Arc::try_unwrap(adt) {
                        self.stack.append(&mut adt.fields);
                    }
                }
                Value::Tuple(mut fields) => {
                    if let Some(fields) = Arc::get_mut(&mut fields) {
                        for f in fields.iter_mut() {
                            self.stack.push(std::mem::replace(f, self.empty.clone()));
                        }
                    }
                }
                Value::Ref(cell) => {
                    if let Ok(cell) = Arc::try_unwrap(cell) {
                        self.stack
                            .push(cell.into_inner().unwrap_or_else(|e| e.into_inner()));
                    }
                }
                Value::Closure(mut any) => {
                    if let Some(closure) =
                        Arc::get_mut(&mut any).and_then(|c| c.downcast_mut::<Closure>())
                    {
                        self.stack
                            .extend(closure.take_captured().into_iter().map(|(_, v)| v));
                    }
                }
            }
        }
    }
}

/// Drops `value` without deep native recursion, however long the lists it holds: use it for
/// results that may hold long ADT chains, whose ordinary drop would overflow the stack.
pub fn drop_value(value: Value) {
    Releaser::new().release(value);
}
