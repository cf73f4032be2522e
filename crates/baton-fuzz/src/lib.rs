//! baton's fuzzing campaign, on the stable toolchain: seeded mutation, no instrumentation.
//!
//! Roles:
//! - [`Rng`]: a small deterministic generator (SplitMix64), so a campaign is replayed exactly
//!   from its seed.
//! - [`mutate`]: makes an input from the seeds of a target: byte flips and overwrites with
//!   values parsers trip on, insertions and deletions, splices of two seeds, JSON tokens (deep
//!   nesting, huge and negative numbers, lone surrogates, NUL), and structural edits of a JSON
//!   seed (a value replaced by another type, a member dropped or duplicated).
//! - [`TARGETS`]: the pure targets, each a function over bytes: every importer (format
//!   detection, then parsing under every format), the message and content-block parsers (core
//!   serde, both vendors' wire shapes, and rendering back what parsed), whole request, response
//!   and error bodies, both vendors' stream readers fed in random pieces, and the request-key
//!   canonicalizer (which must also be idempotent: the canonical form of a canonical form is
//!   itself, with the same key).
//! - [`http`]: the HTTP bodies of every route that takes one, sent to the service in process
//!   (`baton_server::app` over a SQLite store): no panic, and no 5xx but the gateway's 502 (its
//!   upstream is a closed port).
//! - [`Campaign`] runs them: every input under `catch_unwind`, timed; a panic or an input over
//!   [`HANG`] is a finding, written to the findings directory to be replayed.
//!
//! The seeds are small hand-made files under `seeds/<target>/` in this crate; `cargo xtask
//! fuzz` runs the whole campaign, the crate's test a short one.
//!
//! ```
//! use baton_fuzz::{Rng, mutate};
//! let mut rng = Rng::new(7);
//! let seeds = vec![br#"{"role":"user","content":"hi"}"#.to_vec()];
//! let input = mutate(&mut rng, &seeds);
//! assert!(input.len() <= 1 << 20);
//! ```

pub mod http;
mod targets;

use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

pub use targets::{TARGETS, Target};

/// An input that takes longer than this is a hang.
pub const HANG: Duration = Duration::from_secs(1);

/// The largest input made (1 MiB).
pub const MAX_INPUT: usize = 1 << 20;

/// SplitMix64: small, fast, and the same sequence for the same seed on every machine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            return 0;
        }
        (self.next_u64() % n as u64) as usize
    }

    /// True once in `n` draws.
    pub fn one_in(&mut self, n: usize) -> bool {
        self.below(n) == 0
    }
}

/// Bytes parsers trip on.
const INTERESTING_BYTES: &[u8] = &[
    0, 0xff, 0x7f, 0x80, b'"', b'\\', b'{', b'}', b'[', b']', b',', b':', b'\n', b'\r', b' ', b'-',
    b'0', b'9', b'e', 0xc0, 0xed, 0xf4,
];

/// JSON pieces parsers trip on.
const TOKENS: &[&str] = &[
    "null",
    "true",
    "false",
    "0",
    "-0",
    "-1",
    "1e999",
    "-1e-999",
    "18446744073709551616",
    "9223372036854775808",
    "-9223372036854775809",
    "1.0000000000000002",
    "\"\"",
    "\"\\u0000\"",
    "\"\\ud800\"",
    "\"\\udc00\\ud800\"",
    "\"\\uffff\"",
    "{}",
    "[]",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[",
    "{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":{\"a\":",
    "\"type\"",
    "\"text\"",
    "\"tool_use\"",
    "\"tool_result\"",
    "\"role\"",
    "\"content\"",
    "\"messages\"",
    "\"id\"",
    "\"..\"",
    "data: ",
    "event: ",
    "\n\n",
    "\r\n",
    "\u{feff}",
    "é",
    "\u{10ffff}",
];

/// Makes one input from `seeds` (a target's corpus, at least one seed).
pub fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let seed = match seeds.len() {
        0 => Vec::new(),
        n => seeds[rng.below(n)].clone(),
    };
    // A quarter of inputs are structural edits of a JSON seed.
    if rng.one_in(4)
        && let Ok(mut value) = serde_json::from_slice::<Value>(&seed)
    {
        for _ in 0..1 + rng.below(3) {
            edit_json(rng, &mut value, 0);
        }
        if let Ok(bytes) = serde_json::to_vec(&value) {
            return bytes;
        }
    }
    let mut data = seed;
    for _ in 0..1 + rng.below(6) {
        mutate_bytes(rng, &mut data, seeds);
    }
    data.truncate(MAX_INPUT);
    data
}

fn mutate_bytes(rng: &mut Rng, data: &mut Vec<u8>, seeds: &[Vec<u8>]) {
    let len = data.len();
    match rng.below(10) {
        0 if len > 0 => {
            let i = rng.below(len);
            data[i] ^= 1 << rng.below(8);
        }
        1 if len > 0 => {
            let i = rng.below(len);
            data[i] = INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())];
        }
        2 => {
            let at = rng.below(len + 1);
            let n = 1 + rng.below(16);
            let bytes: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            data.splice(at..at, bytes);
        }
        3 if len > 0 => {
            let from = rng.below(len);
            let to = (from + 1 + rng.below(64)).min(len);
            data.drain(from..to);
        }
        4 if len > 0 => {
            let from = rng.below(len);
            let to = (from + 1 + rng.below(256)).min(len);
            let piece = data[from..to].to_vec();
            let at = rng.below(len + 1);
            data.splice(at..at, piece);
        }
        5 if !seeds.is_empty() => {
            let other = &seeds[rng.below(seeds.len())];
            let cut = rng.below(len + 1);
            let from = rng.below(other.len() + 1);
            data.truncate(cut);
            data.extend_from_slice(&other[from..]);
        }
        6 | 7 => {
            let at = char_boundary(data, rng.below(len + 1));
            let token = TOKENS[rng.below(TOKENS.len())].as_bytes();
            data.splice(at..at, token.iter().copied());
        }
        8 if len > 0 => {
            data.truncate(rng.below(len));
        }
        _ => {
            let at = rng.below(len + 1);
            data.insert(at, INTERESTING_BYTES[rng.below(INTERESTING_BYTES.len())]);
        }
    }
}

fn char_boundary(data: &[u8], mut at: usize) -> usize {
    while at > 0 && at < data.len() && (data[at] & 0xc0) == 0x80 {
        at -= 1;
    }
    at
}

/// One structural edit somewhere in `value`.
fn edit_json(rng: &mut Rng, value: &mut Value, depth: usize) {
    let descend = depth < 12 && rng.below(3) != 0;
    match value {
        Value::Object(map) if descend && !map.is_empty() => {
            let keys: Vec<String> = map.keys().cloned().collect();
            let key = &keys[rng.below(keys.len())];
            match rng.below(5) {
                0 => {
                    map.remove(key);
                }
                1 => {
                    let copy = map.get(key).cloned().unwrap_or(Value::Null);
                    map.insert(format!("{key}{}", rng.below(3)), copy);
                }
                _ => {
                    if let Some(inner) = map.get_mut(key) {
                        edit_json(rng, inner, depth + 1);
                    }
                }
            }
        }
        Value::Array(items) if descend && !items.is_empty() => {
            let i = rng.below(items.len());
            match rng.below(5) {
                0 => {
                    items.remove(i);
                }
                1 => {
                    let copy = items[i].clone();
                    items.insert(i, copy);
                }
                2 => {
                    let j = rng.below(items.len());
                    items.swap(i, j);
                }
                _ => edit_json(rng, &mut items[i], depth + 1),
            }
        }
        _ => *value = random_value(rng, 0),
    }
}

fn random_value(rng: &mut Rng, depth: usize) -> Value {
    match rng.below(if depth > 3 { 6 } else { 9 }) {
        0 => Value::Null,
        1 => Value::Bool(rng.one_in(2)),
        2 => Value::from(rng.next_u64()),
        3 => Value::from(-(rng.below(1 << 20) as i64)),
        4 => serde_json::Number::from_f64(f64::from_bits(rng.next_u64()))
            .map_or(Value::Null, Value::Number),
        5 => {
            let token = TOKENS[rng.below(TOKENS.len())];
            Value::String(token.repeat(1 + rng.below(3)))
        }
        6 => Value::Array(
            (0..rng.below(4))
                .map(|_| random_value(rng, depth + 1))
                .collect(),
        ),
        7 => Value::Object(
            (0..rng.below(4))
                .map(|_| {
                    let key =
                        ["type", "text", "role", "content", "id", "input", "name"][rng.below(7)];
                    (key.to_owned(), random_value(rng, depth + 1))
                })
                .collect(),
        ),
        _ => Value::String("x".repeat(rng.below(5000))),
    }
}

/// The seeds of `dir` (every file in it), sorted by name.
pub fn load_seeds(dir: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| anyhow::anyhow!("seeds {}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let seeds = paths
        .iter()
        .map(std::fs::read)
        .collect::<Result<Vec<_>, _>>()?;
    anyhow::ensure!(!seeds.is_empty(), "seeds {}: no files", dir.display());
    Ok(seeds)
}

/// The directory of this crate's seeds.
pub fn seeds_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds")
}

/// What the campaign found for one target.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// The target.
    pub target: String,
    /// Inputs run.
    pub inputs: u64,
    /// Inputs that panicked (or, over HTTP, were answered 5xx).
    pub failures: u64,
    /// Inputs that took longer than [`HANG`].
    pub hangs: u64,
    /// The longest one input took.
    pub slowest: Duration,
    /// Where the failing and hanging inputs were written.
    pub findings: Vec<PathBuf>,
    /// The first failure's message.
    pub first_failure: Option<String>,
}

/// How to run a campaign.
#[derive(Clone, Debug)]
pub struct Campaign {
    /// Inputs per pure target (the seeds first, then mutants).
    pub inputs_per_target: u64,
    /// Inputs per HTTP route.
    pub inputs_per_route: u64,
    /// The generator's seed.
    pub seed: u64,
    /// Where findings are written.
    pub findings: PathBuf,
    /// Only the targets whose name contains this.
    pub only: Option<String>,
}

impl Campaign {
    /// Runs the pure targets, then the HTTP routes; calls `progress` after each target.
    pub fn run(&self, mut progress: impl FnMut(&Outcome)) -> anyhow::Result<Vec<Outcome>> {
        let dir = seeds_dir();
        let mut outcomes = Vec::new();
        // Panics are findings, caught and counted: keep their messages off stderr.
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let result = (|| -> anyhow::Result<()> {
            for target in TARGETS {
                if self
                    .only
                    .as_deref()
                    .is_some_and(|o| !target.name.contains(o))
                {
                    continue;
                }
                let seeds = load_seeds(&dir.join(target.seeds))?;
                let outcome = self.pure(target, &seeds);
                progress(&outcome);
                outcomes.push(outcome);
            }
            if self
                .only
                .as_deref()
                .is_none_or(|o| "http".contains(o) || o.starts_with("http"))
            {
                for outcome in http::campaign(self, &dir.join("http"))? {
                    progress(&outcome);
                    outcomes.push(outcome);
                }
            }
            Ok(())
        })();
        std::panic::set_hook(hook);
        result.map(|()| outcomes)
    }

    fn pure(&self, target: &Target, seeds: &[Vec<u8>]) -> Outcome {
        let mut rng = Rng::new(self.seed ^ fnv(target.name));
        let mut outcome = Outcome {
            target: target.name.to_owned(),
            ..Outcome::default()
        };
        for i in 0..self.inputs_per_target {
            let input = match seeds.get(i as usize) {
                Some(seed) => seed.clone(),
                None => mutate(&mut rng, seeds),
            };
            let started = Instant::now();
            let result = std::panic::catch_unwind(AssertUnwindSafe(|| (target.run)(&input)));
            let took = started.elapsed();
            outcome.inputs += 1;
            outcome.slowest = outcome.slowest.max(took);
            if let Err(panic) = result {
                outcome.failures += 1;
                let message = panic_message(&panic);
                outcome.first_failure.get_or_insert(message);
                self.keep(&mut outcome, "panic", &input);
            } else if took > HANG {
                outcome.hangs += 1;
                self.keep(&mut outcome, "hang", &input);
            }
        }
        outcome
    }

    /// Writes a finding's input (the first 20 of each target).
    fn keep(&self, outcome: &mut Outcome, kind: &str, input: &[u8]) {
        if outcome.findings.len() >= 20 {
            return;
        }
        let name = format!(
            "{}-{kind}-{}.bin",
            outcome.target.replace([':', '/', '{', '}'], "_"),
            outcome.findings.len()
        );
        let path = self.findings.join(name);
        if std::fs::create_dir_all(&self.findings).is_ok() && std::fs::write(&path, input).is_ok() {
            outcome.findings.push(path);
        }
    }
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic without a message".to_owned())
}

/// FNV-1a of a name: each target's generator starts apart.
fn fnv(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
