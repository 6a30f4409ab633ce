//! Generates the parser from `src/grammar.lalrpop` into `OUT_DIR`.

fn main() {
    println!("cargo:rerun-if-changed=src/grammar.lalrpop");
    if let Err(e) = lalrpop::Configuration::new()
        .use_cargo_dir_conventions()
        .process()
    {
        eprintln!("lalrpop failed: {e}");
        std::process::exit(1);
    }
}
