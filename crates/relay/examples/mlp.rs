//! A small multilayer perceptron through the library API: the model is Relay text, its
//! weights are random tensors (from a seeded generator) bound with `Compiler::params`, and the
//! input is the only argument left.
//!
//! ```text
//! cargo run -p relay --example mlp
//! ```

use relay::{Compiler, Tensor, Vm};
use relay_interp::SplitMix64;

/// 16 features -> 32 relu -> 32 relu -> 4 softmax, batch 2.
const MODEL: &str = r#"
#[version = "0.0.5"]
def @main(%x: Tensor[(2, 16), float32],
          %w1: Tensor[(32, 16), float32], %b1: Tensor[(32), float32],
          %w2: Tensor[(32, 32), float32], %b2: Tensor[(32), float32],
          %w3: Tensor[(4, 32), float32], %b3: Tensor[(4), float32]) -> Tensor[(2, 4), float32] {
  %0 = nn.relu(nn.bias_add(nn.dense(%x, %w1, units=32), %b1));
  %1 = nn.relu(nn.bias_add(nn.dense(%0, %w2, units=32), %b2));
  nn.softmax(nn.bias_add(nn.dense(%1, %w3, units=4), %b3))
}
"#;

/// A tensor of `shape` with elements uniform in [-scale, scale).
fn random(rng: &mut SplitMix64, shape: &[i64], scale: f32) -> relay::Result<Tensor> {
    let count = shape.iter().product::<i64>().max(0) as usize;
    let data: Vec<f32> = (0..count)
        .map(|_| {
            let unit = (rng.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
            (unit * 2.0 - 1.0) * scale
        })
        .collect();
    Tensor::from_slice(&data, shape)
}

fn main() -> miette::Result<()> {
    let module = relay::parse(MODEL, "mlp.relay")?;

    let mut rng = SplitMix64::new(42);
    let mut params = Vec::new();
    for (name, shape) in [
        ("w1", &[32, 16][..]),
        ("b1", &[32]),
        ("w2", &[32, 32]),
        ("b2", &[32]),
        ("w3", &[4, 32]),
        ("b3", &[4]),
    ] {
        params.push((name.to_string(), random(&mut rng, shape, 0.5)?));
    }
    let exe = Compiler::new().params(params).compile(&module)?;
    println!(
        "compiled: {} functions, {} kernels, {} constants",
        exe.functions.len(),
        exe.kernels.len(),
        exe.constants.len()
    );

    let x = random(&mut rng, &[2, 16], 1.0)?;
    let mut vm = Vm::new(&exe);
    let out = Tensor::try_from(vm.invoke("main", &[x])?)?;
    let probs = out.to_vec::<f32>()?;
    for (row, p) in probs.chunks(4).enumerate() {
        let total: f32 = p.iter().sum();
        println!("sample {row}: probabilities {p:.4?} (sum {total:.4})");
    }
    Ok(())
}
