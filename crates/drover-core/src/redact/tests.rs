use super::*;

/// `(shape, text, the secret that must not survive)`.
fn secrets() -> Vec<(&'static str, String, String)> {
    let b62 = |n: usize, seed: u64| -> String {
        const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                A[(x % 62) as usize] as char
            })
            .collect()
    };
    let hex = |n: usize, seed: u64| -> String {
        b62(n * 2, seed)
            .bytes()
            .map(|b| char::from(b"0123456789abcdef"[(b % 16) as usize]))
            .take(n)
            .collect()
    };
    let mut cases: Vec<(&'static str, String, String)> = Vec::new();
    let mut add = |shape: &'static str, secret: String, around: &str| {
        cases.push((shape, around.replace("{}", &secret), secret));
    };
    add(
        "anthropic api key",
        format!("sk-ant-api03-{}AA", b62(93, 1)),
        "export ANTHROPIC_API_KEY={}",
    );
    add(
        "anthropic admin key",
        format!("sk-ant-admin01-{}AA", b62(93, 2)),
        "the key is {} ok",
    );
    add(
        "anthropic short key",
        format!("sk-ant-api03-{}", b62(24, 3)),
        "use {} please",
    );
    add(
        "openai project key",
        format!("sk-proj-{}T3BlbkFJ{}", b62(20, 4), b62(20, 5)),
        "OPENAI key {} here",
    );
    add(
        "openai legacy key",
        format!("sk-{}T3BlbkFJ{}", b62(20, 6), b62(20, 7)),
        "{}",
    );
    add(
        "github classic pat",
        format!("ghp_{}", b62(36, 8)),
        "git push https://{}@github.com/o/r",
    );
    add(
        "github fine-grained pat",
        format!("github_pat_{}_{}", b62(22, 9), b62(59, 10)),
        "token {}",
    );
    add("github oauth", format!("gho_{}", b62(36, 11)), "{}");
    add("github app", format!("ghs_{}", b62(36, 12)), "GH {} x");
    add("github refresh", format!("ghr_{}", b62(36, 13)), "({})");
    add(
        "gitlab pat",
        format!("glpat-{}", b62(20, 14)),
        "curl --header \"PRIVATE-TOKEN: {}\"",
    );
    add(
        "gitlab pipeline trigger",
        format!("glptt-{}", hex(40, 15)),
        "trigger {}",
    );
    add(
        "gitlab runner token",
        format!("glrt-{}", b62(20, 16)),
        "register {} now",
    );
    add(
        "gitlab deploy token",
        format!("gldt-{}", b62(20, 17)),
        "deploy {}",
    );
    add(
        "aws access key id",
        "AKIAZ3MHALX5TQ2WBR7P".into(),
        "id {} .",
    );
    add(
        "aws secret access key",
        b62(40, 18),
        "aws_secret_access_key = {}",
    );
    add(
        "aws session key id",
        "ASIAZ3MHALX5TQ2WBR7Q".into(),
        "AWS_ACCESS_KEY_ID={}",
    );
    add(
        "gcp api key",
        format!("AIza{}", b62(35, 19)),
        "GOOGLE_MAPS_KEY = {}",
    );
    add(
        "gcp service account private key",
        format!(
            "-----BEGIN PRIVATE KEY-----\n{}\n{}\n-----END PRIVATE KEY-----",
            b62(64, 20),
            b62(64, 21)
        ),
        "{\"type\": \"service_account\", \"private_key\": \"{}\"}",
    );
    add(
        "azure storage account key",
        format!("{}==", b62(86, 22)),
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={};EndpointSuffix=core.windows.net",
    );
    add(
        "azure ad client secret",
        format!("abc8Q~{}", b62(34, 23)),
        "client_secret: '{}'",
    );
    add(
        "slack bot token",
        format!("xoxb-1234567890123-1234567890123-{}", b62(24, 24)),
        "SLACK {}",
    );
    add(
        "slack user token",
        format!(
            "xoxp-1234567890123-1234567890123-1234567890123-{}",
            hex(32, 25)
        ),
        "{}",
    );
    add(
        "slack webhook",
        format!(
            "https://hooks.slack.com/services/T{}/B{}/{}",
            b62(10, 26).to_uppercase(),
            b62(10, 27).to_uppercase(),
            b62(24, 28)
        ),
        "post to {}",
    );
    add(
        "stripe live secret",
        format!("sk_live_{}", b62(24, 29)),
        "stripe {}",
    );
    add(
        "stripe restricted key",
        format!("rk_live_{}", b62(24, 30)),
        "{} !",
    );
    add(
        "stripe test secret",
        format!("sk_test_{}", b62(24, 31)),
        "STRIPE_KEY={}",
    );
    add(
        "jwt",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c".into(),
        "cookie session={}; path=/",
    );
    add(
        "rsa private key block",
        format!(
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEow{}\n{}\n-----END RSA PRIVATE KEY-----",
            b62(58, 32),
            b62(64, 33)
        ),
        "key:\n{}\n",
    );
    add(
        "openssh private key block",
        format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA{}\n{}\n-----END OPENSSH PRIVATE KEY-----",
            b62(46, 34),
            b62(70, 35)
        ),
        "{}",
    );
    add(
        "ec private key block",
        format!(
            "-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE{}\n-----END EC PRIVATE KEY-----",
            b62(64, 36)
        ),
        "cat id.pem\n{}",
    );
    add(
        "postgres url password",
        "admin:s3cr3tP4ssw0rd".into(),
        "DATABASE_URL=postgres://{}@db.example.com:5432/app",
    );
    add(
        "https url credentials",
        "deploy:hunter2hunter2".into(),
        "git clone https://{}@git.example.com/r.git",
    );
    add(
        "redis url without user",
        "p4ssw0rd-redis".into(),
        "redis://:{}@cache:6379/0",
    );
    add(
        "password pair",
        "hunter2hunter2".into(),
        "login password=hunter2hunter2 done",
    );
    add(
        "quoted password pair",
        "correct horse battery".into(),
        "DB_PASSWORD=\"{}\"",
    );
    add("token colon pair", "tkn8f7d6s5a4".into(), "token: {}");
    add("api key pair", "xyz789xyz789".into(), "api_key: '{}'");
    add(
        "json secret field",
        "s3cr3t-v4lu3".into(),
        "{\"client_secret\": \"{}\", \"id\": 7}",
    );
    add(
        "authorization bearer",
        format!("{}.{}", b62(20, 37), b62(12, 38)),
        "Authorization: Bearer {}",
    );
    add(
        "npm token",
        format!("npm_{}", b62(36, 39)),
        "//registry/:_authToken={}",
    );
    add(
        "pypi token",
        format!("pypi-AgEIcHlwaS5vcmc{}", b62(60, 40)),
        "TWINE_PASSWORD={}",
    );
    add(
        "sendgrid key",
        format!("SG.{}.{}", b62(22, 41), b62(43, 42)),
        "{}",
    );
    add(
        "hugging face token",
        format!(
            "hf_{}",
            b62(34, 43)
                .to_lowercase()
                .replace(|c: char| c.is_ascii_digit(), "q")
        ),
        "HF {}",
    );
    add(
        "digitalocean token",
        format!("dop_v1_{}", hex(64, 44)),
        "doctl auth init -t {}",
    );
    add(
        "shopify token",
        format!("shpat_{}", hex(32, 45)),
        "X-Shopify-Access-Token: {}",
    );
    add(
        "vault token",
        format!("hvs.{}", b62(90, 46)),
        "VAULT_TOKEN={}",
    );
    add(
        "databricks token",
        format!("dapi{}", hex(32, 47)),
        "databricks {}",
    );
    add(
        "telegram bot token",
        format!("123456789:AA{}", b62(33, 48)),
        "telegram_bot_token = {}",
    );
    cases
}

/// Text that looks like a secret to a careless rule and must survive untouched.
const LOOK_ALIKES: &[&str] = &[
    "commit a94a8fe5ccb19ba61c4c0873d391e987982fbbd3 on main",
    "HEAD is 6165d9c",
    "merge 7e25fa3b2c7d3f1e0a9b8c7d6e5f4a3b2c1d0e9f into reliability",
    "session 550e8400-e29b-41d4-a716-446655440000 started",
    "{\"session_id\": \"9f0c2d4e-6b1a-4c8e-9d3f-2a1b0c9d8e7f\"}",
    "sha256 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "checksum = \"9d9bb6e1fc4a1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f70819202\"",
    "Zm4gbWFpbigpIHsgcHJpbnRsbiEoImhlbGxvIik7IH0=",
    "dXNlIHN0ZDo6Y29sbGVjdGlvbnM6Okhhc2hNYXA7CmZuIG1haW4oKSB7fQ==",
    "fn dispatch_core_provider_events_handle_turn_completed_with_result_block()",
    "AbstractSingletonProxyFactoryBeanDefinitionRegistryPostProcessor",
    "tool toolu_01A09q90qw90lq917835lq9 finished",
    "run r1a2b3c4d00 is idle",
    "/home/me/src/drover/src/dispatch/core/provider_events.rs:347",
    "max_tokens=4096 for task-abcdefghijklmnopqrstu",
    "the password field is empty",
    "Bearer tokens expire after an hour",
    "token count: 1234",
    "cargo test --lib redact -- --nocapture",
    "let secret_len = secret.len();",
    "https://docs.example.com/guide/intro",
    "see RFC 7519 section 4.1",
    "[redacted]",
    "api_key=[redacted]",
];

#[test]
fn every_secret_shape_is_redacted() {
    let redactor = Redactor::rules_only();
    let cases = secrets();
    assert!(cases.len() >= 40, "{} shapes", cases.len());
    let mut leaked = Vec::new();
    for (shape, text, secret) in &cases {
        let out = redactor.redact(text);
        // No long piece of the secret is left.
        let piece = secret.len().min(12);
        let kept = (0..=secret.len() - piece).any(|i| {
            secret.is_char_boundary(i)
                && secret.is_char_boundary(i + piece)
                && out.contains(&secret[i..i + piece])
        });
        if kept || !out.contains(MARK) {
            leaked.push(format!("{shape}: {text:?} -> {out:?}"));
        }
    }
    assert!(leaked.is_empty(), "not redacted:\n{}", leaked.join("\n"));
}

#[test]
fn look_alikes_survive() {
    let redactor = Redactor::rules_only();
    let changed: Vec<String> = LOOK_ALIKES
        .iter()
        .filter_map(|text| {
            let out = redactor.redact(text);
            (out != *text).then(|| format!("{text:?} -> {out:?}"))
        })
        .collect();
    assert!(changed.is_empty(), "changed:\n{}", changed.join("\n"));
}

#[test]
fn redacting_twice_changes_nothing() {
    let redactor = Redactor::with_values(["correct-horse-battery".to_string()]);
    for (_, text, _) in secrets() {
        let once = redactor.redact(&text).into_owned();
        assert_eq!(redactor.redact(&once), once, "{text:?}");
    }
}

#[test]
fn configured_values_are_redacted_and_short_ones_ignored() {
    let redactor = Redactor::with_values(["my-very-own-value-42".to_string(), "short".to_string()]);
    assert_eq!(
        redactor.redact("echo my-very-own-value-42 and short"),
        "echo [redacted] and short"
    );
    let mut config = crate::config::Config::defaults();
    config.redact.env = vec!["DROVER_TEST_SECRET".into()];
    if let Some(sim) = config.providers.get_mut("sim") {
        sim.env
            .insert("SIM_TOKEN".into(), "value-set-in-config".into());
    }
    let env = |name: &str| match name {
        "DROVER_TEST_SECRET" => Some("from-the-environment".to_string()),
        "SIM_TOKEN" => Some("sim-token-from-env".to_string()),
        _ => None,
    };
    let redactor = Redactor::from_config(&config, env);
    assert_eq!(
        redactor.redact("a from-the-environment b sim-token-from-env c value-set-in-config"),
        "a [redacted] b [redacted] c [redacted]"
    );
    assert!(!format!("{redactor:?}").contains("environment"));
}

#[test]
fn json_stays_json() {
    let redactor = Redactor::rules_only();
    for (_, text, secret) in secrets() {
        let doc = serde_json::json!({"text": text, "nested": [{"k": text}]}).to_string();
        let out = redactor.redact_json_text(&doc);
        let value: Value = serde_json::from_str(&out).expect("still JSON");
        assert!(!value.to_string().contains(&secret), "{out}");
        // Text-level redaction of the JSON text keeps it valid too.
        let text_level = redactor.redact(&doc);
        assert!(
            serde_json::from_str::<Value>(&text_level).is_ok(),
            "{doc} -> {text_level}"
        );
    }
}

#[test]
fn every_vendored_rule_compiles() {
    assert_eq!(vendored_rules_dropped(), 0);
    assert!(rule_ids().len() > 200, "{}", rule_ids().len());
}

#[test]
fn odd_input_never_panics() {
    let redactor = Redactor::with_values(["abcdefgh".to_string()]);
    for text in [
        "",
        "\u{0}",
        "é".repeat(10_000).as_str(),
        &"token=".repeat(10_000),
        &"-----BEGIN PRIVATE KEY-----".repeat(1000),
        &"a:b@".repeat(5000),
    ] {
        let out = redactor.redact(text);
        assert!(out.len() <= text.len() + MARK.len() * (text.len() / 8 + 1));
    }
}
