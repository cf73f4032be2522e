//! baton's MCP server: what a store keeps, offered to any MCP client (Claude Code, Codex, an
//! IDE) as tools: `search` (an index of hits, never whole messages), `recall` (the originals,
//! byte-identical to what was stored), `runs` and `run`, `working_state`, `context`, `pin`
//! and `unpin`, `compact` (a dry run by default) and `report`.
//!
//! The roles: [`Baton`] is the service, one store and one tenant; [`serve_stdio`] runs it
//! over standard input and output (`baton mcp`). Every tool is a thin adapter over the crates
//! the CLI and the HTTP API use (`baton-store`, `baton-compact`, `baton-runtime`,
//! `baton-usage`, `baton-cache`, `baton-view`), so the three interfaces answer alike.
//!
//! ```no_run
//! # async fn demo(store: std::sync::Arc<dyn baton_store::Store>) -> Result<(), baton_mcp::Error> {
//! let tenant = baton_core::TenantId::new("default").map_err(|e| baton_mcp::Error::Serve(e.to_string()))?;
//! baton_mcp::serve_stdio(baton_mcp::Baton::new(store, tenant)).await
//! # }
//! ```
//!
//! # Design
//!
//! - **The protocol version is pinned.** The server speaks the revisions up to
//!   [`PROTOCOL_VERSION`] (2025-11-25, the last with an `initialize` handshake, which every
//!   client of today sends), whatever newer ones the `rmcp` release knows.
//! - **Tool failures are tool errors.** Arguments that do not fit a tool's schema, an unknown
//!   run, a seq out of range, a compaction that would need a model: each is a result with
//!   `isError: true` and a message naming what was wrong, so the model can correct itself.
//!   Only a request that cannot be routed (an unknown tool, a resource that does not parse) is
//!   a JSON-RPC error.
//! - **No hidden spend.** The server makes no model call and starts nothing in the
//!   background: `compact` runs the offline strategies only, and answers a strategy that would
//!   need a model with a tool error.
//! - **Tenant scoping.** Every store call names the server's one tenant; a run of another
//!   tenant is "not found", as everywhere in baton.
//! - The tools are routed by hand ([`ServerHandler::call_tool`]) rather than by `rmcp`'s
//!   `#[tool_router]`: its `Parameters` extractor answers bad arguments with a protocol error,
//!   and routing by hand keeps this crate independent of the macros' defaults, which have
//!   changed between releases.

#![deny(clippy::print_stdout, clippy::print_stderr)]

use std::borrow::Cow;
use std::sync::Arc;

use baton_core::TenantId;
use baton_store::Store;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListResourceTemplatesResult, ListToolsResult, PaginatedRequestParams, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, ResourceContents,
    ResourceTemplate, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};

pub mod listing;
mod tools;

pub use tools::{TOOLS, Tool};

/// The newest MCP revision this server speaks; it also speaks every older one.
pub const PROTOCOL_VERSION: ProtocolVersion = ProtocolVersion::V_2025_11_25;

/// What went wrong serving.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The transport failed or the client broke the protocol.
    #[error("mcp: {0}")]
    Serve(String),
}

/// The MCP service over one store: for one tenant (stdio), or for the tenant each HTTP
/// request authenticated as ([`Baton::per_request`], the `/mcp` route of `baton serve`).
#[derive(Clone)]
pub struct Baton {
    store: Arc<dyn Store>,
    tenant: Option<TenantId>,
    memo: Arc<listing::Memo>,
}

/// One call's store and tenant: what every tool works with.
pub(crate) struct Scope<'a> {
    store: &'a dyn Store,
    memo: &'a listing::Memo,
    tenant: TenantId,
}

impl Scope<'_> {
    fn store(&self) -> &dyn Store {
        self.store
    }
}

impl Baton {
    /// The service over `store`, answering for `tenant` only.
    pub fn new(store: Arc<dyn Store>, tenant: TenantId) -> Self {
        Baton {
            store,
            tenant: Some(tenant),
            memo: Arc::default(),
        }
    }

    /// The service over `store` behind HTTP authentication: each request acts for the
    /// [`TenantId`] its HTTP request carries in its extensions (put there by the server's
    /// authentication layer). A request without one is refused with a protocol error, never
    /// answered for some default tenant.
    pub fn per_request(store: Arc<dyn Store>) -> Self {
        Baton {
            store,
            tenant: None,
            memo: Arc::default(),
        }
    }

    /// Calls the tool `name` with `arguments` (a JSON object, or nothing) for this service's
    /// tenant: the answer a client gets, tool errors included. `None` when there is no such
    /// tool.
    pub async fn call(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Option<CallToolResult> {
        let tool = TOOLS.iter().find(|t| t.name == name)?;
        let Some(tenant) = self.tenant.clone() else {
            return Some(tool_error(
                "this service answers for the tenant of each HTTP request, and none was given",
            ));
        };
        let scope = Scope {
            store: &*self.store,
            memo: &self.memo,
            tenant,
        };
        let arguments = serde_json::Value::Object(arguments.unwrap_or_default());
        Some(tools::call(&scope, *tool, arguments).await)
    }

    /// The tenant a request acts for: this service's own, else the one its HTTP request was
    /// authenticated as.
    fn scope(&self, context: &RequestContext<RoleServer>) -> Result<Baton, ErrorData> {
        if self.tenant.is_some() {
            return Ok(self.clone());
        }
        let tenant = context
            .extensions
            .get::<http::request::Parts>()
            .and_then(|parts| parts.extensions.get::<TenantId>())
            .cloned()
            .ok_or_else(|| {
                ErrorData::invalid_request("no authenticated tenant for this request", None)
            })?;
        Ok(Baton::new(self.store.clone(), tenant))
    }
}

/// The service at an HTTP route (streamable HTTP, with sessions kept in memory), for the
/// tenant each request authenticated as (see [`Baton::per_request`]). Only loopback `Host`
/// headers are accepted (`rmcp`'s default, against DNS rebinding), so it answers on the
/// machine it runs on unless put behind a proxy that rewrites `Host`.
pub fn http_service(
    store: Arc<dyn Store>,
) -> rmcp::transport::StreamableHttpService<
    Baton,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    let service = Baton::per_request(store);
    rmcp::transport::StreamableHttpService::new(
        move || Ok(service.clone()),
        Arc::default(),
        rmcp::transport::StreamableHttpServerConfig::default(),
    )
}

/// Serves `service` over standard input and output until the client closes them. Only
/// protocol frames are written to stdout.
pub async fn serve_stdio(service: Baton) -> Result<(), Error> {
    let running = service
        .serve(rmcp::transport::stdio())
        .await
        .map_err(|e| Error::Serve(e.to_string()))?;
    running
        .waiting()
        .await
        .map_err(|e| Error::Serve(e.to_string()))?;
    Ok(())
}

const INSTRUCTIONS: &str = "baton keeps every message of a run (an agent session) append-only, numbered by seq, \
and never loses one to compaction. Use `search` to find where something was said (an index: run, seq, role, \
a short snippet), then `recall` with the run and seq (or a from..to range) for the exact originals. \
`runs` lists sessions, `run` shows one with its compactions and what each covered, `working_state` the \
state its active summary holds (each item with its source seq), `context` what the next model call would get.";

impl ServerHandler for Baton {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_protocol_version(PROTOCOL_VERSION)
        .with_server_info(
            Implementation::new("baton", env!("CARGO_PKG_VERSION"))
                .with_title("baton: durable, bounded context"),
        )
        .with_instructions(INSTRUCTIONS)
    }

    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(&PROTOCOL_VERSION))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(
            TOOLS.iter().map(|t| t.definition()).collect(),
        ))
    }

    fn get_tool(&self, name: &str) -> Option<rmcp::model::Tool> {
        TOOLS
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.definition())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        match self
            .scope(&context)?
            .call(&request.name, request.arguments)
            .await
        {
            Some(result) => Ok(result.into()),
            None => Err(ErrorData::invalid_params(
                format!(
                    "no tool {:?}: the tools are {}",
                    request.name,
                    TOOLS.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
                ),
                None,
            )),
        }
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let template = |uri: &str, name: &str, description: &str, mime: &str| {
            ResourceTemplate::new(uri, name)
                .with_description(description)
                .with_mime_type(mime)
        };
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            template(
                "baton://run/{id}",
                "run",
                "A run: counts, usage, origin and compactions (what `run` answers)",
                "application/json",
            ),
            template(
                "baton://run/{id}/seq/{n}",
                "message",
                "One stored message, byte-identical to what was stored (baton's message JSON)",
                "application/json",
            ),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let baton = self.scope(&context)?;
        let Some(tenant) = baton.tenant else {
            return Err(ErrorData::invalid_request("no tenant", None));
        };
        let scope = Scope {
            store: &*baton.store,
            memo: &baton.memo,
            tenant,
        };
        let text = tools::read_resource(&scope, uri).await?;
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type("application/json"),
        ])
        .into())
    }
}

/// A tool result holding only `text`, as an error.
fn tool_error(text: impl Into<String>) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}
