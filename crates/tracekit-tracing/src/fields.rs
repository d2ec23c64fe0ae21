//! Field visitors: a span's fields collected as owned values (kept until it
//! closes), an event's without allocating (written at once); and the FXT argument
//! types their integers take.

use std::fmt::Write as _;

use tracekit_fxt::format::{ArgValue, StringRef};
use tracing_core::Field;

/// An argument value, owned.
#[derive(Clone, Debug)]
pub(crate) enum Value {
    /// A field declared without a value (`field::Empty`) and not recorded yet.
    Null,
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Str(String),
}

/// A signed integer argument: `int32` where it fits, else `int64`.
pub(crate) fn int_arg<'a>(v: i64) -> ArgValue<'a, StringRef<'a>> {
    i32::try_from(v).map_or(ArgValue::Int64(v), ArgValue::Int32)
}

/// An unsigned integer argument: `uint32` where it fits, else `uint64`.
pub(crate) fn uint_arg<'a>(v: u64) -> ArgValue<'a, StringRef<'a>> {
    u32::try_from(v).map_or(ArgValue::UInt64(v), ArgValue::UInt32)
}

/// Collects a span's fields as owned values.
pub(crate) struct Collect<'a>(pub(crate) &'a mut Vec<(usize, Value)>);

impl tracing_core::field::Visit for Collect<'_> {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.push((field.index(), Value::I64(value)));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.push((field.index(), Value::U64(value)));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.push((field.index(), Value::F64(value)));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.push((field.index(), Value::Bool(value)));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.push((field.index(), Value::Str(value.to_string())));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        let v = i64::try_from(value).map_or_else(|_| Value::Str(value.to_string()), Value::I64);
        self.0.push((field.index(), v));
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        let v = u64::try_from(value).map_or_else(|_| Value::Str(value.to_string()), Value::U64);
        self.0.push((field.index(), v));
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        let mut s = String::new();
        let _ = write!(s, "{value:?}");
        self.0.push((field.index(), Value::Str(s)));
    }
}

/// An event's field value: strings are ranges of the thread's scratch text.
#[derive(Clone, Copy)]
pub(crate) enum EventValue {
    I64(i64),
    U64(u64),
    F64(f64),
    Bool(bool),
    Text(usize, usize),
}

/// Collects an event's fields without allocating (strings into `text`).
pub(crate) struct EventFields {
    pub(crate) text: String,
    pub(crate) values: [(usize, EventValue); MAX_FIELDS + 1],
    pub(crate) len: usize,
    /// Where the `message` field is in `values`.
    pub(crate) message: Option<usize>,
}

impl EventFields {
    pub(crate) fn push(&mut self, field: &Field, v: EventValue) {
        if self.len < self.values.len() {
            if field.name() == "message" {
                self.message = Some(self.len);
            }
            self.values[self.len] = (field.index(), v);
            self.len += 1;
        }
    }

    pub(crate) fn text(&mut self, field: &Field, write: impl FnOnce(&mut String)) {
        let start = self.text.len();
        write(&mut self.text);
        let end = self.text.len();
        self.push(field, EventValue::Text(start, end));
    }
}

impl tracing_core::field::Visit for EventFields {
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, EventValue::I64(value));
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, EventValue::U64(value));
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.push(field, EventValue::F64(value));
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, EventValue::Bool(value));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.text(field, |t| t.push_str(value));
    }
    fn record_i128(&mut self, field: &Field, value: i128) {
        match i64::try_from(value) {
            Ok(v) => self.push(field, EventValue::I64(v)),
            Err(_) => self.text(field, |t| {
                let _ = write!(t, "{value}");
            }),
        }
    }
    fn record_u128(&mut self, field: &Field, value: u128) {
        match u64::try_from(value) {
            Ok(v) => self.push(field, EventValue::U64(v)),
            Err(_) => self.text(field, |t| {
                let _ = write!(t, "{value}");
            }),
        }
    }
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.text(field, |t| {
            let _ = write!(t, "{value:?}");
        });
    }
}

/// At most this many arguments on a record (the format's limit is 15; one is
/// the level).
pub(crate) const MAX_FIELDS: usize = 14;
