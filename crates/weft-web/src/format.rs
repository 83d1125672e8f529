//! How numbers, times and values read on the page.

use serde_json::Value;
use weft_core::usage::Usage;

/// A duration in microseconds as people read it: `840 µs`, `12.3 ms`, `4.2 s`, `3 min 5 s`.
pub(crate) fn micros(us: u64) -> String {
    match us {
        0..1_000 => format!("{us} µs"),
        1_000..1_000_000 => format!("{:.1} ms", us as f64 / 1e3),
        1_000_000..60_000_000 => format!("{:.1} s", us as f64 / 1e6),
        _ => {
            let s = us / 1_000_000;
            if s < 3600 {
                format!("{} min {} s", s / 60, s % 60)
            } else {
                format!("{} h {} min", s / 3600, (s % 3600) / 60)
            }
        }
    }
}

/// A duration in milliseconds, as [`micros`].
pub(crate) fn millis(ms: i64) -> String {
    micros(ms.max(0) as u64 * 1000)
}

/// Unix milliseconds as UTC ISO 8601 (`2026-11-25T03:09:16Z`): what `<time datetime>`
/// holds and what the page shows until its script writes local time.
pub(crate) fn iso(ms: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_millis(ms.max(0) as u64);
    humantime::format_rfc3339_seconds(at).to_string()
}

pub(crate) use weft_core::event::now_ms;

/// Tokens in and out: `16 → 13`.
pub(crate) fn tokens(u: &Usage) -> String {
    if u.total_tokens() == 0 {
        "–".to_owned()
    } else {
        format!("{} → {}", u.input_tokens, u.output_tokens)
    }
}

/// A cost in US dollars, with as many places as a small cost needs.
pub(crate) fn cost(u: &Usage) -> String {
    match u.cost_usd {
        c if c <= 0.0 => "–".to_owned(),
        c if c < 0.01 => format!("${c:.5}"),
        c => format!("${c:.2}"),
    }
}

/// A JSON value as indented text (a string as itself, so prose reads as prose).
pub(crate) fn json(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// A shared value as [`json`] writes a plain one, without copying it first.
pub(crate) fn shared_json(v: &weft_core::value::Shared) -> String {
    match v.as_json() {
        Some(plain) => json(plain),
        None => serde_json::to_string_pretty(v).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn durations_read_in_the_unit_that_fits() {
        assert_eq!(super::micros(840), "840 µs");
        assert_eq!(super::micros(12_340), "12.3 ms");
        assert_eq!(super::micros(4_200_000), "4.2 s");
        assert_eq!(super::micros(185_000_000), "3 min 5 s");
        assert_eq!(super::micros(7_500_000_000), "2 h 5 min");
        assert_eq!(super::millis(-5), "0 µs");
    }

    #[test]
    fn times_are_utc_dates() {
        assert_eq!(super::iso(0), "1970-01-01T00:00:00Z");
        assert_eq!(super::iso(1_795_576_156_374), "2026-11-25T03:09:16Z");
        assert_eq!(super::iso(951_782_400_000), "2000-02-29T00:00:00Z");
    }
}
