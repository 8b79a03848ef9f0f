//! The SQLite catalogue: one row per model name, the blobs each name
//! references, and which blob a pull source (URL, default model) produced.
//!
//! Schema versions are tracked with `PRAGMA user_version`; [`open`] migrates
//! older databases forward and refuses newer ones.

use std::path::Path;
use std::time::Duration;

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use crate::digest::Digest;
use crate::error::{RegistryError, Result};

/// The schema this build writes.
pub(crate) const SCHEMA_VERSION: i64 = 1;

const SCHEMA_V1: &str = "
CREATE TABLE models (
    name            TEXT PRIMARY KEY COLLATE NOCASE,
    manifest_digest TEXT NOT NULL,
    manifest        TEXT NOT NULL,
    modified_at     TEXT NOT NULL
);
CREATE TABLE blob_refs (
    name   TEXT NOT NULL COLLATE NOCASE REFERENCES models(name) ON DELETE CASCADE,
    digest TEXT NOT NULL,
    PRIMARY KEY (name, digest)
);
CREATE INDEX blob_refs_digest ON blob_refs(digest);
CREATE TABLE sources (
    source TEXT PRIMARY KEY,
    digest TEXT NOT NULL
);
";

/// One stored model row.
pub(crate) struct ModelRow {
    pub name: String,
    pub manifest_digest: String,
    pub manifest: String,
    pub modified_at: String,
}

/// Opens (creating or migrating) the database at `path` in WAL mode.
pub(crate) fn open(path: &Path) -> Result<Connection> {
    let mut conn = Connection::open(path)?;
    conn.busy_timeout(Duration::from_secs(10))?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "NORMAL")?;
    conn.pragma_update(None, "foreign_keys", "ON")?;
    let version: i64 = conn.pragma_query_value(None, "user_version", |r| r.get(0))?;
    if version > SCHEMA_VERSION {
        return Err(RegistryError::SchemaTooNew {
            path: path.to_path_buf(),
            found: version,
            supported: SCHEMA_VERSION,
        });
    }
    if version < 1 {
        let tx = conn.transaction()?;
        tx.execute_batch(SCHEMA_V1)?;
        tx.pragma_update(None, "user_version", 1)?;
        tx.commit()?;
    }
    // Later versions migrate here: `if version < 2 { ... }`.
    Ok(conn)
}

const ROW_COLUMNS: &str = "name, manifest_digest, manifest, modified_at";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ModelRow> {
    Ok(ModelRow {
        name: r.get(0)?,
        manifest_digest: r.get(1)?,
        manifest: r.get(2)?,
        modified_at: r.get(3)?,
    })
}

pub(crate) fn all_models(conn: &Connection) -> Result<Vec<ModelRow>> {
    let mut stmt = conn.prepare(&format!(
        "SELECT {ROW_COLUMNS} FROM models ORDER BY name COLLATE NOCASE"
    ))?;
    let rows = stmt.query_map([], row)?.collect::<rusqlite::Result<_>>()?;
    Ok(rows)
}

pub(crate) fn get_model(conn: &Connection, name: &str) -> Result<Option<ModelRow>> {
    Ok(conn
        .query_row(
            &format!("SELECT {ROW_COLUMNS} FROM models WHERE name = ?1"),
            [name],
            row,
        )
        .optional()?)
}

/// The blobs `name` references.
pub(crate) fn model_blobs(conn: &Connection, name: &str) -> Result<Vec<Digest>> {
    let mut stmt = conn.prepare("SELECT digest FROM blob_refs WHERE name = ?1")?;
    let texts: Vec<String> = stmt
        .query_map([name], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    texts
        .iter()
        .map(|t| {
            Digest::parse(t).map_err(|_| RegistryError::Corrupt {
                name: name.to_string(),
                reason: format!("bad blob digest {t:?}"),
            })
        })
        .collect()
}

/// Inserts or replaces the row for `row.name` with its blob references;
/// returns the blobs the replaced row referenced.
pub(crate) fn put_model(
    tx: &Transaction<'_>,
    row: &ModelRow,
    blobs: &[Digest],
) -> Result<Vec<Digest>> {
    let old = model_blobs(tx, &row.name)?;
    tx.execute("DELETE FROM models WHERE name = ?1", [&row.name])?;
    tx.execute(
        &format!("INSERT INTO models ({ROW_COLUMNS}) VALUES (?1, ?2, ?3, ?4)"),
        params![row.name, row.manifest_digest, row.manifest, row.modified_at],
    )?;
    for d in blobs {
        tx.execute(
            "INSERT OR IGNORE INTO blob_refs (name, digest) VALUES (?1, ?2)",
            params![row.name, d.as_str()],
        )?;
    }
    Ok(old)
}

/// Deletes `name`; returns the blobs it referenced, or `None` if it did not exist.
pub(crate) fn delete_model(tx: &Transaction<'_>, name: &str) -> Result<Option<Vec<Digest>>> {
    let old = model_blobs(tx, name)?;
    let n = tx.execute("DELETE FROM models WHERE name = ?1", [name])?;
    Ok((n > 0).then_some(old))
}

/// Whether any model references the blob.
pub(crate) fn is_referenced(conn: &Connection, digest: &Digest) -> Result<bool> {
    Ok(conn
        .query_row(
            "SELECT 1 FROM blob_refs WHERE digest = ?1 LIMIT 1",
            [digest.as_str()],
            |_| Ok(()),
        )
        .optional()?
        .is_some())
}

/// The blob a pull source produced last time, if recorded.
pub(crate) fn source_digest(conn: &Connection, source: &str) -> Result<Option<Digest>> {
    let text: Option<String> = conn
        .query_row(
            "SELECT digest FROM sources WHERE source = ?1",
            [source],
            |r| r.get(0),
        )
        .optional()?;
    Ok(text.and_then(|t| Digest::parse(&t).ok()))
}

pub(crate) fn set_source_digest(conn: &Connection, source: &str, digest: &Digest) -> Result<()> {
    conn.execute(
        "INSERT OR REPLACE INTO sources (source, digest) VALUES (?1, ?2)",
        params![source, digest.as_str()],
    )?;
    Ok(())
}
