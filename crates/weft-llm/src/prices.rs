//! What a call costs: a price table (US dollars per million tokens) shipped in
//! `data/prices.json`, which a user extends or overrides with `WEFT_PRICES=file.json`
//! or a model's own `price:` option.

use serde::Deserialize;
use std::collections::BTreeMap;

/// US dollars per million tokens.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Price {
    /// Per million prompt tokens.
    pub input: f64,
    /// Per million completion tokens.
    pub output: f64,
}

impl Price {
    /// The cost of a call.
    pub fn cost(&self, input_tokens: u64, output_tokens: u64) -> f64 {
        (input_tokens as f64 * self.input + output_tokens as f64 * self.output) / 1e6
    }
}

/// Prices by model id (`provider/model`).
#[derive(Debug, Clone, Default)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

const SHIPPED: &str = include_str!("../data/prices.json");

impl PriceTable {
    /// The shipped table.
    pub fn shipped() -> PriceTable {
        let mut t = PriceTable::default();
        t.extend_from_json(SHIPPED)
            .expect("the shipped price table is valid");
        t
    }

    /// Adds (or replaces) the prices in a JSON object of `id: {input, output}`; keys that
    /// start with `_` are comments.
    pub fn extend_from_json(&mut self, text: &str) -> Result<(), String> {
        let raw: BTreeMap<String, serde_json::Value> =
            serde_json::from_str(text).map_err(|e| format!("not a price table: {e}"))?;
        for (id, value) in raw.into_iter().filter(|(k, _)| !k.starts_with('_')) {
            let price: Price = serde_json::from_value(value)
                .map_err(|e| format!("the price of `{id}`: {e} (expected {{input, output}} in USD per million tokens)"))?;
            self.prices.insert(id, price);
        }
        Ok(())
    }

    /// The price of `provider/model`: the longest key that is a prefix of it.
    pub fn lookup(&self, id: &str) -> Option<Price> {
        self.prices
            .iter()
            .filter(|(k, _)| id.starts_with(k.as_str()))
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| *p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_wins() {
        let t = PriceTable::shipped();
        let mini = t.lookup("openai/gpt-4o-mini-2024-07-18").unwrap();
        assert_eq!(
            mini,
            Price {
                input: 0.15,
                output: 0.60
            }
        );
        assert_eq!(t.lookup("openai/gpt-4o-2024-08-06").unwrap().input, 2.50);
        assert_eq!(t.lookup("ollama/llama3.2").unwrap().cost(1000, 1000), 0.0);
        assert!(t.lookup("openai/unknown-model").is_none());
        assert!((mini.cost(1_000_000, 500_000) - 0.45).abs() < 1e-9);
    }

    #[test]
    fn users_extend_and_override_it() {
        let mut t = PriceTable::shipped();
        t.extend_from_json(r#"{"openai/gpt-4o-mini": {"input": 1, "output": 2}, "acme/": {"input": 3, "output": 4}}"#)
            .unwrap();
        assert_eq!(t.lookup("openai/gpt-4o-mini").unwrap().input, 1.0);
        assert_eq!(t.lookup("acme/any").unwrap().output, 4.0);
        let e = t.extend_from_json(r#"{"x/y": {"input": 1}}"#).unwrap_err();
        assert!(e.contains("x/y"), "{e}");
    }
}
