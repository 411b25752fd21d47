#[test]
fn model_names_with_control_bytes_or_of_any_length_are_refused() {
    use super::model_problem;
    assert_eq!(model_problem("gpt-4o"), None);
    assert_eq!(model_problem("openai/gpt-4o-mini"), None);
    assert_eq!(model_problem("模型-中文"), None);
    assert_eq!(model_problem(&"m".repeat(256)), None);
    assert!(model_problem(&"m".repeat(257)).is_some());
    assert!(model_problem("").is_some());
    assert!(model_problem("p/m\r\nSet-Cookie: a=b").is_some());
    assert!(model_problem("m\u{0}").is_some());
    assert!(model_problem("m\u{7f}").is_some());
    assert!(model_problem("m\u{85}").is_some());
    assert!(model_problem("m\tx").is_some());
    // Names that would display as another: bidi overrides, zero-width characters, tags.
    for spoof in [
        "gpt-4o\u{202e}",
        "gpt\u{200b}-4o",
        "\u{2066}gpt-4o\u{2069}",
        "gpt-4o\u{feff}",
        "gpt\u{e0041}",
    ] {
        assert!(model_problem(spoof).is_some(), "{spoof:?}");
    }
}

use super::*;

#[test]
fn reads_model_and_stream() {
    let body = br#"{"messages":[{"role":"user","content":"hi \"model\": x"}],"model":"gpt-4o","stream":true}"#;
    let f = scan(body).unwrap();
    assert_eq!(f.model.as_deref(), Some("gpt-4o"));
    assert!(f.stream);
    assert_eq!(&body[f.model_span.unwrap()], br#""gpt-4o""#);
}

#[test]
fn rewrite_keeps_other_bytes() {
    let body =
        Bytes::from_static(b"{ \"model\" : \"smart\",\n \"x\": [1, {\"model\":\"inner\"}] }");
    let span = scan(&body).unwrap().model_span.unwrap();
    let out = rewrite_model(&body, &span, "gpt-4o-mini");
    assert_eq!(
        &out[..],
        b"{ \"model\" : \"gpt-4o-mini\",\n \"x\": [1, {\"model\":\"inner\"}] }"
    );
}

#[test]
fn escaped_model_names_decode() {
    let f = scan(br#"{"model":"a\/b"}"#).unwrap();
    assert_eq!(f.model.as_deref(), Some("a/b"));
}

#[test]
fn bad_inputs() {
    assert!(matches!(scan(b"{not json"), Err(FactsError::Malformed(_))));
    assert!(matches!(scan(b"[1,2]"), Err(FactsError::Malformed(_))));
    assert_eq!(scan(br#"{"model":5}"#), Err(FactsError::BadField("model")));
    // A null model is a missing one (the caller says so), not a wrong type.
    assert_eq!(scan(br#"{"model":null}"#).unwrap().model, None);
    for wrong in [r#"{"model":[1,{"a":"b"}]}"#, r#"{"model":{"x":[]}}"#] {
        assert_eq!(
            scan(wrong.as_bytes()),
            Err(FactsError::BadField("model")),
            "{wrong}"
        );
    }
    for wrong in [
        r#"{"model":"m","stream":1}"#,
        r#"{"model":"m","stream":[true]}"#,
    ] {
        assert_eq!(
            scan(wrong.as_bytes()),
            Err(FactsError::BadField("stream")),
            "{wrong}"
        );
    }
    let f = scan(br#" {"stream":null,"model":"m","extra":{"model":5,"stream":"x"}}"#).unwrap();
    assert_eq!((f.model.as_deref(), f.stream), (Some("m"), false));
    // Broken JSON inside a skipped value is still broken JSON.
    assert!(matches!(
        scan(br#"{"model":"m","x":[1,}"#),
        Err(FactsError::Malformed(_))
    ));
    assert!(matches!(
        scan(br#"{"model":[1,}"#),
        Err(FactsError::Malformed(_))
    ));
    assert_eq!(
        scan(br#"{"model":"m","stream":"yes"}"#),
        Err(FactsError::BadField("stream"))
    );
    assert_eq!(scan(b"").unwrap(), Facts::default());
    assert_eq!(scan(b" \r\n").unwrap(), Facts::default());
}

/// Every kind of broken JSON in a value that is skipped, not read, is still refused: the
/// same answer serde_json's full parse gives. (One difference: a lone surrogate escape such
/// as `"\ud800"` inside a skipped string passes, as the JSON grammar allows; only decoding
/// the string refuses it, and Ringside forwards skipped values untouched.)
#[test]
fn skipped_values_are_validated_in_full() {
    let broken: &[&[u8]] = &[
        br#"{"model":"m","x":tru}"#,
        br#"{"model":"m","x":nul}"#,
        br#"{"model":"m","x":falsey}"#,
        br#"{"model":"m","x":01}"#,
        br#"{"model":"m","x":1.}"#,
        br#"{"model":"m","x":-}"#,
        br#"{"model":"m","x":1e}"#,
        br#"{"model":"m","x":+1}"#,
        br#"{"model":"m","x":.5}"#,
        br#"{"model":"m","x":"\x"}"#,
        br#"{"model":"m","x":"\u12"}"#,
        b"{\"model\":\"m\",\"x\":\"a\x01b\"}",
        b"{\"model\":\"m\",\"x\":\"\xff\xfe\"}",
        b"{\"model\":\"m\",\"x\":\"\xc3\"}",
        br#"{"model":"m","x":[1 2]}"#,
        br#"{"model":"m","x":{"a" 1}}"#,
        br#"{"model":"m","x":{"a":1,}}"#,
        br#"{"model":"m","x":{1:2}}"#,
        br#"{"model":"m","x":"open}"#,
        br#"{"model":"m"} x"#,
        br#"{"model":"m"}{}"#,
        br#"{"model":"m","x":[[[[]]]}"#,
        br#"{"model":"m","x":NaN}"#,
        br#"{"model":"m",}"#,
        br#"{"model":"m""x":1}"#,
    ];
    for b in broken {
        assert!(
            serde_json::from_slice::<serde_json::Value>(b).is_err(),
            "fixture is valid JSON: {}",
            String::from_utf8_lossy(b)
        );
        assert!(
            matches!(scan(b), Err(FactsError::Malformed(_))),
            "accepted: {}",
            String::from_utf8_lossy(b)
        );
    }
    let fine: &[&[u8]] = &[
        br#"{"model":"m","x":[1,-0.5e+3,true,false,null,"\u00e9\ud83d\ude00\n",{}]}"#,
        "{\"model\":\"m\",\"x\":\"naïve 😀\"}".as_bytes(),
        b" {\"model\" : \"m\" ,\n\t\"x\" : { } } \n",
    ];
    for b in fine {
        assert_eq!(
            scan(b).map(|f| f.model),
            Ok(Some("m".into())),
            "{}",
            String::from_utf8_lossy(b)
        );
    }
}

#[test]
fn duplicate_model_keys_are_refused() {
    assert!(matches!(
        scan(br#"{"model":"a","model":"b"}"#),
        Err(FactsError::Malformed(_))
    ));
    assert!(matches!(
        scan(br#"{"stream":true,"model":"a","stream":false}"#),
        Err(FactsError::Malformed(_))
    ));
    // Also when one of them is spelled with an escape, as an upstream would decode it.
    assert!(matches!(
        scan(br#"{"model":"a","mod\u0065l":"b"}"#),
        Err(FactsError::Malformed(_))
    ));
    // Nested keys of the same name are other fields' business.
    let f = scan(br#"{"model":"a","x":{"model":"b","model":"c"}}"#).unwrap();
    assert_eq!(f.model.as_deref(), Some("a"));
}

/// The body check before it was ours: serde_json reading the whole body into this struct.
/// The oracle the fast check is held to.
fn scan_with_serde(body: &[u8]) -> Result<(Option<String>, bool), FactsError> {
    #[derive(Deserialize)]
    struct Top {
        #[serde(default)]
        model: Option<ModelField>,
        #[serde(default)]
        stream: Option<StreamField>,
    }
    let text = std::str::from_utf8(body).map_err(|e| FactsError::Malformed(e.to_string()))?;
    if text.trim_start_matches([' ', '\t', '\n', '\r']).is_empty() {
        return Ok((None, false));
    }
    if !text
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return Err(FactsError::Malformed("not an object".into()));
    }
    let top: Top = serde_json::from_str(text).map_err(|e| FactsError::Malformed(e.to_string()))?;
    let stream = match top.stream {
        None | Some(StreamField::Null) => false,
        Some(StreamField::Bool(b)) => b,
        Some(StreamField::Other) => return Err(FactsError::BadField("stream")),
    };
    match top.model {
        None => Ok((None, stream)),
        Some(ModelField::Text(m)) => Ok((Some(m), stream)),
        Some(ModelField::Other) => Err(FactsError::BadField("model")),
    }
}

/// Pieces of JSON, whole and broken, that bodies are assembled from.
const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    " ",
    "\n",
    "\"model\"",
    "\"stream\"",
    "\"mod\\u0065l\"",
    "\"x\"",
    "\"gpt-4o\"",
    "\"a\\u00e9\\n\"",
    "\"\\ud800\"",
    "\"\\q\"",
    "\"\\u12\"",
    "\"\t\"",
    "\"\u{1}\"",
    "\"naïve 😀\"",
    "true",
    "false",
    "null",
    "nul",
    "tru",
    "0",
    "-1",
    "01",
    "-0.5e+3",
    "1.",
    "1e",
    "1e400",
    "-",
    "+1",
    ".5",
    "\"open",
    "\\",
    "\"\\\"\"",
    "\u{0}",
    "\"\\/\"",
];

fn assemble(picks: &[usize]) -> String {
    picks.iter().map(|&i| PIECES[i % PIECES.len()]).collect()
}

/// Valid bodies with the fields in varied shapes, for mutation.
fn valid_body(model: &str, stream: &str, filler: usize) -> String {
    let long = "Lorem ipsum \\\"quoted\\\" dolor ✓ ".repeat(filler);
    format!(
        r#"{{"messages":[{{"role":"user","content":"{long}"}},{{"model":[1,{{"x":null}}]}}],"model":{model},"n":-0.5e3,"stream":{stream},"t":[true,false,null,{{}},[]]}}"#
    )
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(4000))]

    /// Bodies assembled from pieces: the fast check and serde_json agree on every one
    /// (the same facts, or the same kind of refusal), and the model's span holds the model.
    #[test]
    fn the_fast_check_agrees_with_serde_json(
        open in proptest::bool::weighted(0.9),
        picks in proptest::collection::vec(0usize..64, 0..24),
    ) {
        let body = format!("{}{}", if open { "{" } else { "" }, assemble(&picks));
        agree(body.as_bytes())?;
    }

    /// Valid bodies with one byte changed, dropped or repeated somewhere.
    #[test]
    fn mutated_valid_bodies_agree(
        model in proptest::sample::select(vec!["\"gpt-4o\"", "null", "5", "[\"a\"]", "\"a\\/b\"", "\"\\ud83d\\ude00\""]),
        stream in proptest::sample::select(vec!["true", "false", "null", "1", "\"yes\""]),
        filler in 0usize..8,
        at in 0usize..4096,
        op in 0u8..3,
        byte in proptest::sample::select(b"{}[]\",:\\ \nte0-.5\x01\xc3".to_vec()),
    ) {
        let mut body = valid_body(model, stream, filler).into_bytes();
        let at = at % (body.len() + 1);
        match op {
            0 if at < body.len() => body[at] = byte,
            1 if at < body.len() => { body.remove(at); }
            _ => body.insert(at, byte),
        }
        agree(&body)?;
    }
}

fn agree(body: &[u8]) -> Result<(), proptest::test_runner::TestCaseError> {
    let fast = scan(body);
    let oracle = scan_with_serde(body);
    let shown = String::from_utf8_lossy(body);
    match (&fast, &oracle) {
        (Ok(f), Ok((model, stream))) => {
            proptest::prop_assert_eq!(&f.model, model, "{}", shown);
            proptest::prop_assert_eq!(f.stream, *stream, "{}", shown);
            if let Some(span) = &f.model_span {
                let named: String = serde_json::from_slice(&body[span.clone()]).unwrap();
                proptest::prop_assert_eq!(Some(&named), model.as_ref(), "{}", shown);
            }
        }
        (Err(FactsError::Malformed(_)), Err(FactsError::Malformed(_))) => {}
        (Err(FactsError::BadField(a)), Err(FactsError::BadField(b))) => {
            proptest::prop_assert_eq!(a, b, "{}", shown)
        }
        _ => proptest::prop_assert!(false, "fast {:?}, serde {:?}: {}", fast, oracle, shown),
    }
    Ok(())
}
