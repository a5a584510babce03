//! The charts of a run's data: the document-length histogram (share of documents and share of
//! tokens per power-of-two bin, the sequence length marked) and one step's work per
//! data-parallel replica (the slowest highlighted, the step's mean and the estimate's slowest
//! marked). Every figure drawn is checked finite first.

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::ReportError;
use super::charts::{
    ALERT, CAPTION, FONT, GREY, LABEL, Mark, categories, category, legend_column, mesh_style, rgb,
    svg, text,
};
use super::data::DataView;
use crate::cost::replica_loads::ReplicaLoads;

const DOCUMENTS: RGBColor = rgb(0x4e_79a7);
const TOKENS: RGBColor = rgb(0xf2_8e2b);
/// Replicas drawn at most: the first ones in order, and the slowest among them.
pub(super) const REPLICAS_DRAWN: usize = 64;

/// An error unless every figure is finite: a chart never draws or prints a figure that is not.
pub(super) fn check_finite(
    chart: &'static str,
    figures: impl IntoIterator<Item = (&'static str, f64)>,
) -> Result<(), ReportError> {
    for (figure, value) in figures {
        if !value.is_finite() {
            let message = format!("{figure} is {value}, not a finite number");
            return Err(ReportError::Chart { chart, message });
        }
    }
    Ok(())
}

/// A document length as an axis label: `512`, `4K`, `128K`, `16M` (lengths are powers of two).
pub(super) fn tokens_label(tokens: u64) -> String {
    match tokens {
        0..1024 => tokens.to_string(),
        1024..1_048_576 => format!("{}K", tokens / 1024),
        _ => format!("{}M", tokens / 1_048_576),
    }
}

/// `1 replica`, `4 replicas`.
pub(super) fn replicas_text(replicas: u64) -> String {
    if replicas == 1 { "1 replica".to_owned() } else { format!("{replicas} replicas") }
}

/// Seconds as shown: milliseconds below one second.
pub(super) fn seconds_text(seconds: f64) -> String {
    if seconds.abs() < 1.0 { format!("{:.1} ms", seconds * 1e3) } else { format!("{seconds:.3} s") }
}

/// The document-length histogram, documents and tokens side by side in each bin.
pub(super) fn lengths(view: &DataView) -> Result<String, ReportError> {
    let bins = &view.bins;
    check_finite(
        "lengths",
        bins.iter()
            .flat_map(|bin| [("a bin's documents", bin.documents), ("its tokens", bin.tokens)]),
    )?;
    let count = bins.len();
    let tallest = bins.iter().map(|bin| bin.documents.max(bin.tokens)).fold(0.0, f64::max);
    let top = (100.0 * tallest * 1.15).max(1.0);
    // The sequence length on the bins' axis: bin i holds lengths 2^(k + i) to 2^(k + i + 1) - 1.
    let first = bins.first().map_or(1, |bin| bin.low).max(1);
    let sequence_at = (view.seq_len.max(1) as f64).log2() - (first as f64).log2() - 0.5;
    let title = format!("Document lengths: {}", view.name);
    svg("lengths", &title, (1000, 440), |root| {
        let (left, side) = root.split_horizontally(770);
        let mut chart = ChartBuilder::on(&left)
            .caption(&title, (FONT, CAPTION))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(56)
            .build_cartesian_2d(categories(count), 0.0..top)?;
        let mut mesh = chart.configure_mesh();
        mesh_style(&mut mesh);
        mesh.disable_x_mesh()
            .x_labels(count)
            .x_label_formatter(&|v| {
                category(*v, count).map_or(String::new(), |i| tokens_label(bins[i].low))
            })
            .y_label_formatter(&|share| format!("{share:.0}"))
            .x_desc("document length in tokens (from each power of two to the next)")
            .y_desc("% of documents, % of tokens")
            .draw()?;
        chart.draw_series(bins.iter().enumerate().map(|(i, bin)| {
            let x = i as f64;
            Rectangle::new([(x - 0.4, 0.0), (x - 0.02, 100.0 * bin.documents)], DOCUMENTS.filled())
        }))?;
        chart.draw_series(bins.iter().enumerate().map(|(i, bin)| {
            let x = i as f64;
            Rectangle::new([(x + 0.02, 0.0), (x + 0.4, 100.0 * bin.tokens)], TOKENS.filled())
        }))?;
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(sequence_at, 0.0), (sequence_at, top)],
            8,
            5,
            ALERT.stroke_width(2),
        )))?;
        let entries = [
            ("% of documents".to_owned(), Mark::Box(DOCUMENTS)),
            ("% of tokens".to_owned(), Mark::Box(TOKENS)),
            (format!("sequence {} tokens", view.seq_len), Mark::Line(ALERT)),
        ];
        legend_column(&side, 70, &entries)
    })
}

/// The replicas drawn: all of them up to [`REPLICAS_DRAWN`], else the first ones and the
/// slowest in place of the last when it is not among them; each with its index.
pub(super) fn drawn_replicas(loads: &ReplicaLoads) -> Vec<(usize, f64)> {
    let all: Vec<(usize, f64)> = loads.loads.iter().map(|l| l.value()).enumerate().collect();
    if all.len() <= REPLICAS_DRAWN {
        return all;
    }
    let (slowest, _) = loads.slowest();
    let mut drawn = all[..REPLICAS_DRAWN].to_vec();
    if slowest >= REPLICAS_DRAWN {
        drawn[REPLICAS_DRAWN - 1] = all[slowest];
    }
    drawn
}

/// One step's work per replica: bars, the slowest in red, the step's mean and the estimate's
/// slowest replica as lines.
pub(super) fn replica_loads(loads: &ReplicaLoads) -> Result<String, ReportError> {
    let (slowest, slowest_load) = loads.slowest();
    let (mean, priced) = (loads.mean().value(), loads.priced_slowest.value());
    check_finite(
        "replica-loads",
        loads
            .loads
            .iter()
            .map(|load| ("a replica's work", load.value()))
            .chain([("the mean", mean), ("the estimate's slowest", priced)]),
    )?;
    let drawn = drawn_replicas(loads);
    let count = drawn.len();
    let tallest = slowest_load.value().max(priced).max(1e-9);
    // Milliseconds when the replicas do less than a second.
    let (scale, unit) = if tallest < 1.0 { (1e3, "ms") } else { (1.0, "s") };
    let top = tallest * scale * 1.15;
    // Every replica labelled up to 16 of them, else every k-th and the slowest (and not the
    // k-th labels too close to it).
    let every = count.div_ceil(16).max(1);
    let at = drawn.iter().position(|&(replica, _)| replica == slowest).unwrap_or(0);
    let labelled =
        |i: usize| i == at || (i.is_multiple_of(every) && i.abs_diff(at) >= every.div_ceil(2));
    let replicas = if count as u64 == loads.replicas {
        replicas_text(loads.replicas)
    } else {
        format!("{count} of {} replicas", loads.replicas)
    };
    let title = format!("Work per data-parallel replica in one step ({replicas}, critical stage)");
    svg("replica-loads", &title, (1000, 440), |root| {
        let (left, side) = root.split_horizontally(700);
        let mut chart = ChartBuilder::on(&left)
            .caption(&title, (FONT, CAPTION - 2))
            .margin(12)
            .x_label_area_size(44)
            .y_label_area_size(64)
            .build_cartesian_2d(categories(count), 0.0..top)?;
        let mut mesh = chart.configure_mesh();
        mesh_style(&mut mesh);
        mesh.disable_x_mesh()
            .x_labels(count)
            .x_label_formatter(&|v| match category(*v, count) {
                Some(i) if labelled(i) => drawn[i].0.to_string(),
                _ => String::new(),
            })
            .y_label_formatter(&|value| format!("{value:.1}"))
            .x_desc("data-parallel replica")
            .y_desc(unit)
            .draw()?;
        // Bars at most 60 pixels wide.
        let half = (0.4f64).min(30.0 * count as f64 / 600.0);
        chart.draw_series(drawn.iter().enumerate().map(|(i, &(replica, load))| {
            let color = if replica == slowest { ALERT } else { DOCUMENTS };
            let x = i as f64;
            Rectangle::new([(x - half, 0.0), (x + half, load * scale)], color.filled())
        }))?;
        let (from, to) = (-0.5, count.max(1) as f64 - 0.5);
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(from, mean * scale), (to, mean * scale)],
            8,
            5,
            GREY.stroke_width(2),
        )))?;
        chart.draw_series(std::iter::once(DashedPathElement::new(
            vec![(from, priced * scale), (to, priced * scale)],
            3,
            4,
            ALERT.stroke_width(2),
        )))?;
        let entries = [
            ("a replica's work".to_owned(), Mark::Box(DOCUMENTS)),
            (
                format!("slowest, replica {slowest}: {}", seconds_text(slowest_load.value())),
                Mark::Box(ALERT),
            ),
            (format!("mean of the step: {}", seconds_text(mean)), Mark::Line(GREY)),
            (
                format!(
                    "estimate's slowest of {}: {}",
                    replicas_text(loads.replicas),
                    seconds_text(priced)
                ),
                Mark::Line(ALERT),
            ),
        ];
        legend_column(&side, 70, &entries)?;
        side.draw(&Text::new(
            "(dashed: the step's mean; dotted: the estimate's)".to_owned(),
            (8, 70 + 24 * 4),
            text(LABEL - 2, GREY, HPos::Left, VPos::Center),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::units::Seconds;

    fn loads(values: &[f64]) -> ReplicaLoads {
        ReplicaLoads {
            loads: values.iter().copied().map(Seconds::new).collect(),
            replicas: values.len() as u64,
            priced_mean: Seconds::new(1.0),
            priced_slowest: Seconds::new(1.2),
            repacked: false,
            window_slowest: None,
        }
    }

    #[test]
    fn lengths_are_labelled_in_tokens_k_and_m() {
        let labels: Vec<String> =
            [512, 1024, 131_072, 1 << 24].into_iter().map(tokens_label).collect();
        assert_eq!(labels, ["512", "1K", "128K", "16M"]);
        assert_eq!(
            (seconds_text(0.0123), seconds_text(7.25)),
            ("12.3 ms".into(), "7.250 s".into())
        );
    }

    #[test]
    fn past_the_cap_the_first_replicas_and_the_slowest_are_drawn() {
        let mut values = vec![1.0; 100];
        values[90] = 2.0;
        let drawn = drawn_replicas(&loads(&values));
        assert_eq!(drawn.len(), REPLICAS_DRAWN);
        assert_eq!(drawn[REPLICAS_DRAWN - 1], (90, 2.0));
        assert_eq!(drawn[0], (0, 1.0));
        assert_eq!(drawn_replicas(&loads(&[1.0, 3.0])), [(0, 1.0), (1, 3.0)]);
    }

    #[test]
    fn a_load_that_is_not_finite_is_an_error_not_a_chart() {
        let error = replica_loads(&loads(&[1.0, f64::NAN])).unwrap_err();
        assert!(error.to_string().contains("not a finite number"), "{error}");
        assert!(replica_loads(&loads(&[1.0, 1.5])).unwrap().contains("slowest, replica 1"));
    }
}
