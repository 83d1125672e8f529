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
    // Large enough that the state and its list are read through views (lua_view.rs).
    let items: Vec<u32> = (0..70).collect();
    let args = std::sync::Arc::new(serde_json::json!({
        "state": {"count": 1, "items": items, "rows": [{"id": 1, "tags": ["a"]}]}
    }));
    let _ = POOL
        .get_or_init(LuaPool::default)
        .run(source, None, &args, &limits);
});
