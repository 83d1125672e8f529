//! Checks of a text that assertions on model output need: whether it is JSON or holds
//! JSON, whether a value fits a JSON Schema, and how close it is to a reference text
//! (edit distance, BLEU-4, ROUGE-1).

use minijinja::{Environment, Error, ErrorKind, Value};

/// At most this many `{` / `[` starts are tried by `find_json`, so a long text of
/// brackets cannot make a check quadratic.
const MAX_JSON_STARTS: usize = 1_000;

/// `is_json(text)`: whether the whole text is one JSON value.
fn is_json(text: &str) -> bool {
    serde_json::from_str::<serde_json::Value>(text).is_ok()
}

/// `find_json(text)`: the first JSON object or array found in the text (scanning from
/// each `{` or `[`), or none.
fn find_json(text: &str) -> Value {
    text.char_indices()
        .filter(|(_, c)| matches!(c, '{' | '['))
        .take(MAX_JSON_STARTS)
        .find_map(|(i, _)| {
            serde_json::Deserializer::from_str(&text[i..])
                .into_iter::<serde_json::Value>()
                .next()
                .and_then(Result::ok)
        })
        .map_or(Value::from(()), |v| crate::to_mj(&std::sync::Arc::new(v)))
}

/// `fits_schema(value, schema)`: whether `value` is valid against the JSON Schema.
fn fits_schema(value: Value, schema: Value) -> Result<bool, Error> {
    let to_json = |v: &Value| {
        serde_json::to_value(v).map_err(|e| Error::new(ErrorKind::InvalidOperation, e.to_string()))
    };
    let schema = to_json(&schema)?;
    let validator = jsonschema::validator_for(&schema).map_err(|e| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("fits_schema: not a JSON Schema: {e}"),
        )
    })?;
    Ok(validator.is_valid(&to_json(&value)?))
}

/// `levenshtein(a, b)`: the edit distance between two texts, in characters.
fn levenshtein(a: &str, b: &str) -> usize {
    strsim::levenshtein(a, b)
}

type Counts<'a> = std::collections::HashMap<&'a [String], usize>;

fn ngrams(tokens: &[String], n: usize) -> Counts<'_> {
    let mut counts = std::collections::HashMap::new();
    for gram in tokens.windows(n) {
        *counts.entry(gram).or_insert(0) += 1;
    }
    counts
}

/// How many of the candidate's n-grams the reference has, each counted at most as often
/// as the reference holds it (BLEU's clipped count, ROUGE's overlap).
fn clipped_matches(candidate: &Counts<'_>, reference: &Counts<'_>) -> usize {
    candidate
        .iter()
        .map(|(g, k)| (*k).min(reference.get(g).copied().unwrap_or(0)))
        .sum()
}

/// `bleu(candidate, reference)`: sentence BLEU-4 on lower-cased whitespace tokens, with
/// a brevity penalty and add-one smoothing of the 2- to 4-gram precisions (the form
/// promptfoo and runsight compute); 0 when either text is empty or no word matches.
fn bleu(candidate: &str, reference: &str) -> f64 {
    let words = |t: &str| -> Vec<String> {
        t.to_lowercase()
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    let (cand, refr) = (words(candidate), words(reference));
    if cand.is_empty() || refr.is_empty() {
        return 0.0;
    }
    let brevity = if cand.len() < refr.len() {
        (1.0 - refr.len() as f64 / cand.len() as f64).exp()
    } else {
        1.0
    };
    let mut log_sum = 0.0;
    for n in 1..=4 {
        let (c, r) = (ngrams(&cand, n), ngrams(&refr, n));
        let total: usize = c.values().sum();
        let clipped = clipped_matches(&c, &r);
        let precision = if n == 1 {
            if clipped == 0 {
                return 0.0;
            }
            clipped as f64 / total as f64
        } else {
            (clipped + 1) as f64 / (total + 1) as f64
        };
        log_sum += precision.ln() / 4.0;
    }
    brevity * log_sum.exp()
}

/// `rouge1(candidate, reference)`: the ROUGE-1 F-measure of the two texts' words (lower
/// case, letters and digits), as the `rouge-score` package computes it without stemming.
fn rouge1(candidate: &str, reference: &str) -> f64 {
    let words = |t: &str| -> Vec<String> {
        t.to_lowercase()
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let (cand, refr) = (words(candidate), words(reference));
    if cand.is_empty() || refr.is_empty() {
        return 0.0;
    }
    let overlap = clipped_matches(&ngrams(&cand, 1), &ngrams(&refr, 1));
    if overlap == 0 {
        return 0.0;
    }
    let precision = overlap as f64 / cand.len() as f64;
    let recall = overlap as f64 / refr.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

pub(crate) fn register(env: &mut Environment<'static>) {
    env.add_function("is_json", is_json);
    env.add_function("find_json", find_json);
    env.add_function("fits_schema", fits_schema);
    env.add_function("levenshtein", levenshtein);
    env.add_function("bleu", bleu);
    env.add_function("rouge1", rouge1);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn json(v: serde_json::Value) -> Value {
        crate::to_mj(&std::sync::Arc::new(v))
    }

    #[test]
    fn json_is_found_inside_prose() {
        assert!(is_json(r#"{"a": 1}"#));
        assert!(!is_json("here: {\"a\": 1}"));
        let found = find_json("The answer is {\"status\": \"ok\"} as asked. [1, 2]");
        assert_eq!(found.get_attr("status").unwrap().as_str(), Some("ok"));
        assert!(find_json("no json { here").is_none());
        assert_eq!(find_json("a [1, 2] b").len(), Some(2));
    }

    #[test]
    fn schemas_are_checked() {
        let schema = json(serde_json::json!({"type": "object", "required": ["status"]}));
        let ok = json(serde_json::json!({"status": 1}));
        let missing = json(serde_json::json!({"other": 1}));
        assert!(fits_schema(ok, schema.clone()).unwrap());
        assert!(!fits_schema(missing, schema).unwrap());
        assert!(fits_schema(Value::from(1), json(serde_json::json!({"type": 7}))).is_err());
    }

    #[test]
    fn closeness_scores_match_the_reference_implementations() {
        assert_eq!(levenshtein("kitten", "sitting"), 3);
        assert_eq!(levenshtein("café", "cafe"), 1);
        assert!((bleu("the cat sat on the mat", "the cat sat on the mat") - 1.0).abs() < 1e-9);
        assert_eq!(bleu("dogs bark", "the cat sat"), 0.0);
        // runsight's formula by hand: p1 = 3/4; p2..p4 smoothed: (2+1)/(3+1), (1+1)/(2+1),
        // (0+1)/(1+1); no brevity penalty.
        let want = ((0.75f64).ln() / 4.0
            + (0.75f64).ln() / 4.0
            + (2.0f64 / 3.0).ln() / 4.0
            + (0.5f64).ln() / 4.0)
            .exp();
        assert!((bleu("the cat sat down", "the cat sat up") - want).abs() < 1e-9);
        // rouge-score: 3 shared words of 4 and 4: P = R = F = 0.75.
        assert!((rouge1("The cat, sat down.", "the cat sat up") - 0.75).abs() < 1e-9);
        assert_eq!(rouge1("", "x"), 0.0);
    }
}
