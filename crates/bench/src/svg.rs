//! A small line chart in SVG.
//!
//! Written here because the plotting crates lay out text through a
//! system font stack (fontconfig) even for SVG output, which a fresh
//! machine may lack; this chart needs two axes, a legend and a few lines.

use std::fmt::Write;

pub struct Series {
    pub name: String,
    pub colour: &'static str,
    pub dashed: bool,
    pub points: Vec<(f64, f64)>,
}

pub struct Chart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

/// A tick step of 1, 2 or 5 × 10^n giving about `n` ticks over `span`.
fn nice_step(span: f64, n: f64) -> f64 {
    let raw = (span / n).max(f64::MIN_POSITIVE);
    let mag = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag)
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

impl Chart {
    pub fn render(&self) -> String {
        let (w, h) = (860.0, 520.0);
        let (left, right, top, bottom) = (80.0, 200.0, 50.0, 60.0);
        let (pw, ph) = (w - left - right, h - top - bottom);
        let all = self.series.iter().flat_map(|s| s.points.iter());
        let x_max = all.clone().map(|p| p.0).fold(0.0, f64::max).max(1.0);
        let y_max = all.map(|p| p.1).fold(0.0, f64::max).max(1.0) * 1.05;
        let (x_step, y_step) = (nice_step(x_max, 10.0), nice_step(y_max, 8.0));
        let x_top = (x_max / x_step).ceil() * x_step;
        let y_top = (y_max / y_step).ceil() * y_step;
        let px = |x: f64| left + x / x_top * pw;
        let py = |y: f64| top + ph - y / y_top * ph;

        let mut out = String::new();
        let _ = writeln!(
            out,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="12">"#
        );
        let _ = writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="28" font-size="16" text-anchor="middle">{}</text>"#,
            left + pw / 2.0,
            escape(&self.title)
        );
        let mut x = 0.0;
        while x <= x_top + 1e-9 {
            let _ = writeln!(
                out,
                r##"<line x1="{0}" y1="{1}" x2="{0}" y2="{2}" stroke="#e4e4e4"/><text x="{0}" y="{3}" text-anchor="middle">{4}</text>"##,
                px(x),
                top,
                top + ph,
                top + ph + 18.0,
                x
            );
            x += x_step;
        }
        let mut y = 0.0;
        while y <= y_top + 1e-9 {
            let _ = writeln!(
                out,
                r##"<line x1="{0}" y1="{1}" x2="{2}" y2="{1}" stroke="#e4e4e4"/><text x="{3}" y="{4}" text-anchor="end">{5}</text>"##,
                left,
                py(y),
                left + pw,
                left - 8.0,
                py(y) + 4.0,
                y
            );
            y += y_step;
        }
        let _ = writeln!(
            out,
            r#"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="black"/>"#
        );
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
            left + pw / 2.0,
            h - 18.0,
            escape(&self.x_label)
        );
        let _ = writeln!(
            out,
            r#"<text x="22" y="{0}" text-anchor="middle" transform="rotate(-90 22 {0})">{1}</text>"#,
            top + ph / 2.0,
            escape(&self.y_label)
        );
        for (i, s) in self.series.iter().enumerate() {
            let dash = if s.dashed {
                r#" stroke-dasharray="6 4""#
            } else {
                ""
            };
            let points: Vec<String> = s
                .points
                .iter()
                .map(|&(x, y)| format!("{:.1},{:.1}", px(x), py(y)))
                .collect();
            let _ = writeln!(
                out,
                r#"<polyline points="{}" fill="none" stroke="{}" stroke-width="2"{dash}/>"#,
                points.join(" "),
                s.colour
            );
            for &(x, y) in &s.points {
                let _ = writeln!(
                    out,
                    r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="{}"/>"#,
                    px(x),
                    py(y),
                    s.colour
                );
            }
            let ly = top + 10.0 + i as f64 * 22.0;
            let lx = left + pw + 16.0;
            let _ = writeln!(
                out,
                r#"<line x1="{lx}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{}" y="{}">{}</text>"#,
                lx + 26.0,
                s.colour,
                lx + 32.0,
                ly + 4.0,
                escape(&s.name)
            );
        }
        out.push_str("</svg>\n");
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    // Round steps are exact in binary floating point.
    #[allow(clippy::float_cmp)]
    fn steps_are_round_and_the_chart_is_well_formed() {
        assert_eq!(nice_step(100.0, 10.0), 10.0);
        assert_eq!(nice_step(2093.0, 8.0), 500.0);
        let svg = Chart {
            title: "a < b".into(),
            x_label: "x".into(),
            y_label: "y".into(),
            series: vec![Series {
                name: "s".into(),
                colour: "red",
                dashed: true,
                points: vec![(10.0, 1.0), (20.0, 3.0)],
            }],
        }
        .render();
        assert!(svg.starts_with("<svg") && svg.ends_with("</svg>\n"));
        assert!(svg.contains("a &lt; b"));
        assert_eq!(svg.matches("<circle").count(), 2);
    }
}
