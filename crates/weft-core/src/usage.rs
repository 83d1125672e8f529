//! Model usage: tokens and cost, counted per call, per block, per run. Its own module
//! because both the ports (a model's answer) and the events (a step's usage) speak it.

use serde::{Deserialize, Serialize};

/// Tokens a call consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens (none when a record does not say: older ones wrote `{}`).
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
    /// Cost in US dollars, when known.
    #[serde(default)]
    pub cost_usd: f64,
}

impl Usage {
    /// Prompt plus completion tokens.
    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// Adds `other` into `self`.
    pub fn add(&mut self, other: &Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.cost_usd += other.cost_usd;
    }
}
