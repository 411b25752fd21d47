//! Client dialects: which API a request speaks, what it asks for, and how errors look to it.

pub mod error;
pub mod facts;
pub mod json_check;
mod json_strings;
pub mod needs;
pub mod ratelimit;
pub mod usage;

pub use error::ApiError;
pub use facts::Facts;

/// The API family a client or provider speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Dialect {
    OpenAi,
    Anthropic,
    /// Google Gemini (providers only: reached by translation).
    Gemini,
}

impl Dialect {
    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::OpenAi => "openai",
            Dialect::Anthropic => "anthropic",
            Dialect::Gemini => "gemini",
        }
    }
}

/// The data-plane endpoints Ringside serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endpoint {
    ChatCompletions,
    Completions,
    Responses,
    Embeddings,
    Messages,
    CountTokens,
    Models,
    SessionLeases,
}

impl Endpoint {
    /// Recognise a request path (query already stripped).
    pub fn from_path(path: &str) -> Option<Endpoint> {
        Some(match path.trim_end_matches('/') {
            "/v1/chat/completions" => Endpoint::ChatCompletions,
            "/v1/completions" => Endpoint::Completions,
            "/v1/responses" => Endpoint::Responses,
            "/v1/embeddings" => Endpoint::Embeddings,
            "/v1/messages" => Endpoint::Messages,
            "/v1/messages/count_tokens" => Endpoint::CountTokens,
            "/v1/models" => Endpoint::Models,
            "/v1/session-leases" => Endpoint::SessionLeases,
            // One model (`GET /v1/models/{id}`): answered from the same list.
            p if p.starts_with("/v1/models/") => Endpoint::Models,
            _ => return None,
        })
    }

    /// The endpoint's own path (what `from_path` matches, without a trailing slash).
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/v1/chat/completions",
            Endpoint::Completions => "/v1/completions",
            Endpoint::Responses => "/v1/responses",
            Endpoint::Embeddings => "/v1/embeddings",
            Endpoint::Messages => "/v1/messages",
            Endpoint::CountTokens => "/v1/messages/count_tokens",
            Endpoint::Models => "/v1/models",
            Endpoint::SessionLeases => "/v1/session-leases",
        }
    }

    pub const fn dialect(self) -> Dialect {
        match self {
            Endpoint::Messages | Endpoint::CountTokens => Dialect::Anthropic,
            _ => Dialect::OpenAi,
        }
    }

    /// The path below the provider's base URL (base URLs end at `/v1`).
    pub fn upstream_suffix(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "/chat/completions",
            Endpoint::Completions => "/completions",
            Endpoint::Responses => "/responses",
            Endpoint::Embeddings => "/embeddings",
            Endpoint::Messages => "/messages",
            Endpoint::CountTokens => "/messages/count_tokens",
            Endpoint::Models => "/models",
            Endpoint::SessionLeases => "/session-leases",
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Endpoint::ChatCompletions => "chat_completions",
            Endpoint::Completions => "completions",
            Endpoint::Responses => "responses",
            Endpoint::Embeddings => "embeddings",
            Endpoint::Messages => "messages",
            Endpoint::CountTokens => "count_tokens",
            Endpoint::Models => "models",
            Endpoint::SessionLeases => "session_leases",
        }
    }
}

/// The model id of `GET /v1/models/{id}` (percent-decoded: `oai%2Fgpt-4o` is `oai/gpt-4o`),
/// or None for the list.
pub fn model_in_path(path: &str) -> Option<String> {
    let raw = path
        .strip_prefix("/v1/models/")?
        .trim_end_matches('/')
        .as_bytes();
    if raw.is_empty() {
        return None;
    }
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match (
            raw[i],
            raw.get(i + 1).copied().and_then(hex),
            raw.get(i + 2).copied().and_then(hex),
        ) {
            (b'%', Some(h), Some(l)) => {
                out.push(h << 4 | l);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

/// The dialect of a path for error envelopes, even when the path is unknown.
pub fn dialect_for_path(path: &str) -> Dialect {
    if path.starts_with("/v1/messages") {
        Dialect::Anthropic
    } else {
        Dialect::OpenAi
    }
}

#[cfg(test)]
mod tests {
    use super::Endpoint;

    #[test]
    fn each_endpoint_is_found_by_its_own_path() {
        for e in [
            Endpoint::ChatCompletions,
            Endpoint::Completions,
            Endpoint::Responses,
            Endpoint::Embeddings,
            Endpoint::Messages,
            Endpoint::CountTokens,
            Endpoint::Models,
            Endpoint::SessionLeases,
        ] {
            assert_eq!(Endpoint::from_path(e.path()), Some(e), "{}", e.path());
        }
        assert_eq!(
            Endpoint::from_path("/v1/models/gpt-4o-mini"),
            Some(Endpoint::Models)
        );
    }

    #[test]
    fn model_ids_in_paths_are_percent_decoded() {
        assert_eq!(super::model_in_path("/v1/models"), None);
        assert_eq!(super::model_in_path("/v1/models/"), None);
        assert_eq!(
            super::model_in_path("/v1/models/gpt-4o").as_deref(),
            Some("gpt-4o")
        );
        assert_eq!(
            super::model_in_path("/v1/models/oai%2Fgpt-4o").as_deref(),
            Some("oai/gpt-4o")
        );
        assert_eq!(
            super::model_in_path("/v1/models/oai/gpt-4o/").as_deref(),
            Some("oai/gpt-4o")
        );
        // Broken escapes stay as they are; invalid UTF-8 is replaced, never a panic.
        assert_eq!(
            super::model_in_path("/v1/models/a%2").as_deref(),
            Some("a%2")
        );
        assert_eq!(
            super::model_in_path("/v1/models/a%zz").as_deref(),
            Some("a%zz")
        );
        assert_eq!(
            super::model_in_path("/v1/models/%ff").as_deref(),
            Some("\u{fffd}")
        );
    }
}
