//! Google Gemini `generateContent`: requests written, answers read (clients do not speak it).

mod answer;
mod request;

pub(super) use answer::{finish_of, parts, read_answer, usage_of};
pub(super) use request::write_request;
