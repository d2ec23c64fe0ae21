//! Self-contained SVG output: an interactive flame graph ([`flame_graph`]), its
//! differential form ([`diff_flame_graph`]) and a plot of
//! the live heap and allocation rate over time ([`timeline_plot`]). Both render into a
//! `String`; writing the file is the caller's business.

mod flame;
mod plot;
mod text;

pub use flame::{FlameGraphOptions, diff_color, diff_flame_graph, flame_graph};
pub use plot::{PlotOptions, timeline_plot};

/// Bytes with a binary prefix and three significant digits ([`crate::units`]).
pub use crate::units::human_bytes;
