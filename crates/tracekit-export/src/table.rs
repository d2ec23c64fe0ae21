//! One table's Parquet file, written as rows come: each table keeps column builders
//! for at most one row group and hands them, when full, to a thread of its own that
//! encodes and writes them (at most two row groups wait for it), so that memory does
//! not grow with the trace and encoding runs beside the decoding. An export into
//! memory writes the same bytes into a buffer instead of a file.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use arrow_array::builder::{BooleanBuilder, StringBuilder};
use arrow_array::types::{Float64Type, Int32Type, Int64Type};
use arrow_array::{Array, ArrayRef, ArrowPrimitiveType, PrimitiveArray, RecordBatch, StringArray};
use arrow_buffer::{NullBuffer, ScalarBuffer};
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::{Error, MemoryTable, Result, TraceFiles};

/// A table's columns after `trace_id`, as column builders.
pub(crate) trait Columns: Default {
    /// The columns built so far, in schema order; the builders are emptied.
    fn finish(&mut self) -> Vec<ArrayRef>;
}

/// One column being built.
pub(crate) trait ColumnBuilder: Default {
    /// The values so far as an arrow array; the builder is left empty.
    fn take(&mut self) -> ArrayRef;
}

impl ColumnBuilder for StringBuilder {
    fn take(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

impl ColumnBuilder for BooleanBuilder {
    fn take(&mut self) -> ArrayRef {
        Arc::new(self.finish())
    }
}

/// A primitive column without nulls: a plain `Vec`, handed to arrow without a copy.
///
/// Arrow's `PrimitiveBuilder::append_value` did not inline into the decoding loops
/// and regrew from empty after every row group; with a `Vec` whose capacity is kept,
/// an append is a store (see `docs/performance.md`).
pub(crate) struct Col<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
}

impl<T: ArrowPrimitiveType> Default for Col<T> {
    fn default() -> Self {
        Col { values: Vec::new() }
    }
}

impl<T: ArrowPrimitiveType> Col<T> {
    /// Appends `v`.
    #[inline(always)]
    pub(crate) fn append_value(&mut self, v: T::Native) {
        self.values.push(v);
    }
}

impl<T: ArrowPrimitiveType> ColumnBuilder for Col<T> {
    fn take(&mut self) -> ArrayRef {
        let n = self.values.len();
        let values = std::mem::replace(&mut self.values, Vec::with_capacity(n));
        Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(values), None))
    }
}

/// A primitive column with nulls: [`Col`] and a validity flag per row.
pub(crate) struct OptCol<T: ArrowPrimitiveType> {
    values: Vec<T::Native>,
    valid: Vec<bool>,
    nulls: usize,
}

impl<T: ArrowPrimitiveType> Default for OptCol<T> {
    fn default() -> Self {
        OptCol {
            values: Vec::new(),
            valid: Vec::new(),
            nulls: 0,
        }
    }
}

impl<T: ArrowPrimitiveType> OptCol<T> {
    /// Appends `v`.
    #[inline(always)]
    pub(crate) fn append_value(&mut self, v: T::Native) {
        self.values.push(v);
        self.valid.push(true);
    }

    /// Appends a null.
    #[inline(always)]
    pub(crate) fn append_null(&mut self) {
        self.values.push(T::Native::default());
        self.valid.push(false);
        self.nulls += 1;
    }

    /// Appends `v`, a null for `None`.
    #[inline(always)]
    pub(crate) fn append_option(&mut self, v: Option<T::Native>) {
        match v {
            Some(v) => self.append_value(v),
            None => self.append_null(),
        }
    }
}

impl<T: ArrowPrimitiveType> ColumnBuilder for OptCol<T> {
    fn take(&mut self) -> ArrayRef {
        let n = self.values.len();
        let values = std::mem::replace(&mut self.values, Vec::with_capacity(n));
        let valid = std::mem::replace(&mut self.valid, Vec::with_capacity(n));
        let nulls = (std::mem::take(&mut self.nulls) > 0).then(|| NullBuffer::from(valid));
        Arc::new(PrimitiveArray::<T>::new(ScalarBuffer::from(values), nulls))
    }
}

/// An `Int64` column.
pub(crate) type I64 = Col<Int64Type>;
/// An `Int32` column.
pub(crate) type I32 = Col<Int32Type>;
/// A `Float64` column.
pub(crate) type F64 = Col<Float64Type>;
/// A nullable `Int64` column.
pub(crate) type OptI64 = OptCol<Int64Type>;
/// A nullable `Int32` column.
pub(crate) type OptI32 = OptCol<Int32Type>;
/// A nullable `Float64` column.
pub(crate) type OptF64 = OptCol<Float64Type>;

/// Defines a [`Columns`] type whose fields are [`ColumnBuilder`]s, in schema order.
macro_rules! columns {
    ($(#[$m:meta])* $name:ident { $($col:ident: $builder:ty,)* }) => {
        $(#[$m])*
        #[derive(Default)]
        pub(crate) struct $name {
            $(pub(crate) $col: $builder,)*
        }

        impl $crate::table::Columns for $name {
            fn finish(&mut self) -> Vec<arrow_array::ArrayRef> {
                vec![$($crate::table::ColumnBuilder::take(&mut self.$col),)*]
            }
        }
    };
}
pub(crate) use columns;

/// Where a table's Parquet bytes go.
enum Sink {
    /// Its file.
    File(File),
    /// A buffer, added to `store` as table `name` when finished (an export into
    /// memory).
    Memory {
        bytes: Vec<u8>,
        name: &'static str,
        store: Arc<Mutex<Vec<MemoryTable>>>,
    },
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Sink::File(f) => f.write(buf),
            Sink::Memory { bytes, .. } => bytes.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Sink::File(f) => f.flush(),
            Sink::Memory { .. } => Ok(()),
        }
    }
}

/// Finishes `writer`'s table, whose file is `path` (named in errors): the file
/// synced, or the bytes added to the export in memory.
fn close(writer: ArrowWriter<Sink>, path: &Path) -> Result<()> {
    match writer.into_inner().map_err(|e| Error::write(path, e))? {
        Sink::File(file) => file.sync_all().map_err(|e| Error::write(path, e)),
        Sink::Memory { bytes, name, store } => {
            let table = MemoryTable {
                name,
                parquet: bytes.into(),
            };
            store
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(table);
            Ok(())
        }
    }
}

/// Starts table `name` of `files` for rows of `schema`: its file's path (where
/// it is written until committed), and the writer.
fn open(
    files: &mut TraceFiles,
    name: &'static str,
    schema: &SchemaRef,
    row_group: usize,
) -> Result<(PathBuf, ArrowWriter<Sink>)> {
    let path = files.path(name);
    let file = match files.memory() {
        Some(store) => Sink::Memory {
            bytes: Vec::new(),
            name,
            store: store.clone(),
        },
        None => Sink::File(File::create(&path).map_err(|e| Error::write(&path, e))?),
    };
    // Dictionaries for the text columns only (names, labels, the trace id repeat);
    // on ids, times and sizes, which rarely repeat, building one cost a fifth of an
    // export for nothing.
    let mut props = WriterProperties::builder()
        .set_compression(Compression::SNAPPY)
        .set_max_row_group_row_count(Some(row_group))
        .set_dictionary_enabled(false);
    for field in schema.fields() {
        if field.data_type() == &arrow_schema::DataType::Utf8 {
            props =
                props.set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), true);
        }
    }
    let writer = ArrowWriter::try_new(file, schema.clone(), Some(props.build()))
        .map_err(|e| Error::write(&path, e))?;
    Ok((path, writer))
}

/// Writes table `name` of `files` whole, on this thread: its `rows` rows built in
/// `cols`. For a table of a row or a few, where a writing thread would cost more
/// than it saves.
pub(crate) fn write_small<C: Columns>(
    files: &mut TraceFiles,
    name: &'static str,
    schema: SchemaRef,
    mut cols: C,
    rows: usize,
) -> Result<u64> {
    let (path, mut writer) = open(files, name, &schema, rows.max(1))?;
    let id = files.trace_id().to_string();
    let ids = StringArray::from_iter_values(std::iter::repeat_n(&id, rows));
    let mut columns: Vec<ArrayRef> = vec![Arc::new(ids)];
    columns.extend(cols.finish());
    let batch =
        RecordBatch::try_new(schema.clone(), columns).map_err(|e| Error::write(&path, e))?;
    writer.write(&batch).map_err(|e| Error::write(&path, e))?;
    close(writer, &path)?;
    Ok(rows as u64)
}

/// Rows per batch handed to the writing thread.
const BATCH_ROWS: usize = 16 * 1024;

/// A table being written.
pub(crate) struct TableWriter<C: Columns> {
    path: PathBuf,
    schema: SchemaRef,
    trace_id: String,
    /// `trace_id` repeated, sliced for each row group (built once, not per batch).
    ids: Option<StringArray>,
    /// To the thread that writes the file; `None` once it stopped (its error is
    /// what `finish` returns).
    batches: Option<std::sync::mpsc::SyncSender<RecordBatch>>,
    writer: Option<std::thread::JoinHandle<Result<()>>>,
    /// The columns of the rows not handed to the writer yet.
    pub(crate) cols: C,
    pending: usize,
    rows: u64,
    batch: usize,
}

impl<C: Columns> TableWriter<C> {
    /// Starts table `name` of the trace whose files are `files`.
    pub(crate) fn new(
        files: &mut TraceFiles,
        name: &'static str,
        schema: SchemaRef,
        batch: usize,
    ) -> Result<Self> {
        let row_group = batch.max(1);
        // Rows go to the writer in batches smaller than a row group: the writer's
        // per-batch work (levels, 8 bytes per row and column) then stays small, while
        // the row group, which the writer builds from several batches, keeps its size.
        let batch = row_group.min(BATCH_ROWS);
        let (path, mut writer) = open(files, name, &schema, row_group)?;
        let (batches, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
        let at = path.clone();
        let thread = std::thread::Builder::new()
            .name(format!("export-{name}"))
            .spawn(move || {
                for batch in rx {
                    writer.write(&batch).map_err(|e| Error::write(&at, e))?;
                }
                close(writer, &at)
            })
            .map_err(|e| Error::write(&path, e))?;
        Ok(TableWriter {
            path,
            schema,
            trace_id: files.trace_id().to_string(),
            ids: None,
            batches: Some(batches),
            writer: Some(thread),
            cols: C::default(),
            pending: 0,
            rows: 0,
            batch,
        })
    }

    /// Counts the row just appended to every column of `cols`.
    #[inline]
    pub(crate) fn row_done(&mut self) -> Result<()> {
        self.pending += 1;
        self.rows += 1;
        if self.pending >= self.batch {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<()> {
        if self.pending == 0 {
            return Ok(());
        }
        if self.ids.as_ref().is_none_or(|ids| ids.len() < self.pending) {
            let ids = std::iter::repeat_n(&self.trace_id, self.pending);
            self.ids = Some(StringArray::from_iter_values(ids));
        }
        let ids = self.ids.as_ref().map(|ids| ids.slice(0, self.pending));
        let mut columns: Vec<ArrayRef> = ids.into_iter().map(|a| Arc::new(a) as ArrayRef).collect();
        columns.extend(self.cols.finish());
        let batch = RecordBatch::try_new(self.schema.clone(), columns)
            .map_err(|e| Error::write(&self.path, e))?;
        self.pending = 0;
        let sent = self.batches.as_ref().is_some_and(|b| b.send(batch).is_ok());
        if !sent {
            // The writer stopped on an error: that error.
            self.batches = None;
            return self.join();
        }
        Ok(())
    }

    /// Waits for the writing thread; its error, if any.
    fn join(&mut self) -> Result<()> {
        self.batches = None;
        match self.writer.take().map(|w| w.join()) {
            Some(Ok(result)) => result,
            Some(Err(_)) => Err(Error::write(&self.path, "the writing thread panicked")),
            None => Ok(()),
        }
    }

    /// Writes the last rows and closes the file; the number of rows.
    pub(crate) fn finish(mut self) -> Result<u64> {
        self.flush()?;
        self.join()?;
        Ok(self.rows)
    }
}
