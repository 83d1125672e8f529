//! Arbitrary goals through the Prolog machine as a sandbox worker runs it (in this
//! process, so that a panic or abort inside scryer is found here; in Weft it ends a
//! worker process, which retires after any panic, never Weft).
#![no_main]

use std::cell::RefCell;
use weft_code::PrologInterpreter;
use weft_code::protocol::Request;
use weft_core::ir::CodeLimits;

thread_local! {
    // The machine is not `Send`; libFuzzer calls the target from one thread.
    static MACHINE: RefCell<Option<PrologInterpreter>> = const { RefCell::new(None) };
}

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
    MACHINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let machine = slot.get_or_insert_with(PrologInterpreter::start);
        // The worker catches a panic inside scryer and retires; do the same, so the
        // fuzzer reports aborts and hangs rather than the panics the worker contains.
        // (libFuzzer's panic hook aborts, so it is set aside for the call.)
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| machine.run(&req)));
        std::panic::set_hook(hook);
        if outcome.is_err() || machine.broken() {
            *slot = None;
        }
    });
});
