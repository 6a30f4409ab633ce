//! Seeded random inputs for a function's tensor parameters, and the comparison of two run
//! results with a floating-point tolerance: what `relayc run --random-inputs` and the pass
//! tests (which run a program before and after a pass) share.

use std::sync::Arc;

use relay_ir::{DTypeCode, Dim, Function, NDArray, Type, TypeKind, Value};

/// The most elements one random input may have (its values are generated as `f64`s first).
pub const MAX_RANDOM_ELEMENTS: u64 = 1 << 28;

/// The splitmix64 generator (Steele, Lea and Flood): small, fast and deterministic.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator started at `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

/// A random tensor of type `ty`, which must be a tensor type with known dimensions: floats
/// uniform in [-1, 1), signed integers in [-10, 10), unsigned integers in [0, 10), booleans 0
/// or 1. The error says why no tensor can be made ("its type `...` has an unknown dimension"),
/// for the caller to put after the parameter's name.
pub fn random_tensor(ty: Option<&Type>, rng: &mut SplitMix64) -> Result<NDArray, String> {
    let Some(ty) = ty else {
        return Err("its type is unknown".to_owned());
    };
    let TypeKind::Tensor { shape, dtype } = ty.kind() else {
        return Err(format!("its type `{ty}` is not a tensor type"));
    };
    let mut dims = Vec::with_capacity(shape.len());
    for d in shape {
        match d {
            Dim::Known(n) => dims.push(*n),
            Dim::Any => return Err(format!("its type `{ty}` has an unknown dimension")),
        }
    }
    let count = dims
        .iter()
        .try_fold(1u64, |acc, &d| acc.checked_mul(u64::try_from(d).ok()?))
        .filter(|&n| n <= MAX_RANDOM_ELEMENTS)
        .ok_or_else(|| format!("its type `{ty}` has more than {MAX_RANDOM_ELEMENTS} elements"))?;
    let dtype = *dtype;
    let values: Vec<f64> = (0..count)
        .map(|_| {
            let bits = rng.next_u64();
            if dtype.is_float() {
                // The top 53 bits as a fraction in [0, 1), scaled to [-1, 1).
                (bits >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
            } else if dtype.code == DTypeCode::Int {
                (bits % 20) as f64 - 10.0
            } else if dtype.code == DTypeCode::UInt {
                (bits % 10) as f64
            } else {
                (bits & 1) as f64
            }
        })
        .collect();
    NDArray::from_f64_slice(dtype, &dims, &values).map_err(|e| e.to_string())
}

/// Random arguments for every parameter of `func`, in order, from one generator started at
/// `seed` (see [`random_tensor`]). Each parameter's checked type is used when inference has
/// run, else its annotation. Fails, naming the parameter, when one is not a tensor of static
/// shape.
pub fn random_inputs(func: &Function, seed: u64) -> Result<Vec<Value>, String> {
    let mut rng = SplitMix64::new(seed);
    func.params
        .iter()
        .map(|param| {
            let ty = param.checked_type().or(param.ty());
            random_tensor(ty, &mut rng)
                .map(Value::tensor)
                .map_err(|why| format!("cannot make a random input `%{}`: {why}", param.name()))
        })
        .collect()
}

/// Whether two floats are equal within `atol + rtol * |expected|` (NaN equals NaN; infinities
/// must be equal), as `numpy.allclose` decides.
pub fn floats_close(actual: f64, expected: f64, rtol: f64, atol: f64) -> bool {
    if actual.is_nan() || expected.is_nan() {
        actual.is_nan() && expected.is_nan()
    } else if actual.is_infinite() || expected.is_infinite() {
        actual == expected
    } else {
        (actual - expected).abs() <= atol + rtol * expected.abs()
    }
}

/// Compares two run results: tensors need equal dtype and shape, float elements equal within
/// [`floats_close`], integer and boolean elements exactly; tuples, ADT values (tag and fields)
/// and references (their contents) are compared field by field; closures and storages are not
/// compared. The error describes the first difference and where it is
/// (`result.1.field 0: element 3 is ...`). Deep values (a 10^6-element list) are walked without native recursion.
pub fn compare_values(
    actual: &Value,
    expected: &Value,
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    // Paths are kept as an arena of (parent, step) so that only a failing path is spelled out.
    let mut steps: Vec<(usize, String)> = vec![(usize::MAX, "result".to_owned())];
    let mut stack: Vec<(Value, Value, usize)> = vec![(actual.clone(), expected.clone(), 0)];
    let path = |steps: &Vec<(usize, String)>, mut at: usize| {
        let mut parts = Vec::new();
        while at != usize::MAX {
            parts.push(steps[at].1.as_str());
            at = steps[at].0;
        }
        parts.reverse();
        parts.join(".")
    };
    while let Some((a, e, at)) = stack.pop() {
        let fail = |what: String| Err(format!("{}: {what}", path(&steps, at)));
        match (&a, &e) {
            (Value::Tensor(x), Value::Tensor(y)) => {
                if let Some(problem) = compare_tensors(x, y, rtol, atol) {
                    return fail(problem);
                }
            }
            (Value::Tuple(xs), Value::Tuple(ys)) => {
                if xs.len() != ys.len() {
                    return fail(format!(
                        "a tuple of {} fields, expected {}",
                        xs.len(),
                        ys.len()
                    ));
                }
                for (i, (x, y)) in xs.iter().zip(ys.iter()).enumerate().rev() {
                    steps.push((at, i.to_string()));
                    stack.push((x.clone(), y.clone(), steps.len() - 1));
                }
            }
            (Value::Adt(x), Value::Adt(y)) => {
                if x.tag != y.tag || x.fields.len() != y.fields.len() {
                    return fail(format!(
                        "constructor tag {} with {} fields, expected tag {} with {} fields",
                        x.tag,
                        x.fields.len(),
                        y.tag,
                        y.fields.len()
                    ));
                }
                for (i, (x, y)) in x.fields.iter().zip(&y.fields).enumerate().rev() {
                    steps.push((at, format!("field {i}")));
                    stack.push((x.clone(), y.clone(), steps.len() - 1));
                }
            }
            (Value::Ref(x), Value::Ref(y)) => {
                let inner = |cell: &Arc<std::sync::Mutex<Value>>| {
                    cell.lock().unwrap_or_else(|e| e.into_inner()).clone()
                };
                let (x, y) = (inner(x), inner(y));
                steps.push((at, "contents".to_owned()));
                stack.push((x, y, steps.len() - 1));
            }
            // Closures are code, and storages are raw bytes whose size the memory planner
            // may change: neither is compared.
            (Value::Closure(_), Value::Closure(_)) | (Value::Storage(_), Value::Storage(_)) => {}
            _ => {
                return fail(format!("{}, expected {}", a.kind_name(), e.kind_name()));
            }
        }
    }
    Ok(())
}

/// Why tensor `actual` differs from `expected`, if it does.
pub fn compare_tensors(
    actual: &NDArray,
    expected: &NDArray,
    rtol: f64,
    atol: f64,
) -> Option<String> {
    if actual.dtype() != expected.dtype() {
        return Some(format!(
            "dtype {} instead of {}",
            actual.dtype(),
            expected.dtype()
        ));
    }
    if actual.shape() != expected.shape() {
        return Some(format!(
            "shape {:?} instead of {:?}",
            actual.shape(),
            expected.shape()
        ));
    }
    if actual.dtype().is_float() {
        let (a, e) = (actual.to_f64_vec(), expected.to_f64_vec());
        let i = (0..a.len()).find(|&i| !floats_close(a[i], e[i], rtol, atol))?;
        Some(format!("element {i} is {}, expected {}", a[i], e[i]))
    } else {
        let (a, e) = (actual.to_i128_vec(), expected.to_i128_vec());
        let i = (0..a.len()).find(|&i| a[i] != e[i])?;
        Some(format!("element {i} is {}, expected {}", a[i], e[i]))
    }
}

#[cfg(test)]
mod tests {
    use relay_ir::{DType, Expr, Span, Symbol, Var};

    use super::*;

    fn f32s(values: &[f64]) -> Value {
        let dtype = DType::parse("float32").expect("float32 is a dtype");
        Value::tensor(
            NDArray::from_f64_slice(dtype, &[values.len() as i64], values).expect("valid shape"),
        )
    }

    fn i32s(values: &[f64]) -> Value {
        let dtype = DType::parse("int32").expect("int32 is a dtype");
        Value::tensor(
            NDArray::from_f64_slice(dtype, &[values.len() as i64], values).expect("valid shape"),
        )
    }

    #[test]
    fn random_inputs_are_deterministic_and_in_range() {
        let ty = Type::tensor(&[4, 5], DType::parse("float32").expect("dtype"));
        let param = Var::new(Symbol::intern("x"), Some(ty), Span::DUMMY);
        let func = Function {
            type_params: vec![],
            params: vec![param.clone()],
            ret_type: None,
            body: Expr::var(&param),
            attrs: relay_ir::Attrs::empty(),
        };
        let a = random_inputs(&func, 7).unwrap();
        let b = random_inputs(&func, 7).unwrap();
        let c = random_inputs(&func, 8).unwrap();
        compare_values(&a[0], &b[0], 0.0, 0.0).unwrap();
        assert!(compare_values(&a[0], &c[0], 0.0, 0.0).is_err());
        let values = a[0].as_tensor().unwrap().to_f64_vec();
        assert_eq!(values.len(), 20);
        assert!(values.iter().all(|v| (-1.0..1.0).contains(v)));
    }

    #[test]
    fn parameters_without_static_tensor_types_are_named() {
        let dynamic = Type::from_kind(TypeKind::Tensor {
            shape: vec![Dim::Any],
            dtype: DType::parse("float32").expect("dtype"),
        });
        let param = Var::new(Symbol::intern("y"), Some(dynamic), Span::DUMMY);
        let func = Function {
            type_params: vec![],
            params: vec![param.clone()],
            ret_type: None,
            body: Expr::var(&param),
            attrs: relay_ir::Attrs::empty(),
        };
        let err = random_inputs(&func, 0).unwrap_err();
        assert!(
            err.contains("`%y`") && err.contains("unknown dimension"),
            "{err}"
        );
        let untyped = Var::new(Symbol::intern("z"), None, Span::DUMMY);
        let mut rng = SplitMix64::new(0);
        assert_eq!(
            random_tensor(untyped.ty(), &mut rng).unwrap_err(),
            "its type is unknown"
        );
    }

    #[test]
    fn floats_compare_within_tolerance() {
        let a = f32s(&[1.0, 2.0, f64::NAN, f64::INFINITY]);
        let b = f32s(&[1.0 + 1e-7, 2.0, f64::NAN, f64::INFINITY]);
        compare_values(&a, &b, 1e-5, 1e-6).unwrap();
        let c = f32s(&[1.0, 2.1, f64::NAN, f64::INFINITY]);
        let err = compare_values(&a, &c, 1e-5, 1e-6).unwrap_err();
        assert!(err.starts_with("result: element 1 is 2"), "{err}");
        let d = f32s(&[1.0, 2.0, 0.0, f64::INFINITY]);
        assert!(compare_values(&a, &d, 1e-5, 1e-6).is_err());
    }

    #[test]
    fn integers_compare_exactly_and_dtypes_must_agree() {
        let a = i32s(&[1.0, 2.0]);
        compare_values(&a, &i32s(&[1.0, 2.0]), 1.0, 1.0).unwrap();
        assert!(compare_values(&a, &i32s(&[1.0, 3.0]), 1.0, 1.0).is_err());
        let err = compare_values(&a, &f32s(&[1.0, 2.0]), 1.0, 1.0).unwrap_err();
        assert!(err.contains("dtype int32 instead of float32"), "{err}");
        let err = compare_values(&a, &i32s(&[1.0]), 1.0, 1.0).unwrap_err();
        assert!(err.contains("shape"), "{err}");
    }

    #[test]
    fn differences_in_nested_values_name_their_path() {
        let a = Value::tuple(vec![
            f32s(&[0.0]),
            Value::adt(0, vec![i32s(&[1.0]), Value::tuple(vec![])]),
        ]);
        let b = Value::tuple(vec![
            f32s(&[0.0]),
            Value::adt(0, vec![i32s(&[2.0]), Value::tuple(vec![])]),
        ]);
        let err = compare_values(&a, &b, 0.0, 0.0).unwrap_err();
        assert!(err.starts_with("result.1.field 0: element 0"), "{err}");
        let c = Value::tuple(vec![f32s(&[0.0]), Value::adt(1, vec![])]);
        let err = compare_values(&a, &c, 0.0, 0.0).unwrap_err();
        assert!(err.contains("tag 0 with 2 fields, expected tag 1"), "{err}");
        let err = compare_values(&a, &f32s(&[0.0]), 0.0, 0.0).unwrap_err();
        assert_eq!(err, "result: a tuple, expected a tensor");
        let r1 = Value::Ref(Arc::new(std::sync::Mutex::new(i32s(&[1.0]))));
        let r2 = Value::Ref(Arc::new(std::sync::Mutex::new(i32s(&[5.0]))));
        let err = compare_values(&r1, &r2, 0.0, 0.0).unwrap_err();
        assert!(err.starts_with("result.contents:"), "{err}");
    }

    #[test]
    fn long_lists_compare_without_deep_recursion() {
        let handle = std::thread::Builder::new()
            .stack_size(256 << 10)
            .spawn(|| {
                let mut a = Value::adt(1, vec![]);
                let mut b = Value::adt(1, vec![]);
                for i in 0..200_000 {
                    a = Value::adt(0, vec![i32s(&[f64::from(i)]), a]);
                    b = Value::adt(0, vec![i32s(&[f64::from(i)]), b]);
                }
                compare_values(&a, &b, 0.0, 0.0).is_ok()
            })
            .expect("spawn");
        assert!(handle.join().expect("no panic"));
    }
}
