//! What the quick-start build leaves out (`floe local`, `floe pg`, and
//! deployments on S3, Glue, SQS or REST catalogs), and the one line that
//! says how to build it: a user asking for it learns the command, not a
//! usage error or a chain of causes.

use anyhow::anyhow;
use floe_core::deploy::DeployError;

/// The command that installs `floe` with every part.
const FULL_BUILD: &str = "cargo install --locked --path local-dev --features full";

/// Any arguments, so that a left-out command prints how to build it
/// whatever it was given.
#[cfg(any(not(feature = "aws"), not(feature = "postgres"), test))]
#[derive(Debug, clap::Args)]
pub struct Unbuilt {
    #[arg(num_args = 0.., allow_hyphen_values = true, trailing_var_arg = true, hide = true)]
    args: Vec<String>,
}

/// The error for `floe <command>` in a build without `feature`.
#[cfg(any(not(feature = "aws"), not(feature = "postgres"), test))]
pub fn command(command: &str, feature: &str) -> anyhow::Error {
    anyhow!(
        "`floe {command}` is not in this build of floe (it needs the `{feature}` feature); \
         from the repository's root, install the full CLI with `{FULL_BUILD}`, \
         or run `cargo run --release --bin floe --features full -- {command} …`"
    )
}

/// The one-line error for a config that asks for a part this build lacks;
/// `None` for any other error.
pub fn deployment(error: &DeployError) -> Option<anyhow::Error> {
    let DeployError::NotBuilt { key, what, .. } = error else {
        return None;
    };
    Some(anyhow!(
        "config key {key}: {what} is not in this build of floe; from the repository's root, \
         install the full CLI with `{FULL_BUILD}`"
    ))
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(subcommand)]
        command: Command,
    }

    #[derive(Debug, clap::Subcommand)]
    enum Command {
        Pg(Unbuilt),
    }

    #[test]
    fn a_left_out_command_takes_any_arguments_and_names_the_build() {
        let cli = Cli::try_parse_from(["floe", "pg", "sync", "--slot", "s", "-x", "--", "y"])
            .expect("any arguments parse");
        let Command::Pg(Unbuilt { args }) = cli.command;
        assert_eq!(args, ["sync", "--slot", "s", "-x", "--", "y"]);
        let message = command("pg", "postgres").to_string();
        assert!(message.contains("`postgres` feature"), "{message}");
        assert!(message.contains(FULL_BUILD), "{message}");
        assert!(!message.contains('\n'), "one line: {message}");
    }

    #[test]
    fn a_deployment_this_build_lacks_names_the_build_and_nothing_else_does() {
        let lacking = DeployError::NotBuilt {
            key: "catalog.type",
            what: "the Glue catalog",
            feature: "aws",
        };
        let message = deployment(&lacking).expect("mapped").to_string();
        assert!(
            message.starts_with("config key catalog.type: the Glue catalog"),
            "{message}"
        );
        assert!(message.contains(FULL_BUILD), "{message}");
        let other = DeployError::Missing {
            key: "catalog.path",
            message: "x".into(),
        };
        assert!(deployment(&other).is_none());
    }
}
