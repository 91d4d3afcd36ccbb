//! `llm_judge`: a separate call to the workspace chat model (never a run's overridden model) that
//! grades the observed answer against the expected one. Temperature 0 and a fixed seed; the reply
//! must be one JSON object `{"verdict": "pass"|"fail", "reason": "…"}` (code fences and prose
//! around it are tolerated; anything else is an `error`, never a `pass`). Each verdict keeps the
//! judge model, a hash of the exact prompt and the call's usage.

use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use super::assertions::{Judge, Status, Verdict};
use crate::models::chat::{Cancel, ChatModel, ChatRequest, Message};

/// The seed every judge call samples with.
pub const SEED: u64 = 7;
/// Room for the verdict object around a reason of up to 200 characters, however it tokenizes.
const MAX_TOKENS: u32 = 400;
/// The longest reason kept from a judge.
const MAX_REASON_CHARS: usize = 500;
const NO_REASON: &str = "The judge gave no reason.";

const SYSTEM: &str = "You are grading the answer an assistant gave, against a reference answer written \
by the people who run it. Reply with exactly one line of JSON and nothing else: \
{\"verdict\": \"pass\" or \"fail\", \"reason\": \"<why, under 200 characters>\"}.\n\
Rules:\n\
- pass when the observed answer says what the reference answer says; the wording may differ.\n\
- fail when the observed answer is wrong, leaves out something the reference answer states, or \
adds claims the reference answer does not support.\n\
- fail when the observed answer says it does not know while the reference answer gives an answer.\n\
- when additional grading criteria are given, the observed answer must meet them as well.\n\
- keep the reason under 200 characters.";

/// What a local model's sampling is held to: exactly the verdict object, so even a small model
/// answers in the shape asked for (hosted models get the instruction alone).
const GRAMMAR: &str = r#"root ::= "{\"verdict\": \"" verdict "\", \"reason\": \"" reason "\"}"
verdict ::= "pass" | "fail"
reason ::= [^"\\\x00-\x1f]{1,200}
"#;

/// The two prompt messages for one judgement.
pub fn prompt(question: &str, expected: &str, criteria: Option<&str>, answer: &str) -> (String, String) {
    let mut user =
        format!("QUESTION:\n{question}\n\nREFERENCE ANSWER:\n{expected}\n\nOBSERVED ASSISTANT ANSWER:\n{answer}");
    if let Some(c) = criteria.filter(|c| !c.trim().is_empty()) {
        user.push_str(&format!("\n\nADDITIONAL GRADING CRITERIA:\n{c}"));
    }
    (SYSTEM.to_string(), user)
}

/// The hash a verdict records: SHA-256 over the system prompt, a NUL, and the user prompt.
pub fn prompt_hash(system: &str, user: &str) -> String {
    let mut h = Sha256::new();
    h.update(system.as_bytes());
    h.update([0u8]);
    h.update(user.as_bytes());
    hex::encode(h.finalize())
}

/// Reads a judge's reply: fences stripped, the first `{` to the last `}` parsed as JSON, the
/// verdict `pass` or `fail`. Anything else is an error with what was wrong.
pub fn parse(text: &str) -> Result<(Status, String), String> {
    let t = text.trim();
    let (Some(start), Some(end)) = (t.find('{'), t.rfind('}')) else {
        return Err("the judge's reply holds no JSON object".into());
    };
    if end < start {
        return Err("the judge's reply holds no JSON object".into());
    }
    let v: Value =
        serde_json::from_str(&t[start..=end]).map_err(|e| format!("the judge's reply is not valid JSON: {e}"))?;
    let status = match v.get("verdict").and_then(Value::as_str).map(|s| s.trim().to_ascii_lowercase()) {
        Some(s) if s == "pass" => Status::Pass,
        Some(s) if s == "fail" => Status::Fail,
        Some(other) => return Err(format!("the judge's verdict {other:?} is neither pass nor fail")),
        None => return Err("the judge's reply has no verdict".into()),
    };
    let reason = v.get("reason").and_then(Value::as_str).map(str::trim).unwrap_or_default();
    let reason =
        if reason.is_empty() { NO_REASON.to_string() } else { reason.chars().take(MAX_REASON_CHARS).collect() };
    Ok((status, reason))
}

/// Judges with one model, for one run's question.
pub struct ModelJudge<'a> {
    pub model: &'a dyn ChatModel,
    pub question: &'a str,
    pub cancel: &'a Cancel,
}

impl Judge for ModelJudge<'_> {
    fn judge(&mut self, index: usize, expected: &str, criteria: Option<&str>, answer: &str) -> Verdict {
        let (system, user) = prompt(self.question, expected, criteria, answer);
        let hash = prompt_hash(&system, &user);
        let req = ChatRequest {
            temperature: 0.0,
            seed: Some(SEED),
            grammar: Some(GRAMMAR.to_string()),
            ..ChatRequest::new(vec![Message::system(system), Message::user(user)]).max_tokens(MAX_TOKENS)
        };
        let judge_model = format!("{}/{}", self.model.provider(), self.model.model());
        let mut extra = json!({"judgeModel": judge_model, "promptHash": hash, "temperature": 0, "seed": SEED,
            "usage": {"operation": "llm_judge", "attempt": format!("assertion-{index}")}});
        let out = match self.model.chat(&req, &mut |_| {}, self.cancel) {
            Ok(o) => o,
            Err(e) => {
                return Verdict {
                    status: Status::Error,
                    reason: Some(format!("the judge model failed: {}", e.message)),
                    extra: Some(extra),
                };
            }
        };
        extra["usage"]["promptTokens"] = json!(out.usage.prompt_tokens);
        extra["usage"]["completionTokens"] = json!(out.usage.completion_tokens);
        match parse(&out.text) {
            Ok((status, reason)) => Verdict { status, reason: Some(reason), extra: Some(extra) },
            Err(e) => Verdict { status: Status::Error, reason: Some(e), extra: Some(extra) },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn parses_plain_fenced_and_wrapped_json() {
        assert_eq!(parse(r#"{"verdict":"pass","reason":"same"}"#).unwrap(), (Status::Pass, "same".into()));
        let fenced = "```json\n{\"verdict\": \"fail\", \"reason\": \"wrong day\"}\n```";
        assert_eq!(parse(fenced).unwrap(), (Status::Fail, "wrong day".into()));
        let prose = "Sure. {\"verdict\": \"PASS\", \"reason\": \"\"} Hope that helps.";
        assert_eq!(parse(prose).unwrap(), (Status::Pass, NO_REASON.into()));
    }

    #[test]
    fn garbage_is_an_error_never_a_pass() {
        for bad in ["pass", "", "}{", "{verdict: pass}", r#"{"verdict":"maybe"}"#, r#"{"reason":"x"}"#, "```\n```"] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_prompt_has_its_sections_and_a_stable_hash() {
        let (s, u) = prompt("When?", "At 9.", Some("Mention the weekday."), "At nine.");
        assert!(u.starts_with("QUESTION:\nWhen?"));
        assert!(u.contains("REFERENCE ANSWER:\nAt 9."));
        assert!(u.contains("OBSERVED ASSISTANT ANSWER:\nAt nine."));
        assert!(u.ends_with("ADDITIONAL GRADING CRITERIA:\nMention the weekday."));
        assert!(!prompt("When?", "At 9.", None, "x").1.contains("ADDITIONAL"));
        assert_eq!(prompt_hash(&s, &u), prompt_hash(&s, &u));
        assert_ne!(prompt_hash(&s, &u), prompt_hash(&s, "other"));
    }

    proptest! {
        #[test]
        fn parse_never_panics(text in crate::testkit::hostile_text(12), reason in crate::testkit::hostile_text(12)) {
            let _ = parse(&text);
            let wrapped = format!("{{\"verdict\":\"fail\",\"reason\":{}}}", serde_json::to_string(&reason).unwrap());
            let (status, kept) = parse(&wrapped).unwrap();
            prop_assert_eq!(status, Status::Fail);
            prop_assert!(kept.chars().count() <= MAX_REASON_CHARS);
        }
    }
}
