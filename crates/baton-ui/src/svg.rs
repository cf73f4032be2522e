//! Charts drawn on the server as inline SVG: a line chart, a bar chart, and the coverage bands
//! of a run's summaries over its seq axis. Each shape carries a `<title>`, so hovering tells its
//! figure; colours come from the stylesheet's classes.

use std::fmt::Write as _;

use maud::{Markup, PreEscaped, html};

const WIDTH: f64 = 900.0;
const LEFT: f64 = 70.0;
const RIGHT: f64 = 10.0;
const TOP: f64 = 10.0;

/// One line of a line chart.
pub(crate) struct Series {
    /// Its name, in the legend.
    pub name: String,
    /// Its stylesheet class (its colour).
    pub class: &'static str,
    /// Its points, `(x, y)`.
    pub points: Vec<(f64, f64)>,
}

/// The largest of `values` rounded up to 1, 2 or 5 times a power of ten (at least 1).
fn nice(max: f64) -> f64 {
    if max <= 1.0 {
        return 1.0;
    }
    let power = 10f64.powf(max.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * power)
        .find(|v| *v >= max)
        .unwrap_or(10.0 * power)
}

/// A short form of a tick value: `12k`, `3.5M`.
fn short(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.1}M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0}k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}

/// The y axis (four gridlines) of a plot `height` high whose top value is `top`.
fn y_axis(out: &mut String, top: f64, height: f64) {
    for i in 0..=4 {
        let v = top * f64::from(i) / 4.0;
        let y = TOP + height - height * f64::from(i) / 4.0;
        let _ = write!(
            out,
            r#"<line class="grid" x1="{LEFT}" x2="{}" y1="{y:.1}" y2="{y:.1}"/><text class="tick" x="{}" y="{:.1}" text-anchor="end">{}</text>"#,
            WIDTH - RIGHT,
            LEFT - 6.0,
            y + 4.0,
            short(v)
        );
    }
}

/// A line chart of `series` over a shared x range, `height` pixels of plot.
pub(crate) fn lines(series: &[Series], x_label: &str, y_label: &str, height: f64) -> Markup {
    let points = series.iter().flat_map(|s| s.points.iter());
    let (x_max, y_max) = points.fold((1.0f64, 0.0f64), |(x, y), p| (x.max(p.0), y.max(p.1)));
    let top = nice(y_max);
    let plot = WIDTH - LEFT - RIGHT;
    let mut out = String::new();
    y_axis(&mut out, top, height);
    for s in series {
        let mut path = String::new();
        for (i, (x, y)) in s.points.iter().enumerate() {
            let px = LEFT + plot * (x / x_max);
            let py = TOP + height - height * (y / top);
            let _ = write!(path, "{}{px:.1},{py:.1}", if i == 0 { "M" } else { " L" });
        }
        let _ = write!(
            out,
            r#"<path class="line {}" d="{path}"><title>{}</title></path>"#,
            s.class,
            maud::html! { (s.name) }.into_string()
        );
    }
    let total = TOP + height + 36.0;
    html! {
        figure.chart {
            svg viewBox={ "0 0 " (WIDTH) " " (total) } role="img" aria-label=(y_label) {
                (PreEscaped(out))
                text.axis x=(LEFT + plot / 2.0) y=(TOP + height + 30.0) text-anchor="middle" { (x_label) }
                text.axis x="12" y=(TOP + height / 2.0) transform={ "rotate(-90 12 " (TOP + height / 2.0) ")" } text-anchor="middle" { (y_label) }
            }
            figcaption.legend {
                @for s in series {
                    span { i class={ "swatch " (s.class) } {} (s.name) }
                }
            }
        }
    }
}

/// One bar of a bar chart: its label, its stacked parts `(class, value, title)`.
pub(crate) struct Bar {
    pub label: String,
    pub parts: Vec<(&'static str, f64, String)>,
}

/// A stacked bar chart, one bar per item, `height` pixels of plot.
pub(crate) fn bars(items: &[Bar], y_label: &str, height: f64) -> Markup {
    let y_max = items
        .iter()
        .map(|b| b.parts.iter().map(|p| p.1).sum::<f64>())
        .fold(0.0, f64::max);
    let top = nice(y_max);
    let plot = WIDTH - LEFT - RIGHT;
    let slot = plot / items.len().max(1) as f64;
    let width = (slot * 0.8).max(1.0);
    let mut out = String::new();
    y_axis(&mut out, top, height);
    let label_every = (items.len() / 12).max(1);
    for (i, bar) in items.iter().enumerate() {
        let x = LEFT + slot * i as f64 + (slot - width) / 2.0;
        let mut base = TOP + height;
        for (class, value, title) in &bar.parts {
            let h = height * (value / top);
            base -= h;
            let _ = write!(
                out,
                r#"<rect class="{class}" x="{x:.1}" y="{base:.1}" width="{width:.1}" height="{h:.1}"><title>{}</title></rect>"#,
                maud::html! { (bar.label) ": " (title) }.into_string()
            );
        }
        if i % label_every == 0 {
            let _ = write!(
                out,
                r#"<text class="tick" x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
                x + width / 2.0,
                TOP + height + 14.0,
                maud::html! { (bar.label) }.into_string()
            );
        }
    }
    html! {
        figure.chart {
            svg viewBox={ "0 0 " (WIDTH) " " (TOP + height + 24.0) } role="img" aria-label=(y_label) {
                (PreEscaped(out))
            }
        }
    }
}

/// One summary version's band on the seq axis: it covers `1..=through`, of which
/// `new_from..=through` is what it added to the version it was built on.
pub(crate) struct Band {
    pub id: u64,
    pub new_from: u64,
    pub through: u64,
    pub active: bool,
    pub href: String,
}

/// A run's seq axis `1..=last`: each summary version's coverage as a band (newest lowest, the
/// part it added over its base solid, the active one marked), the source agent's own compactions as lines after their seq, pins as
/// ticks.
pub(crate) fn coverage(last: u64, bands: &[Band], compactions: &[u64], pins: &[u64]) -> Markup {
    let plot = WIDTH - LEFT - RIGHT;
    let x = |seq: f64| LEFT + plot * ((seq - 1.0) / (last.max(1) as f64)).clamp(0.0, 1.0);
    let row = 16.0;
    let height = 30.0 + row * bands.len() as f64;
    let mut out = String::new();
    let _ = write!(
        out,
        r#"<line class="axis" x1="{LEFT}" x2="{}" y1="20" y2="20"/><text class="tick" x="{LEFT}" y="12">seq 1</text><text class="tick" x="{}" y="12" text-anchor="end">seq {last}</text>"#,
        WIDTH - RIGHT,
        WIDTH - RIGHT
    );
    for seq in pins {
        let px = x(*seq as f64);
        let _ = write!(
            out,
            r#"<line class="pin" x1="{px:.1}" x2="{px:.1}" y1="14" y2="26"><title>pinned: seq {seq}</title></line>"#
        );
    }
    for after in compactions {
        let px = x(*after as f64 + 0.5);
        let _ = write!(
            out,
            r#"<line class="source-compaction" x1="{px:.1}" x2="{px:.1}" y1="20" y2="{height}"><title>the source agent compacted after seq {after}</title></line>"#
        );
    }
    for (i, band) in bands.iter().enumerate() {
        let y = 28.0 + row * i as f64;
        let start = x(1.0);
        let x0 = x(band.new_from as f64);
        let x1 = x(band.through as f64 + 1.0).max(x0 + 2.0);
        let _ = write!(
            out,
            r#"<a href="{}"><rect class="band old" x="{start:.1}" y="{y:.1}" width="{:.1}" height="{:.1}"/><rect class="band{}" x="{x0:.1}" y="{y:.1}" width="{:.1}" height="{:.1}"><title>summary v{} covers seq 1 to {}, seq {} to {} new{}</title></rect></a><text class="tick" x="{}" y="{:.1}" text-anchor="end">v{}</text>"#,
            band.href,
            (x0 - start).max(0.0),
            row - 4.0,
            if band.active { " active" } else { "" },
            x1 - x0,
            row - 4.0,
            band.id,
            band.through,
            band.new_from,
            band.through,
            if band.active { " (active)" } else { "" },
            LEFT - 6.0,
            y + row - 6.0,
            band.id
        );
    }
    html! {
        figure.chart.coverage {
            svg viewBox={ "0 0 " (WIDTH) " " (height + 4.0) } role="group" aria-label="summary coverage over the run's seqs; each band links to its version" {
                (PreEscaped(out))
            }
            figcaption.legend {
                span { i.swatch.band.old {} "covered by the version it was built on" }
                span { i.swatch.band {} "what a version added" }
                span { i.swatch.band.active {} "the active summary" }
                span { i.swatch.source-compaction {} "the source agent's compaction" }
                span { i.swatch.pin {} "pin" }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axes_round_up_to_a_readable_top() {
        assert_eq!(nice(0.0), 1.0);
        assert_eq!(nice(7.0), 10.0);
        assert_eq!(nice(120.0), 200.0);
        assert_eq!(nice(4_900.0), 5_000.0);
        assert_eq!(short(1_500_000.0), "1.5M");
        assert_eq!(short(12_000.0), "12k");
    }

    #[test]
    fn names_are_escaped_in_the_drawing() {
        let chart = lines(
            &[Series {
                name: "<script>".into(),
                class: "full",
                points: vec![(1.0, 2.0)],
            }],
            "x",
            "y",
            100.0,
        )
        .into_string();
        assert!(!chart.contains("<script>"), "{chart}");
        assert!(chart.contains("&lt;script&gt;"));
    }
}
