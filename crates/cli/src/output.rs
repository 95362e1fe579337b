//! What a command prints, in one place: the form (`--output text|json`),
//! standard output written through [`outln!`](crate::outln) and
//! [`print_json`], standard error through [`errln!`](crate::errln), and
//! what a closed pipe means (`xarchive … | head -1`): the reader has what
//! it wanted, so the command ends quietly with exit 0, as `ls | head` does.
//!
//! `std::println!` panics when standard output is a closed pipe (Rust
//! ignores SIGPIPE, so a write fails with `EPIPE`), and an error from a
//! bare `std::io::stdout()` cannot be told from a peer's socket closing.
//! Every write to standard output therefore goes through [`Stdout`], which
//! marks its broken pipe as [`ClosedPipe`]; `failure` ends a command with
//! such an error in its chain as a success. The binary denies
//! `clippy::print_stdout` and `clippy::print_stderr`, so new code cannot
//! bypass this.

use std::io::{self, Write};
use std::sync::OnceLock;

/// The form of what a command prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Text,
    Json,
}

static FORM: OnceLock<Output> = OnceLock::new();

/// Sets the form for the rest of the process (once; later calls are
/// ignored).
pub fn set(form: Output) {
    let _ = FORM.set(form);
}

/// Whether commands print JSON (`--output json` or `XARCHIVE_OUTPUT=json`).
pub fn json() -> bool {
    FORM.get() == Some(&Output::Json)
}

/// Standard output was a pipe whose reader went away.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub struct ClosedPipe;

/// Standard output, whose broken pipe is told apart from any other
/// broken pipe (a peer's connection) as [`ClosedPipe`].
pub struct Stdout(io::Stdout);

/// Standard output for a command's writes.
pub fn stdout() -> Stdout {
    Stdout(io::stdout())
}

fn marked(e: io::Error) -> io::Error {
    if e.kind() == io::ErrorKind::BrokenPipe {
        io::Error::new(io::ErrorKind::BrokenPipe, ClosedPipe)
    } else {
        e
    }
}

impl Write for Stdout {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.write(buf).map_err(marked)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.0.flush().map_err(marked)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf).map_err(marked)
    }
}

/// Whether `e` is standard output's reader having gone away.
pub fn closed_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|cause| {
        cause.is::<ClosedPipe>()
            || cause
                .downcast_ref::<io::Error>()
                .and_then(io::Error::get_ref)
                .is_some_and(|inner| inner.is::<ClosedPipe>())
    })
}

/// One line on standard output (what [`outln!`](crate::outln) calls).
pub fn line(args: std::fmt::Arguments<'_>) -> io::Result<()> {
    let mut out = stdout();
    out.write_fmt(args)?;
    out.write_all(b"\n")
}

/// One line on standard error; a closed standard error is not reported
/// (there is nowhere left to report it).
pub fn error_line(args: std::fmt::Arguments<'_>) {
    let mut err = io::stderr().lock();
    let _ = err.write_fmt(args).and_then(|()| err.write_all(b"\n"));
}

/// Prints `value` as the command's one JSON document.
pub fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    stdout().write_all(text.as_bytes())?;
    Ok(())
}

/// `println!` for commands: a line on standard output, returning early
/// with the error (a closed pipe included) from the enclosing function.
#[macro_export]
macro_rules! outln {
    () => {
        $crate::output::line(format_args!(""))?
    };
    ($($arg:tt)*) => {
        $crate::output::line(format_args!($($arg)*))?
    };
}

/// `eprintln!` for commands: a line on standard error, never a panic.
#[macro_export]
macro_rules! errln {
    ($($arg:tt)*) => {
        $crate::output::error_line(format_args!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_on_standard_output_is_told_from_any_other() {
        let ours = anyhow::Error::from(marked(io::Error::from(io::ErrorKind::BrokenPipe)))
            .context("cannot write the export");
        assert!(closed_pipe(&ours));
        let peer = anyhow::Error::from(io::Error::from(io::ErrorKind::BrokenPipe));
        assert!(!closed_pipe(&peer));
        let other = anyhow::Error::from(marked(io::Error::from(io::ErrorKind::StorageFull)));
        assert!(!closed_pipe(&other));
    }
}
