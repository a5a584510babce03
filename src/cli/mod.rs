//! The `meshplan` command line: flag definitions (`args.rs`), turning flags into a run
//! (`inputs.rs`), rendering (`render.rs`) and one file per subcommand. All printing happens here;
//! the library never prints.

mod accuracy;
pub mod args;
mod calibrate;
mod compare;
mod estimate;
mod export;
mod inputs;
pub mod lengths_file;
mod lengths_parquet;
mod parquet_pages;
mod presets;
mod read;
pub mod recipe;
mod render;
mod render_data;
mod search;
mod simulate;
mod validate;
mod whole_run;

use std::fmt;
use std::io::{self, Write};

use crate::violation::Violations;

use args::{Cli, Command};

/// Why a command failed, which decides the exit code.
#[derive(Debug)]
pub enum CliError {
    /// The input is wrong (violations, unknown preset, unreadable or malformed file): exit 2.
    Input(Violations),
    /// Anything else: exit 1.
    Other(anyhow::Error),
}

impl CliError {
    /// The process exit code for this failure.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Input(_) => 2,
            CliError::Other(_) => 1,
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Violations' Display starts with "N problems in the input:" and lists each one.
            CliError::Input(violations) => write!(f, "error: {violations}"),
            CliError::Other(err) => writeln!(f, "error: {err:#}"),
        }
    }
}

impl From<Violations> for CliError {
    fn from(violations: Violations) -> Self {
        CliError::Input(violations)
    }
}

/// Runs one parsed command line and prints what it returns.
pub fn dispatch(cli: Cli) -> Result<(), CliError> {
    print(&execute(cli)?)
}

/// Runs one command line given as words (the first is the program name) and returns what the
/// command would print, without printing it: the Python package's entry point, so that its
/// results are the CLI's byte for byte. A malformed command line is an input error.
pub fn run_words<I, T>(words: I) -> Result<String, CliError>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    use clap::Parser as _;
    let cli = Cli::try_parse_from(words).map_err(|err| {
        let message = err.to_string();
        let first = message.lines().next().unwrap_or_default().trim_start_matches("error: ");
        CliError::Input(Violations::one(crate::violation::Violation::new(
            "arguments",
            first,
            "is not a valid meshplan command line",
            "check the names and values of the arguments against `meshplan <command> --help`",
        )))
    })?;
    execute(cli)
}

/// Runs one parsed command line and returns what it prints.
pub fn execute(cli: Cli) -> Result<String, CliError> {
    Ok(match cli.command {
        Command::Estimate(args) => estimate::run(&args)?,
        Command::Simulate(args) => simulate::run(&args)?,
        Command::Search(args) => search::run(&args)?,
        Command::Export(args) => export::run(&args)?,
        Command::Compare(args) => compare::run(&args)?,
        Command::Presets(args) => presets::run(&args)?,
        Command::Validate(args) => validate::run(&args)?,
        Command::Calibrate(args) => calibrate::run(&args)?,
    })
}

/// Writes a command's output to stdout; a closed pipe (`meshplan ... | head`) is not an error.
fn print(output: &str) -> Result<(), CliError> {
    let mut stdout = io::stdout().lock();
    let written = stdout
        .write_all(output.as_bytes())
        .and_then(|()| if output.ends_with('\n') { Ok(()) } else { stdout.write_all(b"\n") });
    match written.and_then(|()| stdout.flush()) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(err) => Err(CliError::Other(anyhow::Error::new(err).context("cannot write to stdout"))),
    }
}

/// Reports a failure on stderr.
pub fn report(error: &CliError) {
    eprint!("{error}");
}

/// A progress bar on stderr when it is a terminal, nothing otherwise (pipes and CI stay clean).
pub struct Progress(Option<indicatif::ProgressBar>);

impl Progress {
    /// A bar labelled `message`, counting `unit`.
    pub fn on_terminal(message: &'static str, unit: &str) -> Progress {
        if !std::io::IsTerminal::is_terminal(&std::io::stderr()) {
            return Progress(None);
        }
        let bar = indicatif::ProgressBar::new(0);
        let template = format!("{{msg}} [{{bar:40}}] {{pos}}/{{len}} {unit} ({{per_sec}})");
        bar.set_style(
            indicatif::ProgressStyle::with_template(&template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar.set_message(message);
        Progress(Some(bar))
    }

    /// Records `done` of `total`; the library's progress callback.
    pub fn update(&self, done: usize, total: usize) {
        if let Some(bar) = &self.0 {
            bar.set_length(total as u64);
            bar.set_position(done as u64);
        }
    }

    /// Clears the bar; whether one was shown.
    pub fn finish(self) -> bool {
        self.0.map(|bar| bar.finish_and_clear()).is_some()
    }
}

/// Writes the whole file or nothing: a new temporary file beside it (created exclusively, with a
/// random name, so no link planted there is followed), renamed into place. `field` names the flag
/// in the error. A process killed by a signal between the two steps leaves that temporary file
/// (named `.FILE.*.partial`), never a partial FILE.
pub fn write_atomically(path: &std::path::Path, field: &str, text: &str) -> Result<(), CliError> {
    use std::io::Write as _;

    use crate::violation::{Violation, Violations};
    let shown = path.display().to_string();
    let failure = |err: std::io::Error| {
        CliError::Input(Violations::one(Violation::new(
            field,
            &shown,
            format!("cannot write {shown}: {err}"),
            "check that the directory exists and is writable",
        )))
    };
    let directory = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => std::path::Path::new("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let mut temporary = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".partial")
        .tempfile_in(directory)
        .map_err(failure)?;
    temporary.write_all(text.as_bytes()).and_then(|()| temporary.flush()).map_err(failure)?;
    temporary.persist(path).map_err(|err| failure(err.error))?;
    Ok(())
}
