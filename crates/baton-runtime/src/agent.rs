//! The agent loop: context → model → tool calls → tool results, every event appended to the
//! store before the next step.
//!
//! Each step reads the run's state back from the store and does the one thing it calls for:
//! - the model's last reply has tool calls without a result yet → run those tools (under the
//!   executor policy), appending each result as its own message as soon as that tool finishes;
//! - the last message is the model's, without pending calls → the turn is over;
//! - otherwise (the user spoke, or tool results came back) → compact if the strategy and the
//!   trigger say so, then call the model with the assembled context and append its reply.
//!
//! Because every step starts from what is stored, killing the process anywhere and calling
//! [`Agent::resume`] again continues where the run stands: a model call whose reply was not yet
//! appended is made again (it had no effect); a tool whose result was stored is not run again;
//! a call without a result is run again when it has no side effects; a tool call with side
//! effects runs under the idempotency ledger, keyed by the run and the call's id
//! ([`tool_operation_key`]): begun before it runs, its outcome published when it ends, so one
//! found completed but unanswered is answered from the record (its effect is not repeated),
//! one found running is answered with an error saying it may or may not have taken effect,
//! never run twice, and one not begun is run.
//!
//! The user may speak (or set a constraint) while calls are unanswered: after Ctrl-C cancelled
//! a turn, or after a turn stopped at [`Settings::max_steps`]. [`Agent::say`] and
//! [`Agent::constrain`] first [`settle`](Agent::settle) them, so the model's calls are always
//! answered right after it made them (the providers reject a conversation where they are not):
//! a call without side effects is run, a started one is answered "interrupted", and one not
//! started is answered "cancelled by the user" without running (the user spoke before it ran,
//! and what they say may change the plan).
//!
//! The executor policy comes from the run's constraints in the store, never from the model or
//! from summary prose: on a read-only run, tools with side effects are refused with an error
//! the model sees, however many compactions happened since the constraint was set.
//!
//! # Design
//!
//! Every event of a session is its own store write, in order: the user's message, the model's reply (with its tool calls), the intent to run a side-effecting tool (`tool_runs`, schema v5), and each tool's result, as its own message, as soon as that tool finishes (the Anthropic wire merges consecutive result messages into one user message; OpenAI's has one `tool` message per result anyway; protocol units span all the results of one reply).
//! So the store is the session's only state: `baton chat --run ID` in a new process assembles the same context, and the calls of a reply that have no result yet are finished by `Agent::resume` (read-only tools are run again; a side-effecting one that was started is answered "interrupted", one that was not is run).
//! A killed process loses what was in flight only: a model reply not yet stored is asked for again, and a side effect cut off mid-run is answered "interrupted" (it may or may not have taken effect), never run twice.
//! When the user speaks or sets a constraint while calls are unanswered (Ctrl-C during a tool, a turn stopped at the step limit), `Agent::settle` answers them first, in the same way except that an unstarted side effect is answered "cancelled by the user" without running; `baton chat --run ID --read-only` settles the calls, then sets the constraint, then resumes the turn under it.
//! Constraints are data (`run_constraints`, schema v5, written in the same transaction as their pinned message), so enforcement cannot be summarized away and survives restarts; the model sees the text, the executor reads the flag.

use std::path::PathBuf;

use baton_core::Timestamp;
use baton_core::key::{KeyInput, request_key};
use baton_core::tokens::TokenCounter;
use baton_core::{ContentBlock, Context, Message, Role, RunId, TenantId};
use baton_provider::{Delta, Provider, Request, Usage};
use baton_store::{Begin, Constraint, NewEntry, OpStatus, Publish, Store};
use serde_json::Value;

use crate::tools::{ToolContext, Toolbox};
use crate::{Compactor, Outcome, compact};

/// What the loop needs besides the store and the provider.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The directory the tools work in.
    pub workdir: PathBuf,
    /// The most tokens a reply may have.
    pub max_tokens: u32,
    /// The most steps (model calls and tool rounds) one turn may take.
    pub max_steps: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            workdir: PathBuf::from("."),
            max_tokens: 4_096,
            max_steps: 50,
        }
    }
}

/// Something the loop did, for a user interface to show as it happens.
#[derive(Debug)]
#[non_exhaustive]
pub enum Event<'e> {
    /// Streamed assistant text.
    Text(&'e str),
    /// The model called a tool.
    ToolCall {
        /// The tool.
        name: &'e str,
        /// Its input.
        input: &'e Value,
    },
    /// A tool answered.
    ToolResult {
        /// The tool.
        name: &'e str,
        /// Whether it failed (or was refused).
        is_error: bool,
        /// What it returned.
        text: &'e str,
    },
    /// A compaction ran before a model call, or was refused.
    Compaction(&'e Outcome),
    /// A compaction failed (the summarizer could not write a valid summary); the run goes on
    /// uncompacted.
    CompactionFailed {
        /// Why.
        why: &'e str,
        /// The tokens the summarizer spent before it gave up.
        tokens: u64,
    },
    /// The context of the next model call is over the strategy's limit even clipped: the
    /// rules, the working state and the newest message alone exceed it. The call is made
    /// anyway (the provider may accept it); the numbers say what to shrink.
    OverBudget(&'e baton_core::OverBudget),
    /// A model call finished.
    ModelCall {
        /// The model.
        model: &'e str,
        /// Its token usage.
        usage: Usage,
    },
}

/// Receives [`Event`]s.
pub trait Observer: Send {
    /// One event.
    fn event(&mut self, event: Event<'_>);
}

/// An observer that ignores everything.
pub struct Quiet;

impl Observer for Quiet {
    fn event(&mut self, _event: Event<'_>) {}
}

/// How a turn ended.
#[derive(Clone, Debug, PartialEq, Eq)]
#[must_use]
pub enum TurnEnd {
    /// The model answered and called no more tools.
    Answered,
    /// The turn took [`Settings::max_steps`] steps without the model ending it.
    StepLimit,
    /// There was nothing to do: the run has no message to answer.
    Idle,
}

/// What went wrong in a turn. The run stays resumable: nothing half-written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] baton_store::Error),
    /// The model call failed.
    #[error(transparent)]
    Provider(#[from] baton_provider::Error),
    /// Compaction failed in a way that is not the summarizer's.
    #[error(transparent)]
    Compact(#[from] crate::Error),
}

/// The agent of one run.
pub struct Agent<'a> {
    /// Where the run lives.
    pub store: &'a dyn Store,
    /// The run's tenant.
    pub tenant: &'a TenantId,
    /// The run.
    pub run: &'a RunId,
    /// The model.
    pub provider: &'a dyn Provider,
    /// The tools the model may call.
    pub tools: &'a Toolbox,
    /// How the context is compacted before a model call.
    pub compactor: Compactor<'a>,
    /// How appended messages are counted.
    pub counter: &'a dyn TokenCounter,
    /// The rest.
    pub settings: Settings,
}

/// Markers that make a constraint read-only (case-insensitive).
const READ_ONLY_MARKERS: &[&str] = &[
    "read-only",
    "read only",
    "readonly",
    "solo lectura",
    "sólo lectura",
    "do not write",
    "don't write",
    "no writes",
    "do not modify",
    "don't modify",
];

/// Whether a constraint's words forbid tools with side effects.
pub fn is_read_only(text: &str) -> bool {
    let lower = text.to_lowercase();
    READ_ONLY_MARKERS.iter().any(|m| lower.contains(m))
}

impl Agent<'_> {
    /// Sets a constraint on the run: appended as a pinned user message (the model sees it
    /// however the context is compacted) and recorded for the executor. `read_only` forces a
    /// read-only constraint; otherwise it is read-only when its words say so
    /// ([`is_read_only`]).
    ///
    /// Tool calls still unanswered are [settled](Agent::settle) first, so the constraint does
    /// not land between the model's calls and their results.
    pub async fn constrain(&self, text: &str, read_only: bool) -> Result<Constraint, AgentError> {
        self.settle(&mut Quiet).await?;
        let read_only = read_only || is_read_only(text);
        let enforced = if read_only {
            " The executor enforces it: tools that change files or run commands are refused."
        } else {
            ""
        };
        let message = Message::text(
            Role::User,
            format!("Constraint set by the user for the rest of this run: {text}{enforced}"),
        );
        let entry = NewEntry::counted(message, self.counter);
        Ok(self
            .store
            .add_constraint(self.tenant, self.run, &entry, text, read_only)
            .await?)
    }

    /// Appends what the user said and runs the turn.
    ///
    /// Tool calls still unanswered (a cancelled turn, a turn stopped at the step limit) are
    /// [settled](Agent::settle) first, so what the user says follows their results.
    pub async fn say(
        &self,
        text: &str,
        observer: &mut dyn Observer,
    ) -> Result<TurnEnd, AgentError> {
        self.settle(observer).await?;
        let entry = NewEntry::counted(Message::text(Role::User, text), self.counter);
        self.store
            .append(self.tenant, self.run, std::slice::from_ref(&entry))
            .await?;
        self.resume(observer).await
    }

    /// Runs the turn from wherever the run stands.
    pub async fn resume(&self, observer: &mut dyn Observer) -> Result<TurnEnd, AgentError> {
        for _ in 0..self.settings.max_steps.max(1) {
            let context = self.store.context(self.tenant, self.run).await?;
            let Some(last) = context.messages.last() else {
                return Ok(TurnEnd::Idle);
            };
            let last_is_reply = last.message.role == Role::Assistant;
            let pending = pending_calls(&context);
            if !pending.is_empty() {
                self.run_tools(&pending, Unstarted::Run, observer).await?;
                continue;
            }
            if last_is_reply {
                return Ok(TurnEnd::Answered);
            }
            self.maybe_compact(observer).await?;
            self.call_model(observer).await?;
        }
        Ok(TurnEnd::StepLimit)
    }

    /// Answers the tool calls of the model's last reply that have no result yet, without
    /// calling the model: a call without side effects is run, a side-effecting one that was
    /// started is answered "interrupted", and one that was not started is answered "cancelled
    /// by the user" without running (on a read-only run it is refused, as always).
    /// Returns how many calls it answered (0 when none was pending).
    ///
    /// [`Agent::say`] and [`Agent::constrain`] call it first; a user interface calls it itself
    /// to show the results as they come (the later call then finds nothing to do).
    pub async fn settle(&self, observer: &mut dyn Observer) -> Result<usize, AgentError> {
        let context = self.store.context(self.tenant, self.run).await?;
        let pending = pending_calls(&context);
        if !pending.is_empty() {
            self.run_tools(&pending, Unstarted::Cancel, observer)
                .await?;
        }
        Ok(pending.len())
    }

    async fn maybe_compact(&self, observer: &mut dyn Observer) -> Result<(), AgentError> {
        match compact(self.store, self.tenant, self.run, &self.compactor).await {
            Ok(outcome) => {
                if !matches!(outcome, Outcome::Kept(_)) {
                    observer.event(Event::Compaction(&outcome));
                }
                Ok(())
            }
            // A summarizer that cannot write a valid summary skips this compaction; the
            // conversation goes on uncompacted.
            Err(crate::Error::Summarize(err)) => {
                observer.event(Event::CompactionFailed {
                    why: &err.to_string(),
                    tokens: err.tokens(),
                });
                Ok(())
            }
            // A strategy that needs a model with an offline summarizer: the same, at no cost.
            Err(err @ crate::Error::NeedsModel { .. }) => {
                observer.event(Event::CompactionFailed {
                    why: &err.to_string(),
                    tokens: 0,
                });
                Ok(())
            }
            Err(other) => Err(other.into()),
        }
    }

    async fn call_model(&self, observer: &mut dyn Observer) -> Result<(), AgentError> {
        let mut context = self.store.context(self.tenant, self.run).await?;
        // Hold the strategy's limit: clip what one unit too large carries (history untouched).
        if let Some(limit) = self.compactor.strategy.limit()
            && !context.fit(limit)
            && let Some(over) = &context.over_budget
        {
            observer.event(Event::OverBudget(over));
        }
        let request = self.request(&context);
        let mut on_delta = |delta: Delta| {
            if let Delta::Text(text) = &delta {
                observer.event(Event::Text(text));
            }
        };
        let response = self.provider.send(&request, &mut on_delta).await?;
        observer.event(Event::ModelCall {
            model: &response.model,
            usage: response.usage,
        });
        let entry = NewEntry::counted(response.message, self.counter);
        self.store
            .append(self.tenant, self.run, std::slice::from_ref(&entry))
            .await?;
        Ok(())
    }

    /// The model call for `context`: the agent's instructions and the context's preamble as the
    /// system text, the tail as the conversation (which must open with the user), the tools.
    pub fn request(&self, context: &Context) -> Request {
        let mut system = format!(
            "You are a coding agent working in the directory {}. Use the tools to read, search and change files there and to run commands; use recall to read back earlier messages of this conversation in full.",
            self.settings.workdir.display()
        );
        if let Some(preamble) = context.preamble() {
            system.push_str("\n\n");
            system.push_str(&preamble.plain_text());
        }
        let mut messages: Vec<Message> = context
            .messages
            .iter()
            .filter(|e| e.message.role != Role::System)
            .map(|e| e.message.clone())
            .collect();
        if messages.first().is_some_and(|m| m.role == Role::Assistant) {
            messages.insert(
                0,
                Message::text(
                    Role::User,
                    "(The conversation before this point is summarized in the system text.)",
                ),
            );
        }
        Request {
            model: self.provider.model().to_owned(),
            system: Some(system),
            messages,
            tools: self.tools.specs(),
            max_tokens: self.settings.max_tokens,
            temperature: None,
        }
    }

    /// Runs `pending` in order, appending each result as its own message as soon as its tool
    /// finishes, so a result once stored is never lost or redone.
    async fn run_tools(
        &self,
        pending: &[(String, String, Value)],
        unstarted: Unstarted,
        observer: &mut dyn Observer,
    ) -> Result<(), AgentError> {
        let constraints = self.store.constraints(self.tenant, self.run).await?;
        let read_only = constraints.iter().find(|c| c.read_only);
        let started = self.store.started_tools(self.tenant, self.run).await?;
        let ctx = ToolContext {
            workdir: &self.settings.workdir,
            store: self.store,
            tenant: self.tenant,
            run: self.run,
        };
        for (id, name, input) in pending {
            observer.event(Event::ToolCall { name, input });
            let outcome: Result<String, String> = match self.tools.get(name) {
                None => Err(format!(
                    "unknown tool {name:?}; the tools are {}",
                    self.tools.names().join(", ")
                )),
                Some(tool) if tool.side_effects() => match read_only {
                    Some(c) => Err(format!(
                        "refused: this run is read-only (the user's constraint at seq {}: \"{}\"); {name} changes files or runs commands",
                        c.seq, c.text
                    )),
                    None => {
                        self.side_effect(id, name, input, tool, &ctx, &started, unstarted)
                            .await?
                    }
                },
                Some(tool) => tool.call(input, &ctx).await,
            };
            let (text, is_error) = match outcome {
                Ok(text) => (text, false),
                Err(text) => (text, true),
            };
            observer.event(Event::ToolResult {
                name,
                is_error,
                text: &text,
            });
            let message = Message {
                role: Role::User,
                content: vec![ContentBlock::ToolResult {
                    tool_use_id: id.clone(),
                    content: vec![ContentBlock::Text { text }],
                    is_error,
                }],
            };
            let entry = NewEntry::counted(message, self.counter);
            self.store
                .append(self.tenant, self.run, std::slice::from_ref(&entry))
                .await?;
        }
        Ok(())
    }
}

/// How long a tool's ledger record is kept: a week, so a run resumed days later still finds
/// what its side effects did.
const TOOL_RETENTION: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// A tool's lease. Nothing takes a tool call over (a running record found on resume is
/// answered "interrupted"), so the lease only has to outlast the call.
const TOOL_LEASE: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// The ledger key of a tool call: the run and the call's id.
pub fn tool_operation_key(run: &RunId, tool_use_id: &str) -> String {
    format!("tool:{run}:{tool_use_id}")
}

/// A tool outcome as the ledger keeps it, and back.
fn recorded(value: Option<&Value>) -> Result<String, String> {
    let text = value
        .and_then(|v| v.get("text"))
        .and_then(Value::as_str)
        .unwrap_or("(no output recorded)")
        .to_owned();
    match value
        .and_then(|v| v.get("is_error"))
        .and_then(Value::as_bool)
    {
        Some(true) => Err(text),
        _ => Ok(text),
    }
}

impl Agent<'_> {
    /// Runs a side-effecting tool call under the idempotency ledger, keyed by the run and the
    /// call's id: a call whose outcome is recorded is answered from the record and never run
    /// again (a crash between its effect and its result message loses nothing); one recorded
    /// as running (a crash mid-call) is answered "interrupted"; a new one is begun, run, and
    /// its outcome published under its fence before the result message is appended.
    #[allow(clippy::too_many_arguments)]
    async fn side_effect(
        &self,
        id: &str,
        name: &str,
        input: &Value,
        tool: &dyn crate::tools::Tool,
        ctx: &ToolContext<'_>,
        started: &[String],
        unstarted: Unstarted,
    ) -> Result<Result<String, String>, AgentError> {
        let key = tool_operation_key(self.run, id);
        let interrupted = || {
            Err(format!(
                "interrupted: this {name} call started before the session stopped and may or may not have taken effect; check before trying again"
            ))
        };
        if let Some((op, _)) = self.store.operation(self.tenant, &key).await? {
            return Ok(match op.status {
                OpStatus::Completed => recorded(op.result.as_ref()),
                OpStatus::Failed => Err(op.error.unwrap_or_default()),
                OpStatus::Running | OpStatus::Pending => interrupted(),
            });
        }
        // Started, and its ledger record gone (pruned) or never written (a crash between the
        // two records): it may have run.
        if started.iter().any(|s| s == id) {
            return Ok(interrupted());
        }
        if unstarted == Unstarted::Cancel {
            return Ok(Err(format!(
                "cancelled by the user: this {name} call had not started when the user spoke again, and was not run; call it again if it is still needed"
            )));
        }
        let hash = request_key(&KeyInput {
            tenant: self.tenant,
            operation: &format!("tool.{name}"),
            body: &serde_json::json!({ "input": input }),
            versions: &Default::default(),
            documents: &[],
        })
        .map_err(|e| baton_store::Error::Corrupt {
            what: format!("keying tool call {id}: {e}"),
        })?;
        // The permanent intent record first: the ledger's record is pruned after its
        // retention, this one never, so a call is never run twice however late it resumes.
        if !self.store.start_tool(self.tenant, self.run, id).await? {
            return Ok(interrupted());
        }
        let owner = format!("agent-{}", std::process::id());
        let begun = self
            .store
            .begin(
                self.tenant,
                &key,
                &hash,
                &owner,
                TOOL_LEASE,
                TOOL_RETENTION,
                Timestamp::now(),
            )
            .await?;
        let fence = match begun {
            Begin::Acquired {
                operation,
                takeover: false,
            } => operation.fence,
            Begin::Completed(op) => return Ok(recorded(op.result.as_ref())),
            // Someone else began it meanwhile, or it was begun and lost: never run it twice.
            _ => return Ok(interrupted()),
        };
        let outcome = tool.call(input, ctx).await;
        let value = match &outcome {
            Ok(text) => serde_json::json!({ "text": text, "is_error": false }),
            Err(text) => serde_json::json!({ "text": text, "is_error": true }),
        };
        if let Err(fenced) = self
            .store
            .publish(
                self.tenant,
                &key,
                fence,
                Publish::Complete(&value),
                false,
                Timestamp::now(),
            )
            .await?
        {
            tracing::warn!(key, ?fenced, "a tool call's outcome could not be published");
        }
        Ok(outcome)
    }
}

/// What [`Agent::run_tools`] does with a side-effecting call that was never started.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unstarted {
    /// Runs it (resuming a turn).
    Run,
    /// Answers it "cancelled by the user" (the user spoke before it ran).
    Cancel,
}

/// The tool calls of the context's last model reply that no later message answers, in order:
/// `(id, name, input)`.
fn pending_calls(context: &Context) -> Vec<(String, String, Value)> {
    let Some(at) = context
        .messages
        .iter()
        .rposition(|e| e.message.role == Role::Assistant)
    else {
        return Vec::new();
    };
    let answered: Vec<&str> = context.messages[at + 1..]
        .iter()
        .flat_map(|e| e.message.tool_result_ids())
        .collect();
    context.messages[at]
        .message
        .content
        .iter()
        .filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } if !answered.contains(&id.as_str()) => {
                Some((id.clone(), name.clone(), input.clone()))
            }
            _ => None,
        })
        .collect()
}
