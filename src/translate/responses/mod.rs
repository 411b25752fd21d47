//! OpenAI Responses: requests read and written, answers read and written.

mod answer;
mod request;
mod tools;

pub(super) use answer::{finish_of, read_answer, status_of, usage_json, write_answer};
pub(super) use request::{read_request, write_request};
