use super::*;

#[test]
fn a_proxy_url_reads_as_host_port_and_credentials() {
    for (url, want) in [
        ("http://proxy.corp:3128", ("proxy.corp", 3128, None)),
        ("http://proxy/", ("proxy", 80, None)),
        (
            "http://us%40corp:p%3Ass@[fd00::1]:8080",
            ("fd00::1", 8080, Some("us@corp:p:ss")),
        ),
        // Without a scheme, as HTTPS_PROXY is often written (curl, Python and Go read it so).
        ("proxy.corp:3128", ("proxy.corp", 3128, None)),
        ("u:p@proxy.corp:3128", ("proxy.corp", 3128, Some("u:p"))),
        ("HTTP://proxy:8080", ("proxy", 8080, None)),
    ] {
        let (host, port, auth) = want;
        assert_eq!(
            parse(url).expect("url"),
            (host.to_string(), port, auth.map(str::to_string)),
            "{url}"
        );
    }
    for bad in [
        "https://proxy:3128",
        "socks5://proxy:1080",
        "proxy:3128/path",
        "http://proxy:3128/path",
        "http://:3128",
        "http://proxy:0",
        "http://proxy:port",
        "http://a%0Ab@proxy",
        "http://[fd00::1:3128",
    ] {
        assert!(parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn credentials_never_show_in_a_problem() {
    assert_eq!(redacted("http://user:secret@proxy:1"), "http://***@proxy:1");
    assert_eq!(redacted("http://proxy:1"), "http://proxy:1");
    assert_eq!(redacted("user:secret@proxy:1"), "***@proxy:1");
}

#[test]
fn no_proxy_names_hosts_and_domains() {
    let list = "internal.corp, .svc.local,*.lan, 10.0.0.7:8443";
    assert!(bypassed(list, "internal.corp"));
    assert!(bypassed(list, "api.internal.corp"));
    assert!(bypassed(list, "a.svc.local"));
    assert!(bypassed(list, "printer.lan"));
    assert!(bypassed(list, "10.0.0.7"));
    assert!(!bypassed(list, "api.openai.com"));
    assert!(!bypassed(list, "notinternal.corp"));
    assert!(bypassed("*", "api.openai.com"));
    // Networks (CIDR) and IPv6 addresses, as Kubernetes hosts set them.
    let k8s = "10.0.0.0/8, 192.168.1.0/24, fd00::/8, [2001:db8::7]:443, .svc";
    assert!(bypassed(k8s, "10.20.30.40"));
    assert!(bypassed(k8s, "192.168.1.9"));
    assert!(!bypassed(k8s, "192.168.2.9"));
    assert!(!bypassed(k8s, "11.0.0.1"));
    assert!(bypassed(k8s, "[fd12::1]"));
    assert!(bypassed(k8s, "2001:db8::7"));
    assert!(!bypassed(k8s, "2001:db8::8"));
    assert!(bypassed(k8s, "llm.ns.svc"));
    assert!(
        !bypassed(k8s, "api.openai.com"),
        "a name is not in a network"
    );
    assert!(bypassed("0.0.0.0/0", "8.8.8.8"));
    assert!(
        !bypassed("10.0.0.0/40, 10.0.0.0/x", "10.0.0.1"),
        "bad prefixes match nothing"
    );
    assert!(!bypassed("", "api.openai.com"));
}

fn section(proxy: Option<&str>, auth_env: Option<&str>) -> ProviderSection {
    let mut ps: ProviderSection = toml::from_str(
        "id = \"p\"\ndialect = \"openai\"\nbase_url = \"https://api.example.com/v1\"\n",
    )
    .expect("section");
    ps.proxy = proxy.map(str::to_string);
    ps.proxy_auth_env = auth_env.map(str::to_string);
    ps
}

#[test]
fn the_environment_gives_a_proxy_to_https_providers_not_to_loopback_or_no_proxy() {
    let vars = |no_proxy: &'static str| {
        move |k: &str| match k {
            "HTTPS_PROXY" => Some("http://u:pw@egress:3128".to_string()),
            "NO_PROXY" => Some(no_proxy.to_string()),
            _ => None,
        }
    };
    let mut p = Problems::default();
    let ps = section(None, None);
    let env = vars("internal.corp");
    let got = egress(
        &mut p,
        "providers[0]",
        &ps,
        ("api.example.com", true),
        true,
        &env,
    )
    .expect("a proxy from HTTPS_PROXY");
    assert_eq!(
        (got.host.as_str(), got.port, got.from),
        ("egress", 3128, "HTTPS_PROXY")
    );
    assert_eq!(
        got.authorization.as_ref().map(Secret::expose),
        Some("Basic dTpwdw==")
    );
    for (host, tls, from_env) in [
        ("api.example.com", false, true),
        ("localhost", true, true),
        ("127.0.0.1", true, true),
        ("api.example.com", true, false),
    ] {
        assert!(
            egress(&mut p, "x", &ps, (host, tls), from_env, &env).is_none(),
            "{host}"
        );
    }
    let env = vars(".example.com");
    assert!(egress(&mut p, "x", &ps, ("api.example.com", true), true, &env).is_none());
    // `none` goes direct whatever the environment says.
    let env = vars("");
    let direct = section(Some("none"), None);
    assert!(egress(&mut p, "x", &direct, ("api.example.com", true), true, &env).is_none());
    assert!(p.0.is_empty(), "{:?}", p.0);
}

#[test]
fn a_configured_proxy_takes_its_credentials_from_a_variable() {
    let env = |k: &str| (k == "EGRESS_AUTH").then(|| "svc:s3cret".to_string());
    let mut p = Problems::default();
    let ps = section(Some("http://egress.corp:8080"), Some("EGRESS_AUTH"));
    // Configured: even a loopback upstream goes through it.
    let got = egress(
        &mut p,
        "providers[0]",
        &ps,
        ("localhost", true),
        false,
        &env,
    )
    .expect("the configured proxy");
    assert_eq!(
        (got.host.as_str(), got.port, got.from),
        ("egress.corp", 8080, "config")
    );
    assert_eq!(
        got.authorization.as_ref().map(Secret::expose),
        Some("Basic c3ZjOnMzY3JldA==")
    );
    let bad = section(Some("socks5://u:pw@egress:1080"), Some("UNSET"));
    assert!(egress(&mut p, "providers[0]", &bad, ("h", true), true, &env).is_none());
    let text = format!("{:?}", p.0);
    assert!(
        text.contains("proxy_auth_env") && text.contains("providers[0].proxy"),
        "{text}"
    );
    assert!(!text.contains("pw@"), "credentials shown: {text}");
}

#[test]
fn a_proxy_without_a_scheme_is_http_and_its_credentials_never_show() {
    let env = |v: &'static str| move |k: &str| (k == "HTTPS_PROXY").then(|| v.to_string());
    let ps = section(None, None);
    let mut p = Problems::default();
    let got = egress(
        &mut p,
        "providers[0]",
        &ps,
        ("api.example.com", true),
        true,
        &env("u:pw@egress:3128"),
    )
    .expect("a proxy from a scheme-less HTTPS_PROXY");
    assert_eq!((got.host.as_str(), got.port), ("egress", 3128));
    assert!(p.0.is_empty(), "{:?}", p.0);
    // A bad one is a problem that names it without its password.
    let mut p = Problems::default();
    let bad = egress(
        &mut p,
        "providers[0]",
        &ps,
        ("api.example.com", true),
        true,
        &env("u:hunter2@egress:port"),
    );
    assert!(bad.is_none());
    let text = format!("{:?}", p.0);
    assert!(text.contains("***@egress:port"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}
