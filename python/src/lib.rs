//! The `meshplan._native` extension module: runs one meshplan command line inside the Python
//! process and returns what the CLI would print, so the Python API's results are the CLI's JSON
//! byte for byte, always with the GIL released. A long command (`interruptible=True`: searches,
//! validation) runs on its own thread while the calling thread checks for Ctrl-C every 50 ms and
//! raises `KeyboardInterrupt` at once (the abandoned command finishes in the background and its
//! result is dropped); a short one (an estimate, under a millisecond to tens of milliseconds) runs
//! on the calling thread, which saves the thread's start. A Rust panic becomes `MeshplanError`,
//! never a crash of the interpreter.

use std::sync::mpsc;
use std::time::Duration;

use meshplan::cli::{self, CliError};
use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

create_exception!(
    _native,
    NativeInputError,
    PyException,
    "The input is wrong: args are (message, [problem dicts with field, value, message, hint])."
);
create_exception!(_native, NativeError, PyException, "meshplan failed for another reason.");

/// How often the waiting thread looks for a pending Ctrl-C.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Runs `meshplan WORDS...` and returns its output. Raises `NativeInputError` for bad input
/// (exit code 2 on the command line) and `NativeError` for anything else.
#[pyfunction]
#[pyo3(signature = (words, interruptible = false))]
fn run(py: Python<'_>, words: Vec<String>, interruptible: bool) -> PyResult<String> {
    let mut argv = vec!["meshplan".to_owned()];
    argv.extend(words);
    let outcome = if interruptible {
        run_interruptibly(py, argv)?
    } else {
        py.detach(move || std::panic::catch_unwind(|| cli::run_words(argv)))
    };
    match outcome {
        Ok(Ok(output)) => Ok(output),
        Ok(Err(error)) => Err(to_python(py, &error)),
        Err(panic) => {
            let what = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Err(NativeError::new_err(format!("internal error (a bug): {what}")))
        }
    }
}

/// What a command returned, or the panic that stopped it.
type Outcome = std::thread::Result<Result<String, CliError>>;

/// Runs the command on its own thread, watching for Ctrl-C while it runs.
fn run_interruptibly(py: Python<'_>, argv: Vec<String>) -> PyResult<Outcome> {
    let (sender, receiver) = mpsc::channel();
    std::thread::Builder::new()
        .name("meshplan".into())
        .spawn(move || {
            let outcome = std::panic::catch_unwind(|| cli::run_words(argv));
            // The receiver is gone when the caller was interrupted: nothing to deliver.
            let _ = sender.send(outcome);
        })
        .map_err(|err| NativeError::new_err(format!("cannot start the meshplan thread: {err}")))?;
    let mut receiver = receiver;
    loop {
        // The receiver travels into the GIL-free closure and back (it is not shareable).
        let (back, received) = py.detach(move || {
            let received = receiver.recv_timeout(SIGNAL_POLL);
            (receiver, received)
        });
        receiver = back;
        match received {
            Ok(outcome) => return Ok(outcome),
            Err(mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                return Err(NativeError::new_err("the meshplan thread ended without a result"));
            }
        }
    }
}

/// The Python exception for a failed command.
fn to_python(py: Python<'_>, error: &CliError) -> PyErr {
    match error {
        CliError::Input(violations) => {
            let problems = PyList::empty(py);
            for violation in violations.list() {
                let problem = PyDict::new(py);
                let items = [
                    ("field", &violation.field),
                    ("value", &violation.value),
                    ("message", &violation.message),
                    ("hint", &violation.hint),
                ];
                for (key, value) in items {
                    if let Err(err) = problem.set_item(key, value) {
                        return err;
                    }
                }
                if let Err(err) = problems.append(problem) {
                    return err;
                }
            }
            NativeInputError::new_err((error.to_string(), problems.unbind()))
        }
        CliError::Other(_) => NativeError::new_err(error.to_string()),
    }
}

/// The extension module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(run, m)?)?;
    m.add("NativeInputError", m.py().get_type::<NativeInputError>())?;
    m.add("NativeError", m.py().get_type::<NativeError>())?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
