//! The `meshplan` binary: parse the command line, dispatch, map failures to exit codes
//! (0 ok, 2 bad input, 1 anything else; clap's own usage errors also exit 2).

use std::process::ExitCode;

use clap::Parser;
use meshplan::cli;

fn main() -> ExitCode {
    match cli::dispatch(cli::args::Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            cli::report(&error);
            ExitCode::from(error.exit_code())
        }
    }
}
