//! A standalone sandbox worker, for tests and embedders whose own binary cannot serve
//! as one. The `weft` binary serves the same role as `weft sandbox-worker [--prolog]`.

fn main() {
    let kind = if std::env::args().any(|a| a == "--prolog") {
        weft_code::WorkerKind::Prolog
    } else {
        weft_code::WorkerKind::Python
    };
    std::process::exit(weft_code::worker_main(kind));
}
