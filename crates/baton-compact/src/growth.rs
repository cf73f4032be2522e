//! The growth report: per step, the input tokens of the full transcript against the compacted
//! context, their totals, and an SVG line chart of both (quadratic against linear, in total).
//!
//! The chart is plain SVG written here: two polylines, axes and labels. A plotting library's
//! dependency tree is not worth two lines; the output is deterministic text, so tests pin it.
//!
//! ```
//! use baton_compact::growth::{Growth, svg};
//! use baton_compact::replay::Step;
//! use baton_core::Seq;
//! let steps: Vec<Step> = (1..=10u64)
//!     .map(|i| Step { seq: Seq(2 * i), full_tokens: 1_000 * i, context_tokens: 1_000 * i.min(3), compacted: i == 4, state_tokens: 0 })
//!     .collect();
//! let growth = Growth::of("sliding", &steps);
//! assert_eq!(growth.full_total, 55_000);
//! assert_eq!(growth.context_total, 27_000);
//! assert!(svg(&growth).starts_with("<svg "));
//! ```

use std::fmt::Write as _;

use serde::Serialize;

use crate::replay::Step;

/// Per-step and cumulative input tokens, full against compacted.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Growth {
    /// The strategy the compacted figures come from.
    pub strategy: String,
    /// The steps.
    pub steps: Vec<Step>,
    /// Input tokens over the run, full transcript.
    pub full_total: u64,
    /// Input tokens over the run, compacted.
    pub context_total: u64,
    /// `full_total / context_total`.
    pub ratio: f64,
}

impl Growth {
    /// The growth of a replay's steps.
    pub fn of(strategy: &str, steps: &[Step]) -> Self {
        let full_total = steps.iter().map(|s| s.full_tokens).sum();
        let context_total: u64 = steps.iter().map(|s| s.context_tokens).sum();
        Growth {
            strategy: strategy.to_owned(),
            steps: steps.to_vec(),
            full_total,
            context_total,
            ratio: full_total as f64 / context_total.max(1) as f64,
        }
    }
}

const WIDTH: f64 = 800.0;
const HEIGHT: f64 = 450.0;
const LEFT: f64 = 90.0;
const RIGHT: f64 = 20.0;
const TOP: f64 = 50.0;
const BOTTOM: f64 = 60.0;

/// An SVG chart of cumulative input tokens per step: the full transcript (which grows with the
/// square of the steps) and the compacted context (which grows linearly once compaction holds
/// the context bounded), with compactions marked.
pub fn svg(growth: &Growth) -> String {
    let mut full = Vec::with_capacity(growth.steps.len() + 1);
    let mut ctx = Vec::with_capacity(growth.steps.len() + 1);
    let (mut f, mut c) = (0u64, 0u64);
    full.push(0);
    ctx.push(0);
    for s in &growth.steps {
        f += s.full_tokens;
        c += s.context_tokens;
        full.push(f);
        ctx.push(c);
    }
    let n = growth.steps.len().max(1) as f64;
    let top = f.max(c).max(1) as f64;
    let x = |i: usize| LEFT + (WIDTH - LEFT - RIGHT) * i as f64 / n;
    let y = |v: u64| HEIGHT - BOTTOM - (HEIGHT - TOP - BOTTOM) * v as f64 / top;
    let line = |values: &[u64]| {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{:.1},{:.1}", x(i), y(*v)))
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{LEFT}" y="24" font-size="15">Cumulative input tokens per model call: full transcript vs {} ({:.1}× fewer)</text>"#,
        escape(&growth.strategy),
        growth.ratio
    );
    // Axes, with four gridlines on the token axis.
    let _ = writeln!(
        out,
        r##"<path d="M{LEFT},{TOP} V{:.1} H{:.1}" stroke="#333" fill="none"/>"##,
        HEIGHT - BOTTOM,
        WIDTH - RIGHT
    );
    for k in 1..=4u64 {
        let v = f.max(c) * k / 4;
        let _ = writeln!(
            out,
            r##"<line x1="{LEFT}" x2="{:.1}" y1="{:.1}" y2="{:.1}" stroke="#ddd"/><text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            WIDTH - RIGHT,
            y(v),
            y(v),
            LEFT - 6.0,
            y(v) + 4.0,
            short(v)
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">model calls (steps): {}</text>"#,
        (LEFT + WIDTH - RIGHT) / 2.0,
        HEIGHT - 20.0,
        growth.steps.len()
    );
    for (i, s) in growth.steps.iter().enumerate() {
        if s.compacted {
            let _ = writeln!(
                out,
                r##"<line x1="{0:.1}" x2="{0:.1}" y1="{1:.1}" y2="{2:.1}" stroke="#f0a" stroke-dasharray="2,3"/>"##,
                x(i + 1),
                TOP,
                HEIGHT - BOTTOM
            );
        }
    }
    let _ = writeln!(
        out,
        r##"<polyline points="{}" fill="none" stroke="#c33" stroke-width="2"/>"##,
        line(&full)
    );
    let _ = writeln!(
        out,
        r##"<polyline points="{}" fill="none" stroke="#36c" stroke-width="2"/>"##,
        line(&ctx)
    );
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" fill="#c33">full transcript: {} tokens</text>"##,
        LEFT + 10.0,
        TOP + 16.0,
        short(f)
    );
    let _ = writeln!(
        out,
        r##"<text x="{:.1}" y="{:.1}" fill="#36c">{}: {} tokens (dashed: compactions)</text>"##,
        LEFT + 10.0,
        TOP + 32.0,
        escape(&growth.strategy),
        short(c)
    );
    out.push_str("</svg>\n");
    out
}

/// `12.3k`, `4.5M`: axis labels.
fn short(v: u64) -> String {
    match v {
        0..1_000 => v.to_string(),
        1_000..1_000_000 => format!("{:.1}k", v as f64 / 1e3),
        _ => format!("{:.1}M", v as f64 / 1e6),
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
