//! Run-time values: tensors, tuples, algebraic data type values, closures, references and the
//! byte storage of the memory dialect.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, Mutex};

use crate::{NDArray, NDArrayError, Storage};

/// A Relay value. Cheap to clone: every payload is shared.
#[derive(Clone)]
pub enum Value {
    /// A tensor.
    Tensor(Arc<NDArray>),
    /// A tuple.
    Tuple(Arc<[Value]>),
    /// A constructed ADT value: the constructor's tag (its position in the type definition)
    /// and its fields. The constructor's name comes from the value's type when printing.
    Adt(Arc<AdtValue>),
    /// A closure. Its representation belongs to the executor that made it (the interpreter or
    /// the VM), which downcasts it.
    Closure(Arc<dyn Any + Send + Sync>),
    /// A mutable reference cell (`ref(v)`).
    Ref(Arc<Mutex<Value>>),
    /// A byte buffer tensors are placed in (`memory.alloc_storage`, type `Storage`).
    Storage(Arc<Storage>),
}

/// The payload of [`Value::Adt`].
#[derive(Clone, Debug)]
pub struct AdtValue {
    /// The constructor's tag.
    pub tag: u32,
    /// The fields, in order.
    pub fields: Vec<Value>,
}

impl Value {
    /// A tensor value.
    pub fn tensor(array: NDArray) -> Value {
        Value::Tensor(Arc::new(array))
    }

    /// A tuple value.
    pub fn tuple(fields: Vec<Value>) -> Value {
        Value::Tuple(fields.into())
    }

    /// An ADT value.
    pub fn adt(tag: u32, fields: Vec<Value>) -> Value {
        Value::Adt(Arc::new(AdtValue { tag, fields }))
    }

    /// A zero-filled storage of `size` bytes aligned to `alignment` (a power of two).
    pub fn storage(size: usize, alignment: usize) -> Result<Value, NDArrayError> {
        Storage::new(size, alignment).map(|s| Value::Storage(Arc::new(s)))
    }

    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Arc<NDArray>> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// The fields, if this is a tuple.
    pub fn as_tuple(&self) -> Option<&[Value]> {
        match self {
            Value::Tuple(t) => Some(t),
            _ => None,
        }
    }

    /// What kind of value this is, in words ("a tensor", "a tuple", ...), for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            Value::Tensor(_) => "a tensor",
            Value::Tuple(_) => "a tuple",
            Value::Adt(_) => "an ADT value",
            Value::Closure(_) => "a closure",
            Value::Ref(_) => "a reference",
            Value::Storage(_) => "a storage",
        }
    }

    /// Every tensor leaf in depth-first order (what `--output X.npz` writes).
    pub fn tensor_leaves(&self) -> Vec<Arc<NDArray>> {
        let mut out = Vec::new();
        let mut stack = vec![self.clone()];
        while let Some(v) = stack.pop() {
            match v {
                Value::Tensor(t) => out.push(t),
                Value::Tuple(fields) => stack.extend(fields.iter().rev().cloned()),
                Value::Adt(adt) => stack.extend(adt.fields.iter().rev().cloned()),
                Value::Ref(cell) => {
                    let inner = cell.lock().unwrap_or_else(|e| e.into_inner()).clone();
                    stack.push(inner);
                }
                Value::Closure(_) | Value::Storage(_) => {}
            }
        }
        out
    }
}

impl Drop for AdtValue {
    /// Drops nested ADT values iteratively, so a 10^6-element list built of `Cons` cells is
    /// released without 10^6 nested native drop calls.
    fn drop(&mut self) {
        let mut stack: Vec<Value> = std::mem::take(&mut self.fields);
        while let Some(v) = stack.pop() {
            match v {
                Value::Adt(arc) => {
                    if let Ok(mut inner) = Arc::try_unwrap(arc) {
                        stack.append(&mut inner.fields);
                    }
                }
                Value::Tuple(mut fields) => {
                    if let Some(fields) = Arc::get_mut(&mut fields) {
                        for f in fields.iter_mut() {
                            stack.push(std::mem::replace(f, Value::Tuple(Arc::from([]))));
                        }
                    }
                }
                other => drop(other),
            }
        }
    }
}

impl fmt::Debug for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Tensor(t) => write!(f, "{t:?}"),
            Value::Tuple(fields) => f.debug_list().entries(fields.iter()).finish(),
            Value::Adt(adt) => write!(f, "Adt({}, {:?})", adt.tag, adt.fields),
            Value::Closure(_) => f.write_str("Closure"),
            Value::Ref(_) => f.write_str("Ref"),
            Value::Storage(s) => write!(f, "{s:?}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_drop_on_a_small_stack() {
        let handle = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                let mut list = Value::adt(1, vec![]);
                for _ in 0..1_000_000 {
                    list = Value::adt(0, vec![Value::tuple(vec![]), list]);
                }
                drop(list);
            })
            .expect("spawn");
        assert!(handle.join().is_ok());
    }
}
