//! The search's scatter chart: throughput against peak memory of every candidate that was priced
//! and fits, with the Pareto front drawn and the best plan highlighted.

use std::collections::BTreeSet;

use plotters::element::DashedPathElement;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, VPos};

use super::charts::{ALERT, CAPTION, FONT, GREY, LABEL, mesh_style, rgb, svg, text};
use super::{ReportError, SearchView};
use crate::search::PricedPoint;

const SIZE: (u32, u32) = (1000, 560);
const SIMULATED: RGBColor = rgb(0x4e_79a7);
const FRONT: RGBColor = rgb(0xf2_8e2b);

fn coordinates(point: &PricedPoint) -> (f64, f64) {
    (point.peak_memory.as_gib(), point.tokens_per_sec_per_gpu)
}

/// The points of one series, one per 2-pixel cell: points hidden under another add nothing to
/// the picture but bytes. The first point of a cell, in candidate order, stands for it.
fn thinned<'a>(points: impl Iterator<Item = &'a PricedPoint>, cell: (f64, f64)) -> Vec<(f64, f64)> {
    let mut seen = BTreeSet::new();
    points
        .map(coordinates)
        .filter(|&(x, y)| seen.insert(((x / cell.0).round() as i64, (y / cell.1).round() as i64)))
        .collect()
}

/// The scatter as an SVG chart.
pub(super) fn scatter(search: &SearchView, best_label: &str) -> Result<String, ReportError> {
    let points = &search.points;
    let usable = search.usable.as_gib();
    let right = points.iter().map(|p| p.peak_memory.as_gib()).fold(usable, f64::max) * 1.08;
    let top = points.iter().map(|p| p.tokens_per_sec_per_gpu).fold(0.0, f64::max).max(1e-9) * 1.12;
    // Two pixels of the plot, roughly, in data units.
    let cell = (right / (f64::from(SIZE.0) - 120.0) * 2.0, top / (f64::from(SIZE.1) - 120.0) * 2.0);
    let simulated = thinned(points.iter().filter(|p| p.simulated), cell);
    let pruned = thinned(points.iter().filter(|p| !p.simulated), cell);
    let front: Vec<(f64, f64)> = search.front.iter().map(|&i| coordinates(&points[i])).collect();
    let best = search.best.map(|i| coordinates(&points[i]));
    let title = format!(
        "Throughput vs peak memory of the {} candidates that were priced and fit",
        points.len()
    );
    svg("scatter", &title, SIZE, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(&title, (FONT, CAPTION))
            .margin(12)
            .margin_right(24)
            .x_label_area_size(44)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..right, 0.0..top)?;
        let mut mesh = chart.configure_mesh();
        mesh_style(&mut mesh);
        mesh.x_desc("peak memory per GPU (GiB)")
            .y_desc("tokens/s per GPU")
            .x_label_formatter(&|gib| format!("{gib:.0}"))
            .y_label_formatter(&|tokens| format!("{tokens:.0}"))
            .draw()?;
        let grey = GREY.mix(0.55);
        chart
            .draw_series(pruned.iter().map(|&p| Circle::new(p, 3, grey.stroke_width(1))))?
            .label("pruned by its bound (throughput at most)")
            .legend(move |(x, y)| Circle::new((x + 6, y), 4, grey.stroke_width(1)));
        let blue = SIMULATED.mix(0.75);
        chart
            .draw_series(simulated.iter().map(|&p| Circle::new(p, 3, blue.filled())))?
            .label("simulated")
            .legend(move |(x, y)| Circle::new((x + 6, y), 4, blue.filled()));
        chart
            .draw_series(LineSeries::new(front.iter().copied(), FRONT.stroke_width(2)))?
            .label("Pareto front (less memory, more throughput)")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], FRONT.stroke_width(2)));
        chart.draw_series(front.iter().map(|&p| Circle::new(p, 4, FRONT.filled())))?;
        chart
            .draw_series(std::iter::once(DashedPathElement::new(
                vec![(usable, 0.0), (usable, top)],
                8,
                5,
                ALERT.stroke_width(2),
            )))?
            .label(format!("usable memory {usable:.1} GiB"))
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 12, y)], ALERT.stroke_width(2)));
        if let Some(best) = best {
            chart
                .draw_series(std::iter::once(Circle::new(best, 8, ALERT.stroke_width(3))))?
                .label("best plan")
                .legend(|(x, y)| Circle::new((x + 6, y), 5, ALERT.stroke_width(2)));
            // The label above the point, on the side with room for it.
            let (h, dx) = if best.0 > right * 0.55 { (HPos::Right, -12) } else { (HPos::Left, 12) };
            chart.draw_series(std::iter::once(
                EmptyElement::at(best)
                    + Text::new(
                        format!("best: {best_label}"),
                        (dx, -12),
                        text(LABEL, ALERT, h, VPos::Bottom),
                    ),
            ))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, LABEL))
            .background_style(WHITE.mix(0.9))
            .border_style(GREY.mix(0.4))
            .draw()
    })
}
