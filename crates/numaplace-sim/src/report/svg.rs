//! Hand-written SVG: a buffer with shapes, axes with ticks and a legend.
//! Every number goes through [`num`], which never prints NaN or infinity,
//! and every text through [`esc`].

use std::fmt::Write;

/// Colour-blind-friendly palette (Okabe-Ito, then Tableau), cycled.
const PALETTE: [&str; 12] = [
    "#0072b2", "#e69f00", "#009e73", "#d55e00", "#cc79a7", "#56b4e9", "#f0e442", "#000000",
    "#8c564b", "#7f7f7f", "#bcbd22", "#17becf",
];

/// Width of a character of the 12 px sans-serif text, for layout.
pub(super) const CHAR_W: f64 = 6.8;

pub(super) fn color(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

/// Escapes text for HTML and XML (element content and quoted attributes).
pub(super) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            // Not allowed in XML 1.0.
            c if c.is_control() && !matches!(c, '\n' | '\t') => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

/// A coordinate: one decimal, no trailing `.0`, `0` for NaN or infinity.
pub(super) fn num(v: f64) -> String {
    if !v.is_finite() {
        return "0".into();
    }
    let s = format!("{:.1}", v);
    let s = s.strip_suffix(".0").unwrap_or(&s);
    if s == "-0" { "0".into() } else { s.into() }
}

/// Text shortened to `max` characters with an ellipsis.
pub(super) fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(max.saturating_sub(1)).collect();
        t.push('…');
        t
    }
}

/// Round tick values covering `[lo, hi]`, about `n` of them.
pub(super) fn ticks(lo: f64, hi: f64, n: usize) -> (Vec<f64>, f64) {
    if !(lo.is_finite() && hi.is_finite()) || hi <= lo {
        return (vec![if lo.is_finite() { lo } else { 0.0 }], 1.0);
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw * (1.0 - 1e-9))
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() as i64;
    let last = (hi / step + 1e-9).floor() as i64;
    ((first..=last).map(|i| i as f64 * step).collect(), step)
}

/// A tick label with as many decimals as the step needs.
pub(super) fn tick_label(v: f64, step: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    let decimals = (0..6)
        .find(|&d| {
            let scaled = step * 10f64.powi(d);
            (scaled - scaled.round()).abs() < 1e-6 * scaled.abs().max(1.0)
        })
        .unwrap_or(6) as usize;
    let s = format!("{v:.decimals$}");
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        "0".into()
    } else {
        s
    }
}

/// Largest finite value, at least `floor`.
pub(super) fn max_finite(vals: impl IntoIterator<Item = f64>, floor: f64) -> f64 {
    vals.into_iter()
        .filter(|v| v.is_finite())
        .fold(floor, f64::max)
}

/// Which samples to plot: all if there are at most `max`, otherwise about
/// `max` evenly spaced ones, always with the first and the last.
pub(super) fn sample_indices(n: usize, max: usize) -> Vec<usize> {
    if n <= max || max < 2 {
        return (0..n).collect();
    }
    let mut v: Vec<usize> = (0..max)
        .map(|k| (k as f64 * (n - 1) as f64 / (max - 1) as f64).round() as usize)
        .collect();
    v.dedup();
    v
}

/// A plot area inside an SVG: data ranges mapped to pixels.
#[derive(Debug, Clone, Copy)]
pub(super) struct Plot {
    pub left: f64,
    pub top: f64,
    pub w: f64,
    pub h: f64,
    pub x0: f64,
    pub x1: f64,
    pub y0: f64,
    pub y1: f64,
}

impl Plot {
    pub(super) fn x(&self, v: f64) -> f64 {
        let span = if self.x1 > self.x0 {
            self.x1 - self.x0
        } else {
            1.0
        };
        self.left + (v - self.x0) / span * self.w
    }

    pub(super) fn y(&self, v: f64) -> f64 {
        let span = if self.y1 > self.y0 {
            self.y1 - self.y0
        } else {
            1.0
        };
        self.top + self.h - (v - self.y0) / span * self.h
    }

    pub(super) fn bottom(&self) -> f64 {
        self.top + self.h
    }
}

/// An SVG document being written.
pub(super) struct Svg {
    buf: String,
    pub width: f64,
}

impl Svg {
    /// Starts an SVG of the given size; `label` is its accessible title.
    pub(super) fn new(width: f64, label: &str) -> Svg {
        let mut buf = String::new();
        let _ = writeln!(buf, "<title>{}</title>", esc(label));
        Svg { buf, width }
    }

    /// The finished element, `height` pixels tall.
    pub(super) fn finish(self, height: f64) -> String {
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" \
             font-family=\"sans-serif\" font-size=\"12\">\n{}</svg>\n",
            self.buf,
            w = num(self.width),
            h = num(height),
        )
    }

    pub(super) fn raw(&mut self, s: &str) {
        self.buf.push_str(s);
    }

    pub(super) fn line(&mut self, x1: f64, y1: f64, x2: f64, y2: f64, stroke: &str) {
        let _ = writeln!(
            self.buf,
            "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{stroke}\"/>",
            num(x1),
            num(y1),
            num(x2),
            num(y2)
        );
    }

    /// A rectangle; `tip` becomes a hover title.
    pub(super) fn rect(&mut self, x: f64, y: f64, w: f64, h: f64, fill: &str, tip: Option<&str>) {
        let _ = write!(
            self.buf,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{fill}\"",
            num(x),
            num(y),
            num(w.max(0.0)),
            num(h.max(0.0))
        );
        match tip {
            Some(t) => {
                let _ = writeln!(self.buf, "><title>{}</title></rect>", esc(t));
            }
            None => self.buf.push_str("/>\n"),
        }
    }

    /// Text; `anchor` is `start`, `middle` or `end`; `extra` more attributes.
    pub(super) fn text(&mut self, x: f64, y: f64, anchor: &str, extra: &str, s: &str) {
        let _ = writeln!(
            self.buf,
            "<text x=\"{}\" y=\"{}\" text-anchor=\"{anchor}\"{}{extra}>{}</text>",
            num(x),
            num(y),
            if extra.is_empty() { "" } else { " " },
            esc(s)
        );
    }

    /// An open line through `pts`; `tip` becomes a hover title.
    pub(super) fn polyline(&mut self, pts: &[(f64, f64)], stroke: &str, tip: &str) {
        let _ = write!(
            self.buf,
            "<polyline fill=\"none\" stroke=\"{stroke}\" stroke-width=\"1.5\" stroke-linejoin=\"round\" points=\""
        );
        self.points(pts);
        let _ = writeln!(self.buf, "\"><title>{}</title></polyline>", esc(tip));
    }

    /// A filled shape through `pts`.
    pub(super) fn polygon(&mut self, pts: &[(f64, f64)], fill: &str, tip: &str) {
        let _ = write!(
            self.buf,
            "<polygon fill=\"{fill}\" fill-opacity=\"0.85\" points=\""
        );
        self.points(pts);
        let _ = writeln!(self.buf, "\"><title>{}</title></polygon>", esc(tip));
    }

    fn points(&mut self, pts: &[(f64, f64)]) {
        for (i, (x, y)) in pts.iter().enumerate() {
            let sep = if i == 0 { "" } else { " " };
            let _ = write!(self.buf, "{sep}{},{}", num(*x), num(*y));
        }
    }

    /// Frame, grid, ticks and labels of a plot with numeric axes; `y_ticks`
    /// false leaves the y axis to the caller.
    pub(super) fn axes(&mut self, p: &Plot, x_title: &str, y_title: &str, y_ticks: bool) {
        let (xt, xs) = ticks(p.x0, p.x1, ((p.w / 80.0) as usize).max(2));
        for v in xt {
            let x = p.x(v);
            self.line(x, p.top, x, p.bottom(), "#e4e4e4");
            self.line(x, p.bottom(), x, p.bottom() + 4.0, "#333");
            self.text(x, p.bottom() + 16.0, "middle", "", &tick_label(v, xs));
        }
        if y_ticks {
            let (yt, ys) = ticks(p.y0, p.y1, ((p.h / 40.0) as usize).max(2));
            for v in yt {
                let y = p.y(v);
                self.line(p.left, y, p.left + p.w, y, "#e4e4e4");
                self.line(p.left - 4.0, y, p.left, y, "#333");
                self.text(p.left - 6.0, y + 4.0, "end", "", &tick_label(v, ys));
            }
        }
        let _ = writeln!(
            self.buf,
            "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#333\"/>",
            num(p.left),
            num(p.top),
            num(p.w),
            num(p.h)
        );
        self.text(p.left + p.w / 2.0, p.bottom() + 32.0, "middle", "", x_title);
        if !y_title.is_empty() {
            let (cx, cy) = ((p.left - 46.0).max(12.0), p.top + p.h / 2.0);
            let rotate = format!("transform=\"rotate(-90 {} {})\"", num(cx), num(cy));
            self.text(cx, cy, "middle", &rotate, y_title);
        }
    }

    /// A legend flowing in rows from (`x`, `y`) within `width`; returns the
    /// y below it.
    pub(super) fn legend(&mut self, x: f64, y: f64, width: f64, items: &[(String, &str)]) -> f64 {
        let (mut cx, mut cy) = (x, y);
        for (label, colour) in items {
            let label = clip(label, 40);
            let w = 22.0 + label.chars().count() as f64 * CHAR_W + 14.0;
            if cx > x && cx + w > x + width {
                cx = x;
                cy += 18.0;
            }
            self.rect(cx, cy, 14.0, 10.0, colour, None);
            self.text(cx + 19.0, cy + 10.0, "start", "", &label);
            cx += w;
        }
        if items.is_empty() { y } else { cy + 18.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_never_print_nan_or_infinity() {
        assert_eq!(num(f64::NAN), "0");
        assert_eq!(num(f64::INFINITY), "0");
        assert_eq!(num(-0.01), "0");
        assert_eq!(num(12.0), "12");
        assert_eq!(num(1.25), "1.2");
        assert_eq!(ticks(f64::NAN, 1.0, 5).0, [0.0]);
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(ticks(0.0, 100.0, 5).0, [0.0, 20.0, 40.0, 60.0, 80.0, 100.0]);
        let (t, step) = ticks(0.0, 9.0, 4);
        assert_eq!(t, [0.0, 2.5, 5.0, 7.5]);
        assert_eq!(tick_label(7.5, step), "7.5");
        assert_eq!(tick_label(0.0, step), "0");
        assert_eq!(tick_label(2000.0, 1000.0), "2000");
    }

    #[test]
    fn sampling_keeps_the_ends() {
        assert_eq!(sample_indices(5, 400), [0, 1, 2, 3, 4]);
        let v = sample_indices(10_000, 400);
        assert!(v.len() <= 400 && v[0] == 0 && *v.last().unwrap() == 9_999);
    }

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href='x'>&\"\x1b"),
            "&lt;a href=&#39;x&#39;&gt;&amp;&quot;\u{fffd}"
        );
        assert_eq!(clip("abcdef", 4), "abc…");
    }
}
