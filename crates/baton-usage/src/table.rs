//! The reports as text tables, with ccusage's columns (`Date | Models | Input | Output |
//! Cache Create | Cache Read | Total Tokens | Cost (USD)`) and baton's after them (`Cache Hit`,
//! and for sessions `Peak Context`). Numbers have thousands separators; model names are shown
//! without the `claude-` prefix and the date suffix, as ccusage shows them.

use crate::{BlocksReport, Report, Row, SessionReport, Totals};

/// The columns every report has after the ones naming its rows: ccusage's, then baton's.
const COLUMNS: [&str; 8] = [
    "Models",
    "Input",
    "Output",
    "Cache Create",
    "Cache Read",
    "Total Tokens",
    "Cost (USD)",
    "Cache Hit",
];

/// A report to draw.
pub enum Table<'a> {
    /// `daily`, `weekly` or `monthly`.
    Period(&'a Report),
    /// `session`.
    Sessions(&'a SessionReport),
    /// `blocks`.
    Blocks(&'a BlocksReport),
}

/// Draws `report`; with `breakdown`, each row is followed by one row per model.
pub fn table(report: Table<'_>, breakdown: bool) -> String {
    match report {
        Table::Period(r) => {
            let first = match r.period {
                crate::Period::Daily => "Date",
                crate::Period::Weekly => "Week",
                crate::Period::Monthly => "Month",
            };
            rows_table(
                &[first],
                &r.rows,
                &r.totals,
                breakdown,
                |row| vec![row.period.clone()],
                false,
            )
        }
        Table::Sessions(r) => rows_table(
            &["Session", "Project", "Last Activity"],
            &r.rows,
            &r.totals,
            breakdown,
            |row| {
                vec![
                    short_session(&row.period),
                    row.project.clone().unwrap_or_default(),
                    row.last_activity
                        .map(|t| t.to_string().chars().take(10).collect())
                        .unwrap_or_default(),
                ]
            },
            true,
        ),
        Table::Blocks(r) => blocks_table(r),
    }
}

/// ccusage shows a session by the last two parts of its id.
fn short_session(id: &str) -> String {
    let parts: Vec<&str> = id.split('-').collect();
    if parts.len() > 2 {
        parts[parts.len() - 2..].join("-")
    } else {
        id.to_owned()
    }
}

/// `claude-sonnet-4-5-20250929` → `sonnet-4-5`.
pub(crate) fn short_model(model: &str) -> String {
    let m = model.strip_prefix("claude-").unwrap_or(model);
    match m.rsplit_once('-') {
        Some((head, date)) if date.len() == 8 && date.bytes().all(|b| b.is_ascii_digit()) => {
            head.to_owned()
        }
        _ => m.to_owned(),
    }
}

/// `n` with a comma between each group of three digits, as ccusage's tables show counts
/// (`1,234,567`).
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn dollars(x: f64) -> String {
    format!("${x:.2}")
}

fn percent(x: Option<f64>) -> String {
    x.map(|x| format!("{:.1}%", x * 100.0))
        .unwrap_or_else(|| "-".to_owned())
}

fn rows_table(
    lead: &[&str],
    rows: &[Row],
    totals: &Totals,
    breakdown: bool,
    key: impl Fn(&Row) -> Vec<String>,
    sessions: bool,
) -> String {
    let mut header: Vec<String> = lead.iter().map(|s| (*s).to_owned()).collect();
    header.extend(COLUMNS.map(str::to_owned));
    if sessions {
        header.push("Peak Context".to_owned());
    }
    let mut body: Vec<Vec<String>> = Vec::new();
    for row in rows {
        let mut cells = key(row);
        cells.push(
            row.models_used
                .iter()
                .map(|m| short_model(m))
                .collect::<Vec<_>>()
                .join(", "),
        );
        cells.extend([
            thousands(row.input_tokens),
            thousands(row.output_tokens),
            thousands(row.cache_creation_tokens),
            thousands(row.cache_read_tokens),
            thousands(row.total_tokens),
            dollars(row.total_cost),
            percent(row.cache_efficiency),
        ]);
        if sessions {
            cells.push(row.peak_context.map(thousands).unwrap_or_default());
        }
        body.push(cells);
        if breakdown {
            for m in &row.model_breakdowns {
                let mut cells = vec![String::new(); lead.len()];
                cells.push(format!("└ {}", short_model(&m.model_name)));
                let cached = m.cache_read_tokens + m.cache_creation_tokens;
                cells.extend([
                    thousands(m.input_tokens),
                    thousands(m.output_tokens),
                    thousands(m.cache_creation_tokens),
                    thousands(m.cache_read_tokens),
                    thousands(
                        m.input_tokens
                            + m.output_tokens
                            + m.cache_creation_tokens
                            + m.cache_read_tokens,
                    ),
                    dollars(m.cost),
                    percent((cached > 0).then(|| m.cache_read_tokens as f64 / cached as f64)),
                ]);
                if sessions {
                    cells.push(String::new());
                }
                body.push(cells);
            }
        }
    }
    let mut total = vec!["Total".to_owned()];
    total.extend(vec![String::new(); lead.len()]);
    total.extend([
        thousands(totals.input_tokens),
        thousands(totals.output_tokens),
        thousands(totals.cache_creation_tokens),
        thousands(totals.cache_read_tokens),
        thousands(totals.total_tokens),
        dollars(totals.total_cost),
        percent(totals.cache_efficiency),
    ]);
    if sessions {
        total.push(String::new());
    }
    render(&header, &body, Some(&total), lead.len() + 1)
}

fn blocks_table(r: &BlocksReport) -> String {
    let mut header: Vec<String> = vec!["Block Start Time".to_owned(), "Status".to_owned()];
    header.extend(COLUMNS.map(str::to_owned));
    let mut body = Vec::new();
    for b in &r.blocks {
        let status = if b.is_gap {
            "gap".to_owned()
        } else if b.is_active {
            match b.projection {
                Some(p) => format!(
                    "ACTIVE ({}m left, projected {} tokens, {})",
                    p.remaining_minutes,
                    thousands(p.total_tokens),
                    dollars(p.total_cost)
                ),
                None => "ACTIVE".to_owned(),
            }
        } else {
            let minutes = b
                .actual_end_time
                .map_or(0, |end| (end.0 - b.start_time.0).max(0) / 60_000);
            format!("{}h {}m", minutes / 60, minutes % 60)
        };
        body.push(vec![
            b.start_time
                .to_string()
                .chars()
                .take(16)
                .collect::<String>()
                .replace('T', " "),
            status,
            b.models
                .iter()
                .map(|m| short_model(m))
                .collect::<Vec<_>>()
                .join(", "),
            thousands(b.token_counts.input_tokens),
            thousands(b.token_counts.output_tokens),
            thousands(b.token_counts.cache_creation_input_tokens),
            thousands(b.token_counts.cache_read_input_tokens),
            thousands(b.total_tokens),
            dollars(b.cost_usd),
            percent(b.cache_efficiency),
        ]);
    }
    render(&header, &body, None, 3)
}

/// Columns before `numeric_from` are left-aligned, the rest right-aligned.
fn render(
    header: &[String],
    body: &[Vec<String>],
    total: Option<&Vec<String>>,
    numeric_from: usize,
) -> String {
    let width = |cells: &[String], i: usize| cells.get(i).map_or(0, |c| c.chars().count());
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            body.iter()
                .map(|r| width(r, i))
                .chain(total.map(|t| width(t, i)))
                .chain([width(header, i)])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &[String]| {
        let mut out = String::new();
        for (i, w) in widths.iter().enumerate() {
            let c = cells.get(i).map_or("", String::as_str);
            let pad = w.saturating_sub(c.chars().count());
            if i > 0 {
                out.push_str("  ");
            }
            if i >= numeric_from {
                out.push_str(&" ".repeat(pad));
                out.push_str(c);
            } else {
                out.push_str(c);
                out.push_str(&" ".repeat(pad));
            }
        }
        out.trim_end().to_owned() + "\n"
    };
    let rule = "─".repeat(widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1)) + "\n";
    let mut out = line(header);
    out.push_str(&rule);
    for r in body {
        out.push_str(&line(r));
    }
    if let Some(t) = total {
        out.push_str(&rule);
        out.push_str(&line(t));
    }
    out
}
