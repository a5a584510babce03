//! The whole run's charts: where the wall-clock time to train goes (training steps, work lost to
//! failures, checkpoints, restarts), one bar each with its share, as an ETTR waterfall; and one
//! drawn run's timeline with its failures and restarts.

use plotters::prelude::*;

use super::ReportError;
use super::charts::{BarAxis, BarRow, CAPTION, FONT, bar_rows, mesh_style, rgb, svg};
use crate::goodput::{DrawnRun, RunOutlook};

const COLORS: [u32; 4] = [0x59_a14f, 0xe1_5759, 0xed_c948, 0xb0_7aa1];

/// The waterfall: each part starts where the ones above it end, so the bars add up to the time
/// to train.
pub(super) fn waterfall(outlook: &RunOutlook) -> Result<String, ReportError> {
    let losses = &outlook.losses;
    let parts = [
        ("training steps", outlook.productive),
        ("lost work", losses.lost_work),
        ("checkpoints", losses.checkpoints),
        ("restarts", losses.restarts),
    ];
    let total = outlook.wall.as_days().max(1e-9);
    let title = format!(
        "Time to train: {:.1} days, ETTR {:.1} % (the bars add up to the wall-clock time)",
        total,
        100.0 * outlook.ettr
    );
    let mut start = 0.0;
    let rows: Vec<BarRow> = parts
        .iter()
        .zip(COLORS)
        .map(|((name, seconds), color)| {
            let length = seconds.as_days();
            let label = if length >= 1.0 {
                format!("{length:.1} days ({:.1} %)", 100.0 * length / total)
            } else {
                format!("{:.1} h ({:.2} %)", length * 24.0, 100.0 * length / total)
            };
            let row = BarRow {
                name: (*name).to_owned(),
                from: start,
                to: start + length,
                color: rgb(color),
                label,
            };
            start += length;
            row
        })
        .collect();
    let axis = BarAxis { names_width: 130, end: total * 1.25, unit: "days", half_height: 0.32 };
    bar_rows("whole-run", &title, (1000, 300), axis, &rows)
}

/// One drawn run on a line of days: training in green, each failure's lost work in orange before
/// it and its restart in purple after it, at least a pixel wide so every failure shows.
pub(super) fn run_timeline(drawn: &DrawnRun) -> Result<String, ReportError> {
    let wall = drawn.wall.as_days().max(1e-9);
    let title = format!(
        "A run drawn with seed {}: {} failures, {:.1} days to train",
        drawn.seed,
        drawn.failures.len(),
        wall
    );
    svg("run-timeline", &title, (1000, 190), |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(&title, (FONT, CAPTION))
            .margin(12)
            .margin_right(24)
            .x_label_area_size(40)
            .y_label_area_size(20)
            .build_cartesian_2d(0.0..wall, 0.0..1.0)?;
        let mut mesh = chart.configure_mesh();
        mesh_style(&mut mesh);
        mesh.disable_y_mesh().y_labels(0).x_desc("days").draw()?;
        // A pixel of the plot, roughly, in days.
        let pixel = wall / 940.0;
        chart.draw_series(std::iter::once(Rectangle::new(
            [(0.0, 0.2), (wall, 0.8)],
            rgb(COLORS[0]).filled(),
        )))?;
        chart.draw_series(drawn.failures.iter().map(|(at, lost)| {
            let at = at.as_days();
            Rectangle::new([(at - lost.as_days(), 0.2), (at, 0.8)], rgb(COLORS[1]).filled())
        }))?;
        chart.draw_series(drawn.failures.iter().map(|(at, _)| {
            let at = at.as_days();
            let end = at + drawn.restart.as_days().max(pixel);
            Rectangle::new([(at, 0.2), (end, 0.8)], rgb(COLORS[3]).filled())
        }))?;
        Ok(())
    })
}
