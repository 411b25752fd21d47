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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn contract() {
        let open = Caps::default();
        let needs = Needs {
            tools: true,
            vision: true,
            structured_output: true,
            context_tokens: 10_000,
            region: None,
            tags: vec![],
        };
        assert_eq!(open.admits(&needs), Ok(()));
        let small = Caps {
            context_window: Some(8_000),
            ..Default::default()
        };
        assert_eq!(small.admits(&needs), Err(Ineligible::ContextWindowTooSmall));
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
