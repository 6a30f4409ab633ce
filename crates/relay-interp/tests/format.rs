//! Value formatting against numpy's `array2string(a, separator=", ")` (the expected strings
//! were produced by numpy 1.x/2.x with default print options) and structural printing of
//! tuples, ADTs, closures and references.

use relay_interp::{format_tensor, format_value};
use relay_ir::{DType, Module, NDArray, Value};

fn floats(dtype: DType, shape: &[i64], values: &[f64]) -> NDArray {
    NDArray::from_f64_slice(dtype, shape, values).unwrap()
}

fn ints(dtype: DType, shape: &[i64], values: &[i128]) -> NDArray {
    NDArray::from_i128_slice(dtype, shape, values).unwrap()
}

#[test]
fn floats_like_numpy() {
    let f32 = DType::F32;
    let cases: Vec<(NDArray, &str)> = vec![
        (
            floats(f32, &[2, 2], &[1., 2., 3., 4.]),
            "[[1., 2.],\n [3., 4.]]",
        ),
        (floats(f32, &[], &[1.5]), "1.5"),
        (floats(f32, &[], &[1.0]), "1."),
        (
            floats(f32, &[3], &[1.5, 2.25, -3.]),
            "[ 1.5 ,  2.25, -3.  ]",
        ),
        (floats(f32, &[2], &[0.1, 1e-5]), "[1.e-01, 1.e-05]"),
        (floats(DType::F64, &[2], &[1e8, 1.5]), "[1.0e+08, 1.5e+00]"),
        (
            floats(f32, &[3], &[f64::NAN, f64::NEG_INFINITY, 1.5]),
            "[ nan, -inf,  1.5]",
        ),
        (
            floats(DType::F64, &[2], &[1. / 3., 2. / 3.]),
            "[0.33333333, 0.66666667]",
        ),
        (floats(f32, &[1], &[1. / 3.]), "[0.33333334]"),
        (floats(DType::F16, &[1], &[0.1]), "[0.1]"),
        (floats(f32, &[2], &[0., 0.]), "[0., 0.]"),
        (floats(f32, &[2], &[-0.5, 100.25]), "[ -0.5 , 100.25]"),
        (
            floats(f32, &[2], &[123456789., 1.]),
            "[1.2345679e+08, 1.0000000e+00]",
        ),
        (floats(f32, &[2, 0], &[]), "[]"),
    ];
    for (array, expected) in cases {
        assert_eq!(format_tensor(&array), expected, "{array:?}");
    }
}

#[test]
fn integers_and_booleans_like_numpy() {
    assert_eq!(
        format_tensor(&ints(DType::I32, &[2, 2], &[1, -20, 300, 4])),
        "[[  1, -20],\n [300,   4]]"
    );
    assert_eq!(
        format_tensor(&NDArray::from_bool_slice(&[2], &[true, false]).unwrap()),
        "[ True, False]"
    );
    assert_eq!(
        format_tensor(&NDArray::from_bool_slice(&[], &[true]).unwrap()),
        "True"
    );
    assert_eq!(format_tensor(&ints(DType::U8, &[], &[255])), "255");
}

#[test]
fn higher_ranks_wrapping_and_summaries() {
    let values: Vec<f64> = (0..12).map(f64::from).collect();
    assert_eq!(
        format_tensor(&floats(DType::F32, &[2, 3, 2], &values)),
        "[[[ 0.,  1.],\n  [ 2.,  3.],\n  [ 4.,  5.]],\n\n [[ 6.,  7.],\n  [ 8.,  9.],\n  [10., 11.]]]"
    );
    let values: Vec<f64> = (0..30).map(|i| f64::from(i) * 1.5).collect();
    assert_eq!(
        format_tensor(&floats(DType::F32, &[30], &values)),
        "[ 0. ,  1.5,  3. ,  4.5,  6. ,  7.5,  9. , 10.5, 12. , 13.5, 15. , 16.5,\n 18. , \
         19.5, 21. , 22.5, 24. , 25.5, 27. , 28.5, 30. , 31.5, 33. , 34.5,\n 36. , 37.5, 39. , \
         40.5, 42. , 43.5]"
    );
    let values: Vec<i128> = (0..2000).collect();
    assert_eq!(
        format_tensor(&ints(DType::I64, &[2000], &values)),
        "[   0,    1,    2, ..., 1997, 1998, 1999]"
    );
    let values: Vec<f64> = (0..2000).map(f64::from).collect();
    assert_eq!(
        format_tensor(&floats(DType::F32, &[40, 50], &values)),
        "[[0.000e+00, 1.000e+00, 2.000e+00, ..., 4.700e+01, 4.800e+01, 4.900e+01],\n \
         [5.000e+01, 5.100e+01, 5.200e+01, ..., 9.700e+01, 9.800e+01, 9.900e+01],\n \
         [1.000e+02, 1.010e+02, 1.020e+02, ..., 1.470e+02, 1.480e+02, 1.490e+02],\n ...,\n \
         [1.850e+03, 1.851e+03, 1.852e+03, ..., 1.897e+03, 1.898e+03, 1.899e+03],\n \
         [1.900e+03, 1.901e+03, 1.902e+03, ..., 1.947e+03, 1.948e+03, 1.949e+03],\n \
         [1.950e+03, 1.951e+03, 1.952e+03, ..., 1.997e+03, 1.998e+03, 1.999e+03]]"
    );
}

#[test]
fn structures() {
    let m = relay_syntax::parse(
        "#[version = \"0.0.5\"]\ntype List[A] { Cons(A, List[A]), Nil }\n\
         def @main() -> (List[int32], ref((int32,)), fn() -> ()) { (Nil, ref((1,)), fn () { () }) }\n",
        "t.relay",
    )
    .unwrap();
    let one = Value::tensor(ints(DType::I32, &[], &[1]));
    let list = Value::adt(0, vec![one.clone(), Value::adt(1, Vec::new())]);
    let cell = Value::Ref(std::sync::Arc::new(std::sync::Mutex::new(Value::tuple(
        vec![one.clone()],
    ))));
    let closure = Value::Closure(std::sync::Arc::new(()));
    let v = Value::tuple(vec![list, cell, closure]);
    let ty = relay_interp::result_type(&m, "main");
    assert_eq!(
        format_value(&v, ty.as_ref(), &m),
        "(Cons(1, Nil), ref((1,)), <closure>)"
    );
    assert_eq!(
        format_value(&v, None, &Module::default()),
        "(#0(1, #1), ref((1,)), <closure>)"
    );
}

#[test]
fn long_lists_print_without_deep_recursion() {
    let m = relay_syntax::parse(
        "#[version = \"0.0.5\"]\ntype List[A] { Cons(A, List[A]), Nil }\n\
         def @main() -> List[int32] { Nil }\n",
        "t.relay",
    )
    .unwrap();
    let ty = relay_interp::result_type(&m, "main");
    let text = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let one = Value::tensor(ints(DType::I32, &[], &[1]));
            let mut list = Value::adt(1, Vec::new());
            for _ in 0..200_000 {
                list = Value::adt(0, vec![one.clone(), list]);
            }
            let text = format_value(&list, ty.as_ref(), &m);
            relay_interp::drop_value(list);
            text
        })
        .unwrap()
        .join()
        .unwrap();
    assert!(text.starts_with("Cons(1, Cons(1, "));
    assert!(text.contains("Cons(1, Cons(1, Nil)))"));
    assert_eq!(text.matches(")").count(), 200_000);
    assert_eq!(text.matches("Cons(").count(), 200_000);
}
