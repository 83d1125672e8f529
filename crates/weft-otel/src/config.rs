//! Where traces go and what they hold, resolved once from the standard OpenTelemetry
//! variables (and a front end's flag).

use std::time::Duration;

/// The OTLP/HTTP export of a process's runs.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The traces URL (`…/v1/traces`).
    pub endpoint: String,
    /// Headers sent with every export (`OTEL_EXPORTER_OTLP_HEADERS`).
    pub headers: Vec<(String, String)>,
    /// `service.name` of the resource (`OTEL_SERVICE_NAME`, default `weft`).
    pub service_name: String,
    /// Put prompts and answers (cut to [`TelemetryConfig::content_chars`]) on the
    /// `chat` spans: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`.
    pub capture_content: bool,
    /// How much of a prompt or answer a span keeps.
    pub content_chars: usize,
    /// How long one export may take (`OTEL_EXPORTER_OTLP_TIMEOUT`, milliseconds).
    pub timeout: Duration,
}

impl TelemetryConfig {
    /// The configuration the variables `get` reads describe, with `flag` (a base URL
    /// such as `http://127.0.0.1:4318`) in place of `OTEL_EXPORTER_OTLP_ENDPOINT`; none
    /// when no endpoint is set, so nothing is exported.
    pub fn resolve(flag: Option<&str>, get: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let traces = get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT").filter(|_| flag.is_none());
        let endpoint = match (traces, flag.map(str::to_owned)) {
            (Some(url), _) => url,
            (None, Some(base)) => traces_url(&base),
            (None, None) => traces_url(&get("OTEL_EXPORTER_OTLP_ENDPOINT")?),
        };
        let headers = get("OTEL_EXPORTER_OTLP_TRACES_HEADERS")
            .or_else(|| get("OTEL_EXPORTER_OTLP_HEADERS"))
            .map(|h| parse_headers(&h))
            .unwrap_or_default();
        let timeout = get("OTEL_EXPORTER_OTLP_TIMEOUT")
            .and_then(|t| t.trim().parse::<u64>().ok())
            .map_or(Duration::from_secs(10), Duration::from_millis);
        Some(TelemetryConfig {
            endpoint,
            headers,
            service_name: get("OTEL_SERVICE_NAME").unwrap_or_else(|| "weft".to_owned()),
            capture_content: get("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true")),
            content_chars: 4096,
            timeout,
        })
    }
}

/// `base` with the traces path, as the OTLP specification builds it from
/// `OTEL_EXPORTER_OTLP_ENDPOINT`.
fn traces_url(base: &str) -> String {
    format!("{}/v1/traces", base.trim_end_matches('/'))
}

/// `key=value,key2=value2`, values percent-decoded (W3C baggage format, as the OTLP
/// specification says).
fn parse_headers(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), percent_decode(v.trim())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn nothing_is_exported_without_an_endpoint() {
        assert_eq!(
            TelemetryConfig::resolve(None, vars(&[("OTEL_SERVICE_NAME", "x")])),
            None
        );
    }

    #[test]
    fn the_standard_variables_are_read() {
        let c = TelemetryConfig::resolve(
            None,
            vars(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"),
                (
                    "OTEL_EXPORTER_OTLP_HEADERS",
                    "api-key=s3cr%3Dt, x-team = ai",
                ),
                ("OTEL_SERVICE_NAME", "agents"),
                ("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "TRUE"),
                ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            ]),
        )
        .unwrap();
        assert_eq!(c.endpoint, "http://collector:4318/v1/traces");
        assert_eq!(
            c.headers,
            [
                ("api-key".into(), "s3cr=t".into()),
                ("x-team".into(), "ai".into())
            ]
        );
        assert_eq!(
            (c.service_name.as_str(), c.capture_content),
            ("agents", true)
        );
        assert_eq!(c.timeout, Duration::from_millis(2500));
    }

    #[test]
    fn the_signal_endpoint_is_used_as_is_and_the_flag_wins() {
        let env = vars(&[
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://a/custom"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://b"),
        ]);
        assert_eq!(
            TelemetryConfig::resolve(None, &env).unwrap().endpoint,
            "http://a/custom"
        );
        let flagged = TelemetryConfig::resolve(Some("http://c:4318"), &env).unwrap();
        assert_eq!(flagged.endpoint, "http://c:4318/v1/traces");
    }
}
