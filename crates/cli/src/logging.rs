//! Where logs go and how they look: standard error, text for people or
//! JSON for a collector, filtered by `-v` or `XARCHIVE_LOG`; the same for
//! `xarchive` and `xarchive-bench`.

/// The form of the log lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

/// Sets up logging: `quiet` is the filter without `-v` (`verbose` 0) or
/// `XARCHIVE_LOG`.
pub fn init(verbose: u8, quiet: &str, format: LogFormat) {
    let default = match verbose {
        0 => quiet,
        1 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("XARCHIVE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false);
    match format {
        LogFormat::Json => logs.json().init(),
        LogFormat::Text => logs.with_ansi(colour()).init(),
    }
}

/// Colour only on a terminal, and not when `NO_COLOR` is set to anything
/// (no-color.org).
fn colour() -> bool {
    std::io::IsTerminal::is_terminal(&std::io::stderr())
        && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
