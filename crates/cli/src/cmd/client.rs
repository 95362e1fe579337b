//! Client commands against a running domain: put, get, rm, stats.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine;

use super::ServerArgs;
use xarchive::failure::NotFound;

#[derive(clap::Args)]
pub struct IdArgs {
    /// The archive ID.
    #[arg(value_parser = super::archive_id)]
    id: String,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct PutArgs {
    /// The archive ID.
    #[arg(value_parser = super::archive_id)]
    id: String,
    /// The record's title (题名).
    #[arg(long)]
    title: String,
    /// Metadata as a JSON object.
    #[arg(long)]
    metadata: Option<String>,
    /// A file whose bytes become the record's content.
    #[arg(long)]
    content_file: Option<PathBuf>,
    /// Keys as a JSON object of strings by key type:
    /// `{"id_card": "11010519491231002X"}`.
    #[arg(long)]
    keys: Option<String>,
    #[command(flatten)]
    server: ServerArgs,
}

#[derive(clap::Args)]
pub struct StatsArgs {
    #[command(flatten)]
    server: ServerArgs,
}

pub async fn put(args: PutArgs) -> anyhow::Result<ExitCode> {
    let mut body = serde_json::json!({ "title": args.title });
    if let Some(m) = &args.metadata {
        let metadata: serde_json::Value =
            serde_json::from_str(m).context("--metadata is not valid JSON")?;
        anyhow::ensure!(metadata.is_object(), "--metadata must be a JSON object");
        body["metadata"] = metadata;
    }
    if let Some(k) = &args.keys {
        let keys: std::collections::BTreeMap<String, String> = serde_json::from_str(k)
            .context("--keys must be a JSON object of strings by key type")?;
        body["keys"] = serde_json::to_value(keys)?;
    }
    if let Some(path) = &args.content_file {
        let bytes =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        body["content"] = base64::engine::general_purpose::STANDARD
            .encode(bytes)
            .into();
    }
    let (created, record) = args.server.client()?.put(&args.id, &body).await?;
    if super::json(false) {
        super::print_json(&serde_json::json!({"created": created, "record": record}))?;
        return Ok(ExitCode::SUCCESS);
    }
    xarchive::outln!(
        "{} {} in domain {}",
        if created { "created" } else { "replaced" },
        record.id,
        record.domain
    );
    Ok(ExitCode::SUCCESS)
}

pub async fn get(args: IdArgs) -> anyhow::Result<ExitCode> {
    match args.server.client()?.get(&args.id).await? {
        Some(record) => {
            super::print_json(&record)?;
            Ok(ExitCode::SUCCESS)
        }
        None => Err(NotFound(args.id).into()),
    }
}

pub async fn rm(args: IdArgs) -> anyhow::Result<ExitCode> {
    if args.server.client()?.delete(&args.id).await? {
        if super::json(false) {
            super::print_json(&serde_json::json!({"deleted": args.id}))?;
        } else {
            xarchive::outln!("deleted {}", args.id);
        }
        Ok(ExitCode::SUCCESS)
    } else {
        Err(NotFound(args.id).into())
    }
}

pub async fn stats(args: StatsArgs) -> anyhow::Result<ExitCode> {
    let stats = args.server.client()?.stats().await?;
    super::print_json(&stats)?;
    Ok(ExitCode::SUCCESS)
}
