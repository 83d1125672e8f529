//! What triggers read from people and other services: cron expressions and zones, a
//! webhook's signature header and body, a `wait`'s duration and time. None may panic or
//! hang; a parsed cron expression's next fire times must move forward.

#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_core::ports::{Hook, HookAuth};

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let mut parts = text.splitn(3, '\n');
    let (first, second, rest) = (
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
        parts.next().unwrap_or(""),
    );
    if let Ok(cron) = weft_triggers::CronTimes::parse(first, second) {
        let start = i64::from(data.len() as u32) * 86_400_000;
        let times = cron.upcoming(start, 3);
        assert!(times.windows(2).all(|w| w[0] < w[1]), "{first}: {times:?}");
        assert!(times.first().is_none_or(|t| *t > start));
        let _ = cron.latest_at(start);
    }
    let _ = weft_core::ir::parse_wait_for(first);
    let _ = weft_core::ir::parse_wait_until(second);
    for auth in [HookAuth::Hmac, HookAuth::Bearer] {
        let hook = Hook {
            name: "h".into(),
            flow: "f".into(),
            version: None,
            secret: "fuzzing-secret-1234".into(),
            auth,
            dedupe_field: Some(second.to_owned()),
            created_ms: 0,
        };
        let _ = weft_triggers::hooks::verify(&hook, Some(first), Some(second), rest.as_bytes(), 1_000);
    }
    if let Ok(body) = serde_json::from_str::<serde_json::Value>(rest) {
        let _ = weft_triggers::hooks::dedupe_value(&body, second);
    }
});
