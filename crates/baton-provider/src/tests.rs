//! Unit tests of what the crate root holds: [`crate::Secret`] never prints.

use crate::{Error, Secret};

#[test]
fn secrets_print_stars() {
    let secret = Secret::new("sk-ant-api03-very-secret");
    assert_eq!(format!("{secret}"), "***");
    assert_eq!(format!("{secret:?}"), "***");
    assert_eq!(format!("{:?}", Some(&secret)), "Some(***)");
    assert_eq!(secret.expose(), "sk-ant-api03-very-secret");
}

#[test]
fn errors_name_the_variable_to_set() {
    let err = Error::MissingKey {
        provider: "anthropic",
        env_var: "ANTHROPIC_API_KEY",
    };
    assert_eq!(
        err.to_string(),
        "anthropic: no API key: set ANTHROPIC_API_KEY"
    );
}

#[test]
fn clients_and_the_server_can_be_shared_across_tasks() {
    fn shared<T: Send + Sync + 'static>() {}
    shared::<crate::anthropic::Client>();
    shared::<crate::openai::Client>();
    shared::<crate::scripted::ScriptedServer>();
}
