//! Arbitrary source through the Lua sandbox, with small limits.
#![no_main]

use std::sync::OnceLock;
use weft_code::LuaPool;
use weft_core::ir::CodeLimits;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    static POOL: OnceLock<LuaPool> = OnceLock::new();
    let Ok(source) = std::str::from_utf8(data) else {
        return;
    };
    let limits = CodeLimits {
        time_ms: 50,
        memory_bytes: 16 << 20,
        max_depth: 100,
        output_bytes: 1 << 16,
    };
    let args = serde_json::json!({"state": {"count": 1, "items": [1, 2, 3]}});
    let _ = POOL
        .get_or_init(LuaPool::default)
        .run(source, None, &args, &limits);
});
