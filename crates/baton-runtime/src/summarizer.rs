//! The model-backed summarizer: one call, no tools, asking for the working-state claims as JSON.
//!
//! The reply must be a JSON list of claims `{"kind", "text", "source_seq"}` whose seqs lie at
//! or before the cut (claims carried from the base may cite older seqs). A reply that does not
//! parse, or cites a seq after the cut, gets one retry with the error shown to the model; a
//! second bad reply fails the summary, and the runtime skips that compaction (the run goes on
//! uncompacted, and the failure is reported). The calls' tokens are returned with the claims,
//! or with the error when no reply could be installed (they were spent all the same).

use std::sync::Arc;

use async_trait::async_trait;
use baton_compact::{SummarizeError, Summarizer, SummaryRequest, Written};
use baton_core::claim::{parse_candidate, validate_sources};
use baton_core::{Claim, Message, Role};
use baton_provider::{Provider, Request};

use crate::tools::render;

/// What the summarizer asks for, unless the strategy's `instructions` override it.
///
/// The model writes what only a model can: designs the user rejected with the correction that
/// rejected them, problems as problem → cause → fix, why each file changed, lessons, and the
/// next step with its rationale. The exact lists (every instruction verbatim, the plan, the
/// files by role, the unresolved problems, the commands) are read from the transcript's
/// structure and merged into what it writes (`WorkingState::with_model`), so it may leave them
/// out and can never drop them.
pub const DEFAULT_INSTRUCTIONS: &str = "You maintain the working state of a coding agent's run, so that the agent can continue after the old messages leave its context. From the current working state and the new messages below, write the next working state as a JSON list of claims, each {\"kind\": …, \"text\": …, \"source_seq\": N} plus, where noted, \"status\" and \"subject\". Every claim cites the seq of the message it rests on, at or before the last seq shown; keep every claim that cites a pinned seq. Write these kinds: rejected (a design or approach the user rejected, and the correction that rejected it, citing the user's message), problem (problem → cause → fix, with \"status\": \"unresolved\" or \"resolved\" and \"subject\": the failing command or tool and file), file (why a file was created or changed: \"subject\" is its path, \"status\" one of created, modified, deleted, read, \"text\" the path, then \" — \", then the intent), lesson (something learned that the rest of the run must respect), hypothesis (believed, not shown), failed_approach (tried, failed, and why), next_step (what to do next and why). Baton adds the user's instructions verbatim, the agent's plan, the files touched, the unresolved problems and the commands from the transcript itself: do not repeat them. Never state that an operation happened, or that something passed, unless a message shows it. Reply with the JSON list only.";

/// A [`Summarizer`] that asks a model.
pub struct ModelSummarizer {
    provider: Arc<dyn Provider>,
    max_tokens: u32,
}

impl ModelSummarizer {
    /// A summarizer calling `provider`, its replies at most `max_tokens` long.
    pub fn new(provider: Arc<dyn Provider>, max_tokens: u32) -> Self {
        ModelSummarizer {
            provider,
            max_tokens,
        }
    }
}

fn prompt(request: &SummaryRequest<'_>) -> String {
    let mut text = String::from("# Current working state\n");
    match request.base {
        Some(base) if !base.claims.is_empty() => {
            text.push_str(&serde_json::to_string_pretty(&base.claims).unwrap_or_default());
        }
        _ => text.push_str("(none yet)"),
    }
    if !request.pins.is_empty() {
        let pins: Vec<String> = request.pins.iter().map(|p| p.to_string()).collect();
        text.push_str(&format!("\n\nPinned seqs: {}", pins.join(", ")));
    }
    text.push_str(&format!(
        "\n\n# New messages (through seq {})\n",
        request.cut
    ));
    for entry in request.old {
        text.push_str(&render(entry));
        text.push_str("\n\n");
    }
    text
}

/// The JSON list in a reply, with a code fence around it or prose before it tolerated.
fn json_of(reply: &str) -> &str {
    let start = reply.find('[');
    let end = reply.rfind(']');
    match (start, end) {
        (Some(s), Some(e)) if s < e => &reply[s..=e],
        _ => reply.trim(),
    }
}

fn check(reply: &str, request: &SummaryRequest<'_>) -> Result<Vec<Claim>, String> {
    let claims = parse_candidate(json_of(reply)).map_err(|e| e.to_string())?;
    validate_sources(&claims, request.cut, request.cut).map_err(|e| e.to_string())?;
    Ok(claims)
}

#[async_trait]
impl Summarizer for ModelSummarizer {
    fn name(&self) -> &str {
        "model"
    }

    async fn summarize(&self, request: &SummaryRequest<'_>) -> Result<Written, SummarizeError> {
        let failed = |detail: String, written: &Written| SummarizeError::Failed {
            summarizer: format!("model ({})", self.provider.model()),
            detail,
            tokens: written.input_tokens + written.output_tokens,
        };
        let mut messages = vec![Message::text(Role::User, prompt(request))];
        let mut written = Written::default();
        for attempt in 0..2 {
            let call = Request {
                model: self.provider.model().to_owned(),
                system: Some(
                    request
                        .instructions
                        .unwrap_or(DEFAULT_INSTRUCTIONS)
                        .to_owned(),
                ),
                messages: messages.clone(),
                tools: Vec::new(),
                max_tokens: self.max_tokens,
                temperature: Some(0.0),
            };
            let response = self
                .provider
                .send(&call, &mut |_| {})
                .await
                .map_err(|e| failed(e.to_string(), &written))?;
            written.input_tokens += response.usage.input_tokens;
            written.output_tokens += response.usage.output_tokens;
            let reply = response.message.plain_text();
            match check(&reply, request) {
                Ok(claims) => {
                    written.claims = claims;
                    return Ok(written);
                }
                Err(why) if attempt == 0 => {
                    messages.push(response.message);
                    messages.push(Message::text(
                        Role::User,
                        format!(
                            "That reply cannot be installed: {why}. Reply with the corrected JSON list of claims only, every source_seq at or before {}.",
                            request.cut
                        ),
                    ));
                }
                Err(why) => {
                    return Err(failed(
                        format!("two replies could not be installed; the last: {why}"),
                        &written,
                    ));
                }
            }
        }
        Err(failed("no reply".to_owned(), &written))
    }
}
