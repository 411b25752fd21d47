//! Google Gemini `generateContent`: requests written, answers read (clients do not speak it).

mod answer;
mod request;

pub(super) use answer::{finish_of, read_answer};
pub(super) use request::write_request;
