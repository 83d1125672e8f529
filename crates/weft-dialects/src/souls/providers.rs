//! The providers a runsight project configures, `custom/providers/<id>.yaml` (its
//! `type`, `base_url` and `api_key: ${VARIABLE}`): a soul's `provider` that names one
//! reaches that endpoint, as a model alias of the flow (`<provider>/<model_name>`).

use super::Compiler;
use indexmap::IndexMap;
use serde::Deserialize;
use serde_json::Value;
use weft_core::Diagnostic;
use weft_core::ir::ModelDef;

/// `custom/providers/<id>.yaml`.
#[derive(Debug, Deserialize)]
struct ProviderFile {
    id: String,
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    api_key: Option<String>,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    is_active: Option<bool>,
}

/// runsight's provider types and the wire Weft speaks to each; the OpenAI-compatible
/// ones need the provider's `base_url`.
const TYPES: &[(&str, &str)] = &[
    ("openai", "openai"),
    ("anthropic", "anthropic"),
    ("google", "gemini"),
    ("gemini", "gemini"),
    ("ollama", "ollama"),
    ("azure_openai", "openai"),
    ("groq", "openai"),
    ("together", "openai"),
    ("mistral", "openai"),
    ("custom", "openai"),
];

impl Compiler<'_> {
    /// The model id of a soul's `provider` and `model_name`: an alias of the project's
    /// provider file when there is one (registered in the flow's models), else
    /// `provider/model`.
    pub(super) fn provider_model(&mut self, provider: &str, model: &str, ptr: &str) -> String {
        let id = format!("{provider}/{model}");
        if self.models.contains_key(&id) || !super::is_file_id(provider) {
            return id;
        }
        let Some((path, text)) = self.project_file("providers", provider).1 else {
            return id;
        };
        let what = format!("the provider file for `{provider}`");
        let Some(file) = self.read_project_file::<ProviderFile>(&path, &text, &what, ptr) else {
            return id;
        };
        let Some(wire) = TYPES.iter().find(|(t, _)| *t == file.kind).map(|(_, w)| *w) else {
            let d = Diagnostic::error(
                ptr,
                format!(
                    "{}: Weft cannot reach a provider of type `{}`",
                    path.display(),
                    file.kind
                ),
            );
            self.diags.push(d.hint_closest(
                &file.kind,
                TYPES.iter().map(|(t, _)| *t),
                "Weft speaks openai (and compatible servers), anthropic, google and ollama",
            ));
            return id;
        };
        let problem = if file.id != provider {
            Some(format!("{} says its id is `{}`", path.display(), file.id))
        } else if file.is_active == Some(false) {
            Some(format!(
                "the provider `{provider}` is disabled ({})",
                path.display()
            ))
        } else {
            None
        };
        if let Some(p) = problem {
            self.diags.push(Diagnostic::error(ptr, p));
            return id;
        }
        let mut options = IndexMap::new();
        if let Some(url) = file.base_url.filter(|u| !u.trim().is_empty()) {
            options.insert("base_url".to_owned(), Value::from(url));
        }
        match file.api_key.as_deref().map(str::trim) {
            Some(key) if key.starts_with("${") && key.ends_with('}') => {
                options.insert(
                    "api_key_env".to_owned(),
                    Value::from(&key[2..key.len() - 1]),
                );
            }
            Some("") | None => {}
            Some(_) => self.diags.push(
                Diagnostic::warning(
                    ptr,
                    format!(
                        "{}: Weft does not read a key written in the file; it reads the provider's variable",
                        path.display()
                    ),
                )
                .hint("api_key: ${MY_PROVIDER_KEY}"),
            ),
        }
        self.models.insert(
            id.clone(),
            ModelDef {
                provider: wire.to_owned(),
                model: Some(model.to_owned()),
                options,
            },
        );
        id
    }
}
