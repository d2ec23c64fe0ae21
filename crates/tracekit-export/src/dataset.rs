//! Where a trace's tables land: written into a hidden folder beside the dataset and
//! moved to `DIR/<table>/<trace_id>.parquet` only once every table is complete, so
//! that an export that fails or is interrupted leaves the dataset as it was; or
//! kept in memory, the same Parquet bytes ([`MemoryTables`]), for a query that
//! writes no file.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::{Error, Result, TraceId};

/// The files of one trace's export, in progress.
pub struct TraceFiles {
    dir: PathBuf,
    trace_id: TraceId,
    /// Where the tables are written until they are complete.
    temp: PathBuf,
    /// The temporary folder, when this owns it (removed when dropped).
    owned: Option<tempfile::TempDir>,
    tables: Vec<&'static str>,
    /// Set for an export into memory: the tables written so far (no file then).
    memory: Option<Arc<Mutex<Vec<MemoryTable>>>>,
}

/// One table of a trace, in memory: the bytes of the Parquet file an export
/// writes, compressed as on disk (a seventh of the table's Arrow arrays, whose
/// size grows with the trace).
#[derive(Clone, Debug)]
pub struct MemoryTable {
    /// The table's name ([`crate::schema::Table::name`]).
    pub name: &'static str,
    /// The Parquet file (shared, not copied, by a clone).
    pub parquet: bytes::Bytes,
}

/// A trace's tables in memory ([`crate::export_to_memory`]).
#[derive(Clone, Debug)]
pub struct MemoryTables {
    /// The trace's id: the `trace_id` of every row.
    pub trace_id: TraceId,
    /// Its tables, in the order they were finished.
    pub tables: Vec<MemoryTable>,
}

impl MemoryTables {
    /// Table `name`, if the trace has it.
    pub fn table(&self, name: &str) -> Option<&MemoryTable> {
        self.tables.iter().find(|t| t.name == name)
    }
}

impl TraceFiles {
    /// Starts the export of trace `trace_id` into dataset directory `dir` (made if
    /// missing), through a temporary folder of its own inside it.
    pub fn new(dir: &Path, trace_id: TraceId) -> Result<TraceFiles> {
        fs::create_dir_all(dir).map_err(|e| Error::write(dir, e))?;
        let owned = tempfile::Builder::new()
            .prefix(&format!(".export-{trace_id}."))
            .tempdir_in(dir)
            .map_err(|e| Error::write(dir, e))?;
        Ok(TraceFiles {
            dir: dir.to_path_buf(),
            trace_id,
            temp: owned.path().to_path_buf(),
            owned: Some(owned),
            tables: Vec::new(),
            memory: None,
        })
    }

    /// As [`TraceFiles::new`], through the empty folder `temp` that the caller made
    /// (on the same file system as `dir`) and removes: a command that must clean up
    /// after an interrupt keeps track of it.
    pub fn with_temp_dir(dir: &Path, temp: &Path, trace_id: TraceId) -> Result<TraceFiles> {
        fs::create_dir_all(dir).map_err(|e| Error::write(dir, e))?;
        Ok(TraceFiles {
            dir: dir.to_path_buf(),
            trace_id,
            temp: temp.to_path_buf(),
            owned: None,
            tables: Vec::new(),
            memory: None,
        })
    }

    /// An export of trace `trace_id` into memory: no file is written, and
    /// [`TraceFiles::into_memory`] gives the tables.
    pub(crate) fn in_memory(trace_id: TraceId) -> TraceFiles {
        TraceFiles {
            dir: PathBuf::new(),
            trace_id,
            temp: PathBuf::new(),
            owned: None,
            tables: Vec::new(),
            memory: Some(Arc::default()),
        }
    }

    /// Where tables go in an export into memory; `None` for files.
    pub(crate) fn memory(&self) -> Option<&Arc<Mutex<Vec<MemoryTable>>>> {
        self.memory.as_ref()
    }

    /// The tables of an export into memory (none for an export into files).
    pub(crate) fn into_memory(self) -> MemoryTables {
        let tables = self.memory.map_or_else(Vec::new, |m| {
            std::mem::take(&mut *m.lock().unwrap_or_else(PoisonError::into_inner))
        });
        MemoryTables {
            trace_id: self.trace_id,
            tables,
        }
    }

    /// The trace's id.
    pub fn trace_id(&self) -> TraceId {
        self.trace_id
    }

    /// Where table `table` is written until [`TraceFiles::commit`].
    pub(crate) fn path(&mut self, table: &'static str) -> PathBuf {
        if !self.tables.contains(&table) {
            self.tables.push(table);
        }
        self.temp.join(format!("{table}.parquet"))
    }

    /// The final path of `table`'s file.
    pub fn final_path(&self, table: &str) -> PathBuf {
        self.dir
            .join(table)
            .join(format!("{}.parquet", self.trace_id))
    }

    /// Moves every table's file into place (replacing an earlier export of the same
    /// trace) and removes the temporary folder.
    pub fn commit(self) -> Result<()> {
        for table in &self.tables {
            let from = self.temp.join(format!("{table}.parquet"));
            let to = self.final_path(table);
            if let Some(parent) = to.parent() {
                fs::create_dir_all(parent).map_err(|e| Error::write(parent, e))?;
            }
            fs::rename(&from, &to).map_err(|e| Error::write(&to, e))?;
        }
        match self.owned {
            Some(owned) => owned.close().map_err(|e| Error::write(&self.temp, e)),
            None => Ok(()),
        }
    }
}
