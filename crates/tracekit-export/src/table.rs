//! One table's Parquet file, written as rows come: each table keeps column builders
//! for at most one row group and hands them, when full, to a thread of its own that
//! encodes and writes them (at most two row groups wait for it), so that memory does
//! not grow with the trace and encoding runs beside the decoding.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;
use parquet::schema::types::ColumnPath;

use crate::{Error, Result, TraceFiles};

/// A table's columns after `trace_id`, as arrow builders.
pub(crate) trait Columns: Default {
    /// The columns built so far, in schema order; the builders are emptied.
    fn finish(&mut self) -> Vec<ArrayRef>;
}

/// Defines a [`Columns`] type whose fields are arrow builders, in schema order.
macro_rules! columns {
    ($(#[$m:meta])* $name:ident { $($col:ident: $builder:ty,)* }) => {
        $(#[$m])*
        #[derive(Default)]
        pub(crate) struct $name {
            $(pub(crate) $col: $builder,)*
        }

        impl $crate::table::Columns for $name {
            fn finish(&mut self) -> Vec<arrow_array::ArrayRef> {
                vec![$(arrow_array::builder::ArrayBuilder::finish(&mut self.$col),)*]
            }
        }
    };
}
pub(crate) use columns;

/// A table being written.
pub(crate) struct TableWriter<C: Columns> {
    path: PathBuf,
    schema: SchemaRef,
    trace_id: String,
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
        let path = files.path(name);
        let file = File::create(&path).map_err(|e| Error::write(&path, e))?;
        let batch = batch.max(1);
        // Dictionaries for the text columns only (names, labels, the trace id repeat);
        // on ids, times and sizes, which rarely repeat, building one cost a fifth of
        // an export for nothing.
        let mut props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(batch))
            .set_dictionary_enabled(false);
        for field in schema.fields() {
            if field.data_type() == &arrow_schema::DataType::Utf8 {
                props = props
                    .set_column_dictionary_enabled(ColumnPath::from(field.name().as_str()), true);
            }
        }
        let props = props.build();
        let mut writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| Error::write(&path, e))?;
        let (batches, rx) = std::sync::mpsc::sync_channel::<RecordBatch>(1);
        let at = path.clone();
        let thread = std::thread::Builder::new()
            .name(format!("export-{name}"))
            .spawn(move || {
                for batch in rx {
                    writer.write(&batch).map_err(|e| Error::write(&at, e))?;
                }
                let file = writer.into_inner().map_err(|e| Error::write(&at, e))?;
                file.sync_all().map_err(|e| Error::write(&at, e))
            })
            .map_err(|e| Error::write(&path, e))?;
        Ok(TableWriter {
            path,
            schema,
            trace_id: files.trace_id().to_string(),
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
        let ids = StringArray::from_iter_values(std::iter::repeat_n(&self.trace_id, self.pending));
        let mut columns: Vec<ArrayRef> = vec![Arc::new(ids)];
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
