//! A request served by a provider of another API than the client's (a fallback across
//! providers): which API each target takes, the client's request read once into the neutral
//! form and written for each target, and what the client is told of it. Pass-through requests
//! never come here: a route without a target of another API builds nothing.

use super::ir::Conversation;
use super::{Api, Cannot, Unreadable};
use crate::dialect::{Dialect, Endpoint};
use crate::translate;
use bytes::Bytes;

/// The API a provider of `dialect` takes for a client of `endpoint`, where it is not the
/// client's own (then the request is translated); `None`: the same API, passed through.
pub fn target_api(endpoint: Endpoint, dialect: Dialect) -> Option<Api> {
    let client = Api::of_endpoint(endpoint)?;
    let target = match (client, dialect) {
        (_, Dialect::Gemini) => Api::Gemini,
        (Api::Messages, Dialect::OpenAi) => Api::Chat,
        (Api::Chat | Api::Responses, Dialect::Anthropic) => Api::Messages,
        _ => return None,
    };
    Some(target)
}

/// The default answer cap for a provider that requires one (Anthropic) when the client set none.
const DEFAULT_MAX_TOKENS: u64 = 4096;

/// A request's translation state, built once when its route reaches a target of another API.
pub struct Session {
    pub client: Api,
    /// The client's request in the neutral form, or why it does not read as its API says.
    conv: Result<Conversation, Unreadable>,
    /// Per target API (`Api as usize`): the request written for its first target (the model
    /// named), or why it cannot take it. The first attempt there sends these bytes.
    verdicts: [Option<Result<(String, translate::Written), Cannot>>; 4],
    /// The attempt in flight is translated: for this API, these parameters dropped.
    pub current: Option<(Api, Vec<String>)>,
    /// A translated JSON answer, read whole and written for the client before the commit, and
    /// whether the provider's body ended cleanly (its connection may serve again).
    pub answer: Option<(Bytes, bool)>,
}

impl Session {
    /// The client's request read once, and judged for each target API it may go to (written
    /// for the first target of each, `(api, model)`).
    pub fn new<'m>(
        client: Api,
        body: &[u8],
        targets: impl IntoIterator<Item = (Api, &'m str)>,
    ) -> Session {
        let conv = translate::read(client, body);
        let mut verdicts: [Option<Result<(String, translate::Written), Cannot>>; 4] =
            Default::default();
        for (api, model) in targets {
            verdicts[api as usize].get_or_insert_with(|| match &conv {
                Ok(c) => translate::write(api, c, target(model)).map(|w| (model.to_string(), w)),
                Err(e) => Err(Cannot {
                    what: "body".into(),
                    why: unreadable_why(e),
                }),
            });
        }
        Session {
            client,
            conv,
            verdicts,
            current: None,
            answer: None,
        }
    }

    /// Whether a target of `api` can take the request.
    pub fn admits(&self, api: Api) -> bool {
        matches!(self.verdicts[api as usize], Some(Ok(_)))
    }

    /// The request written for a target of `api` serving `model`; remembered as the attempt's.
    pub fn body_for(&mut self, api: Api, model: &str) -> Result<Bytes, Cannot> {
        if let Some(Ok((m, w))) = &self.verdicts[api as usize]
            && m == model
        {
            self.current = Some((api, w.dropped.clone()));
            return Ok(Bytes::copy_from_slice(&w.body));
        }
        let conv = self.conv.as_ref().map_err(|e| Cannot {
            what: "body".into(),
            why: unreadable_why(e),
        })?;
        let w = translate::write(api, conv, target(model))?;
        self.current = Some((api, w.dropped));
        Ok(Bytes::from(w.body))
    }

    /// The model the client named.
    pub fn client_model(&self) -> &str {
        self.conv.as_ref().map_or("", |c| c.model.as_str())
    }

    /// The client's own names for its tools (for the calls written back to it).
    pub fn client_tools(&self) -> &crate::translate::ir::ClientTools {
        static NONE: crate::translate::ir::ClientTools = crate::translate::ir::ClientTools::NONE;
        self.conv.as_ref().map_or(&NONE, |c| &c.client_tools)
    }

    /// Whether the client asked a Chat stream for its usage chunk.
    pub fn include_usage(&self) -> bool {
        self.conv.as_ref().is_ok_and(|c| c.include_usage)
    }
}

fn target(model: &str) -> translate::TargetModel<'_> {
    translate::TargetModel {
        model,
        default_max_tokens: DEFAULT_MAX_TOKENS,
    }
}

fn unreadable_why(_: &Unreadable) -> &'static str {
    "the request does not read as its API says"
}

/// `x-ringside-translated` and `x-ringside-dropped` for an answer of a translated attempt.
pub fn headers(t: &Session) -> Vec<(&'static str, String)> {
    let Some((api, dropped)) = &t.current else {
        return Vec::new();
    };
    let mut h = vec![(
        "x-ringside-translated",
        format!("{}->{}", t.client.as_str(), api.as_str()),
    )];
    if !dropped.is_empty() {
        h.push((
            "x-ringside-dropped",
            translate::policy::dropped_header(dropped),
        ));
    }
    h
}

/// Ringside's code for a provider's error status, when its answer is translated.
pub fn error_code(status: u16) -> &'static str {
    match status {
        400 | 422 => "upstream_invalid_request",
        401 => "upstream_unauthorized",
        403 => "upstream_forbidden",
        404 => "upstream_not_found",
        413 => "request_too_large",
        429 => "upstream_rate_limited",
        529 => "upstream_overloaded",
        _ => "upstream_error",
    }
}
