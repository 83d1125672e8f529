//! Arbitrary text through the loader, validation and the expression compiler.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(loaded) = weft_dialects::load_str(text, "fuzz.yaml", None, None)
    {
        let _ = weft_engine::Prepared::new(loaded.flow);
    }
});
