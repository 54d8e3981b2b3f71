//! What a hostile client sends: text built to break out of HTML, SQL, paths and parsers,
//! arbitrary JSON, valid bodies with one part broken, and bytes that are not text at all.
//! Drawn from proptest strategies with a fixed seed, so a failure names a case that runs
//! the same way again.

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use serde_json::Value;

/// Every string here must come back as text wherever it is shown. `pwn` marks markup a
/// page must never grow (see [`stepwise::testing::html::smuggled`]).
pub const HOSTILE: &[&str] = &[
    "</title><img src=x onerror=alert(1) data-pwn>",
    "<script>alert('pwn')</script>",
    "\"'><svg onload=alert(1) data-pwn>",
    "</textarea><pwn-x>",
    "javascript:alert(1)",
    "'; DROP TABLE jobs; --",
    "\" OR 1=1 --",
    "\u{0}",
    "nul\u{0}in\u{0}the middle",
    "\u{202e}evil\u{200b}\u{feff}",
    "\u{7f}\u{1b}[31mred\u{8}",
    "../../../../etc/passwd",
    "..%2f..%2fsecret",
    "%00%ff%fe",
    "${jndi:ldap://x/a}",
    "{{7*7}}",
    "\\u0000",
    "\r\nSet-Cookie: pwn=1",
    "💣🦀\u{10ffff}",
    "-1",
    "18446744073709551616",
    "1e309",
    "NaN",
    "null",
    "",
    " ",
];

/// Names the API reads somewhere, so that broken bodies often break a field that matters.
const FIELDS: &[&str] = &[
    "payload",
    "type",
    "priority",
    "maxAttempts",
    "affinityKey",
    "repository",
    "task",
    "instructions",
    "objective",
    "steps",
    "runtime",
    "mode",
    "model",
    "effort",
    "publish",
    "skill",
    "workerId",
    "attempt",
    "leaseSeconds",
    "waitSeconds",
    "maxRunningPerRepository",
    "capabilities",
    "allowedTypes",
    "resultSummary",
    "errorMessage",
    "retryable",
    "kind",
    "level",
    "message",
    "reason",
    "status",
    "limit",
    "after",
];

pub struct Garbage {
    runner: TestRunner,
}

impl Garbage {
    /// A generator for one test, its `seed` mixed with `STEPWISE_HOSTILE_SEED` when that is
    /// set: CI draws the same cases every run, and a hunt can draw others. The seed is
    /// printed, so a failure can be run again.
    pub fn new(seed: u64) -> Garbage {
        let extra = std::env::var("STEPWISE_HOSTILE_SEED")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0);
        let seed = seed ^ extra.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        eprintln!("hostile input drawn with seed {seed:#x} (STEPWISE_HOSTILE_SEED={extra})");
        let mut bytes = [0_u8; 32];
        bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
        Garbage {
            runner: TestRunner::new_with_rng(Config::default(), rng),
        }
    }

    fn sample<S: Strategy>(&mut self, strategy: S) -> S::Value {
        strategy
            .new_tree(&mut self.runner)
            .expect("a generated value")
            .current()
    }

    pub fn text(&mut self) -> String {
        self.sample(text())
    }

    pub fn json(&mut self) -> Value {
        self.sample(json())
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.sample(0..n.max(1))
    }

    pub fn pick<T: Clone>(&mut self, items: &[T]) -> T {
        let i = self.below(items.len());
        items[i].clone()
    }

    pub fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// `valid` with one node replaced, removed, retyped or joined by a stranger.
    pub fn mutate(&mut self, valid: &Value) -> Value {
        let mut value = valid.clone();
        let mut pointers = Vec::new();
        pointers_of(&value, String::new(), &mut pointers);
        let at = self.pick(&pointers);
        let replacement = match self.below(4) {
            0 => Value::String(self.text()),
            1 => self.json(),
            2 => Value::Null,
            _ => Value::from(self.pick(&[-1_i64, 0, i64::MAX, i64::MIN])),
        };
        let (parent, last) = match at.rfind('/') {
            Some(i) => (at[..i].to_string(), at[i + 1..].to_string()),
            None => (String::new(), String::new()),
        };
        let remove = self.chance(25);
        let add_stranger = self.chance(25);
        let stranger = self.pick(FIELDS).to_string();
        let stranger_value = self.json();
        match value.pointer_mut(&parent) {
            Some(Value::Object(map)) if remove => {
                map.remove(&last);
            }
            Some(Value::Object(map)) if add_stranger => {
                map.insert(stranger, stranger_value);
            }
            _ => match value.pointer_mut(&at) {
                Some(node) => *node = replacement,
                None => value = replacement,
            },
        }
        value
    }

    /// A request body: mostly JSON (a broken valid one when there is one), sometimes bytes
    /// no parser should accept.
    pub fn body(&mut self, valid: Option<&Value>) -> Vec<u8> {
        match (self.below(12), valid) {
            (0..=4, Some(valid)) => self.mutate(valid).to_string().into_bytes(),
            // A key given twice, the stranger first: which one a parser keeps is its own.
            (5, Some(Value::Object(map))) if !map.is_empty() => {
                let key = self.pick(&map.keys().cloned().collect::<Vec<_>>());
                let valid = Value::Object(map.clone()).to_string();
                format!("{{{}:{},{}", Value::String(key), self.json(), &valid[1..]).into_bytes()
            }
            (0..=5, _) => self.json().to_string().into_bytes(),
            (6, _) => Vec::new(),
            // Nested far past any parser's depth limit.
            (7, _) => format!("{}{}", "[".repeat(10_000), "]".repeat(10_000)).into_bytes(),
            // JSON whose string holds bytes that are not UTF-8.
            (8, _) => {
                let mut bytes = br#"{"payload":{"repository":""#.to_vec();
                bytes.extend_from_slice(&[0xff, 0xfe, 0x00, 0xc3]);
                bytes.extend_from_slice(br#""}}"#);
                bytes
            }
            // Numbers past every integer and float type.
            (9, _) => {
                let key = self.pick(FIELDS);
                let number = self.pick(&[
                    "1e999",
                    "-1e999",
                    "18446744073709551616",
                    "-9223372036854775809",
                    "1e-999",
                    "-0",
                    "4294967296",
                    "0.5",
                ]);
                format!(r#"{{"{key}":{number},"workerId":"w1","attempt":{number}}}"#).into_bytes()
            }
            _ => self.sample(proptest::collection::vec(any::<u8>(), 0..300)),
        }
    }

    /// `text` for a URL: every byte outside the unreserved set percent-encoded, and short
    /// enough that several fit in one URI (at most 64 KiB, as the http crate allows).
    pub fn url_text(&mut self) -> String {
        let mut text = self.text();
        text.truncate(text.floor_char_boundary(2000));
        percent_encode(text.as_bytes())
    }
}

/// `bytes` as one form-encoded value: safe in a query, a form body or a path segment.
pub fn percent_encode(bytes: &[u8]) -> String {
    form_urlencoded::byte_serialize(bytes).collect()
}

fn pointers_of(value: &Value, at: String, out: &mut Vec<String>) {
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                pointers_of(
                    child,
                    format!("{at}/{}", key.replace('~', "~0").replace('/', "~1")),
                    out,
                );
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                pointers_of(child, format!("{at}/{i}"), out);
            }
        }
        _ => {}
    }
    out.push(at);
}

fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => proptest::sample::select(HOSTILE).prop_map(str::to_string),
        3 => any::<String>(),
        2 => "[ -~]{0,40}",
        1 => (proptest::sample::select(HOSTILE), 1_usize..3000).prop_map(|(s, n)| s.repeat(n)),
    ]
}

fn json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        text().prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((key(), inner), 0..6)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect())),
        ]
    })
}

fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => proptest::sample::select(FIELDS).prop_map(str::to_string),
        1 => text(),
    ]
}
