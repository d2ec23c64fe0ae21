//! The timeline as an SVG line plot: the estimated live heap (top panel) and the
//! allocation rate (bottom panel) against seconds since the trace start, with axes,
//! grid, units and the peak marked.

use std::fmt::Write;

use super::text::escape;
use crate::curve::TimelinePoint;
use crate::sampling::Sampling;
use crate::units::human_bytes;
use tracekit_memtrace::Timedelta;

/// Labels and size of a timeline plot.
#[derive(Clone, Debug)]
pub struct PlotOptions {
    /// Title line.
    pub title: String,
    /// Second line.
    pub subtitle: String,
    /// Width in pixels.
    pub width: u32,
    /// Height of one panel in pixels.
    pub panel_height: u32,
    /// The peak to mark: time and live bytes.
    pub peak: Option<(Timedelta, u64)>,
}

impl Default for PlotOptions {
    fn default() -> Self {
        PlotOptions {
            title: "Live heap".to_string(),
            subtitle: String::new(),
            width: 1000,
            panel_height: 260,
            peak: None,
        }
    }
}

const LEFT: f64 = 90.0;
const RIGHT: f64 = 30.0;
const TOP: f64 = 60.0;
const GAP: f64 = 70.0;
const BOTTOM: f64 = 50.0;

/// A "nice" tick step (1, 2 or 5 times a power of ten) giving about `count` ticks
/// over `[0, max]`.
fn nice_step(max: f64, count: f64) -> f64 {
    if !(max.is_finite() && max > 0.0) {
        return 1.0;
    }
    let raw = max / count;
    let mag = 10f64.powf(raw.log10().floor());
    let norm = raw / mag;
    let nice = if norm <= 1.0 {
        1.0
    } else if norm <= 2.0 {
        2.0
    } else if norm <= 5.0 {
        5.0
    } else {
        10.0
    };
    nice * mag
}

/// The binary unit (divisor, name) that makes `max` bytes read well.
fn byte_unit(max: f64) -> (f64, &'static str) {
    const UNITS: [(f64, &str); 5] = [
        (1.0, "B"),
        (1024.0, "KiB"),
        (1048576.0, "MiB"),
        (1073741824.0, "GiB"),
        (1099511627776.0, "TiB"),
    ];
    let mut best = UNITS[0];
    for u in UNITS {
        if max >= u.0 {
            best = u;
        }
    }
    best
}

/// Shortest decimal text for a tick value.
fn tick_text(v: f64) -> String {
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

struct Panel<'a> {
    top: f64,
    label: &'a str,
    unit_suffix: &'a str,
    color: &'a str,
    values: Vec<(f64, f64)>,
    step: bool,
}

/// Renders the timeline (from [`Timeline::points`](crate::Timeline::points)) as SVG.
pub fn timeline_plot(
    points: &[TimelinePoint],
    sampling: Sampling,
    options: &PlotOptions,
) -> String {
    let width = f64::from(options.width.max(300));
    let ph = f64::from(options.panel_height.max(100));
    let height = TOP + ph + GAP + ph + BOTTOM;
    let plot_w = width - LEFT - RIGHT;
    let x_max_s = points
        .last()
        .map(|p| p.time.to_secs_f64())
        .unwrap_or(0.0)
        .max(1e-6);

    let mut live = vec![(0.0, 0.0)];
    let mut rate = Vec::new();
    let mut prev = 0.0;
    for p in points {
        let t = p.time.to_secs_f64();
        live.push((t, sampling.bytes(p.live) as f64));
        let secs = p.interval.to_secs_f64();
        let r = if secs > 0.0 {
            sampling.bytes(p.allocated) as f64 / secs
        } else {
            0.0
        };
        rate.push((prev, r));
        rate.push((t, r));
        prev = t;
    }
    let panels = [
        Panel {
            top: TOP,
            label: "live heap (estimated)",
            unit_suffix: "",
            color: "#c0392b",
            values: live,
            step: false,
        },
        Panel {
            top: TOP + ph + GAP,
            label: "allocation rate (estimated)",
            unit_suffix: "/s",
            color: "#2c6fbb",
            values: rate,
            step: true,
        },
    ];

    let mut out = String::new();
    let _ = write!(
        out,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{w}" height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg">
<style>
text {{ font-family: sans-serif; font-size: 12px; fill: #222; }}
.title {{ font-size: 17px; }}
.grid {{ stroke: #ddd; stroke-width: 1; }}
.axis {{ stroke: #444; stroke-width: 1; }}
</style>
<rect x="0" y="0" width="{w}" height="{h}" fill="#fff"/>
<text class="title" x="{cx}" y="24" text-anchor="middle">"##,
        w = width,
        h = height,
        cx = width / 2.0,
    );
    escape(&mut out, &options.title);
    let _ = write!(
        out,
        r#"</text><text x="{}" y="44" text-anchor="middle">"#,
        width / 2.0
    );
    escape(&mut out, &options.subtitle);
    out.push_str("</text>\n");

    let x_step = nice_step(x_max_s, 8.0);
    let x_of = |t: f64| LEFT + t / x_max_s * plot_w;
    for panel in &panels {
        let y_max_raw = panel.values.iter().map(|v| v.1).fold(0.0, f64::max);
        let (div, unit) = byte_unit(y_max_raw);
        let y_step = nice_step(y_max_raw / div, 5.0);
        let y_max = ((y_max_raw / div / y_step).ceil() * y_step).max(y_step);
        let bottom = panel.top + ph;
        let y_of = |v: f64| bottom - (v / div) / y_max * ph;
        // Grid and y ticks.
        let mut k = 0.0;
        while k <= y_max * (1.0 + 1e-9) {
            let y = bottom - k / y_max * ph;
            let _ = writeln!(
                out,
                r#"<line class="grid" x1="{LEFT}" y1="{y:.1}" x2="{x2}" y2="{y:.1}"/><text x="{tx}" y="{ty:.1}" text-anchor="end">{label}</text>"#,
                x2 = LEFT + plot_w,
                tx = LEFT - 6.0,
                ty = y + 4.0,
                label = tick_text(k),
            );
            k += y_step;
        }
        // x ticks.
        let mut t = 0.0;
        while t <= x_max_s * (1.0 + 1e-9) {
            let x = x_of(t);
            let _ = writeln!(
                out,
                r#"<line class="grid" x1="{x:.1}" y1="{top}" x2="{x:.1}" y2="{bottom}"/><text x="{x:.1}" y="{ty}" text-anchor="middle">{label}</text>"#,
                top = panel.top,
                ty = bottom + 16.0,
                label = tick_text(t),
            );
            t += x_step;
        }
        // Axes and labels.
        let _ = writeln!(
            out,
            r#"<line class="axis" x1="{LEFT}" y1="{top}" x2="{LEFT}" y2="{bottom}"/><line class="axis" x1="{LEFT}" y1="{bottom}" x2="{x2}" y2="{bottom}"/>"#,
            top = panel.top,
            x2 = LEFT + plot_w,
        );
        let _ = writeln!(
            out,
            r#"<text x="{x}" y="{y}" text-anchor="middle" transform="rotate(-90 {x} {y})">{label} [{unit}{suffix}]</text>"#,
            x = 22.0,
            y = panel.top + ph / 2.0,
            label = panel.label,
            suffix = panel.unit_suffix,
        );
        let _ = writeln!(
            out,
            r#"<text x="{x}" y="{y}" text-anchor="middle">time since trace start [s]</text>"#,
            x = LEFT + plot_w / 2.0,
            y = bottom + 34.0,
        );
        // The curve.
        let mut path = String::new();
        for (i, &(t, v)) in panel.values.iter().enumerate() {
            let _ = write!(
                path,
                "{}{:.2},{:.2}",
                if i == 0 { "M" } else { " L" },
                x_of(t),
                y_of(v)
            );
        }
        if !path.is_empty() {
            let _ = writeln!(
                out,
                r#"<path d="{path}" fill="none" stroke="{c}" stroke-width="1.5" stroke-linejoin="{j}"/>"#,
                c = panel.color,
                j = if panel.step { "miter" } else { "round" },
            );
        }
        if !panel.step
            && let Some((t, bytes)) = options.peak
        {
            let x = x_of(t.to_secs_f64());
            let y = y_of(bytes as f64);
            let anchor = if x > LEFT + plot_w * 0.7 {
                "end"
            } else {
                "start"
            };
            let dx = if anchor == "end" { -8.0 } else { 8.0 };
            let _ = writeln!(
                out,
                r##"<circle cx="{x:.2}" cy="{y:.2}" r="4" fill="none" stroke="#000"/><text x="{tx:.2}" y="{ty:.2}" text-anchor="{anchor}">peak {b} at {t}</text>"##,
                tx = x + dx,
                ty = (y + 4.0).max(panel.top + 12.0),
                b = human_bytes(bytes as f64),
            );
        }
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps() {
        assert_eq!(nice_step(10.0, 5.0), 2.0);
        assert_eq!(nice_step(1.0, 8.0), 0.2);
        assert_eq!(nice_step(0.0, 5.0), 1.0);
        assert_eq!(nice_step(7300.0, 5.0), 2000.0);
        assert_eq!(byte_unit(5000.0), (1024.0, "KiB"));
        assert_eq!(byte_unit(10.0), (1.0, "B"));
        assert_eq!(tick_text(0.30000000000000004), "0.3");
        assert_eq!(tick_text(2000.0), "2000");
    }

    #[test]
    fn plot_has_axes_units_and_curve() {
        let sampling = Sampling {
            sample_rate: 1.0,
            word_size_bits: 64,
        };
        let points: Vec<TimelinePoint> = (1..=10)
            .map(|i| TimelinePoint {
                time: Timedelta::from_micros(i as i64 * 100_000),
                interval: Timedelta::from_micros(100_000),
                live: i * 1000,
                live_by_domain: vec![i * 1000],
                allocated: 2000,
                freed: 1000,
            })
            .collect();
        let svg = timeline_plot(
            &points,
            sampling,
            &PlotOptions {
                peak: Some((Timedelta::from_micros(1_000_000), 80_000)),
                ..PlotOptions::default()
            },
        );
        assert!(svg.contains("live heap (estimated) [KiB]"));
        assert!(svg.contains("allocation rate (estimated) [KiB/s]"));
        assert!(svg.contains("time since trace start [s]"));
        assert!(svg.contains("peak 78.1 KiB at 1s"));
        assert_eq!(svg.matches("<path ").count(), 2);
        assert!(svg.ends_with("</svg>\n"));
    }

    #[test]
    fn empty_timeline() {
        let svg = timeline_plot(
            &[],
            Sampling {
                sample_rate: 1e-3,
                word_size_bits: 64,
            },
            &PlotOptions::default(),
        );
        assert!(svg.ends_with("</svg>\n"));
    }
}
