//! `baton chat`: the agent REPL. Every event of the session is stored before the next step, so
//! `baton chat --run ID` continues a run wherever it stopped (after a crash too).
//!
//! Input comes from the terminal (rustyline: history, a line ending in `\` continues on the
//! next, Ctrl-C cancels the model call in flight and keeps the session, Ctrl-D exits), from
//! `--message` (one turn each), or from the lines of stdin when it is not a terminal. Lines
//! starting with `/` are commands ([`Slash`]).

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use anyhow::{Context as _, anyhow};
use baton_compact::config::CompactionConfig;
use baton_compact::{Offline, Strategy, Summarizer};
use baton_core::prices::{Price, PriceTable};
use baton_core::tokens::TokenCounter;
use baton_core::{RunId, RunStatus, Seq};
use baton_provider::scripted::{Script, ScriptedServer};
use baton_provider::{Provider, Usage};
use baton_runtime::agent::{Agent, Event, Observer, Settings, TurnEnd};
use baton_runtime::summarizer::ModelSummarizer;
use baton_runtime::tools::Toolbox;
use baton_runtime::{Compactor, Outcome};
use baton_store::{NewRun, SearchQuery};

use crate::args::{ChatArgs, ProviderKind, SummarizerKind, WireKind};
use crate::env::Env;
use crate::exit::InvalidInput;

/// A slash command.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Slash {
    /// `/compact [none|sliding|budget|clear|summarize|structured]`.
    Compact(Option<String>),
    /// `/verbose [on|off]`.
    Verbose(Option<bool>),
    /// `/context`.
    Context,
    /// `/recall SEQ|FROM..TO|/pattern/`.
    Recall(String),
    /// `/status`.
    Status,
    /// `/constraint TEXT`.
    Constraint(String),
    /// `/strategy S`.
    Strategy(String),
    /// `/help`.
    Help,
    /// `/quit` or `/exit`.
    Quit,
}

/// The commands, for `/help` and the error of an unknown one.
pub const SLASH_HELP: &str = "/compact [none|sliding|budget|clear|summarize|structured]  compact now with that strategy (default: the session's)
/verbose [on|off]     show the before/after of every compaction
/context              what the next model call sends, with tokens by part
/recall SEQ|A..B|/p/  read originals back by seq, range or phrase
/status               run, model, tokens and cost so far, compactions, cache reads
/constraint TEXT      set a constraint (read-only ones are enforced by the executor)
/strategy S           switch the compaction strategy
/help                 this list
/quit                 leave (Ctrl-D too)";

impl Slash {
    /// Parses a line starting with `/`.
    pub fn parse(line: &str) -> Result<Slash, String> {
        let line = line.trim();
        let (name, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
        let rest = rest.trim();
        let arg = (!rest.is_empty()).then(|| rest.to_owned());
        match name {
            "/compact" => Ok(Slash::Compact(arg.map(|a| match a.as_str() {
                "clear" => "clear-tool-results".to_owned(),
                _ => a,
            }))),
            "/verbose" => match rest {
                "" => Ok(Slash::Verbose(None)),
                "on" => Ok(Slash::Verbose(Some(true))),
                "off" => Ok(Slash::Verbose(Some(false))),
                other => Err(format!("/verbose {other}: expected on or off")),
            },
            "/context" => Ok(Slash::Context),
            "/recall" => arg
                .map(Slash::Recall)
                .ok_or_else(|| "/recall: give a seq, a range A..B or /a phrase/".to_owned()),
            "/status" => Ok(Slash::Status),
            "/constraint" => arg
                .map(Slash::Constraint)
                .ok_or_else(|| "/constraint: say what the constraint is".to_owned()),
            "/strategy" => arg
                .map(Slash::Strategy)
                .ok_or_else(|| "/strategy: name one (none, sliding, budget, clear-tool-results, summarize, structured)".to_owned()),
            "/help" | "/?" => Ok(Slash::Help),
            "/quit" | "/exit" => Ok(Slash::Quit),
            other => Err(format!("unknown command {other}; the commands are:\n{SLASH_HELP}")),
        }
    }
}

/// Whether the session's transcript is left off stdout: `baton demo --json` prints one object
/// instead.
static QUIET: AtomicBool = AtomicBool::new(false);

/// Leaves the transcript off stdout for the rest of the process.
pub fn quiet() {
    QUIET.store(true, Ordering::Relaxed);
}

/// Writes a line to stdout (the session's transcript).
fn say(text: &str) {
    if QUIET.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}

/// What the session has spent, for `/status`.
#[derive(Default)]
struct Spent {
    calls: u64,
    usage: Usage,
    compactions: u64,
    /// Tokens summarizers spent on compactions that failed (a successful one's cost is in
    /// its summary version's meta).
    failed_summary_tokens: u64,
}

/// Prints the loop's events as they happen.
struct Printer {
    verbose: bool,
    /// Whether streamed text is being printed (a newline ends it before anything else).
    streaming: bool,
    spent: Spent,
}

impl Printer {
    fn end_stream(&mut self) {
        if self.streaming {
            say("");
            self.streaming = false;
        }
    }
}

fn one_line(text: &str, max: usize) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim();
    if line.chars().count() > max {
        format!("{}…", line.chars().take(max).collect::<String>())
    } else {
        line.to_owned()
    }
}

fn describe(outcome: &Outcome, verbose: bool) -> String {
    match outcome {
        Outcome::Compacted(c) => {
            let mut text = format!(
                "[compaction: {} ({}) {} → {} tokens, {} → {} messages",
                c.strategy,
                c.plan,
                c.tokens_before,
                c.tokens_after,
                c.messages_before,
                c.messages_after
            );
            if let Some(id) = c.summary_id {
                text.push_str(&format!(", summary {id}"));
            }
            text.push(']');
            if verbose {
                if let Some(cut) = c.cut {
                    text.push_str(&format!("\n  dropped messages through seq {cut}"));
                }
                if let Some(r) = &c.retention {
                    let share = |s: &baton_compact::audit::Share| format!("{}/{}", s.kept, s.total);
                    text.push_str(&format!(
                        "\n  still reachable: paths {}, commands {}, urls {}, numbers {}",
                        share(&r.paths),
                        share(&r.commands),
                        share(&r.urls),
                        share(&r.numbers)
                    ));
                }
                if c.summarizer_tokens > 0 {
                    text.push_str(&format!(
                        "\n  the summary cost {} tokens",
                        c.summarizer_tokens
                    ));
                }
            }
            text
        }
        Outcome::Refused { plan, reason, .. } => format!("[compaction ({plan}) not run: {reason}]"),
        Outcome::Kept(keep) => format!("[nothing to compact: {keep}]"),
        Outcome::Planned { .. } => "[compaction planned]".to_owned(),
        Outcome::Conflict(why) => format!("[compaction lost a race: {why}]"),
    }
}

impl Observer for Printer {
    fn event(&mut self, event: Event<'_>) {
        match event {
            Event::Text(text) => {
                if QUIET.load(Ordering::Relaxed) {
                    return;
                }
                let mut out = std::io::stdout().lock();
                let _ = write!(out, "{text}");
                let _ = out.flush();
                self.streaming = true;
            }
            Event::ToolCall { name, input } => {
                self.end_stream();
                say(&format!("  → {name} {}", one_line(&input.to_string(), 100)));
            }
            Event::ToolResult { is_error, text, .. } => {
                let mark = if is_error { "error: " } else { "" };
                say(&format!("  ← {mark}{}", one_line(text, 100)));
            }
            Event::Compaction(outcome) => {
                self.end_stream();
                if matches!(outcome, Outcome::Compacted(_)) {
                    self.spent.compactions += 1;
                }
                if self.verbose || matches!(outcome, Outcome::Compacted(_)) {
                    say(&describe(outcome, self.verbose));
                }
            }
            Event::CompactionFailed { why, tokens } => {
                self.end_stream();
                self.spent.failed_summary_tokens += tokens;
                match tokens {
                    0 => say(&format!("[compaction skipped: {why}]")),
                    _ => say(&format!(
                        "[compaction skipped: {why}; the attempt cost {tokens} tokens]"
                    )),
                }
            }
            Event::OverBudget(over) => {
                self.end_stream();
                say(&format!("[{over}]"));
            }
            Event::ModelCall { usage, .. } => {
                self.spent.calls += 1;
                self.spent.usage.input_tokens += usage.input_tokens;
                self.spent.usage.output_tokens += usage.output_tokens;
                self.spent.usage.cache_read_tokens += usage.cache_read_tokens;
                self.spent.usage.cache_write_tokens += usage.cache_write_tokens;
            }
            _ => {}
        }
    }
}

/// The provider the options name, and the scripted server behind it when there is one.
pub(crate) fn provider(
    args: &ChatArgs,
) -> anyhow::Result<(Arc<dyn Provider>, Option<ScriptedServer>)> {
    let kind = match args.provider {
        Some(kind) => kind,
        None if std::env::var_os(baton_provider::anthropic::API_KEY_ENV).is_some() => {
            ProviderKind::Anthropic
        }
        None if std::env::var_os(baton_provider::openai::API_KEY_ENV).is_some()
            || std::env::var_os(baton_provider::openai::BASE_URL_ENV).is_some()
            || args.base_url.is_some() =>
        {
            ProviderKind::Openai
        }
        None => {
            return Err(anyhow!(
                "chat: no model provider: set {} (Anthropic) or {} (OpenAI); for a local OpenAI-compatible server (llama.cpp, vLLM, Ollama) use --provider openai --base-url http://localhost:8080/v1; to try baton without a model, run `baton demo`",
                baton_provider::anthropic::API_KEY_ENV,
                baton_provider::openai::API_KEY_ENV
            ));
        }
    };
    let anthropic = |base: Option<String>, key| -> anyhow::Result<Arc<dyn Provider>> {
        let mut config = baton_provider::anthropic::Config::from_env(
            args.model
                .clone()
                .unwrap_or_else(|| "claude-sonnet-4-5".to_owned()),
        );
        if let Some(base) = base {
            config.base_url = base;
        }
        if let Some(key) = key {
            config.api_key = Some(key);
        }
        Ok(Arc::new(baton_provider::anthropic::Client::new(config)?))
    };
    let openai = |base: Option<String>| -> anyhow::Result<Arc<dyn Provider>> {
        let mut config = baton_provider::openai::Config::from_env(
            args.model
                .clone()
                .unwrap_or_else(|| "gpt-4o-mini".to_owned()),
        );
        if let Some(base) = base {
            config.base_url = base;
        }
        Ok(Arc::new(baton_provider::openai::Client::new(config)?))
    };
    match kind {
        ProviderKind::Anthropic => Ok((anthropic(args.base_url.clone(), None)?, None)),
        ProviderKind::Openai => Ok((openai(args.base_url.clone())?, None)),
        ProviderKind::Scripted => {
            let path = args.script.as_ref().ok_or_else(|| {
                InvalidInput("--provider scripted needs --script FILE".to_owned())
            })?;
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("--script: reading {}", path.display()))?;
            let script = Script::from_json(&text)
                .map_err(|e| InvalidInput(format!("{}: {e}", path.display())))?;
            let server = ScriptedServer::start(script).context("starting the scripted provider")?;
            let provider = match args.wire {
                WireKind::Anthropic => anthropic(
                    Some(server.anthropic_url()),
                    Some(baton_provider::Secret::new("scripted-provider-has-no-key")),
                )?,
                WireKind::Openai => openai(Some(server.openai_url()))?,
            };
            Ok((provider, Some(server)))
        }
    }
}

/// Everything a session holds besides the agent, which is made anew for each turn.
struct Session<'e> {
    env: &'e Env,
    run: RunId,
    provider: Arc<dyn Provider>,
    summarizer: Arc<dyn Summarizer>,
    config: CompactionConfig,
    strategy: Arc<dyn Strategy>,
    prices: PriceTable,
    counter: Arc<dyn TokenCounter>,
    tools: Toolbox,
    settings: Settings,
    printer: Printer,
    /// Whether a turn failed (a non-interactive session then exits 1).
    failed: bool,
}

impl Session<'_> {
    fn agent(&self) -> Agent<'_> {
        Agent {
            store: &*self.env.store,
            tenant: &self.env.tenant,
            run: &self.run,
            provider: &*self.provider,
            tools: &self.tools,
            compactor: Compactor {
                strategy: &*self.strategy,
                summarizer: &*self.summarizer,
                settings: &self.config.settings,
                clear: self.config.clear().unwrap_or_default(),
                prices: &self.prices,
                counter: &*self.counter,
                force: false,
                dry_run: false,
            },
            counter: &*self.counter,
            settings: self.settings.clone(),
        }
    }

    /// Runs a turn (what the user said, or a resumption), cancellable with Ctrl-C.
    async fn turn(&mut self, text: Option<&str>) -> anyhow::Result<()> {
        let agent = self.agent_owned();
        let printer = &mut self.printer;
        let result = {
            let work = async {
                match text {
                    Some(text) => agent.say(text, printer).await,
                    None => agent.resume(printer).await,
                }
            };
            tokio::select! {
                result = work => Some(result),
                _ = tokio::signal::ctrl_c() => None,
            }
        };
        self.printer.end_stream();
        match result {
            None => {
                say("[cancelled: the run keeps every step stored so far; say something to go on]")
            }
            Some(Ok(TurnEnd::StepLimit)) => say(&format!(
                "[stopped after {} steps; say something to go on]",
                self.settings.max_steps
            )),
            Some(Ok(_)) => {}
            Some(Err(err)) => {
                self.failed = true;
                say(&format!(
                    "[error: {err}; the run is resumable: say something, or run `baton chat --run {}` again]",
                    self.run
                ));
            }
        }
        Ok(())
    }

    /// Answers the tool calls left without results, showing them as they come.
    async fn settle(&mut self) -> anyhow::Result<()> {
        let agent = self.agent_owned();
        let tools = Toolbox::standard();
        agent.agent(&tools).settle(&mut self.printer).await?;
        self.printer.end_stream();
        Ok(())
    }

    /// An agent that does not borrow `self.printer`, so both can be used in one turn.
    fn agent_owned(&self) -> OwnedAgent {
        OwnedAgent {
            store: self.env.store.clone(),
            tenant: self.env.tenant.clone(),
            run: self.run.clone(),
            provider: self.provider.clone(),
            summarizer: self.summarizer.clone(),
            strategy: self.strategy.clone(),
            compaction: self.config.settings.clone(),
            clear: self.config.clear().unwrap_or_default(),
            prices: self.prices.clone(),
            counter: self.counter.clone(),
            settings: self.settings.clone(),
        }
    }

    async fn command(&mut self, slash: Slash) -> anyhow::Result<bool> {
        let store = &*self.env.store;
        let tenant = &self.env.tenant;
        match slash {
            Slash::Quit => return Ok(false),
            Slash::Help => say(SLASH_HELP),
            Slash::Verbose(on) => {
                self.printer.verbose = on.unwrap_or(!self.printer.verbose);
                say(&format!(
                    "verbose {}",
                    if self.printer.verbose { "on" } else { "off" }
                ));
            }
            Slash::Strategy(name) => {
                let mut config = self.config.clone();
                config.strategy = name;
                match config.build() {
                    Ok(strategy) => {
                        say(&format!("compaction strategy: {}", strategy.name()));
                        self.strategy = strategy;
                        self.config = config;
                    }
                    Err(e) => say(&format!("[{e}]")),
                }
            }
            Slash::Compact(name) => {
                let mut config = self.config.clone();
                if let Some(name) = name {
                    config.strategy = name;
                }
                let strategy = match config.build() {
                    Ok(s) => s,
                    Err(e) => {
                        say(&format!("[{e}]"));
                        return Ok(true);
                    }
                };
                let compactor = Compactor {
                    strategy: &*strategy,
                    summarizer: &*self.summarizer,
                    settings: &config.settings,
                    clear: config.clear().unwrap_or_default(),
                    prices: &self.prices,
                    counter: &*self.counter,
                    force: true,
                    dry_run: false,
                };
                match baton_runtime::compact(store, tenant, &self.run, &compactor).await {
                    Ok(outcome) => {
                        if matches!(outcome, Outcome::Compacted(_)) {
                            self.printer.spent.compactions += 1;
                        }
                        say(&describe(&outcome, true));
                    }
                    Err(e) => say(&format!("[compaction failed: {e}]")),
                }
            }
            Slash::Context => {
                let ctx = store.context(tenant, &self.run).await?;
                let request = self.agent().request(&ctx);
                let system = request.system.as_deref().unwrap_or("");
                let system_tokens = self.counter.count_text(system);
                let tail: u64 = ctx.messages.iter().map(|e| u64::from(e.tokens)).sum();
                let claims = ctx.summary.as_ref().map_or(0, |s| s.claims.len());
                say(&format!(
                    "next call: {} messages ({} tokens) after the system text ({} tokens: rules, goal, {} summary claims, {} pinned messages); {} tool results shown as stubs; {} tokens in all",
                    request.messages.len(),
                    tail,
                    system_tokens,
                    claims,
                    ctx.pinned.len(),
                    ctx.cleared.len(),
                    tail + u64::from(system_tokens)
                ));
                if let Some(s) = &ctx.summary {
                    say(&format!("summary {} covers seqs 1..={}", s.id, s.coverage));
                }
                for entry in ctx.messages.iter().rev().take(5).rev() {
                    say(&format!(
                        "  seq {:>4} {:<9} {:>6} tokens  {}",
                        entry.seq,
                        entry.message.role.as_str(),
                        entry.tokens,
                        one_line(
                            baton_runtime::tools::render(entry)
                                .split_once('\n')
                                .map_or("", |(_, body)| body),
                            80
                        )
                    ));
                }
            }
            Slash::Recall(what) => {
                let entries = if let Some(pattern) =
                    what.strip_prefix('/').and_then(|p| p.strip_suffix('/'))
                {
                    let query = SearchQuery {
                        pattern: pattern.to_owned(),
                        kind: None,
                        limit: 20,
                    };
                    store
                        .search(tenant, &self.run, &query)
                        .await
                        .map(|found| found.entries)
                } else {
                    let (from, to) = match what.split_once("..") {
                        Some((a, b)) => {
                            (a.trim().parse::<u64>(), b.trim().parse::<u64>().map(Some))
                        }
                        None => (
                            what.trim().parse::<u64>(),
                            what.trim().parse::<u64>().map(Some),
                        ),
                    };
                    match (from, to) {
                        (Ok(from), Ok(to)) => {
                            store
                                .read_range(tenant, &self.run, Seq(from), to.map(Seq))
                                .await
                        }
                        _ => {
                            say("[/recall: give a seq, a range A..B or /a phrase/]");
                            return Ok(true);
                        }
                    }
                };
                match entries {
                    Ok(entries) if entries.is_empty() => say("no message matches"),
                    Ok(entries) => {
                        for e in &entries {
                            say(&baton_runtime::tools::render(e));
                        }
                    }
                    Err(e) => say(&format!("[{e}]")),
                }
            }
            Slash::Status => {
                let run = store.run(tenant, &self.run).await?;
                let versions = store.summaries(tenant, &self.run).await?.len();
                let constraints = store.constraints(tenant, &self.run).await?;
                let s = &self.printer.spent;
                let cost = self.prices.get(self.provider.model()).map(|p| {
                    Price::cost(p.input, s.usage.input_tokens)
                        + Price::cost(p.output, s.usage.output_tokens)
                        + Price::cost(p.cached_input, s.usage.cache_read_tokens)
                        + Price::cost(p.cache_write, s.usage.cache_write_tokens)
                });
                say(&format!(
                    "run {} ({} messages), {} {} via {}; this session: {} model calls, {} input and {} output tokens, {} read from the prompt cache, cost {}; {} compactions ({} summary versions in all{}), strategy {}; constraints: {}",
                    run.id,
                    run.last_seq,
                    self.provider.name(),
                    self.provider.model(),
                    self.provider.name(),
                    s.calls,
                    s.usage.input_tokens,
                    s.usage.output_tokens,
                    s.usage.cache_read_tokens,
                    cost.map_or("unknown (no price for this model)".to_owned(), |c| format!(
                        "${c:.4}"
                    )),
                    s.compactions,
                    versions,
                    match s.failed_summary_tokens {
                        0 => String::new(),
                        n => format!("; failed summaries cost {n} tokens"),
                    },
                    self.strategy.name(),
                    if constraints.is_empty() {
                        "none".to_owned()
                    } else {
                        constraints
                            .iter()
                            .map(|c| {
                                format!(
                                    "\"{}\"{}",
                                    c.text,
                                    if c.read_only {
                                        " (read-only, enforced)"
                                    } else {
                                        ""
                                    }
                                )
                            })
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ));
            }
            Slash::Constraint(text) => {
                self.settle().await?;
                let c = self.agent().constrain(&text, false).await?;
                say(&format!(
                    "constraint set at seq {} (pinned{})",
                    c.seq,
                    if c.read_only {
                        "; read-only: the executor refuses tools with side effects"
                    } else {
                        ""
                    }
                ));
            }
        }
        Ok(true)
    }

    /// One line of input: a command or something to say. `false` ends the session.
    async fn input(&mut self, line: &str) -> anyhow::Result<bool> {
        let line = line.trim();
        if line.is_empty() {
            return Ok(true);
        }
        if line.starts_with('/') {
            return match Slash::parse(line) {
                Ok(slash) => self.command(slash).await,
                Err(why) => {
                    say(&format!("[{why}]"));
                    Ok(true)
                }
            };
        }
        self.turn(Some(line)).await?;
        Ok(true)
    }
}

/// The parts of an [`Agent`], owned, so a turn can borrow them beside the printer.
struct OwnedAgent {
    store: Arc<dyn baton_store::Store>,
    tenant: baton_core::TenantId,
    run: RunId,
    provider: Arc<dyn Provider>,
    summarizer: Arc<dyn Summarizer>,
    strategy: Arc<dyn Strategy>,
    compaction: baton_compact::Settings,
    clear: baton_compact::strategies::ClearToolResults,
    prices: PriceTable,
    counter: Arc<dyn TokenCounter>,
    settings: Settings,
}

impl OwnedAgent {
    async fn say(
        &self,
        text: &str,
        printer: &mut Printer,
    ) -> Result<TurnEnd, baton_runtime::agent::AgentError> {
        let tools = Toolbox::standard();
        self.agent(&tools).say(text, printer).await
    }

    async fn resume(
        &self,
        printer: &mut Printer,
    ) -> Result<TurnEnd, baton_runtime::agent::AgentError> {
        let tools = Toolbox::standard();
        self.agent(&tools).resume(printer).await
    }

    fn agent<'a>(&'a self, tools: &'a Toolbox) -> Agent<'a> {
        Agent {
            store: &*self.store,
            tenant: &self.tenant,
            run: &self.run,
            provider: &*self.provider,
            tools,
            compactor: Compactor {
                strategy: &*self.strategy,
                summarizer: &*self.summarizer,
                settings: &self.compaction,
                clear: self.clear,
                prices: &self.prices,
                counter: &*self.counter,
                force: false,
                dry_run: false,
            },
            counter: &*self.counter,
            settings: self.settings.clone(),
        }
    }
}

/// Runs `baton chat`.
pub async fn run(env: &Env, args: ChatArgs, _out: &mut dyn Write) -> anyhow::Result<()> {
    let (provider, _server) = provider(&args)?;
    // Every model call goes through the response cache: a call made again after a crash (its
    // reply was received but not yet stored) is answered from the cache instead of paid twice,
    // and every call lands in the call log. `--no-cache` reads nothing and stores nothing.
    let provider: Arc<dyn Provider> = if args.no_cache {
        provider
    } else {
        // A short lease: a process killed mid-call holds its flight until the lease runs out,
        // and the session resumed after it waits that long before calling again.
        let cache = baton_cache::Cache::new(env.store.clone(), env.tenant.clone())
            .with_lease(std::time::Duration::from_secs(5))?;
        Arc::new(baton_cache::CachedProvider::new(
            provider,
            Arc::new(cache),
            baton_cache::CallPolicy::default(),
        ))
    };
    let strategy_name = args
        .strategy
        .clone()
        .or_else(|| args.opts.config.is_none().then(|| "structured".to_owned()));
    let (config, prices) =
        crate::compaction::configure(strategy_name.as_deref(), &args.opts, None)?;
    let strategy = crate::compaction::build(&config)?;
    let summarizer: Arc<dyn Summarizer> = match args.summarizer {
        Some(SummarizerKind::Offline) => Arc::new(Offline),
        Some(SummarizerKind::Model) => Arc::new(ModelSummarizer::new(provider.clone(), 4096)),
        None if args.provider == Some(ProviderKind::Scripted) => Arc::new(Offline),
        None => Arc::new(ModelSummarizer::new(provider.clone(), 4096)),
    };
    let workdir = match &args.workdir {
        Some(dir) => dir.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let workdir: PathBuf = workdir
        .canonicalize()
        .with_context(|| format!("--workdir {}", workdir.display()))?;
    let run = match &args.run {
        Some(id) => {
            let id = RunId::new(id).map_err(|e| InvalidInput(format!("--run: {e}")))?;
            match env.store.run(&env.tenant, &id).await {
                // Refused before any model call: a reply could never be stored.
                Ok(run) if run.status != RunStatus::Active => {
                    return Err(baton_store::Error::RunNotActive {
                        run: run.id,
                        status: run.status,
                    }
                    .into());
                }
                Ok(run) => run.id,
                Err(
                    baton_store::Error::RunNotFound { .. }
                    | baton_store::Error::UnknownTenant { .. },
                ) => {
                    let new = NewRun {
                        id: Some(id),
                        ..NewRun::default()
                    };
                    env.store.create_run(&env.tenant, &new).await?.id
                }
                Err(e) => return Err(e.into()),
            }
        }
        None => {
            env.store
                .create_run(&env.tenant, &NewRun::default())
                .await?
                .id
        }
    };
    let counter = baton_tokens::counter(env.tokenizer, Some(provider.model()));
    let mut session = Session {
        env,
        run: run.clone(),
        provider,
        summarizer,
        config,
        strategy,
        prices,
        counter,
        tools: Toolbox::standard(),
        settings: Settings {
            workdir,
            max_tokens: args.reply_tokens,
            max_steps: 50,
        },
        printer: Printer {
            verbose: args.verbose,
            streaming: false,
            spent: Spent::default(),
        },
        failed: false,
    };
    say(&format!(
        "baton chat: run {run} · {} {} · compaction {} · /help for commands",
        session.provider.name(),
        session.provider.model(),
        session.strategy.name()
    ));
    // A run that stopped mid-turn (a crash, a Ctrl-C) goes on where it stands: its last
    // message is a user message waiting for a reply (not a constraint; tool results count),
    // or tool calls waiting for their results.
    let record = env.store.run(&env.tenant, &run).await?;
    let constraints = env.store.constraints(&env.tenant, &run).await?;
    let pending = if record.last_seq.0 == 0 {
        false
    } else {
        let last = env
            .store
            .read_range(&env.tenant, &run, record.last_seq, Some(record.last_seq))
            .await?;
        last.first().is_some_and(|e| match e.message.role {
            baton_core::Role::Assistant => e.message.tool_use_ids().next().is_some(),
            _ => !constraints.iter().any(|c| c.seq == e.seq),
        })
    };
    let resuming = format!("[resuming run {run} at seq {}]", record.last_seq);
    let mut announced = false;
    if args.read_only && !constraints.iter().any(|c| c.read_only) {
        // Calls left unanswered are answered before the constraint is added (the model's
        // calls must be followed by their results), and without running an unstarted side
        // effect: the user asked for a read-only run. The turn then resumes under the
        // constraint.
        if pending {
            say(&resuming);
            announced = true;
            session.settle().await?;
        }
        let c = session
            .agent()
            .constrain("read-only: do not change files or run commands", true)
            .await?;
        say(&format!(
            "read-only: set at seq {} and enforced by the executor",
            c.seq
        ));
    }
    if pending {
        if !announced {
            say(&resuming);
        }
        session.turn(None).await?;
    }
    let scripted: Vec<String> = if !args.message.is_empty() {
        args.message.clone()
    } else if !std::io::stdin().is_terminal() {
        std::io::stdin().lines().map_while(Result::ok).collect()
    } else {
        return repl(&mut session).await;
    };
    for line in &scripted {
        if !session.input(line).await? {
            break;
        }
    }
    if session.failed {
        return Err(anyhow!(
            "chat: a turn failed (see above); run {run} keeps every step and resumes with `baton chat --run {run}`"
        ));
    }
    Ok(())
}

async fn repl(session: &mut Session<'_>) -> anyhow::Result<()> {
    let mut editor = rustyline::DefaultEditor::new().context("starting the line editor")?;
    loop {
        let mut line = String::new();
        let mut prompt = "you> ";
        let read = loop {
            match tokio::task::block_in_place(|| editor.readline(prompt)) {
                Ok(part) => {
                    if let Some(head) = part.strip_suffix('\\') {
                        line.push_str(head);
                        line.push('\n');
                        prompt = "...> ";
                        continue;
                    }
                    line.push_str(&part);
                    break Some(line);
                }
                Err(rustyline::error::ReadlineError::Interrupted) => break Some(String::new()),
                Err(rustyline::error::ReadlineError::Eof) => break None,
                Err(e) => return Err(anyhow::Error::new(e).context("reading input")),
            }
        };
        let Some(line) = read else {
            say("bye");
            return Ok(());
        };
        if !line.trim().is_empty() {
            let _ = editor.add_history_entry(line.as_str());
        }
        if !session.input(&line).await? {
            say("bye");
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slash_commands_parse_and_unknown_ones_list_the_rest() {
        assert_eq!(
            Slash::parse("/compact sliding"),
            Ok(Slash::Compact(Some("sliding".into())))
        );
        assert_eq!(
            Slash::parse("/compact clear"),
            Ok(Slash::Compact(Some("clear-tool-results".into())))
        );
        assert_eq!(Slash::parse("/compact"), Ok(Slash::Compact(None)));
        assert_eq!(Slash::parse("/verbose on"), Ok(Slash::Verbose(Some(true))));
        assert!(
            Slash::parse("/verbose maybe")
                .unwrap_err()
                .contains("expected on or off")
        );
        assert_eq!(
            Slash::parse("/recall 3..9"),
            Ok(Slash::Recall("3..9".into()))
        );
        assert_eq!(
            Slash::parse("/constraint  read-only "),
            Ok(Slash::Constraint("read-only".into()))
        );
        assert!(Slash::parse("/constraint").is_err());
        let err = Slash::parse("/frobnicate").unwrap_err();
        assert!(
            err.starts_with("unknown command /frobnicate; the commands are:\n/compact"),
            "{err}"
        );
    }
}
