//! Arbitrary source through the Python interpreter as a sandbox worker runs it (in this
//! process, so that a crash inside the interpreter is found here; in Weft such a crash
//! ends a worker process, not Weft).
#![no_main]

use std::sync::Mutex;
use weft_code::PythonInterpreter;
use weft_code::protocol::Request;
use weft_core::ir::CodeLimits;

static INTERPRETER: Mutex<Option<PythonInterpreter>> = Mutex::new(None);

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let req = Request {
        id: 1,
        language: "python".into(),
        source: source.to_owned(),
        entry: None,
        args: serde_json::json!({"x": 1, "items": [1, 2, 3]}),
        imports: None,
        builtins: Some(vec!["len".into(), "sum".into(), "range".into()]),
        limits: CodeLimits {
            time_ms: 50,
            memory_bytes: 16 << 20,
            max_depth: 100,
            output_bytes: 1 << 16,
        },
    };
    let mut guard = INTERPRETER.lock().unwrap_or_else(|e| e.into_inner());
    let _ = guard
        .get_or_insert_with(PythonInterpreter::default)
        .run(&req);
});
