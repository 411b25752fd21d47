//! The provider events' fields the stream translator reads, typed and borrowed from the event's
//! bytes: serde skips everything else without building it, and a string is copied only when it
//! holds an escape. (A `serde_json::Value` per event cost a third of a translated stream's
//! instructions: a map per object, a string per key.)

pub use crate::translate::wire::{
    AnthUsage, ChatFunction, ChatUsage, ErrorObj, Few, GemPart, GemUsage, RespIncomplete,
    RespUsage, Text,
};

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
