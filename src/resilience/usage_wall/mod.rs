//! Claude subscription (OAuth) accounts at their usage wall: the low-priority lane that keeps
//! an account served at lower priority, and the weekly limit reset that lifts the wall once a
//! week. Both are opt-in per connection and never seen by the client: the request goes to the
//! same account again. Wire contract and constants: `../shared/reference/behaviour-spec.md`
//! §15. State machines only here (plain data, manual clock); the request path drives them.

pub mod headers;
pub mod lane;
pub mod reset;
pub mod walls;

#[cfg(test)]
mod reset_tests;
#[cfg(test)]
mod tests;
