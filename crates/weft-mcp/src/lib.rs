//! # weft-mcp
//!
//! Weft's MCP server (`weft mcp`): the tools a language model needs to author flows —
//! learn a dialect, validate with located diagnostics and hints, save named versions,
//! edit by JSON Patch, run, watch and fix — over one [`weft_engine::Engine`].
//!
//! It owns the MCP surface only: the tool table ([`tools`]), their arguments, and how a
//! failure becomes a tool error (`isError`) a model can act on. A run is addressed by its
//! id and lives in the engine's store, so no run depends on a connection. It must not
//! depend on the command line, the HTTP server, or any store, model or sandbox adapter.

mod args;
mod failure;
mod flows;
mod format;
mod progress;
mod prompts;
mod resources;
mod runs;
mod schedules;
mod tasks;
mod testing;
pub mod tools;

use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;

#[allow(deprecated)]
use rmcp::model::SetLevelRequestParams;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CancelTaskParams, GetPromptRequestParams,
    GetPromptResponse, GetTaskParams, GetTaskResult, Implementation, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, PaginatedRequestParams,
    ReadResourceRequestParams, ReadResourceResponse, ServerCapabilities, ServerConfig,
    UpdateTaskParams,
};
use rmcp::service::{RequestContext, RoleServer};
use rmcp::{ErrorData, ServerHandler, ServiceExt};
use weft_engine::Engine;

/// Makes the engine of one `test_flow` run: a fresh in-memory store, and actions that
/// fail rather than write. The host builds it (this crate knows no adapter).
pub type TestEngines = Arc<dyn Fn() -> Engine + Send + Sync>;

/// How the server behaves beyond its engine.
#[derive(Clone, Default)]
pub struct McpOptions {
    /// Let `answer_approval` answer approvals. Off by default: a model must not approve
    /// its own run's pause; a person answers on the page, over the API or with `weft
    /// approve`.
    pub allow_approvals: bool,
    /// Engines for `test_flow`; without them the tool says it is not offered here.
    pub test_engines: Option<TestEngines>,
}

/// The MCP server over one engine. Cheap to clone: one per connection.
#[derive(Clone)]
pub struct WeftMcp {
    pub(crate) engine: Engine,
    /// Checks flows and starts runs, as every front end does (with the host's run
    /// settings and run limit).
    pub(crate) service: weft_service::Service,
    pub(crate) options: McpOptions,
    /// `test_flow` tasks, which no store keeps.
    pub(crate) tests: tasks::TestTasks,
}

impl WeftMcp {
    /// The server over `service`'s engine, starting runs through it.
    pub fn new(service: weft_service::Service, options: McpOptions) -> WeftMcp {
        WeftMcp {
            engine: service.engine().clone(),
            service,
            options,
            tests: tasks::TestTasks::default(),
        }
    }

    /// Serves one client on standard input and output until it disconnects.
    pub async fn serve_stdio(self) -> Result<(), McpServeError> {
        let running = self
            .serve(rmcp::transport::stdio())
            .await
            .map_err(|e| McpServeError(e.to_string()))?;
        running
            .waiting()
            .await
            .map_err(|e| McpServeError(e.to_string()))?;
        Ok(())
    }
}

impl WeftMcp {
    /// The tools over streamable HTTP, for a server to mount (at `/mcp`). Stateless:
    /// every request stands alone (no session to lose; runs are addressed by id), and a
    /// plain request gets a plain JSON answer. `allowed_hosts` are the `Host` values it
    /// answers (empty: any), against DNS rebinding when no token guards the server.
    pub fn http_service(
        self,
        allowed_hosts: Vec<String>,
    ) -> StreamableHttpService<WeftMcp, NeverSessionManager> {
        let config = StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_allowed_hosts(allowed_hosts);
        StreamableHttpService::new(
            move || Ok(self.clone()),
            Arc::new(NeverSessionManager::default()),
            config,
        )
    }
}

/// Why serving stopped with an error.
#[derive(Debug)]
pub struct McpServeError(pub String);

impl std::fmt::Display for McpServeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the MCP session failed: {}", self.0)
    }
}

impl std::error::Error for McpServeError {}

/// What a client is told when it connects.
const INSTRUCTIONS: &str = "Weft runs AI-agent workflows (flows) written in several dialects. \
To author one: describe_format (learn a dialect), validate_flow (diagnostics with line:col and \
hints), save_flow or edit_flow (JSON Patch; every save is a version), test_flow (a run with no \
side effects, model calls answered by you), then run_flow and get_run (status, output, the \
failing step and its error, events). Runs are addressed by run_id.";

impl ServerHandler for WeftMcp {
    #[allow(deprecated)] // logging: see `set_level`
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .enable_prompts()
                .enable_logging()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("weft", env!("CARGO_PKG_VERSION")))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items(tools::list()))
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(
            resources::list(self).await?,
        ))
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resources::templates(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(resources::read(self, &request.uri).await?.into())
    }

    async fn list_prompts(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(prompts::list())
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        Ok(prompts::get(&request.name, request.arguments.as_ref())?.into())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let arguments = request.arguments.unwrap_or_default();
        let takes_tasks = context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks());
        if takes_tasks && tasks::TASK_TOOLS.contains(&request.name.as_ref()) {
            return Ok(tasks::call(self, &request.name, arguments).await);
        }
        let progress = context
            .meta
            .get_progress_token()
            .map(|token| progress::Progress {
                peer: context.peer.clone(),
                token,
            });
        Ok(tools::call(self, &request.name, arguments, progress)
            .await?
            .into())
    }

    /// Accepted at any level, for clients of the 2025-11-25 revision (logging left the
    /// protocol with SEP-2577): the server sends no log messages; a run's warnings are in
    /// its events, which `get_run` returns.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        _: SetLevelRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, ErrorData> {
        tasks::get(self, &request.task_id).await
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::cancel(self, &request.task_id).await
    }

    async fn update_task(
        &self,
        request: UpdateTaskParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        tasks::update(self, &request.task_id, request.input_responses).await
    }
}
