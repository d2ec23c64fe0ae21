//! pprof profiles: the `profile.proto` message (package `perftools.profiles`)
//! that Go's `pprof`, Parca, Pyroscope, Polar Signals and Perfetto read,
//! written gzipped as `go tool pprof` expects a `.pb.gz` file to be.
//!
//! A profile is a list of samples, each a stack of locations (innermost
//! first) and one value per sample type; names live once in a string table
//! (index 0 is the empty string) and everything else refers to them by
//! index. The messages and the fields written, with their protobuf tags:
//!
//! | message | field | tag | what tracekit puts there |
//! | --- | --- | --- | --- |
//! | `Profile` | `sample_type` | 1 | `ValueType`s, in the order of each sample's values |
//! | | `sample` | 2 | the samples |
//! | | `location` | 4 | a location per distinct (function, line) |
//! | | `function` | 5 | a function per distinct (name, file) |
//! | | `string_table` | 6 | every string, `""` first |
//! | | `time_nanos` | 9 | when the profile starts (Unix time) |
//! | | `duration_nanos` | 10 | how long it covers |
//! | | `period_type` | 11 | what a sampling period counts |
//! | | `period` | 12 | the sampling period, in `period_type`'s unit |
//! | | `comment` | 13 | free text (what was filtered) |
//! | | `default_sample_type` | 14 | the sample type a reader shows first |
//! | `ValueType` | `type`, `unit` | 1, 2 | string indexes (`alloc_space`, `bytes`) |
//! | `Sample` | `location_id` | 1 | the stack, innermost first |
//! | | `value` | 2 | one per sample type |
//! | | `label` | 3 | `Label`s: `key` 1 and `str` 2 (string indexes) or `num` 3 |
//! | `Location` | `id` | 1 | 1-based |
//! | | `line` | 4 | one `Line`: `function_id` 1, `line` 2 |
//! | `Function` | `id` | 1 | 1-based |
//! | | `name`, `system_name`, `filename` | 2, 3, 4 | string indexes; `system_name` empty (the names are demangled) |
//!
//! Mappings (tag 3) are left out: the frames come named, so a reader has no
//! address to symbolize. Ids are 1-based, as readers require (0 means none).

#![deny(missing_docs)]

use std::io::Write;

use rustc_hash::FxHashMap;

/// The `profile.proto` messages, as far as tracekit writes them (the table
/// in the crate's docs); `prost` encodes and decodes them.
pub mod proto {
    /// A whole profile.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Profile {
        /// What each of a sample's values measures.
        #[prost(message, repeated, tag = "1")]
        pub sample_type: Vec<ValueType>,
        /// The samples.
        #[prost(message, repeated, tag = "2")]
        pub sample: Vec<Sample>,
        /// The locations the samples' stacks refer to.
        #[prost(message, repeated, tag = "4")]
        pub location: Vec<Location>,
        /// The functions the locations refer to.
        #[prost(message, repeated, tag = "5")]
        pub function: Vec<Function>,
        /// Every string, `""` first.
        #[prost(string, repeated, tag = "6")]
        pub string_table: Vec<String>,
        /// Start time, nanoseconds since the Unix epoch.
        #[prost(int64, tag = "9")]
        pub time_nanos: i64,
        /// Duration, nanoseconds.
        #[prost(int64, tag = "10")]
        pub duration_nanos: i64,
        /// What a sampling period counts.
        #[prost(message, optional, tag = "11")]
        pub period_type: Option<ValueType>,
        /// The sampling period.
        #[prost(int64, tag = "12")]
        pub period: i64,
        /// Comments (string indexes).
        #[prost(int64, repeated, tag = "13")]
        pub comment: Vec<i64>,
        /// The sample type shown first (a string index).
        #[prost(int64, tag = "14")]
        pub default_sample_type: i64,
    }

    /// A quantity: its type and unit, string indexes.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct ValueType {
        /// `alloc_space`, `cpu`, ...
        #[prost(int64, tag = "1")]
        pub r#type: i64,
        /// `bytes`, `count`, `nanoseconds`, ...
        #[prost(int64, tag = "2")]
        pub unit: i64,
    }

    /// One sample: a stack and its values.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Sample {
        /// Location ids, innermost first.
        #[prost(uint64, repeated, tag = "1")]
        pub location_id: Vec<u64>,
        /// One value per sample type.
        #[prost(int64, repeated, tag = "2")]
        pub value: Vec<i64>,
        /// Labels.
        #[prost(message, repeated, tag = "3")]
        pub label: Vec<Label>,
    }

    /// A sample's label: a key and a string or a number.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Label {
        /// Key (string index).
        #[prost(int64, tag = "1")]
        pub key: i64,
        /// String value (string index), or 0.
        #[prost(int64, tag = "2")]
        pub str: i64,
        /// Numeric value.
        #[prost(int64, tag = "3")]
        pub num: i64,
    }

    /// A place in the code: here one source line.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Location {
        /// 1-based id.
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// The lines, innermost inlined function first.
        #[prost(message, repeated, tag = "4")]
        pub line: Vec<Line>,
    }

    /// A line of a function.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Line {
        /// The function's id.
        #[prost(uint64, tag = "1")]
        pub function_id: u64,
        /// Line number (0: unknown).
        #[prost(int64, tag = "2")]
        pub line: i64,
    }

    /// A function.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Function {
        /// 1-based id.
        #[prost(uint64, tag = "1")]
        pub id: u64,
        /// Name as shown (string index).
        #[prost(int64, tag = "2")]
        pub name: i64,
        /// Name as the object has it (string index).
        #[prost(int64, tag = "3")]
        pub system_name: i64,
        /// Source file (string index).
        #[prost(int64, tag = "4")]
        pub filename: i64,
    }
}

/// A frame of a sample's stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Frame<'a> {
    /// The function's name.
    pub function: &'a str,
    /// Its source file (empty: unknown).
    pub file: &'a str,
    /// The line (0: unknown).
    pub line: u32,
}

/// A location of a [`Builder`]'s profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LocationId(u64);

/// Builds a profile: strings, functions and locations are interned as they
/// come, so each is written once.
#[derive(Debug)]
pub struct Builder {
    profile: proto::Profile,
    strings: FxHashMap<String, i64>,
    functions: FxHashMap<(i64, i64), u64>,
    locations: FxHashMap<(u64, u32), u64>,
}

impl Builder {
    /// A profile whose samples have one value per `(type, unit)` of
    /// `sample_types`, in that order.
    pub fn new(sample_types: &[(&str, &str)]) -> Builder {
        let mut b = Builder {
            profile: proto::Profile::default(),
            strings: FxHashMap::default(),
            functions: FxHashMap::default(),
            locations: FxHashMap::default(),
        };
        b.string("");
        for (ty, unit) in sample_types {
            let v = b.value_type(ty, unit);
            b.profile.sample_type.push(v);
        }
        b
    }

    fn string(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.strings.get(s) {
            return i;
        }
        let i = self.profile.string_table.len() as i64;
        self.profile.string_table.push(s.to_owned());
        self.strings.insert(s.to_owned(), i);
        i
    }

    fn value_type(&mut self, ty: &str, unit: &str) -> proto::ValueType {
        proto::ValueType {
            r#type: self.string(ty),
            unit: self.string(unit),
        }
    }

    /// Sets the sampling period: each sample stands for `period` of
    /// `(ty, unit)` (`space`, `bytes`).
    pub fn period(&mut self, ty: &str, unit: &str, period: i64) {
        self.profile.period_type = Some(self.value_type(ty, unit));
        self.profile.period = period;
    }

    /// Sets when the profile starts (Unix nanoseconds) and how long it covers.
    pub fn time(&mut self, start_nanos: i64, duration_nanos: i64) {
        self.profile.time_nanos = start_nanos;
        self.profile.duration_nanos = duration_nanos;
    }

    /// Adds a comment.
    pub fn comment(&mut self, text: &str) {
        let i = self.string(text);
        self.profile.comment.push(i);
    }

    /// Names the sample type a reader shows first.
    pub fn default_sample_type(&mut self, ty: &str) {
        self.profile.default_sample_type = self.string(ty);
    }

    /// The location of `frame`, made on first use.
    pub fn location(&mut self, frame: Frame<'_>) -> LocationId {
        let name = self.string(frame.function);
        let file = self.string(frame.file);
        let next = self.profile.function.len() as u64 + 1;
        let function = *self.functions.entry((name, file)).or_insert(next);
        if function == next {
            self.profile.function.push(proto::Function {
                id: function,
                name,
                // Empty: the names written are demangled, and a reader takes
                // a `system_name` equal to `name` for a mangled one to
                // simplify (`go tool pprof` cuts `<alloc::vec::Vec>::push` to
                // `::push`), so the profile would not show the names tracekit
                // prints.
                system_name: 0,
                filename: file,
            });
        }
        let next = self.profile.location.len() as u64 + 1;
        let id = *self.locations.entry((function, frame.line)).or_insert(next);
        if id == next {
            self.profile.location.push(proto::Location {
                id,
                line: vec![proto::Line {
                    function_id: function,
                    line: i64::from(frame.line),
                }],
            });
        }
        LocationId(id)
    }

    /// Adds a sample: its stack (innermost first), its values (one per
    /// sample type) and string labels.
    pub fn sample(&mut self, stack: &[LocationId], values: &[i64], labels: &[(&str, &str)]) {
        let label = labels
            .iter()
            .map(|(k, v)| proto::Label {
                key: self.string(k),
                str: self.string(v),
                num: 0,
            })
            .collect();
        self.profile.sample.push(proto::Sample {
            location_id: stack.iter().map(|l| l.0).collect(),
            value: values.to_vec(),
            label,
        });
    }

    /// The profile.
    pub fn finish(self) -> proto::Profile {
        self.profile
    }
}

/// Writes `profile` gzipped to `out`, as a `.pb.gz` file holds it.
pub fn write_gzip(profile: &proto::Profile, out: impl Write) -> std::io::Result<()> {
    use prost::Message;
    let mut gz = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

/// Why a profile could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The gzip stream is damaged.
    #[error("not a gzip stream: {0}")]
    Gzip(#[from] std::io::Error),
    /// The message is not a `profile.proto` profile.
    #[error("not a pprof profile: {0}")]
    Decode(#[from] prost::DecodeError),
}

/// Reads a profile written by [`write_gzip`] (or any gzipped, or plain,
/// `profile.proto` message).
pub fn read(bytes: &[u8]) -> Result<proto::Profile, ReadError> {
    use prost::Message;
    use std::io::Read;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut plain = Vec::new();
        flate2::read::GzDecoder::new(bytes).read_to_end(&mut plain)?;
        return Ok(proto::Profile::decode(plain.as_slice())?);
    }
    Ok(proto::Profile::decode(bytes)?)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_profile_reads_back_with_its_strings_locations_and_values() {
        let mut b = Builder::new(&[("alloc_objects", "count"), ("alloc_space", "bytes")]);
        b.period("space", "bytes", 512);
        b.comment("--between 1s 2s");
        b.default_sample_type("alloc_space");
        let main = Frame {
            function: "app::main",
            file: "src/main.rs",
            line: 3,
        };
        let work = Frame {
            function: "app::work",
            file: "src/main.rs",
            line: 9,
        };
        let (m, w) = (b.location(main), b.location(work));
        assert_eq!(b.location(main), m, "interned");
        b.sample(&[w, m], &[2, 1024], &[("thread", "main")]);
        b.sample(&[m], &[1, 512], &[]);
        let mut out = Vec::new();
        write_gzip(&b.finish(), &mut out).unwrap();
        assert_eq!(&out[..2], &[0x1f, 0x8b]);
        let p = read(&out).unwrap();
        let s = |i: i64| p.string_table[i as usize].as_str();
        assert_eq!(s(0), "");
        assert_eq!(s(p.sample_type[1].r#type), "alloc_space");
        assert_eq!(s(p.default_sample_type), "alloc_space");
        assert_eq!(s(p.comment[0]), "--between 1s 2s");
        assert_eq!(p.period, 512);
        assert_eq!(p.location.len(), 2);
        assert_eq!(p.function.len(), 2);
        let leaf = &p.location[(p.sample[0].location_id[0] - 1) as usize];
        let f = &p.function[(leaf.line[0].function_id - 1) as usize];
        assert_eq!(
            (s(f.name), s(f.filename), leaf.line[0].line),
            ("app::work", "src/main.rs", 9)
        );
        assert_eq!(p.sample[0].value, vec![2, 1024]);
        assert_eq!(s(p.sample[0].label[0].str), "main");
        let total: i64 = p.sample.iter().map(|s| s.value[1]).sum();
        assert_eq!(total, 1536);
    }
}
