//! How a command ends: its output written (an error that says so when it cannot be, as
//! on a full disk), and one exit status per kind of ending, the same in every command.

use std::io::Write;
use std::process::ExitCode;

/// The work failed (a run error, a peer that would not start, an output not written).
pub const FAILURE: u8 = 1;
/// Bad input: a flag, a chain file, a value. Nothing ran.
pub const USAGE: u8 = 2;
/// A run broke packet conservation: a bug, reported with its figures.
pub const CONSERVATION: u8 = 3;
/// Frames failed checksum or length verification (`--verify`).
pub const VERIFY_FAILED: u8 = 4;
/// Stopped by Ctrl-C: what finished was written, marked `interrupted`.
pub const INTERRUPTED: u8 = 130;

/// Writes a result document to stdout; a write error (a full disk, a closed pipe) is an
/// error message and a failure, never a panic.
pub fn emit(text: &str) -> Result<(), String> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| format!("cannot write the output: {e}"))
}

/// `emit`, then `status` (or a failure if the output could not be written).
pub fn emit_then(text: &str, status: u8) -> ExitCode {
    match emit(text) {
        Ok(()) => ExitCode::from(status),
        Err(e) => fail(FAILURE, &e),
    }
}

/// Prints `error: {message}` and returns `status`.
pub fn fail(status: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(status)
}

/// How a run that did not finish ends: bad input (nothing ran), a failure of the machine,
/// a peer or the result, or broken conservation.
pub fn of_run_error(e: &sfclab_runtime::RunError) -> u8 {
    match e {
        sfclab_runtime::RunError::Setting { .. } => USAGE,
        sfclab_runtime::RunError::Failed { .. } => FAILURE,
        sfclab_runtime::RunError::Conservation(_) => CONSERVATION,
    }
}

/// 0, or `INTERRUPTED` when the work was cut short by Ctrl-C.
pub fn done(interrupted: bool) -> u8 {
    if interrupted { INTERRUPTED } else { 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sfclab_experiment::{ChainSource, Experiment, Settings};
    use sfclab_runtime::RunError;

    /// Bad input, a failure of the machine and broken conservation end with three
    /// statuses, as the README says (the CLI tests run each end to end where the machine
    /// can produce it; a run cannot be made to lose packets through a chain file).
    #[test]
    fn each_kind_of_run_error_has_its_own_status() {
        assert_eq!(of_run_error(&RunError::setting("batch", "at least 1")), USAGE);
        assert_eq!(of_run_error(&RunError::failed("ports", "no peer connected")), FAILURE);
        let report = Experiment::load(
            &ChainSource::Shorthand("noop".into()),
            &Settings::default().count(1000u64).warmup(std::time::Duration::ZERO),
        )
        .unwrap()
        .run()
        .unwrap()
        .into_measured();
        assert_eq!(of_run_error(&RunError::Conservation(Box::new(report))), CONSERVATION);
        assert_eq!((done(false), done(true)), (0, INTERRUPTED));
    }
}
