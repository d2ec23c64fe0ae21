//! An interactive flame graph of a [`FrameTree`] (a profile's stacks, or folded stacks
//! read with [`FrameTree::from_folded`]), as one self-contained SVG file: click
//! a frame to zoom into it, "Reset zoom" to go back, "Search" (or Ctrl-F) to highlight
//! frames matching a regular expression and see the share they cover. Without script
//! support it still shows the whole graph with labels and hover titles.

use std::fmt::Write;

use crate::diff::DiffTree;
use crate::frames::{FrameId, FrameTree};

use super::text::{escape, escaped};
use crate::units::human_bytes;

/// Layout and labels of a flame graph.
#[derive(Clone, Debug)]
pub struct FlameGraphOptions {
    /// Title line.
    pub title: String,
    /// Second line (e.g. the trace and what the weights mean).
    pub subtitle: String,
    /// Whether weights are bytes (printed with binary prefixes) or plain counts.
    pub bytes: bool,
    /// Image width in pixels.
    pub width: u32,
    /// Icicle orientation: callers at the top.
    pub inverted: bool,
}

impl Default for FlameGraphOptions {
    fn default() -> Self {
        FlameGraphOptions {
            title: "Flame graph".to_string(),
            subtitle: String::new(),
            bytes: true,
            width: 1200,
            inverted: false,
        }
    }
}

const FRAME_HEIGHT: u32 = 16;
const HEADER: u32 = 52;
const FOOTER: u32 = 28;
const PAD: f64 = 10.0;
const CHAR_WIDTH: f64 = 7.0;
/// Frames narrower than this many pixels are not drawn (their weight still counts).
const MIN_WIDTH: f64 = 0.1;

/// Renders a frame tree (from a profile, or from folded stacks with
/// [`FrameTree::from_folded`]) as an SVG flame graph.
pub fn flame_graph(tree: &FrameTree, options: &FlameGraphOptions) -> String {
    draw(tree, options, &|n| (color(tree.name(n)), String::new()))
}

/// A differential flame graph ([`DiffTree`]): each frame as wide as its weight in
/// B, red where it grew from A and blue where it shrank, the deeper the colour the
/// larger the change against the largest of any frame (white: no change); its
/// hover title gives A's weight and the change.
pub fn diff_flame_graph(diff: &DiffTree, options: &FlameGraphOptions) -> String {
    let largest = diff.largest_change() as f64;
    let fmt = |v: u64| value_text(v, options.bytes);
    draw(diff.tree(), options, &|n| {
        let change = diff.change(n);
        let base = diff.base(n).1;
        let sign = if change < 0 { "-" } else { "+" };
        let rel = match base {
            0 => "new".to_string(),
            _ => format!(
                "{sign}{:.1}%",
                100.0 * change.unsigned_abs() as f64 / base as f64
            ),
        };
        let text = format!(
            "; A {}, change {sign}{} ({rel})",
            fmt(base),
            fmt(u64::try_from(change.unsigned_abs()).unwrap_or(u64::MAX))
        );
        (diff_color(change as f64 / largest), text)
    })
}

/// The colour of a change, -1 (shrank the most) to 1 (grew the most).
pub fn diff_color(change: f64) -> (u8, u8, u8) {
    // Pale at no change, saturated at the largest: 210 down to 0 in the other
    // two channels, as difffolded graphs shade.
    let fade = (210.0 * (1.0 - change.abs().min(1.0))).round() as u8;
    match change {
        c if c > 0.0 => (255, fade, fade),
        c if c < 0.0 => (fade, fade, 255),
        _ => (250, 250, 250),
    }
}

fn value_text(v: u64, bytes: bool) -> String {
    if bytes {
        format!("{} ({v} bytes)", human_bytes(v as f64))
    } else {
        format!("{v} samples")
    }
}

/// Draws `tree`, each frame painted by `paint`: its fill, and text to add to its
/// hover title.
fn draw(
    tree: &FrameTree,
    options: &FlameGraphOptions,
    paint: &dyn Fn(FrameId) -> ((u8, u8, u8), String),
) -> String {
    let total = tree.total();
    let width = f64::from(options.width.max(200));
    let inner = width - 2.0 * PAD;
    // Lay out: (node, start offset in weight units, depth).
    let mut placed: Vec<(FrameId, u64, u32)> = Vec::new();
    let mut stack: Vec<(FrameId, u64, u32)> = vec![(FrameId::ROOT, 0, 0)];
    let mut max_depth = 0;
    while let Some((n, start, depth)) = stack.pop() {
        let value = tree.weight(n).1;
        if total > 0 && (value as f64 / total as f64) * inner < MIN_WIDTH {
            continue;
        }
        placed.push((n, start, depth));
        max_depth = max_depth.max(depth);
        let mut s = start;
        for c in tree.children(n) {
            stack.push((c, s, depth + 1));
            s = s.saturating_add(tree.weight(c).1);
        }
    }
    placed.sort_by_key(|&(_, start, depth)| (depth, start));

    let height = HEADER + (max_depth + 1) * FRAME_HEIGHT + FOOTER;
    let fmt_value = |v: u64| value_text(v, options.bytes);

    let mut out = String::with_capacity(256 + placed.len() * 220);
    let _ = write!(
        out,
        r##"<?xml version="1.0" standalone="no"?>
<svg version="1.1" width="{w}" height="{h}" viewBox="0 0 {w} {h}" xmlns="http://www.w3.org/2000/svg" onload="flameInit()">
<style>
text {{ font-family: monospace; font-size: 12px; fill: #000; }}
#title {{ font-size: 17px; }}
.btn {{ cursor: pointer; fill: #036; text-decoration: underline; }}
.f {{ cursor: pointer; }}
.f:hover rect {{ stroke: #000; stroke-width: 0.5; }}
.f text {{ pointer-events: none; }}
</style>
<script type="text/ecmascript"><![CDATA[
{script}
]]></script>
<rect x="0" y="0" width="{w}" height="{h}" fill="#f8f8f8"/>
<text id="title" x="{cx}" y="22" text-anchor="middle">"##,
        w = options.width.max(200),
        h = height,
        cx = width / 2.0,
        script = SCRIPT,
    );
    escape(&mut out, &options.title);
    let _ = write!(
        out,
        r#"</text>
<text id="subtitle" x="{cx}" y="40" text-anchor="middle">"#,
        cx = width / 2.0
    );
    escape(&mut out, &options.subtitle);
    let _ = write!(
        out,
        r#"</text>
<text id="reset" class="btn" x="{pad}" y="22" style="display:none">Reset zoom</text>
<text id="search" class="btn" x="{right}" y="22" text-anchor="end">Search</text>
<text id="details" x="{pad}" y="{by}"> </text>
<text id="matched" x="{right}" y="{by}" text-anchor="end"> </text>
<g id="frames" data-total="{total}" data-inverted="{inv}" data-fh="{fh}" data-top="{top}" data-bottom="{bottom}" data-unit="{unit}">
"#,
        pad = PAD,
        right = width - PAD,
        by = height - 9,
        inv = u8::from(options.inverted),
        fh = FRAME_HEIGHT,
        top = HEADER,
        bottom = height - FOOTER,
        unit = if options.bytes { "bytes" } else { "samples" },
    );
    for &(n, start, depth) in &placed {
        let (value, name) = (tree.weight(n).1, tree.name(n));
        let x = PAD + start as f64 / total.max(1) as f64 * inner;
        let w = value as f64 / total.max(1) as f64 * inner;
        let y = if options.inverted {
            HEADER + depth * FRAME_HEIGHT
        } else {
            height - FOOTER - (depth + 1) * FRAME_HEIGHT
        };
        let ((r, g, b), more) = paint(n);
        let share = 100.0 * value as f64 / total.max(1) as f64;
        let escaped_name = escaped(name);
        let _ = write!(
            out,
            r#"<g class="f" data-s="{start}" data-v="{value}" data-d="{depth}"><title>{escaped_name} — {val}, {share:.2}%{more}</title><rect x="{x:.2}" y="{y}" width="{w:.2}" height="{fh}" fill="rgb({r},{g},{b})" rx="2"/><text x="{tx:.2}" y="{ty}">"#,
            val = fmt_value(value),
            more = escaped(&more),
            fh = FRAME_HEIGHT - 1,
            tx = x + 3.0,
            ty = y + FRAME_HEIGHT - 4,
        );
        escape(&mut out, &fit_label(name, w));
        out.push_str("</text></g>\n");
    }
    out.push_str("</g>\n</svg>\n");
    out
}

/// The part of `name` that fits in `width` pixels, with `..` when cut.
fn fit_label(name: &str, width: f64) -> String {
    let fits = ((width - 6.0) / CHAR_WIDTH).floor();
    if fits < 3.0 {
        return String::new();
    }
    let fits = fits as usize;
    if name.chars().count() <= fits {
        name.to_string()
    } else {
        let mut s: String = name.chars().take(fits - 2).collect();
        s.push_str("..");
        s
    }
}

/// A warm colour derived from the frame name, so a function keeps its colour across
/// graphs.
fn color(name: &str) -> (u8, u8, u8) {
    let mut h: u32 = 0x811c_9dc5;
    for b in name.bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    let r = 205 + (h % 50) as u8;
    let g = ((h >> 8) % 230) as u8;
    let b = ((h >> 16) % 55) as u8;
    (r, g, b)
}

/// Zoom, search and hover details. Frames carry their start (`data-s`), weight
/// (`data-v`) and depth (`data-d`) in weight units, so zooming is a rescale.
const SCRIPT: &str = r#"
var fg = {};
function flameInit() {
  var g = document.getElementById('frames');
  fg.frames = Array.prototype.slice.call(g.querySelectorAll('g.f'));
  fg.total = +g.getAttribute('data-total');
  fg.unit = g.getAttribute('data-unit');
  fg.width = +document.documentElement.getAttribute('width');
  fg.details = document.getElementById('details');
  fg.matched = document.getElementById('matched');
  fg.reset = document.getElementById('reset');
  fg.searchBtn = document.getElementById('search');
  fg.frames.forEach(function (f) {
    f.fgName = f.querySelector('title').textContent.replace(/ \u2014 [^\u2014]*$/, '');
    f.fgFill = f.querySelector('rect').getAttribute('fill');
    f.addEventListener('click', function () { flameZoom(f); });
    f.addEventListener('mouseover', function () {
      fg.details.textContent = f.querySelector('title').textContent;
    });
    f.addEventListener('mouseout', function () { fg.details.textContent = ' '; });
  });
  fg.reset.addEventListener('click', function () { flameZoom(null); });
  fg.searchBtn.addEventListener('click', flameSearch);
  window.addEventListener('keydown', function (e) {
    if ((e.ctrlKey || e.metaKey) && e.key === 'f') { e.preventDefault(); flameSearch(); }
    if (e.key === 'Escape') { flameZoom(null); }
  });
}
function flameFit(name, w) {
  var n = Math.floor((w - 6) / 7);
  if (n < 3) return '';
  return name.length <= n ? name : name.slice(0, n - 2) + '..';
}
function flameZoom(target) {
  var s0 = 0, v0 = fg.total, d0 = 0;
  if (target) {
    s0 = +target.getAttribute('data-s'); v0 = +target.getAttribute('data-v');
    d0 = +target.getAttribute('data-d');
  }
  if (v0 <= 0) return;
  var inner = fg.width - 20;
  fg.frames.forEach(function (f) {
    var s = +f.getAttribute('data-s'), v = +f.getAttribute('data-v');
    var d = +f.getAttribute('data-d');
    var r = f.querySelector('rect'), t = f.querySelector('text');
    var x, w, show = true, faded = false;
    if (d < d0) {
      show = s <= s0 && s + v >= s0 + v0; x = 0; w = inner; faded = true;
    } else {
      show = s >= s0 && s + v <= s0 + v0;
      x = (s - s0) / v0 * inner; w = v / v0 * inner;
    }
    if (!show || w < 0.1) { f.style.display = 'none'; return; }
    f.style.display = '';
    f.style.opacity = faded ? '0.6' : '';
    r.setAttribute('x', (10 + x).toFixed(2)); r.setAttribute('width', w.toFixed(2));
    t.setAttribute('x', (13 + x).toFixed(2)); t.textContent = flameFit(f.fgName, w);
  });
  fg.reset.style.display = target && d0 > 0 ? '' : 'none';
}
function flameSearch() {
  if (fg.searching) {
    fg.searching = false;
    fg.frames.forEach(function (f) { f.querySelector('rect').setAttribute('fill', f.fgFill); });
    fg.matched.textContent = ' ';
    fg.searchBtn.textContent = 'Search';
    return;
  }
  var term = window.prompt('Search for frames matching (regular expression):', '');
  if (!term) return;
  var re;
  try { re = new RegExp(term); } catch (e) {
    re = new RegExp(term.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  }
  var spans = [];
  fg.frames.forEach(function (f) {
    if (f.getAttribute('data-d') !== '0' && re.test(f.fgName)) {
      f.querySelector('rect').setAttribute('fill', 'rgb(230,0,230)');
      var s = +f.getAttribute('data-s');
      spans.push([s, s + (+f.getAttribute('data-v'))]);
    }
  });
  spans.sort(function (a, b) { return a[0] - b[0]; });
  var covered = 0, end = -1;
  spans.forEach(function (sp) {
    if (sp[0] >= end) { covered += sp[1] - sp[0]; end = sp[1]; }
    else if (sp[1] > end) { covered += sp[1] - end; end = sp[1]; }
  });
  fg.searching = true;
  fg.searchBtn.textContent = 'Clear search';
  fg.matched.textContent = 'Matched: ' + (100 * covered / Math.max(fg.total, 1)).toFixed(2) + '%';
}
"#;

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn lines() -> Vec<(String, u64)> {
        vec![
            ("main;f;g".to_string(), 30),
            ("main;f".to_string(), 10),
            ("main;h<&>".to_string(), 60),
        ]
    }

    fn flame_graph(lines: &[(String, u64)], options: &FlameGraphOptions) -> String {
        super::flame_graph(&FrameTree::from_folded(lines), options)
    }

    #[test]
    fn frames_have_inclusive_weights() {
        let svg = flame_graph(&lines(), &FlameGraphOptions::default());
        assert!(svg.contains(r#"data-total="100""#));
        // main: all of it; f: 40 at offset 0; h: 60 at offset 40 (children by name).
        assert!(svg.contains(r#"data-s="0" data-v="100" data-d="1"><title>main"#));
        assert!(svg.contains(r#"data-s="0" data-v="40" data-d="2"><title>f"#));
        assert!(svg.contains(r#"data-s="40" data-v="60" data-d="2"><title>h&lt;&amp;&gt;"#));
        assert!(svg.contains(r#"data-s="0" data-v="30" data-d="3"><title>g"#));
        assert_eq!(svg.matches("<g class=\"f\"").count(), 5);
        assert!(!svg.contains("]]>\n]]>"));
    }

    #[test]
    fn narrow_frames_are_pruned() {
        let mut l = lines();
        l.push(("main;tiny".to_string(), 1));
        l[2].1 = 100_000_000;
        let svg = flame_graph(&l, &FlameGraphOptions::default());
        assert!(!svg.contains("<title>tiny"));
        assert!(svg.contains(r#"data-total="100000041""#));
    }

    #[test]
    fn orientation() {
        let flame = flame_graph(&lines(), &FlameGraphOptions::default());
        let icicle = flame_graph(
            &lines(),
            &FlameGraphOptions {
                inverted: true,
                ..FlameGraphOptions::default()
            },
        );
        // The root sits at the bottom of a flame graph and at the top of an icicle.
        let root_y = |svg: &str| {
            let at = svg.find(r#"data-d="0""#).unwrap_or(0);
            let rest = &svg[at..];
            let y = rest.find(" y=\"").map(|i| &rest[i + 4..]).unwrap_or("");
            y[..y.find('"').unwrap_or(0)].parse::<u32>().unwrap_or(0)
        };
        assert!(root_y(&flame) > root_y(&icicle));
        assert_eq!(root_y(&icicle), HEADER);
    }

    #[test]
    fn a_diff_is_as_wide_as_b_and_coloured_by_change() {
        let a = FrameTree::from_folded(&[("main;f", 40), ("main;h", 60)]);
        let b = FrameTree::from_folded(&[("main;f", 80), ("main;h", 60), ("main;n", 10)]);
        let svg = diff_flame_graph(&crate::diff::diff(&a, &b), &FlameGraphOptions::default());
        assert!(svg.contains(r#"data-total="150""#));
        // f grew by the most (40, main's 50 aside as the root's callee): deepest red.
        let f = r#"data-s="0" data-v="80" data-d="2"><title>f — 80 B (80 bytes), 53.33%; A 40 B (40 bytes), change +40 B (40 bytes) (+100.0%)</title>"#;
        assert!(svg.contains(f), "{svg}");
        let fill = |name: &str| {
            let at = svg.find(&format!("<title>{name} — ")).unwrap();
            let rest = &svg[at..];
            let f = rest.find("fill=\"").unwrap() + 6;
            rest[f..f + rest[f..].find('"').unwrap()].to_string()
        };
        assert_eq!(fill("f"), "rgb(255,42,42)", "40 of main's 50");
        assert_eq!(fill("h"), "rgb(250,250,250)", "no change");
        assert_eq!(fill("n"), "rgb(255,168,168)", "10 of 50");
        assert!(svg.contains("change +10 B (10 bytes) (new)"));
        assert_eq!(diff_color(-1.0), (0, 0, 255));
    }

    #[test]
    fn labels_fit() {
        assert_eq!(fit_label("abcdef", 100.0), "abcdef");
        assert_eq!(fit_label("abcdefghijklmnop", 60.0), "abcde..");
        assert_eq!(fit_label("abcdef", 10.0), "");
    }

    #[test]
    fn empty_input() {
        let svg = flame_graph(&[], &FlameGraphOptions::default());
        assert_eq!(svg.matches("<g class=\"f\"").count(), 1, "only the root");
        assert!(svg.contains(r#"data-total="0""#));
        assert!(svg.ends_with("</svg>\n"));
    }
}
