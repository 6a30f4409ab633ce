//! `relayc run MODEL.onnx --generate` and `relayc import --generate` (issue 32): a GPT-2 decoder
//! with past as Hugging Face's exporter writes it (`crates/relay-onnx/tests/data/generation/`,
//! 2 layers, width 32, written by `benches/generate/export.py --test-data`) in a greedy loop
//! compiled with it; the ids equal those of ONNX Runtime's greedy loop over the same model
//! (`expected.npz`), token for token, with and without an end-of-sequence id that stops it.

mod common;

use std::path::PathBuf;

use common::{TempFile, arg, code, relayc, stderr, stdout};
use relay::Tensor;
use relay::npy::read_npz_file;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../relay-onnx/tests/data/generation")
}

/// The cases of `expected.npz`: prompt, new tokens, end-of-sequence id, ids.
fn cases() -> Vec<(Vec<i64>, i32, i64, Vec<i64>)> {
    let arrays = read_npz_file(&data().join("expected.npz")).unwrap();
    let get = |name: String| -> Tensor {
        let array = arrays.iter().find(|(n, _)| *n == name).unwrap().1.clone();
        Tensor::from(array)
    };
    (0..)
        .map_while(|i| {
            arrays
                .iter()
                .any(|(n, _)| *n == format!("ids{i}"))
                .then(|| {
                    let ints = |name: &str| -> Vec<i64> {
                        let values = get(format!("{name}{i}")).to_f64_vec();
                        values.into_iter().map(|v| v as i64).collect()
                    };
                    (
                        ints("prompt"),
                        ints("new_tokens")[0] as i32,
                        ints("eos")[0],
                        ints("ids"),
                    )
                })
        })
        .collect()
}

/// The ids `relayc run` printed (`[53, 53, ...]`, numpy's form).
fn printed_ids(out: &str) -> Vec<i64> {
    out.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split([',', '\n', ' '])
        .filter(|s| !s.is_empty())
        .map(|s| s.parse().unwrap())
        .collect()
}

#[test]
fn run_generate_matches_onnx_runtimes_greedy_loop() {
    let model = data().join("model.onnx");
    let cases = cases();
    assert_eq!(cases.len(), 4);
    for (prompt, new_tokens, eos, ids) in cases {
        let prompt_arg: Vec<String> = prompt.iter().map(i64::to_string).collect();
        let (n, e) = (new_tokens.to_string(), eos.to_string());
        let out = relayc(&[
            "run",
            arg(&model),
            "--generate",
            "--prompt",
            &prompt_arg.join(","),
            "--new-tokens",
            &n,
            "--eos",
            &e,
        ]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        assert_eq!(
            printed_ids(&stdout(&out)),
            ids,
            "prompt {prompt:?}, eos {eos}"
        );
    }
}

#[test]
fn import_generate_writes_a_loop_that_runs_with_its_params() {
    let model = data().join("model.onnx");
    let text = TempFile::path_for("generate.relay");
    let params = TempFile::path_for("generate.npz");
    let out = relayc(&[
        "import",
        arg(&model),
        "--generate",
        "-o",
        text.arg(),
        "--params-out",
        params.arg(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // The loop reads the last position's logits only: the head computes no other.
    let written = std::fs::read_to_string(text.path()).unwrap();
    assert!(
        written.contains("nn.dense(strided_slice("),
        "the language-model head is not on the last position:\n{written}"
    );
    let (prompt, new_tokens, eos, ids) = cases().remove(2);
    let prompt_file = TempFile::path_for("prompt.npy");
    let prompt = Tensor::from_slice(&prompt, &[prompt.len() as i64]).unwrap();
    prompt.write_npy(prompt_file.path()).unwrap();
    let (n, e) = (new_tokens.to_string(), eos.to_string());
    let out = relayc(&[
        "run",
        text.arg(),
        "--params",
        params.arg(),
        "--input",
        &format!("prompt={}", prompt_file.arg()),
        "--generate",
        "--new-tokens",
        &n,
        "--eos",
        &e,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(printed_ids(&stdout(&out)), ids);
}

#[test]
fn a_model_that_is_not_a_decoder_is_a_clear_error() {
    let mnist =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../relay-onnx/tests/data/mnist.onnx");
    let out = relayc(&["run", arg(&mnist), "--generate", "--prompt", "1,2"]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a decoder with past: it has no input `input_ids`"),
        "{}",
        stderr(&out)
    );
    let out = relayc(&["run", "../../examples/lstm.relay", "--generate"]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
}
