//! The fields Ringside reads of the providers' answers and of what their answers and streams
//! share (usage, errors, function calls), typed and borrowed from the bytes: serde skips every
//! other field without building it, and a string is copied only when it holds an escape. (A
//! `serde_json::Value` builds a map per object and a string per key: most of a translated
//! answer's cost.)

use super::ir::Usage;
use serde::de::{Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;

pub type Text<'a> = Option<Cow<'a, str>>;

/// Up to `N` elements of an array, the rest skipped (a chunk carries one choice and a few tool
/// calls): no allocation.
pub struct Few<T, const N: usize> {
    items: [Option<T>; N],
}

impl<T, const N: usize> Few<T, N> {
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter().map_while(Option::as_ref)
    }
    pub fn first(&self) -> Option<&T> {
        self.items.first().and_then(Option::as_ref)
    }
}

impl<'de, T: Deserialize<'de>, const N: usize> Deserialize<'de> for Few<T, N> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V<T, const N: usize>(std::marker::PhantomData<T>);
        impl<'de, T: Deserialize<'de>, const N: usize> Visitor<'de> for V<T, N> {
            type Value = Few<T, N>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Few<T, N>, A::Error> {
                let mut items: [Option<T>; N] = std::array::from_fn(|_| None);
                for slot in &mut items {
                    match seq.next_element()? {
                        Some(x) => *slot = Some(x),
                        None => return Ok(Few { items }),
                    }
                }
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Few { items })
            }
        }
        d.deserialize_seq(V(std::marker::PhantomData))
    }
}

#[derive(serde::Deserialize)]
pub struct ErrorObj<'a> {
    #[serde(borrow, default)]
    pub message: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct ChatFunction<'a> {
    #[serde(borrow, default)]
    pub name: Text<'a>,
    #[serde(borrow, default)]
    pub arguments: Text<'a>,
}

#[derive(serde::Deserialize, Default)]
pub struct ChatUsage {
    #[serde(default)]
    pub prompt_tokens: u64,
    #[serde(default)]
    pub completion_tokens: u64,
    #[serde(default)]
    pub prompt_tokens_details: Option<CachedTokens>,
    #[serde(default)]
    pub completion_tokens_details: Option<ReasoningTokens>,
}

#[derive(serde::Deserialize, Default)]
pub struct CachedTokens {
    #[serde(default)]
    pub cached_tokens: u64,
}

#[derive(serde::Deserialize, Default)]
pub struct ReasoningTokens {
    #[serde(default)]
    pub reasoning_tokens: u64,
}

#[derive(serde::Deserialize, Default)]
pub struct AnthUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub cache_read_input_tokens: u64,
    #[serde(default)]
    pub cache_creation_input_tokens: u64,
}

#[derive(serde::Deserialize)]
pub struct RespIncomplete<'a> {
    #[serde(borrow, default)]
    pub reason: Text<'a>,
}

#[derive(serde::Deserialize, Default)]
pub struct RespUsage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    #[serde(default)]
    pub input_tokens_details: Option<CachedTokens>,
    #[serde(default)]
    pub output_tokens_details: Option<ReasoningTokens>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GemPart<'a> {
    #[serde(borrow, default)]
    pub text: Text<'a>,
    #[serde(default)]
    pub thought: Option<bool>,
    #[serde(borrow, default)]
    pub function_call: Option<GemCall<'a>>,
}

#[derive(serde::Deserialize)]
pub struct GemCall<'a> {
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub name: Text<'a>,
    #[serde(borrow, default)]
    pub args: Option<&'a RawValue>,
}

#[derive(serde::Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct GemUsage {
    #[serde(default)]
    pub prompt_token_count: u64,
    #[serde(default)]
    pub candidates_token_count: u64,
    #[serde(default)]
    pub thoughts_token_count: u64,
    #[serde(default)]
    pub cached_content_token_count: u64,
}

impl ChatUsage {
    pub fn neutral(&self) -> Usage {
        Usage {
            input: self.prompt_tokens,
            output: self.completion_tokens,
            cache_read: self
                .prompt_tokens_details
                .as_ref()
                .map_or(0, |d| d.cached_tokens),
            cache_write: 0,
            reasoning: self
                .completion_tokens_details
                .as_ref()
                .map_or(0, |d| d.reasoning_tokens),
        }
    }
}

impl AnthUsage {
    /// Anthropic's input count leaves out cache reads and writes; the neutral form counts
    /// them.
    pub fn neutral(&self) -> Usage {
        let (read, write) = (
            self.cache_read_input_tokens,
            self.cache_creation_input_tokens,
        );
        Usage {
            input: self.input_tokens + read + write,
            output: self.output_tokens,
            cache_read: read,
            cache_write: write,
            reasoning: 0,
        }
    }
}

impl RespUsage {
    pub fn neutral(&self) -> Usage {
        Usage {
            input: self.input_tokens,
            output: self.output_tokens,
            cache_read: self
                .input_tokens_details
                .as_ref()
                .map_or(0, |d| d.cached_tokens),
            cache_write: 0,
            reasoning: self
                .output_tokens_details
                .as_ref()
                .map_or(0, |d| d.reasoning_tokens),
        }
    }
}

impl GemUsage {
    /// Gemini's candidates count leaves out thoughts; the neutral form's output includes them.
    pub fn neutral(&self) -> Usage {
        Usage {
            input: self.prompt_token_count,
            output: self.candidates_token_count + self.thoughts_token_count,
            cache_read: self.cached_content_token_count,
            cache_write: 0,
            reasoning: self.thoughts_token_count,
        }
    }
}

// ---- Whole answers ----

#[derive(serde::Deserialize)]
pub struct ChatAnswer<'a> {
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub model: Text<'a>,
    #[serde(borrow, default)]
    pub choices: Option<Few<ChatAnswerChoice<'a>, 1>>,
    #[serde(default)]
    pub usage: Option<ChatUsage>,
}

#[derive(serde::Deserialize)]
pub struct ChatAnswerChoice<'a> {
    #[serde(borrow, default)]
    pub message: Option<ChatAnswerMessage<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct ChatAnswerMessage<'a> {
    #[serde(borrow, default)]
    pub content: Text<'a>,
    #[serde(borrow, default)]
    pub refusal: Text<'a>,
    #[serde(borrow, default)]
    pub reasoning_content: Text<'a>,
    #[serde(borrow, default)]
    pub tool_calls: Option<Vec<ChatAnswerCall<'a>>>,
}

#[derive(serde::Deserialize)]
pub struct ChatAnswerCall<'a> {
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub function: Option<ChatFunction<'a>>,
}

#[derive(serde::Deserialize)]
pub struct MessagesAnswer<'a> {
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub model: Text<'a>,
    #[serde(borrow, default)]
    pub content: Option<Vec<AnthAnswerBlock<'a>>>,
    #[serde(borrow, default)]
    pub stop_reason: Text<'a>,
    #[serde(default)]
    pub usage: Option<AnthUsage>,
}

#[derive(serde::Deserialize)]
pub struct AnthAnswerBlock<'a> {
    #[serde(borrow, rename = "type", default)]
    pub kind: Text<'a>,
    #[serde(borrow, default)]
    pub text: Text<'a>,
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub name: Text<'a>,
    /// A call's arguments, kept as the provider wrote them (key order included).
    #[serde(borrow, default)]
    pub input: Option<&'a RawValue>,
    #[serde(borrow, default)]
    pub thinking: Text<'a>,
    #[serde(borrow, default)]
    pub signature: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct ResponsesAnswer<'a> {
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub model: Text<'a>,
    #[serde(borrow, default)]
    pub status: Text<'a>,
    #[serde(borrow, default)]
    pub incomplete_details: Option<RespIncomplete<'a>>,
    #[serde(borrow, default)]
    pub output: Option<Vec<RespOutItem<'a>>>,
    #[serde(default)]
    pub usage: Option<RespUsage>,
}

#[derive(serde::Deserialize)]
pub struct RespOutItem<'a> {
    #[serde(borrow, rename = "type", default)]
    pub kind: Text<'a>,
    #[serde(borrow, default)]
    pub content: Option<Vec<RespOutText<'a>>>,
    #[serde(borrow, default)]
    pub summary: Option<Vec<RespOutText<'a>>>,
    #[serde(borrow, default)]
    pub call_id: Text<'a>,
    #[serde(borrow, default)]
    pub name: Text<'a>,
    #[serde(borrow, default)]
    pub arguments: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct RespOutText<'a> {
    #[serde(borrow, default)]
    pub text: Text<'a>,
    #[serde(borrow, default)]
    pub refusal: Text<'a>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GemAnswer<'a> {
    #[serde(borrow, default)]
    pub candidates: Option<Few<GemAnswerCandidate<'a>, 1>>,
    /// Present when the prompt itself was blocked.
    #[serde(borrow, default)]
    pub prompt_feedback: Option<&'a RawValue>,
    #[serde(default)]
    pub usage_metadata: Option<GemUsage>,
    #[serde(borrow, default)]
    pub model_version: Text<'a>,
    #[serde(borrow, default)]
    pub response_id: Text<'a>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GemAnswerCandidate<'a> {
    #[serde(borrow, default)]
    pub content: Option<GemAnswerContent<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct GemAnswerContent<'a> {
    #[serde(borrow, default)]
    pub parts: Option<Vec<GemPart<'a>>>,
}
