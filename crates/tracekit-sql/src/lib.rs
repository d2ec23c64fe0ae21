//! SQL over the tables `tracekit export` writes ([`tracekit_export::schema`]), with
//! an embedded engine (Apache DataFusion), and the named queries that answer the
//! usual fleet questions ([`NAMED`]).
//!
//! A query runs over one or more datasets, each with a label: export folders, or
//! traces whose tables were built in memory for the query
//! ([`tracekit_export::export_to_memory`]), so that querying a trace writes no file.
//! Every table of the schema is a view over all the datasets' files of that table,
//! with the label as an extra last column, `dataset`; a table that no dataset has
//! is an empty view, so that a query naming it still runs. Queries are plain SQL;
//! named queries may say `{a}` and `{b}` for the labels of the first two datasets.
//!
//! The same Parquet files are read by DuckDB, Spark and Trino (the README shows the
//! commands); the named queries are written in the SQL those engines share.
//!
//! A dataset's files may come from anywhere, so each is checked before the engine
//! reads it, and every error about one names it ([`Error::Parquet`]).

mod check;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::datasource::MemTable;
use datafusion::execution::object_store::ObjectStoreUrl;
use datafusion::object_store::memory::InMemory;
use datafusion::object_store::path::Path as ObjectPath;
use datafusion::object_store::{ObjectStoreExt, PutPayload};
use datafusion::prelude::{ParquetReadOptions, SessionConfig, SessionContext};
use tracekit_export::MemoryTables;
use tracekit_export::schema::TABLES;

use check::parquet_files;

/// A query's answer: its columns and rows, as Arrow batches.
#[derive(Debug)]
pub struct Answer {
    /// The columns.
    pub schema: SchemaRef,
    /// The rows.
    pub batches: Vec<RecordBatch>,
}

/// Tables to query and the label their rows carry in the `dataset` column.
#[derive(Clone, Debug)]
pub struct Dataset {
    /// The label.
    pub label: String,
    /// Where the tables are.
    pub tables: Tables,
}

/// Where a dataset's tables are.
#[derive(Clone, Debug)]
pub enum Tables {
    /// An export folder (`DIR/<table>/*.parquet`).
    Folder(PathBuf),
    /// The tables of traces, in memory.
    Memory(Vec<MemoryTables>),
}

impl Dataset {
    /// `LABEL=DIR`, or `DIR` (labelled with its last component).
    pub fn parse(arg: &str) -> Dataset {
        if let Some((label, dir)) = arg.split_once('=')
            && !label.is_empty()
            && !label.contains('/')
        {
            return Dataset {
                label: label.to_string(),
                tables: Tables::Folder(PathBuf::from(dir)),
            };
        }
        let dir = PathBuf::from(arg);
        let label = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| arg.to_string());
        Dataset {
            label,
            tables: Tables::Folder(dir),
        }
    }

    /// The export folder, for a dataset of files.
    pub fn dir(&self) -> Option<&Path> {
        match &self.tables {
            Tables::Folder(dir) => Some(dir),
            Tables::Memory(_) => None,
        }
    }
}

/// Why a query failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine refused the query or failed running it. Its message is the
    /// error's own, and the engine's error is not its source: the engine's errors
    /// repeat their causes in their messages, so a printed chain would say it twice.
    #[error("{}", engine_message(.0))]
    Engine(datafusion::error::DataFusionError),
    /// A query name (one word) that names no shipped query.
    #[error("unknown query '{name}'; {}", match .suggestion {
        Some(s) => format!("did you mean {s}"),
        None => "`tracekit sql --list` shows the shipped queries".to_string(),
    })]
    UnknownQuery {
        /// The name given.
        name: String,
        /// The shipped query spelled most like it, if one is close.
        suggestion: Option<&'static str>,
    },
    /// An Arrow operation (printing the answer) failed.
    #[error("{0}")]
    Arrow(#[from] datafusion::arrow::error::ArrowError),
    /// A dataset folder holds no table.
    #[error("{}: no exported tables there (run `tracekit export ... -o {}` first)", .0.display(), .0.display())]
    NoTables(PathBuf),
    /// The engine's threads could not be started.
    #[error("starting the query engine: {0}")]
    Runtime(std::io::Error),
    /// Writing the answer failed.
    #[error("{0}")]
    Write(#[from] std::io::Error),
    /// A Parquet file of a dataset is damaged, or is no Parquet file.
    #[error("{}: {reason}", path.display())]
    Parquet {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The engine panicked, and no file read alone shows why.
    #[error("the query engine failed: {0}")]
    EnginePanic(String),
    /// A named query needs more datasets than were given.
    #[error("query {name} compares two datasets: give two (`--over a=DIR --over b=DIR`)")]
    TwoDatasets {
        /// The query.
        name: &'static str,
    },
}

impl From<datafusion::error::DataFusionError> for Error {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        Error::Engine(e)
    }
}

/// The engine's error in one line: its deepest cause (a parser error as the
/// parser says it), without a backtrace.
fn engine_message(e: &datafusion::error::DataFusionError) -> String {
    use datafusion::error::DataFusionError;
    use datafusion::sql::sqlparser::parser::ParserError;
    match e.find_root() {
        DataFusionError::SQL(p, _) => match p.as_ref() {
            ParserError::ParserError(m) | ParserError::TokenizerError(m) => {
                format!("SQL error: {m}")
            }
            p => format!("SQL error: {p}"),
        },
        root => root.strip_backtrace(),
    }
}

/// A `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A query that ships with tracekit.
#[derive(Clone, Copy, Debug)]
pub struct NamedQuery {
    /// Its name (`tracekit sql NAME`).
    pub name: &'static str,
    /// Its SQL; the first line is a comment saying what it answers.
    pub sql: &'static str,
    /// Datasets it compares (0: any number, over all of them).
    pub compares: usize,
}

impl NamedQuery {
    /// What it answers: its first comment line.
    pub fn about(&self) -> &'static str {
        self.sql
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("-- "))
            .unwrap_or("")
    }

    /// Its SQL for `datasets`: `{a}` and `{b}` replaced by the first two labels.
    pub fn render(&self, datasets: &[Dataset]) -> Result<String> {
        if datasets.len() < self.compares {
            return Err(Error::TwoDatasets { name: self.name });
        }
        let quote = |i: usize| {
            datasets
                .get(i)
                .map(|d| d.label.replace('\'', "''"))
                .unwrap_or_default()
        };
        Ok(self.sql.replace("{a}", &quote(0)).replace("{b}", &quote(1)))
    }
}

/// The named queries.
pub const NAMED: &[NamedQuery] = &[
    NamedQuery {
        name: "top-sites",
        sql: include_str!("../queries/top-sites.sql"),
        compares: 0,
    },
    NamedQuery {
        name: "live-at-end",
        sql: include_str!("../queries/live-at-end.sql"),
        compares: 0,
    },
    NamedQuery {
        name: "share-growth",
        sql: include_str!("../queries/share-growth.sql"),
        compares: 2,
    },
];

/// Writes the named queries, a line each: the name, what it answers, and whether
/// it compares two datasets.
pub fn write_list(out: &mut dyn Write) -> std::io::Result<()> {
    for q in NAMED {
        let needs = if q.compares == 2 {
            " (two datasets)"
        } else {
            ""
        };
        writeln!(out, "{:<14} {}{needs}", q.name, q.about())?;
    }
    Ok(())
}

/// The named query called `name`.
pub fn named(name: &str) -> Option<&'static NamedQuery> {
    NAMED.iter().find(|q| q.name == name)
}

/// What `query` asks for: a shipped query when it names one, else SQL; a single
/// word that names no shipped query (`top-site`) is refused as an unknown name,
/// with the closest name, rather than sent to the SQL parser.
pub fn resolve(query: &str) -> Result<Option<&'static NamedQuery>> {
    if let Some(q) = named(query) {
        return Ok(Some(q));
    }
    let word = query.trim();
    let is_name = !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if !is_name {
        return Ok(None);
    }
    let lower = word.to_ascii_lowercase();
    let suggestion = NAMED
        .iter()
        .map(|q| (edit_distance(&lower, q.name), q.name))
        .filter(|(d, name)| *d <= (name.len() / 3).max(3))
        .min()
        .map(|(_, name)| name);
    Err(Error::UnknownQuery {
        name: word.to_string(),
        suggestion,
    })
}

/// Levenshtein distance between `a` and `b` (in bytes: names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let next = (diagonal + usize::from(ca != cb))
                .min(row[j] + 1)
                .min(row[j + 1] + 1);
            diagonal = row[j + 1];
            row[j + 1] = next;
        }
    }
    row[b.len()]
}

/// Where the engine reads the tables of traces held in memory.
const MEMORY: &str = "memory:///";

/// The name of the engine's worker threads.
const WORKER_NAME: &str = "tracekit-sql";

/// Runs `sql` over `datasets`. Every Parquet file's footer is checked first; an
/// error of the engine reading the files, or a panic inside it (caught, and not
/// printed), is then reported as the file that, read alone, fails.
pub fn query(datasets: &[Dataset], sql: &str) -> Result<Answer> {
    let mut files = Vec::new();
    for d in datasets {
        let Some(dir) = d.dir() else { continue };
        let before = files.len();
        for t in TABLES {
            files.extend(parquet_files(&dir.join(t.name)));
        }
        if files.len() == before {
            return Err(Error::NoTables(dir.to_path_buf()));
        }
    }
    for f in &files {
        check::check_footer(f)?;
    }
    // Two worker threads: the machines this runs on in CI have two cores, and a
    // query over a few exports is short; DataFusion scales with more.
    let threads = std::thread::available_parallelism().map_or(2, |n| n.get());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads)
        .thread_name(WORKER_NAME)
        .build()
        .map_err(Error::Runtime)?;
    let answer = check::contain(|| runtime.block_on(run(datasets, sql, threads, &files)));
    drop(runtime);
    answer.unwrap_or_else(|panic| {
        Err(check::find_damaged(files.iter().map(PathBuf::as_path))
            .unwrap_or(Error::EnginePanic(panic)))
    })
}

async fn run(datasets: &[Dataset], sql: &str, threads: usize, files: &[PathBuf]) -> Result<Answer> {
    // The engine's errors while it reads the files say what, not which file.
    let reading = |e: datafusion::error::DataFusionError| {
        check::find_damaged(files.iter().map(PathBuf::as_path)).unwrap_or_else(|| Error::from(e))
    };
    let config = SessionConfig::new()
        .with_target_partitions(threads)
        .with_information_schema(true);
    let ctx = SessionContext::new_with_config(config);
    let memory = Arc::new(InMemory::new());
    ctx.register_object_store(ObjectStoreUrl::parse(MEMORY)?.as_ref(), memory.clone());
    for table in TABLES {
        let mut parts = Vec::new();
        for (i, d) in datasets.iter().enumerate() {
            // Where the table's files are: a folder, or the in-memory store
            // the traces' files are put in; none when the dataset lacks it.
            let location = match &d.tables {
                Tables::Folder(dir) => {
                    let dir = dir.join(table.name);
                    (!parquet_files(&dir).is_empty()).then(|| format!("{}/", dir.display()))
                }
                Tables::Memory(traces) => {
                    let mut any = false;
                    for (trace, t) in traces
                        .iter()
                        .filter_map(|trace| Some((trace, trace.table(table.name)?)))
                    {
                        let at = ObjectPath::from(format!(
                            "{i}/{}/{}.parquet",
                            table.name, trace.trace_id
                        ));
                        memory
                            .put(&at, PutPayload::from(t.parquet.clone()))
                            .await
                            .map_err(|e| Error::Engine(e.into()))?;
                        any = true;
                    }
                    any.then(|| format!("{MEMORY}{i}/{}/", table.name))
                }
            };
            let Some(location) = location else { continue };
            let name = format!("__{}_{i}", table.name);
            let options = ParquetReadOptions::default().file_extension(".parquet");
            ctx.register_parquet(&name, &location, options)
                .await
                .map_err(reading)?;
            let label = d.label.replace('\'', "''");
            parts.push(format!("SELECT *, '{label}' AS dataset FROM {name}"));
        }
        if parts.is_empty() {
            // An empty table of the documented columns.
            let mut fields: Vec<Field> = table
                .schema()
                .fields()
                .iter()
                .map(|f| f.as_ref().clone())
                .collect();
            fields.push(Field::new("dataset", DataType::Utf8, false));
            let schema = Arc::new(Schema::new(fields));
            let empty = MemTable::try_new(schema, vec![vec![]])?;
            ctx.register_table(table.name, Arc::new(empty))?;
        } else {
            let view = format!(
                "CREATE VIEW {} AS {}",
                table.name,
                parts.join(" UNION ALL ")
            );
            ctx.sql(&view).await?;
        }
    }
    let df = ctx.sql(sql).await?;
    let schema = Arc::new(df.schema().as_arrow().clone());
    let batches = df.collect().await.map_err(reading)?;
    Ok(Answer { schema, batches })
}

impl Answer {
    /// Keeps the first `n` rows.
    pub fn truncate(&mut self, n: usize) {
        let mut left = n;
        for b in &mut self.batches {
            *b = b.slice(0, b.num_rows().min(left));
            left -= b.num_rows();
        }
        self.batches.retain(|b| b.num_rows() > 0);
    }

    /// Rows in the answer.
    pub fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }

    /// Writes the answer as an aligned text table.
    pub fn write_table(&self, out: &mut dyn Write) -> Result<()> {
        let table = datafusion::arrow::util::pretty::pretty_format_batches(&self.batches)?;
        if self.batches.is_empty() {
            let names: Vec<&str> = self
                .schema
                .fields()
                .iter()
                .map(|f| f.name().as_str())
                .collect();
            writeln!(out, "{}", names.join(" | "))?;
        } else {
            writeln!(out, "{table}")?;
        }
        writeln!(out, "({} rows)", self.rows())?;
        Ok(())
    }

    /// Writes the answer as one JSON array of objects, column name to value.
    pub fn write_json(&self, out: &mut dyn Write) -> Result<()> {
        let mut w = datafusion::arrow::json::ArrayWriter::new(Vec::new());
        let batches: Vec<&RecordBatch> = self.batches.iter().collect();
        w.write_batches(&batches)?;
        w.finish()?;
        let bytes = w.into_inner();
        if bytes.is_empty() {
            out.write_all(b"[]")?;
        } else {
            out.write_all(&bytes)?;
        }
        out.write_all(b"\n")?;
        Ok(())
    }

    /// Writes the answer as CSV with a header line.
    pub fn write_csv(&self, out: &mut dyn Write) -> Result<()> {
        let mut w = datafusion::arrow::csv::WriterBuilder::new()
            .with_header(true)
            .build(out);
        if self.batches.is_empty() {
            w.write(&RecordBatch::new_empty(self.schema.clone()))?;
        }
        for b in &self.batches {
            w.write(b)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn datasets_parse_with_and_without_labels() {
        let before = Dataset::parse("before=/data/v1");
        assert_eq!(before.label, "before");
        assert_eq!(before.dir(), Some(Path::new("/data/v1")));
        assert_eq!(Dataset::parse("/data/v2").label, "v2");
        // A path with `=` in a folder name is a path.
        assert_eq!(Dataset::parse("/x/a=b").dir(), Some(Path::new("/x/a=b")));
    }

    #[test]
    fn a_word_that_names_no_query_is_refused_with_the_closest_name() {
        assert_eq!(
            resolve("top-sites").ok().flatten().map(|q| q.name),
            Some("top-sites")
        );
        let msg = |q: &str| resolve(q).err().map(|e| e.to_string()).unwrap_or_default();
        assert_eq!(
            msg("top-site"),
            "unknown query 'top-site'; did you mean top-sites"
        );
        assert_eq!(
            msg("Live_At_End"),
            "unknown query 'Live_At_End'; did you mean live-at-end"
        );
        assert_eq!(
            msg("frobnicate"),
            "unknown query 'frobnicate'; `tracekit sql --list` shows the shipped queries"
        );
        // SQL goes to the engine.
        assert!(matches!(resolve("SELECT 1"), Ok(None)));
        assert!(matches!(resolve("select*from(traces)"), Ok(None)));
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }

    #[test]
    fn an_engine_error_prints_once_in_a_chain() {
        let e = query(&[], "SELEC 1")
            .err()
            .unwrap_or_else(|| unreachable!());
        assert!(std::error::Error::source(&e).is_none());
        let chain = format!("{:#}", anyhow_like(&e));
        assert!(
            chain.starts_with("SQL error: Expected: an SQL statement"),
            "{chain}"
        );
        assert_eq!(chain.matches("SQL error").count(), 1, "{chain}");
    }

    /// The error and its sources joined as anyhow's `{:#}` joins them.
    fn anyhow_like(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            s.push_str(&format!(": {c}"));
            cause = c.source();
        }
        s
    }

    #[test]
    fn truncate_keeps_the_first_rows_across_batches() {
        use datafusion::arrow::array::Int32Array;
        let schema = Arc::new(Schema::new(vec![Field::new("x", DataType::Int32, false)]));
        let batch = |v: Vec<i32>| {
            RecordBatch::try_new(schema.clone(), vec![Arc::new(Int32Array::from(v))])
                .unwrap_or_else(|_| unreachable!())
        };
        let mut a = Answer {
            schema: schema.clone(),
            batches: vec![batch(vec![1, 2]), batch(vec![3, 4, 5])],
        };
        a.truncate(3);
        assert_eq!(a.rows(), 3);
        assert_eq!(a.batches.len(), 2);
        a.truncate(0);
        assert_eq!(a.rows(), 0);
    }

    #[test]
    fn named_queries_say_what_they_answer_and_take_labels() {
        for q in NAMED {
            assert!(!q.about().is_empty(), "{}", q.name);
        }
        let q = named("share-growth").unwrap_or_else(|| unreachable!());
        let one = [Dataset::parse("a=/x")];
        assert!(matches!(q.render(&one), Err(Error::TwoDatasets { .. })));
        let two = [Dataset::parse("v1=/x"), Dataset::parse("it's=/y")];
        let sql = q.render(&two).unwrap_or_default();
        assert!(sql.contains("'v1'") && sql.contains("'it''s'"));
        assert!(!sql.contains("{a}") && !sql.contains("{b}"));
    }
}
