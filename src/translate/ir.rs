//! The neutral form every dialect is read into and written from: a conversation (the request),
//! an answer (a whole response) and the stream's events. It holds what at least two APIs can
//! say; what only one can say travels as a named parameter, so that a writer that has no place
//! for it refuses or drops it by name (policy), never silently.

use serde_json::Value;

/// Who speaks a turn. Tool results are the user's (as in Anthropic and Gemini): a Chat `tool`
/// message or a Responses `function_call_output` becomes a result block in a user turn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    User,
    Assistant,
}

/// An image given inline or by address.
#[derive(Clone, Debug, PartialEq)]
pub enum Image {
    Url { url: String, detail: Option<String> },
    Inline { media_type: String, data: String },
}

impl Image {
    /// A `data:<mime>;base64,<data>` address is inline data; anything else is an address.
    pub fn from_url(url: &str, detail: Option<String>) -> Image {
        if let Some(rest) = url.strip_prefix("data:")
            && let Some((meta, data)) = rest.split_once(',')
            && let Some(mime) = meta.strip_suffix(";base64")
        {
            return Image::Inline {
                media_type: mime.to_string(),
                data: data.to_string(),
            };
        }
        Image::Url {
            url: url.to_string(),
            detail,
        }
    }

    /// As one address (a data URL for inline bytes), for the OpenAI APIs.
    pub fn as_url(&self) -> String {
        match self {
            Image::Url { url, .. } => url.clone(),
            Image::Inline { media_type, data } => format!("data:{media_type};base64,{data}"),
        }
    }
}

/// One piece of a turn.
#[derive(Clone, Debug, PartialEq)]
pub enum Block {
    Text(String),
    Image(Image),
    /// A call the assistant made; `arguments` is JSON text (an object).
    ToolCall {
        id: String,
        name: String,
        arguments: String,
    },
    /// The answer to a call, by the call's id.
    ToolResult {
        id: String,
        content: Vec<Block>,
        is_error: bool,
    },
    /// The model's reasoning as the provider showed it; `signature` binds it to that provider
    /// (only the same provider can take it back).
    Thinking {
        text: String,
        signature: Option<String>,
    },
}

#[derive(Clone, Debug, PartialEq)]
pub struct Turn {
    pub role: Role,
    pub blocks: Vec<Block>,
}

/// A function the model may call; `parameters` is its JSON Schema.
#[derive(Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    pub description: Option<String>,
    pub parameters: Value,
    pub strict: Option<bool>,
}

/// The argument a free-form tool (Responses' `custom` tools) takes where the provider has only
/// functions: the text, as a function's one string argument.
pub const FREE_FORM_ARG: &str = "input";

/// How the client named its tools where the neutral names differ, so that its calls come back
/// in its own terms: free-form (`custom`) tools, which other providers see as a function of one
/// string (`FREE_FORM_ARG`), and tools in a namespace, which they see as `namespace__name`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ClientTools {
    /// Neutral names of the free-form tools.
    pub free_form: Vec<String>,
    /// (neutral name, namespace, name in the namespace)
    pub namespaced: Vec<(String, String, String)>,
}

impl ClientTools {
    pub const NONE: ClientTools = ClientTools {
        free_form: Vec::new(),
        namespaced: Vec::new(),
    };

    pub fn is_free_form(&self, name: &str) -> bool {
        self.free_form.iter().any(|n| n == name)
    }

    /// The client's namespace (if any) and name for a neutral tool name.
    pub fn client_name<'a>(&'a self, name: &'a str) -> (Option<&'a str>, &'a str) {
        match self.namespaced.iter().find(|(n, _, _)| n == name) {
            Some((_, ns, inner)) => (Some(ns), inner),
            None => (None, name),
        }
    }

    /// The neutral name of `name` in namespace `ns` (the default namespace, `functions`, adds
    /// nothing).
    pub fn neutral_name(ns: Option<&str>, name: &str) -> String {
        match ns {
            None | Some("" | "functions") => name.to_string(),
            Some(ns) => format!("{ns}__{name}"),
        }
    }

    /// The text of a free-form call from its neutral arguments (`{"input": "..."}`).
    pub fn free_form_input(arguments: &str) -> String {
        serde_json::from_str::<Value>(arguments)
            .ok()
            .and_then(|v| {
                v.get(FREE_FORM_ARG)
                    .and_then(Value::as_str)
                    .map(str::to_string)
            })
            .unwrap_or_default()
    }
}

#[derive(Clone, Debug, PartialEq)]
pub enum ToolChoice {
    Auto,
    /// Some tool must be called.
    Required,
    None,
    Named(String),
}

/// What shape the answer's text must have.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputFormat {
    JsonObject,
    JsonSchema {
        name: String,
        schema: Value,
        strict: Option<bool>,
    },
}

/// How hard the model should think, as the client said it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reasoning {
    Off,
    /// OpenAI's words: minimal, low, medium, high.
    Effort(Effort),
    /// Anthropic's and Gemini's: a token budget.
    Budget(u64),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Effort {
    Minimal,
    Low,
    Medium,
    High,
}

impl Effort {
    pub fn parse(s: &str) -> Option<Effort> {
        Some(match s {
            "minimal" | "none" => Effort::Minimal,
            "low" => Effort::Low,
            "medium" => Effort::Medium,
            "high" | "xhigh" | "max" => Effort::High,
            _ => return None,
        })
    }
    pub fn as_str(self) -> &'static str {
        match self {
            Effort::Minimal => "minimal",
            Effort::Low => "low",
            Effort::Medium => "medium",
            Effort::High => "high",
        }
    }
    /// The budget an effort stands for where the provider takes tokens (Anthropic's floor is
    /// 1,024).
    pub fn budget(self) -> u64 {
        match self {
            Effort::Minimal | Effort::Low => 1024,
            Effort::Medium => 4096,
            Effort::High => 16384,
        }
    }
    /// The effort a budget stands for where the provider takes words.
    pub fn of_budget(budget: u64) -> Effort {
        match budget {
            0..=2047 => Effort::Low,
            2048..=8191 => Effort::Medium,
            _ => Effort::High,
        }
    }
}

impl Reasoning {
    pub fn budget(self) -> Option<u64> {
        match self {
            Reasoning::Off => None,
            Reasoning::Effort(e) => Some(e.budget()),
            Reasoning::Budget(b) => Some(b),
        }
    }
    pub fn effort(self) -> Option<Effort> {
        match self {
            Reasoning::Off => None,
            Reasoning::Effort(e) => Some(e),
            Reasoning::Budget(b) => Some(Effort::of_budget(b)),
        }
    }
}

/// A request in the neutral form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conversation {
    /// The model the client named (its answer names it back).
    pub model: String,
    /// System and developer instructions, in order.
    pub system: Vec<String>,
    pub turns: Vec<Turn>,
    pub tools: Vec<Tool>,
    pub tool_choice: Option<ToolChoice>,
    /// `Some(false)`: at most one call per turn.
    pub parallel_tool_calls: Option<bool>,
    pub max_tokens: Option<u64>,
    pub temperature: Option<f64>,
    pub top_p: Option<f64>,
    pub stop: Vec<String>,
    pub output: Option<OutputFormat>,
    pub reasoning: Option<Reasoning>,
    /// The end user, for the provider's abuse tracking.
    pub user: Option<String>,
    pub stream: bool,
    /// A Chat client asked for the usage chunk at the stream's end (`stream_options`).
    pub include_usage: bool,
    /// The client's own names for its tools, where they differ from the neutral ones.
    pub client_tools: ClientTools,
    /// Parameters some APIs have and others do not (`seed`, `top_k`, `n`, ...), with the
    /// client's value: a writer takes those it has a place for, and the policy decides for the
    /// rest.
    pub params: Vec<(String, Value)>,
}

impl Conversation {
    /// Consecutive turns of one speaker are one turn (tool results after the call, then the
    /// user's words: what Anthropic and Gemini require).
    pub fn push(&mut self, role: Role, blocks: Vec<Block>) {
        match self.turns.last_mut() {
            Some(t) if t.role == role => t.blocks.extend(blocks),
            _ => self.turns.push(Turn { role, blocks }),
        }
    }

    pub fn param(&self, name: &str) -> Option<&Value> {
        self.params.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }

    /// The name of the function a call id was made to (Gemini's results name the function).
    pub fn call_name(&self, id: &str) -> Option<&str> {
        self.turns
            .iter()
            .flat_map(|t| &t.blocks)
            .find_map(|b| match b {
                Block::ToolCall { id: i, name, .. } if i == id => Some(name.as_str()),
                _ => None,
            })
    }
}

/// A tool result's content as text (for APIs whose results take text; an error is said so).
pub fn result_text(content: &[Block], is_error: bool) -> String {
    let mut s = String::new();
    if is_error {
        s.push_str("Error: ");
    }
    for b in content {
        if let Block::Text(t) = b {
            s.push_str(t);
        }
    }
    s
}

/// Why an answer ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Finish {
    /// The model finished (or met a stop sequence).
    Stop,
    /// The output cap was reached.
    Length,
    /// The model called tools and waits for their results.
    ToolCalls,
    /// The provider's filter or the model's refusal ended it.
    ContentFilter,
}

/// Tokens an answer cost. `input` counts every prompt token, cached ones included (OpenAI's
/// reckoning); `output` includes reasoning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    pub input: u64,
    pub output: u64,
    pub cache_read: u64,
    pub cache_write: u64,
    pub reasoning: u64,
}

impl Usage {
    /// Anthropic's `input_tokens`: the prompt without what was read from or written to a cache.
    pub fn uncached_input(&self) -> u64 {
        self.input
            .saturating_sub(self.cache_read + self.cache_write)
    }
}

/// A whole answer in the neutral form.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Answer {
    pub id: String,
    pub model: String,
    /// Text, tool calls and thinking, in the order the model produced them.
    pub blocks: Vec<Block>,
    pub finish: Option<Finish>,
    pub usage: Usage,
}

impl Answer {
    pub fn text(&self) -> String {
        let mut s = String::new();
        for b in &self.blocks {
            if let Block::Text(t) = b {
                s.push_str(t);
            }
        }
        s
    }
    pub fn has_tool_calls(&self) -> bool {
        self.blocks
            .iter()
            .any(|b| matches!(b, Block::ToolCall { .. }))
    }
}
