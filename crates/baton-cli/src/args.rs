//! The command line, as clap derive types. Parsing only; `dispatch` hands each command to its module.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// baton: durable, bounded context for LLM agents.
#[derive(Debug, Parser)]
#[command(name = "baton", version = crate::settings::VERSION, about, propagate_version = true)]
pub struct Cli {
    /// The store: a SQLite file path (or `sqlite://PATH`), or `postgres://…[?schema=NAME]`.
    /// Default: `$BATON_DB`, else `$XDG_DATA_HOME/baton/baton.db`, created on first use.
    #[arg(long, global = true, env = "BATON_DB", value_name = "PATH")]
    pub db: Option<String>,

    /// The tenant every read and write is scoped to.
    #[arg(
        long,
        global = true,
        env = "BATON_TENANT",
        default_value = "default",
        value_name = "T"
    )]
    pub tenant: String,

    /// Print one JSON object on stdout instead of text for people.
    #[arg(long, global = true)]
    pub json: bool,

    /// How the token count stored with each appended or imported message is computed: `auto`
    /// (the vocabulary of the transcript's model on import, else o200k_base), `bytes` (about
    /// four bytes a token, no vocabulary), `o200k_base` or `cl100k_base`.
    #[arg(
        long,
        global = true,
        env = "BATON_TOKENIZER",
        default_value = "auto",
        value_name = "NAME"
    )]
    pub tokenizer: String,

    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create, list, show and cancel runs.
    #[command(subcommand)]
    Runs(RunsCommand),
    /// Append messages (JSONL, Anthropic or OpenAI shape) to a run; prints the seqs assigned.
    Append(AppendArgs),
    /// Print a run's history, or check its tool-call pairing.
    History(HistoryArgs),
    /// Re-read originals by seq, range or search, whatever has been compacted.
    Recall(RecallArgs),
    /// Import agent session logs as runs: Claude Code, Codex, OpenHands, SWE-agent,
    /// OpenAI/Anthropic message arrays, aider chat history.
    Import(ImportArgs),
    /// Follow folders of session logs (`~/.claude/projects`, `~/.codex/sessions`) and import
    /// each session as it is written, until SIGINT or SIGTERM; a restart reads only what
    /// changed.
    Watch(WatchArgs),
    /// Install, list and show summary versions.
    #[command(subcommand)]
    Summary(SummaryCommand),
    /// Print the context the next model call would receive; `--budget` fits it to a model's
    /// limit as the agent does before each call (clipping the largest contents of the tail).
    Context(ContextArgs),
    /// Talk to an agent whose every event is stored: a REPL on a terminal, else the lines of
    /// stdin or `--message`s; `--run ID` resumes a run where it stands.
    Chat(ChatArgs),
    /// Compact a run now: the strategy plans, the summary is written and checked, and installed
    /// by compare-and-swap (history is untouched).
    Compact(CompactArgs),
    /// Re-walk a run step by step under each strategy, offline, and compare what each sends,
    /// keeps and costs.
    Replay(ReplayArgs),
    /// Reports: a run's token growth, the duplicate work in the call log or the runs.
    #[command(subcommand)]
    Report(ReportCommand),
    /// The idempotency ledger: begin an operation, renew its lease, publish its outcome, show
    /// and list operations, prune expired ones, or run a command under it.
    #[command(subcommand)]
    Ops(OpsCommand),
    /// One model call through the response cache (key, single-flight across processes, call
    /// log); prints the reply.
    Call(CallArgs),
    /// Pin messages: no compaction ever drops them, and the context carries them whole; with
    /// no seq, list the run's pins.
    Pin(PinArgs),
    /// Unpin messages.
    Unpin(UnpinArgs),
    /// Create or upgrade the store's schema (idempotent); prints the schema version.
    Migrate,
    /// Check the store: connectivity, schema version, and the settings that matter.
    Doctor,
    /// A scripted agent session, offline, left in the store to inspect (`--race`: seed 000's
    /// scenario of two summaries racing on one base while a message arrives).
    Demo(DemoArgs),
    /// Serve the HTTP API and the OpenAI/Anthropic-compatible gateway on the store `--db`
    /// names, until SIGTERM or Ctrl-C (requests in flight finish first).
    Serve(ServeArgs),
    /// The API keys of the HTTP service: create (printed once), list, revoke.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Serve the store `--db` names to an MCP client (Claude Code, Codex, …) over stdin and
    /// stdout, as the tenant `--tenant` names: search, exact recall, runs, working state,
    /// context, pins, compaction (dry run by default) and reports. Makes no model calls.
    Mcp(McpArgs),
    /// Print a shell completion script: `baton completions bash > ~/.local/share/bash-completion/completions/baton`.
    Completions(CompletionsArgs),
}

/// Arguments of `completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell: bash, zsh, fish (also elvish, powershell).
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Arguments of `serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on (port 0: any free port, printed on the first line).
    #[arg(
        long,
        value_name = "HOST:PORT",
        env = "BATON_ADDR",
        default_value = "127.0.0.1:8700"
    )]
    pub addr: String,
    /// Log lines as JSON objects (one per line) instead of text.
    #[arg(long, value_name = "FORMAT", env = "BATON_LOG_FORMAT", default_value = "text", value_parser = ["text", "json"])]
    pub log_format: String,
    /// The largest request body accepted, in bytes (larger ones get 413).
    #[arg(long, value_name = "BYTES", default_value_t = 8 * 1024 * 1024)]
    pub body_limit: usize,
    /// How long an API request may take before it is answered 503.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30s")]
    pub request_timeout: std::time::Duration,
    /// How long the gateway waits for an upstream's response head and between its chunks.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "300s")]
    pub upstream_timeout: std::time::Duration,
    /// The OpenAI-compatible upstream of `POST /v1/chat/completions` (a base URL with `/v1`).
    #[arg(long, value_name = "URL", env = "BATON_UPSTREAM_OPENAI")]
    pub upstream_openai: Option<String>,
    /// The Anthropic upstream of `POST /v1/messages` (a base URL without `/v1`).
    #[arg(long, value_name = "URL", env = "BATON_UPSTREAM_ANTHROPIC")]
    pub upstream_anthropic: Option<String>,
    /// The tenant of gateway requests without an `x-baton-key` header (unset: such requests
    /// get 401). Their cached answers are shared only by callers with the same provider key.
    #[arg(long, value_name = "TENANT", env = "BATON_GATEWAY_TENANT")]
    pub gateway_tenant: Option<String>,
    /// Do not capture gateway conversations as runs (by default each conversation through the
    /// gateway is stored as a run, named by `x-baton-run` or derived from its first messages).
    #[arg(long)]
    pub no_capture: bool,
    /// Managed context for the gateway requests of a tenant that name none, as if each sent
    /// `x-baton-context: POLICY` (and `x-baton-context-budget: BUDGET`, 32000 unless given):
    /// `TENANT=POLICY[:BUDGET]`, comma-separated for several. A request opts out with
    /// `x-baton-context: off`. Needs capture.
    #[arg(long, value_name = "TENANT=POLICY[:BUDGET],…")]
    pub managed_context: Option<String>,
    /// Do not serve the dashboard at `/ui`. When served on a loopback address, it shows the
    /// `--tenant` without a key (to loopback `Host`s only); elsewhere it asks for an API key.
    #[arg(long)]
    pub no_ui: bool,
    /// How long the gateway serves a cached answer.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "24h")]
    pub cache_ttl: std::time::Duration,
    /// How long a request's head may take once its first byte has arrived (the connection is
    /// closed after it).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "10s")]
    pub header_read_timeout: std::time::Duration,
    /// How long a connection with no request in flight may stay silent before it is closed.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "60s")]
    pub idle_timeout: std::time::Duration,
    /// How long a request body may take to arrive whole (408 after it).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "20s")]
    pub body_read_timeout: std::time::Duration,
    /// The most connections served at once (the next ones are answered 503 and closed).
    #[arg(long, value_name = "N", default_value_t = 1024)]
    pub max_connections: usize,
    /// A price file replacing the built-in table (`crates/baton-core/prices.toml`'s shape): the
    /// gateway's call log costs each call at it, as `report usage --prices` does.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
}

/// `baton keys …`
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a key for `--tenant`; the key is printed once, alone on the last line.
    Create(KeysCreateArgs),
    /// List keys (id, tenant, label, created, revoked): of `--tenant`, or of all with `--all`.
    List(KeysListArgs),
    /// Revoke a key by id, or every key of `--tenant` with `--all-of-tenant`.
    Revoke(KeysRevokeArgs),
}

/// Arguments of `keys create`.
#[derive(Debug, Args)]
pub struct KeysCreateArgs {
    /// What the key is for (shown in listings).
    #[arg(long)]
    pub label: Option<String>,
}

/// Arguments of `keys list`.
#[derive(Debug, Args)]
pub struct KeysListArgs {
    /// Every tenant's keys.
    #[arg(long)]
    pub all: bool,
}

/// Arguments of `keys revoke`.
#[derive(Debug, Args)]
pub struct KeysRevokeArgs {
    /// The key's id (the part after `bk_`, as `keys list` shows it).
    #[arg(
        required_unless_present = "all_of_tenant",
        conflicts_with = "all_of_tenant"
    )]
    pub id: Option<String>,
    /// Revoke every live key of `--tenant` (the tenant can no longer call the service).
    #[arg(long)]
    pub all_of_tenant: bool,
}

/// `baton ops …`
#[derive(Debug, Subcommand)]
pub enum OpsCommand {
    /// Create the operation and take its lease, or read where it stands: completed (its
    /// result), in progress, failed, or begun with another request (mismatch).
    Begin(OpsBeginArgs),
    /// Extend the lease, if FENCE is still the current one.
    Heartbeat(OpsFenceArgs),
    /// Publish the result, if FENCE is still the current one.
    Complete(OpsCompleteArgs),
    /// Record a failure, if FENCE is still the current one.
    Fail(OpsFailArgs),
    /// One operation, with its attempts.
    Show(OpsKeyArg),
    /// The tenant's operations.
    List(OpsListArgs),
    /// Remove operations past their retention (and their attempts).
    Prune,
    /// Run a command under the ledger: at most one worker runs it per key at a time, a
    /// completed run is answered from its record, and a worker that lost its lease cannot
    /// publish. The command gets BATON_OP_KEY, BATON_FENCE and BATON_IDEMPOTENCY_KEY.
    Run(OpsRunArgs),
}

/// `baton context`.
#[derive(Debug, Args)]
pub struct ContextArgs {
    /// The run.
    pub run: String,
    /// Fit the context within this many tokens, as the agent does before each model call:
    /// the largest texts and tool results of the tail are clipped (head and tail kept, a note
    /// naming the seq to recall); fails, naming what takes the room, when even that cannot fit.
    #[arg(long, value_name = "TOKENS")]
    pub budget: Option<u64>,
}

/// An operation's key.
#[derive(Debug, Args)]
pub struct OpsKeyArg {
    /// The idempotency key.
    pub key: String,
}

/// Arguments of `ops begin`.
#[derive(Debug, Args)]
pub struct OpsBeginArgs {
    /// The idempotency key.
    pub key: String,
    /// The request's hash (64 hex digits, as `baton_core::key` derives it).
    #[arg(long, value_name = "HASH")]
    pub request_hash: String,
    /// The worker taking the lease.
    #[arg(long, value_name = "WORKER")]
    pub owner: String,
    /// How long the lease lasts, e.g. `30s`.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub lease: std::time::Duration,
    /// How long the record is kept before `ops prune` may remove it.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "24h")]
    pub retention: std::time::Duration,
}

/// Arguments of `ops heartbeat`.
#[derive(Debug, Args)]
pub struct OpsFenceArgs {
    /// The idempotency key.
    pub key: String,
    /// The fence `begin` gave.
    #[arg(long)]
    pub fence: u64,
    /// The new lease, from now.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub lease: std::time::Duration,
}

/// Arguments of `ops complete`.
#[derive(Debug, Args)]
pub struct OpsCompleteArgs {
    /// The idempotency key.
    pub key: String,
    /// The fence `begin` gave.
    #[arg(long)]
    pub fence: u64,
    /// The result, as JSON.
    #[arg(long, value_name = "JSON")]
    pub result: String,
    /// The attempt made a paid external call.
    #[arg(long)]
    pub paid: bool,
}

/// Arguments of `ops fail`.
#[derive(Debug, Args)]
pub struct OpsFailArgs {
    /// The idempotency key.
    pub key: String,
    /// The fence `begin` gave.
    #[arg(long)]
    pub fence: u64,
    /// What went wrong.
    #[arg(long, value_name = "TEXT")]
    pub error: String,
    /// Another attempt may be made.
    #[arg(long)]
    pub retryable: bool,
    /// The attempt made a paid external call.
    #[arg(long)]
    pub paid: bool,
}

/// Arguments of `ops list`.
#[derive(Debug, Args)]
pub struct OpsListArgs {
    /// Only operations in this status: pending, running, completed or failed.
    #[arg(long, value_name = "STATUS")]
    pub status: Option<String>,
}

/// Arguments of `ops run`.
#[derive(Debug, Args)]
pub struct OpsRunArgs {
    /// The idempotency key.
    pub key: String,
    /// The worker (default: host-pid).
    #[arg(long, value_name = "WORKER")]
    pub owner: Option<String>,
    /// The lease, renewed every third of it while the command runs.
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration, default_value = "30s")]
    pub lease: std::time::Duration,
    /// A failure of the command may be retried by another worker.
    #[arg(long)]
    pub retryable: bool,
    /// The command makes a paid external call (recorded with each attempt).
    #[arg(long)]
    pub paid: bool,
    /// The command and its arguments (its argv is the request the key is pinned to).
    #[arg(last = true, required = true, value_name = "COMMAND")]
    pub command: Vec<String>,
}

/// Arguments of `call`.
#[derive(Debug, Args)]
pub struct CallArgs {
    /// What to ask (one user message).
    #[arg(long, short = 'm', value_name = "TEXT")]
    pub message: String,
    /// System instructions.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// The model provider (default as for `chat`).
    #[arg(long, value_enum)]
    pub provider: Option<ProviderKind>,
    /// The model (default as for `chat`).
    #[arg(long)]
    pub model: Option<String>,
    /// The provider's base URL.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// `--provider scripted`: the script the loopback server answers from.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// The most tokens the reply may have.
    #[arg(long, value_name = "TOKENS", default_value_t = 1024)]
    pub max_tokens: u32,
    /// Fresh processing: do not read the cache (the result is still stored).
    #[arg(long)]
    pub no_cache: bool,
    /// Do not store the result.
    #[arg(long)]
    pub no_store: bool,
    /// How long the result may be served, e.g. `1h`, `30m` (default 24h).
    #[arg(long, value_name = "DURATION", value_parser = humantime::parse_duration)]
    pub ttl: Option<std::time::Duration>,
    /// Make the same call this many times (load and deduplication checks).
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub repeat: u32,
    /// How many of the repeats run at once.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub concurrency: u32,
    /// A price table (TOML) instead of the built-in one, for the call log's costs.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
}

/// Arguments of `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Run seed 000's race instead: two summaries on one base while a message arrives.
    #[arg(long)]
    pub race: bool,
}

/// `baton runs …`
#[derive(Debug, Subcommand)]
pub enum RunsCommand {
    /// Create a run.
    Create(CreateRunArgs),
    /// List the tenant's runs: project, title, agent and model, last activity, messages,
    /// tokens and cost; most recent activity first.
    List(ListRunsArgs),
    /// Show one run.
    Show(RunArg),
    /// Cancel a run: it takes no more messages or summaries.
    Cancel(RunArg),
    /// Delete a run for good, from every table, with its subagent runs (for a secret imported
    /// by mistake); refused without `--yes`.
    Delete(DeleteRunArgs),
}

/// Arguments of `runs list`.
#[derive(Debug, Args)]
pub struct ListRunsArgs {
    /// Only runs of this project: its path, or the path's last component (`baton` for
    /// `/home/me/code/baton`).
    #[arg(long, value_name = "PROJECT")]
    pub project: Option<String>,
    /// Only runs active since: a UTC day (`2026-02-01`), a time (`2026-02-01T10:00:00Z`) or an
    /// age (`90m`, `12h`, `7d`, `2w`).
    #[arg(long, value_name = "WHEN")]
    pub since: Option<String>,
    /// The order: last (most recent activity first), first (most recent start first),
    /// created (oldest first), messages, tokens or cost (most first).
    #[arg(long, value_name = "KEY", default_value = "last", value_parser = ["last", "first", "created", "messages", "tokens", "cost"])]
    pub sort: String,
    /// Show at most this many runs.
    #[arg(long, value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u64).range(1..))]
    pub limit: u64,
    /// Show every run (no limit).
    #[arg(long, conflicts_with = "limit")]
    pub all: bool,
    /// Start after the page that printed this cursor (`next_cursor` of `--format json`).
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
    /// `table` for people, `json` for programs (as `--json`).
    #[arg(long, value_name = "FORMAT", default_value = "table", value_parser = ["table", "json"])]
    pub format: String,
}

/// Arguments of `runs delete`.
#[derive(Debug, Args)]
pub struct DeleteRunArgs {
    /// The run.
    pub run: String,
    /// Delete it: without this flag, baton says what would be deleted and deletes nothing.
    #[arg(long)]
    pub yes: bool,
}

/// Arguments of `runs create`.
#[derive(Debug, Args)]
pub struct CreateRunArgs {
    /// The run's id (letters, digits, `-`, `_`, `.`, `:`; not `.` or `..`); generated when absent.
    #[arg(long)]
    pub id: Option<String>,
    /// What the agent is trying to do.
    #[arg(long)]
    pub goal: Option<String>,
    /// A file of standing rules, placed first in every context.
    #[arg(long, value_name = "FILE")]
    pub rules: Option<PathBuf>,
}

/// A run id argument.
#[derive(Debug, Args)]
pub struct RunArg {
    /// The run.
    pub run: String,
}

/// Arguments of `append`.
#[derive(Debug, Args)]
pub struct AppendArgs {
    /// The run.
    pub run: String,
    /// The JSONL file to read; standard input when absent or `-`.
    #[arg(long, short, value_name = "F")]
    pub file: Option<PathBuf>,
}

/// Arguments of `history`.
#[derive(Debug, Args)]
pub struct HistoryArgs {
    /// The run.
    pub run: String,
    /// First seq to print.
    #[arg(long, value_name = "N")]
    pub from: Option<u64>,
    /// Last seq to print.
    #[arg(long, value_name = "M")]
    pub to: Option<u64>,
    /// Report orphan tool results, dangling tool calls and reused ids instead of the messages;
    /// exits 1 when there is any.
    #[arg(long)]
    pub check: bool,
}

/// Arguments of `recall`.
#[derive(Debug, Args)]
pub struct RecallArgs {
    /// The run.
    pub run: String,
    /// A seq (`12`) or an inclusive range (`10..20`, `10..` to the end).
    #[arg(
        conflicts_with = "grep",
        required_unless_present = "grep",
        value_name = "SEQ|FROM..TO"
    )]
    pub what: Option<String>,
    /// Find the messages containing this phrase (whole words, any case; a trailing `*` makes
    /// the last word a prefix: `deplo*`). Prints one line per hit, around the match.
    #[arg(long, value_name = "PATTERN")]
    pub grep: Option<String>,
    /// With --grep: print each hit's whole message instead of a line around the match.
    #[arg(long, requires = "grep")]
    pub full: bool,
    /// With --grep: look only in this kind of block.
    #[arg(long, value_enum, requires = "grep")]
    pub kind: Option<RecallKind>,
    /// With --grep: at most this many messages.
    #[arg(long, default_value_t = 20, requires = "grep")]
    pub limit: usize,
}

/// The block kinds `recall --grep --kind` takes.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum RecallKind {
    /// Text and thinking.
    Text,
    /// Tool calls: the tool name and its input.
    #[value(name = "tool_use")]
    ToolUse,
    /// Tool results.
    #[value(name = "tool_result")]
    ToolResult,
}

/// Arguments of `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// Transcript files, or directories walked recursively (`~/.claude/projects`,
    /// `~/.codex/sessions`).
    #[arg(required_unless_present = "history", value_name = "PATH")]
    pub paths: Vec<PathBuf>,
    /// Claude Code's prompt history (`~/.claude/history.jsonl`): the prompts of each session
    /// whose file is gone become a run of their own (format `claude-code-history`), after the
    /// PATHs are imported; sessions already imported are left as they are.
    #[arg(long, value_name = "FILE")]
    pub history: Option<PathBuf>,
    /// The format of every file; `auto` tells each file's format from its content.
    #[arg(long, value_enum, default_value_t = ImportFormat::Auto)]
    pub format: ImportFormat,
    /// The id of the new run, when the import reads exactly one transcript.
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,
    /// Append to an imported run what its source gained since (a session that went on);
    /// without it such a source is only reported.
    #[arg(long)]
    pub reimport: bool,
    /// Import each transcript as a new run, even one imported before: for a source that was
    /// edited or replaced since, which is otherwise refused. The runs imported before stay.
    #[arg(long, conflicts_with = "reimport")]
    pub as_new: bool,
    /// Import again a source whose run was deleted (`baton runs delete`), as a new run; without
    /// it such a source is reported `deleted` and nothing of it is stored. Also appends what
    /// imported sources gained, as `--reimport` does.
    #[arg(long, conflicts_with = "as_new")]
    pub restore: bool,
    /// Print nothing but errors.
    #[arg(long, short)]
    pub quiet: bool,
}

/// Arguments of `mcp`.
#[derive(Debug, Args)]
pub struct McpArgs {
    /// Also follow these folders of session logs (`~/.claude/projects`, `~/.codex/sessions`)
    /// as `baton watch` does, in this process: the session the agent is in is searchable
    /// while it is written. Events go to the log (stderr), never to stdout.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub watch: Vec<PathBuf>,
    /// With `--watch`: the watcher's state file (default: `baton watch`'s, beside the store).
    #[arg(long, value_name = "FILE", requires = "watch")]
    pub state: Option<PathBuf>,
}

/// Arguments of `watch`.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Folders to follow, recursively.
    #[arg(required = true, value_name = "DIR")]
    pub paths: Vec<PathBuf>,
    /// Where the watcher remembers what it read (default: beside the SQLite database, or in
    /// baton's data directory for PostgreSQL), so a restart reads only what changed.
    #[arg(long, value_name = "FILE")]
    pub state: Option<PathBuf>,
    /// Claude Code's settings, whose `cleanupPeriodDays` says which sessions it deletes.
    #[arg(long, value_name = "FILE", default_value = "~/.claude/settings.json")]
    pub claude_settings: String,
}

/// The formats `import --format` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ImportFormat {
    /// Tell each file's format from its content.
    Auto,
    /// Claude Code session JSONL.
    ClaudeCode,
    /// Codex CLI rollout JSONL.
    Codex,
    /// OpenHands event streams.
    Openhands,
    /// SWE-agent trajectories.
    SweAgent,
    /// OpenAI Chat Completions messages.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// aider chat history Markdown.
    Aider,
}

/// `baton summary …`
#[derive(Debug, Subcommand)]
pub enum SummaryCommand {
    /// Install a candidate summary by compare-and-swap on the run's active summary.
    Install(InstallArgs),
    /// List a run's summary versions.
    List(RunArg),
    /// Show one summary version.
    Show(SummaryArg),
    /// Show how two versions' claims differ: added, dropped, changed.
    Diff(DiffArgs),
    /// Make another version of the run's summary the active one (roll back or forward), by
    /// compare-and-swap on the active one; history is untouched.
    Activate(ActivateArgs),
}

/// Arguments of `summary diff`.
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The earlier version.
    pub a: u64,
    /// The later version.
    pub b: u64,
}

/// Arguments of `summary activate`.
#[derive(Debug, Args)]
pub struct ActivateArgs {
    /// The run.
    pub run: String,
    /// The version to make active.
    pub id: u64,
    /// The run's active version as you saw it: its id, or `none`.
    #[arg(long, value_name = "CURRENT|none")]
    pub base: String,
}

/// The strategy options `compact`, `replay` and `report growth` share. A `--config` file's
/// `[compaction]` section comes first; these flags override it.
#[derive(Debug, Args, Default)]
pub struct StrategyOpts {
    /// A TOML file with a `[compaction]` section (strategy, its settings, `[compaction.trigger]`)
    /// and optionally `prices = "FILE"`.
    #[arg(long, env = "BATON_CONFIG", value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// `sliding`: messages to keep.
    #[arg(long, value_name = "N")]
    pub keep_last: Option<usize>,
    /// `budget`: the most tokens the context may hold.
    #[arg(long, value_name = "TOKENS")]
    pub max_tokens: Option<u64>,
    /// `budget`: how far it cuts once over `--max-tokens` (default three quarters of it).
    #[arg(long, value_name = "TOKENS")]
    pub target_tokens: Option<u64>,
    /// `clear-tool-results`, `summarize`, `structured`: messages at the end kept whole.
    #[arg(long, value_name = "N")]
    pub keep_recent: Option<usize>,
    /// `clear-tool-results`: tool-result messages smaller than this stay whole.
    #[arg(long, value_name = "TOKENS")]
    pub min_tokens: Option<u32>,
    /// `summarize`, `structured`: context tokens at which they compact.
    #[arg(long, value_name = "TOKENS")]
    pub threshold: Option<u64>,
    /// `summarize`: what the summary must keep.
    #[arg(long, value_name = "TEXT")]
    pub instructions: Option<String>,
    /// A price table (TOML) instead of the built-in one, for the cost-aware trigger.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
}

/// Arguments of `chat`.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The run to continue (created when it does not exist); a new one when absent.
    #[arg(long)]
    pub run: Option<String>,
    /// The model provider (default: anthropic when ANTHROPIC_API_KEY is set, else openai when
    /// OPENAI_API_KEY or OPENAI_BASE_URL is).
    #[arg(long, value_enum)]
    pub provider: Option<ProviderKind>,
    /// The model (default: claude-sonnet-4-5 on anthropic, gpt-4o-mini on openai).
    #[arg(long)]
    pub model: Option<String>,
    /// The provider's base URL (a local OpenAI-compatible server: http://localhost:8080/v1).
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// `--provider scripted`: the script the loopback server answers from.
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// `--provider scripted`: which wire format the client speaks to it.
    #[arg(long, value_enum, default_value_t = WireKind::Anthropic)]
    pub wire: WireKind,
    /// Make the run read-only: the executor refuses tools that change files or run commands.
    #[arg(long)]
    pub read_only: bool,
    /// The compaction strategy before each model call (default: the config's, else structured).
    #[arg(long)]
    pub strategy: Option<String>,
    /// Who writes summaries: the model, or the offline extractor (default: model, offline for
    /// the scripted provider).
    #[arg(long, value_enum)]
    pub summarizer: Option<SummarizerKind>,
    /// Strategy settings.
    #[command(flatten)]
    pub opts: StrategyOpts,
    /// The directory the tools work in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    pub workdir: Option<PathBuf>,
    /// Say this and exit when the turn ends (repeatable: one turn each, in order).
    #[arg(long, short, value_name = "TEXT")]
    pub message: Vec<String>,
    /// Show the before/after of every compaction.
    #[arg(long)]
    pub verbose: bool,
    /// The most tokens a reply may have.
    #[arg(long, default_value_t = 4096, value_name = "TOKENS")]
    pub reply_tokens: u32,
    /// Do not answer model calls from the response cache, nor store their replies (they are
    /// still made; without this, a call repeated after a crash is not paid twice).
    #[arg(long)]
    pub no_cache: bool,
}

/// The providers `chat --provider` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ProviderKind {
    /// The Anthropic Messages API.
    Anthropic,
    /// OpenAI Chat Completions, or any compatible server.
    Openai,
    /// The scripted provider: a loopback server answering from `--script`.
    Scripted,
}

/// The wire formats `chat --wire` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum WireKind {
    /// Anthropic Messages.
    Anthropic,
    /// OpenAI Chat Completions.
    Openai,
}

/// The summarizers `chat --summarizer` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SummarizerKind {
    /// A call to the chat's model.
    Model,
    /// The offline extractor: no model.
    Offline,
}

/// Arguments of `compact`.
#[derive(Debug, Args)]
pub struct CompactArgs {
    /// The run.
    pub run: String,
    /// The strategy: none, sliding, budget, clear-tool-results, summarize, structured (default:
    /// the config's, else none).
    #[arg(long, short)]
    pub strategy: Option<String>,
    /// Strategy settings.
    #[command(flatten)]
    pub opts: StrategyOpts,
    /// Show what it would do, and install nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Skip the trigger's threshold, loop guard and cost check (the checks on the written
    /// summary still apply).
    #[arg(long)]
    pub force: bool,
    /// Append one JSON line per compaction to this file (the logging decorator).
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
}

/// Arguments of `replay`.
#[derive(Debug, Args)]
pub struct ReplayArgs {
    /// The run.
    pub run: String,
    /// The strategies to compare, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "none,sliding,budget,clear-tool-results,structured"
    )]
    pub strategies: Vec<String>,
    /// Consider compacting every N model calls.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub every: usize,
    /// The token budget the strategies hold the context to: `budget`'s maximum and the
    /// `summarize`/`structured` threshold (a `--config` file's or the strategies' defaults,
    /// 32,000, when absent).
    #[arg(long, value_name = "TOKENS")]
    pub budget: Option<u64>,
    /// Strategy settings.
    #[command(flatten)]
    pub opts: StrategyOpts,
}

/// `baton report …`
#[derive(Debug, Subcommand)]
pub enum ReportCommand {
    /// Per step, the input tokens of the full transcript against the compacted context, the
    /// totals, and an SVG chart.
    Growth(GrowthArgs),
    /// Per day and operation: calls, calls repeating an earlier identical request, their cost,
    /// and the identical requests that overlapped in time, from the call log; with `--tools`,
    /// the same over the stored runs' tool calls.
    Duplicates(DuplicatesArgs),
    /// Token usage and cost from the imported sessions' recorded usage, as ccusage reports it
    /// (`daily`, `weekly`, `monthly`, `session`, `blocks`), each response counted once
    /// whatever files it was imported from; plus cache hit share and, per session, peak
    /// context.
    Usage(UsageArgs),
}

/// The reports of `report usage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UsageReport {
    /// One row per day.
    Daily,
    /// One row per week, starting on Monday.
    Weekly,
    /// One row per month.
    Monthly,
    /// One row per session (a subagent's usage counted in its parent's session).
    Session,
    /// ccusage's 5-hour billing blocks, with burn rate and projection for the active one.
    Blocks,
}

/// The row order of `report usage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum UsageOrder {
    /// Oldest first.
    Asc,
    /// Newest first.
    Desc,
}

/// Arguments of `report usage`.
#[derive(Debug, Args)]
pub struct UsageArgs {
    /// Which report.
    #[arg(value_enum)]
    pub report: UsageReport,
    /// From this day on (inclusive), `YYYY-MM-DD` or `YYYYMMDD`, in `--timezone`.
    #[arg(long, value_name = "DAY")]
    pub since: Option<String>,
    /// Up to this day (inclusive).
    #[arg(long, value_name = "DAY")]
    pub until: Option<String>,
    /// Only this project (as the source names it: Claude Code's project folder).
    #[arg(long, value_name = "NAME")]
    pub project: Option<String>,
    /// Follow each row with one row per model.
    #[arg(long)]
    pub breakdown: bool,
    /// Row order.
    #[arg(long, value_enum, default_value = "asc")]
    pub order: UsageOrder,
    /// The zone days are told in: `UTC` or an offset such as `+02:00`.
    #[arg(long, value_name = "ZONE", default_value = "UTC")]
    pub timezone: String,
    /// A price table (TOML) instead of the built-in one.
    #[arg(long, value_name = "FILE")]
    pub prices: Option<PathBuf>,
    /// Also count baton's estimates for sources that record no usage (aider, SWE-agent,
    /// OpenHands, message arrays), which are left out otherwise.
    #[arg(long)]
    pub estimated: bool,
}

/// Arguments of `report duplicates`.
#[derive(Debug, Args)]
pub struct DuplicatesArgs {
    /// One UTC day, `YYYY-MM-DD`.
    #[arg(long, value_name = "YYYY-MM-DD", conflicts_with_all = ["since", "until"])]
    pub day: Option<String>,
    /// From this UTC day on (inclusive).
    #[arg(long, value_name = "YYYY-MM-DD")]
    pub since: Option<String>,
    /// Up to this UTC day (inclusive).
    #[arg(long, value_name = "YYYY-MM-DD")]
    pub until: Option<String>,
    /// Only this operation (with `--tools`: this tool).
    #[arg(long, value_name = "OP")]
    pub operation: Option<String>,
    /// Report on the stored runs' tool calls instead of the call log: a repeat is a call with
    /// the same tool and canonical input as an earlier call of the same run.
    #[arg(long)]
    pub tools: bool,
}

/// Arguments of `report growth`.
#[derive(Debug, Args)]
pub struct GrowthArgs {
    /// The run.
    pub run: String,
    /// The strategy the compacted figures come from.
    #[arg(long, short, default_value = "structured")]
    pub strategy: String,
    /// The token budget (as for `replay`).
    #[arg(long, value_name = "TOKENS")]
    pub budget: Option<u64>,
    /// Write the chart here (an SVG a browser opens).
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
    /// Strategy settings.
    #[command(flatten)]
    pub opts: StrategyOpts,
}

/// Arguments of `pin`.
#[derive(Debug, Args)]
pub struct PinArgs {
    /// The run.
    pub run: String,
    /// The seqs to pin; without any, lists the run's pins.
    pub seqs: Vec<u64>,
}

/// Arguments of `unpin`.
#[derive(Debug, Args)]
pub struct UnpinArgs {
    /// The run.
    pub run: String,
    /// The seqs to unpin.
    #[arg(required = true)]
    pub seqs: Vec<u64>,
}

/// Arguments of `summary install`.
#[derive(Debug, Args)]
pub struct InstallArgs {
    /// The run.
    pub run: String,
    /// The summary the candidate was built on: its id, or `none` when the run had none.
    #[arg(long, value_name = "ID|none")]
    pub base: String,
    /// The last seq the candidate covers.
    #[arg(long, value_name = "SEQ")]
    pub cut: u64,
    /// The candidate: a JSON list of claims `{"kind","text","source_seq"}`.
    #[arg(long, short, value_name = "CANDIDATE.json")]
    pub file: PathBuf,
}

/// A summary id argument.
#[derive(Debug, Args)]
pub struct SummaryArg {
    /// The summary id.
    pub id: u64,
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_well_formed() {
        super::Cli::command().debug_assert();
    }
}
