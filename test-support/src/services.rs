//! What the AWS, REST and function tests run against: the local servers the
//! `local-dev/` scripts start (once per test binary) and the test venv's
//! Python with its independent readers.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The repository root: the first ancestor of this crate's directory that
/// holds `local-dev/test.sh`.
pub fn repo() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .ancestors()
            .find(|d| d.join("local-dev/test.sh").is_file())
            .expect("the crate lives in floe's repository")
            .to_path_buf()
    })
}

/// Runs `local-dev/<script>`; the lines it prints.
pub fn run_lines(script: &str) -> Vec<String> {
    let path = repo().join("local-dev").join(script);
    let out = std::process::Command::new("bash")
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("run {}: {e}", path.display()));
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| l.trim().to_string())
        .collect()
}

/// Runs `local-dev/<script>`; the last line it prints (its endpoint, on
/// the port the script chose: see `local-dev/ports.sh`).
pub fn run(script: &str) -> String {
    run_lines(script)
        .pop()
        .unwrap_or_else(|| panic!("{script} prints its endpoint"))
}

/// moto's endpoint (S3, SQS, Glue, Secrets Manager), started once, with the
/// test credentials set for every SDK client built afterwards.
pub fn moto() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        let endpoint = run("aws.sh");
        // SAFETY: every test calls `moto()` before building a client, and the
        // OnceLock holds the others back until these are set, so no thread
        // reads the environment while it changes.
        unsafe {
            std::env::set_var("AWS_ACCESS_KEY_ID", "testing");
            std::env::set_var("AWS_SECRET_ACCESS_KEY", "testing");
            std::env::set_var("AWS_SESSION_TOKEN", "testing");
            std::env::set_var("AWS_EC2_METADATA_DISABLED", "true");
        }
        endpoint
    })
}

/// lakana's REST catalog on moto's S3, started once: (base URI, bearer token).
pub fn lakana() -> &'static (String, String) {
    static REST: OnceLock<(String, String)> = OnceLock::new();
    REST.get_or_init(|| {
        let mut lines = run_lines("rest.sh");
        moto();
        let token = lines.pop();
        match (lines.pop(), token) {
            (Some(uri), Some(token)) => (uri, token),
            _ => panic!("rest.sh prints its base URI and token"),
        }
    })
}

/// The test venv's Python (`FLOE_PYTHON`, else `FLOE_VENV` or
/// `~/.cache/floe-venv`), where local-dev/test.sh installs the readers.
pub fn python() -> String {
    std::env::var("FLOE_PYTHON").unwrap_or_else(|_| {
        let venv = std::env::var("FLOE_VENV").unwrap_or_else(|_| {
            format!(
                "{}/.cache/floe-venv",
                std::env::var("HOME").unwrap_or_default()
            )
        });
        format!("{venv}/bin/python")
    })
}

/// Runs the repository's Python `script` with `args`; the JSON it prints.
pub fn python_json(script: &str, args: &[&str]) -> serde_json::Value {
    let python = python();
    let out = std::process::Command::new(&python)
        .arg(repo().join(script))
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("running {python}: {e}; local-dev/test.sh installs the venv"));
    assert!(
        out.status.success(),
        "{script} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{script} printed no JSON: {e}"))
}

/// s3s-fs's endpoint (S3 only, over a local directory), started once: the
/// second S3 implementation, so the S3 path is not moto's alone. The test
/// credentials are moto's.
pub fn s3s() -> &'static str {
    static ENDPOINT: OnceLock<String> = OnceLock::new();
    ENDPOINT.get_or_init(|| {
        moto();
        run("s3s.sh")
    })
}

/// A Kafka-compatible broker's bootstrap address (`host:port`), started
/// once: the local stack's MSK source reads from it, kafka-python produces.
pub fn kafka() -> &'static str {
    static BOOTSTRAP: OnceLock<String> = OnceLock::new();
    BOOTSTRAP.get_or_init(|| run("kafka.sh"))
}
