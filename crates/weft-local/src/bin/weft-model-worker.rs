//! The model worker on its own, for tests and benchmarks of this crate. The `weft`
//! binary serves the same role as `weft model-worker <file.gguf>`.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: weft-model-worker <file.gguf>");
        std::process::exit(2);
    };
    std::process::exit(weft_local::worker_main(&path));
}
