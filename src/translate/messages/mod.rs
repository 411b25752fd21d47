//! Anthropic Messages: requests read and written, answers read and written.

mod answer;
mod read;
mod write;

pub(super) use answer::{read_answer, write_answer};
pub(super) use read::read_request;
pub(super) use write::write_request;
