//! `neardup-bench growth-plot`: how `similar --id` grows with the index, from the records
//! `es-similar --record FILE` appends (one JSON line per configuration and run).
//!
//! For each way of looking up (the index's methods and the query, and the fill of its
//! synthetic articles) with the chosen filter, the
//! latest record at each index size is a point; the table gives median and p99 per size and
//! the plot draws both against the number of documents, both axes logarithmic. Records of
//! `--corpus-queries` runs are left out: the plot is of random documents as lookups.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::Value;

use neardup::cli::common::{CmdResult, Status};

#[derive(clap::Args, Debug)]
pub struct GrowthPlotBench {
    /// Records of `neardup-bench es-similar --record FILE` (JSON lines); repeat it to draw
    /// several files together (the fills of the synthetic articles, say).
    #[arg(long, short, required = true)]
    input: Vec<PathBuf>,
    /// The PNG to draw.
    #[arg(long, short)]
    out: PathBuf,
    /// The filter whose lookups are drawn (`server` or `client`).
    #[arg(long, default_value = "server")]
    filter: String,
}

/// One measured size of one way of looking up.
#[derive(Clone, Debug, PartialEq)]
struct Point {
    docs: u64,
    median_ms: f64,
    p99_ms: f64,
    at: u64,
}

/// The series of the records, keyed by "methods: query", with the latest record per size.
fn series(records: &[Value], filter: &str) -> anyhow::Result<BTreeMap<String, Vec<Point>>> {
    let mut out: BTreeMap<String, BTreeMap<u64, Point>> = BTreeMap::new();
    for (n, r) in records.iter().enumerate() {
        let field = |name: &str| {
            r.get(name)
                .with_context(|| format!("record {}: no `{name}`", n + 1))
        };
        if field("filter")?.as_str() != Some(filter)
            || r.get("corpus_queries").and_then(Value::as_bool) == Some(true)
        {
            continue;
        }
        let text = |name: &str| -> anyhow::Result<String> {
            Ok(field(name)?
                .as_str()
                .with_context(|| format!("record {}: `{name}` is not a string", n + 1))?
                .to_owned())
        };
        let number = |name: &str| -> anyhow::Result<f64> {
            field(name)?
                .as_f64()
                .with_context(|| format!("record {}: `{name}` is not a number", n + 1))
        };
        let point = Point {
            docs: number("docs")? as u64,
            median_ms: number("median_ms")?,
            p99_ms: number("p99_ms")?,
            at: number("at")? as u64,
        };
        // Records before `--fill` existed are of the sentence fill.
        let fill = r.get("fill").and_then(Value::as_str).unwrap_or("sentences");
        let key = format!("{}: {}, {fill}", text("methods")?, text("query")?);
        let sizes = out.entry(key).or_default();
        match sizes.get(&point.docs) {
            Some(p) if p.at > point.at => {}
            _ => {
                sizes.insert(point.docs, point);
            }
        }
    }
    Ok(out
        .into_iter()
        .map(|(k, sizes)| (k, sizes.into_values().collect()))
        .collect())
}

pub fn run(args: GrowthPlotBench) -> CmdResult {
    let mut records = Vec::new();
    for input in &args.input {
        let file = std::fs::File::open(input)
            .with_context(|| format!("{}: cannot read the records", input.display()))?;
        for (n, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line?;
            if line.trim().is_empty() {
                continue;
            }
            records.push(
                serde_json::from_str::<Value>(&line)
                    .with_context(|| format!("{}:{}: not JSON", input.display(), n + 1))?,
            );
        }
    }
    let series = series(&records, &args.filter)?;
    anyhow::ensure!(
        !series.is_empty(),
        "{}: no record of random lookups with filter {}",
        args.input
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        args.filter
    );
    let sizes: Vec<u64> = {
        let mut s: Vec<u64> = series.values().flatten().map(|p| p.docs).collect();
        s.sort_unstable();
        s.dedup();
        s
    };
    println!(
        "| lookup ({} filter) | {} |",
        args.filter,
        sizes
            .iter()
            .map(|d| format!("{d} docs: median / p99 ms"))
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---|".repeat(sizes.len()));
    for (name, points) in &series {
        let cells: Vec<String> = sizes
            .iter()
            .map(|d| match points.iter().find(|p| p.docs == *d) {
                Some(p) => format!("{:.2} / {:.2}", p.median_ms, p.p99_ms),
                None => "—".to_owned(),
            })
            .collect();
        println!("| {name} | {} |", cells.join(" | "));
    }
    plot(&args.out, &series)?;
    eprintln!("drew {}", args.out.display());
    Ok(Status::Done)
}

/// What a panel draws of a point.
type Measure = fn(&Point) -> f64;

/// Two panels, median and p99 against documents, a line per series.
fn plot(out: &Path, series: &BTreeMap<String, Vec<Point>>) -> anyhow::Result<()> {
    use plotters::prelude::*;
    let font = neardup::cli::eval_plot::find_font(None);
    if let Some(p) = &font {
        let bytes: &'static [u8] = Box::leak(std::fs::read(p)?.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| anyhow::anyhow!("{}: not a usable font", p.display()))?;
    }
    let points = || series.values().flatten();
    let x_min = points().map(|p| p.docs).min().unwrap_or(1) as f64 / 1.5;
    let x_max = points().map(|p| p.docs).max().unwrap_or(1) as f64 * 1.5;
    let root = BitMapBackend::new(out, (1000, 800)).into_drawing_area();
    root.fill(&WHITE)?;
    let panels = root.split_evenly((2, 1));
    let colours = neardup::cli::eval_plot::COLOURS;
    // Issue 45's targets at 10M: p50 at most 10 ms, p99 at most 50 ms.
    let panel_of: [(&str, Measure, f64); 2] = [
        ("median lookup (ms)", |p| p.median_ms, 10.0),
        ("p99 lookup (ms)", |p| p.p99_ms, 50.0),
    ];
    for (area, (title, value, target)) in panels.iter().zip(panel_of) {
        let y_min = points().map(value).fold(f64::INFINITY, f64::min).min(1.0) / 1.5;
        let y_max = points().map(value).fold(target, f64::max) * 1.5;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 20))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d((x_min..x_max).log_scale(), (y_min..y_max).log_scale())?;
        chart
            .configure_mesh()
            .x_desc("documents in the index")
            .x_label_formatter(&|x| format!("{:.0}", x))
            .y_labels(5)
            .max_light_lines(1)
            .draw()?;
        let grey = RGBColor(120, 120, 120);
        chart
            .draw_series(DashedLineSeries::new(
                [(x_min, target), (x_max, target)],
                6,
                4,
                grey.stroke_width(1),
            ))?
            .label(format!("target ({target} ms)"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], grey));
        for (i, (name, s)) in series.iter().enumerate() {
            let c = colours[i % colours.len()].1;
            let line: Vec<(f64, f64)> = s.iter().map(|p| (p.docs as f64, value(p))).collect();
            chart
                .draw_series(LineSeries::new(line.clone(), c.stroke_width(2)))?
                .label(name.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c));
            chart.draw_series(line.into_iter().map(|p| Circle::new(p, 4, c.filled())))?;
        }
        if font.is_some() {
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn record(docs: u64, filter: &str, median: f64, at: u64) -> Value {
        json!({"docs": docs, "methods": "both", "query": "MinHash", "filter": filter,
               "median_ms": median, "p99_ms": median * 4.0, "at": at})
    }

    #[test]
    fn the_latest_record_of_a_size_is_its_point_and_other_filters_are_left_out() {
        let records = [
            record(1_000_000, "server", 3.0, 10),
            record(100_000, "server", 1.0, 5),
            record(1_000_000, "server", 4.0, 20),
            record(1_000_000, "client", 9.0, 30),
        ];
        let s = series(&records, "server").unwrap();
        let points = &s["both: MinHash, sentences"];
        assert_eq!(
            points
                .iter()
                .map(|p| (p.docs, p.median_ms))
                .collect::<Vec<_>>(),
            [(100_000, 1.0), (1_000_000, 4.0)]
        );
    }

    #[test]
    fn each_fill_is_a_series_of_its_own_and_corpus_lookups_are_left_out() {
        let mut words = record(1_000_000, "server", 2.0, 10);
        words["fill"] = json!("words");
        let mut sentences = record(1_000_000, "server", 3.0, 10);
        sentences["fill"] = json!("sentences");
        let mut corpus = record(1_000_000, "server", 9.0, 20);
        corpus["fill"] = json!("words");
        corpus["corpus_queries"] = json!(true);
        let records = [record(100_000, "server", 1.0, 5), sentences, words, corpus];
        let s = series(&records, "server").unwrap();
        let medians = |name: &str| -> Vec<(u64, f64)> {
            s[name].iter().map(|p| (p.docs, p.median_ms)).collect()
        };
        assert_eq!(s.len(), 2, "{:?}", s.keys().collect::<Vec<_>>());
        assert_eq!(
            medians("both: MinHash, sentences"),
            [(100_000, 1.0), (1_000_000, 3.0)]
        );
        assert_eq!(medians("both: MinHash, words"), [(1_000_000, 2.0)]);
    }

    #[test]
    fn a_record_missing_a_field_is_an_error_naming_it() {
        let records = [json!({"docs": 1, "filter": "server"})];
        let e = series(&records, "server").unwrap_err().to_string();
        assert!(e.contains("record 1") && e.contains("median_ms"), "{e}");
    }
}
