//! Stamps the binary with the commit it was built from (`floe --version`).

use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
}

fn main() {
    let commit = git(&["log", "-1", "--format=%h %cs"])
        .map_or_else(|| "commit unknown".to_string(), |c| format!("commit {c}"));
    println!("cargo:rustc-env=FLOE_COMMIT={commit}");
    // Rerun when HEAD moves: a commit changes the branch's ref (loose or
    // packed), a checkout changes HEAD itself.
    // A file that does not exist (no packed refs yet) would make cargo
    // rerun this script, and rebuild the CLI, on every build.
    let watch = |path: &str| {
        if let Some(p) = git(&["rev-parse", "--git-path", path])
            && std::path::Path::new(&p).exists()
        {
            println!("cargo:rerun-if-changed={p}");
        }
    };
    watch("HEAD");
    watch("packed-refs");
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watch(&branch);
    }
}
