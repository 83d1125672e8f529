//! Where each cloud provider lives and how it is authenticated: default endpoints, the
//! environment variables people already set for them, and a flow's overrides
//! (`base_url`, `api_key_env` in its `models:` entry).

use genai::adapter::AdapterKind;
use weft_core::{BlockError, ErrorKind};

/// A provider Weft reaches over HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Provider {
    /// OpenAI Chat Completions, and every server that speaks it (`OPENAI_BASE_URL`).
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini `generateContent`.
    Gemini,
    /// Ollama's native `/api/chat`.
    Ollama,
}

impl Provider {
    /// The provider named `name` in a model id, if it is one of these.
    pub fn parse(name: &str) -> Option<Provider> {
        Some(match name {
            "openai" => Provider::OpenAi,
            "anthropic" => Provider::Anthropic,
            "gemini" | "google" => Provider::Gemini,
            "ollama" => Provider::Ollama,
            _ => return None,
        })
    }

    /// Its name in model ids.
    pub fn name(self) -> &'static str {
        match self {
            Provider::OpenAi => "openai",
            Provider::Anthropic => "anthropic",
            Provider::Gemini => "gemini",
            Provider::Ollama => "ollama",
        }
    }

    pub(crate) fn adapter(self) -> AdapterKind {
        match self {
            Provider::OpenAi => AdapterKind::OpenAI,
            Provider::Anthropic => AdapterKind::Anthropic,
            Provider::Gemini => AdapterKind::Gemini,
            Provider::Ollama => AdapterKind::Ollama,
        }
    }

    /// The variable holding the API key (none for Ollama).
    pub fn key_variable(self) -> Option<&'static str> {
        match self {
            Provider::OpenAi => Some("OPENAI_API_KEY"),
            Provider::Anthropic => Some("ANTHROPIC_API_KEY"),
            Provider::Gemini => Some("GEMINI_API_KEY"),
            Provider::Ollama => None,
        }
    }

    /// The variable that moves the endpoint, and what it means when unset.
    pub fn base_variable(self) -> &'static str {
        match self {
            Provider::OpenAi => "OPENAI_BASE_URL",
            Provider::Anthropic => "ANTHROPIC_BASE_URL",
            Provider::Gemini => "GEMINI_BASE_URL",
            Provider::Ollama => "OLLAMA_HOST",
        }
    }

    fn default_base(self) -> &'static str {
        match self {
            Provider::OpenAi => "https://api.openai.com/v1",
            Provider::Anthropic => "https://api.anthropic.com",
            Provider::Gemini => "https://generativelanguage.googleapis.com/v1beta",
            Provider::Ollama => "http://127.0.0.1:11434",
        }
    }

    /// The endpoint requests go to, ending in `/`, from (in order) the flow's
    /// `base_url`, the provider's variable, the default. Each provider's variable means
    /// what its own tools take it to mean: `OPENAI_BASE_URL` includes `/v1`,
    /// `ANTHROPIC_BASE_URL` does not, `OLLAMA_HOST` may be a bare `host:port`.
    pub fn endpoint(
        self,
        base_url: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<String, BlockError> {
        let raw = base_url
            .map(str::to_owned)
            .or_else(|| env(self.base_variable()).filter(|v| !v.trim().is_empty()))
            .unwrap_or_else(|| self.default_base().to_owned());
        let mut url = raw.trim().trim_end_matches('/').to_owned();
        if !url.contains("://") {
            if self == Provider::Ollama {
                url = format!("http://{url}");
            } else {
                return Err(BlockError::new(
                    ErrorKind::Config,
                    format!(
                        "the {} endpoint `{raw}` is not a URL (expected http:// or https://)",
                        self.name()
                    ),
                ));
            }
        }
        if self == Provider::Anthropic && !url.ends_with("/v1") {
            url.push_str("/v1");
        }
        // `http://host:11434/v1` is Ollama's OpenAI-compatible address, which other tools
        // (The Edge Agent among them) are given; Weft speaks Ollama's own API, at the root.
        if self == Provider::Ollama
            && let Some(root) = url.strip_suffix("/v1")
        {
            url = root.to_owned();
        }
        url.push('/');
        Ok(url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn none(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn endpoints_follow_each_providers_conventions() {
        assert_eq!(
            Provider::OpenAi.endpoint(None, &none).unwrap(),
            "https://api.openai.com/v1/"
        );
        assert_eq!(
            Provider::Anthropic.endpoint(None, &none).unwrap(),
            "https://api.anthropic.com/v1/"
        );
        let env = |k: &str| (k == "OLLAMA_HOST").then(|| "10.0.0.5:11434".to_owned());
        assert_eq!(
            Provider::Ollama.endpoint(None, &env).unwrap(),
            "http://10.0.0.5:11434/"
        );
        assert_eq!(
            Provider::Ollama
                .endpoint(Some("http://gpu-box:11434/v1/"), &none)
                .unwrap(),
            "http://gpu-box:11434/",
            "the OpenAI-compatible address names the same server"
        );
        let env =
            |k: &str| (k == "OPENAI_BASE_URL").then(|| "http://127.0.0.1:8080/v1/".to_owned());
        assert_eq!(
            Provider::OpenAi.endpoint(None, &env).unwrap(),
            "http://127.0.0.1:8080/v1/"
        );
        assert_eq!(
            Provider::OpenAi
                .endpoint(Some("http://override/v1"), &env)
                .unwrap(),
            "http://override/v1/"
        );
        assert!(
            Provider::OpenAi
                .endpoint(Some("localhost:1"), &none)
                .is_err()
        );
    }
}
