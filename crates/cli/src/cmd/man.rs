//! `xarchive man`: the manual, one page per command, so that every page
//! the SUBCOMMANDS section names (`xarchive-import(1)`) exists: `man`
//! prints xarchive(1), `man import` xarchive-import(1), `man request
//! submit` xarchive-request-submit(1), and `man --dir DIR` writes them all
//! (the Debian package installs them). `clap_mangen` draws each page from
//! the command line's own definitions; the main page adds what a manual
//! must say that clap does not know: EXIT STATUS, ENVIRONMENT, FILES.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use roff::{bold, italic, roman, Roff};

use xarchive::failure::{Usage, EXIT_ERROR, EXIT_NOT_FOUND, EXIT_UNAVAILABLE, EXIT_USAGE};

#[derive(clap::Args)]
pub struct ManArgs {
    /// The command whose page to print (`import`, `request submit`);
    /// none: xarchive(1).
    command: Vec<String>,
    /// Write every page (xarchive.1, xarchive-import.1, …) into this
    /// directory instead of printing one.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    dir: Option<PathBuf>,
}

pub fn run(args: ManArgs) -> anyhow::Result<ExitCode> {
    let pages = pages()?;
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        for (name, page) in &pages {
            let path = dir.join(format!("{name}.1"));
            std::fs::write(&path, page)
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if super::json(false) {
            let names: Vec<&String> = pages.iter().map(|(name, _)| name).collect();
            super::print_json(&serde_json::json!({"dir": dir, "pages": names}))?;
        } else {
            xarchive::errln!("{} pages written to {}", pages.len(), dir.display());
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = std::iter::once("xarchive")
        .chain(args.command.iter().map(String::as_str))
        .collect::<Vec<_>>()
        .join("-");
    let Some((_, page)) = pages.iter().find(|(n, _)| *n == name) else {
        return Err(Usage(format!(
            "no manual page {name}(1): `xarchive man` names every command's page in its SUBCOMMANDS section"
        ))
        .into());
    };
    use std::io::Write as _;
    xarchive::output::stdout().write_all(page)?;
    Ok(ExitCode::SUCCESS)
}

/// Every page, by name (`xarchive`, `xarchive-import`, …), the main first.
fn pages() -> anyhow::Result<Vec<(String, Vec<u8>)>> {
    let mut command = <super::Cli as clap::CommandFactory>::command().disable_help_subcommand(true);
    command.build();
    let mut pages = Vec::new();
    let mut main = Vec::new();
    clap_mangen::Man::new(command.clone()).render(&mut main)?;
    main.extend_from_slice(main_sections().render().as_bytes());
    pages.push(("xarchive".to_owned(), main));
    fn walk(command: &clap::Command, pages: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
        for sub in command.get_subcommands().filter(|s| !s.is_hide_set()) {
            let name = sub
                .get_display_name()
                .unwrap_or_else(|| sub.get_name())
                .to_owned();
            let mut page = Vec::new();
            clap_mangen::Man::new(sub.clone()).render(&mut page)?;
            let mut see_also = Roff::new();
            see_also
                .control("SH", ["SEE ALSO"])
                .text([bold("xarchive"), roman("(1)")]);
            page.extend_from_slice(see_also.render().as_bytes());
            pages.push((name, page));
            walk(sub, pages)?;
        }
        Ok(())
    }
    walk(&command, &mut pages)?;
    Ok(pages)
}

/// EXIT STATUS, ENVIRONMENT and FILES of xarchive(1).
fn main_sections() -> Roff {
    let mut roff = Roff::new();
    let item = |roff: &mut Roff, term: &str, text: &str| {
        roff.control("TP", [] as [&str; 0])
            .text([bold(term)])
            .text([roman(text)]);
    };
    roff.control("SH", ["EXIT STATUS"]);
    for (code, text) in [
        (0, "Success; also when standard output is a pipe closed by its reader (as with head)."),
        (EXIT_ERROR, "An error: the message on standard error says what went wrong, with a hint where one helps."),
        (EXIT_USAGE, "Bad usage: a flag or value that cannot be used (the message names it), or a request the server refused as malformed, such as an invalid ID."),
        (EXIT_NOT_FOUND, "Not found: the server said the record, request, review or certificate asked for is not there. A wrong path or server is an error (1), never this."),
        (EXIT_UNAVAILABLE, "A lookup or search could not reach every domain that might hold a record, or could not confirm the cluster's membership."),
    ] {
        item(&mut roff, &code.to_string(), text);
    }
    roff.text([roman(
        "With --output json, standard output is one JSON document, a failure's included: \
         {\"error\": {\"code\", \"message\", \"hint\"}}, the exit status unchanged.",
    )]);
    roff.control("SH", ["ENVIRONMENT"]);
    for (name, text) in [
        ("XARCHIVE_SERVER", "The domain a client command asks (--server); default http://127.0.0.1:7700."),
        ("XARCHIVE_TOKEN", "The API token a client command sends (--token). Empty is refused."),
        ("XARCHIVE_TLS_CA", "The only certificate authority trusted for HTTPS (--tls-ca)."),
        ("XARCHIVE_OUTPUT", "text or json, as --output."),
        ("XARCHIVE_LOG_FORMAT", "text or json, as --log-format."),
        ("XARCHIVE_LOG", "The log's filter (tracing's EnvFilter syntax), over -v."),
        ("XARCHIVE_CONFIG", "A domain's configuration file (serve, up, cluster forget)."),
        ("XARCHIVE_<SECTION>__<KEY>", "Any key of the configuration file, over the file: XARCHIVE_LIMITS__MIN_FREE_BYTES=1073741824."),
        ("XARCHIVE_NAME, XARCHIVE_LISTEN, XARCHIVE_DATA, XARCHIVE_ZK, XARCHIVE_CLUSTER, XARCHIVE_ADVERTISE", "The flags of serve of the same names; see xarchive-serve(1) for the others."),
        ("NO_COLOR", "When set, text logs are not coloured."),
    ] {
        item(&mut roff, name, text);
    }
    roff.control("SH", ["FILES"]);
    for (name, text) in [
        ("/etc/xarchive/NAME.toml", "The configuration of domain NAME as the Debian package's unit xarchive@NAME reads it; /etc/xarchive/domain.toml is the commented example to copy."),
        ("/var/lib/xarchive/NAME", "Domain NAME's data directory: records.redb (the store), audit.redb (the log of searches by private key), requests.redb (cross-archive requests), peers.json (the peers known), signing.key (the key that signs released copies)."),
        ("./xarchive-data", "Where xarchive up keeps its domains' data, one directory each, by default."),
    ] {
        item(&mut roff, name, text);
    }
    roff.control("SH", ["SEE ALSO"]).text([
        italic("README.md"),
        roman(", "),
        italic("OPERATIONS.md"),
        roman(" and "),
        italic("SECURITY.md"),
        roman(" in /usr/share/doc/xarchive."),
    ]);
    roff
}
