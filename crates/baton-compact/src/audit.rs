//! The retention audit: what share of the file paths, shell commands, URLs and numbers with
//! units in the dropped part of a context is still reachable after a compaction.
//!
//! A summary that reads well can still lose the details a continuation needs: field
//! measurements of LLM-written summaries found about one file path in ten and almost no
//! commands surviving. After every compaction the runtime collects the [`Facts`] of the
//! messages it drops ([`facts`]) and counts each as *kept* when it appears verbatim in the
//! text of some claim of the new summary, or in some entry that stays in the context (the tail
//! after the cut and the pinned messages) — [`audit`]. Detection is shared with the offline
//! extractor's artifact claims (see the `scan` submodule for exactly what counts as a path, a
//! command, a URL or a number), so the two can never disagree about what a fact is.
//!
//! ```
//! use baton_compact::audit::{audit, facts};
//! use baton_core::{Claim, ClaimKind, ContentBlock, Entry, Message, Role, Seq, Timestamp};
//!
//! let entry = |seq, message| Entry { seq: Seq(seq), message, tokens: 10, created_at: Timestamp(0) };
//! let call = Message {
//!     role: Role::Assistant,
//!     content: vec![ContentBlock::ToolUse {
//!         id: "t1".into(),
//!         name: "Bash".into(),
//!         input: serde_json::json!({"command": "cargo test -p baton-core"}),
//!     }],
//! };
//! let dropped = [
//!     entry(1, Message::text(Role::User, "Fix src/lib.rs; it takes 120 ms.")),
//!     entry(2, call),
//! ];
//! let found = facts(&dropped);
//! assert!(found.paths.contains("src/lib.rs") && found.numbers.contains("120 ms"));
//!
//! let claims = [Claim::new(ClaimKind::Artifact, "path src/lib.rs", Seq(1))];
//! let retention = audit(&dropped, &claims, &[]);
//! assert_eq!((retention.paths.kept, retention.paths.total), (1, 1));
//! assert_eq!((retention.commands.kept, retention.commands.total), (0, 1));
//! assert_eq!(retention.urls.ratio(), None);
//! ```

pub(crate) mod scan;

use std::collections::BTreeSet;

use baton_core::{Claim, Entry};
use serde::{Deserialize, Serialize};

use scan::Fact;

/// What share of the dropped part's facts stays reachable, per kind of fact.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Retention {
    /// File paths.
    pub paths: Share,
    /// Shell commands run.
    pub commands: Share,
    /// URLs.
    pub urls: Share,
    /// Numbers with units, and versions.
    pub numbers: Share,
}

/// How many of `total` things were kept.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Share {
    /// How many were kept.
    pub kept: u32,
    /// How many there were.
    pub total: u32,
}

impl Share {
    /// `kept / total`, or `None` when there was nothing to keep.
    pub fn ratio(&self) -> Option<f64> {
        (self.total > 0).then(|| f64::from(self.kept) / f64::from(self.total))
    }
}

impl std::ops::Add for Share {
    type Output = Share;

    fn add(self, other: Share) -> Share {
        Share {
            kept: self.kept + other.kept,
            total: self.total + other.total,
        }
    }
}

impl std::ops::AddAssign for Share {
    fn add_assign(&mut self, other: Share) {
        *self = *self + other;
    }
}

impl std::ops::Add for Retention {
    type Output = Retention;

    fn add(self, other: Retention) -> Retention {
        Retention {
            paths: self.paths + other.paths,
            commands: self.commands + other.commands,
            urls: self.urls + other.urls,
            numbers: self.numbers + other.numbers,
        }
    }
}

impl std::ops::AddAssign for Retention {
    fn add_assign(&mut self, other: Retention) {
        *self = *self + other;
    }
}

/// The distinct facts of some messages, each as the exact text it appears as (commands as
/// their first line, at most 200 characters).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Facts {
    /// File paths (`src/main.rs`, `/etc/hosts`, `./a/b.py`, `Cargo.toml`).
    pub paths: BTreeSet<String>,
    /// Shell commands run by tool calls.
    pub commands: BTreeSet<String>,
    /// URLs.
    pub urls: BTreeSet<String>,
    /// Numbers with units (`12 ms`, `3.5s`, `200 MB`, `42%`, `1,024 tokens`) and versions
    /// (`v1.2.3`).
    pub numbers: BTreeSet<String>,
}

impl Facts {
    fn insert(&mut self, fact: Fact, text: &str) {
        let set = match fact {
            Fact::Path => &mut self.paths,
            Fact::Command => &mut self.commands,
            Fact::Url => &mut self.urls,
            Fact::Number => &mut self.numbers,
        };
        if !set.contains(text) {
            set.insert(text.to_owned());
        }
    }
}

/// The facts of `entries`: what the user and the agent wrote (text and thinking) and the
/// inputs of the tool calls they made. Tool output is not scanned (see the `scan` submodule).
pub fn facts(entries: &[Entry]) -> Facts {
    let mut facts = Facts::default();
    for entry in entries {
        scan::message_facts(&entry.message, &mut |fact, text| facts.insert(fact, text));
    }
    facts
}

/// What share of the facts of `dropped` stays reachable: a fact is kept when it appears
/// verbatim in the text of one of `claims`, or in one of the `kept` entries (the tail after
/// the cut and the pinned messages: anything of theirs a reader sees, tool output included).
pub fn audit(dropped: &[Entry], claims: &[Claim], kept: &[Entry]) -> Retention {
    let dropped = facts(dropped);
    let kept_facts = facts(kept);
    let mut claim_text = String::new();
    for claim in claims {
        claim_text.push_str(&claim.text);
        claim_text.push('\n');
    }
    let mut kept_text = String::new();
    for entry in kept {
        scan::visible_text(&entry.message, &mut kept_text);
    }
    let share = |facts: &BTreeSet<String>, known: &BTreeSet<String>| {
        let kept = facts
            .iter()
            .filter(|f| known.contains(*f) || claim_text.contains(*f) || kept_text.contains(*f))
            .count();
        Share {
            kept: u32::try_from(kept).unwrap_or(u32::MAX),
            total: u32::try_from(facts.len()).unwrap_or(u32::MAX),
        }
    };
    Retention {
        paths: share(&dropped.paths, &kept_facts.paths),
        commands: share(&dropped.commands, &kept_facts.commands),
        urls: share(&dropped.urls, &kept_facts.urls),
        numbers: share(&dropped.numbers, &kept_facts.numbers),
    }
}

#[cfg(test)]
mod tests;
