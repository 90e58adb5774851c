//! Precision–recall curves as a PNG (plotters' bitmap backend).
//!
//! Text needs a TrueType font, loaded at run time from a file so nothing links against
//! fontconfig or freetype. Without one the curves are still drawn, without labels; the
//! caller prints the colour of each detector instead.

use std::path::{Path, PathBuf};

use plotters::prelude::*;

/// One curve: the detector's name and its operating points as (recall, precision), in order.
pub type Curve = (String, Vec<(f64, f64)>);

/// Fonts tried when none is given (Debian/Ubuntu, Fedora, Arch, macOS).
const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation-sans/LiberationSans-Regular.ttf",
    "/Library/Fonts/Arial.ttf",
    "/System/Library/Fonts/Supplemental/Arial.ttf",
];

/// Line colours, one per detector in order (cycled).
pub const COLOURS: &[(&str, RGBColor)] = &[
    ("blue", RGBColor(31, 119, 180)),
    ("orange", RGBColor(255, 127, 14)),
    ("green", RGBColor(44, 160, 44)),
    ("red", RGBColor(214, 39, 40)),
    ("purple", RGBColor(148, 103, 189)),
    ("brown", RGBColor(140, 86, 75)),
    ("pink", RGBColor(227, 119, 194)),
    ("grey", RGBColor(127, 127, 127)),
    ("olive", RGBColor(188, 189, 34)),
    ("cyan", RGBColor(23, 190, 207)),
];

/// The first readable font: `explicit`, else `NEARDUP_FONT`, else a usual system path.
pub fn find_font(explicit: Option<&Path>) -> Option<PathBuf> {
    let env = std::env::var_os("NEARDUP_FONT").map(PathBuf::from);
    explicit
        .map(Path::to_path_buf)
        .into_iter()
        .chain(env)
        .chain(FONT_CANDIDATES.iter().map(PathBuf::from))
        .find(|p| p.is_file())
}

/// Draws one precision–recall curve per detector (its operating points joined in order) to
/// `out`, under `title`. Returns whether labels were drawn (a font was found).
pub fn pr_curves(
    out: &Path,
    title: &str,
    curves: &[Curve],
    font: Option<&Path>,
) -> anyhow::Result<bool> {
    let font = match find_font(font) {
        Some(p) => {
            let bytes: &'static [u8] = Box::leak(std::fs::read(&p)?.into_boxed_slice());
            plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
                .map_err(|_| anyhow::anyhow!("{}: not a usable TrueType font", p.display()))?;
            true
        }
        None => false,
    };
    let y_min = curves
        .iter()
        .flat_map(|(_, p)| p.iter().map(|&(_, y)| y))
        .fold(1.0f64, f64::min);
    let y_min = ((y_min * 10.0).floor() / 10.0).clamp(0.0, 0.9);

    let root = BitMapBackend::new(out, (1000, 700)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut builder = ChartBuilder::on(&root);
    builder.margin(20);
    if font {
        builder
            .caption(title, ("sans-serif", 24))
            .x_label_area_size(45)
            .y_label_area_size(60);
    }
    let mut chart = builder.build_cartesian_2d(0.0..1.0, y_min..1.0)?;
    if font {
        chart
            .configure_mesh()
            .x_desc("recall")
            .y_desc("precision")
            .label_style(("sans-serif", 16))
            .draw()?;
    } else {
        for i in 0..=10 {
            let x = f64::from(i) / 10.0;
            chart.draw_series(LineSeries::new(
                [(x, y_min), (x, 1.0)],
                RGBColor(225, 225, 225),
            ))?;
            let y = y_min + (1.0 - y_min) * x;
            chart.draw_series(LineSeries::new(
                [(0.0, y), (1.0, y)],
                RGBColor(225, 225, 225),
            ))?;
        }
    }
    for (n, (name, pts)) in curves.iter().enumerate() {
        let colour = COLOURS[n % COLOURS.len()].1;
        let series =
            chart.draw_series(LineSeries::new(pts.iter().copied(), colour.stroke_width(2)))?;
        if font {
            series.label(name.as_str()).legend(move |(x, y)| {
                PathElement::new([(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        }
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, colour.filled())))?;
    }
    if font {
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerLeft)
            .label_font(("sans-serif", 16))
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(font)
}
