//! OpenAI Chat Completions: requests read and written, answers read and written.

mod answer;
mod read;
mod write;

pub(super) use answer::{finish_of, finish_str, read_answer, usage_out, write_answer};
pub(super) use read::read_request;
pub(super) use write::write_request;
