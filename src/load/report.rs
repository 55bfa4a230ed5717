//! The `--report F.html` page of `tidemark load`: self-contained (inline SVG, no script), with
//! throughput over time and latency by percentile, the way HdrHistogram plots it (percentiles
//! on a log scale of 1 / (1 - p), so the tail gets room).

use super::Summary;
use std::fmt::Write as _;

const W: f64 = 760.0;
const H: f64 = 300.0;
const PAD: f64 = 64.0;

/// A tick label: whole numbers for large values, decimals for small ones.
fn label(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// A polyline chart of (x, y) points with axes, ticks given as (position, label).
fn chart(title: &str, points: &[(f64, f64)], x_ticks: &[(f64, String)], y_label: &str, x_max: f64) -> String {
    let y_max = points.iter().map(|p| p.1).fold(0.0f64, f64::max).max(1e-9) * 1.1;
    let sx = |x: f64| PAD + x / x_max.max(1e-9) * (W - 2.0 * PAD);
    let sy = |y: f64| H - PAD - y / y_max * (H - 2.0 * PAD);
    let mut svg = format!("<h2>{}</h2>\n<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{W}\" height=\"{H}\" style=\"font:11px sans-serif\">\n", escape(title));
    let _ =
        writeln!(svg, "<line x1=\"{PAD}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\"/>", H - PAD, W - PAD, H - PAD);
    let _ = writeln!(svg, "<line x1=\"{PAD}\" y1=\"{PAD}\" x2=\"{PAD}\" y2=\"{}\" stroke=\"#444\"/>", H - PAD);
    for i in 0..=4 {
        let v = y_max * i as f64 / 4.0;
        let y = sy(v);
        let _ = writeln!(svg, "<line x1=\"{PAD}\" y1=\"{y:.1}\" x2=\"{}\" y2=\"{y:.1}\" stroke=\"#ddd\"/><text x=\"4\" y=\"{:.1}\">{}</text>", W - PAD, y + 4.0, label(v));
    }
    for (x, label) in x_ticks {
        let px = sx(*x);
        let _ = writeln!(
            svg,
            "<text x=\"{px:.1}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            H - PAD + 16.0,
            escape(label)
        );
    }
    let _ = writeln!(svg, "<text x=\"{PAD}\" y=\"{}\">{}</text>", PAD - 10.0, escape(y_label));
    let path: Vec<String> = points.iter().map(|&(x, y)| format!("{:.1},{:.1}", sx(x), sy(y))).collect();
    let _ =
        writeln!(svg, "<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"{}\"/>", path.join(" "));
    svg.push_str("</svg>\n");
    svg
}

/// The whole page.
pub fn html(summary: &Summary, title: &str) -> String {
    let mut page = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>{t}</title></head>\n<body style=\"font-family:sans-serif;max-width:820px\">\n<h1>{t}</h1>\n<pre>{}</pre>\n",
        escape(&summary.to_text()),
        t = escape(title)
    );
    // Latency by percentile: x = log10(1 / (1 - p)), from p50 (0.3) to p99.999 (5).
    let mut lat = Vec::new();
    let mut p = 0.0f64;
    while p <= 0.99999 {
        let x = (1.0 / (1.0 - p)).log10();
        lat.push((x, summary.latency.value_at_quantile(p) as f64 / 1000.0));
        p += (1.0 - p) / 20.0;
    }
    lat.push((5.0, summary.latency.max() as f64 / 1000.0));
    let ticks: Vec<(f64, String)> = ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
        .iter()
        .enumerate()
        .map(|(i, l)| (i as f64, l.to_string()))
        .collect();
    page.push_str(&chart("Latency by percentile", &lat, &ticks, "ms", 5.0));
    let secs = summary.timeline.last().map_or(1.0, |t| t.0.max(1.0));
    let thr: Vec<(f64, f64)> = summary.timeline.iter().map(|t| (t.0, t.1)).collect();
    let ticks: Vec<(f64, String)> =
        (0..=5).map(|i| (secs * i as f64 / 5.0, format!("{:.0} s", secs * i as f64 / 5.0))).collect();
    page.push_str(&chart("Throughput over time", &thr, &ticks, "records/s", secs));
    let p99: Vec<(f64, f64)> = summary.timeline.iter().map(|t| (t.0, t.3)).collect();
    page.push_str(&chart("p99 latency per second", &p99, &ticks, "ms", secs));
    page.push_str("</body></html>\n");
    page
}
