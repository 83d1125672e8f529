//! A standalone sandbox worker, for tests and embedders whose own binary cannot serve
//! as one. The `weft` binary serves the same role as `weft sandbox-worker`.

fn main() {
    std::process::exit(weft_code::worker_main());
}
