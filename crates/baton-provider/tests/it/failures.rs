//! Failures, each a clear error: retried 429 and 5xx, 401 without the key, a malformed body, a
//! truncated stream, a timeout, a missing key, a refused connection.

use std::time::{Duration, Instant};

use baton_provider::{Error, Secret, anthropic, openai};
use serde_json::json;

use crate::{BOTH, KEY, Options, Vendor, client, send, server, text_of, try_client, user};

#[tokio::test]
async fn a_429_with_retry_after_is_retried() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"reply": {"error": {"status": 429, "retry_after": 0}}},
            {"reply": {"text": "ok"}}
        ]}));
        let client = client(vendor, &server, Options::default());
        let started = Instant::now();
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        assert_eq!(result.unwrap().message.plain_text(), "ok");
        assert_eq!(server.requests().len(), 2, "{vendor:?}");
        assert!(
            started.elapsed() < Duration::from_millis(450),
            "retry-after 0 is honoured instead of the 0.5 s backoff"
        );
    }
}

#[tokio::test]
async fn a_500_is_retried_after_backoff() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"reply": {"error": {"status": 500, "message": "internal hiccup"}}},
            {"reply": {"text": "ok"}}
        ]}));
        let client = client(vendor, &server, Options::default());
        let started = Instant::now();
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        assert_eq!(result.unwrap().message.plain_text(), "ok");
        assert_eq!(server.requests().len(), 2);
        assert!(
            started.elapsed() >= Duration::from_millis(500),
            "backoff 0.5 s"
        );
    }
}

#[tokio::test]
async fn retries_stop_after_max_retries() {
    for vendor in BOTH {
        let error =
            json!({"reply": {"error": {"status": 529, "retry_after": 0, "message": "Overloaded"}}});
        let server = server(json!({"turns": [error, error, error]}));
        let options = Options {
            max_retries: 2,
            ..Options::default()
        };
        let client = client(vendor, &server, options);
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        match result.unwrap_err() {
            Error::Status {
                status: 529,
                message,
                ..
            } => assert_eq!(message, "Overloaded"),
            other => panic!("{other:?}"),
        }
        assert_eq!(server.requests().len(), 3);
    }
}

#[tokio::test]
async fn a_401_is_unauthorized_and_never_shows_the_key() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"reply": {"error": {"status": 401, "message": format!("invalid x-api-key {KEY}")}}}
        ]}));
        let client = client(vendor, &server, Options::default());
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        let err = result.unwrap_err();
        let env_var = match vendor {
            Vendor::Anthropic => "ANTHROPIC_API_KEY",
            Vendor::OpenAi => "OPENAI_API_KEY",
        };
        assert!(
            matches!(err, Error::Unauthorized { status: 401, env_var: e, .. } if e == env_var),
            "{err:?}"
        );
        for shown in [err.to_string(), format!("{err:?}"), format!("{err:#?}")] {
            assert!(!shown.contains(KEY), "{shown}");
        }
        assert_eq!(server.requests().len(), 1, "401 is not retried");
        let recorded = format!("{:?}", server.requests());
        assert!(!recorded.contains(KEY), "the server never keeps the key");
    }
}

#[tokio::test]
async fn the_key_never_prints() {
    let key = Secret::new(KEY);
    assert_eq!(format!("{key}"), "***");
    assert_eq!(format!("{key:?}"), "***");
    let mut config = anthropic::Config::new("claude-test");
    config.api_key = Some(key.clone());
    assert!(!format!("{config:?}").contains(KEY));
    let client = anthropic::Client::new(config).unwrap();
    assert!(!format!("{client:?}").contains(KEY));
    let mut config = openai::Config::new("gpt-test");
    config.api_key = Some(key);
    let client = openai::Client::new(config).unwrap();
    assert!(!format!("{client:?}").contains(KEY));
}

#[tokio::test]
async fn a_key_echoed_in_an_error_message_is_scrubbed() {
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"reply": {"error": {"status": 404, "message": format!("no model for key {KEY}")}}}
        ]}));
        let client = client(vendor, &server, Options::default());
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        let err = result.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!("{}: HTTP 404: no model for key ***", client.name())
        );
        assert_eq!(server.requests().len(), 1, "404 is not retried");
    }
}

/// Issue 6 review: a placeholder key (Ollama's `ollama`) was scrubbed everywhere, garbling the
/// server's message. Keys under 8 characters are left alone.
#[tokio::test]
async fn a_short_placeholder_key_does_not_garble_messages() {
    let message = "model \"ollama/llama3\" not found, try `ollama pull llama3`";
    for vendor in BOTH {
        let server = server(json!({"turns": [
            {"reply": {"error": {"status": 404, "message": message}}}
        ]}));
        let options = Options {
            key: Some("ollama"),
            ..Options::default()
        };
        let client = client(vendor, &server, options);
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        assert_eq!(
            result.unwrap_err().to_string(),
            format!("{}: HTTP 404: {message}", client.name())
        );
    }
}

#[tokio::test]
async fn a_malformed_body_is_malformed() {
    for vendor in BOTH {
        let server = server(json!({"turns": [{"reply": {"raw": "this is not json"}}]}));
        let client = client(vendor, &server, Options::default());
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Malformed { .. }), "{err:?}");
        assert_eq!(
            err.to_string(),
            format!(
                "{}: malformed response: response: not JSON (expected ident at line 1 column 2)",
                client.name()
            )
        );
        assert_eq!(server.requests().len(), 1);
    }
}

#[tokio::test]
async fn a_truncated_stream_is_truncated() {
    for vendor in BOTH {
        let server =
            server(json!({"turns": [{"reply": {"text": "cut off here", "truncate": true}}]}));
        let client = client(vendor, &server, Options::default());
        let (result, deltas) = send(client.as_ref(), vec![user("go")], false).await;
        let err = result.unwrap_err();
        assert!(
            matches!(err, Error::Truncated { .. }),
            "{vendor:?}: {err:?}"
        );
        assert_eq!(text_of(&deltas), "cut off here", "what streamed was shown");
        assert_eq!(
            server.requests().len(),
            1,
            "a stream that began is not retried"
        );
    }
}

#[tokio::test]
async fn a_slow_answer_times_out() {
    for vendor in BOTH {
        let server = server(json!({"turns": [{"reply": {"delay_ms": 2000, "text": "late"}}]}));
        let options = Options {
            timeout: Duration::from_millis(200),
            ..Options::default()
        };
        let client = client(vendor, &server, options);
        let started = Instant::now();
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Timeout { seconds: 1, .. }), "{err:?}");
        assert!(started.elapsed() < Duration::from_millis(1500));
        assert_eq!(server.requests().len(), 1, "a timeout is not retried");
    }
}

#[tokio::test]
async fn a_missing_key_names_the_variable() {
    let none = || Options {
        key: None,
        ..Options::default()
    };
    let err = try_client(Vendor::Anthropic, anthropic::DEFAULT_BASE_URL, none())
        .err()
        .unwrap();
    assert_eq!(
        err.to_string(),
        "anthropic: no API key: set ANTHROPIC_API_KEY"
    );
    // Anthropic needs its key wherever it is.
    let err = try_client(Vendor::Anthropic, "http://127.0.0.1:9", none())
        .err()
        .unwrap();
    assert!(matches!(
        err,
        Error::MissingKey {
            env_var: "ANTHROPIC_API_KEY",
            ..
        }
    ));
    let err = try_client(Vendor::OpenAi, openai::DEFAULT_BASE_URL, none())
        .err()
        .unwrap();
    assert!(matches!(
        err,
        Error::MissingKey {
            env_var: "OPENAI_API_KEY",
            ..
        }
    ));
    let err = try_client(Vendor::OpenAi, "https://api.openai.com/v1/", none())
        .err()
        .unwrap();
    assert_eq!(err.to_string(), "openai: no API key: set OPENAI_API_KEY");
}

#[tokio::test]
async fn openai_without_a_key_sends_no_authorization_to_a_local_server() {
    let server =
        server(json!({"turns": [{"reply": {"text": "local"}}, {"reply": {"text": "keyed"}}]}));
    let keyless = Options {
        key: None,
        ..Options::default()
    };
    let client = client(Vendor::OpenAi, &server, keyless);
    let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
    assert_eq!(result.unwrap().message.plain_text(), "local");
    let keyed = crate::client(Vendor::OpenAi, &server, Options::default());
    let (result, _) = send(keyed.as_ref(), vec![user("go")], false).await;
    assert_eq!(result.unwrap().message.plain_text(), "keyed");
    let requests = server.requests();
    assert!(!requests[0].auth);
    assert!(requests[1].auth);
    assert!(!requests[1].headers.contains_key("authorization"));
}

#[tokio::test]
async fn a_refused_connection_is_retried_then_reported() {
    let port = {
        let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).unwrap();
        listener.local_addr().unwrap().port()
    };
    for vendor in BOTH {
        let url = match vendor {
            Vendor::Anthropic => format!("http://127.0.0.1:{port}"),
            Vendor::OpenAi => format!("http://127.0.0.1:{port}/v1"),
        };
        let options = Options {
            max_retries: 1,
            ..Options::default()
        };
        let client = try_client(vendor, &url, options).unwrap();
        let started = Instant::now();
        let (result, _) = send(client.as_ref(), vec![user("go")], false).await;
        let err = result.unwrap_err();
        assert!(matches!(err, Error::Transport { .. }), "{err:?}");
        assert!(
            started.elapsed() >= Duration::from_millis(500),
            "retried once"
        );
        assert!(!err.to_string().contains(KEY));
    }
}
