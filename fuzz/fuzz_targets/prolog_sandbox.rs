//! Arbitrary goals through the Prolog machine as a sandbox worker runs it (in this
//! process, so that a panic or abort inside scryer is found here; in Weft it ends a
//! worker process, which retires after any panic, never Weft).
#![no_main]

#[path = "shared/prolog.rs"]
mod shared;

use weft_code::protocol::Request;
use weft_core::ir::CodeLimits;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let req = Request {
        id: 1,
        language: "prolog".into(),
        source: source.to_owned(),
        entry: None,
        args: serde_json::json!({"state": {"x": 1, "items": [1, 2, 3]}}),
        imports: None,
        builtins: None,
        limits: CodeLimits {
            time_ms: 50,
            memory_bytes: 16 << 20,
            max_depth: 100,
            output_bytes: 1 << 16,
        },
    };
    shared::run(&req);
});
