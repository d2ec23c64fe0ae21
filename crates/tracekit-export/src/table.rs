//! One table's Parquet file, written as rows come: each table keeps column builders
//! for at most one row group and hands them to the Parquet writer when full, so
//! that memory does not grow with the trace.

use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::{ArrayRef, RecordBatch, StringArray};
use arrow_schema::SchemaRef;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::properties::WriterProperties;

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
    writer: ArrowWriter<File>,
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
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(batch))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| Error::write(&path, e))?;
        Ok(TableWriter {
            path,
            schema,
            trace_id: files.trace_id().to_string(),
            writer,
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
        self.writer
            .write(&batch)
            .map_err(|e| Error::write(&self.path, e))?;
        self.pending = 0;
        Ok(())
    }

    /// Writes the last rows and closes the file; the number of rows.
    pub(crate) fn finish(mut self) -> Result<u64> {
        self.flush()?;
        let file = self
            .writer
            .into_inner()
            .map_err(|e| Error::write(&self.path, e))?;
        file.sync_all().map_err(|e| Error::write(&self.path, e))?;
        Ok(self.rows)
    }
}
