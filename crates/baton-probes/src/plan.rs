//! The agent's own plan at a cut, rebuilt from its plan tool calls.
//!
//! - A whole-list write replaces the plan: Claude Code `TodoWrite` (`todos[].{content,
//!   status}`), Codex `update_plan` (`plan[].{step, status}`), OpenHands `task_tracking` /
//!   `task_tracker` with `command` `plan` (`task_list[].{title, status}`).
//! - Claude Code's task tools edit it item by item: `TaskCreate` (`subject`) adds a pending
//!   task whose id is the `#N` of its result (`Task #N created successfully: …`), else the
//!   count of tasks created so far; `TaskUpdate` (`taskId`, and `status`, `subject` when
//!   given) changes one, `status: deleted` removes it.
//!
//! A call whose result is an error changed nothing. A malformed input (no list, an item
//! without its text, arguments that are not JSON, a task id no `TaskCreate` made) is skipped
//! and reported as a [`Skip`], never guessed at.

use serde_json::Value;

use crate::Skip;
use crate::calls::Call;
use baton_core::Seq;

/// One item of the plan.
pub struct Item {
    /// The task tools' id, for items they made.
    id: Option<String>,
    /// What the item says (`content`, `step`, `title`, `subject`).
    pub text: String,
    /// Its status as the tool wrote it.
    pub status: String,
    /// The seq of the call that last set it.
    pub seq: Seq,
}

/// The plan after `calls` (in order), and the calls that were skipped.
pub fn latest(calls: &[Call<'_>]) -> (Vec<Item>, Vec<Skip>) {
    let mut plan: Vec<Item> = Vec::new();
    let mut skips = Vec::new();
    let mut created = 0usize;
    for call in calls {
        if call.result.as_ref().is_some_and(|r| r.is_error) {
            continue;
        }
        let skip = |reason: String| Skip {
            seq: call.seq,
            reason,
        };
        let list = match call.name {
            "TodoWrite" => Some(list(call.input, "todos", "content")),
            "update_plan" => Some(list(call.input, "plan", "step")),
            "task_tracking" | "task_tracker" => {
                match call.input.get("command").and_then(Value::as_str) {
                    Some("plan") | None => Some(list(call.input, "task_list", "title")),
                    Some(_) => None,
                }
            }
            "TaskCreate" => {
                created += 1;
                match call.input.get("subject").and_then(Value::as_str) {
                    Some(subject) if !subject.trim().is_empty() => {
                        let id = call
                            .result
                            .as_ref()
                            .and_then(|r| task_number(&r.text))
                            .unwrap_or_else(|| created.to_string());
                        plan.retain(|i| i.id.as_deref() != Some(id.as_str()));
                        plan.push(Item {
                            id: Some(id),
                            text: subject.trim().to_owned(),
                            status: "pending".to_owned(),
                            seq: call.seq,
                        });
                    }
                    _ => skips.push(skip("TaskCreate input has no subject".to_owned())),
                }
                None
            }
            "TaskUpdate" => {
                if let Err(reason) = update(&mut plan, call) {
                    skips.push(skip(reason));
                }
                None
            }
            _ => None,
        };
        match list {
            Some(Ok((items, bad))) => {
                plan = items
                    .into_iter()
                    .map(|(text, status)| Item {
                        id: None,
                        text,
                        status,
                        seq: call.seq,
                    })
                    .collect();
                if bad > 0 {
                    skips.push(skip(format!(
                        "{}: {bad} item(s) without text or status skipped",
                        call.name
                    )));
                }
            }
            Some(Err(reason)) => skips.push(skip(format!("{}: {reason}", call.name))),
            None => {}
        }
    }
    (plan, skips)
}

/// The items (text, status) of a whole-list write, and how many were malformed.
fn list(
    input: &Value,
    key: &str,
    text_key: &str,
) -> Result<(Vec<(String, String)>, usize), String> {
    if input.is_string() {
        return Err("input is not a JSON object (arguments that did not parse)".to_owned());
    }
    let Some(items) = input.get(key).and_then(Value::as_array) else {
        return Err(format!("input has no \"{key}\" list"));
    };
    let mut out = Vec::new();
    let mut bad = 0;
    for item in items {
        let text = item.get(text_key).and_then(Value::as_str).map(str::trim);
        let status = item.get("status").and_then(Value::as_str);
        match (text, status) {
            (Some(text), Some(status)) if !text.is_empty() => {
                out.push((text.to_owned(), status.to_owned()));
            }
            _ => bad += 1,
        }
    }
    Ok((out, bad))
}

/// Applies a `TaskUpdate`.
fn update(plan: &mut Vec<Item>, call: &Call<'_>) -> Result<(), String> {
    let id = match call.input.get("taskId") {
        Some(Value::String(s)) => s.trim().trim_start_matches('#').to_owned(),
        Some(Value::Number(n)) => n.to_string(),
        _ => return Err("TaskUpdate input has no taskId".to_owned()),
    };
    let Some(at) = plan
        .iter()
        .position(|i| i.id.as_deref() == Some(id.as_str()))
    else {
        return Err(format!(
            "TaskUpdate names task {id}, which no TaskCreate made"
        ));
    };
    let status = call.input.get("status").and_then(Value::as_str);
    if status == Some("deleted") {
        plan.remove(at);
        return Ok(());
    }
    let item = &mut plan[at];
    if let Some(status) = status {
        item.status = status.to_owned();
    }
    if let Some(subject) = call.input.get("subject").and_then(Value::as_str)
        && !subject.trim().is_empty()
    {
        item.text = subject.trim().to_owned();
    }
    item.seq = call.seq;
    Ok(())
}

/// The `N` of `Task #N` in a `TaskCreate` result.
fn task_number(text: &str) -> Option<String> {
    let at = text.find('#')?;
    let digits: String = text[at + 1..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    (!digits.is_empty()).then_some(digits)
}
