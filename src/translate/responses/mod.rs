//! OpenAI Responses: requests read and written, answers read and written.

mod answer;
mod request;

pub(super) use answer::{read_answer, write_answer};
pub(super) use request::{read_request, write_request};
