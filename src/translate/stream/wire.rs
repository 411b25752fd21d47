//! The provider events' fields the stream translator reads, typed and borrowed from the event's
//! bytes: serde skips everything else without building it, and a string is copied only when it
//! holds an escape. (A `serde_json::Value` per event cost a third of a translated stream's
//! instructions: a map per object, a string per key.)

use serde::de::{Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;

type Text<'a> = Option<Cow<'a, str>>;

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

// ---- Chat Completions chunks ----

#[derive(serde::Deserialize)]
pub struct ChatChunk<'a> {
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub model: Text<'a>,
    #[serde(borrow, default)]
    pub choices: Option<Few<ChatChoice<'a>, 1>>,
    #[serde(default)]
    pub usage: Option<ChatUsage>,
    #[serde(borrow, default)]
    pub error: Option<ErrorObj<'a>>,
}

#[derive(serde::Deserialize)]
pub struct ChatChoice<'a> {
    #[serde(borrow, default)]
    pub delta: Option<ChatDelta<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct ChatDelta<'a> {
    #[serde(borrow, default)]
    pub content: Text<'a>,
    #[serde(borrow, default)]
    pub reasoning_content: Text<'a>,
    #[serde(borrow, default)]
    pub tool_calls: Option<Few<ChatToolDelta<'a>, 8>>,
}

#[derive(serde::Deserialize)]
pub struct ChatToolDelta<'a> {
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub function: Option<ChatFunction<'a>>,
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

// ---- Anthropic Messages events ----

#[derive(serde::Deserialize)]
pub struct AnthEvent<'a> {
    #[serde(borrow, rename = "type", default)]
    pub kind: Text<'a>,
    #[serde(default)]
    pub index: Option<u64>,
    #[serde(borrow, default)]
    pub message: Option<AnthMessage<'a>>,
    #[serde(borrow, default)]
    pub content_block: Option<AnthBlock<'a>>,
    #[serde(borrow, default)]
    pub delta: Option<AnthDelta<'a>>,
    #[serde(default)]
    pub usage: Option<AnthUsage>,
    #[serde(borrow, default)]
    pub error: Option<ErrorObj<'a>>,
}

#[derive(serde::Deserialize)]
pub struct AnthMessage<'a> {
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub model: Text<'a>,
    #[serde(default)]
    pub usage: Option<AnthUsage>,
}

#[derive(serde::Deserialize)]
pub struct AnthBlock<'a> {
    #[serde(borrow, rename = "type", default)]
    pub kind: Text<'a>,
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub name: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct AnthDelta<'a> {
    #[serde(borrow, rename = "type", default)]
    pub kind: Text<'a>,
    #[serde(borrow, default)]
    pub text: Text<'a>,
    #[serde(borrow, default)]
    pub thinking: Text<'a>,
    #[serde(borrow, default)]
    pub partial_json: Text<'a>,
    #[serde(borrow, default)]
    pub stop_reason: Text<'a>,
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

// ---- Responses events ----

#[derive(serde::Deserialize)]
pub struct RespEvent<'a> {
    #[serde(borrow, rename = "type", default)]
    pub kind: Text<'a>,
    #[serde(default)]
    pub output_index: Option<u64>,
    #[serde(borrow, default)]
    pub delta: Text<'a>,
    #[serde(borrow, default)]
    pub item: Option<RespItem<'a>>,
    #[serde(borrow, default)]
    pub response: Option<RespResponse<'a>>,
    #[serde(borrow, default)]
    pub message: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct RespItem<'a> {
    #[serde(borrow, rename = "type", default)]
    pub kind: Text<'a>,
    #[serde(borrow, default)]
    pub call_id: Text<'a>,
    #[serde(borrow, default)]
    pub name: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct RespResponse<'a> {
    #[serde(borrow, default)]
    pub id: Text<'a>,
    #[serde(borrow, default)]
    pub model: Text<'a>,
    #[serde(borrow, default)]
    pub status: Text<'a>,
    #[serde(borrow, default)]
    pub incomplete_details: Option<RespIncomplete<'a>>,
    #[serde(default)]
    pub usage: Option<RespUsage>,
    #[serde(borrow, default)]
    pub error: Option<ErrorObj<'a>>,
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

// ---- Gemini frames ----

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GemFrame<'a> {
    #[serde(borrow, default)]
    pub candidates: Option<Few<GemCandidate<'a>, 1>>,
    #[serde(default)]
    pub usage_metadata: Option<GemUsage>,
    #[serde(borrow, default)]
    pub model_version: Text<'a>,
    #[serde(borrow, default)]
    pub response_id: Text<'a>,
    #[serde(borrow, default)]
    pub error: Option<ErrorObj<'a>>,
}

#[derive(serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GemCandidate<'a> {
    #[serde(borrow, default)]
    pub content: Option<GemContent<'a>>,
    #[serde(borrow, default)]
    pub finish_reason: Text<'a>,
}

#[derive(serde::Deserialize)]
pub struct GemContent<'a> {
    #[serde(borrow, default)]
    pub parts: Option<Few<GemPart<'a>, 16>>,
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
