//! The model actions `llm.call`, `llm.chat`, `llm.stream` and `llm.tools`. They become `llm` blocks
//! (so they stream, retry, count usage and journal like any model call); each tool of
//! `llm.tools` becomes a sub-flow that runs one built-in action.

use super::Compiler;
use super::actions::BUILTIN;
use serde_json::{Map, Value};
use weft_core::Diagnostic;
use weft_core::ir::{
    ActionSpec, Block, BlockKind, Flow, LlmOutput, LlmSpec, MessageSpec, ModelDef, Template,
    ToolSpec, ValueTemplate,
};

/// Actions that call a model.
/// `llm.chat` is TEA's chat completion on whichever backend its settings choose; Weft
/// routes it by model id like `llm.call`.
pub(super) const MODEL: &[&str] = &["llm.call", "llm.chat", "llm.stream", "llm.tools"];

/// Options every model action reads from `with:`.
const LLM_OPTIONS: &[&str] = &[
    "model",
    "messages",
    "prompt",
    "system",
    "temperature",
    "max_tokens",
    "provider",
    "api_base",
    "response_format",
    "timeout",
    "shell_provider",
];
/// Options TEA's backends read that Weft's model calls do not, with why: each is read
/// and warned of, so a file written for TEA loads.
const TEA_ONLY_OPTIONS: &[(&str, &str)] = &[
    (
        "backend",
        "TEA picks a model runtime by it; Weft routes by the model id (`local/...` runs offline)",
    ),
    ("stop", "Weft's model calls take no stop sequences"),
    (
        "extra_body",
        "Weft sends no provider-specific request fields",
    ),
];
/// TEA's model providers Weft does not have, with what each needs.
const TEA_PROVIDERS: &[(&str, &str)] = &[
    ("azure", "Azure OpenAI's deployments and api-version"),
    ("azure_openai", "Azure OpenAI's deployments and api-version"),
    ("azureopenai", "Azure OpenAI's deployments and api-version"),
    ("litellm", "the LiteLLM library"),
    ("shell", "running a model CLI as a shell command"),
];
/// The options only `llm.tools` adds.
const TOOL_OPTIONS: &[&str] = &["tools", "tool_choice", "max_tool_rounds"];
/// The Edge Agent's default bound on tool-calling turns.
const DEFAULT_TOOL_ROUNDS: u32 = 10;

impl Compiler<'_> {
    /// `llm.call` / `llm.stream` / `llm.tools`: `{content, usage, model}` from a model
    /// (`llm.tools` adds `tool_calls`, `tool_results` and `rounds`).
    pub(super) fn llm_call(
        &mut self,
        uses: &str,
        with: Option<&Value>,
        ptr: &str,
        node: &str,
    ) -> Option<Block> {
        let wptr = format!("{ptr}/with");
        let with = self.with_mapping(
            uses,
            with,
            &wptr,
            "its `model` and `messages`",
            "with: {model: gpt-4o-mini, messages: [{role: user, content: \"...\"}]}",
        )?;
        if let Some(shell) = with.get("shell_provider") {
            // Accepted so the file loads; a run that reaches the node says why it stops.
            return Some(super::actions::refusal(format!(
                "{uses} with shell_provider {shell} runs a model CLI as a shell command (TEA's shell providers); Weft does not run shell commands: name a `model` (and `provider`) instead"
            )));
        }
        if let Some(provider) = with.get("provider").and_then(Value::as_str)
            && let Some((_, need)) = TEA_PROVIDERS.iter().find(|(p, _)| *p == provider)
        {
            return Some(super::actions::refusal(format!(
                "{uses} with provider `{provider}` needs {need}; Weft's providers are openai (and servers speaking its API: give `api_base`), anthropic, gemini and ollama"
            )));
        }
        let offers_tools = uses == "llm.tools";
        let options: Vec<&str> = if offers_tools {
            LLM_OPTIONS.iter().chain(TOOL_OPTIONS).copied().collect()
        } else {
            LLM_OPTIONS.to_vec()
        };
        self.read_options(uses, with, &wptr, (&options, TEA_ONLY_OPTIONS), |key| {
            TOOL_OPTIONS
                .contains(&key)
                .then(|| format!("`{key}` is an option of `uses: llm.tools`"))
        });
        let mut spec = LlmSpec {
            output: LlmOutput::Message,
            ..LlmSpec::default()
        };
        spec.model = self.model_of(&self.with_settings(with), &wptr, node);
        self.messages(with, &wptr, &mut spec);
        if let Some(t) = with.get("temperature") {
            match t.as_f64() {
                Some(t) => spec.temperature = Some(t),
                None => self.diags.push(Diagnostic::error(
                    format!("{wptr}/temperature"),
                    "temperature is a number",
                )),
            }
        }
        if let Some(t) = with.get("max_tokens") {
            match t.as_u64().and_then(|n| u32::try_from(n).ok()) {
                Some(n) => spec.max_tokens = Some(n),
                None => self.diags.push(Diagnostic::error(
                    format!("{wptr}/max_tokens"),
                    "max_tokens is a whole number",
                )),
            }
        }
        if let Some(format) = with.get("response_format") {
            spec.output_schema = self.response_format(format, &format!("{wptr}/response_format"));
        }
        if offers_tools {
            self.tools(with, &wptr, node, &mut spec);
        }
        let routed = spec.model.as_deref().and_then(|id| self.routed_model(id));
        let mut block = Block::new(BlockKind::Llm(spec));
        block.policy.timeout_ms = self.timeout_seconds(with.get("timeout"), &wptr);
        Some(match routed {
            // The answer names the model the file names, not Weft's alias for its route.
            Some(model) => Block::new(BlockKind::Sequence(vec![
                block,
                super::transform(Value::from(format!(
                    "{{{{ input | merge({{'model': {}}}) }}}}",
                    Value::from(model)
                ))),
            ])),
            None => block,
        })
    }

    /// `with` and what `settings.llm` gives every model call that names none, as TEA
    /// resolves a call's model: the call's own `model`, `provider` and `api_base`, else
    /// the settings' (`model`, or `default_model` as TEA's examples write it). Every
    /// model call goes through here: `llm.*`, and those inside reflection, reasoning,
    /// agents, planning and extraction.
    fn with_settings(
        &self,
        with: &serde_json::Map<String, Value>,
    ) -> serde_json::Map<String, Value> {
        let mut resolved = with.clone();
        for (key, from) in [
            ("model", &["model", "default_model"][..]),
            ("provider", &["provider"][..]),
            ("api_base", &["api_base"][..]),
        ] {
            if resolved.contains_key(key) {
                continue;
            }
            if let Some(v) = from.iter().find_map(|k| self.llm_settings.get(*k)) {
                resolved.insert(key.to_owned(), v.clone());
            }
        }
        resolved
    }

    /// The file's model name behind `id` when `id` is an alias [`Self::model_of`] made
    /// for a route (`provider`, `api_base`): the flow's only model aliases.
    fn routed_model(&self, id: &str) -> Option<String> {
        self.models.get(id).and_then(|def| def.model.clone())
    }

    /// TEA's per-call `timeout`, in seconds, as milliseconds.
    pub(super) fn timeout_seconds(&mut self, t: Option<&Value>, wptr: &str) -> Option<u64> {
        match t {
            None => None,
            Some(t) if t.as_f64().is_some_and(|s| s > 0.0 && s <= 86_400.0) => {
                t.as_f64().map(|s| (s * 1000.0) as u64)
            }
            Some(_) => {
                self.diags.push(Diagnostic::error(
                    format!("{wptr}/timeout"),
                    "timeout is a number of seconds, above 0 and at most 86400",
                ));
                None
            }
        }
    }

    /// Checks the keys of `with:` against `options`: one of TEA's `tea_only` options
    /// (with why Weft does not use it) is warned of, any other unknown key refused with
    /// `hint` for it, else the list of options.
    pub(super) fn read_options(
        &mut self,
        uses: &str,
        with: &serde_json::Map<String, Value>,
        wptr: &str,
        (options, tea_only): (&[&str], &[(&str, &str)]),
        hint: impl Fn(&str) -> Option<String>,
    ) {
        for key in with.keys() {
            if let Some((_, why)) = tea_only.iter().find(|(k, _)| k == key) {
                self.diags.push(Diagnostic::warning(
                    weft_core::validate::child_pointer(wptr, key),
                    format!("`{key}` is read, not used: {why}"),
                ));
            } else if !options.contains(&key.as_str()) {
                let hint =
                    hint(key).unwrap_or_else(|| format!("its options: {}", options.join(", ")));
                self.unknown_option(uses, key, wptr, options, hint);
            }
        }
    }

    /// `messages: [{role, content}]` and/or `prompt: TEXT` (a last user message).
    fn messages(&mut self, with: &serde_json::Map<String, Value>, wptr: &str, spec: &mut LlmSpec) {
        if let Some(messages) = with.get("messages") {
            let Some(messages) = messages.as_array().filter(|m| !m.is_empty()) else {
                self.diags.push(
                    Diagnostic::error(format!("{wptr}/messages"), "messages is a non-empty list")
                        .hint("messages: [{role: user, content: \"...\"}]"),
                );
                return;
            };
            for (i, m) in messages.iter().enumerate() {
                let role = m.get("role").and_then(Value::as_str);
                let content = m.get("content").and_then(Value::as_str);
                match (role, content) {
                    (Some(r @ ("system" | "user" | "assistant")), Some(c)) => {
                        spec.messages.push(MessageSpec {
                            role: r.to_owned(),
                            content: Template(c.to_owned()),
                        })
                    }
                    _ => self.diags.push(
                        Diagnostic::error(
                            format!("{wptr}/messages/{i}"),
                            "a message is {role: system|user|assistant, content: TEXT}",
                        )
                        .hint("content is a template, e.g. \"Summarize {{ state.text }}\""),
                    ),
                }
            }
        }
        match with.get("system") {
            Some(Value::String(p)) => spec.system = Some(Template(p.clone())),
            Some(_) => self.diags.push(Diagnostic::error(
                format!("{wptr}/system"),
                "system is a string (a template)",
            )),
            None => {}
        }
        match with.get("prompt") {
            Some(Value::String(p)) => spec.prompt = Some(Template(p.clone())),
            Some(_) => self.diags.push(Diagnostic::error(
                format!("{wptr}/prompt"),
                "prompt is a string (a template)",
            )),
            None if spec.messages.is_empty() && !with.contains_key("messages") => self.diags.push(
                Diagnostic::error(wptr, "a model action needs `messages` or `prompt`")
                    .hint("messages: [{role: user, content: \"...\"}], or prompt: \"...\""),
            ),
            None => {}
        }
    }

    /// `response_format: {type: json_object}` or `{type: json_schema, json_schema:
    /// {schema}}`: the answer is checked (and repaired) against the schema.
    fn response_format(&mut self, format: &Value, ptr: &str) -> Option<Value> {
        match format.get("type").and_then(Value::as_str) {
            Some("text") => None,
            Some("json_object") => Some(serde_json::json!({"type": "object"})),
            Some("json_schema") => {
                let schema = format
                    .pointer("/json_schema/schema")
                    .filter(|s| s.is_object());
                if schema.is_none() {
                    self.diags.push(
                        Diagnostic::error(ptr, "a json_schema response format needs `json_schema.schema`")
                            .hint("response_format: {type: json_schema, json_schema: {name: answer, schema: {type: object, ...}}}"),
                    );
                }
                schema.cloned()
            }
            _ => {
                self.diags.push(
                    Diagnostic::error(
                        ptr,
                        "response_format is {type: text | json_object | json_schema}",
                    )
                    .hint("response_format: {type: json_object}"),
                );
                None
            }
        }
    }

    /// `tools`, `tool_choice` and `max_tool_rounds` of `llm.tools`. Each tool becomes a
    /// sub-flow running its `action` with the model's arguments as `with:`.
    fn tools(
        &mut self,
        with: &serde_json::Map<String, Value>,
        wptr: &str,
        node: &str,
        spec: &mut LlmSpec,
    ) {
        spec.max_tool_rounds = DEFAULT_TOOL_ROUNDS;
        if let Some(n) = with.get("max_tool_rounds") {
            match n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n >= 1)
            {
                Some(n) => spec.max_tool_rounds = n,
                None => self.diags.push(Diagnostic::error(
                    format!("{wptr}/max_tool_rounds"),
                    "max_tool_rounds is a whole number of at least 1",
                )),
            }
        }
        let Some(tools) = with
            .get("tools")
            .and_then(Value::as_array)
            .filter(|t| !t.is_empty())
        else {
            self.diags.push(
                Diagnostic::error(format!("{wptr}/tools"), "llm.tools needs `tools`, a non-empty list")
                    .hint("tools: [{name: fetch, description: \"...\", parameters: {url: {type: string, required: true}}, action: http.get}]"),
            );
            return;
        };
        for (i, tool) in tools.iter().enumerate() {
            if let Some(t) = self.tool(tool, &format!("{wptr}/tools/{i}"), node) {
                if spec.tools.iter().any(|known| known.name == t.name) {
                    self.diags.push(Diagnostic::error(
                        format!("{wptr}/tools/{i}/name"),
                        format!("two tools are named `{}`", t.name),
                    ));
                }
                spec.tools.push(t);
            }
        }
        match with.get("tool_choice") {
            None => {}
            Some(Value::String(c)) if c == "auto" => {}
            // The model is offered no tool, so it answers directly.
            Some(Value::String(c)) if c == "none" => spec.tools.clear(),
            // The first turn must call the named tool.
            Some(Value::String(c)) if spec.tools.iter().any(|t| &t.name == c) => {
                spec.tool_choice = Some(c.clone())
            }
            Some(other) => {
                let names: Vec<&str> = spec.tools.iter().map(|t| t.name.as_str()).collect();
                let d = Diagnostic::error(
                    format!("{wptr}/tool_choice"),
                    format!(
                        "tool_choice `{}` is not auto, none or a tool's name",
                        other
                            .as_str()
                            .map_or_else(|| other.to_string(), str::to_owned)
                    ),
                );
                let choices = ["auto", "none"].into_iter().chain(names.iter().copied());
                let listed = choices.clone().collect::<Vec<_>>().join(", ");
                self.diags.push(d.hint_closest(
                    other.as_str().unwrap_or(""),
                    choices,
                    format!("one of: {listed}"),
                ));
            }
        }
    }

    /// One `{name, description, parameters, action}` of `llm.tools`.
    fn tool(&mut self, tool: &Value, ptr: &str, node: &str) -> Option<ToolSpec> {
        const KEYS: &[&str] = &["name", "description", "parameters", "action"];
        let Some(t) = tool.as_object() else {
            self.diags.push(Diagnostic::error(
                ptr,
                "a tool is {name, description, parameters, action}",
            ));
            return None;
        };
        for key in t.keys().filter(|k| !KEYS.contains(&k.as_str())) {
            let d = Diagnostic::error(
                weft_core::validate::child_pointer(ptr, key),
                format!("a tool has no field `{key}`"),
            );
            self.diags.push(d.hint_closest(
                key,
                KEYS.iter().copied(),
                format!("its fields: {}", KEYS.join(", ")),
            ));
        }
        let name = t
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty());
        let Some(name) = name else {
            self.diags.push(Diagnostic::error(
                format!("{ptr}/name"),
                "a tool needs a `name`",
            ));
            return None;
        };
        let action = t.get("action").and_then(Value::as_str);
        let action = match action {
            Some(a) if BUILTIN.contains(&a) => a,
            _ => {
                let d = Diagnostic::error(
                    format!("{ptr}/action"),
                    match action {
                        Some(a) => format!(
                            "the tool `{name}` runs `{a}`, which is not an action Weft runs"
                        ),
                        None => format!(
                            "the tool `{name}` needs an `action` to run when the model calls it"
                        ),
                    },
                );
                self.diags.push(d.hint_closest(
                    action.unwrap_or(""),
                    BUILTIN.iter().copied(),
                    format!("a tool runs one of: {}", BUILTIN.join(", ")),
                ));
                return None;
            }
        };
        let parameters = self.tool_parameters(t.get("parameters"), &format!("{ptr}/parameters"))?;
        let flow_name = format!("{node}.tool.{name}");
        let mut run = Block::new(BlockKind::Action(ActionSpec {
            uses: action.to_owned(),
            params: Some(ValueTemplate(Value::from("{{ input }}"))),
        }));
        run.id = Some(name.to_owned());
        self.flows
            .insert(flow_name.clone(), Flow::new(flow_name.clone(), run));
        Some(ToolSpec {
            name: name.to_owned(),
            description: t
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
            parameters,
            flow: flow_name,
        })
    }

    /// The Edge Agent's `{arg: {type, description?, required?, enum?}}` as a JSON Schema.
    fn tool_parameters(&mut self, parameters: Option<&Value>, ptr: &str) -> Option<Value> {
        let mut properties = serde_json::Map::new();
        let mut required = Vec::new();
        let empty = serde_json::Map::new();
        let Some(params) = parameters.map_or(Some(&empty), Value::as_object) else {
            self.diags.push(
                Diagnostic::error(
                    ptr,
                    "parameters is a map of argument name to {type, description, required}",
                )
                .hint("parameters: {url: {type: string, required: true}}"),
            );
            return None;
        };
        for (arg, p) in params {
            let Some(p) = p.as_object() else {
                self.diags.push(Diagnostic::error(
                    weft_core::validate::child_pointer(ptr, arg),
                    format!("the argument `{arg}` is {{type, description?, required?}}"),
                ));
                continue;
            };
            let mut schema = p.clone();
            match schema.remove("required") {
                None | Some(Value::Bool(false)) => {}
                Some(Value::Bool(true)) => required.push(Value::from(arg.as_str())),
                Some(_) => self.diags.push(Diagnostic::error(
                    format!("{}/required", weft_core::validate::child_pointer(ptr, arg)),
                    "required is true or false",
                )),
            }
            properties.insert(arg.clone(), Value::Object(schema));
        }
        Some(serde_json::json!({
            "type": "object",
            "properties": properties,
            "required": required,
        }))
    }

    /// A model id that templates choose when the node runs: `provider/model` of the two
    /// (each a constant or a template). An `api_base` needs a model known when the flow
    /// loads (it becomes a flow model alias), so with one it is refused.
    fn model_at_run_time(
        &mut self,
        model: &str,
        with: &serde_json::Map<String, Value>,
        wptr: &str,
    ) -> Option<String> {
        if with.get("api_base").is_some() {
            self.diags.push(
                Diagnostic::error(
                    format!("{wptr}/model"),
                    "a model chosen when the node runs cannot go to an `api_base`",
                )
                .hint("name the model, or drop `api_base` and pick a provider Weft knows (ollama, openai, ...)"),
            );
            return None;
        }
        let provider = with.get("provider").and_then(Value::as_str);
        let provider = provider.map(|p| self.constant(p).unwrap_or_else(|| p.to_owned()));
        Some(match provider {
            Some(p) => format!("{p}/{model}"),
            None => model.to_owned(),
        })
    }

    /// The model id for `with:`: `model` (a constant, or `{{ variables.NAME }}`), routed
    /// by `provider` and `api_base` through a flow model alias when they are given.
    pub(super) fn model_of(
        &mut self,
        with: &serde_json::Map<String, Value>,
        wptr: &str,
        node: &str,
    ) -> Option<String> {
        let model = match with.get("model") {
            None => None,
            Some(Value::String(m)) => match self.constant(m) {
                Some(m) => Some(m),
                // TEA reads `{{ env.NAME }}` from its process's environment; Weft does
                // not let a file read the environment, so, as for a `${NAME}` setting,
                // the default model (`--model`, `WEFT_MODEL`) applies.
                None if m.trim_start_matches(['{', ' ']).starts_with("env.") => {
                    self.diags.push(Diagnostic::warning(
                        format!("{wptr}/model"),
                        format!("the model `{m}` reads the environment; Weft uses its default model (`--model`, `WEFT_MODEL`) instead"),
                    ));
                    None
                }
                // A template of the state or input: the engine chooses the model when
                // the node runs.
                None => return self.model_at_run_time(m, with, wptr),
            },
            Some(_) => {
                self.diags.push(Diagnostic::error(
                    format!("{wptr}/model"),
                    "model is a string",
                ));
                return None;
            }
        };
        let provider = with.get("provider").and_then(Value::as_str);
        let api_base = with.get("api_base").and_then(Value::as_str);
        if let Some(p) = provider.filter(|p| p.contains("{{"))
            && self.constant(p).is_none()
        {
            let model = model.unwrap_or_default();
            return self.model_at_run_time(&model, with, wptr);
        }
        if provider.is_none() && api_base.is_none() {
            return model;
        }
        let provider = provider.unwrap_or("openai").to_owned();
        let mut def = ModelDef {
            provider,
            model: model.map(|m| m.split_once('/').map_or(m.clone(), |(_, n)| n.to_owned())),
            options: Default::default(),
        };
        if let Some(base) = api_base {
            def.options.insert("base_url".into(), Value::from(base));
        }
        let alias = format!("{node}.model");
        self.models.insert(alias.clone(), def);
        Some(alias)
    }

    /// One model call of a reasoning pattern: `system` and `prompt`, on `model`, with
    /// the pattern's sampling and routing options.
    pub(super) fn model_turn(
        &mut self,
        uses: &str,
        with: &Map<String, Value>,
        (system, prompt): (String, String),
        model: Option<&Value>,
        (ptr, node): (&str, &str),
    ) -> Option<Block> {
        let mut call = Map::new();
        call.insert("system".into(), Value::from(system));
        call.insert("prompt".into(), Value::from(prompt));
        if let Some(model) = model {
            call.insert("model".into(), model.clone());
        }
        for key in ["provider", "api_base", "temperature", "max_tokens"] {
            if let Some(v) = with.get(key) {
                call.insert(key.into(), v.clone());
            }
        }
        self.llm_call(uses, Some(&Value::Object(call)), ptr, node)
    }

    /// The model a pattern's result names where no answer of that model is at hand (it
    /// is set before the first call, or the call may never be made): the one the file
    /// names when it is a constant, else the one that answered. After a call,
    /// `{{ input.model }}` is the same.
    pub(super) fn reported_model(&self, model: Option<&Value>) -> Value {
        model
            .and_then(Value::as_str)
            .and_then(|m| self.constant(m))
            .map_or_else(|| Value::from("{{ input.model }}"), Value::from)
    }
}
