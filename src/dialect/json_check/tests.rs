use super::*;

#[test]
fn finds_the_top_level_fields_only() {
    let b = br#" {"x":{"model":"no"},"model" : "m","stream":[true],"y":"model"} "#;
    let f = check_object(b).unwrap();
    assert_eq!(&b[f.model.unwrap()], br#""m""#);
    assert_eq!(&b[f.stream.unwrap()], b"[true]");
    let f = check_object(br#"{"model":{"a":[1,{"b":2}]}}"#).unwrap();
    assert_eq!(f.model, Some(9..26));
}

#[test]
fn every_offset_of_a_long_string() {
    // The 32-byte loop and the byte loop meet at every place a special byte can be.
    for at in 0..80 {
        for (special, ok) in [("\"", true), ("\\n", true), ("\u{1}", false), ("\t", false)] {
            let s = format!("{}{special}{}", "a".repeat(at), "b".repeat(40));
            let body = format!(r#"{{"x":"{s}","model":"m"}}"#);
            let r = check_object(body.as_bytes());
            let valid = serde_json::from_str::<serde_json::Value>(&body).is_ok();
            assert_eq!(r.is_ok(), valid, "{body}");
            if special != "\"" {
                assert_eq!(r.is_ok(), ok, "{body}");
            }
        }
    }
}

#[test]
fn deep_nesting_spills_without_limits() {
    for depth in [255, 256, 257, 300, 1000] {
        let body = format!(
            r#"{{"x":{}1{},"model":"m"}}"#,
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let f = check_object(body.as_bytes()).unwrap();
        assert_eq!(&body.as_bytes()[f.model.unwrap()], br#""m""#, "{depth}");
        let objects = format!(
            r#"{{"x":{}1{}}}"#,
            r#"{"a":"#.repeat(depth),
            "}".repeat(depth)
        );
        assert!(check_object(objects.as_bytes()).is_ok(), "{depth}");
        // The innermost array closed with `}`, then the outermost one with `}`.
        let inner = format!(
            r#"{{"x":{}1}}{}}}"#,
            "[".repeat(depth),
            "]".repeat(depth - 1)
        );
        assert!(check_object(inner.as_bytes()).is_err(), "{depth}");
        let outer = format!(
            r#"{{"x":{}1{}}}}}"#,
            "[".repeat(depth),
            "]".repeat(depth - 1)
        );
        assert!(check_object(outer.as_bytes()).is_err(), "{depth}");
        for b in [&inner, &outer] {
            assert!(serde_json::from_str::<serde_json::Value>(b).is_err());
        }
    }
}

#[test]
fn errors_say_where() {
    let e = check_object(br#"{"model":"m" "x":1}"#).unwrap_err();
    assert_eq!(e.to_string(), "expected `,` or `}` at byte 13");
    let e = check_object(br#"{"model":"m","x":[1,}"#).unwrap_err();
    assert_eq!(e.to_string(), "expected a value at byte 20");
    let e = check_object(br#"{"model":"m"} {}"#).unwrap_err();
    assert_eq!(e.what, "trailing characters after the object");
    let e = check_object(br#"{"model":"m","x":"open"#).unwrap_err();
    assert_eq!(e.what, "a string that never ends");
}
