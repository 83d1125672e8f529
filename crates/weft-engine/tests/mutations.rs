//! Bad input never panics: every example, mangled thousands of ways (seeded, so a failure
//! reproduces), goes through the loader, the expression compiler and the engine.

mod support;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::time::{Duration, Instant};
use weft_engine::{Prepared, RunOptions};

const TOKENS: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ":",
    "- ",
    "'",
    "\"",
    "\n",
    " ",
    "  ",
    "#",
    "&a",
    "*a",
    "!!str ",
    "|",
    ">",
    "%",
    "@",
    "`",
    "\t",
    "{{",
    "}}",
    "{%",
    "%}",
    "0",
    "-1",
    "99999999999999999999",
    "null",
    "~",
    "true",
    "1e400",
    "llm: {}",
    "loop: {}",
    "graph: {}",
    "map: {}",
    "max_iterations: 0",
    "sequence: []",
    "passthrough: {}",
    "id: root",
    "{{ input[",
    "| length",
    "state.x <",
    "entry: nope",
    "to: end",
    "joins: [x]",
    "retry: {attempts: 0}",
    "budget: {tokens: 0}",
    "\u{feff}",
    "é",
    "🦀",
];

fn mutate(text: &str, rng: &mut StdRng) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for _ in 0..rng.random_range(1..4) {
        let at = rng.random_range(0..=chars.len());
        match rng.random_range(0..6) {
            0 => {
                let tok = TOKENS[rng.random_range(0..TOKENS.len())];
                chars.splice(at..at, tok.chars());
            }
            1 if !chars.is_empty() => {
                let end = (at + rng.random_range(1..20)).min(chars.len());
                chars.drain(at.min(end)..end);
            }
            2 => chars.truncate(at),
            3 if at < chars.len() => {
                chars[at] = TOKENS[rng.random_range(0..TOKENS.len())]
                    .chars()
                    .next()
                    .unwrap_or(' ')
            }
            4 => {
                // Duplicate a line: repeated keys and odd indentation.
                let s: String = chars.iter().collect();
                let lines: Vec<&str> = s.lines().collect();
                if !lines.is_empty() {
                    let i = rng.random_range(0..lines.len());
                    let mut out = lines.clone();
                    out.insert(i, lines[i]);
                    chars = out.join("\n").chars().collect();
                }
            }
            _ => {
                let s: String = chars.iter().collect();
                let mut lines: Vec<&str> = s.lines().collect();
                if lines.len() > 1 {
                    let (a, b) = (
                        rng.random_range(0..lines.len()),
                        rng.random_range(0..lines.len()),
                    );
                    lines.swap(a, b);
                    chars = lines.join("\n").chars().collect();
                }
            }
        }
    }
    chars.into_iter().collect()
}

#[test]
fn mangled_flows_never_panic() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let h = support::harness(support::memory(), vec![]);
    // Read at run time: a build cache shared by two clones keeps the other path in `env!`.
    let dir = Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").expect("run by cargo"))
        .join("../../examples");
    let seed: u64 = std::env::var("WEFT_MUTATION_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5eed);
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut tried, mut loaded, mut ran) = (0, 0, 0);
    let run_budget = Instant::now() + Duration::from_secs(20);
    // WEFT_MUTATIONS raises the count for a long soak; CI runs the default.
    let per_example: usize = std::env::var("WEFT_MUTATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1500);
    let mut examples: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    examples.sort();
    for path in examples
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
    {
        let text = std::fs::read_to_string(&path).unwrap();
        for _ in 0..per_example {
            let mangled = mutate(&text, &mut rng);
            tried += 1;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let Ok(l) = weft_dialects::load_str(&mangled, "m.yaml", None, None) else {
                    return;
                };
                loaded += 1;
                let Ok(p) = Prepared::new(l.flow) else { return };
                if Instant::now() < run_budget {
                    ran += 1;
                    rt.block_on(async {
                        let started =
                            h.engine
                                .start(std::sync::Arc::new(p), None, RunOptions::default());
                        if let Ok(run) = started.await {
                            let id = run.run_id().to_owned();
                            if run.within(Duration::from_millis(300)).await.is_none() {
                                // Runs that outlive their budget must not pile up.
                                let _ = h.engine.cancel(&id).await;
                            }
                        }
                    });
                }
            }));
            assert!(
                outcome.is_ok(),
                "panic on this input (from {}):\n{mangled}",
                path.display()
            );
        }
    }
    eprintln!("mutations tried: {tried}, loaded: {loaded}, executed: {ran}");
    assert!(tried >= 6 * per_example);
}
