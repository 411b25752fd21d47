//! The eligibility contract: a fallback must preserve what the request needs (dialect, tools,
//! structured output, vision, a large enough context window, region and policy tags). Targets
//! declare what they support; unset means "not restricted".

use crate::dialect::needs::Needs;
use crate::resilience::Ineligible;

/// What a target supports.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Caps {
    pub tools: Option<bool>,
    pub vision: Option<bool>,
    pub structured_output: Option<bool>,
    pub context_window: Option<u64>,
    /// The most output the model gives in one answer.
    pub max_output: Option<u64>,
    pub region: Option<String>,
    pub tags: Vec<String>,
    pub cost: f64,
}

impl Caps {
    /// Whether the target declares any capability limit (else the body need not be scanned).
    pub fn restricts(&self) -> bool {
        self.tools == Some(false)
            || self.vision == Some(false)
            || self.structured_output == Some(false)
            || self.context_window.is_some()
            || self.max_output.is_some()
    }

    /// `Err(reason)` when the target cannot serve the request.
    pub fn admits(&self, n: &Needs) -> Result<(), Ineligible> {
        if n.tools && self.tools == Some(false) {
            return Err(Ineligible::NoToolSupport);
        }
        if n.vision && self.vision == Some(false) {
            return Err(Ineligible::NoVisionSupport);
        }
        if n.structured_output && self.structured_output == Some(false) {
            return Err(Ineligible::NoStructuredOutput);
        }
        if let Some(w) = self.context_window
            && n.context_tokens > w
        {
            return Err(Ineligible::ContextWindowTooSmall);
        }
        if let Some(m) = self.max_output
            && n.output_tokens > m
        {
            return Err(Ineligible::OutputTooLarge);
        }
        if let Some(r) = &n.region
            && self
                .region
                .as_deref()
                .is_none_or(|mine| !mine.eq_ignore_ascii_case(r))
        {
            return Err(Ineligible::RegionMismatch);
        }
        if n.tags
            .iter()
            .any(|t| !self.tags.iter().any(|m| m.eq_ignore_ascii_case(t)))
        {
            return Err(Ineligible::PolicyTagsMissing);
        }
        Ok(())
    }
}

/// What a model supports: (pattern, context window, most output, tools, vision, structured
/// output).
type Known = (&'static str, u64, u64, bool, bool, bool);

/// Well-known models, most specific pattern first (from the providers' model pages, 2026-12).
/// The config's `[[models]]` come before these.
const KNOWN: [Known; 20] = [
    ("gpt-4.1*", 1_047_576, 32_768, true, true, true),
    ("gpt-4o*", 128_000, 16_384, true, true, true),
    ("gpt-4-turbo*", 128_000, 4_096, true, true, false),
    ("gpt-3.5-turbo*", 16_385, 4_096, true, false, false),
    ("gpt-5*", 400_000, 128_000, true, true, true),
    ("o1*", 200_000, 100_000, true, true, true),
    ("o3*", 200_000, 100_000, true, true, true),
    ("o4-mini*", 200_000, 100_000, true, true, true),
    ("claude-opus-4-5*", 200_000, 64_000, true, true, true),
    ("claude-sonnet-4-5*", 200_000, 64_000, true, true, true),
    ("claude-haiku-4-5*", 200_000, 64_000, true, true, true),
    ("claude-opus-4-1*", 200_000, 32_000, true, true, true),
    ("claude-opus-4*", 200_000, 32_000, true, true, false),
    ("claude-sonnet-4*", 200_000, 64_000, true, true, false),
    ("claude-3-7-sonnet*", 200_000, 64_000, true, true, false),
    ("claude-3-5-haiku*", 200_000, 8_192, true, true, false),
    ("claude-3*", 200_000, 4_096, true, true, false),
    ("gemini-2.5*", 1_048_576, 65_536, true, true, true),
    ("gemini-2.0*", 1_048_576, 8_192, true, true, true),
    ("gemini-1.5*", 1_048_576, 8_192, true, true, true),
];

/// Fill what a target leaves unset from what its model is known to support: the config's
/// `[[models]]` first (first match), then the built-in table. A model in neither stays
/// unrestricted.
pub fn fill_from_known(
    caps: &mut Caps,
    model: &str,
    configured: &[crate::config::schema::ModelSection],
) {
    if let Some(m) = configured.iter().find(|m| super::glob(&m.name, model)) {
        caps.tools = caps.tools.or(m.tools);
        caps.vision = caps.vision.or(m.vision);
        caps.structured_output = caps.structured_output.or(m.structured_output);
        caps.context_window = caps.context_window.or(m.context_window);
        caps.max_output = caps.max_output.or(m.max_output_tokens);
        return;
    }
    if let Some(&(_, window, output, tools, vision, structured)) =
        KNOWN.iter().find(|k| super::glob(k.0, model))
    {
        caps.max_output = caps.max_output.or(Some(output));
        caps.tools = caps.tools.or(Some(tools));
        caps.vision = caps.vision.or(Some(vision));
        caps.structured_output = caps.structured_output.or(Some(structured));
        caps.context_window = caps.context_window.or(Some(window));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_models_fill_what_the_config_leaves_unset() {
        let mut caps = Caps {
            vision: Some(true),
            ..Default::default()
        };
        fill_from_known(&mut caps, "gpt-3.5-turbo-0125", &[]);
        assert_eq!(caps.vision, Some(true), "the config's word stays");
        assert_eq!(caps.structured_output, Some(false));
        assert_eq!(caps.context_window, Some(16_385));
        let mine = crate::config::schema::ModelSection {
            name: "claude-*".into(),
            context_window: Some(1_000_000),
            ..Default::default()
        };
        let mut caps = Caps::default();
        fill_from_known(&mut caps, "claude-sonnet-4-5", std::slice::from_ref(&mine));
        assert_eq!(
            caps.context_window,
            Some(1_000_000),
            "[[models]] before the table"
        );
        assert_eq!(
            caps.tools, None,
            "what [[models]] leaves unset stays unrestricted"
        );
        let mut caps = Caps::default();
        fill_from_known(&mut caps, "my-finetune", &[]);
        assert_eq!(caps, Caps::default(), "an unknown model is unrestricted");
    }

    #[test]
    fn contract() {
        let open = Caps::default();
        let needs = Needs {
            tools: true,
            vision: true,
            structured_output: true,
            context_tokens: 10_000,
            output_tokens: 4_000,
            prompt_bytes: 24_000,
            region: None,
            tags: vec![],
        };
        assert_eq!(open.admits(&needs), Ok(()));
        let small = Caps {
            context_window: Some(8_000),
            ..Default::default()
        };
        assert_eq!(small.admits(&needs), Err(Ineligible::ContextWindowTooSmall));
        let short = Caps {
            max_output: Some(2_048),
            ..Default::default()
        };
        assert_eq!(short.admits(&needs), Err(Ineligible::OutputTooLarge));
        let no_tools = Caps {
            tools: Some(false),
            ..Default::default()
        };
        assert_eq!(no_tools.admits(&needs), Err(Ineligible::NoToolSupport));
        assert_eq!(no_tools.admits(&Needs::default()), Ok(()));
        let eu = Caps {
            region: Some("eu".into()),
            tags: vec!["zdr".into()],
            ..Default::default()
        };
        let want_eu = Needs {
            region: Some("EU".into()),
            tags: vec!["zdr".into()],
            ..Default::default()
        };
        assert_eq!(eu.admits(&want_eu), Ok(()));
        assert_eq!(open.admits(&want_eu), Err(Ineligible::RegionMismatch));
        let want_us = Needs {
            region: Some("us".into()),
            ..Default::default()
        };
        assert_eq!(eu.admits(&want_us), Err(Ineligible::RegionMismatch));
        let want_tag = Needs {
            tags: vec!["hipaa".into()],
            ..Default::default()
        };
        assert_eq!(eu.admits(&want_tag), Err(Ineligible::PolicyTagsMissing));
    }
}
