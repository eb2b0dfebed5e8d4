//! The Terraform module sets exactly the environment each function reads:
//! every key a function reads is set (blank where it does not apply), and
//! nothing is set that no function reads, so a key added to floe's config or
//! dropped from it fails here until the module follows.

use std::collections::BTreeSet;

use floe_core::deploy::Role;
use floe_test_support::services;
use serde_json::Value;

fn module_env() -> Value {
    let module = services::repo().join("infra/modules/floe");
    services::python_json(
        "functions/tests/terraform_env.py",
        &[module.to_str().expect("a UTF-8 path")],
    )
}

#[test]
fn the_module_sets_exactly_what_each_function_reads() {
    let env = module_env();
    let deployed: BTreeSet<&str> = env
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    let built: BTreeSet<&str> = Role::ALL.iter().map(|r| r.name()).collect();
    assert_eq!(
        deployed, built,
        "the module deploys every function, and only those"
    );
    for role in Role::ALL {
        let set: BTreeSet<String> = env[role.name()]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect();
        let read: BTreeSet<String> = role.env_vars().into_iter().collect();
        let unset: Vec<_> = read.difference(&set).collect();
        let unread: Vec<_> = set.difference(&read).collect();
        assert!(
            unset.is_empty() && unread.is_empty(),
            "{}: read but not set by the module: {unset:?}; set but never read: {unread:?}",
            role.name()
        );
    }
}

#[test]
fn a_config_key_the_module_does_not_know_is_caught() {
    // The comparison is not vacuous: the writer reads the queue, maintenance does not.
    let writer = Role::Writer.env_vars();
    let maintenance = Role::Maintenance.env_vars();
    assert!(writer.contains(&"FLOE_QUEUE_URL".to_string()));
    assert!(!maintenance.contains(&"FLOE_QUEUE_URL".to_string()));
    assert!(maintenance.contains(&"FLOE_MAINTENANCE_TABLES".to_string()));
    assert!(
        Role::Ingest
            .env_vars()
            .contains(&"FLOE_HTTP_TOKEN".to_string())
    );
    // Emulator-only keys are never part of a deployment.
    for role in Role::ALL {
        assert!(
            !role
                .env_vars()
                .iter()
                .any(|v| v == "FLOE_AWS_ENDPOINT" || v == "FLOE_CATALOG_PATH")
        );
    }
}
