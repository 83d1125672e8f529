//! Runs requests on one Prolog machine per fuzzing thread, as a sandbox worker does.

use std::cell::RefCell;
use weft_code::PrologInterpreter;
use weft_code::protocol::Request;

thread_local! {
    // The machine is not `Send`; libFuzzer calls the target from one thread.
    static MACHINE: RefCell<Option<PrologInterpreter>> = const { RefCell::new(None) };
}

/// Runs `req` on the thread's machine, replacing the machine after a panic or a
/// program that broke it.
pub fn run(req: &Request) {
    MACHINE.with(|cell| {
        let mut slot = cell.borrow_mut();
        let machine = slot.get_or_insert_with(PrologInterpreter::start);
        // The worker catches a panic inside scryer and retires; do the same, so the
        // fuzzer reports aborts and hangs rather than the panics the worker contains.
        // (libFuzzer's panic hook aborts, so it is set aside for the call.)
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| machine.run(req)));
        std::panic::set_hook(hook);
        if outcome.is_err() || machine.broken() {
            *slot = None;
        }
    });
}
