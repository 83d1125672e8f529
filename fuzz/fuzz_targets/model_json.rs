//! A model's structured answer as the engine reads it when it is not JSON as written:
//! `llm_json` repairs it locally before the model is asked again. Whatever a model
//! sends, the repair may fail but must not panic or hang, and what it returns is a JSON
//! value that writes and reads back as itself.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(value) = llm_json::loads(&text, &llm_json::RepairOptions::default()) {
        let written = serde_json::to_string(&value).expect("a JSON value writes");
        let back: serde_json::Value = serde_json::from_str(&written).expect("and reads back");
        assert_eq!(back, value);
    }
});
