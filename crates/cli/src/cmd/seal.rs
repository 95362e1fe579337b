//! `xarchive seal keys|rotate|revoke|public-key`: the keys a domain seals
//! copies, answers and certificates with, in its data directory's seal/.
//! Changed only while the domain is stopped (its next start publishes the
//! keys in the trust list); every key used before stays, so that what it
//! sealed still verifies, unless revoked.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Subcommand;
use xarchive_node::security::seal::Keyring;
use xarchive_seal::{Algorithm, KeyId};

#[derive(Subcommand)]
pub enum SealCommand {
    /// Every key the domain seals or sealed with: algorithm, validity,
    /// whether revoked, whether its CA certified it.
    Keys(SealArgs),
    /// Seal with a new key from now on (the domain stopped); what the one
    /// before sealed stays valid.
    Rotate {
        /// The new key's algorithm: sm2-sm3 or ed25519.
        #[arg(long, default_value = "sm2-sm3")]
        algorithm: Algorithm,
        #[command(flatten)]
        seal: SealArgs,
    },
    /// Revoke a key (stolen, say): nothing it sealed verifies any more,
    /// whenever dated; revoking the key in use makes a new one.
    Revoke {
        /// The key's ID, as `seal keys` prints it.
        id: String,
        #[command(flatten)]
        seal: SealArgs,
    },
    /// Print the key in use's public half (PEM), as OpenSSL reads it.
    PublicKey(SealArgs),
}

#[derive(clap::Args)]
pub struct SealArgs {
    /// The domain's data directory (default: its configuration's).
    #[arg(long)]
    data: Option<PathBuf>,
    /// The domain's configuration file (its [seal] section).
    #[arg(long)]
    config: Option<PathBuf>,
}

impl SealArgs {
    fn open(&self) -> anyhow::Result<(PathBuf, xarchive_node::config::SealConfig)> {
        let config = super::serve::layered(self.config.as_deref())?;
        let data = self.data.clone().unwrap_or(config.data);
        anyhow::ensure!(
            data.is_dir(),
            "{} is not a domain's data directory (say which with --data)",
            data.display()
        );
        Ok((data, config.seal))
    }

    /// As [`open`](Self::open), refusing a domain that is running.
    fn open_stopped(&self) -> anyhow::Result<(PathBuf, xarchive_node::config::SealConfig)> {
        let (data, seal) = self.open()?;
        anyhow::ensure!(
            !xarchive_node::in_use(&data),
            "the domain of {} is running: stop it first (its next start publishes the keys)",
            data.display()
        );
        Ok((data, seal))
    }
}

pub fn run(command: SealCommand) -> anyhow::Result<ExitCode> {
    match command {
        SealCommand::Keys(args) => {
            let (data, seal) = args.open()?;
            let keyring = Keyring::open(&data, &seal).context("cannot read the seal's keys")?;
            if super::json(false) {
                super::print_json(&keyring.records())?;
                return Ok(ExitCode::SUCCESS);
            }
            let active = keyring.active().public().id();
            let mut rows = vec![super::table::row([
                "KEY",
                "ALGORITHM",
                "FROM",
                "UNTIL",
                "STATE",
            ])];
            for r in keyring.records() {
                let mut state = match (&r.revoked, r.id == active) {
                    (Some(at), _) => format!("revoked {at}"),
                    (None, true) => "in use".to_owned(),
                    (None, false) => "retired".to_owned(),
                };
                if r.certificate.is_some() {
                    state.push_str(", CA certificate");
                }
                rows.push(vec![
                    r.id.to_string(),
                    r.algorithm.name().to_owned(),
                    r.not_before.clone(),
                    r.not_after.clone().unwrap_or_else(|| "—".into()),
                    state,
                ]);
            }
            super::table::print_table(&rows)?;
            Ok(ExitCode::SUCCESS)
        }
        SealCommand::Rotate { algorithm, seal } => {
            let (data, config) = seal.open_stopped()?;
            let record = Keyring::rotate(&data, &config, algorithm)?;
            xarchive::outln!(
                "sealing with the new {} key {} from now on",
                record.algorithm,
                record.id
            );
            Ok(ExitCode::SUCCESS)
        }
        SealCommand::Revoke { id, seal } => {
            let id = KeyId::parse(&id).map_err(|e| xarchive::failure::Usage(e.to_string()))?;
            let (data, config) = seal.open_stopped()?;
            Keyring::revoke(&data, &config, id)?;
            xarchive::outln!(
                "revoked {id}: nothing it sealed verifies from the domain's next start"
            );
            Ok(ExitCode::SUCCESS)
        }
        SealCommand::PublicKey(args) => {
            let (data, seal) = args.open()?;
            let keyring = Keyring::open(&data, &seal).context("cannot read the seal's keys")?;
            xarchive::outln!("{}", keyring.active().public().to_pem().trim_end());
            Ok(ExitCode::SUCCESS)
        }
    }
}
